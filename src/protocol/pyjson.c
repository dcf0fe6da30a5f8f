/* Strict JSON parser keeping key order and number literals, and a writer
 * byte-identical to CPython's json.dumps(v, ensure_ascii=False) (spec 01 §3).
 * Error messages and positions follow CPython's C scanner (spec 02 §3), so the
 * parser walks the text in the same order CPython does: the first error
 * CPython would meet is the one reported. */
#include "protocol/pyjson.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/utf8.h"

#define BJ_DEFAULT_DEPTH 128
/* Objects up to this size are searched linearly for duplicate keys; larger
 * ones get a hash index so a body with a million keys stays linear. */
#define BJ_LINEAR_KEYS 16

typedef struct parser {
    const unsigned char *s;
    size_t len, i;
    int depth, max_depth;
    const char *msg; /* first error (static string) */
    size_t off;      /* its byte offset */
    int oom;
    bs_buf scratch;  /* decoded string being built */
} parser;

static void *fail_at(parser *p, const char *msg, size_t off) {
    if (!p->msg && !p->oom) {
        p->msg = msg;
        p->off = off;
    }
    return NULL;
}

static void *fail_oom(parser *p) {
    p->oom = 1;
    return NULL;
}

static void skip_ws(parser *p) {
    while (p->i < p->len) {
        unsigned char c = p->s[p->i];
        if (c != ' ' && c != '\t' && c != '\n' && c != '\r') break;
        p->i++;
    }
}

static void put_utf8(bs_buf *b, uint32_t cp) {
    char u[4];
    bs_buf_put(b, u, bs_utf8_put(cp, u));
}

/* The four hex digits of an escape whose 'u' is at u. CPython demands one more
 * character after the digits (the closing quote at least) before looking at
 * them, and reports every failure at the 'u'; the same length rule decides
 * whether a high surrogate is paired, so applying it here to both escapes of
 * a pair reproduces CPython's positions. */
static int hex4(parser *p, size_t u, uint32_t *out) {
    if (u + 5 >= p->len) {
        fail_at(p, "Invalid \\uXXXX escape", u);
        return 0;
    }
    uint32_t v = 0;
    for (size_t k = u + 1; k <= u + 4; k++) {
        unsigned char c = p->s[k];
        v <<= 4;
        if (c >= '0' && c <= '9') v |= (uint32_t)(c - '0');
        else if (c >= 'a' && c <= 'f') v |= (uint32_t)(c - 'a' + 10);
        else if (c >= 'A' && c <= 'F') v |= (uint32_t)(c - 'A' + 10);
        else {
            fail_at(p, "Invalid \\uXXXX escape", u);
            return 0;
        }
    }
    *out = v;
    return 1;
}

/* Decodes the string whose opening quote is at p->i into a fresh NUL-terminated
 * allocation. Returns 0 on success. */
