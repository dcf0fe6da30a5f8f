/* Prompt JSON writer (spec 01 §3) against CPython's json module: committed
 * goldens computed by tools/pyjson-goldens.py, the spec's test vectors, and
 * parse errors with CPython's messages and positions (spec 02 §3).
 *
 * `test_pyjson --stdin` is the driver of tests/e2e/t_pyjson_oracle.sh: it reads
 * records "<len>\n<bytes>\n" and answers each with "<len>\n<text()>\n" or
 * "E\t<message>\t<char pos>\n". */
#include <jansson.h>
#include <stdint.h>

#include "check.h"
#include "protocol/pyjson.h"

#define INPUTS "tests/data/pyjson-inputs.json"
#define GOLDENS "tests/data/pyjson-goldens.json"
#define GOLDENS_SORTED "tests/data/pyjson-goldens-sorted.json"

/* text() of a JSON text, or "ERR" if it does not parse. Caller frees. */
static char *text_of(const char *s, size_t n, size_t *outlen) {
    bj_value *v = NULL;
    bs_err e = { 0 };
    if (bj_parse(s, n, NULL, &v, &e) != 0) {
        if (outlen) *outlen = 3;
        return strdup("ERR");
    }
    bs_buf b;
    bs_buf_init(&b);
    bj_pytext(v, &b);
    bj_free(v);
    bs_buf_reserve(&b, 0);
    if (outlen) *outlen = b.len;
    return b.data;
}

static void check_text(const char *in, const char *want) {
    char *got = text_of(in, strlen(in), NULL);
    CHECK_STR(got, want);
    free(got);
}

/* Reads the goldens with jansson, a parser independent of the one tested. */
static void test_goldens(void) {
    json_error_t je;
    json_t *ins = json_load_file(INPUTS, JSON_ALLOW_NUL, &je);
    json_t *outs = json_load_file(GOLDENS, JSON_ALLOW_NUL, &je);
    CHECK(ins && json_is_array(ins));
    CHECK(outs && json_is_array(outs));
    if (!ins || !outs) {
        fprintf(stderr, "cannot read goldens: %s\n", je.text);
        json_decref(ins);
        json_decref(outs);
        return;
    }
    size_t n = json_array_size(ins), same = 0, shown = 0;
    CHECK_INT(json_array_size(outs), n);
    CHECK(n >= 1000);
    for (size_t i = 0; i < n && i < json_array_size(outs); i++) {
        json_t *a = json_array_get(ins, i), *b = json_array_get(outs, i);
        size_t glen;
        char *got = text_of(json_string_value(a), json_string_length(a), &glen);
        if (glen == json_string_length(b) && memcmp(got, json_string_value(b), glen) == 0) {
            same++;
        } else if (shown++ < 10) {
            fprintf(stderr, "golden %zu differs:\n  input:    %.200s\n  got:      %.200s\n  expected: %.200s\n",
                    i, json_string_value(a), got, json_string_value(b));
        }
        free(got);
    }
    printf("goldens: %zu/%zu byte-identical to CPython\n", same, n);
    CHECK_INT(same, n);
    json_decref(ins);
    json_decref(outs);
}

