/* Decoding ids back to text with the file's decoder chain, as HF decode_chain
 * does: every decoder maps a list of token strings to a new list, and the
 * final list is concatenated. Used for debugging and by `basal generate`. */
#include "tokenizer/tok_internal.h"
#include "base/utf8.h"

#include <stdlib.h>
#include <string.h>

typedef struct {
    char *s;
    size_t len;
} tk_str;

typedef struct {
    tk_str *v;
    size_t n, cap;
} tk_strs;

static void strs_free(tk_strs *l) {
    for (size_t i = 0; i < l->n; i++) free(l->v[i].s);
    free(l->v);
    memset(l, 0, sizeof *l);
}

/* Takes ownership of s (freed on failure). */
static int strs_push(tk_strs *l, char *s, size_t len) {
    if (!s) return BS_ENOMEM;
    if (l->n == l->cap) {
        size_t nc = l->cap ? l->cap * 2 : 16;
        tk_str *nv = realloc(l->v, nc * sizeof *nv);
        if (!nv) { free(s); return BS_ENOMEM; }
        l->v = nv;
        l->cap = nc;
    }
    l->v[l->n++] = (tk_str){ s, len };
    return BS_OK;
}

static char *dup_bytes(const char *s, size_t len) {
    char *d = malloc(len + 1);
    if (!d) return NULL;
    memcpy(d, s, len);
    d[len] = 0;
    return d;
}

/* Byte length of the UTF-8 character starting at s[i] (input is valid UTF-8
 * except inside ByteFallback output, where a stray byte counts as one). */
static size_t ch_len(const char *s, size_t len, size_t i) {
    uint8_t c = (uint8_t)s[i];
    size_t n = c < 0x80 ? 1 : (c & 0xE0) == 0xC0 ? 2 : (c & 0xF0) == 0xE0 ? 3 : (c & 0xF8) == 0xF0 ? 4 : 1;
    return i + n <= len ? n : 1;
}

static int ch_is(const char *s, size_t len, size_t i, uint32_t cp, size_t *n) {
    char enc[4];
    size_t k = bs_utf8_put(cp, enc);
    *n = ch_len(s, len, i);
    return *n == k && memcmp(s + i, enc, k) == 0;
}

static int dec_replace(const tk_dec *d, tk_strs *l) {
    for (size_t t = 0; t < l->n; t++) {
        bs_buf b;
        bs_buf_init(&b);
        const char *s = l->v[t].s;
        size_t len = l->v[t].len, i = 0;
        while (i < len) {
            if (len - i >= d->npat && memcmp(s + i, d->pat, d->npat) == 0) {
                bs_buf_put(&b, d->rep, d->nrep);
                i += d->npat;
            } else {
                bs_buf_put(&b, s + i, 1);
                i++;
            }
        }
        if (b.oom) { bs_buf_free(&b); return BS_ENOMEM; }
        free(l->v[t].s);
        l->v[t].s = b.data ? b.data : dup_bytes("", 0);
        l->v[t].len = b.len;
        if (!l->v[t].s) return BS_ENOMEM;
    }
    return BS_OK;
}

static int hexval(char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    return -1;
}

static int valid_utf8(const char *s, size_t len) {
    uint32_t *cp = NULL;
    size_t n = 0;
    int rc = bs_utf8_decode(s, len, &cp, &n, NULL);
    free(cp);
    return rc; /* BS_OK, BS_EINVAL or BS_ENOMEM */
}

/* Runs of "<0xHH>" become their bytes; a run that is not valid UTF-8 becomes
 * one U+FFFD per byte (HF's choice). */
static int flush_bytes(bs_buf *bytes, tk_strs *out) {
    if (!bytes->len) return BS_OK;
    int rc = valid_utf8(bytes->data, bytes->len);
    if (rc == BS_OK) {
        rc = strs_push(out, dup_bytes(bytes->data, bytes->len), bytes->len);
    } else if (rc == BS_EINVAL) {
        rc = BS_OK;
        for (size_t i = 0; i < bytes->len && rc == BS_OK; i++) rc = strs_push(out, dup_bytes("\xEF\xBF\xBD", 3), 3);
    }
    bytes->len = 0;
    return rc;
}

static int dec_bytefallback(tk_strs *l) {
    tk_strs out = {0};
    bs_buf bytes;
    bs_buf_init(&bytes);
    int rc = BS_OK;
    for (size_t t = 0; t < l->n && rc == BS_OK; t++) {
        const char *s = l->v[t].s;
        int hi, lo;
        if (l->v[t].len == 6 && memcmp(s, "<0x", 3) == 0 && s[5] == '>' && (hi = hexval(s[3])) >= 0 &&
            (lo = hexval(s[4])) >= 0) {
            char c = (char)(hi * 16 + lo);
            bs_buf_put(&bytes, &c, 1);
            if (bytes.oom) rc = BS_ENOMEM;
            continue;
        }
        if ((rc = flush_bytes(&bytes, &out)) != BS_OK) break;
        rc = strs_push(&out, l->v[t].s, l->v[t].len);
        if (rc == BS_OK) l->v[t].s = NULL; /* moved */
    }
    if (rc == BS_OK) rc = flush_bytes(&bytes, &out);
    bs_buf_free(&bytes);
    if (rc != BS_OK) {
        strs_free(&out);
        return rc;
    }
    strs_free(l);
    *l = out;
    return BS_OK;
}

