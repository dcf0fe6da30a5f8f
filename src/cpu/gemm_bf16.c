/* The bf16 compute mode of the GEMM (dtype bf16 on the CPU): both inputs
 * rounded to bf16 (round-to-nearest-even, bs_f32_to_bf16), products
 * accumulated in f32 in the order of the AVX512-BF16 instruction VDPBF16PS.
 *
 * The arithmetic, defined once for every CPU: each output is a chain over
 * the pairs (k, k+1), k = 0, 2, 4, ... in order (an odd K ends with the pair
 * (K-1, zero)), and one pair step is
 *     acc = FTZ(fma(x[k+1], w[k+1], DAZ(acc)));  acc = FTZ(fma(x[k], w[k], acc))
 * with bf16 inputs that are subnormal read as zero (DAZ) and subnormal
 * results flushed to zero (FTZ): the odd element first, each product exact,
 * each add rounded to nearest-even once. That is what VDPBF16PS computes on
 * this machine's Sapphire Rapids: tests/unit/test_gemm_bf16.c compares the step
 * with the instruction on millions of random and edge-case operands, bit for
 * bit (adding the two products first, or the even one first, differs in
 * about 12% of random cases). So the portable emulation below and the
 * AVX512-BF16 kernel give the same bits, and within the mode a row's result
 * never depends on M, its tile, the thread count or the CPU. It differs from
 * the f32 mode (and from the f32 reference) by the bf16 rounding of x and
 * of f32-stored weights, about 2^-9 relative per input.
 *
 * Packed operands hold pairs: a 32-bit word per (row, k pair) with element
 * k in the low half, the layout VDPBF16PS reads. Depths passed by the driver
 * are in elements; K blocks are even, so pairs never straddle two blocks. */
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "base/util.h"
#include "cpu/gemm_impl.h"
#include "cpu/vmath.h"

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define BS_X86 1
#endif

/* ---- the step, portable ---------------------------------------------------- */

static inline float bf16_daz(uint32_t h) {
    return (h & 0x7f80u) ? bs_bf16_to_f32((uint16_t)h) : ((h & 0x8000u) ? -0.0f : 0.0f);
}

static inline float flush_tiny(float v) { return fabsf(v) < 0x1p-126f ? copysignf(0.0f, v) : v; }

float bs_bf16_pair_step(float acc, uint32_t xpair, uint32_t wpair) {
    acc = flush_tiny(fmaf(bf16_daz(xpair >> 16), bf16_daz(wpair >> 16), flush_tiny(acc)));
    return flush_tiny(fmaf(bf16_daz(xpair & 0xffffu), bf16_daz(wpair & 0xffffu), acc));
}

/* ---- portable family (6 x 16 tiles, as the f32 one) -------------------------- */

enum { PMR = 6, PNR = 16, PKC = 256, PMC = 144, PNC = 1024, PLDA = PKC / 2 };

/* x rows into pairs: ap[i*PLDA + p] = bf16(x[2p]) | bf16(x[2p+1]) << 16. */
static void pack_a_portable(const float *x, int ldx, int rows, int k0, int kc, float *ap) {
    for (int i = 0; i < rows; i++) {
        const float *src = x + (size_t)i * ldx + k0;
        uint32_t *dst = (uint32_t *)(void *)(ap + (size_t)i * PLDA);
        for (int kk = 0; kk < kc; kk += 2)
            dst[kk / 2] = bs_f32_to_bf16(src[kk]) | (kk + 1 < kc ? (uint32_t)bs_f32_to_bf16(src[kk + 1]) << 16 : 0u);
    }
}

static void pack_b_portable(const bs_wmat *w, int n0, int k0, int kc, float *dst) {
    bs_gemm_pack_b_pairs(w, n0, k0, kc, dst, PNR);
}

