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
#include "cpu/kernel_family.h"
#include "cpu/wmat.h"

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
 * avx512), "bf16-avx2" (the instruction's steps as FMAs, on AVX2 + FMA CPUs
 * without it), or "bf16-portable" (the exact emulation of the instruction:
 * the same bits as avx512-bf16 and bf16-avx2 on every CPU).
 * BASAL_BF16=amx|avx512-bf16|avx2|portable asks for one; a kernel the CPU
 * cannot run falls back to the next. */
const char *bs_gemm_bf16_kernel_name(void);
/* BASAL_BF16's value: 2 amx, 1 avx512-bf16, 3 avx2, 0 portable, -1 unset or
 * auto, -2 unknown; and the kernel in use, as such a number. */
int bs_gemm_bf16_parse(const char *name);
int bs_gemm_bf16_kernel(void);
/* For tests: use bf16 kernel k (0 emulation, 1 AVX512-BF16, 2 AMX, 3 AVX2)
 * if this CPU can run it; returns the previous one. */
int bs_gemm_force_bf16_hw(int k);

/* Packs w once for the kernel that mode uses on this CPU, when that kernel
 * reads weights in its own layout (the AMX kernels: packing them on every
 * call was a fifth of a decision's time; the avx512-bf16 kernels: their
 * per-call transposition read the weights in 32-byte pieces 3-22 KiB apart,
 * the packed copy streams in order). Same size as bf16 storage, N rounded up
 * to 32 columns. Returns 1 with w->packed set
 * (release with bs_gemm_unpack, cpu/wmat.h; the bytes in *bytes if not NULL), 0 when the
 * kernel needs nothing, BS_ENOMEM. */
int bs_gemm_prepack(bs_pool *pool, bs_wmat *w, bs_compute mode, size_t *bytes);

/* The int8w mode (weights int8, issue 34): row n of w becomes
 *     s[n] = amax_n / 127 (f32; amax_n the largest |w[n][k]| widened to f32),
 *     q[n][k] = rint(w[n][k] / s[n]) (f32 division, ties to even; 0 when
 *               amax_n is 0), within [-127, 127],
 * kept as w->packed (BS_WPACK_I8) beside the stored weights. In the bf16
 * compute mode a w so packed is multiplied as the bf16 mode multiplies
 * weights q (small integers are exact in bf16) and each output is then
 * multiplied by s[n]: y[m][n] = s[n] * chain(x[m], q[n]). The chain is the
 * one of the avx512-bf16, bf16-avx2 and portable kernels (never AMX's), so an
 * int8w product has the same bits on every CPU. 1 with the copy made (its
 * bytes in *bytes), 0 for an empty w, BS_ENOMEM. */
int bs_gemm_quantize(bs_pool *pool, bs_wmat *w, size_t *bytes);
/* The same with the column factors and row divisors of
 * bs_gemm_quantize_rows (the int8 mode's int8w projections). */
int bs_gemm_quantize_ex(bs_pool *pool, bs_wmat *w, const float *colmul, const float *rowdiv, size_t *bytes);
/* The quantization of one row (n values of dtype dt at src) into q and *scale. */
void bs_quantize_row_i8(const void *src, bs_dtype dt, int n, int8_t *q, float *scale);
/* The same rule on the row's values times column factors (the int8 mode's
 * smoothing): v[i] = f32(src[i]) * colmul[i], one f32 product, then as
 * above; colmul NULL: bs_quantize_row_i8. */
void bs_quantize_row_i8_cols(const void *src, bs_dtype dt, int n, const float *colmul, int8_t *q, float *scale);
/* Every row of w's stored weights so (on the pool) into row-major q
 * [n][k] and scale [n]; with rowdiv, scale[r] is then divided by rowdiv[r]
 * (f32). */
void bs_gemm_quantize_rows(bs_pool *pool, const bs_wmat *w, const float *colmul, const float *rowdiv, int8_t *q,
                           float *scale);

