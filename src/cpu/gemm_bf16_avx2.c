/* The bf16 compute mode on AVX2 + FMA CPUs ("bf16-avx2"): the chain of
 * gemm_bf16.c (VDPBF16PS pair steps: odd element first, each exact product
 * added with one rounding, DAZ on the inputs, FTZ on every result) with
 * plain FMA instructions, the same bits as the portable emulation and the
 * instruction.
 *
 * Why FMAs give those bits: a bf16 x bf16 product is exact in f32, so one
 * pair step is two fused multiply-adds; DAZ and FTZ change a result only
 * when an input or an intermediate sum is subnormal (or underflows). Each
 * tile therefore runs the FMAs under the default MXCSR (round to nearest
 * even, no FTZ/DAZ) with its status flags cleared, and afterwards looks at
 * the flags: a subnormal operand (an input, or a subnormal sum fed to the
 * next step) sets DE, an inexact tiny result sets UE, and a subnormal sum
 * that ends the tile is seen in the outputs. If any of that happened the
 * tile is computed again with the portable step (bs_bf16_pair_step). On
 * real activations and weights that never happens; the fallback keeps the
 * definition exact where it does (tests/unit/test_gemm_bf16.c feeds it
 * subnormals, tiny products and sums that cancel).
 *
 * Blocking: 4 x 16 tiles (8 sums, and the odd and even halves of two weight
 * vectors, stay in the 16 registers; 6 x 16 spilled sums and ran at 0.65x
 * the f32 mode on Zen 3, 4 x 16 at 0.9-1.0x). x is packed widened: per
 * pair p of row i, ap[i * LDA + 2p] = the odd element as f32, ap[... + 1]
 * the even one (the order of the step), so a broadcast from memory feeds the
 * FMAs directly. Weights are pairs (gemm_impl.h, nr = 16), prepacked once by
 * bs_gemm_prepack in the bf16 mode. int8w's weights have their own family
 * (bs_gemm_impl_bf16_avx2_i8): its copies are laid out once at load as int8
 * strips (BS_WPACK_I8S) and widened as they are read, which frees two
 * registers per half step, so its tiles are 6 x 16; widening them to pairs on
 * every call cost 1-6% at M = 465 and 30% at M = 1. */
#include <stdint.h>
#include <string.h>

#include "base/util.h"
#include "cpu/gemm_impl.h"

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>

#include "cpu/bf16_avx2.h" /* the MXCSR access, round8_bf16_bits, subnormal8 */
#include "cpu/vmath.h"

enum { MR = 4, MR_I8 = 6, NR = 16, KC = 256, MC = 96, NC = 1024, LDA = KC };
_Static_assert(MR_I8 * LDA + (KC / 2) * NR + 16 <= BS_GEMM_SMALL_FLOATS, "bf16-avx2 blocking exceeds the driver's limits");
_Static_assert(MC % MR == 0 && MC % MR_I8 == 0, "row blocks of whole tiles");

#define A2_FN __attribute__((target("avx2,fma")))
#define A2_INLINE __attribute__((target("avx2,fma"), always_inline)) static inline

/* x rows to widened pairs (odd, even) of bf16-rounded values; an odd K ends
 * with the pair (K-1, zero). */
static A2_FN void pack_a(const float *x, int ldx, int rows, int k0, int kc, float *ap) {
    int k8 = kc & ~7;
    for (int i = 0; i < rows; i++) {
        const float *src = x + (size_t)i * ldx + k0;
        float *dst = ap + (size_t)i * LDA;
        for (int kk = 0; kk < k8; kk += 8) {
            __m256 r = _mm256_castsi256_ps(round8_bf16_bits(_mm256_loadu_ps(src + kk)));
            _mm256_storeu_ps(dst + kk, _mm256_permute_ps(r, 0xB1)); /* (k, k+1) -> (k+1, k) */
        }
        for (int kk = k8; kk < kc; kk += 2) {
            dst[kk] = kk + 1 < kc ? bs_bf16_to_f32(bs_f32_to_bf16(src[kk + 1])) : 0.0f;
            dst[kk + 1] = bs_bf16_to_f32(bs_f32_to_bf16(src[kk]));
        }
    }
}