static int parse_string(parser *p, char **out, size_t *outlen) {
    const unsigned char *s = p->s;
    size_t begin = p->i, i = begin + 1;
    bs_buf *b = &p->scratch;
    b->len = 0;
    for (;;) {
        size_t run = i;
        unsigned char c = 0;
        while (i < p->len) {
            c = s[i];
            if (c == '"' || c == '\\') break;
            if (c < 0x20) {
                fail_at(p, "Invalid control character at", i);
                return -1;
            }
            i++;
        }
        if (i >= p->len) {
            fail_at(p, "Unterminated string starting at", begin);
            return -1;
        }
        bs_buf_put(b, s + run, i - run);
        if (c == '"') {
            i++;
            break;
        }
        if (i + 1 >= p->len) {
            fail_at(p, "Unterminated string starting at", begin);
            return -1;
        }
        c = s[i + 1];
        if (c != 'u') {
            char r;
            switch (c) {
            case '"': r = '"'; break;
            case '\\': r = '\\'; break;
            case '/': r = '/'; break;
            case 'b': r = '\b'; break;
            case 'f': r = '\f'; break;
            case 'n': r = '\n'; break;
            case 'r': r = '\r'; break;
            case 't': r = '\t'; break;
            default:
                fail_at(p, "Invalid \\escape", i);
                return -1;
            }
            bs_buf_putc(b, r);
            i += 2;
            continue;
        }
        size_t u = i + 1;
        uint32_t cp;
        if (!hex4(p, u, &cp)) return -1;
        i += 6;
        if (cp >= 0xD800 && cp <= 0xDBFF) {
            /* CPython would keep a lone surrogate; basal-rs (and we) refuse it. */
            uint32_t lo;
            if (i + 1 < p->len && s[i] == '\\' && s[i + 1] == 'u') {
                if (!hex4(p, i + 1, &lo)) return -1;
                if (lo < 0xDC00 || lo > 0xDFFF) {
                    fail_at(p, "Invalid \\uXXXX escape", u);
                    return -1;
                }
                cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
                i += 6;
            } else {
                fail_at(p, "Invalid \\uXXXX escape", u);
                return -1;
            }
        } else if (cp >= 0xDC00 && cp <= 0xDFFF) {
            fail_at(p, "Invalid \\uXXXX escape", u);
            return -1;
        }
        put_utf8(b, cp);
    }
    bs_buf_reserve(b, 0); /* an empty string still needs data */
    if (b->oom) {
        fail_oom(p);
        return -1;
    }
    char *str = malloc(b->len + 1);
    if (!str) {
        fail_oom(p);
        return -1;
    }
    memcpy(str, b->data, b->len);
    str[b->len] = 0;
    *out = str;
    *outlen = b->len;
    p->i = i;
    return 0;
}

static int is_digit(unsigned char c) { return c >= '0' && c <= '9'; }

/* Number grammar of CPython's scanner: -?(0|[1-9]\d*)(\.\d+)?([eE][-+]?\d+)?,
 * each optional part taken only when complete (so "1." is the number 1
 * followed by extra data, as in CPython). */
static bj_value *parse_number(parser *p) {
    const unsigned char *s = p->s;
    size_t st = p->i, i = st;
    if (s[i] == '-') i++;
    if (i < p->len && s[i] == '0') i++;
    else if (i < p->len && s[i] >= '1' && s[i] <= '9') {
        while (i < p->len && is_digit(s[i])) i++;
    } else {
        return fail_at(p, "Expecting value", st);
    }
    if (i + 1 < p->len && s[i] == '.' && is_digit(s[i + 1])) {
        i += 2;
        while (i < p->len && is_digit(s[i])) i++;
    }
    if (i < p->len && (s[i] == 'e' || s[i] == 'E')) {
        size_t j = i + 1;
        if (j < p->len && (s[j] == '+' || s[j] == '-')) j++;
        if (j < p->len && is_digit(s[j])) {
            while (j < p->len && is_digit(s[j])) j++;
            i = j;
        }
    }
    bj_value *v = calloc(1, sizeof *v);
    char *lit = malloc(i - st + 1);
    if (!v || !lit) {
        free(v);
        free(lit);
        return fail_oom(p);
    }
    memcpy(lit, s + st, i - st);
    lit[i - st] = 0;
    v->type = BJ_NUMBER;
    v->str = lit;
    v->len = i - st;
    p->i = i;
    return v;
}

static bj_value *parse_value(parser *p);

/* Appends to an array or object under construction; capacity doubles. */
static int grow_items(bj_value *v, size_t *cap, int with_keys) {
    if (v->n < *cap) return 0;
    size_t nc = *cap ? *cap * 2 : 4;
    bj_value **it = realloc(v->items, nc * sizeof *it);
    if (!it) return -1;
    v->items = it;
    if (with_keys) {
        char **k = realloc(v->keys, nc * sizeof *k);
        if (!k) return -1;
        v->keys = k;
        size_t *kl = realloc(v->key_lens, nc * sizeof *kl);
        if (!kl) return -1;
        v->key_lens = kl;
    }
    *cap = nc;
    return 0;
}

