/* The one matrix product of the forward pass: y[m][n] = sum_k x[m][k] * w[n][k]
 * with Hugging Face row-major weights w[N][K] stored as f32, f16 or bf16.
 *
 * Batch invariance (spec 05 §13.2 A1): every output is one accumulation chain
 * over k = 0..K-1 in order, whatever M, the row's offset, the tile it falls
 * in, or the number of threads. Threads split only independent outputs
 * (columns, and rows when N is small); never K. */
#ifndef BS_GEMM_H
#define BS_GEMM_H

#include "cpu/pool.h"
#include "core/util.h"

typedef struct bs_wmat {
    bs_dtype dtype;
    const void *data; /* row-major [n][k] */
    int n, k;
} bs_wmat;

typedef enum { BS_KERNEL_GENERIC = 0, BS_KERNEL_AVX2 = 1 } bs_kernel;

/* Chooses the kernel once per process (AVX2+FMA when the CPU has both, unless
 * BASAL_CPU=generic). Later calls return the same choice. */
bs_kernel bs_gemm_kernel(void);
const char *bs_gemm_kernel_name(bs_kernel k);
/* For tests only: force a kernel before the first product (returns the old one). */
bs_kernel bs_gemm_force_kernel(bs_kernel k);

/* y (row stride ldy) = x (row stride ldx) * w^T for m rows. */
void bs_gemm(bs_pool *pool, const float *x, int ldx, int m, const bs_wmat *w, float *y, int ldy);

/* Fixed-order dot product of f32 a with row w (widened), length k. */
float bs_dot_row(const float *a, const bs_wmat *w, int row);

#endif
