/* Which family of CPU kernels runs (GEMM, attention, element-wise): chosen
 * once per process from what the CPU and OS support, capped by BASAL_CPU.
 * Below every kernel file: the int8 and bf16 families read the choice here
 * rather than from the f32 GEMM driver. */
#ifndef BS_KERNEL_FAMILY_H
#define BS_KERNEL_FAMILY_H

/* Kernel families of the CPU backend (GEMM, attention, element-wise). All
 * give bitwise the same f32 results; they differ only in speed. */
typedef enum { BS_KERNEL_GENERIC = 0, BS_KERNEL_AVX2 = 1, BS_KERNEL_AVX512 = 2 } bs_kernel;

/* Chooses the family once per process: the widest the CPU supports
 * (AVX-512F, else AVX2+FMA, else portable); BASAL_CPU=generic|avx2|avx512
 * caps the choice. Later calls return the same choice. */
bs_kernel bs_gemm_kernel(void);
const char *bs_gemm_kernel_name(bs_kernel k);
/* Whether this CPU (and OS) can run family k. */
int bs_kernel_supported(bs_kernel k);
/* For tests and benchmarks: switch to family k if supported (returns the old one). */
bs_kernel bs_gemm_force_kernel(bs_kernel k);

/* Whether the CPU has F16C (the f16 weight widening of the AVX families). */
int bs_gemm_have_f16c(void);

#endif