/* Spec 01 §3.3 (CPython 3.11 output). */
static void test_spec_vectors(void) {
    check_text("{\"amount\": 129.99, \"vip\": true, \"notes\": null}",
               "{\"amount\": 129.99, \"vip\": true, \"notes\": null}");
    check_text("[1, 2.5, -3e-7, 1E5, 1.0e+2, 0.1]", "[1, 2.5, -3e-07, 100000.0, 100.0, 0.1]");
    check_text("[1e16, 1e15, 0.0001, 0.00001, 2.5e-5, 5e-324]",
               "[1e+16, 1000000000000000.0, 0.0001, 1e-05, 2.5e-05, 5e-324]");
    check_text("[-0, -0.0, 0.0, 100, 1e400, -1e400]", "[0, -0.0, 0.0, 100, Infinity, -Infinity]");
    check_text("[123456789012345678901234567890, 9007199254740993, 3.14159265358979323846, 1.7976931348623157e308]",
               "[123456789012345678901234567890, 9007199254740993, 3.141592653589793, 1.7976931348623157e+308]");
    check_text("[0.5, 1.5e300, 4.35, 100.0, 1e22, 12345678.9]", "[0.5, 1.5e+300, 4.35, 100.0, 1e+22, 12345678.9]");
    check_text("[\"\\b\\f\\n\\r\\t\", \"\\\"q\\\" \\\\ /\"]", "[\"\\b\\f\\n\\r\\t\", \"\\\"q\\\" \\\\ /\"]");
    check_text("[\"\\u0000\\u001f\\u007f\\u2028\"]", "[\"\\u0000\\u001f\x7f\xe2\x80\xa8\"]");
    check_text("[\"\\ud83d\\ude00 \xc3\xa9\"]", "[\"\xf0\x9f\x98\x80 \xc3\xa9\"]");
    check_text("{\"a\": 1, \"b\": 2, \"a\": 3}", "{\"a\": 3, \"b\": 2}");
    check_text("{\"x\": {}, \"y\": [], \"z\": [[]], \"k\\n\": \"v\"}", "{\"x\": {}, \"y\": [], \"z\": [[]], \"k\\n\": \"v\"}");
    /* spec 07 §3 */
    check_text("{\"amount\": 129.99, \"vip\": true, \"nested\": {\"a\": [1, 2.5, -3e-7]}}",
               "{\"amount\": 129.99, \"vip\": true, \"nested\": {\"a\": [1, 2.5, -3e-07]}}");
    /* text() of a string is its raw bytes, NUL included */
    size_t n;
    char *t = text_of("\"a\\u0000\\n\"", 11, &n);
    CHECK_INT(n, 3);
    CHECK(memcmp(t, "a\0\n", 3) == 0);
    free(t);
}

typedef struct bad_case {
    const char *text;
    size_t len; /* 0: strlen */
    const char *msg;
    size_t pos, line, col;
} bad_case;

/* Messages and positions: CPython 3.11's json.loads for the texts it rejects
 * too; spec 02 §3 for those only this project rejects (NaN/Infinity, lone
 * surrogates, invalid UTF-8, depth). */