static bj_value *parse_array(parser *p) {
    bj_value *v = calloc(1, sizeof *v);
    if (!v) return fail_oom(p);
    v->type = BJ_ARRAY;
    size_t cap = 0;
    p->i++;
    skip_ws(p);
    if (p->i < p->len && p->s[p->i] == ']') {
        p->i++;
        return v;
    }
    for (;;) {
        bj_value *item = parse_value(p);
        if (!item) goto fail;
        if (grow_items(v, &cap, 0) < 0) {
            bj_free(item);
            fail_oom(p);
            goto fail;
        }
        v->items[v->n++] = item;
        skip_ws(p);
        if (p->i < p->len && p->s[p->i] == ']') {
            p->i++;
            return v;
        }
        if (p->i >= p->len || p->s[p->i] != ',') {
            fail_at(p, "Expecting ',' delimiter", p->i);
            goto fail;
        }
        p->i++;
        skip_ws(p);
    }
fail:
    bj_free(v);
    return NULL;
}

static uint64_t key_hash(const char *k, size_t n) {
    uint64_t h = 1469598103934665603ull; /* FNV-1a */
    for (size_t i = 0; i < n; i++) {
        h ^= (unsigned char)k[i];
        h *= 1099511628211ull;
    }
    return h;
}

/* Hash index over an object's keys: slots hold item index + 1, 0 = empty. */
typedef struct key_index {
    size_t *slot;
    size_t cap; /* power of two, at least twice the key count */
} key_index;

static int index_insert(key_index *ix, const bj_value *v, size_t item) {
    size_t m = ix->cap - 1, h = (size_t)key_hash(v->keys[item], v->key_lens[item]) & m;
    while (ix->slot[h]) h = (h + 1) & m;
    ix->slot[h] = item + 1;
    return 0;
}

static int index_rebuild(key_index *ix, const bj_value *v, size_t want) {
    size_t cap = 64;
    while (cap < want * 2) cap *= 2;
    size_t *slot = calloc(cap, sizeof *slot);
    if (!slot) return -1;
    free(ix->slot);
    ix->slot = slot;
    ix->cap = cap;
    for (size_t i = 0; i < v->n; i++) index_insert(ix, v, i);
    return 0;
}

/* Index of the existing key equal to (k, n), or v->n if none. */
static size_t find_key(const key_index *ix, const bj_value *v, const char *k, size_t n) {
    if (!ix->slot) {
        for (size_t i = 0; i < v->n; i++)
            if (v->key_lens[i] == n && memcmp(v->keys[i], k, n) == 0) return i;
        return v->n;
    }
    size_t m = ix->cap - 1, h = (size_t)key_hash(k, n) & m;
    while (ix->slot[h]) {
        size_t i = ix->slot[h] - 1;
        if (v->key_lens[i] == n && memcmp(v->keys[i], k, n) == 0) return i;
        h = (h + 1) & m;
    }
    return v->n;
}

static bj_value *parse_object(parser *p) {
    bj_value *v = calloc(1, sizeof *v);
    if (!v) return fail_oom(p);
    v->type = BJ_OBJECT;
    key_index ix = { NULL, 0 };
    size_t cap = 0;
    char *key = NULL;
    p->i++;
    skip_ws(p);
    if (p->i < p->len && p->s[p->i] == '}') {
        p->i++;
        return v;
    }
    for (;;) {
        if (p->i >= p->len || p->s[p->i] != '"') {
            fail_at(p, "Expecting property name enclosed in double quotes", p->i);
            goto fail;
        }
        size_t klen;
        if (parse_string(p, &key, &klen) < 0) goto fail;
        skip_ws(p);
        if (p->i >= p->len || p->s[p->i] != ':') {
            fail_at(p, "Expecting ':' delimiter", p->i);
            goto fail;
        }
        p->i++;
        skip_ws(p);
        bj_value *val = parse_value(p);
        if (!val) goto fail;
        /* Python dict semantics: a repeated key keeps its first slot and
         * takes the latest value. */
        size_t at = find_key(&ix, v, key, klen);
        if (at < v->n) {
            bj_free(v->items[at]);
            v->items[at] = val;
            free(key);
            key = NULL;
        } else {
            if (grow_items(v, &cap, 1) < 0) {
                bj_free(val);
                fail_oom(p);
                goto fail;
            }
            v->keys[v->n] = key;
            v->key_lens[v->n] = klen;
            v->items[v->n] = val;
            key = NULL;
            v->n++;
            if (v->n > BJ_LINEAR_KEYS) {
                int rc = 0;
                if (!ix.slot || v->n * 2 > ix.cap) rc = index_rebuild(&ix, v, v->n);
                else index_insert(&ix, v, v->n - 1);
                if (rc < 0) {
                    fail_oom(p);
                    goto fail;
                }
            }
        }
        skip_ws(p);
        if (p->i < p->len && p->s[p->i] == '}') {
            p->i++;
            break;
        }
        if (p->i >= p->len || p->s[p->i] != ',') {
            fail_at(p, "Expecting ',' delimiter", p->i);
            goto fail;
        }
        p->i++;
        skip_ws(p);
    }
    free(ix.slot);
    return v;
fail:
    free(key);
    free(ix.slot);
    bj_free(v);
    return NULL;
}

