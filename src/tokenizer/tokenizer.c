/* Loading tokenizer.json (spec 01 §1.4, §4), lookups and the Basal checks.
 * Every component or option this engine does not implement is a load error
 * naming it: a silently different tokenization would corrupt every prompt. */
#include "tokenizer/tok_internal.h"
#include "base/log.h"
#include "base/utf8.h"

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_VOCAB_ID (1 << 26) /* ids index dense arrays */

/* ---------------- JSON helpers ---------------- */

/* Fails on any key of obj not in the NULL-terminated list. */
static int check_keys(const bs_tokenizer *t, json_t *obj, const char *const *allowed,
                      const char *what, bs_err *e) {
    const char *key;
    json_t *v;
    json_object_foreach(obj, key, v) {
        int ok = 0;
        for (size_t i = 0; allowed[i] && !ok; i++) ok = strcmp(key, allowed[i]) == 0;
        if (!ok) return bs_fail(e, BS_EUNSUP, "%s: unsupported %s option \"%s\"", t->fname, what, key);
    }
    return BS_OK;
}

/* Optional boolean: absent or null gives dflt. */
static int get_bool(const bs_tokenizer *t, json_t *obj, const char *key, int dflt, int *out,
                    const char *what, bs_err *e) {
    json_t *v = json_object_get(obj, key);
    if (!v || json_is_null(v)) { *out = dflt; return BS_OK; }
    if (!json_is_boolean(v)) return bs_fail(e, BS_EFORMAT, "%s: %s \"%s\" must be a boolean", t->fname, what, key);
    *out = json_is_true(v);
    return BS_OK;
}

/* Optional string (absent or null: *out NULL). */
static int get_str(const bs_tokenizer *t, json_t *obj, const char *key, const char **out, size_t *len,
                   const char *what, bs_err *e) {
    json_t *v = json_object_get(obj, key);
    *out = NULL;
    if (len) *len = 0;
    if (!v || json_is_null(v)) return BS_OK;
    if (!json_is_string(v)) return bs_fail(e, BS_EFORMAT, "%s: %s \"%s\" must be a string", t->fname, what, key);
    *out = json_string_value(v);
    if (len) *len = json_string_length(v);
    return BS_OK;
}

static int to_cps(const bs_tokenizer *t, const char *s, size_t len, uint32_t **cp, size_t *n,
                  const char *what, bs_err *e) {
    size_t bad = 0;
    int rc = bs_utf8_decode(s, len, cp, n, &bad);
    if (rc == BS_EINVAL) return bs_fail(e, BS_EFORMAT, "%s: %s is not valid UTF-8", t->fname, what);
    if (rc != BS_OK) return bs_fail(e, rc, "%s: out of memory", t->fname);
    return BS_OK;
}

/* A string that must be exactly one character (Metaspace replacement, Strip content). */
static int get_char(const bs_tokenizer *t, json_t *obj, const char *key, uint32_t *out,
                    const char *what, bs_err *e) {
    const char *s;
    size_t len, n = 0;
    uint32_t *cp = NULL;
    int rc = get_str(t, obj, key, &s, &len, what, e);
    if (rc != BS_OK) return rc;
    if (!s) return bs_fail(e, BS_EFORMAT, "%s: %s \"%s\" missing", t->fname, what, key);
    if ((rc = to_cps(t, s, len, &cp, &n, what, e)) != BS_OK) return rc;
    if (n != 1) rc = bs_fail(e, BS_EUNSUP, "%s: %s \"%s\" must be one character", t->fname, what, key);
    else *out = cp[0];
    free(cp);
    return rc;
}

static int parse_scheme(const bs_tokenizer *t, json_t *obj, int *scheme, const char *what, bs_err *e) {
    const char *s;
    int aps, rc = get_str(t, obj, "prepend_scheme", &s, NULL, what, e);
    if (rc != BS_OK) return rc;
    if (!s || strcmp(s, "always") == 0) *scheme = TP_ALWAYS;
    else if (strcmp(s, "first") == 0) *scheme = TP_FIRST;
    else if (strcmp(s, "never") == 0) *scheme = TP_NEVER;
    else return bs_fail(e, BS_EUNSUP, "%s: %s prepend_scheme \"%s\" is not supported", t->fname, what, s);
    /* legacy files: add_prefix_space false means "never" (HF rejects a contradiction) */
    if ((rc = get_bool(t, obj, "add_prefix_space", 1, &aps, what, e)) != BS_OK) return rc;
    if (!aps) {
        if (s && *scheme != TP_NEVER)
            return bs_fail(e, BS_EFORMAT, "%s: %s add_prefix_space false contradicts prepend_scheme \"%s\"",
                           t->fname, what, s);
        *scheme = TP_NEVER;
    }
    return BS_OK;
}

/* ---------------- model ---------------- */

/* "model" is a BPE (checked, not guessed from the keys present: 01 §1.4
 * rule 3) with merges and no key this implementation does not know. */
