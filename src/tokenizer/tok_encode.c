/* The encode pipeline of tokenizer.json (spec 01 §4.1-4.4, 4.6): added-token
 * split (raw pass, then normalized pass), normalizers, the Metaspace
 * pre-tokenizer, then the BPE model per word; with character offsets.
 *
 * Text travels as code points, each carrying the span of original characters
 * it came from, so offsets survive normalization and space replacement. */
#include "tokenizer/tok_internal.h"
#include "base/utf8.h"

#include <stdlib.h>
#include <string.h>
#include <utf8proc.h>

/* ---------------- containers ---------------- */

void tk_nstr_free(tk_nstr *s) {
    free(s->cp);
    free(s->os);
    free(s->oe);
    memset(s, 0, sizeof *s);
}

static int nstr_reserve(tk_nstr *s, size_t n) {
    if (s->oom) return BS_ENOMEM;
    if (s->cap >= n) return BS_OK;
    size_t nc = s->cap ? s->cap : 64;
    while (nc < n) nc *= 2;
    uint32_t *cp = realloc(s->cp, nc * sizeof *cp);
    if (cp) s->cp = cp;
    int32_t *os = realloc(s->os, nc * sizeof *os);
    if (os) s->os = os;
    int32_t *oe = realloc(s->oe, nc * sizeof *oe);
    if (oe) s->oe = oe;
    if (!cp || !os || !oe) { s->oom = 1; return BS_ENOMEM; }
    s->cap = nc;
    return BS_OK;
}

void tk_nstr_push(tk_nstr *s, uint32_t cp, int32_t os, int32_t oe) {
    if (s->n == s->cap && nstr_reserve(s, s->n + 1) != BS_OK) return;
    s->cp[s->n] = cp;
    s->os[s->n] = os;
    s->oe[s->n] = oe;
    s->n++;
}

static void nstr_swap(tk_nstr *a, tk_nstr *b) {
    tk_nstr t = *a;
    *a = *b;
    *b = t;
}


/* ---------------- character classes (as Rust, which HF is written in) ---- */

/* char::is_whitespace: the Unicode White_Space property. */
static int is_ws(uint32_t c) {
    return (c >= 0x09 && c <= 0x0D) || c == 0x20 || c == 0x85 || c == 0xA0 || c == 0x1680 ||
           (c >= 0x2000 && c <= 0x200A) || c == 0x2028 || c == 0x2029 || c == 0x202F ||
           c == 0x205F || c == 0x3000;
}

/* regex \w: Alphabetic, marks, decimal digits, connector punctuation, joiners.
 * Alphabetic is approximated by the letter categories, Nl and the circled
 * letters (Other_Alphabetic beyond marks is otherwise rare). */
static int is_word(uint32_t c) {
    if (c < 0x80) return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_';
    if (c == 0x200C || c == 0x200D || (c >= 0x24B6 && c <= 0x24E9)) return 1;
    switch (utf8proc_category((utf8proc_int32_t)c)) {
    case UTF8PROC_CATEGORY_LU: case UTF8PROC_CATEGORY_LL: case UTF8PROC_CATEGORY_LT:
    case UTF8PROC_CATEGORY_LM: case UTF8PROC_CATEGORY_LO: case UTF8PROC_CATEGORY_MN:
    case UTF8PROC_CATEGORY_MC: case UTF8PROC_CATEGORY_ME: case UTF8PROC_CATEGORY_ND:
    case UTF8PROC_CATEGORY_NL: case UTF8PROC_CATEGORY_PC:
        return 1;
    default:
        return 0;
    }
}

/* ---------------- normalizers ---------------- */

static int norm_prepend(tk_nstr *s, const tk_norm *nm, tk_nstr *tmp) {
    if (s->n == 0) return BS_OK; /* only non-empty segments get the prefix */
    tmp->n = 0;
    if (nstr_reserve(tmp, s->n + nm->na) != BS_OK) return BS_ENOMEM;
    /* the new characters take the span of the first one, as HF aligns them */
    for (size_t i = 0; i < nm->na; i++) tk_nstr_push(tmp, nm->a[i], s->os[0], s->oe[0]);
    for (size_t i = 0; i < s->n; i++) tk_nstr_push(tmp, s->cp[i], s->os[i], s->oe[i]);
    nstr_swap(s, tmp);
    return BS_OK;
}

static int norm_replace(tk_nstr *s, const tk_norm *nm, tk_nstr *tmp) {
    tmp->n = 0;
    size_t i = 0, np = nm->na;
    while (i < s->n) {
        if (s->n - i >= np && memcmp(s->cp + i, nm->a, np * sizeof *nm->a) == 0) {
            for (size_t k = 0; k < nm->nb; k++) tk_nstr_push(tmp, nm->b[k], s->os[i], s->oe[i + np - 1]);
            i += np;
        } else {
            tk_nstr_push(tmp, s->cp[i], s->os[i], s->oe[i]);
            i++;
        }
    }
    if (tmp->oom) return BS_ENOMEM;
    nstr_swap(s, tmp);
    return BS_OK;
}