static int match_word(parser *p, const char *w, size_t n) {
    return p->len - p->i >= n && memcmp(p->s + p->i, w, n) == 0;
}

static bj_value *new_leaf(parser *p, bj_type t, size_t adv) {
    bj_value *v = calloc(1, sizeof *v);
    if (!v) return fail_oom(p);
    v->type = t;
    p->i += adv;
    return v;
}

/* A value starting at p->i (whitespace already skipped). NaN, Infinity and
 * -Infinity, which CPython accepts, fall through to "Expecting value". */
static bj_value *parse_value(parser *p) {
    if (p->i >= p->len) return fail_at(p, "Expecting value", p->i);
    unsigned char c = p->s[p->i];
    switch (c) {
    case '"': {
        bj_value *v = calloc(1, sizeof *v);
        if (!v) return fail_oom(p);
        v->type = BJ_STRING;
        if (parse_string(p, &v->str, &v->len) < 0) {
            free(v);
            return NULL;
        }
        return v;
    }
    case '[':
    case '{': {
        if (p->depth >= p->max_depth) return fail_at(p, "Maximum nesting depth exceeded", p->i);
        p->depth++;
        bj_value *v = c == '[' ? parse_array(p) : parse_object(p);
        p->depth--;
        return v;
    }
    case 'n':
        if (match_word(p, "null", 4)) return new_leaf(p, BJ_NULL, 4);
        break;
    case 't':
        if (match_word(p, "true", 4)) return new_leaf(p, BJ_TRUE, 4);
        break;
    case 'f':
        if (match_word(p, "false", 5)) return new_leaf(p, BJ_FALSE, 5);
        break;
    default:
        if (c == '-' || is_digit(c)) return parse_number(p);
        break;
    }
    return fail_at(p, "Expecting value", p->i);
}

static void fill_error(const unsigned char *s, size_t off, const char *msg, bj_error *err) {
    size_t pos = 0, lf_chars = 0, lines = 1;
    int seen_lf = 0;
    for (size_t i = 0; i < off; i++) {
        if ((s[i] & 0xC0) == 0x80) continue; /* continuation bytes are not characters */
        if (s[i] == '\n') {
            lines++;
            lf_chars = pos;
            seen_lf = 1;
        }
        pos++;
    }
    err->msg = msg;
    err->byte_off = off;
    err->pos = pos;
    err->lineno = lines;
    err->colno = seen_lf ? pos - lf_chars : pos + 1;
}