static int check_model(const bs_tokenizer *t, json_t *model, bs_err *e) {
    static const char *const keys[] = { "type", "vocab", "merges", "dropout", "unk_token",
                                        "continuing_subword_prefix", "end_of_word_suffix",
                                        "fuse_unk", "byte_fallback", "ignore_merges", NULL };
    const char *fn = t->fname;
    if (!json_is_object(model)) return bs_fail(e, BS_EFORMAT, "%s: \"model\" missing or not an object", fn);
    json_t *type = json_object_get(model, "type");
    json_t *merges = json_object_get(model, "merges");
    if (type && !(json_is_string(type) && strcmp(json_string_value(type), "BPE") == 0)) {
        char *d = json_dumps(type, JSON_COMPACT | JSON_ENCODE_ANY);
        int rc = bs_fail(e, BS_EUNSUP, "%s: unsupported model type %s (only BPE is implemented)", fn, d ? d : "?");
        free(d);
        return rc;
    }
    if (!type) return bs_fail(e, BS_EFORMAT, "%s: model.type missing (it must be \"BPE\")", fn);
    /* a BPE without merges would split every word into single characters */
    if (!merges) return bs_fail(e, BS_EFORMAT, "%s: model.merges missing (a BPE model needs its merges)", fn);
    return check_keys(t, model, keys, "BPE model", e);
}

/* model.vocab: the token → id map, and by id each token's text in its pool */
static int parse_vocab(bs_tokenizer *t, json_t *vocab, bs_err *e) {
    const char *fn = t->fname;
    int rc;
    if (!json_is_object(vocab)) return bs_fail(e, BS_EFORMAT, "%s: model.vocab missing or not an object", fn);
    if ((rc = tk_strmap_init(&t->vocab, json_object_size(vocab))) != BS_OK) goto oom;
    int32_t max = -1;
    const char *key;
    size_t klen;
    json_t *v;
    json_object_keylen_foreach(vocab, key, klen, v) {
        json_int_t id = json_is_integer(v) ? json_integer_value(v) : -1;
        if (id < 0 || id >= MAX_VOCAB_ID)
            return bs_fail(e, BS_EFORMAT, "%s: vocab id of \"%s\" must be an integer in [0, %d)", fn, key, MAX_VOCAB_ID);
        if ((rc = tk_strmap_put(&t->vocab, key, klen, (int32_t)id, NULL)) != BS_OK) goto oom;
        if (id > max) max = (int32_t)id;
    }
    t->n_ids = max + 1;
    t->id_off = malloc(((size_t)t->n_ids + 1) * sizeof *t->id_off);
    t->id_len = malloc(((size_t)t->n_ids + 1) * sizeof *t->id_len);
    if (!t->id_off || !t->id_len) goto oom;
    for (int32_t i = 0; i < t->n_ids; i++) t->id_off[i] = -1;
    for (size_t i = 0; i <= t->vocab.mask; i++) {
        const tk_sent *en = &t->vocab.slots[i];
        if (en->len == UINT32_MAX) continue;
        /* two tokens sharing an id: keep the one first in the pool (file order) */
        if (t->id_off[en->id] < 0 || t->id_off[en->id] > (int64_t)en->off) {
            t->id_off[en->id] = en->off;
            t->id_len[en->id] = en->len;
        }
    }
    return BS_OK;
oom:
    return bs_fail(e, BS_ENOMEM, "%s: out of memory", fn);
}

/* dropout (null or 0 only), unk_token, continuing_subword_prefix,
 * end_of_word_suffix and the three flags */
static int parse_bpe_options(bs_tokenizer *t, json_t *model, bs_err *e) {
    const char *fn = t->fname;
    int rc;
    json_t *dropout = json_object_get(model, "dropout");
    if (dropout && !json_is_null(dropout) && !(json_is_number(dropout) && json_number_value(dropout) == 0.0)) {
        if (json_is_number(dropout))
            return bs_fail(e, BS_EUNSUP, "%s: BPE dropout %g is not supported (must be null or 0)", fn,
                           json_number_value(dropout));
        return bs_fail(e, BS_EFORMAT, "%s: BPE dropout must be null or a number", fn);
    }
    const char *s;
    size_t slen;
    if ((rc = get_str(t, model, "unk_token", &s, &slen, "model", e)) != BS_OK) return rc;
    t->unk_id = -1;
    if (s) {
        t->unk_id = tk_strmap_get(&t->vocab, s, slen);
        if (t->unk_id < 0) return bs_fail(e, BS_EFORMAT, "%s: unk_token \"%s\" is not in the vocabulary", fn, s);
    }
    if ((rc = get_str(t, model, "continuing_subword_prefix", &s, &slen, "model", e)) != BS_OK) return rc;
    if (s && slen && !(t->prefix = strndup(s, slen))) goto oom;
    t->nprefix = t->prefix ? slen : 0;
    if ((rc = get_str(t, model, "end_of_word_suffix", &s, &slen, "model", e)) != BS_OK) return rc;
    if (s && slen && !(t->suffix = strndup(s, slen))) goto oom;
    t->nsuffix = t->suffix ? slen : 0;
    if ((rc = get_bool(t, model, "fuse_unk", 0, &t->fuse_unk, "model", e)) != BS_OK) return rc;
    if ((rc = get_bool(t, model, "byte_fallback", 0, &t->byte_fallback, "model", e)) != BS_OK) return rc;
    if ((rc = get_bool(t, model, "ignore_merges", 0, &t->ignore_merges, "model", e)) != BS_OK) return rc;
    return BS_OK;
oom:
    return bs_fail(e, BS_ENOMEM, "%s: out of memory", fn);
}

