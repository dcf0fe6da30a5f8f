/* Attention inner loops (spec 05 §7.4, §13.2 A3): scores of one query head
 * against a run of keys, the exponentials and their sum, and the weighted sum
 * of values. Each result depends only on its own inputs and hd: the portable
 * and the AVX2 versions differ from each other, but the process picks one once
 * (with the GEMM kernel), so batch invariance holds within a process. */
#ifndef BS_ATTENTION_H
#define BS_ATTENTION_H

#include <stddef.h>

typedef struct bs_attn_kernels {
    /* out[i] = (q . k[i*stride .. +hd]) * scale for i < n */
    void (*scores)(const float *q, const float *k, size_t stride, int n, int hd, float scale, float *out);
    /* s[i] = exp(s[i] - mx) for i < n; returns their sum (a fixed order over i) */
    float (*exp_sum)(float *s, int n, float mx);
    /* o[d] += sum over i < n, in order, of p[i] * v[i*stride + d] */
    void (*accum)(const float *p, const float *v, size_t stride, int n, int hd, float *o);
    const char *name;
} bs_attn_kernels;

/* The kernels for head size hd under the process-wide kernel choice. */
const bs_attn_kernels *bs_attn_kernels_for(int hd);

#endif
