#include "engine/triesize.h"

#include <stdlib.h>
#include <string.h>

#include "basal.h"

void bs_tc_init(bs_trie_counter *c) { memset(c, 0, sizeof *c); }

void bs_tc_free(bs_trie_counter *c) {
    free(c->seq);
    free(c->len);
    memset(c, 0, sizeof *c);
}

void bs_tc_reset(bs_trie_counter *c) {
    c->n = 0;
    c->tokens = 0;
}

static int32_t lcp(const int32_t *a, int32_t na, const int32_t *b, int32_t nb) {
    int32_t n = na < nb ? na : nb, i = 0;
    while (i < n && a[i] == b[i]) i++;
    return i;
}

/* <0, 0, >0 as lexicographic order; a proper prefix sorts first. */
static int cmp_seq(const int32_t *a, int32_t na, const int32_t *b, int32_t nb) {
    int32_t l = lcp(a, na, b, nb);
    if (l < na && l < nb) return a[l] < b[l] ? -1 : 1;
    return (na > nb) - (na < nb);
}

/* Index of the least element >= p (n if none). */
static size_t lower_bound(const bs_trie_counter *c, const int32_t *p, int32_t n) {
    size_t lo = 0, hi = c->n;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (cmp_seq(c->seq[mid], c->len[mid], p, n) < 0) lo = mid + 1;
        else hi = mid;
    }
    return lo;
}

static int32_t best_shared(const bs_trie_counter *c, const int32_t *p, int32_t n) {
    size_t i = lower_bound(c, p, n);
    int32_t best = 0, l;
    if (i < c->n && (l = lcp(p, n, c->seq[i], c->len[i])) > best) best = l;
    if (i > 0 && (l = lcp(p, n, c->seq[i - 1], c->len[i - 1])) > best) best = l;
    return best;
}

int64_t bs_tc_growth(const bs_trie_counter *c, const int32_t *const *p, const int32_t *len, size_t n) {
    int64_t g = 0;
    for (size_t i = 0; i < n; i++) {
        int32_t best = best_shared(c, p[i], len[i]);
        for (size_t j = 0; j < i; j++) {
            int32_t l = lcp(p[i], len[i], p[j], len[j]);
            if (l > best) best = l;
        }
        g += len[i] - best;
    }
    return g;
}

int bs_tc_insert(bs_trie_counter *c, const int32_t *const *p, const int32_t *len, size_t n) {
    if (c->n + n > c->cap) {
        size_t ncap = c->cap ? c->cap : 16;
        while (ncap < c->n + n) ncap *= 2;
        const int32_t **s = realloc(c->seq, ncap * sizeof *s);
        if (!s) return BS_ENOMEM;
        c->seq = s;
        int32_t *l = realloc(c->len, ncap * sizeof *l);
        if (!l) return BS_ENOMEM;
        c->len = l;
        c->cap = ncap;
    }
    c->tokens += bs_tc_growth(c, p, len, n);
    for (size_t i = 0; i < n; i++) {
        size_t at = lower_bound(c, p[i], len[i]);
        memmove(c->seq + at + 1, c->seq + at, (c->n - at) * sizeof *c->seq);
        memmove(c->len + at + 1, c->len + at, (c->n - at) * sizeof *c->len);
        c->seq[at] = p[i];
        c->len[at] = len[i];
        c->n++;
    }
    return BS_OK;
}