/* The ids of the byte-fallback tokens <0xXX> and of the one-byte ASCII tokens (-1: none). */
static int index_byte_tokens(bs_tokenizer *t, bs_err *e) {
    for (int b = 0; b < 256; b++) {
        char name[8];
        snprintf(name, sizeof name, "<0x%02X>", b);
        t->byte_id[b] = tk_strmap_get(&t->vocab, name, 6);
    }
    if (!(t->ascii_id = malloc(256 * sizeof *t->ascii_id)))
        return bs_fail(e, BS_ENOMEM, "%s: out of memory", t->fname);
    for (int b = 0; b < 256; b++) {
        char c = (char)b;
        t->ascii_id[b] = b < 0x80 ? tk_strmap_get(&t->vocab, &c, 1) : -1;
    }
    return BS_OK;
}

/* chunk_ms: "\u2581" is a token, there is no prefix/suffix (which depend on
   the position in the whole word), and no token has "\u2581" right after
   another character, so no token can cover such a boundary */
static int metaspace_chunks(const bs_tokenizer *t) {
    int ok = !t->nprefix && !t->nsuffix && tk_strmap_get(&t->vocab, "\xE2\x96\x81", 3) >= 0;
    for (size_t i = 0; i <= t->vocab.mask && ok; i++) {
        const tk_sent *en = &t->vocab.slots[i];
        if (en->len == UINT32_MAX) continue;
        const char *p = t->vocab.pool + en->off;
        for (size_t k = 1; k + 3 <= en->len && ok; k++)
            if (memcmp(p + k, "\xE2\x96\x81", 3) == 0 && (k < 3 || memcmp(p + k - 3, "\xE2\x96\x81", 3) != 0))
                ok = 0;
    }
    return ok;
}

/* The two parts of merge i: "a b" (split at the first space) or [a, b]. */
static int merge_parts(const bs_tokenizer *t, json_t *m, size_t i, const char **a, size_t *la, const char **b,
                       size_t *lb, bs_err *e) {
    if (json_is_string(m)) {
        *a = json_string_value(m);
        const char *sp = memchr(*a, ' ', json_string_length(m));
        if (!sp) return bs_fail(e, BS_EFORMAT, "%s: merge %zu \"%s\" has no space", t->fname, i, *a);
        *la = (size_t)(sp - *a);
        *b = sp + 1;
        *lb = json_string_length(m) - *la - 1;
        return BS_OK;
    }
    if (json_is_array(m) && json_array_size(m) == 2 && json_is_string(json_array_get(m, 0)) &&
        json_is_string(json_array_get(m, 1))) {
        *a = json_string_value(json_array_get(m, 0));
        *la = json_string_length(json_array_get(m, 0));
        *b = json_string_value(json_array_get(m, 1));
        *lb = json_string_length(json_array_get(m, 1));
        return BS_OK;
    }
    return bs_fail(e, BS_EFORMAT, "%s: merge %zu is neither \"a b\" nor [a, b]", t->fname, i);
}

/* model.merges: both parts of each merge and its result must be tokens; the
 * merge map gives (a, b) its rank and result. */
static int parse_merges(bs_tokenizer *t, json_t *merges, bs_err *e) {
    const char *fn = t->fname;
    if (merges && !json_is_null(merges) && !json_is_array(merges))
        return bs_fail(e, BS_EFORMAT, "%s: model.merges must be an array", fn);
    size_t nm = merges ? json_array_size(merges) : 0;
    if (nm >= (size_t)INT32_MAX) return bs_fail(e, BS_ERANGE, "%s: too many merges", fn);
    char *buf = NULL;
    size_t bufcap = 0;
    int rc;
    if ((rc = tk_mergemap_init(&t->merges, nm)) != BS_OK) goto oom;
    for (size_t i = 0; i < nm; i++) {
        const char *a = NULL, *b = NULL;
        size_t la = 0, lb = 0;
        if ((rc = merge_parts(t, json_array_get(merges, i), i, &a, &la, &b, &lb, e)) != BS_OK) goto done;
        int32_t ia = tk_strmap_get(&t->vocab, a, la), ib = tk_strmap_get(&t->vocab, b, lb);
        if (ia < 0 || ib < 0) {
            int bad_a = ia < 0;
            rc = bs_fail(e, BS_EFORMAT, "%s: merge %zu: \"%.*s\" is not in the vocabulary", fn, i,
                         (int)(bad_a ? la : lb), bad_a ? a : b);
            goto done;
        }
        /* with a continuing_subword_prefix the right part loses its prefix */
        if (t->nprefix) {
            if (lb < t->nprefix || memcmp(b, t->prefix, t->nprefix) != 0) {
                rc = bs_fail(e, BS_EFORMAT, "%s: merge %zu: \"%.*s\" lacks the continuing_subword_prefix",
                             fn, i, (int)lb, b);
                goto done;
            }
            b += t->nprefix;
            lb -= t->nprefix;
        }
        if (la + lb > bufcap) {
            bufcap = (la + lb) * 2 + 16;
            char *nb = realloc(buf, bufcap);
            if (!nb) goto oom;
            buf = nb;
        }
        memcpy(buf, a, la);
        memcpy(buf + la, b, lb);
        int32_t im = tk_strmap_get(&t->vocab, buf, la + lb);
        if (im < 0) {
            rc = bs_fail(e, BS_EFORMAT, "%s: merge %zu: result \"%.*s\" is not in the vocabulary", fn, i,
                         (int)(la + lb), buf);
            goto done;
        }
        tk_mergemap_put(&t->merges, ia, ib, (int32_t)i, im);
    }
    rc = BS_OK;
    goto done;
oom:
    rc = bs_fail(e, BS_ENOMEM, "%s: out of memory", fn);
done:
    free(buf);
    return rc;
}

