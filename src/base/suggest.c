/* Edit distance and the "did you mean" choice of suggest.h. */
#include <stdlib.h>
#include <string.h>

#include "base/suggest.h"

size_t bs_edit_distance(const char *a, const char *b) {
    size_t n = strlen(a), m = strlen(b);
    if (!n) return m;
    if (!m) return n;
    /* three rows: the transposition step looks two rows back */
    size_t *rows = malloc(3 * (m + 1) * sizeof *rows);
    if (!rows) return (size_t)-1; /* "not close": the caller suggests nothing */
    size_t *pp = rows, *p = rows + (m + 1), *c = rows + 2 * (m + 1);
    for (size_t j = 0; j <= m; j++) p[j] = j;
    for (size_t i = 1; i <= n; i++) {
        c[0] = i;
        for (size_t j = 1; j <= m; j++) {
            size_t cost = a[i - 1] != b[j - 1];
            size_t v = p[j - 1] + cost;
            if (p[j] + 1 < v) v = p[j] + 1;
            if (c[j - 1] + 1 < v) v = c[j - 1] + 1;
            if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1] && pp[j - 2] + 1 < v) v = pp[j - 2] + 1;
            c[j] = v;
        }
        size_t *t = pp;
        pp = p;
        p = c;
        c = t;
    }
    size_t d = p[m];
    free(rows);
    return d;
}

const char *bs_suggest(const char *word, const char *const *cands, size_t n) {
    size_t len = strlen(word), limit = len <= 3 ? 1 : len <= 6 ? 2 : 3, best_d = (size_t)-1;
    const char *best = NULL, *prefix_of = NULL;
    size_t n_prefix = 0;
    for (size_t i = 0; i < n; i++) {
        if (!cands[i]) continue;
        size_t d = bs_edit_distance(word, cands[i]);
        if (d < best_d) {
            best_d = d;
            best = cands[i];
        }
        if (len >= 3 && !strncmp(cands[i], word, len)) {
            prefix_of = cands[i];
            n_prefix++;
        }
    }
    if (best_d == 0) return NULL; /* a known word is not misspelt */
    if (best && best_d <= limit) return best;
    return n_prefix == 1 ? prefix_of : NULL;
}