static void test_errors(void) {
    static const bad_case cases[] = {
        { "", 0, "Expecting value", 0, 1, 1 },
        { " ", 0, "Expecting value", 1, 1, 2 },
        { "not json", 0, "Expecting value", 0, 1, 1 },
        { "tru", 0, "Expecting value", 0, 1, 1 },
        { "-", 0, "Expecting value", 0, 1, 1 },
        { "[1,]", 0, "Expecting value", 3, 1, 4 },
        { "{\"a\":", 0, "Expecting value", 5, 1, 6 },
        { "]", 0, "Expecting value", 0, 1, 1 },
        { "[", 0, "Expecting value", 1, 1, 2 },
        { "[-]", 0, "Expecting value", 1, 1, 2 },
        { "{", 0, "Expecting property name enclosed in double quotes", 1, 1, 2 },
        { "{\"a\":1,}", 0, "Expecting property name enclosed in double quotes", 7, 1, 8 },
        { "{\"a\":1, ", 0, "Expecting property name enclosed in double quotes", 8, 1, 9 },
        { "{\"a\"", 0, "Expecting ':' delimiter", 4, 1, 5 },
        { "{\"a\" 1}", 0, "Expecting ':' delimiter", 5, 1, 6 },
        { "{\"a\":1", 0, "Expecting ',' delimiter", 6, 1, 7 },
        { "[1 2]", 0, "Expecting ',' delimiter", 3, 1, 4 },
        { "[1", 0, "Expecting ',' delimiter", 2, 1, 3 },
        { "{\"a\":1 \"b\"}", 0, "Expecting ',' delimiter", 7, 1, 8 },
        { "\"abc", 0, "Unterminated string starting at", 0, 1, 1 },
        { "[\"abc", 0, "Unterminated string starting at", 1, 1, 2 },
        { "\"abc\\", 0, "Unterminated string starting at", 0, 1, 1 },
        { "\"a\x01\"", 0, "Invalid control character at", 2, 1, 3 },
        { "\"a\nb\"", 0, "Invalid control character at", 2, 1, 3 },
        { "\"a\0b\"", 5, "Invalid control character at", 2, 1, 3 },
        { "\"\\x\"", 0, "Invalid \\escape", 1, 1, 2 },
        { "\"\xc3\xa9\\x\"", 0, "Invalid \\escape", 2, 1, 3 },
        { "\"\\u12\"", 0, "Invalid \\uXXXX escape", 2, 1, 3 },
        { "\"\\u1234", 0, "Invalid \\uXXXX escape", 2, 1, 3 },
        { "\"\\u12zz\"", 0, "Invalid \\uXXXX escape", 2, 1, 3 },
        { "\"\\ud800\\uzzzz\"", 0, "Invalid \\uXXXX escape", 8, 1, 9 },
        { "\"\\ud800\\u12\"", 0, "Invalid \\uXXXX escape", 8, 1, 9 },
        { "\"\\ud800\\udc00", 0, "Invalid \\uXXXX escape", 8, 1, 9 },
        { "{} x", 0, "Extra data", 3, 1, 4 },
        { "01", 0, "Extra data", 1, 1, 2 },
        { "1.", 0, "Extra data", 1, 1, 2 },
        { "1e", 0, "Extra data", 1, 1, 2 },
        { "-01", 0, "Extra data", 2, 1, 3 },
        { "[1] ]", 0, "Extra data", 4, 1, 5 },
        { "  \n  x", 0, "Expecting value", 5, 2, 3 },
        { "\n\n {\"a\": tru}", 0, "Expecting value", 9, 3, 8 },
        /* this project only */
        { "NaN", 0, "Expecting value", 0, 1, 1 },
        { "Infinity", 0, "Expecting value", 0, 1, 1 },
        { "-Infinity", 0, "Expecting value", 0, 1, 1 },
        { "[1, NaN]", 0, "Expecting value", 4, 1, 5 },
        { "{\"a\": -Infinity}", 0, "Expecting value", 6, 1, 7 },
        { "\"\\ud800\"", 0, "Invalid \\uXXXX escape", 2, 1, 3 },
        { "\"\\udc00\"", 0, "Invalid \\uXXXX escape", 2, 1, 3 },
        { "\"ab\\uDFFF\"", 0, "Invalid \\uXXXX escape", 4, 1, 5 },
        { "\"\\ud800\\u0041\"", 0, "Invalid \\uXXXX escape", 2, 1, 3 },
        { "\"\\ud800\\ud800\\udc00\"", 0, "Invalid \\uXXXX escape", 2, 1, 3 },
        { "\"\\ud800x\"", 0, "Invalid \\uXXXX escape", 2, 1, 3 },
        { "{\"\\ud83d\": 1}", 0, "Invalid \\uXXXX escape", 3, 1, 4 },
        { "\"\xc3\x28\"", 0, "Invalid UTF-8", 1, 1, 2 },
        { "\"\xc0\xaf\"", 0, "Invalid UTF-8", 1, 1, 2 },
        { "\"\xc1\xbf\"", 0, "Invalid UTF-8", 1, 1, 2 },
        { "\"\xe0\x80\xaf\"", 0, "Invalid UTF-8", 1, 1, 2 },
        { "\"\xf0\x80\x80\xaf\"", 0, "Invalid UTF-8", 1, 1, 2 },
        { "\"\xed\xa0\x80\"", 0, "Invalid UTF-8", 1, 1, 2 },
        { "\"\xed\xbf\xbf\"", 0, "Invalid UTF-8", 1, 1, 2 },
        { "\"\xf4\x90\x80\x80\"", 0, "Invalid UTF-8", 1, 1, 2 },
        { "\"\xf5\x80\x80\x80\"", 0, "Invalid UTF-8", 1, 1, 2 },
        { "\"\xff\"", 0, "Invalid UTF-8", 1, 1, 2 },
        { "\x80", 0, "Invalid UTF-8", 0, 1, 1 },
        { "\"\xc3\xa9\xe2\x82\"", 0, "Invalid UTF-8", 2, 1, 3 },
        { "\"\xc3\xa9\xe2\x82", 0, "Invalid UTF-8", 2, 1, 3 },
        { "x \xff", 0, "Invalid UTF-8", 2, 1, 3 }, /* decoding comes before scanning */
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        const bad_case *c = &cases[i];
        size_t len = c->len ? c->len : strlen(c->text);
        bj_value *v = (bj_value *)1;
        bj_error er;
        bs_err e = { 0 };
        int rc = bj_parse_ex(c->text, len, NULL, &v, &er, &e);
        CHECK_INT(rc, BS_EINVAL);
        CHECK(v == NULL);
        if (rc != BS_EINVAL) {
            fprintf(stderr, "  accepted: %s\n", c->text);
            bj_free(v);
            continue;
        }
        CHECK_STR(er.msg, c->msg);
        CHECK_INT(er.pos, c->pos);
        CHECK_INT(er.lineno, c->line);
        CHECK_INT(er.colno, c->col);
        CHECK_CONTAINS(e.msg, c->msg);
        if (er.pos != c->pos) fprintf(stderr, "  case %zu: %s\n", i, c->text);
        /* the plain entry point agrees */
        bs_err e2 = { 0 };
        CHECK_INT(bj_parse(c->text, len, NULL, &v, &e2), BS_EINVAL);
        CHECK_STR(e2.msg, e.msg);
    }
    /* byte offset next to the character index */
    bj_value *v;
    bj_error er;
    CHECK_INT(bj_parse_ex("\"\xc3\xa9\\x\"", 6, NULL, &v, &er, NULL), BS_EINVAL);
    CHECK_INT(er.byte_off, 3);
    CHECK_INT(er.pos, 2);
}