static int parse_model(bs_tokenizer *t, json_t *model, bs_err *e) {
    int rc;
    if ((rc = check_model(t, model, e)) != BS_OK) return rc;
    if ((rc = parse_vocab(t, json_object_get(model, "vocab"), e)) != BS_OK) return rc;
    if ((rc = parse_bpe_options(t, model, e)) != BS_OK) return rc;
    if ((rc = index_byte_tokens(t, e)) != BS_OK) return rc;
    t->chunk_ms = metaspace_chunks(t);
    return parse_merges(t, json_object_get(model, "merges"), e);
}

/* ---------------- added tokens ---------------- */

/* Added tokens by id, then file order (qsort's order of equal ids is not fixed). */
static int added_by_id(const void *a, const void *b) {
    const tk_added *x = *(const tk_added *const *)a, *y = *(const tk_added *const *)b;
    if (x->id != y->id) return x->id < y->id ? -1 : 1;
    return x < y ? -1 : x > y;
}

static int parse_added(bs_tokenizer *t, json_t *arr, bs_err *e) {
    static const char *const keys[] = { "id", "content", "single_word", "lstrip", "rstrip",
                                        "normalized", "special", NULL };
    const char *fn = t->fname;
    int rc;
    if (!arr || json_is_null(arr)) return tk_strmap_init(&t->added_map, 4) == BS_OK ? BS_OK
                                                                                 : bs_fail(e, BS_ENOMEM, "%s: out of memory", fn);
    if (!json_is_array(arr)) return bs_fail(e, BS_EFORMAT, "%s: added_tokens must be an array", fn);
    size_t n = json_array_size(arr);
    if (tk_strmap_init(&t->added_map, n) != BS_OK || !(t->added = calloc(n ? n : 1, sizeof *t->added)))
        return bs_fail(e, BS_ENOMEM, "%s: out of memory", fn);
    /* HF tokenizers does not take an added token's id from the file
     * (AddedVocabulary::add_tokens, in file order): a content that is a vocab
     * entry gets that entry's id, any other the vocabulary's size (its number
     * of entries) or, once an added id reaches it, the largest added id + 1;
     * a different id in the file only draws a warning. basal-rs and upstream
     * encode through it, so a file whose ids disagree is encoded with HF's. */
    int64_t vocab_len = (int64_t)t->vocab.count, max_added = -1;
    size_t k = 0; /* tokens kept: HF skips an empty content, which can never match and takes no id */
    for (size_t i = 0; i < n; i++) {
        json_t *o = json_array_get(arr, i);
        tk_added *ad = &t->added[k];
        t->n_added = k + 1;
        if (!json_is_object(o)) return bs_fail(e, BS_EFORMAT, "%s: added_tokens[%zu] is not an object", fn, i);
        if ((rc = check_keys(t, o, keys, "added token", e)) != BS_OK) return rc;
        json_t *id = json_object_get(o, "id");
        if (!json_is_integer(id) || json_integer_value(id) < 0 || json_integer_value(id) >= MAX_VOCAB_ID)
            return bs_fail(e, BS_EFORMAT, "%s: added_tokens[%zu].id must be an integer in [0, %d)", fn, i, MAX_VOCAB_ID);
        ad->id = (int32_t)json_integer_value(id);
        const char *s;
        size_t len;
        if ((rc = get_str(t, o, "content", &s, &len, "added token", e)) != BS_OK) return rc;
        if (!s) return bs_fail(e, BS_EFORMAT, "%s: added_tokens[%zu].content missing", fn, i);
        if (!len) {
            memset(ad, 0, sizeof *ad);
            t->n_added = k;
            continue;
        }
        int32_t vid = tk_strmap_get(&t->vocab, s, len);
        int64_t hf = vid >= 0 ? vid : max_added < 0 ? vocab_len
                   : max_added >= vocab_len || vocab_len == 0 ? max_added + 1 : vocab_len;
        if (hf >= MAX_VOCAB_ID)
            return bs_fail(e, BS_EFORMAT, "%s: added token \"%s\" would get id %lld (ids must be below %d)", fn, s,
                           (long long)hf, MAX_VOCAB_ID);
        if (hf != ad->id)
            bs_log(BS_LOG_WARN, "tokenizer", "%s: added token \"%s\" has id %d in the file; Hugging Face "
                   "tokenizers gives it id %lld (%s), which is used", fn, s, (int)ad->id, (long long)hf,
                   vid >= 0 ? "its vocabulary id" : "the next id after the vocabulary and the added tokens");
        ad->id = (int32_t)hf;
        if (hf > max_added) max_added = hf;
        if (!(ad->content = malloc(len + 1))) return bs_fail(e, BS_ENOMEM, "%s: out of memory", fn);
        memcpy(ad->content, s, len + 1);
        ad->clen = len;
        if ((rc = to_cps(t, s, len, &ad->cps, &ad->ncp, "added token content", e)) != BS_OK) return rc;
        if ((rc = get_bool(t, o, "single_word", 0, &ad->single_word, "added token", e)) != BS_OK ||
            (rc = get_bool(t, o, "lstrip", 0, &ad->lstrip, "added token", e)) != BS_OK ||
            (rc = get_bool(t, o, "rstrip", 0, &ad->rstrip, "added token", e)) != BS_OK ||
            (rc = get_bool(t, o, "special", 0, &ad->special, "added token", e)) != BS_OK ||
            /* special tokens are not normalized unless the file says so (HF AddedToken::from) */
            (rc = get_bool(t, o, "normalized", !ad->special, &ad->normalized, "added token", e)) != BS_OK)
            return rc;
        int dup = 0;
        if (tk_strmap_put(&t->added_map, s, len, ad->id, &dup) != BS_OK)
            return bs_fail(e, BS_ENOMEM, "%s: out of memory", fn);
        if (dup) return bs_fail(e, BS_EFORMAT, "%s: added token \"%s\" is declared twice", fn, s);
        k++;
    }
    n = t->n_added;
    /* two contents on one id: one of them would silently encode as the other */
    const tk_added **by_id = malloc((n ? n : 1) * sizeof *by_id);
    if (!by_id) return bs_fail(e, BS_ENOMEM, "%s: out of memory", fn);
    for (size_t i = 0; i < n; i++) by_id[i] = &t->added[i];
    qsort(by_id, n, sizeof *by_id, added_by_id);
    rc = BS_OK;
    for (size_t i = 1; i < n && rc == BS_OK; i++)
        if (by_id[i]->id == by_id[i - 1]->id)
            rc = bs_fail(e, BS_EFORMAT, "%s: added tokens \"%s\" and \"%s\" have the same id %d", fn,
                         by_id[i - 1] < by_id[i] ? by_id[i - 1]->content : by_id[i]->content,
                         by_id[i - 1] < by_id[i] ? by_id[i]->content : by_id[i - 1]->content, (int)by_id[i]->id);
    free(by_id);
    return rc;
}