int bj_parse_ex(const char *text, size_t len, const bj_parse_opts *opts, bj_value **out,
                bj_error *err, bs_err *e) {
    parser p;
    memset(&p, 0, sizeof p);
    p.s = (const unsigned char *)text;
    p.len = len;
    p.max_depth = opts && opts->max_depth > 0 ? opts->max_depth : BJ_DEFAULT_DEPTH;
    bs_buf_init(&p.scratch);
    bj_value *v = NULL;
    *out = NULL;
    if (err) memset(err, 0, sizeof *err);
    if (!text && len) return bs_fail(e, BS_EINVAL, "bj_parse: NULL text");

    /* CPython decodes the whole body before scanning, so invalid UTF-8
     * anywhere wins over a syntax error earlier in the text. */
    size_t bad = bs_utf8_first_invalid(p.s, len);
    if (bad < len) {
        fail_at(&p, "Invalid UTF-8", bad);
        goto fail;
    }
    skip_ws(&p);
    v = parse_value(&p);
    if (!v) goto fail;
    skip_ws(&p);
    if (p.i != len) {
        fail_at(&p, "Extra data", p.i);
        goto fail;
    }
    bs_buf_free(&p.scratch);
    *out = v;
    return BS_OK;
fail:
    bj_free(v);
    bs_buf_free(&p.scratch);
    if (p.oom) return bs_fail(e, BS_ENOMEM, "JSON: out of memory");
    bj_error local;
    bj_error *er = err ? err : &local;
    fill_error(p.s, p.off, p.msg, er);
    return bs_fail(e, BS_EINVAL, "JSON: %s: line %zu column %zu (char %zu), byte %zu", er->msg,
                   er->lineno, er->colno, er->pos, er->byte_off);
}

int bj_parse(const char *text, size_t len, const bj_parse_opts *opts, bj_value **out, bs_err *e) {
    return bj_parse_ex(text, len, opts, out, NULL, e);
}

void bj_free(bj_value *v) {
    if (!v) return;
    for (size_t i = 0; i < v->n; i++) {
        if (v->items) bj_free(v->items[i]);
        if (v->keys) free(v->keys[i]);
    }
    free(v->items);
    free(v->keys);
    free(v->key_lens);
    free(v->str);
    free(v);
}

const bj_value *bj_get(const bj_value *v, const char *key) {
    if (!v || v->type != BJ_OBJECT || !key) return NULL;
    size_t n = strlen(key);
    for (size_t i = 0; i < v->n; i++)
        if (v->key_lens[i] == n && memcmp(v->keys[i], key, n) == 0) return v->items[i];
    return NULL;
}

/* ---- shortest round-trip digits ---- */

typedef struct digits {
    char d[20]; /* significant digits, no trailing zeros */
    int n;
    int e10; /* x = d[0].d[1]...d[n-1] * 10^e10 */
} digits;

/* Reads "%.*e" output (or our own candidate in the same layout). */
static void digits_from_e(const char *buf, digits *out) {
    int n = 0;
    const char *q = buf;
    for (; *q && *q != 'e'; q++)
        if (*q >= '0' && *q <= '9' && n < 19) out->d[n++] = *q;
    out->e10 = *q == 'e' ? atoi(q + 1) : 0;
    while (n > 1 && out->d[n - 1] == '0') n--;
    out->d[n] = 0;
    out->n = n;
}

/* Shortest digit string that strtod maps back to x (finite, > 0); among
 * equally short ones, the nearest to x. printf's correctly rounded p-digit
 * string is the nearest p-digit decimal; it can fail to round-trip while its
 * upper neighbour succeeds only where the rounding interval is lopsided
 * (x a power of two: the gap below is half the gap above), so that neighbour
 * is tried too. */
static void shortest_digits(double x, digits *out) {
    char buf[64];
    for (int prec = 1; prec <= 17; prec++) {
        snprintf(buf, sizeof buf, "%.*e", prec - 1, x);
        double y = strtod(buf, NULL);
        if (y == x) {
            digits_from_e(buf, out);
            return;
        }
        if (y < x) {
            char d[20];
            int n = 0, e10;
            const char *q = buf;
            for (; *q != 'e'; q++)
                if (*q >= '0' && *q <= '9') d[n++] = *q;
            e10 = atoi(q + 1);
            int k = n - 1;
            while (k >= 0 && d[k] == '9') d[k--] = '0';
            if (k >= 0) d[k]++;
            else {
                d[0] = '1';
                e10++;
            }
            char cand[64];
            int m = snprintf(cand, sizeof cand, "%c.", d[0]);
            for (int t = 1; t < n; t++) cand[m++] = d[t];
            snprintf(cand + m, sizeof cand - (size_t)m, "e%d", e10);
            if (strtod(cand, NULL) == x) {
                digits_from_e(cand, out);
                return;
            }
        }
    }
    snprintf(buf, sizeof buf, "%.16e", x); /* 17 digits always round-trip */
    digits_from_e(buf, out);
}

