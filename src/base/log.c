#include "base/log.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "base/utf8.h"
#include "base/util.h"

/* -1: not decided yet (BASAL_LOG_FORMAT is read at the first line) */
static atomic_int g_format = -1;
static atomic_int g_min_level = -1;

int bs_log_format_parse(const char *s, bs_log_format *out) {
    if (!s) return -1;
    if (!strcmp(s, "text")) *out = BS_LOG_TEXT;
    else if (!strcmp(s, "json")) *out = BS_LOG_JSON;
    else return -1;
    return 0;
}

int bs_log_format_from_env(bs_log_format *out) {
    const char *v = getenv("BASAL_LOG_FORMAT");
    if (!v || !*v) return 0;
    return bs_log_format_parse(v, out) < 0 ? -1 : 1;
}

void bs_log_set_format(bs_log_format f) { atomic_store(&g_format, (int)f); }

bs_log_format bs_log_get_format(void) {
    int f = atomic_load(&g_format);
    if (f < 0) {
        bs_log_format env = BS_LOG_TEXT;
        if (bs_log_format_from_env(&env) != 1) env = BS_LOG_TEXT; /* an invalid value: serve refuses it */
        int expect = -1;
        atomic_compare_exchange_strong(&g_format, &expect, (int)env);
        f = atomic_load(&g_format);
    }
    return (bs_log_format)f;
}

static int min_level(void) {
    int l = atomic_load(&g_min_level);
    if (l < 0) {
        const char *v = getenv("BASAL_LOG_LEVEL");
        l = BS_LOG_INFO;
        if (v && !strcmp(v, "debug")) l = BS_LOG_DEBUG;
        else if (v && (!strcmp(v, "warn") || !strcmp(v, "warning"))) l = BS_LOG_WARN;
        else if (v && !strcmp(v, "error")) l = BS_LOG_ERROR;
        atomic_store(&g_min_level, l);
    }
    return l;
}

/* ---- sinks ---- */

struct bs_log_sink {
    pthread_mutex_t mu; /* guards fd against a concurrent reopen */
    int fd;
    char *path;         /* NULL: stderr */
};

static int open_append(const char *path, bs_err *e) {
    int fd = open(path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0644);
    if (fd < 0) return bs_fail(e, BS_EIO, "cannot open the access log %s: %s", path, strerror(errno));
    return fd;
}

int bs_log_sink_open(bs_log_sink **out, const char *path, bs_err *e) {
    *out = NULL;
    bs_log_sink *s = calloc(1, sizeof *s);
    if (!s) return bs_fail(e, BS_ENOMEM, "out of memory");
    s->fd = 2;
    if (path && *path && strcmp(path, "-")) {
        if (!(s->path = strdup(path))) {
            free(s);
            return bs_fail(e, BS_ENOMEM, "out of memory");
        }
        int fd = open_append(path, e);
        if (fd < 0) {
            free(s->path);
            free(s);
            return fd;
        }
        s->fd = fd;
    }
    pthread_mutex_init(&s->mu, NULL);
    *out = s;
    return BS_OK;
}

int bs_log_sink_reopen(bs_log_sink *s, bs_err *e) {
    if (!s || !s->path) return BS_OK;
    int fd = open_append(s->path, e);
    if (fd < 0) return fd; /* keep writing to the old file */
    pthread_mutex_lock(&s->mu);
    int old = s->fd;
    s->fd = fd;
    pthread_mutex_unlock(&s->mu);
    close(old);
    return BS_OK;
}

int bs_log_sink_is_file(const bs_log_sink *s) { return s && s->path; }

void bs_log_sink_close(bs_log_sink *s) {
    if (!s) return;
    if (s->path) close(s->fd);
    free(s->path);
    pthread_mutex_destroy(&s->mu);
    free(s);
}

static void write_all(int fd, const char *p, size_t n) {
    while (n) {
        ssize_t w = write(fd, p, n);
        if (w < 0 && errno == EINTR) continue;
        if (w <= 0) return; /* nowhere to report a failing log */
        p += w;
        n -= (size_t)w;
    }
}