/* The pattern of a normalized added token is its content as the normalizer
 * rewrites it (HF matches it in normalized text). */
static int normalize_added(bs_tokenizer *t, tk_added *ad, bs_err *e) {
    tk_nstr s = {0};
    for (size_t k = 0; k < ad->ncp; k++) tk_nstr_push(&s, ad->cps[k], 0, 1);
    int rc = tk_normalize(t, &s);
    if (rc != BS_OK) {
        tk_nstr_free(&s);
        return bs_fail(e, rc, "%s: normalizing added token \"%s\" failed", t->fname, ad->content);
    }
    free(ad->cps);
    ad->cps = s.cp; /* hand the array over; the spans are not needed */
    ad->ncp = s.n;
    s.cp = NULL;
    tk_nstr_free(&s);
    return BS_OK;
}

/* Splits the added tokens into the raw pass and the normalized pass. */
static int prepare_added(bs_tokenizer *t, bs_err *e) {
    for (int p = 0; p < 2; p++)
        if (!(t->pass_idx[p] = malloc((t->n_added ? t->n_added : 1) * sizeof(size_t))))
            return bs_fail(e, BS_ENOMEM, "%s: out of memory", t->fname);
    int32_t max = t->n_ids - 1;
    for (size_t i = 0; i < t->n_added; i++) {
        tk_added *ad = &t->added[i];
        if (ad->id > max) max = ad->id;
        int p = ad->normalized ? 1 : 0, rc;
        t->pass_idx[p][t->pass_n[p]++] = i;
        if (ad->normalized && t->n_norm && ad->ncp && (rc = normalize_added(t, ad, e)) != BS_OK) return rc;
        if (ad->ncp) t->first_bits[p][(ad->cps[0] & 1023) >> 6] |= 1ull << (ad->cps[0] & 63);
    }
    t->max_id = max;
    if (!(t->added_of_id = malloc(((size_t)max + 1) * sizeof *t->added_of_id)))
        return bs_fail(e, BS_ENOMEM, "%s: out of memory", t->fname);
    for (int32_t i = 0; i <= max; i++) t->added_of_id[i] = -1;
    for (size_t i = t->n_added; i-- > 0;) t->added_of_id[t->added[i].id] = (int32_t)i;
    return BS_OK;
}

/* ---------------- normalizer ---------------- */

static int add_norm(bs_tokenizer *t, tk_norm nm, bs_err *e) {
    tk_norm *n = realloc(t->norm, (t->n_norm + 1) * sizeof *n);
    if (!n) {
        free(nm.a);
        free(nm.b);
        return bs_fail(e, BS_ENOMEM, "%s: out of memory", t->fname);
    }
    t->norm = n;
    t->norm[t->n_norm++] = nm;
    return BS_OK;
}