static void pack_b(const bs_wmat *w, int n0, int k0, int kc, float *dst) {
    bs_gemm_pack_b_pairs_avx2(w, n0, k0, kc, dst, NR);
}

/* The tile again with the portable step, from its start values; i8: b
 * holds int8 strips (pack_b_i8) instead of pair words. */
static __attribute__((noinline)) void tile_exact(const float *a, const float *b, int kc, float *c, int ldc,
                                                 const float *start, int R, int i8) {
    const uint32_t *bp = (const uint32_t *)(const void *)b;
    const int8_t *bq = (const int8_t *)(const void *)b;
    for (int i = 0; i < R; i++) {
        const uint32_t *ar = (const uint32_t *)(const void *)(a + (size_t)i * LDA);
        for (int j = 0; j < NR; j++) {
            float acc = start ? start[i * NR + j] : 0.0f;
            for (int p = 0; p < (kc + 1) / 2; p++) {
                uint32_t xpair = (ar[2 * p + 1] >> 16) | (ar[2 * p] & 0xffff0000u);
                const int8_t *wq = bq + (size_t)p * 2 * NR; /* odd elements, then even */
                uint32_t wpair = i8 ? bs_f32_to_bf16((float)wq[NR + j]) | (uint32_t)bs_f32_to_bf16((float)wq[j]) << 16
                                    : bp[(size_t)p * NR + j];
                acc = bs_bf16_pair_step(acc, xpair, wpair);
            }
            c[(size_t)i * ldc + j] = acc;
        }
    }
}

/* One pair step of int8w's prepacked strips (BS_WPACK_I8S): the 16 odd
 * weights at w, the 16 even ones at w + 16, widened exactly to f32 as they
 * are read (the same values the pair words give). */
A2_INLINE __m256 widen8_i8(const int8_t *w) {
    return _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_loadl_epi64((const __m128i *)(const void *)w)));
}
A2_INLINE void i8_pair_step_6x16(__m256 acc[][2], const float *a, const int8_t *w, const int R) {
    bs_bf16_half_step_16(acc, a, LDA, widen8_i8(w), widen8_i8(w + 8), R);
    bs_bf16_half_step_16(acc, a + 1, LDA, widen8_i8(w + 16), widen8_i8(w + 24), R);
}

/* The tile of R rows (R <= MR of the family: 4 for pair words, 6 for int8
 * strips, whose widening takes two registers fewer) over kc, under the
 * checked MXCSR; i8: b holds int8 strips instead of pair words. */
