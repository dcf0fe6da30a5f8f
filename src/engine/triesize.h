/* Trie size, the cost estimate of spec 04 §4: how many tokens the compressed
 * prefix trie of a growing set of prompts holds. That is the number of
 * distinct non-empty prefixes of the prompts, so the counter keeps a plain
 * token trie (one node per distinct prefix, children found by hashing (parent,
 * token)) and a prompt costs one walk over its tokens: linear in the tokens,
 * whatever the number of prompts (no pairwise comparison). Prompts are read,
 * not kept. */
#ifndef BS_TRIESIZE_H
#define BS_TRIESIZE_H

#include <stddef.h>
#include <stdint.h>

typedef struct bs_trie_node bs_trie_node;

typedef struct bs_trie_counter {
    bs_trie_node *nodes;  /* nodes[0] is the root; node k > 0 is one distinct prefix */
    size_t n_nodes, cap;
    int32_t *bucket;      /* chain heads by hash of (parent, token); -1 = empty */
    size_t n_buckets;     /* a power of two */
    int64_t tokens;       /* running total: n_nodes - 1 */
} bs_trie_counter;

void bs_tc_init(bs_trie_counter *c);
void bs_tc_free(bs_trie_counter *c);
/* Empties the set (keeps the memory). */
void bs_tc_reset(bs_trie_counter *c);
/* Growth of adding prompts p[0..n) in this order (C2); the set is left as it
 * was. BS_ENOMEM (negative) if memory runs out. */
int64_t bs_tc_growth(bs_trie_counter *c, const int32_t *const *p, const int32_t *len, size_t n);
/* Adds the prompts to the set and their growth to the total (C3). 0 or
 * BS_ENOMEM (the set then holds a prefix of the prompts' tokens, counted). */
int bs_tc_insert(bs_trie_counter *c, const int32_t *const *p, const int32_t *len, size_t n);

#endif