static inline __attribute__((always_inline)) void ukr_portable_body(const float *a, const float *b, int kc, float *c,
                                                                    int ldc, int first, float *stage,
                                                                    const float *next, int next_rows, const int R) {
    const uint32_t *ap = (const uint32_t *)(const void *)a, *bp = (const uint32_t *)(const void *)b;
    float acc[PMR][PNR];
    for (int i = 0; i < R; i++)
        for (int j = 0; j < PNR; j++) acc[i][j] = first ? 0.0f : stage[i * PNR + j];
    for (int p = 0; p < (kc + 1) / 2; p++)
        for (int i = 0; i < R; i++) {
            uint32_t xv = ap[(size_t)i * PLDA + p];
            for (int j = 0; j < PNR; j++) acc[i][j] = bs_bf16_pair_step(acc[i][j], xv, bp[(size_t)p * PNR + j]);
        }
    for (int i = 0; i < next_rows; i++) memcpy(stage + i * PNR, next + (size_t)i * ldc, PNR * sizeof(float));
    for (int i = 0; i < R; i++)
        for (int j = 0; j < PNR; j++) c[(size_t)i * ldc + j] = acc[i][j];
}

#define UKR_P(R)                                                                                      \
    static void ukr_portable_##R(const float *a, const float *b, int kc, float *c, int ldc, int first,  \
                                 float *stage, const float *next, int next_rows, const float *pf) {   \
        (void)pf;                                                                                     \
        ukr_portable_body(a, b, kc, c, ldc, first, stage, next, next_rows, R);                        \
    }
UKR_P(1) UKR_P(2) UKR_P(3) UKR_P(4) UKR_P(5) UKR_P(6)

const bs_gemm_impl bs_gemm_impl_bf16_portable = {
    PMR, PNR, PKC, PMC, PNC, PLDA, PLDA * PNR, pack_a_portable, pack_b_portable,
    {NULL, ukr_portable_1, ukr_portable_2, ukr_portable_3, ukr_portable_4, ukr_portable_5, ukr_portable_6},
    "bf16-portable", BS_WPACK_NONE, NULL};

#ifdef BS_X86
/* ---- AVX512-BF16: VDPBF16PS on 14 x 32 tiles -------------------------------- */

enum { MR = 14, NR = 32, KC = 512, MC = 140, NC = 1024, LDA = KC / 2 + 16 };
_Static_assert((int)MR <= (int)BS_GEMM_MAX_MR && (int)NR <= (int)BS_GEMM_MAX_NR && MR * LDA + (KC / 2) * NR + 16 <= BS_GEMM_SMALL_FLOATS &&
                   KC % 2 == 0,
               "bf16 blocking exceeds the driver's limits");

#define BF16_FN __attribute__((target("avx512f,avx512bf16,avx2,fma,f16c")))
#define BF16_INLINE __attribute__((target("avx512f,avx512bf16,avx2,fma,f16c"), always_inline)) static inline

#include "cpu/bf16_round_avx512.h" /* round16_bf16 */

/* x rows into pairs (16 elements = 8 pairs per vector), row stride LDA words. */
static BF16_FN void pack_a(const float *x, int ldx, int rows, int k0, int kc, float *ap) {
    int k16 = kc & ~15;
    for (int i = 0; i < rows; i++) {
        const float *src = x + (size_t)i * ldx + k0;
        uint32_t *dst = (uint32_t *)(void *)(ap + (size_t)i * LDA);
        for (int kk = 0; kk < k16; kk += 16)
            _mm256_storeu_si256((__m256i *)(void *)(dst + kk / 2), round16_bf16(_mm512_loadu_ps(src + kk)));
        for (int kk = k16; kk < kc; kk += 2)
            dst[kk / 2] = bs_f32_to_bf16(src[kk]) | (kk + 1 < kc ? (uint32_t)bs_f32_to_bf16(src[kk + 1]) << 16 : 0u);
    }
}

/* The weights' pairs: the AVX2 packing (the same words as the portable one)
 * serves both families that read them. */
static void pack_b(const bs_wmat *w, int n0, int k0, int kc, float *dst) {
    bs_gemm_pack_b_pairs_avx2(w, n0, k0, kc, dst, NR);
}

