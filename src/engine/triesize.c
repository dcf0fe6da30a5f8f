#include "engine/triesize.h"

#include <stdlib.h>
#include <string.h>

#include "basal.h"

struct bs_trie_node {
    int32_t parent, token;
    int32_t next; /* the next node of the same bucket, or -1 */
};

void bs_tc_init(bs_trie_counter *c) { memset(c, 0, sizeof *c); }

void bs_tc_free(bs_trie_counter *c) {
    free(c->nodes);
    free(c->bucket);
    memset(c, 0, sizeof *c);
}

void bs_tc_reset(bs_trie_counter *c) {
    c->n_nodes = c->nodes ? 1 : 0;
    c->tokens = 0;
    for (size_t i = 0; i < c->n_buckets; i++) c->bucket[i] = -1;
}

static size_t hash(const bs_trie_counter *c, int32_t parent, int32_t token) {
    uint64_t x = ((uint64_t)(uint32_t)parent << 32) | (uint32_t)token;
    x ^= x >> 33;
    x *= 0xff51afd7ed558ccdull;
    x ^= x >> 33;
    x *= 0xc4ceb9fe1a85ec53ull;
    x ^= x >> 33;
    return (size_t)x & (c->n_buckets - 1);
}

/* Chains are rebuilt in creation order, each node pushed at its head, so in
 * every chain a later node stands before an earlier one: undoing the newest
 * nodes (bs_tc_growth) only ever pops chain heads. */
static int rehash(bs_trie_counter *c, size_t n_buckets) {
    int32_t *b = malloc(n_buckets * sizeof *b);
    if (!b) return BS_ENOMEM;
    free(c->bucket);
    c->bucket = b;
    c->n_buckets = n_buckets;
    for (size_t i = 0; i < n_buckets; i++) b[i] = -1;
    for (size_t k = 1; k < c->n_nodes; k++) {
        size_t h = hash(c, c->nodes[k].parent, c->nodes[k].token);
        c->nodes[k].next = b[h];
        b[h] = (int32_t)k;
    }
    return BS_OK;
}

static int reserve(bs_trie_counter *c) {
    if (!c->nodes) {
        c->cap = 256;
        if (!(c->nodes = malloc(c->cap * sizeof *c->nodes))) return BS_ENOMEM;
        c->nodes[0] = (bs_trie_node){-1, -1, -1};
        c->n_nodes = 1;
    }
    if (c->n_nodes == c->cap) {
        if (c->cap >= (size_t)INT32_MAX) return BS_ENOMEM;
        bs_trie_node *nn = realloc(c->nodes, 2 * c->cap * sizeof *nn);
        if (!nn) return BS_ENOMEM;
        c->nodes = nn;
        c->cap *= 2;
    }
    if (c->n_nodes >= c->n_buckets / 2 && rehash(c, c->n_buckets ? 2 * c->n_buckets : 512) < 0) return BS_ENOMEM;
    return BS_OK;
}

/* Walks p from the root, adding the nodes it lacks; returns how many it added. */
static int64_t walk(bs_trie_counter *c, const int32_t *p, int32_t len) {
    int64_t added = 0;
    int32_t cur = 0;
    for (int32_t i = 0; i < len; i++) {
        if (reserve(c) < 0) return BS_ENOMEM;
        size_t h = hash(c, cur, p[i]);
        int32_t k = c->bucket[h];
        while (k >= 0 && (c->nodes[k].parent != cur || c->nodes[k].token != p[i])) k = c->nodes[k].next;
        if (k < 0) {
            k = (int32_t)c->n_nodes++;
            c->nodes[k] = (bs_trie_node){cur, p[i], c->bucket[h]};
            c->bucket[h] = k;
            added++;
        }
        cur = k;
    }
    return added;
}

/* Removes the nodes made after the first `keep` (newest first). */
static void undo(bs_trie_counter *c, size_t keep) {
    while (c->n_nodes > keep) {
        size_t k = --c->n_nodes;
        c->bucket[hash(c, c->nodes[k].parent, c->nodes[k].token)] = c->nodes[k].next;
    }
}

int64_t bs_tc_growth(bs_trie_counter *c, const int32_t *const *p, const int32_t *len, size_t n) {
    if (reserve(c) < 0) return BS_ENOMEM;
    size_t keep = c->n_nodes;
    int64_t g = 0;
    for (size_t i = 0; i < n; i++) {
        int64_t a = walk(c, p[i], len[i]);
        if (a < 0) { g = a; break; }
        g += a;
    }
    undo(c, keep);
    return g;
}

int bs_tc_insert(bs_trie_counter *c, const int32_t *const *p, const int32_t *len, size_t n) {
    for (size_t i = 0; i < n; i++) {
        int64_t a = walk(c, p[i], len[i]);
        if (a < 0) {
            c->tokens = c->nodes ? (int64_t)c->n_nodes - 1 : 0;
            return BS_ENOMEM;
        }
        c->tokens += a;
    }
    return BS_OK;
}