A2_INLINE void ukr_body(const float *a, const float *b, int kc, float *c, int ldc, int first, float *stage,
                        const float *next, int next_rows, const float *pf, const int R, const int i8) {
    float start[MR_I8 * NR];
    if (!first) memcpy(start, stage, (size_t)R * NR * sizeof(float));
    const unsigned csr = csr_get();
    csr_set(CSR_DEFAULT);
    __m256 acc[MR_I8][2];
#pragma GCC unroll 6
    for (int i = 0; i < R; i++) {
        acc[i][0] = first ? _mm256_setzero_ps() : _mm256_load_ps(stage + i * NR);
        acc[i][1] = first ? _mm256_setzero_ps() : _mm256_load_ps(stage + i * NR + 8);
    }
    uintptr_t pn = (uintptr_t)pf;
#pragma GCC unroll 6
    for (int i = 0; i < R; i++) {
        _mm_prefetch((const char *)(pn + (size_t)i * ldc * sizeof(float)), _MM_HINT_T0);
        _mm_prefetch((const char *)(pn + ((size_t)i * ldc + NR - 1) * sizeof(float)), _MM_HINT_T0);
    }
    for (int i = 0; i < next_rows; i++) {
        _mm256_store_ps(stage + i * NR, _mm256_loadu_ps(next + (size_t)i * ldc));
        _mm256_store_ps(stage + i * NR + 8, _mm256_loadu_ps(next + (size_t)i * ldc + 8));
    }
    const int pairs = (kc + 1) / 2;
    if (i8) {
        const int8_t *w = (const int8_t *)(const void *)b;
#pragma GCC unroll 2
        for (int p = 0; p < pairs; p++) i8_pair_step_6x16(acc, a + 2 * p, w + (size_t)p * 2 * NR, R);
    } else {
#pragma GCC unroll 2
        for (int p = 0; p < pairs; p++)
            bs_bf16_pair_step_4x16(acc, a + 2 * p, LDA, (const uint32_t *)(const void *)(b + (size_t)p * NR), R);
    }
    /* a nonzero |sum| below 2^-126 left in the outputs */
    __m256 sub = _mm256_setzero_ps();
#pragma GCC unroll 6
    for (int i = 0; i < R; i++) {
        sub = _mm256_or_ps(sub, _mm256_or_ps(subnormal8(acc[i][0]), subnormal8(acc[i][1])));
        _mm256_storeu_ps(c + (size_t)i * ldc, acc[i][0]);
        _mm256_storeu_ps(c + (size_t)i * ldc + 8, acc[i][1]);
    }
    const unsigned flags = csr_get();
    csr_set(csr);
    if ((flags & (CSR_DE | CSR_UE)) || _mm256_movemask_ps(sub)) tile_exact(a, b, kc, c, ldc, first ? NULL : start, R, i8);
}

#define UKR(R, I8, NAME)                                                                            \
    static A2_FN void NAME##_##R(const float *a, const float *b, int kc, float *c, int ldc, int first, \
                                 float *stage, const float *next, int next_rows, const float *pf) {    \
        ukr_body(a, b, kc, c, ldc, first, stage, next, next_rows, pf, R, I8);                       \
    }
UKR(1, 0, ukr) UKR(2, 0, ukr) UKR(3, 0, ukr) UKR(4, 0, ukr)
UKR(1, 1, ukr_i8) UKR(2, 1, ukr_i8) UKR(3, 1, ukr_i8) UKR(4, 1, ukr_i8) UKR(5, 1, ukr_i8) UKR(6, 1, ukr_i8)

const bs_gemm_impl bs_gemm_impl_bf16_avx2 = {
    MR, NR, KC, MC, NC, LDA, (KC / 2) * NR, pack_a, pack_b,
    {NULL, ukr_1, ukr_2, ukr_3, ukr_4},
    "bf16-avx2", BS_WPACK_PAIRS, NULL};

/* int8w's strips (BS_WPACK_I8S) of q (a BS_I8 view): per pair p of the
 * block, the 16 columns' odd elements (k0 + 2p + 1; zero past kc) then their
 * even ones; zero past N. Only bs_gemm_prepack packs them, once per model. */
static void pack_b_i8(const bs_wmat *w, int n0, int k0, int kc, float *dstf) {
    int8_t *dst = (int8_t *)(void *)dstf;
    const int8_t *q = w->data;
    int nv = w->n - n0 < NR ? w->n - n0 : NR;
    for (int p = 0; p < (kc + 1) / 2; p++, dst += 2 * NR) {
        memset(dst, 0, 2 * NR);
        for (int j = 0; j < nv; j++) {
            const int8_t *row = q + (size_t)(n0 + j) * (size_t)w->k + k0 + 2 * p;
            dst[j] = 2 * p + 1 < kc ? row[1] : 0;
            dst[NR + j] = row[0];
        }
    }
}

const bs_gemm_impl bs_gemm_impl_bf16_avx2_i8 = {
    MR_I8, NR, KC, MC, NC, LDA, (KC / 2) * NR / 2, pack_a, pack_b_i8,
    {NULL, ukr_i8_1, ukr_i8_2, ukr_i8_3, ukr_i8_4, ukr_i8_5, ukr_i8_6},
    "bf16-avx2", BS_WPACK_I8S, NULL};
#endif
