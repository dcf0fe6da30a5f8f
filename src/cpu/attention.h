/* Key-tiled attention on the CPU (spec 05 §9, §13.2 A3).
 *
 * One call computes a block of consecutive queries of one tree unit for the
 * query heads of one kv head. Keys are walked in ordinal order (ordinal =
 * position in the prompt, 05 §9 V4) in tiles of BS_ATTN_TILE ordinals:
 * 0..63, 64..127, ... Each tile's keys are read once for the whole block
 * (all its queries and heads) instead of once per (query, head), which is
 * what keeps a 16k-token state from being memory-bound.
 *
 * Per (query, head) the online softmax visits exactly the keys with ordinal
 * <= its position, tile by tile, with a fixed update: m' = max(m, max s),
 * c = exp(m - m'), l = l*c + sum exp(s - m') (a fixed tree over the tile),
 * o = o*c then one FMA chain over the tile's keys in ordinal order. Every
 * step depends only on the query's own prompt, never on the block it was
 * computed in, the other units of the forward, or the thread: bitwise batch
 * invariance. The portable, AVX2 and AVX-512 kernels perform the same
 * arithmetic per output (fmaf, one exp approximation lane by lane, the same
 * partial-sum tree), so they give the same bits; the process picks one once
 * (with the GEMM kernel).
 *
 * The bf16 compute mode has its own definition with bf16 inputs to both
 * products and 128-ordinal tiles (attention_bf16.h); the same invariance
 * holds within each of its kernels. */
#ifndef BS_ATTENTION_H
#define BS_ATTENTION_H

#include <stddef.h>

enum { BS_ATTN_TILE = 64 };

/* The key sequence of one unit in ordinal order, as up to 9 contiguous
 * segments (cached prefix, ancestor ranges, own block): segment s holds len[s]
 * keys, key i at k[s] + i*stride (likewise v). Pointers are at kv head 0. */
typedef struct bs_attn_keys {
    int n_seg;
    const float *k[10], *v[10];
    int len[10];
    size_t stride;
} bs_attn_keys;

typedef struct bs_attn_block {
    const bs_attn_keys *keys;
    int g;                 /* kv head */
    int rep;               /* query heads per kv head; head h = g*rep + i */
    int hd;
    const float *q;        /* first query's row (all heads); rows q_stride apart */
    size_t q_stride;
    float *out;            /* first query's output row (all heads); may be q itself (same rows, same stride) */
    size_t out_stride;
    int nq;                /* queries in the block */
    int pos0;              /* position (= last visible ordinal) of the first query; query i has pos0 + i */
} bs_attn_block;

/* Queries per block for `rep` heads per kv head: enough rows (queries x
 * heads) to amortise a key tile. Any value gives the same bits. */
int bs_attn_block_queries(int rep);
/* Per-thread scratch bytes for bs_attn_run with this head size and rep. */
size_t bs_attn_scratch_bytes(int hd, int rep);
/* Computes a block; scratch is bs_attn_scratch_bytes(hd, rep) bytes, 64-byte aligned. */
void bs_attn_run(const bs_attn_block *b, void *scratch);
/* The kernel family chosen for head size hd ("avx512", "avx2-fma" or "generic";
 * all give the same bits). */
const char *bs_attn_kernel_name(int hd);
/* Internal, for both modes' drivers: the next n keys of a unit in ordinal
 * order from segment *seg, key *in_seg (both advanced), at offset off of
 * each row: k and v pointers. */
static inline void bs_attn_walk_keys(const bs_attn_keys *ks, size_t off, int n, int *seg, int *in_seg,
                                     const float **kp, const float **vp) {
    for (int j = 0; j < n; j++) {
        while (*in_seg == ks->len[*seg]) {
            ++*seg;
            *in_seg = 0;
        }
        kp[j] = ks->k[*seg] + (size_t)*in_seg * ks->stride + off;
        vp[j] = ks->v[*seg] + (size_t)*in_seg * ks->stride + off;
        ++*in_seg;
    }
}
/* The key and value rows of a unit's tiles of `tile` ordinals: the current
 * tile's (kp, vp) and the next one's (kn, vn), walked and prefetched (towards
 * L2, bytes per row) one tile ahead, so that a tile's gather does not wait
 * on each key row in turn (the keys of a long prompt are in L3 or memory). */
typedef struct {
    const float **kp, **vp, **kn, **vn; /* tile pointers each, from the caller's scratch */
    int seg, in_seg;
} bs_attn_tiles;

static inline void bs_attn_tiles_ahead(bs_attn_tiles *t, const bs_attn_keys *ks, size_t off, int t0, int n_keys,
                                       int tile, size_t bytes) {
    int n = n_keys - t0 - tile < tile ? n_keys - t0 - tile : tile;
    if (n <= 0) return;
    bs_attn_walk_keys(ks, off, n, &t->seg, &t->in_seg, t->kn, t->vn);
    for (int j = 0; j < n; j++)
        for (size_t b = 0; b < bytes; b += 64) {
            __builtin_prefetch((const char *)t->kn[j] + b, 0, 2);
            __builtin_prefetch((const char *)t->vn[j] + b, 0, 2);
        }
}

/* Walks the first tile into kp, vp. */
static inline void bs_attn_tiles_start(bs_attn_tiles *t, const bs_attn_keys *ks, size_t off, int n_keys, int tile) {
    t->seg = t->in_seg = 0;
    bs_attn_walk_keys(ks, off, n_keys < tile ? n_keys : tile, &t->seg, &t->in_seg, t->kp, t->vp);
}

/* The next tile becomes the current one. */
static inline void bs_attn_tiles_next(bs_attn_tiles *t) {
    const float **k = t->kp, **v = t->vp;
    t->kp = t->kn;
    t->vp = t->vn;
    t->kn = k;
    t->vn = v;
}

#endif
