/* Element-wise kernels of the forward pass with AVX-512, AVX2 and portable
 * versions, chosen once per process with the GEMM kernel; all three give the
 * same bits (vmath.h). Every output element depends only on its own inputs,
 * never on the number of rows or the row length: batch invariant. */
#ifndef BS_ELEMENTWISE_H
#define BS_ELEMENTWISE_H

/* g[i] = SiLU(g[i] + bg[i]) * (u[i] + bu[i]) for i < n; bg, bu may be NULL. */
void bs_silu_mul(float *g, const float *u, const float *bg, const float *bu, int n);

#endif