/* Normalization form of cp[0..n) into *out (appended), via per-character
 * decomposition, canonical ordering and, for NFC/NFKC, composition. */
static int nf_run(const uint32_t *cp, size_t n, int opts, uint32_t **out, size_t *nout, size_t *cap) {
    for (size_t i = 0; i < n; i++) {
        utf8proc_int32_t tmp[32];
        int bc = 0;
        utf8proc_ssize_t k = utf8proc_decompose_char((utf8proc_int32_t)cp[i], tmp, 32,
                                                     (utf8proc_option_t)(opts & ~UTF8PROC_COMPOSE) | UTF8PROC_DECOMPOSE, &bc);
        if (k < 0 || k > 32) return BS_EINTERNAL;
        if (*nout + (size_t)k > *cap) {
            size_t nc = *cap ? *cap * 2 : 64;
            while (nc < *nout + (size_t)k) nc *= 2;
            uint32_t *nb = realloc(*out, nc * sizeof *nb);
            if (!nb) return BS_ENOMEM;
            *out = nb;
            *cap = nc;
        }
        for (utf8proc_ssize_t j = 0; j < k; j++) (*out)[(*nout)++] = (uint32_t)tmp[j];
    }
    return BS_OK;
}

static int ccc(uint32_t c) { return utf8proc_get_property((utf8proc_int32_t)c)->combining_class; }

/* Stable sort of each run of non-starters by combining class. */
static void canonical_order(uint32_t *c, size_t n) {
    for (size_t i = 1; i < n; i++) {
        uint32_t x = c[i];
        int cx = ccc(x);
        if (cx == 0) continue;
        size_t j = i;
        while (j > 0) {
            int cy = ccc(c[j - 1]);
            if (cy == 0 || cy <= cx) break;
            c[j] = c[j - 1];
            j--;
        }
        c[j] = x;
    }
}

static int nf_full(const uint32_t *cp, size_t n, int opts, uint32_t **out, size_t *nout, size_t *cap) {
    size_t start = *nout;
    int rc = nf_run(cp, n, opts, out, nout, cap);
    if (rc != BS_OK) return rc;
    canonical_order(*out + start, *nout - start);
    if (opts & UTF8PROC_COMPOSE) {
        utf8proc_ssize_t m = utf8proc_normalize_utf32((utf8proc_int32_t *)(*out + start),
                                                      (utf8proc_ssize_t)(*nout - start),
                                                      (utf8proc_option_t)(UTF8PROC_STABLE | UTF8PROC_COMPOSE));
        if (m < 0) return BS_EINTERNAL;
        *nout = start + (size_t)m;
    }
    return BS_OK;
}

/* The text is normalized as a whole (that decides the ids). Spans come from
 * normalizing chunks that start at each starter: where the chunks give the
 * same text, each output character gets its chunk's span; otherwise (a rare
 * composition across a starter) every character gets the segment's span. */
static int norm_unicode(tk_nstr *s, int kind, tk_nstr *tmp) {
    int opts = UTF8PROC_STABLE;
    if (kind == TN_NFC || kind == TN_NFKC) opts |= UTF8PROC_COMPOSE;
    if (kind == TN_NFKC || kind == TN_NFKD) opts |= UTF8PROC_COMPAT;
    uint32_t *whole = NULL, *part = NULL;
    size_t nw = 0, cw = 0, np = 0, cpart = 0;
    int rc = nf_full(s->cp, s->n, opts, &whole, &nw, &cw);
    if (rc != BS_OK) goto done;
    tmp->n = 0;
    for (size_t a = 0; a < s->n;) {
        size_t b = a + 1;
        while (b < s->n && ccc(s->cp[b]) != 0) b++;
        size_t before = np;
        if ((rc = nf_full(s->cp + a, b - a, opts, &part, &np, &cpart)) != BS_OK) goto done;
        for (size_t k = before; k < np; k++) tk_nstr_push(tmp, part[k], s->os[a], s->oe[b - 1]);
        a = b;
    }
    if (tmp->oom) { rc = BS_ENOMEM; goto done; }
    if (np != nw || (nw && memcmp(part, whole, nw * sizeof *whole) != 0)) {
        tmp->n = 0;
        for (size_t k = 0; k < nw; k++) tk_nstr_push(tmp, whole[k], s->os[0], s->oe[s->n - 1]);
        if (tmp->oom) { rc = BS_ENOMEM; goto done; }
    }
    nstr_swap(s, tmp);
done:
    free(whole);
    free(part);
    return rc;
}

