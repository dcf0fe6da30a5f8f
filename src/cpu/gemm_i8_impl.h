/* Internal interface of the int8 (W8A8) kernels: the packed weight layout
 * shared by every kernel (gemm_i8.c) and the AMX-INT8 block kernel
 * (gemm_amx_i8.c).
 *
 * Packed weights (BS_WPACK_Q8), one 64-byte aligned block:
 *   strips   ceil(n / 32) strips of 32 columns (rows of w); strip s holds,
 *            for every quad of depth j = 0 .. kp/4 - 1 (kp = k rounded up to
 *            64), the 32 columns' four int8 weights k = 4j .. 4j+3:
 *            byte s*kp*32 + j*128 + c*4 + i = q[32s + c][4j + i]
 *            (zero past n and past k). That is the operand layout of
 *            VPDPBUSD (16 columns = 64 bytes) and of an AMX B tile (16 quads
 *            x 16 columns, row stride 128).
 *   comp     int32 per column (32 per strip): -128 * sum_k q[n][k], the
 *            start of the VNNI kernels' sums (they add 128 to activations).
 *   scale    f32 per column (32 per strip; bs_wmat.scale points here). */
#ifndef BS_GEMM_I8_IMPL_H
#define BS_GEMM_I8_IMPL_H

#include <stddef.h>
#include <stdint.h>

#include "cpu/kernel_family.h"
#include "cpu/pool.h"
#include "cpu/wmat.h"

enum { BS_Q8_NR = 32, BS_Q8_KALIGN = 64 };

static inline int bs_q8_kp(int k) { return (k + BS_Q8_KALIGN - 1) / BS_Q8_KALIGN * BS_Q8_KALIGN; }
static inline int bs_q8_strips(int n) { return (n + BS_Q8_NR - 1) / BS_Q8_NR; }
static inline size_t bs_q8_strip_bytes(int k) { return (size_t)bs_q8_kp(k) * BS_Q8_NR; }
static inline const int8_t *bs_q8_strip(const bs_wmat *w, int s) {
    return (const int8_t *)w->packed + (size_t)s * bs_q8_strip_bytes(w->k);
}
static inline const int32_t *bs_q8_comp(const bs_wmat *w) {
    return (const int32_t *)(const void *)((const char *)w->packed + (size_t)bs_q8_strips(w->n) * bs_q8_strip_bytes(w->k));
}

/* The W8A8 product of gemm.h on a Q8-packed w (bs_gemm_mode's case). */
void bs_gemm_w8a8(bs_pool *pool, const float *x, int ldx, int m, const bs_wmat *w, float *y, int ldy);

/* AMX-INT8 (x86-64 only; elsewhere always unavailable). Whether the CPU has
 * AMX-TILE and AMX-INT8 and Linux grants this process the tile state (asked
 * once, with arch_prctl; refused or absent: 0, and the other kernels run). */
int bs_gemm_amx_i8_available(void);
/* One 32 x 32 block of exact sums, c[i][j] = sum_k x[i][k] * strip column j
 * (c row stride 32 int32), over kp (a multiple of 64) with TDPBSSD: x is
 * 32 rows of signed activations (row stride ldx bytes; rows past the real
 * ones hold zeros); two = 0 computes rows 0..15 only. Call only where
 * bs_gemm_amx_i8_available(). */
void bs_amx_i8_block(const int8_t *x, size_t ldx, int two, const int8_t *strip, int kp, int32_t *c);
/* The same block by a C emulation of the same tile loads (16 rows x 64
 * bytes at the kernel's addresses and strides) and TDPBSSD steps: runs on
 * every CPU, so tests check the AMX kernel's addressing where AMX is absent. */
void bs_amx_i8_block_emulated(const int8_t *x, size_t ldx, int two, const int8_t *strip, int kp, int32_t *c);
/* For tests: the int8 driver's AMX path with bs_amx_i8_block_emulated in
 * place of the instructions (on: 1), on any CPU; returns the previous state. */
int bs_gemm_i8_emulate_amx(int on);

#endif
