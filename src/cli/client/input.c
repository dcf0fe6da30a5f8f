/* `basal client` input framing and JSON helpers (see client.h). The reader
 * never blocks: the client's single thread also drives the HTTP transfers, so
 * a slow producer on a pipe must not stall answers already in flight. */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli/client/client.h"
#include "protocol/respjson.h"
#include "base/utf8.h"

int cl_input_open(cl_input *in, const char *source, cl_format format, size_t limit, bs_err *e) {
    memset(in, 0, sizeof *in);
    bs_buf_init(&in->buf);
    in->format = format;
    in->limit = limit;
    if (!strcmp(source, "-")) {
        in->fd = 0;
    } else {
        in->fd = open(source, O_RDONLY | O_CLOEXEC);
        if (in->fd < 0) return bs_fail(e, BS_EIO, "%s: %s", source, strerror(errno));
        in->own_fd = 1;
    }
    return 0;
}

void cl_input_close(cl_input *in) {
    if (in->own_fd && in->fd >= 0) close(in->fd);
    in->fd = -1;
    bs_buf_free(&in->buf);
}

static int stream_format(int f) { return f == CL_LINES || f == CL_JSONL; }

static int all_space(const char *s, size_t n) {
    for (size_t i = 0; i < n; i++)
        /* Rust's u8::is_ascii_whitespace (basal-rs input.rs): no \v */
        if (s[i] != ' ' && s[i] != '\t' && s[i] != '\n' && s[i] != '\r' && s[i] != '\f')
            return 0;
    return 1;
}

/* Decodes one record's bytes; 0 = a blank stream line (skipped). */
static int decode(int format, const char *s, size_t n, cl_record *rec) {
    memset(rec, 0, sizeof *rec);
    if (stream_format(format) && all_space(s, n)) return 0;
    if (format == CL_TEXT || format == CL_LINES) {
        if (format == CL_LINES && n > 0 && s[n - 1] == '\r') n--;
        size_t bad = bs_utf8_first_invalid(s, n);
        if (bad < n) {
            rec->err_msg = bs_strfmt("invalid UTF-8 at byte %zu", bad);
            return 1;
        }
        bj_value *v = calloc(1, sizeof *v);
        char *copy = malloc(n + 1);
        if (!v || !copy) {
            free(v);
            free(copy);
            rec->err_msg = bs_strfmt("out of memory");
            return 1;
        }
        memcpy(copy, s, n);
        copy[n] = 0;
        v->type = BJ_STRING;
        v->str = copy;
        v->len = n;
        rec->value = v;
        return 1;
    }
    bj_error je;
    bs_err e = {0};
    if (bj_parse_ex(s, n, NULL, &rec->value, &je, &e) != 0) {
        rec->value = NULL;
        if (je.msg)
            rec->err_msg = bs_strfmt("invalid JSON: %s: line %zu column %zu (char %zu)", je.msg, je.lineno, je.colno, je.pos);
        else
            rec->err_msg = bs_strfmt("invalid JSON: %s", e.msg);
    }
    return 1;
}

/* Drops the first n bytes of the buffer. */
static void consume(cl_input *in, size_t n) {
    memmove(in->buf.data, in->buf.data + n, in->buf.len - n);
    in->buf.len -= n;
    in->buf.data[in->buf.len] = 0;
    in->scan = 0;
}

/* Reads what is available without blocking: 1 got bytes or EOF, 0 would block, -1 error. */
static int fill(cl_input *in, bs_err *e) {
    struct pollfd p = {.fd = in->fd, .events = POLLIN};
    int r = poll(&p, 1, 0);
    if (r < 0 && errno != EINTR) return bs_fail(e, BS_EIO, "reading input: %s", strerror(errno)), -1;
    if (r <= 0) return 0;
    bs_buf_reserve(&in->buf, 65536);
    if (in->buf.oom) return bs_fail(e, BS_ENOMEM, "reading input: out of memory"), -1;
    ssize_t got = read(in->fd, in->buf.data + in->buf.len, 65536);
    if (got < 0) {
        if (errno == EINTR || errno == EAGAIN) return 0;
        return bs_fail(e, BS_EIO, "reading input: %s", strerror(errno)), -1;
    }
    if (got == 0) {
        in->eof = 1;
        return 1;
    }
    in->buf.len += (size_t)got;
    in->buf.data[in->buf.len] = 0;
    in->bytes_read += (uint64_t)got;
    return 1;
}

static int too_long(cl_input *in, cl_record *rec) {
    memset(rec, 0, sizeof *rec);
    rec->err_msg = bs_strfmt("record exceeds %zu bytes", in->limit);
    return 1;
}

