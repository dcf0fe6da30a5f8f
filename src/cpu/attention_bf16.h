/* Attention of the bf16 compute mode (dtype bf16 on the CPU): the blocks,
 * keys and invariance of attention.h with bf16 inputs to QK^T and PV; the
 * definition is at the top of attention_bf16.c. */
#ifndef BS_ATTENTION_BF16_H
#define BS_ATTENTION_BF16_H

#include <stddef.h>

#include "cpu/attention.h"

/* Queries per block (more than the f32 mode's: a tile computes several
 * times faster, so its gather needs more rows to amortise it), and the
 * per-thread scratch for blocks of at most that many. Any block size gives
 * the same bits. */
int bs_attn_bf16_block_queries(int rep);
size_t bs_attn_bf16_scratch_bytes(int hd, int rep);
/* bs_attn_run's twin; k and v must hold bf16 values (bs_attn_round_bf16). */
void bs_attn_bf16_run(const bs_attn_block *b, void *scratch);
/* The kernel: "amx-bf16", "avx512-bf16", "bf16-avx2" or "bf16-portable", the GEMM's bf16 kernel. */
const char *bs_attn_bf16_kernel_name(void);
/* Rounds x to the nearest bf16 in place: the forward does it to k and v once
 * per layer, before a prefix is captured, so that cached and inline keys
 * are the same values. */
void bs_attn_round_bf16(float *x, size_t n);

/* For tests: two pieces of a tile as the current kernel computes them. The
 * dot products (before the scale) of nq queries (rounded to bf16 here) with
 * nk <= 128 keys of hd bf16 values, into s[i * 128 + j] (zero past nk);
 * -1 when out of memory. */
int bs_attn_bf16_scores_probe(const float *q, int nq, const float *k, int nk, int hd, float *s);
/* The weights p[0..127] (bf16 bits; zero from vis) of scores s[0..vis-1]
 * for the row maximum mx, and their sum. */
float bs_attn_bf16_weights_probe(const float *s, int vis, float mx, float scale, uint16_t *p);

#endif