#define STEP(p)                                                                                     \
    do {                                                                                            \
        __m512bh b0 = (__m512bh)_mm512_loadu_ps(b + (size_t)(p) * NR);                              \
        __m512bh b1 = (__m512bh)_mm512_loadu_ps(b + (size_t)(p) * NR + 16);                         \
        _Pragma("GCC unroll 14") for (int i = 0; i < R; i++) {                                      \
            __m512bh av = (__m512bh)_mm512_set1_epi32(((const int *)(const void *)a)[(size_t)i * LDA + (p)]); \
            c0[i] = _mm512_dpbf16_ps(c0[i], av, b0);                                                \
            c1[i] = _mm512_dpbf16_ps(c1[i], av, b1);                                                \
        }                                                                                           \
    } while (0)

BF16_INLINE void ukr_body(const float *a, const float *b, int kc, float *c, int ldc, int first, float *stage,
                          const float *next, int next_rows, const float *pf, const int R) {
    __m512 c0[MR], c1[MR];
#pragma GCC unroll 14
    for (int i = 0; i < R; i++) {
        c0[i] = first ? _mm512_setzero_ps() : _mm512_load_ps(stage + i * NR);
        c1[i] = first ? _mm512_setzero_ps() : _mm512_load_ps(stage + i * NR + 16);
    }
    uintptr_t pn = (uintptr_t)pf;
#pragma GCC unroll 14
    for (int i = 0; i < MR; i++) {
        _mm_prefetch((const char *)(pn + (size_t)i * ldc * sizeof(float)), _MM_HINT_T0);
        _mm_prefetch((const char *)(pn + ((size_t)i * ldc + NR - 1) * sizeof(float)), _MM_HINT_T0);
    }
    int pairs = (kc + 1) / 2, half = pairs / 2;
#pragma GCC unroll 2
    for (int p = 0; p < half; p++) STEP(p);
    for (int i = 0; i < next_rows; i++) {
        _mm512_store_ps(stage + i * NR, _mm512_loadu_ps(next + (size_t)i * ldc));
        _mm512_store_ps(stage + i * NR + 16, _mm512_loadu_ps(next + (size_t)i * ldc + 16));
    }
#pragma GCC unroll 2
    for (int p = half; p < pairs; p++) STEP(p);
#pragma GCC unroll 14
    for (int i = 0; i < R; i++) {
        _mm512_storeu_ps(c + (size_t)i * ldc, c0[i]);
        _mm512_storeu_ps(c + (size_t)i * ldc + 16, c1[i]);
    }
}

#define UKR(R)                                                                                      \
    static BF16_FN void ukr_##R(const float *a, const float *b, int kc, float *c, int ldc, int first,  \
                                float *stage, const float *next, int next_rows, const float *pf) {     \
        ukr_body(a, b, kc, c, ldc, first, stage, next, next_rows, pf, R);                           \
    }
UKR(1) UKR(2) UKR(3) UKR(4) UKR(5) UKR(6) UKR(7) UKR(8) UKR(9) UKR(10) UKR(11) UKR(12) UKR(13) UKR(14)

const bs_gemm_impl bs_gemm_impl_avx512bf16 = {
    MR, NR, KC, MC, NC, LDA, (KC / 2) * NR, pack_a, pack_b,
    {NULL, ukr_1, ukr_2, ukr_3, ukr_4, ukr_5, ukr_6, ukr_7, ukr_8, ukr_9, ukr_10, ukr_11, ukr_12, ukr_13, ukr_14},
    "avx512-bf16", BS_WPACK_PAIRS, NULL};

/* One VDPBF16PS on a single lane, for the test that pins the step above to
 * the hardware. */
BF16_FN float bs_bf16_pair_step_hw(float acc, uint32_t xpair, uint32_t wpair) {
    __m512 c = _mm512_set1_ps(acc);
    c = _mm512_dpbf16_ps(c, (__m512bh)_mm512_set1_epi32((int)xpair), (__m512bh)_mm512_set1_epi32((int)wpair));
    return _mm512_cvtss_f32(c);
}
#endif