static int parse_norm(bs_tokenizer *t, json_t *n, int depth, bs_err *e) {
    static const char *const k_seq[] = { "type", "normalizers", NULL };
    static const char *const k_pre[] = { "type", "prepend", NULL };
    static const char *const k_rep[] = { "type", "pattern", "content", NULL };
    static const char *const k_nf[] = { "type", NULL };
    const char *fn = t->fname;
    int rc;
    if (depth > 16) return bs_fail(e, BS_EFORMAT, "%s: normalizer nested too deeply", fn);
    json_t *type = json_object_get(n, "type");
    if (!json_is_object(n) || !json_is_string(type)) return bs_fail(e, BS_EFORMAT, "%s: normalizer without a type", fn);
    const char *ty = json_string_value(type);
    tk_norm nm = {0};
    if (strcmp(ty, "Sequence") == 0) {
        json_t *list = json_object_get(n, "normalizers");
        if ((rc = check_keys(t, n, k_seq, "normalizer Sequence", e)) != BS_OK) return rc;
        if (!json_is_array(list)) return bs_fail(e, BS_EFORMAT, "%s: normalizer Sequence without normalizers", fn);
        for (size_t i = 0; i < json_array_size(list); i++)
            if ((rc = parse_norm(t, json_array_get(list, i), depth + 1, e)) != BS_OK) return rc;
        return BS_OK;
    }
    if (strcmp(ty, "Prepend") == 0) {
        const char *s;
        size_t len;
        if ((rc = check_keys(t, n, k_pre, "normalizer Prepend", e)) != BS_OK) return rc;
        if ((rc = get_str(t, n, "prepend", &s, &len, "normalizer Prepend", e)) != BS_OK) return rc;
        if (!s) return bs_fail(e, BS_EFORMAT, "%s: normalizer Prepend without prepend", fn);
        nm.kind = TN_PREPEND;
        if ((rc = to_cps(t, s, len, &nm.a, &nm.na, "normalizer Prepend", e)) != BS_OK) return rc;
        return add_norm(t, nm, e);
    }
    if (strcmp(ty, "Replace") == 0) {
        json_t *pat = json_object_get(n, "pattern");
        const char *s, *c;
        size_t ls, lc;
        if ((rc = check_keys(t, n, k_rep, "normalizer Replace", e)) != BS_OK) return rc;
        if (json_is_object(pat) && json_object_get(pat, "Regex"))
            return bs_fail(e, BS_EUNSUP, "%s: unsupported normalizer Replace with a Regex pattern", fn);
        if (!json_is_object(pat) || json_object_size(pat) != 1 || !json_is_string(json_object_get(pat, "String")))
            return bs_fail(e, BS_EFORMAT, "%s: normalizer Replace pattern must be {\"String\": s}", fn);
        s = json_string_value(json_object_get(pat, "String"));
        ls = json_string_length(json_object_get(pat, "String"));
        if (ls == 0) return bs_fail(e, BS_EFORMAT, "%s: normalizer Replace with an empty pattern", fn);
        if ((rc = get_str(t, n, "content", &c, &lc, "normalizer Replace", e)) != BS_OK) return rc;
        if (!c) return bs_fail(e, BS_EFORMAT, "%s: normalizer Replace without content", fn);
        nm.kind = TN_REPLACE;
        if ((rc = to_cps(t, s, ls, &nm.a, &nm.na, "normalizer Replace pattern", e)) != BS_OK) return rc;
        if ((rc = to_cps(t, c, lc, &nm.b, &nm.nb, "normalizer Replace content", e)) != BS_OK) {
            free(nm.a);
            return rc;
        }
        return add_norm(t, nm, e);
    }
    static const struct { const char *name; int kind; } nf[] = {
        { "NFC", TN_NFC }, { "NFD", TN_NFD }, { "NFKC", TN_NFKC }, { "NFKD", TN_NFKD } };
    for (size_t i = 0; i < 4; i++) {
        if (strcmp(ty, nf[i].name) != 0) continue;
        if ((rc = check_keys(t, n, k_nf, "normalizer", e)) != BS_OK) return rc;
        nm.kind = nf[i].kind;
        return add_norm(t, nm, e);
    }
    return bs_fail(e, BS_EUNSUP, "%s: unsupported normalizer type \"%s\"", fn, ty);
}

/* ---------------- pre-tokenizer ---------------- */

static int parse_pretok(bs_tokenizer *t, json_t *pt, bs_err *e) {
    static const char *const keys[] = { "type", "replacement", "prepend_scheme", "split",
                                        "add_prefix_space", "str_rep", NULL };
    const char *fn = t->fname;
    if (!pt || json_is_null(pt)) return BS_OK;
    if (!(t->pt_json = json_dumps(pt, JSON_COMPACT | JSON_ENCODE_ANY)))
        return bs_fail(e, BS_ENOMEM, "%s: out of memory", fn);
    json_t *type = json_object_get(pt, "type");
    if (!json_is_object(pt) || !json_is_string(type) || strcmp(json_string_value(type), "Metaspace") != 0)
        return bs_fail(e, BS_EUNSUP, "%s: unsupported pre_tokenizer %s", fn, t->pt_json);
    int rc = check_keys(t, pt, keys, "pre_tokenizer Metaspace", e);
    if (rc != BS_OK) return rc;
    t->pt_metaspace = 1;
    if ((rc = get_char(t, pt, "replacement", &t->pt_repl, "pre_tokenizer Metaspace", e)) != BS_OK) return rc;
    const char *sr;
    if ((rc = get_str(t, pt, "str_rep", &sr, NULL, "pre_tokenizer Metaspace", e)) != BS_OK) return rc;
    if (sr && strcmp(sr, json_string_value(json_object_get(pt, "replacement"))) != 0)
        return bs_fail(e, BS_EUNSUP, "%s: pre_tokenizer Metaspace str_rep differs from replacement", fn);
    if ((rc = parse_scheme(t, pt, &t->pt_scheme, "pre_tokenizer Metaspace", e)) != BS_OK) return rc;
    if ((rc = get_bool(t, pt, "split", 1, &t->pt_split, "pre_tokenizer Metaspace", e)) != BS_OK) return rc;

    const char *ps = json_string_value(json_object_get(pt, "prepend_scheme"));
    t->pt_basal_exact = json_object_size(pt) == 4 && t->pt_repl == TK_METASPACE_CP &&
                        json_is_string(json_object_get(pt, "replacement")) &&
                        strcmp(json_string_value(json_object_get(pt, "replacement")), "\xE2\x96\x81") == 0 &&
                        ps && (strcmp(ps, "always") == 0 || strcmp(ps, "first") == 0) &&
                        json_is_false(json_object_get(pt, "split"));
    return BS_OK;
}