/* The line a progress bar keeps redrawing on the terminal: a line for
 * stderr goes between a call with 0 (the bar is erased) and one with 1 (it
 * is drawn again below), so that it never runs into the bar. */
static pthread_mutex_t g_guard_mu = PTHREAD_MUTEX_INITIALIZER;
static bs_log_stderr_guard g_guard;
static void *g_guard_ud;

void bs_log_set_stderr_guard(bs_log_stderr_guard fn, void *ud) {
    pthread_mutex_lock(&g_guard_mu); /* waits for a line being written around the old one */
    if (fn || g_guard_ud == ud) {
        g_guard = fn;
        g_guard_ud = fn ? ud : NULL;
    }
    pthread_mutex_unlock(&g_guard_mu);
}

static void write_stderr(const char *p, size_t n) {
    pthread_mutex_lock(&g_guard_mu);
    if (g_guard) g_guard(g_guard_ud, 0);
    write_all(2, p, n);
    if (g_guard) g_guard(g_guard_ud, 1);
    pthread_mutex_unlock(&g_guard_mu);
}

static void sink_write(bs_log_sink *s, const bs_buf *b) {
    if (b->oom || !b->len) return;
    if (!s || (!s->path && s->fd == 2)) {
        write_stderr(b->data, b->len);
        return;
    }
    pthread_mutex_lock(&s->mu);
    write_all(s->fd, b->data, b->len);
    pthread_mutex_unlock(&s->mu);
}

/* ---- formatting ---- */

static void put_time(bs_buf *b) {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    struct tm tm;
    gmtime_r(&ts.tv_sec, &tm);
    char t[32];
    strftime(t, sizeof t, "%Y-%m-%dT%H:%M:%S", &tm);
    bs_buf_printf(b, "%s.%03ldZ", t, ts.tv_nsec / 1000000);
}

static const char *const level_text[] = { "DEBUG", "INFO ", "WARN ", "ERROR" };
static const char *const level_json[] = { "debug", "info", "warn", "error" };

/* A JSON string: control characters escaped, invalid UTF-8 bytes as U+FFFD,
 * so that every line parses whatever bytes a client sent. */
static void put_json_str(bs_buf *b, const char *s) {
    size_t n = strlen(s), i = 0;
    bs_buf_putc(b, '"');
    while (i < n) {
        unsigned char c = (unsigned char)s[i];
        if (c >= 0x80) {
            /* a run of non-ASCII bytes: its valid prefix raw, then U+FFFD for a bad byte */
            size_t run = 0;
            while (i + run < n && (unsigned char)s[i + run] >= 0x80) run++;
            size_t ok = bs_utf8_first_invalid(s + i, run);
            bs_buf_put(b, s + i, ok);
            i += ok;
            if (ok < run) {
                bs_buf_puts(b, "\\ufffd");
                i++;
            }
            continue;
        }
        if (c == '"') bs_buf_puts(b, "\\\"");
        else if (c == '\\') bs_buf_puts(b, "\\\\");
        else if (c == '\n') bs_buf_puts(b, "\\n");
        else if (c == '\r') bs_buf_puts(b, "\\r");
        else if (c == '\t') bs_buf_puts(b, "\\t");
        else if (c < 0x20 || c == 0x7f) bs_buf_printf(b, "\\u%04x", c);
        else bs_buf_putc(b, (char)c);
        i++;
    }
    bs_buf_putc(b, '"');
}

/* Text form: one line whatever the message holds (control bytes as \n, \xNN). */
static void put_text(bs_buf *b, const char *s) {
    for (; *s; s++) {
        unsigned char c = (unsigned char)*s;
        if (c == '\n') bs_buf_puts(b, "\\n");
        else if (c == '\r') bs_buf_puts(b, "\\r");
        else if (c == '\t') bs_buf_puts(b, "\\t");
        else if (c < 0x20 || c == 0x7f) bs_buf_printf(b, "\\x%02x", c);
        else bs_buf_putc(b, (char)c);
    }
}