static void put_zeros(bs_buf *b, int n) {
    for (int i = 0; i < n; i++) bs_buf_putc(b, '0');
}

void bj_fmt_pyfloat(double x, bs_buf *b) {
    if (isnan(x)) { bs_buf_puts(b, "NaN"); return; }
    if (isinf(x)) { bs_buf_puts(b, x > 0 ? "Infinity" : "-Infinity"); return; }
    if (x == 0) { bs_buf_puts(b, signbit(x) ? "-0.0" : "0.0"); return; }
    if (x < 0) bs_buf_putc(b, '-');
    digits g;
    shortest_digits(fabs(x), &g);
    int E = g.e10;
    if (E >= -4 && E < 16) {
        if (E >= 0) {
            if (g.n <= E + 1) {
                bs_buf_put(b, g.d, (size_t)g.n);
                put_zeros(b, E + 1 - g.n);
                bs_buf_puts(b, ".0");
            } else {
                bs_buf_put(b, g.d, (size_t)E + 1);
                bs_buf_putc(b, '.');
                bs_buf_put(b, g.d + E + 1, (size_t)(g.n - E - 1));
            }
        } else {
            bs_buf_puts(b, "0.");
            put_zeros(b, -E - 1);
            bs_buf_put(b, g.d, (size_t)g.n);
        }
    } else {
        bs_buf_putc(b, g.d[0]);
        if (g.n > 1) {
            bs_buf_putc(b, '.');
            bs_buf_put(b, g.d + 1, (size_t)g.n - 1);
        }
        bs_buf_printf(b, "e%+03d", E);
    }
}

void bs_fmt_double_shortest(double x, bs_buf *b) {
    if (!isfinite(x)) { bs_buf_puts(b, "null"); return; }
    if (x == 0) { bs_buf_puts(b, signbit(x) ? "-0.0" : "0.0"); return; }
    if (x < 0) bs_buf_putc(b, '-');
    digits g;
    shortest_digits(fabs(x), &g);
    int n = g.n, kk = g.e10 + 1, k = kk - n; /* x = D * 10^k, spec 02 §1.2 */
    if (k >= 0 && kk <= 16) {
        bs_buf_put(b, g.d, (size_t)n);
        put_zeros(b, k);
        bs_buf_puts(b, ".0");
    } else if (kk > 0 && kk <= 16) {
        bs_buf_put(b, g.d, (size_t)kk);
        bs_buf_putc(b, '.');
        bs_buf_put(b, g.d + kk, (size_t)(n - kk));
    } else if (kk > -5 && kk <= 0) {
        bs_buf_puts(b, "0.");
        put_zeros(b, -kk);
        bs_buf_put(b, g.d, (size_t)n);
    } else {
        bs_buf_putc(b, g.d[0]);
        if (n > 1) {
            bs_buf_putc(b, '.');
            bs_buf_put(b, g.d + 1, (size_t)n - 1);
        }
        bs_buf_printf(b, "e%d", kk - 1);
    }
}

/* ---- writer ---- */

void bj_put_string(bs_buf *b, const char *s, size_t n) {
    static const char hex[] = "0123456789abcdef";
    bs_buf_reserve(b, n + 2);
    bs_buf_putc(b, '"');
    size_t run = 0;
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c >= 0x20 && c != '"' && c != '\\') continue;
        bs_buf_put(b, s + run, i - run);
        run = i + 1;
        switch (c) {
        case '"': bs_buf_put(b, "\\\"", 2); break;
        case '\\': bs_buf_put(b, "\\\\", 2); break;
        case '\b': bs_buf_put(b, "\\b", 2); break;
        case '\t': bs_buf_put(b, "\\t", 2); break;
        case '\n': bs_buf_put(b, "\\n", 2); break;
        case '\f': bs_buf_put(b, "\\f", 2); break;
        case '\r': bs_buf_put(b, "\\r", 2); break;
        default: {
            char u[6] = { '\\', 'u', '0', '0', hex[c >> 4], hex[c & 15] };
            bs_buf_put(b, u, 6);
        }
        }
    }
    bs_buf_put(b, s + run, n - run);
    bs_buf_putc(b, '"');
}