int tk_normalize(const bs_tokenizer *t, tk_nstr *s) {
    tk_nstr tmp = {0};
    int rc = BS_OK;
    for (size_t i = 0; i < t->n_norm && rc == BS_OK; i++) {
        const tk_norm *nm = &t->norm[i];
        switch (nm->kind) {
        case TN_PREPEND: rc = norm_prepend(s, nm, &tmp); break;
        case TN_REPLACE: rc = norm_replace(s, nm, &tmp); break;
        default: rc = s->n ? norm_unicode(s, nm->kind, &tmp) : BS_OK; break;
        }
    }
    tk_nstr_free(&tmp);
    if (rc == BS_OK && s->oom) rc = BS_ENOMEM;
    return rc;
}

/* ---------------- added tokens ---------------- */

typedef struct {
    size_t a, b;  /* code point range in the text being split */
    int32_t id;   /* -1: plain text */
} tk_piece;

typedef struct {
    tk_piece *p;
    size_t n, cap;
} tk_pieces;

static int pieces_push(tk_pieces *ps, size_t a, size_t b, int32_t id) {
    if (ps->n == ps->cap) {
        size_t nc = ps->cap ? ps->cap * 2 : 16;
        tk_piece *np = realloc(ps->p, nc * sizeof *np);
        if (!np) return BS_ENOMEM;
        ps->p = np;
        ps->cap = nc;
    }
    ps->p[ps->n++] = (tk_piece){ a, b, id };
    return BS_OK;
}

/* Longest added token of the pass matching at cp[i]; -1 if none. */
static long match_at(const bs_tokenizer *t, int pass, const uint32_t *cp, size_t n, size_t i) {
    long best = -1;
    size_t best_len = 0;
    for (size_t k = 0; k < t->pass_n[pass]; k++) {
        const tk_added *ad = &t->added[t->pass_idx[pass][k]];
        if (ad->ncp == 0 || ad->cps[0] != cp[i] || ad->ncp <= best_len || n - i < ad->ncp) continue;
        if (memcmp(ad->cps, cp + i, ad->ncp * sizeof *cp) == 0) {
            best = (long)t->pass_idx[pass][k];
            best_len = ad->ncp;
        }
    }
    return best;
}

/* HF AddedVocabulary::find_matches: leftmost-longest, single_word filter,
 * lstrip/rstrip swallowing whitespace (never across an earlier match). */
static int split_added(const bs_tokenizer *t, int pass, const uint32_t *cp, size_t n, tk_pieces *ps) {
    ps->n = 0;
    size_t start = 0, i = 0;
    int rc;
    if (t->pass_n[pass] == 0) return n ? pieces_push(ps, 0, n, -1) : BS_OK;
    const uint64_t *bits = t->first_bits[pass];
    while (i < n) {
        if (!(bits[(cp[i] & 1023) >> 6] >> (cp[i] & 63) & 1)) { i++; continue; }
        long k = match_at(t, pass, cp, n, i);
        if (k < 0) { i++; continue; }
        const tk_added *ad = &t->added[k];
        size_t a = i, b = i + ad->ncp;
        if (ad->single_word) {
            int left_ok = a == 0 || !is_word(cp[a - 1]);
            int right_ok = b == n || !is_word(cp[b]);
            if (!left_ok || !right_ok) { i = b; continue; }
        }
        if (ad->lstrip) while (a > start && is_ws(cp[a - 1])) a--;
        if (ad->rstrip) while (b < n && is_ws(cp[b])) b++;
        if (start < a && (rc = pieces_push(ps, start, a, -1)) != BS_OK) return rc;
        if ((rc = pieces_push(ps, a, b, ad->id)) != BS_OK) return rc;
        start = i = b;
    }
    if (start < n) return pieces_push(ps, start, n, -1);
    return BS_OK;
}

/* ---------------- pre-tokenizer + model ---------------- */

typedef struct {
    tk_nstr seg, word;
    tk_pieces p2;
    tk_bpe_scratch *bpe;
} tk_ctx;

