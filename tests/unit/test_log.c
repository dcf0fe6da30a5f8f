/* base/log.c: the line layout of both forms (timestamp, level, component,
 * message, fields), the escaping that keeps a line one line and valid JSON
 * whatever bytes it carries (expected strings written by hand from RFC 8259:
 * control characters as \uXXXX or the short escapes, an invalid UTF-8 byte as
 * U+FFFD), and reopening a rotated file. The JSON lines are also parsed by
 * CPython's json in tests/e2e/t_serve_startup.sh. */
#include <ctype.h>
#include <unistd.h>

#include "check.h"
#include "base/log.h"
#include "base/util.h"

static char dir[] = "/tmp/basal-test-log-XXXXXX";

static char *slurp(const char *path) {
    char *t = NULL;
    size_t n = 0;
    bs_err e = { 0 };
    if (bs_read_file(path, &t, &n, &e) < 0) return NULL;
    return t;
}

/* "2026-12-01T12:41:55.123Z" at p */
static int is_ts(const char *p) {
    const char *shape = "dddd-dd-ddTdd:dd:dd.dddZ";
    for (size_t i = 0; shape[i]; i++) {
        if (shape[i] == 'd' ? !isdigit((unsigned char)p[i]) : p[i] != shape[i]) return 0;
    }
    return 1;
}

static void test_text(void) {
    char *path = bs_path_join(dir, "text.log");
    bs_log_sink *s = NULL;
    bs_err e = { 0 };
    CHECK_INT(bs_log_sink_open(&s, path, &e), 0);
    CHECK(bs_log_sink_is_file(s));
    bs_log_set_format(BS_LOG_TEXT);
    bs_log_field f[] = {
        { "id", BS_LF_STR, "abc", 0, 0, 0 },
        { "path", BS_LF_STR, "/a b", 0, 0, 0 },
        { "quote", BS_LF_STR, "x\"y", 0, 0, 0 },
        { "none", BS_LF_STR, NULL, 0, 0, 0 },
        { "n", BS_LF_INT, NULL, -42, 0, 0 },
        { "ms", BS_LF_MS, NULL, 0, 1.25, 0 },
        { "unknown_ms", BS_LF_MS, NULL, 0, -1, 0 },
        { "hidden", BS_LF_STR, "json only", 0, 0, 1 },
    };
    bs_log_fields(s, BS_LOG_WARN, "access", "two\nlines\x01", f, sizeof f / sizeof *f);
    bs_log_sink_close(s);
    char *t = slurp(path);
    CHECK(t && is_ts(t));
    if (t && strlen(t) > 24)
        CHECK_STR(t + 24, " WARN  access: two\\nlines\\x01 id=abc path=\"/a b\" quote=\"x\\\"y\" none=- n=-42 ms=1.250 "
                          "unknown_ms=-\n");
    free(t);
    free(path);
}

static void test_json(void) {
    char *path = bs_path_join(dir, "json.log");
    bs_log_sink *s = NULL;
    bs_err e = { 0 };
    CHECK_INT(bs_log_sink_open(&s, path, &e), 0);
    bs_log_set_format(BS_LOG_JSON);
    bs_log_field f[] = {
        { "path", BS_LF_STR, "/v1/\xc3\xa9\xff\n\"\\\x7f", 0, 0, 0 },
        { "none", BS_LF_STR, NULL, 0, 0, 0 },
        { "n", BS_LF_INT, NULL, 7, 0, 0 },
        { "ms", BS_LF_MS, NULL, 0, 0.5, 0 },
        { "unknown_ms", BS_LF_MS, NULL, 0, -1, 0 },
        { "shown", BS_LF_STR, "also in json", 0, 0, 1 },
    };
    bs_log_fields(s, BS_LOG_ERROR, "serve", "tab\there \xe2\x82", f, sizeof f / sizeof *f);
    bs_log_sink_close(s);
    char *t = slurp(path);
    CHECK(t && !strncmp(t, "{\"ts\":\"", 7) && is_ts(t + 7));
    if (t && strlen(t) > 31)
        CHECK_STR(t + 31, "\",\"level\":\"error\",\"component\":\"serve\",\"msg\":\"tab\\there \\ufffd\\ufffd\","
                          "\"path\":\"/v1/\xc3\xa9\\ufffd\\n\\\"\\\\\\u007f\",\"none\":null,\"n\":7,\"ms\":0.500,"
                          "\"unknown_ms\":null,\"shown\":\"also in json\"}\n");
    free(t);
    free(path);
    bs_log_set_format(BS_LOG_TEXT);
}

/* logrotate: the file is renamed away, reopen starts a new one; nothing lost */
static void test_reopen(void) {
    char *path = bs_path_join(dir, "access.log"), *old = bs_path_join(dir, "access.log.1");
    bs_log_sink *s = NULL;
    bs_err e = { 0 };
    CHECK_INT(bs_log_sink_open(&s, path, &e), 0);
    bs_log_fields(s, BS_LOG_INFO, "access", "first", NULL, 0);
    CHECK_INT(rename(path, old), 0);
    bs_log_fields(s, BS_LOG_INFO, "access", "second", NULL, 0); /* still the old file */
    CHECK_INT(bs_log_sink_reopen(s, &e), 0);
    bs_log_fields(s, BS_LOG_INFO, "access", "third", NULL, 0);
    bs_log_sink_close(s);
    char *a = slurp(old), *b = slurp(path);
    CHECK(a && strstr(a, "access: first\n") && strstr(a, "access: second\n") && !strstr(a, "third"));
    CHECK(b && strstr(b, "access: third\n") && !strstr(b, "first"));
    free(a);
    free(b);
    /* a directory that does not exist: an error, no sink */
    char *bad = bs_path_join(dir, "nope/x.log");
    s = (bs_log_sink *)1;
    CHECK(bs_log_sink_open(&s, bad, &e) < 0);
    CHECK(s == NULL);
    CHECK_CONTAINS(e.msg, "cannot open the access log");
    /* stderr: nothing to reopen */
    CHECK_INT(bs_log_sink_open(&s, NULL, &e), 0);
    CHECK(!bs_log_sink_is_file(s));
    CHECK_INT(bs_log_sink_reopen(s, &e), 0);
    bs_log_sink_close(s);
    unlink(path);
    unlink(old);
    free(bad);
    free(path);
    free(old);
}

static void test_formats(void) {
    bs_log_format f;
    CHECK_INT(bs_log_format_parse("text", &f), 0);
    CHECK_INT(f, BS_LOG_TEXT);
    CHECK_INT(bs_log_format_parse("json", &f), 0);
    CHECK_INT(f, BS_LOG_JSON);
    CHECK(bs_log_format_parse("JSON", &f) < 0);
    CHECK(bs_log_format_parse("", &f) < 0);
    setenv("BASAL_LOG_FORMAT", "json", 1);
    CHECK_INT(bs_log_format_from_env(&f), 1);
    CHECK_INT(f, BS_LOG_JSON);
    setenv("BASAL_LOG_FORMAT", "xml", 1);
    CHECK_INT(bs_log_format_from_env(&f), -1);
    unsetenv("BASAL_LOG_FORMAT");
    CHECK_INT(bs_log_format_from_env(&f), 0);
}

int main(void) {
    if (!mkdtemp(dir)) {
        perror("mkdtemp");
        return 1;
    }
    test_formats();
    test_text();
    test_json();
    test_reopen();
    char *p = bs_path_join(dir, "text.log");
    unlink(p);
    free(p);
    p = bs_path_join(dir, "json.log");
    unlink(p);
    free(p);
    rmdir(dir);
    return check_report("test_log");
}