static char *nest(int depth, const char *open, const char *inner, const char *close) {
    bs_buf b;
    bs_buf_init(&b);
    for (int i = 0; i < depth; i++) bs_buf_puts(&b, open);
    bs_buf_puts(&b, inner);
    for (int i = 0; i < depth; i++) bs_buf_puts(&b, close);
    return b.data;
}

static void test_depth(void) {
    bj_value *v = NULL;
    bj_error er;
    char *s = nest(128, "[", "", "]");
    CHECK_INT(bj_parse(s, strlen(s), NULL, &v, NULL), 0);
    bj_free(v);
    free(s);
    s = nest(129, "[", "", "]");
    CHECK_INT(bj_parse_ex(s, strlen(s), NULL, &v, &er, NULL), BS_EINVAL);
    CHECK_STR(er.msg, "Maximum nesting depth exceeded");
    CHECK_INT(er.pos, 128);
    free(s);
    s = nest(100, "{\"k\": [", "{}", "]}"); /* 200 levels, bracket 129 is the 65th '{' */
    CHECK_INT(bj_parse_ex(s, strlen(s), NULL, &v, &er, NULL), BS_EINVAL);
    CHECK_STR(er.msg, "Maximum nesting depth exceeded");
    CHECK_INT(er.pos, 64 * 7);
    free(s);
    bj_parse_opts o = { 3 };
    CHECK_INT(bj_parse("[[[1]]]", 7, &o, &v, NULL), 0);
    bj_free(v);
    CHECK_INT(bj_parse_ex("[[[[1]]]]", 9, &o, &v, &er, NULL), BS_EINVAL);
    CHECK_INT(er.pos, 3);
    s = nest(100000, "[", "", "]"); /* deep input must fail cleanly, not overflow the stack */
    CHECK_INT(bj_parse(s, strlen(s), NULL, &v, NULL), BS_EINVAL);
    free(s);
}

static void test_big_integers(void) {
    uint64_t st = 0x9E3779B97F4A7C15ull;
    for (int t = 0; t < 50; t++) {
        char lit[320];
        int n = 0;
        if (t & 1) lit[n++] = '-';
        for (int i = 0; i < 300; i++) {
            st ^= st << 13, st ^= st >> 7, st ^= st << 17;
            lit[n++] = (char)('0' + (i == 0 ? 1 + st % 9 : st % 10));
        }
        lit[n] = 0;
        char arr[340];
        snprintf(arr, sizeof arr, "[%s]", lit);
        char want[340];
        snprintf(want, sizeof want, "[%s]", lit);
        check_text(arr, want);
        bj_value *v = NULL;
        CHECK_INT(bj_parse(lit, (size_t)n, NULL, &v, NULL), 0);
        if (v) {
            CHECK_INT(v->type, BJ_NUMBER);
            CHECK_STR(v->str, lit);
        }
        bj_free(v);
    }
    check_text("-0", "0");
    check_text("[0, -0, 10, -10]", "[0, 0, 10, -10]");
}