static int pretok_and_model(const bs_tokenizer *t, const tk_nstr *seg, size_t a, size_t b,
                            tk_out *out, tk_ctx *c) {
    if (a >= b) return BS_OK;
    if (!t->pt_metaspace) return tk_bpe_word(t, seg, a, b, out, c->bpe);
    tk_nstr *w = &c->word;
    w->n = 0;
    if (nstr_reserve(w, b - a + 1) != BS_OK) return BS_ENOMEM;
    uint32_t r = t->pt_repl;
    uint32_t first = seg->cp[a] == ' ' ? r : seg->cp[a];
    int prepend = first != r && (t->pt_scheme == TP_ALWAYS || (t->pt_scheme == TP_FIRST && seg->os[a] == 0));
    if (prepend) tk_nstr_push(w, r, seg->os[a], seg->oe[a]);
    for (size_t i = a; i < b; i++) tk_nstr_push(w, seg->cp[i] == ' ' ? r : seg->cp[i], seg->os[i], seg->oe[i]);
    if (!t->pt_split) return tk_bpe_word(t, w, 0, w->n, out, c->bpe);
    /* split: each replacement character starts a new word (MergedWithNext) */
    size_t ws = 0;
    for (size_t i = 1; i <= w->n; i++) {
        if (i == w->n || w->cp[i] == r) {
            int rc = tk_bpe_word(t, w, ws, i, out, c->bpe);
            if (rc != BS_OK) return rc;
            ws = i;
        }
    }
    return BS_OK;
}

static int encode_segment(const bs_tokenizer *t, const uint32_t *cp, size_t a, size_t b,
                          tk_out *out, tk_ctx *c) {
    tk_nstr *s = &c->seg;
    s->n = 0;
    if (nstr_reserve(s, b - a) != BS_OK) return BS_ENOMEM;
    for (size_t i = a; i < b; i++) tk_nstr_push(s, cp[i], (int32_t)i, (int32_t)i + 1);
    int rc = tk_normalize(t, s);
    if (rc != BS_OK) return rc;
    if ((rc = split_added(t, 1, s->cp, s->n, &c->p2)) != BS_OK) return rc;
    for (size_t k = 0; k < c->p2.n; k++) {
        const tk_piece *p = &c->p2.p[k];
        if (p->id >= 0) tk_out_push(out, p->id, s->os[p->a], s->oe[p->b - 1]);
        else if ((rc = pretok_and_model(t, s, p->a, p->b, out, c)) != BS_OK) return rc;
    }
    return out->oom ? BS_ENOMEM : BS_OK;
}

int bs_tokenizer_encode(const bs_tokenizer *t, const char *text, size_t len,
                        int32_t **ids, size_t *n, int32_t **offsets, bs_err *e) {
    if (ids) *ids = NULL;
    if (n) *n = 0;
    if (offsets) *offsets = NULL;
    if (!t || !ids || !n || (!text && len)) return bs_fail(e, BS_EINVAL, "tokenizer: bad arguments to encode");
    if (len > (size_t)INT32_MAX - 8)
        return bs_fail(e, BS_ERANGE, "tokenizer: text of %zu bytes is too long to encode", len);
    uint32_t *cp = NULL;
    size_t ncp = 0, bad = 0;
    tk_out out = {0};
    tk_pieces p1 = {0};
    tk_ctx c = {0};
    int rc = bs_utf8_decode(text, len, &cp, &ncp, &bad);
    if (rc == BS_EINVAL) {
        rc = bs_fail(e, BS_EINVAL, "tokenizer: text is not valid UTF-8 (byte %zu)", bad);
        goto done;
    }
    if (rc != BS_OK) goto oom;
    if (!(c.bpe = tk_bpe_scratch_new())) goto oom;
    if ((rc = split_added(t, 0, cp, ncp, &p1)) != BS_OK) goto oom;
    for (size_t k = 0; k < p1.n; k++) {
        const tk_piece *p = &p1.p[k];
        if (p->id >= 0) tk_out_push(&out, p->id, (int32_t)p->a, (int32_t)p->b);
        else if ((rc = encode_segment(t, cp, p->a, p->b, &out, &c)) != BS_OK) goto fail;
    }
    if (out.oom) goto oom;
    if (!out.ids) { /* callers always get an allocation, also for no tokens */
        out.ids = malloc(sizeof *out.ids);
        out.offs = malloc(2 * sizeof *out.offs);
        if (!out.ids || !out.offs) goto oom;
    }
    *ids = out.ids;
    *n = out.n;
    out.ids = NULL;
    if (offsets) {
        *offsets = out.offs;
        out.offs = NULL;
    }
    rc = BS_OK;
    goto done;
fail:
    if (rc != BS_ENOMEM) {
        rc = bs_fail(e, rc, "%s: encoding failed (%s)", t->fname, bs_strerror(rc));
        goto done;
    }
oom:
    rc = bs_fail(e, BS_ENOMEM, "tokenizer: out of memory while encoding %zu bytes", len);
done:
    free(cp);
    free(out.ids);
    free(out.offs);
    free(p1.p);
    free(c.p2.p);
    tk_nstr_free(&c.seg);
    tk_nstr_free(&c.word);
    tk_bpe_scratch_free(c.bpe);
    return rc;
}