/* ---------------- decoder ---------------- */

static int add_dec(bs_tokenizer *t, tk_dec d) {
    tk_dec *n = realloc(t->dec, (t->n_dec + 1) * sizeof *n);
    if (!n) {
        free(d.pat);
        free(d.rep);
        return BS_ENOMEM;
    }
    t->dec = n;
    t->dec[t->n_dec++] = d;
    return BS_OK;
}

/* Errors here are not load errors: they are kept in dec_err for decode. */
static int parse_dec(bs_tokenizer *t, json_t *d, int depth, bs_err *e) {
    static const char *const k_seq[] = { "type", "decoders", NULL };
    static const char *const k_rep[] = { "type", "pattern", "content", NULL };
    static const char *const k_strip[] = { "type", "content", "start", "stop", NULL };
    static const char *const k_ms[] = { "type", "replacement", "prepend_scheme", "split",
                                        "add_prefix_space", "str_rep", NULL };
    static const char *const k_none[] = { "type", NULL };
    const char *fn = t->fname;
    int rc;
    if (depth > 16) return bs_fail(e, BS_EFORMAT, "%s: decoder nested too deeply", fn);
    json_t *type = json_object_get(d, "type");
    if (!json_is_object(d) || !json_is_string(type)) return bs_fail(e, BS_EFORMAT, "%s: decoder without a type", fn);
    const char *ty = json_string_value(type);
    tk_dec dec = {0};
    if (strcmp(ty, "Sequence") == 0) {
        json_t *list = json_object_get(d, "decoders");
        if ((rc = check_keys(t, d, k_seq, "decoder Sequence", e)) != BS_OK) return rc;
        if (!json_is_array(list)) return bs_fail(e, BS_EFORMAT, "%s: decoder Sequence without decoders", fn);
        for (size_t i = 0; i < json_array_size(list); i++)
            if ((rc = parse_dec(t, json_array_get(list, i), depth + 1, e)) != BS_OK) return rc;
        return BS_OK;
    }
    if (strcmp(ty, "Replace") == 0) {
        json_t *pat = json_object_get(d, "pattern");
        json_t *con = json_object_get(d, "content");
        if ((rc = check_keys(t, d, k_rep, "decoder Replace", e)) != BS_OK) return rc;
        if (!json_is_object(pat) || !json_is_string(json_object_get(pat, "String")) || !json_is_string(con))
            return bs_fail(e, BS_EUNSUP, "%s: decoder Replace supports only {\"String\": s} patterns", fn);
        json_t *ps = json_object_get(pat, "String");
        dec.kind = TD_REPLACE;
        dec.npat = json_string_length(ps);
        dec.nrep = json_string_length(con);
        if (!dec.npat) return bs_fail(e, BS_EFORMAT, "%s: decoder Replace with an empty pattern", fn);
        dec.pat = malloc(dec.npat + 1);
        dec.rep = malloc(dec.nrep + 1);
        if (!dec.pat || !dec.rep) { free(dec.pat); free(dec.rep); return BS_ENOMEM; }
        memcpy(dec.pat, json_string_value(ps), dec.npat + 1);
        memcpy(dec.rep, json_string_value(con), dec.nrep + 1);
        return add_dec(t, dec);
    }
    if (strcmp(ty, "ByteFallback") == 0 || strcmp(ty, "Fuse") == 0) {
        if ((rc = check_keys(t, d, k_none, "decoder", e)) != BS_OK) return rc;
        dec.kind = ty[0] == 'B' ? TD_BYTEFALLBACK : TD_FUSE;
        return add_dec(t, dec);
    }
    if (strcmp(ty, "Strip") == 0) {
        json_t *st = json_object_get(d, "start"), *sp = json_object_get(d, "stop");
        if ((rc = check_keys(t, d, k_strip, "decoder Strip", e)) != BS_OK) return rc;
        if ((rc = get_char(t, d, "content", &dec.ch, "decoder Strip", e)) != BS_OK) return rc;
        if (!json_is_integer(st) || !json_is_integer(sp) || json_integer_value(st) < 0 || json_integer_value(sp) < 0)
            return bs_fail(e, BS_EFORMAT, "%s: decoder Strip start/stop must be non-negative integers", fn);
        dec.kind = TD_STRIP;
        dec.start = (long)json_integer_value(st);
        dec.stop = (long)json_integer_value(sp);
        return add_dec(t, dec);
    }
    if (strcmp(ty, "Metaspace") == 0) {
        if ((rc = check_keys(t, d, k_ms, "decoder Metaspace", e)) != BS_OK) return rc;
        if ((rc = get_char(t, d, "replacement", &dec.ch, "decoder Metaspace", e)) != BS_OK) return rc;
        if ((rc = parse_scheme(t, d, &dec.scheme, "decoder Metaspace", e)) != BS_OK) return rc;
        dec.kind = TD_METASPACE;
        return add_dec(t, dec);
    }
    return bs_fail(e, BS_EUNSUP, "%s: unsupported decoder type \"%s\"", fn, ty);
}

/* ---------------- load / free ---------------- */