/* ---- the int8 mode (W8A8, issue 34): int8 x int8 products, int32 sums ----
 *
 * A product of x [m][k] (f32) with a w packed by bs_gemm_pack_w8a8 is
 *     sx[i] = amax_i / 127, qx[i][k] = rint(x[i][k] / sx[i]) in [-127, 127]
 *         (bs_quantize_act_row: per row, dynamic, symmetric; f32 division,
 *         ties to even; 0 for a zero row and for NaN),
 *     acc[i][n] = sum_k qx[i][k] * q[n][k]   (exact, int32),
 *     y[i][n] = (float)acc[i][n] * (sx[i] * s[n])   (two f32 products).
 * The sum is an integer computed exactly, so every kernel (the portable C
 * one, AVX-VNNI, AVX512-VNNI and AMX-INT8) gives the same bits, alone or
 * batched, at any thread count. The VNNI kernels multiply unsigned by signed
 * bytes: they add 128 to every qx and start each sum at -128 * sum_k q[n][k],
 * which is exact in int32 arithmetic. Bound: with |qx + 128| <= 255 and
 * |q| <= 127, every partial sum stays below 2^31 while K * 127 * 255 < 2^31,
 * i.e. K <= BS_I8_MAX_K; bs_gemm_pack_w8a8 refuses a deeper matrix. */
/* Packs row-major q [w->n][w->k] and scale [w->n] (the rule of
 * bs_quantize_row_i8, already applied) as w->packed (BS_WPACK_Q8; the
 * stored weights stay as they are). 1 packed (its bytes in *bytes), 0 for an
 * empty w, BS_ERANGE for K > BS_I8_MAX_K, BS_ENOMEM. */
int bs_gemm_pack_w8a8(bs_pool *pool, bs_wmat *w, const int8_t *q, const float *scale, size_t *bytes);
/* The same strip by strip (for a reader that holds 32 rows at a time): a
 * block for w (NULL: out of memory, or K over the bound), strip s filled
 * from its rows 32s.. of q (row stride w->k; only those below w->n are
 * read) and their scales, then attached as w->packed (BS_WPACK_Q8). */
enum { BS_Q8_STRIP_ROWS = 32 };
void *bs_gemm_w8a8_alloc(const bs_wmat *w);
void bs_gemm_w8a8_fill(const bs_wmat *w, void *block, int s, const int8_t *q_rows, const float *scale);
void bs_gemm_w8a8_attach(bs_wmat *w, void *block);
/* Bytes of the packed copy of an n x k matrix. */
size_t bs_gemm_w8a8_bytes(int n, int k);
/* The row-major q of a Q8-packed w back, into q [w->n][w->k]. */
void bs_gemm_w8a8_rows(const bs_wmat *w, int8_t *q);
/* One row of activations quantized as above (the definition, portable). */
void bs_quantize_act_row(const float *x, int k, int8_t *q, float *scale);
/* The int8 kernel in use: "amx-int8" (TDPBSSD, where the CPU has AMX-INT8
 * and Linux grants the tile state), "avx512-vnni" (VPDPBUSD zmm, when the
 * f32 family is avx512), "avx-vnni" (VEX VPDPBUSD ymm on an AVX2 CPU that
 * has it), "int8-avx2" (VPMADDWD on int16-widened values, any AVX2 CPU), or
 * "int8-portable", in that order of preference. All give the same bits.
 * BASAL_INT8=auto|amx|avx512-vnni|avx-vnni|avx2|portable asks for one; one
 * the CPU cannot run falls back to the next one down (BASAL_CPU caps it too). */
const char *bs_gemm_i8_kernel_name(void);
/* BASAL_INT8's value: 3 amx, 2 avx512-vnni, 1 avx-vnni, 4 avx2, 0 portable, -1 unset
 * or auto, -2 unknown; the kernel in use as such a number; whether kernel k
 * runs here; and, for tests, the switch to kernel k (if it runs; returns the
 * previous one). */
int bs_gemm_i8_parse(const char *name);
int bs_gemm_i8_kernel(void);
int bs_gemm_i8_supported(int k);
int bs_gemm_force_i8(int k);
const char *bs_gemm_i8_name_of(int k);

/* Fixed-order dot product of f32 a with row w (widened), length k. */
float bs_dot_row(const float *a, const bs_wmat *w, int row);

#endif
