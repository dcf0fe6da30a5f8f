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
#include "base/util.h"

/* Layouts of prepacked weights (bs_gemm_prepack). */
/* AMX: 32-column strips of tile rows (gemm_amx.c). PAIRS: the avx512-bf16
 * kernels' strips, bf16 pairs in 32 columns per K block, laid out as that
 * kernel packs them per call (gemm_bf16.c). */
/* I8: the int8w mode's quantized copy (bs_gemm_quantize): q[n][k] int8 and
 * its per-row scales (bs_wmat.scale). */
typedef enum { BS_WPACK_NONE = 0, BS_WPACK_AMX = 1, BS_WPACK_PAIRS = 2, BS_WPACK_I8 = 3 } bs_wpack;

typedef struct bs_wmat {
    bs_dtype dtype;
    const void *data; /* row-major [n][k] */
    int n, k;
    /* The same weights in a kernel's own layout (owned by whoever called
     * bs_gemm_prepack), or NULL: kernels that read it use it, the others
     * read data. */
    const void *packed;
    bs_wpack packed_kind;
    const float *scale; /* BS_I8 data or BS_WPACK_I8: row n's weights are scale[n] * q[n][k] */
} bs_wmat;

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

/* y (row stride ldy) = x (row stride ldx) * w^T for m rows (f32 compute). */
void bs_gemm(bs_pool *pool, const float *x, int ldx, int m, const bs_wmat *w, float *y, int ldy);

/* Compute modes of the CPU GEMM (dtype): f32 (exact widening of the stored
 * weights, today's default), or bf16 (x and w rounded to bf16, products
 * accumulated in f32 in VDPBF16PS order: gemm_bf16.c). Each mode gives the
 * same bits on every CPU, and is batch-invariant. */
typedef enum { BS_COMPUTE_F32 = 0, BS_COMPUTE_BF16 = 1 } bs_compute;
void bs_gemm_mode(bs_pool *pool, bs_compute mode, const float *x, int ldx, int m, const bs_wmat *w, float *y,
                  int ldy);
/* Whether the CPU has AVX512-BF16 (VDPBF16PS). */
int bs_gemm_bf16_hw_supported(void);
/* Whether the CPU has AMX-BF16 and the kernel grants this process the tile
 * state (asked once, with arch_prctl). */
int bs_gemm_amx_available(void);
/* The bf16 kernel in use: "amx-bf16" (AMX tiles, where the CPU has them and
 * the kernel grants the tile state: the fastest, but its own bits),
 * "avx512-bf16" (the instruction, when the CPU has it and the f32 family is
 * avx512), or "bf16-portable" (the exact emulation of the instruction: the
 * same bits as avx512-bf16 on every CPU). BASAL_BF16=amx|avx512-bf16|portable
 * asks for one; a kernel the CPU cannot run falls back to the next. */
const char *bs_gemm_bf16_kernel_name(void);
/* BASAL_BF16's value: 2 amx, 1 avx512-bf16, 0 portable, -1 unset or auto,
 * -2 unknown; and the kernel in use, as such a number. */
int bs_gemm_bf16_parse(const char *name);
int bs_gemm_bf16_kernel(void);
/* For tests: use bf16 kernel k (0 emulation, 1 AVX512-BF16, 2 AMX) if this
 * CPU can run it; returns the previous one. */
int bs_gemm_force_bf16_hw(int k);

/* Packs w once for the kernel that mode uses on this CPU, when that kernel
 * reads weights in its own layout (the AMX kernels: packing them on every
 * call was a fifth of a decision's time; the avx512-bf16 kernels: their
 * per-call transposition read the weights in 32-byte pieces 3-22 KiB apart,
 * the packed copy streams in order). Same size as bf16 storage, N rounded up
 * to 32 columns. Returns 1 with w->packed set
 * (release with bs_gemm_unpack; the bytes in *bytes if not NULL), 0 when the
 * kernel needs nothing, BS_ENOMEM. */
int bs_gemm_prepack(bs_pool *pool, bs_wmat *w, bs_compute mode, size_t *bytes);
void bs_gemm_unpack(bs_wmat *w);

/* The int8w mode (weights int8, issue 34): row n of w becomes
 *     s[n] = amax_n / 127 (f32; amax_n the largest |w[n][k]| widened to f32),
 *     q[n][k] = rint(w[n][k] / s[n]) (f32 division, ties to even; 0 when
 *               amax_n is 0), within [-127, 127],
 * kept as w->packed (BS_WPACK_I8) beside the stored weights. In the bf16
 * compute mode a w so packed is multiplied as the bf16 mode multiplies
 * weights q (small integers are exact in bf16) and each output is then
 * multiplied by s[n]: y[m][n] = s[n] * chain(x[m], q[n]). The chain is the
 * one of the avx512-bf16 and portable bf16 kernels (never AMX's), so an
 * int8w product has the same bits on every CPU. 1 with the copy made (its
 * bytes in *bytes), 0 for an empty w, BS_ENOMEM. */
int bs_gemm_quantize(bs_pool *pool, bs_wmat *w, size_t *bytes);
/* The quantization of one row (n values of dtype dt at src) into q and *scale. */
void bs_quantize_row_i8(const void *src, bs_dtype dt, int n, int8_t *q, float *scale);

/* Fixed-order dot product of f32 a with row w (widened), length k. */
float bs_dot_row(const float *a, const bs_wmat *w, int row);

#endif