int cl_input_next(cl_input *in, cl_record *rec, bs_err *e) {
    for (;;) {
        if (stream_format(in->format)) {
            char *nl = in->buf.len > in->scan ? memchr(in->buf.data + in->scan, '\n', in->buf.len - in->scan) : NULL;
            if (nl) {
                size_t n = (size_t)(nl - in->buf.data);
                if (in->oversized || n > in->limit) {
                    in->oversized = 0;
                    consume(in, n + 1);
                    return too_long(in, rec);
                }
                int got = decode(in->format, in->buf.data, n, rec);
                consume(in, n + 1);
                if (got) return 1;
                continue;
            }
            in->scan = in->buf.len;
            if (in->buf.len > in->limit) {
                /* keep memory bounded: remember the record is too long, drop its bytes */
                in->oversized = 1;
                in->buf.len = 0;
                in->scan = 0;
            }
            if (in->eof) {
                if (in->oversized) {
                    in->oversized = 0;
                    return too_long(in, rec);
                }
                if (in->buf.len == 0) return -1;
                int got = decode(in->format, in->buf.data, in->buf.len, rec);
                consume(in, in->buf.len);
                if (got) return 1;
                return -1;
            }
        } else {
            if (in->buf.len > in->limit) {
                in->oversized = 1;
                in->buf.len = 0;
            }
            if (in->eof) {
                if (in->format < 0) return -1; /* the one record was delivered */
                int fmt = in->format;
                in->format = -1;
                if (in->oversized) return too_long(in, rec);
                decode(fmt, in->buf.data, in->buf.len, rec);
                return 1;
            }
        }
        int r = fill(in, e);
        if (r < 0) return -2;
        if (r == 0) return 0;
    }
}

long long cl_count_records(const char *source, cl_format format) {
    if (!stream_format(format)) return 1;
    if (!strcmp(source, "-")) {
        struct stat st;
        if (fstat(0, &st) != 0 || !S_ISREG(st.st_mode)) return -1;
        source = "/dev/stdin";
    }
    FILE *f = fopen(source, "rb");
    if (!f) return -1;
    long long n = 0;
    int blank = 1, c;
    while ((c = getc(f)) != EOF) {
        if (c == '\n') {
            n += !blank;
            blank = 1;
        } else if (!(c == ' ' || c == '\t' || c == '\r' || c == '\f')) {
            blank = 0;
        }
    }
    n += !blank;
    fclose(f);
    return n;
}

int cl_pointer_valid(const char *p) {
    if (*p && *p != '/') return 0;
    for (; *p; p++)
        if (*p == '~' && p[1] != '0' && p[1] != '1') return 0;
    return 1;
}

const bj_value *cl_pointer_get(const bj_value *v, const char *p) {
    while (v && *p == '/') {
        p++;
        size_t n = strcspn(p, "/");
        /* unescape the token: ~1 is '/', ~0 is '~' */
        char *tok = malloc(n + 1);
        if (!tok) return NULL;
        size_t k = 0;
        for (size_t i = 0; i < n; i++) {
            if (p[i] == '~' && i + 1 < n) {
                tok[k++] = p[i + 1] == '1' ? '/' : '~';
                i++;
            } else {
                tok[k++] = p[i];
            }
        }
        tok[k] = 0;
        const bj_value *next = NULL;
        if (v->type == BJ_OBJECT) {
            /* the last duplicate wins, as the parser keeps it */
            for (size_t i = 0; i < v->n; i++)
                if (v->key_lens[i] == k && !memcmp(v->keys[i], tok, k)) next = v->items[i];
        } else if (v->type == BJ_ARRAY && k > 0 && k < 19 && (k == 1 || tok[0] != '0')) {
            int digits = 1;
            for (size_t i = 0; i < k; i++) digits &= tok[i] >= '0' && tok[i] <= '9';
            if (digits) {
                unsigned long long idx = strtoull(tok, NULL, 10);
                if (idx < v->n) next = v->items[idx];
            }
        }
        free(tok);
        v = next;
        p += n;
    }
    return v;
}

const char *cl_model_name(const char *name) {
    static const struct { const char *shortname, *repo, *served; } known[] = {
        {"mini", "Remek/basal-1.5-mini", "basal-1.5-mini"},
        {"4.5B", "Remek/basal-1.5-4.5B", "basal-1.5-4.5B"},
        {"max", "Remek/basal-1.5-max", "basal-1.5-max"},
    };
    for (size_t i = 0; i < sizeof known / sizeof *known; i++)
        if (!strcasecmp(name, known[i].shortname) || !strcasecmp(name, known[i].repo)) return known[i].served;
    return name;
}