static void test_structure(void) {
    bj_value *v = NULL;
    const char *s = "{\"b\": 1, \"a\\u0000\": \"x\\u0000y\", \"b\": [2.50, 1e5], \"c\": null}";
    CHECK_INT(bj_parse(s, strlen(s), NULL, &v, NULL), 0);
    if (!v) return;
    CHECK_INT(v->type, BJ_OBJECT);
    CHECK_INT(v->n, 3);
    CHECK_STR(v->keys[0], "b");
    CHECK_INT(v->key_lens[1], 2);
    CHECK(memcmp(v->keys[1], "a\0", 2) == 0);
    CHECK_INT(v->items[1]->len, 3);
    const bj_value *b = bj_get(v, "b");
    CHECK(b && b->type == BJ_ARRAY && b->n == 2);
    if (b && b->n == 2) {
        CHECK_STR(b->items[0]->str, "2.50"); /* literal kept as written */
        CHECK_STR(b->items[1]->str, "1e5");
    }
    CHECK(bj_get(v, "c") && bj_get(v, "c")->type == BJ_NULL);
    CHECK(bj_get(v, "a") == NULL);
    CHECK(bj_get(v->items[2], "b") == NULL);
    bj_free(v);

    /* many keys (the hashed path): 100 keys written 10 times each keep their
     * first position and the last value */
    bs_buf in;
    bs_buf_init(&in);
    bs_buf_putc(&in, '{');
    for (int r = 0; r < 10; r++)
        for (int k = 0; k < 100; k++) bs_buf_printf(&in, "%s\"k%d\": %d", r || k ? ", " : "", (k * 37) % 100, r);
    bs_buf_putc(&in, '}');
    bs_buf want;
    bs_buf_init(&want);
    bs_buf_putc(&want, '{');
    for (int k = 0; k < 100; k++) bs_buf_printf(&want, "%s\"k%d\": 9", k ? ", " : "", (k * 37) % 100);
    bs_buf_putc(&want, '}');
    check_text(in.data, want.data);
    bs_buf_free(&in);
    bs_buf_free(&want);
}

static void check_fmt(double x, const char *want, int py) {
    bs_buf b;
    bs_buf_init(&b);
    if (py) bj_fmt_pyfloat(x, &b);
    else bs_fmt_double_shortest(x, &b);
    bs_buf_reserve(&b, 0);
    CHECK_STR(b.data, want);
    bs_buf_free(&b);
}

/* Response writer layout, spec 02 §1.2 test vectors. */
static void test_response_floats(void) {
    check_fmt(0.5, "0.5", 0);
    check_fmt(1.0, "1.0", 0);
    check_fmt(100.0, "100.0", 0);
    check_fmt(1e-4, "0.0001", 0);
    check_fmt(1e-5, "0.00001", 0);
    check_fmt(1e-6, "1e-6", 0);
    check_fmt(4.5e-5, "0.000045", 0);
    check_fmt(4.5e-6, "4.5e-6", 0);
    check_fmt(1e15, "1000000000000000.0", 0);
    check_fmt(1e16, "1e16", 0);
    check_fmt(1.5e300, "1.5e300", 0);
    check_fmt(1e-7, "1e-7", 0);
    check_fmt(0.1 + 0.2, "0.30000000000000004", 0);
    check_fmt(0.9959494503985423, "0.9959494503985423", 0);
    check_fmt(0.0, "0.0", 0);
    check_fmt(-0.0, "-0.0", 0);
    check_fmt(-2.5e-10, "-2.5e-10", 0);
    check_fmt(5e-324, "5e-324", 0);
    check_fmt(12.34, "12.34", 0);
    check_fmt(477.6, "477.6", 0);
    check_fmt(INFINITY, "null", 0);
    check_fmt(NAN, "null", 0);
    /* powers of two whose shortest digits lie above the nearest p-digit
     * decimal (CPython repr) */
    check_fmt(ldexp(1.0, -1017), "7.120236347223045e-307", 1);
    check_fmt(ldexp(1.0, -957), "8.209073602596753e-289", 1);
    check_fmt(ldexp(1.0, -1017), "7.120236347223045e-307", 0);
    check_fmt(NAN, "NaN", 1);
    check_fmt(-INFINITY, "-Infinity", 1);
}

