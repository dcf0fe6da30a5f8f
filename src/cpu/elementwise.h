/* Element-wise kernels of the forward pass with an AVX2 and a portable
 * version, chosen once per process with the GEMM kernel. Every output element
 * depends only on its own inputs (and its index within a row), never on the
 * number of rows: batch invariant. */
#ifndef BS_ELEMENTWISE_H
#define BS_ELEMENTWISE_H

/* g[i] = SiLU(g[i] + bg[i]) * (u[i] + bu[i]) for i < n; bg, bu may be NULL. */
void bs_silu_mul(float *g, const float *u, const float *bg, const float *bu, int n);

#endif