void bs_tokenizer_free(bs_tokenizer *t) {
    if (!t) return;
    free(t->fname);
    tk_strmap_free(&t->vocab);
    free(t->id_off);
    free(t->id_len);
    tk_mergemap_free(&t->merges);
    free(t->prefix);
    free(t->suffix);
    free(t->ascii_id);
    for (size_t i = 0; i < t->n_added; i++) {
        free(t->added[i].content);
        free(t->added[i].cps);
    }
    free(t->added);
    tk_strmap_free(&t->added_map);
    free(t->added_of_id);
    free(t->pass_idx[0]);
    free(t->pass_idx[1]);
    for (size_t i = 0; i < t->n_norm; i++) {
        free(t->norm[i].a);
        free(t->norm[i].b);
    }
    free(t->norm);
    free(t->pt_json);
    for (size_t i = 0; i < t->n_dec; i++) {
        free(t->dec[i].pat);
        free(t->dec[i].rep);
    }
    free(t->dec);
    free(t->dec_err);
    free(t);
}

int bs_tokenizer_load_mem(bs_tokenizer **out, const char *json, size_t len, const char *fname, bs_err *e) {
    if (out) *out = NULL;
    if (!out || !json) return bs_fail(e, BS_EINVAL, "tokenizer: bad arguments to load");
    if (!fname) fname = "tokenizer.json";
    int rc;
    json_t *root = NULL;
    bs_tokenizer *t = calloc(1, sizeof *t);
    if (!t || !(t->fname = strdup(fname))) {
        rc = bs_fail(e, BS_ENOMEM, "%s: out of memory", fname);
        goto done;
    }
    json_error_t je;
    root = json_loadb(json, len, JSON_ALLOW_NUL, &je);
    if (!root) {
        rc = bs_fail(e, BS_EFORMAT, "%s: invalid JSON at line %d column %d: %s", fname, je.line, je.column, je.text);
        goto done;
    }
    if (!json_is_object(root)) {
        rc = bs_fail(e, BS_EFORMAT, "%s: top level is not an object", fname);
        goto done;
    }
    if ((rc = parse_model(t, json_object_get(root, "model"), e)) != BS_OK) goto done;
    if ((rc = parse_added(t, json_object_get(root, "added_tokens"), e)) != BS_OK) goto done;
    json_t *norm = json_object_get(root, "normalizer");
    t->has_normalizer = norm && !json_is_null(norm);
    if (t->has_normalizer && (rc = parse_norm(t, norm, 0, e)) != BS_OK) goto done;
    if ((rc = prepare_added(t, e)) != BS_OK) goto done;
    if ((rc = parse_pretok(t, json_object_get(root, "pre_tokenizer"), e)) != BS_OK) goto done;
    json_t *dec = json_object_get(root, "decoder");
    t->has_decoder = dec && !json_is_null(dec);
    if (t->has_decoder) {
        bs_err de = {0};
        int drc = parse_dec(t, dec, 0, &de);
        if (drc == BS_ENOMEM) {
            rc = bs_fail(e, BS_ENOMEM, "%s: out of memory", fname);
            goto done;
        }
        if (drc != BS_OK && !(t->dec_err = strdup(de.msg))) {
            rc = bs_fail(e, BS_ENOMEM, "%s: out of memory", fname);
            goto done;
        }
    }
    /* truncation, padding and post_processor are ignored (spec 01 §1.4 rules 4-5) */
    *out = t;
    t = NULL;
    rc = BS_OK;
done:
    if (root) json_decref(root);
    bs_tokenizer_free(t);
    return rc;
}

int bs_tokenizer_load(bs_tokenizer **out, const char *path, bs_err *e) {
    if (out) *out = NULL;
    if (!path) return bs_fail(e, BS_EINVAL, "tokenizer: no path");
    char *data = NULL;
    size_t len = 0;
    int rc = bs_read_regular_file(path, &data, &len, BS_MODEL_FILE_MAX, e);
    if (rc != BS_OK) return rc;
    rc = bs_tokenizer_load_mem(out, data, len, path, e);
    free(data);
    return rc;
}

/* ---------------- lookups ---------------- */

int32_t bs_tokenizer_token_to_id(const bs_tokenizer *t, const char *token) {
    if (!t || !token) return -1;
    size_t len = strlen(token);
    int32_t id = tk_strmap_get(&t->added_map, token, len);
    return id >= 0 ? id : tk_strmap_get(&t->vocab, token, len);
}

const char *bs_tokenizer_id_to_token(const bs_tokenizer *t, int32_t id) {
    if (!t || id < 0 || id > t->max_id) return NULL;
    if (t->added_of_id[id] >= 0) return t->added[t->added_of_id[id]].content;
    if (id < t->n_ids && t->id_off[id] >= 0) return t->vocab.pool + t->id_off[id];
    return NULL;
}

int32_t bs_tokenizer_max_id(const bs_tokenizer *t) { return t ? t->max_id : -1; }

int bs_tokenizer_check_basal(bs_tokenizer *t, bs_err *e) {
    if (!t) return bs_fail(e, BS_EINVAL, "tokenizer: no tokenizer to check");
    if (!t->pt_basal_exact)
        return bs_fail(e, BS_EUNSUP, "%s: unsupported pre_tokenizer %s", t->fname, t->pt_json ? t->pt_json : "null");
    if (t->has_normalizer) return bs_fail(e, BS_EUNSUP, "%s: unexpected normalizer", t->fname);
    /* rule 3 (model BPE) holds for every file this engine loads */
    /* transformers 5 rebuilds the Llama pre-tokenizer with "first" (spec 01 §1.4) */
    t->pt_scheme = TP_FIRST;
    return BS_OK;
}