static int dec_fuse(tk_strs *l) {
    bs_buf b;
    bs_buf_init(&b);
    for (size_t t = 0; t < l->n; t++) bs_buf_put(&b, l->v[t].s, l->v[t].len);
    if (b.oom) { bs_buf_free(&b); return BS_ENOMEM; }
    char *s = b.data ? b.data : dup_bytes("", 0);
    size_t len = b.len;
    strs_free(l);
    return strs_push(l, s, len);
}

/* Per token: drop up to `start` leading and `stop` trailing copies of ch. */
static int dec_strip(const tk_dec *d, tk_strs *l) {
    for (size_t t = 0; t < l->n; t++) {
        char *s = l->v[t].s;
        size_t len = l->v[t].len, a = 0, b = len, k;
        for (long i = 0; i < d->start && a < len && ch_is(s, len, a, d->ch, &k); i++) a += k;
        for (long i = 0; i < d->stop && b > a; i++) {
            size_t p = b - 1;
            while (p > a && ((uint8_t)s[p] & 0xC0) == 0x80) p--;
            if (!ch_is(s, len, p, d->ch, &k) || p + k != b) break;
            b = p;
        }
        memmove(s, s + a, b - a);
        s[b - a] = 0;
        l->v[t].len = b - a;
    }
    return BS_OK;
}

/* HF Metaspace decoder: the replacement becomes a space, except in the first
 * token, where it is dropped unless prepend_scheme is "never". */
static int dec_metaspace(const tk_dec *d, tk_strs *l) {
    for (size_t t = 0; t < l->n; t++) {
        char *s = l->v[t].s;
        size_t len = l->v[t].len, i = 0, w = 0, k;
        while (i < len) {
            if (ch_is(s, len, i, d->ch, &k)) {
                if (!(t == 0 && d->scheme != TP_NEVER)) s[w++] = ' ';
            } else {
                memmove(s + w, s + i, k);
                w += k;
            }
            i += k;
        }
        s[w] = 0;
        l->v[t].len = w;
    }
    return BS_OK;
}

int bs_tokenizer_decode(const bs_tokenizer *t, const int32_t *ids, size_t n,
                        int skip_special, char **out, size_t *len, bs_err *e) {
    if (out) *out = NULL;
    if (len) *len = 0;
    if (!t || !out || (!ids && n)) return bs_fail(e, BS_EINVAL, "tokenizer: bad arguments to decode");
    if (t->dec_err) return bs_fail(e, BS_EUNSUP, "%s", t->dec_err);
    tk_strs l = {0};
    int rc = BS_OK;
    for (size_t i = 0; i < n; i++) {
        int32_t id = ids[i];
        const char *tok = bs_tokenizer_id_to_token(t, id);
        if (!tok) {
            strs_free(&l);
            return bs_fail(e, BS_ERANGE, "%s: token id %d is not in the vocabulary", t->fname, (int)id);
        }
        if (skip_special && t->added_of_id[id] >= 0 && t->added[t->added_of_id[id]].special) continue;
        size_t tl = t->added_of_id[id] >= 0 ? t->added[t->added_of_id[id]].clen : t->id_len[id];
        if ((rc = strs_push(&l, dup_bytes(tok, tl), tl)) != BS_OK) goto done;
    }
    if (!t->has_decoder) { /* HF joins the tokens with spaces when there is no decoder */
        bs_buf b;
        bs_buf_init(&b);
        for (size_t i = 0; i < l.n; i++) {
            if (i) bs_buf_putc(&b, ' ');
            bs_buf_put(&b, l.v[i].s, l.v[i].len);
        }
        if (b.oom) { bs_buf_free(&b); rc = BS_ENOMEM; goto done; }
        strs_free(&l);
        if ((rc = strs_push(&l, b.data ? b.data : dup_bytes("", 0), b.len)) != BS_OK) goto done;
    }
    for (size_t k = 0; k < t->n_dec && rc == BS_OK && t->has_decoder; k++) {
        const tk_dec *d = &t->dec[k];
        switch (d->kind) {
        case TD_REPLACE: rc = dec_replace(d, &l); break;
        case TD_BYTEFALLBACK: rc = dec_bytefallback(&l); break;
        case TD_FUSE: rc = dec_fuse(&l); break;
        case TD_STRIP: rc = dec_strip(d, &l); break;
        default: rc = dec_metaspace(d, &l); break;
        }
    }
    if (rc == BS_OK) {
        bs_buf b;
        bs_buf_init(&b);
        bs_buf_reserve(&b, 1);
        for (size_t i = 0; i < l.n; i++) bs_buf_put(&b, l.v[i].s, l.v[i].len);
        if (b.oom || !b.data) {
            bs_buf_free(&b);
            rc = BS_ENOMEM;
        } else {
            b.data[b.len] = 0;
            *out = b.data;
            if (len) *len = b.len;
        }
    }
done:
    strs_free(&l);
    if (rc == BS_ENOMEM) return bs_fail(e, BS_ENOMEM, "%s: out of memory while decoding", t->fname);
    return rc;
}
