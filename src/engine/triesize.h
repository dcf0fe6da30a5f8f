/* Trie size, the cost estimate of spec 04 §4: how many tokens the compressed
 * prefix trie of a growing set of prompts holds, computed from longest common
 * prefixes with lexicographic neighbours. Prompts are borrowed, not copied. */
#ifndef BS_TRIESIZE_H
#define BS_TRIESIZE_H

#include <stddef.h>
#include <stdint.h>

typedef struct bs_trie_counter {
    const int32_t **seq;  /* sorted lexicographically */
    int32_t *len;
    size_t n, cap;
    int64_t tokens;       /* running total */
} bs_trie_counter;

void bs_tc_init(bs_trie_counter *c);
void bs_tc_free(bs_trie_counter *c);
void bs_tc_reset(bs_trie_counter *c);
/* Growth of adding prompts p[0..n) in this order (C2); the set is unchanged. */
int64_t bs_tc_growth(const bs_trie_counter *c, const int32_t *const *p, const int32_t *len, size_t n);
/* Adds the growth to the total and the prompts to the set (C3). 0 or BS_ENOMEM. */
int bs_tc_insert(bs_trie_counter *c, const int32_t *const *p, const int32_t *len, size_t n);

#endif