/* A text field value: quoted when empty or when it holds a space, quote, = or backslash. */
static void put_text_value(bs_buf *b, const char *s) {
    int quote = !*s;
    for (const char *p = s; *p && !quote; p++) quote = *p == ' ' || *p == '"' || *p == '=' || *p == '\\';
    if (!quote) {
        put_text(b, s);
        return;
    }
    bs_buf_putc(b, '"');
    for (; *s; s++) {
        if (*s == '"' || *s == '\\') bs_buf_putc(b, '\\');
        char one[2] = { *s, 0 };
        put_text(b, one);
    }
    bs_buf_putc(b, '"');
}

static void format_line(bs_buf *b, bs_log_level lv, const char *component, const char *msg, const bs_log_field *f,
                        size_t n) {
    if (bs_log_get_format() == BS_LOG_JSON) {
        bs_buf_puts(b, "{\"ts\":\"");
        put_time(b);
        bs_buf_printf(b, "\",\"level\":\"%s\",\"component\":", level_json[lv]);
        put_json_str(b, component);
        bs_buf_puts(b, ",\"msg\":");
        put_json_str(b, msg);
        for (size_t i = 0; i < n; i++) {
            bs_buf_putc(b, ',');
            put_json_str(b, f[i].key);
            bs_buf_putc(b, ':');
            if (f[i].kind == BS_LF_INT) bs_buf_printf(b, "%lld", f[i].i);
            else if (f[i].kind == BS_LF_MS) {
                if (f[i].ms < 0) bs_buf_puts(b, "null");
                else bs_buf_printf(b, "%.3f", f[i].ms);
            } else if (f[i].s) put_json_str(b, f[i].s);
            else bs_buf_puts(b, "null");
        }
        bs_buf_puts(b, "}\n");
        return;
    }
    put_time(b);
    bs_buf_printf(b, " %s ", level_text[lv]);
    put_text(b, component);
    bs_buf_puts(b, ": ");
    put_text(b, msg);
    for (size_t i = 0; i < n; i++) {
        if (f[i].json_only) continue;
        bs_buf_putc(b, ' ');
        put_text(b, f[i].key);
        bs_buf_putc(b, '=');
        if (f[i].kind == BS_LF_INT) bs_buf_printf(b, "%lld", f[i].i);
        else if (f[i].kind == BS_LF_MS) {
            if (f[i].ms < 0) bs_buf_putc(b, '-');
            else bs_buf_printf(b, "%.3f", f[i].ms);
        } else if (f[i].s) put_text_value(b, f[i].s);
        else bs_buf_putc(b, '-');
    }
    bs_buf_putc(b, '\n');
}

void bs_log_fields(bs_log_sink *sink, bs_log_level lv, const char *component, const char *msg,
                   const bs_log_field *f, size_t n) {
    if ((int)lv < min_level()) return;
    bs_buf b;
    bs_buf_init(&b);
    format_line(&b, lv, component ? component : "basal", msg ? msg : "", f, n);
    sink_write(sink, &b);
    bs_buf_free(&b);
}

void bs_log(bs_log_level lv, const char *component, const char *fmt, ...) {
    if ((int)lv < min_level()) return;
    char small[512], *msg = small;
    va_list ap;
    va_start(ap, fmt);
    int len = vsnprintf(small, sizeof small, fmt, ap);
    va_end(ap);
    if (len < 0) return;
    if ((size_t)len >= sizeof small) {
        if (!(msg = malloc((size_t)len + 1))) {
            msg = small; /* truncated rather than lost */
        } else {
            va_start(ap, fmt);
            vsnprintf(msg, (size_t)len + 1, fmt, ap);
            va_end(ap);
        }
    }
    bs_log_fields(NULL, lv, component, msg, NULL, 0);
    if (msg != small) free(msg);
}