/* ---- driver for t_pyjson_oracle.sh ---- */

static int stdin_mode(void) {
    bs_buf in;
    bs_buf_init(&in);
    char chunk[65536];
    size_t r;
    while ((r = fread(chunk, 1, sizeof chunk, stdin)) > 0) bs_buf_put(&in, chunk, r);
    bs_buf_reserve(&in, 0);
    if (in.oom) return 2;
    size_t i = 0;
    int rc = 0;
    while (i < in.len) {
        char *end;
        unsigned long long n = strtoull(in.data + i, &end, 10);
        if (*end != '\n' || (size_t)(end + 1 - in.data) + n >= in.len + 1) {
            fprintf(stderr, "bad record at byte %zu\n", i);
            rc = 2;
            break;
        }
        const char *text = end + 1;
        bj_value *v = NULL;
        bj_error er;
        if (bj_parse_ex(text, (size_t)n, NULL, &v, &er, NULL) != 0) {
            printf("E\t%s\t%zu\n", er.msg ? er.msg : "out of memory", er.pos);
        } else {
            bs_buf out;
            bs_buf_init(&out);
            bj_pytext(v, &out);
            printf("%zu\n", out.len);
            fwrite(out.data ? out.data : "", 1, out.len, stdout);
            putchar('\n');
            bs_buf_free(&out);
            bj_free(v);
        }
        i = (size_t)(text - in.data) + n + 1;
    }
    bs_buf_free(&in);
    return rc;
}

/* bj_pydumps_sorted (the decision log's request_sha256) against CPython's
 * json.dumps(v, sort_keys=True, ensure_ascii=False) of the same inputs. */
static void test_sorted_goldens(void) {
    json_error_t je;
    json_t *ins = json_load_file(INPUTS, JSON_ALLOW_NUL, &je);
    json_t *outs = json_load_file(GOLDENS_SORTED, JSON_ALLOW_NUL, &je);
    CHECK(ins && json_is_array(ins) && outs && json_is_array(outs));
    size_t n = ins ? json_array_size(ins) : 0, same = 0, shown = 0, reordered = 0;
    CHECK_INT(outs ? json_array_size(outs) : 0, n);
    for (size_t i = 0; i < n && i < json_array_size(outs); i++) {
        json_t *a = json_array_get(ins, i), *b = json_array_get(outs, i);
        bj_value *v = NULL;
        bs_err e = { 0 };
        bs_buf got, plain;
        bs_buf_init(&got);
        bs_buf_init(&plain);
        if (bj_parse(json_string_value(a), json_string_length(a), NULL, &v, &e) == 0) {
            bj_pydumps_sorted(v, &got);
            bj_pydumps(v, &plain);
        }
        if (got.len == json_string_length(b) && !memcmp(got.data, json_string_value(b), got.len)) same++;
        else if (shown++ < 10)
            fprintf(stderr, "sorted golden %zu differs:\n  input:    %.200s\n  got:      %.200s\n  expected: %.200s\n", i,
                    json_string_value(a), got.data ? got.data : "", json_string_value(b));
        reordered += plain.len != got.len || (got.len && memcmp(plain.data, got.data, got.len));
        bs_buf_free(&got);
        bs_buf_free(&plain);
        bj_free(v);
    }
    printf("sorted goldens: %zu/%zu byte-identical to CPython (%zu reordered)\n", same, n, reordered);
    CHECK_INT(same, n);
    CHECK(reordered >= 100); /* the inputs exercise the sort */
    json_decref(ins);
    json_decref(outs);
}

int main(int argc, char **argv) {
    if (argc > 1 && strcmp(argv[1], "--stdin") == 0) return stdin_mode();
    test_goldens();
    test_sorted_goldens();
    test_spec_vectors();
    test_errors();
    test_depth();
    test_big_integers();
    test_structure();
    test_response_floats();
    return check_report("test_pyjson");
}