static void put_number(bs_buf *b, const bj_value *v) {
    const char *s = v->str ? v->str : "0";
    size_t n = v->str ? v->len : 1;
    int is_float = memchr(s, '.', n) || memchr(s, 'e', n) || memchr(s, 'E', n);
    if (!is_float) {
        /* Python int(): "-0" is 0; the grammar allows no other zero spelling
         * but the check covers any run of zeros. */
        size_t i = s[0] == '-' ? 1 : 0;
        while (i < n && s[i] == '0') i++;
        if (i == n) bs_buf_putc(b, '0');
        else bs_buf_put(b, s, n);
        return;
    }
    /* glibc strtod rounds correctly at any literal length, as Python's
     * float() does; overflow gives +-inf and underflow +-0, like Python. */
    bj_fmt_pyfloat(strtod(s, NULL), b);
}

/* sort_keys=True orders an object's members by key as Python compares str:
 * by code point, which for valid UTF-8 is the order of the bytes */
typedef struct {
    const char *key;
    size_t len;
    size_t i;
} key_ref;

static int key_cmp(const void *a, const void *b) {
    const key_ref *x = a, *y = b;
    int c = memcmp(x->key, y->key, x->len < y->len ? x->len : y->len);
    if (c) return c;
    return x->len < y->len ? -1 : x->len > y->len;
}

static void dumps(const bj_value *v, bs_buf *b, int sort_keys) {
    if (!v) {
        bs_buf_puts(b, "null");
        return;
    }
    switch (v->type) {
    case BJ_NULL: bs_buf_puts(b, "null"); break;
    case BJ_FALSE: bs_buf_puts(b, "false"); break;
    case BJ_TRUE: bs_buf_puts(b, "true"); break;
    case BJ_NUMBER: put_number(b, v); break;
    case BJ_STRING: bj_put_string(b, v->str ? v->str : "", v->len); break;
    case BJ_ARRAY:
        bs_buf_putc(b, '[');
        for (size_t i = 0; i < v->n; i++) {
            if (i) bs_buf_put(b, ", ", 2);
            dumps(v->items[i], b, sort_keys);
        }
        bs_buf_putc(b, ']');
        break;
    case BJ_OBJECT: {
        key_ref *order = NULL;
        if (sort_keys && v->n > 1) {
            if (!(order = malloc(v->n * sizeof *order))) {
                b->oom = 1;
                return;
            }
            for (size_t i = 0; i < v->n; i++) order[i] = (key_ref){ v->keys[i] ? v->keys[i] : "", v->key_lens[i], i };
            qsort(order, v->n, sizeof *order, key_cmp);
        }
        bs_buf_putc(b, '{');
        for (size_t k = 0; k < v->n; k++) {
            size_t i = order ? order[k].i : k;
            if (k) bs_buf_put(b, ", ", 2);
            bj_put_string(b, v->keys[i], v->key_lens[i]);
            bs_buf_put(b, ": ", 2);
            dumps(v->items[i], b, sort_keys);
        }
        bs_buf_putc(b, '}');
        free(order);
        break;
    }
    }
}

void bj_pydumps(const bj_value *v, bs_buf *b) { dumps(v, b, 0); }

void bj_pydumps_sorted(const bj_value *v, bs_buf *b) { dumps(v, b, 1); }

void bj_pytext(const bj_value *v, bs_buf *b) {
    if (v && v->type == BJ_STRING) bs_buf_put(b, v->str ? v->str : "", v->len);
    else bj_pydumps(v, b);
}
