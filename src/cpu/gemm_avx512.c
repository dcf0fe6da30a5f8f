/* AVX-512F f32 kernels of the GEMM (the contract: gemm_impl.h).
 *
 * Blocking for Sapphire Rapids / Zen 4 class cores (48 or 32 KiB L1d, 1-2
 * MiB L2): a 14 x 32 register tile (28 zmm accumulators, two weight vectors
 * per k step, x broadcast from memory; alone in L1 it runs at 97% of the
 * FMA peak on Sapphire Rapids). KC = 512 deep blocks: the 32 x 512 weight
 * strip (64 KiB) and the 14-row panel of x (28 KiB) stream from L2, which
 * keeps up, while y is loaded and stored half as often as with KC = 256
 * (measured: 0.80-0.88 -> 0.87-0.93 of OpenBLAS at M = 2048, 1 thread).
 * Packed x rows are KC + 16 floats apart, so the 14 rows of a panel do not
 * fall into a few L1 sets.
 *
 * Arithmetic: each output is the single chain acc = fma(x[m][k], w[n][k],
 * acc) for k in order, as in the portable and AVX2 families (zmm lanes are
 * independent outputs), so results are bitwise the same as theirs. */
#include "cpu/gemm_impl.h"

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#include <stdint.h>
#include <string.h>

#include "base/util.h"
#include "cpu/vmath.h"

enum { MR = 14, NR = 32, KC = 512, MC = 140, NC_MAX = 1024, LDA = KC + 16 };
_Static_assert((int)MR <= (int)BS_GEMM_MAX_MR && (int)NR <= (int)BS_GEMM_MAX_NR && MR * LDA + KC * NR + 16 <= BS_GEMM_SMALL_FLOATS,
               "AVX-512 blocking exceeds the driver's limits");
_Static_assert(MC % MR == 0, "row blocks are whole panels");

#define AVX512_FN __attribute__((target("avx512f,avx2,fma,f16c")))
#define AVX512_INLINE __attribute__((target("avx512f,avx2,fma,f16c"), always_inline)) static inline

/* 8 consecutive weights widened to f32 (exact); dt is constant after inlining. */
AVX512_INLINE __m256 load8w(const void *p, const bs_dtype dt) {
    if (dt == BS_BF16)
        return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(_mm_loadu_si128(p)), 16));
    if (dt == BS_F16) return _mm256_cvtph_ps(_mm_loadu_si128(p));
    return _mm256_loadu_ps(p);
}

/* dst[kk][32] for a full strip and k8 (a multiple of 8) depth: 8 x 8 blocks
 * through an in-register transpose, four per 8 k. */
AVX512_INLINE void pack_b_t(const bs_wmat *w, int n0, int k0, int k8, float *dst, const bs_dtype dt) {
    const size_t es = dt == BS_F32 ? 4 : 2, ld = (size_t)w->k * es;
    const char *src = (const char *)w->data + ((size_t)n0 * w->k + (size_t)k0) * es;
    for (int kk = 0; kk < k8; kk += 8, src += 8 * es, dst += 8 * NR) {
#pragma GCC unroll 4
        for (int h = 0; h < NR / 8; h++) {
            __m256 r[8];
#pragma GCC unroll 8
            for (int i = 0; i < 8; i++) r[i] = load8w(src + (size_t)(h * 8 + i) * ld, dt);
            bs_transpose8_avx2(r);
#pragma GCC unroll 8
            for (int i = 0; i < 8; i++) _mm256_storeu_ps(dst + i * NR + h * 8, r[i]);
        }
    }
}

static AVX512_FN void pack_b(const bs_wmat *w, int n0, int k0, int kc, float *dst) {
    int k8 = kc & ~7;
    if (w->n - n0 < NR || k8 < kc || w->dtype == BS_I8 || (w->dtype == BS_F16 && !bs_gemm_have_f16c())) {
        bs_gemm_pack_b_portable(w, n0, k0, kc, dst, NR);
        return;
    }
    switch (w->dtype) {
    case BS_BF16: pack_b_t(w, n0, k0, k8, dst, BS_BF16); break;
    case BS_F16: pack_b_t(w, n0, k0, k8, dst, BS_F16); break;
    default: pack_b_t(w, n0, k0, k8, dst, BS_F32); break;
    }
}

static AVX512_FN void pack_a(const float *x, int ldx, int rows, int k0, int kc, float *ap) {
    int k16 = kc & ~15;
    for (int i = 0; i < rows; i++) {
        const float *src = x + (size_t)i * ldx + k0;
        float *dst = ap + (size_t)i * LDA;
        for (int kk = 0; kk < k16; kk += 16) _mm512_storeu_ps(dst + kk, _mm512_loadu_ps(src + kk));
        for (int kk = k16; kk < kc; kk++) dst[kk] = src[kk];
    }
}

/* One k step of the R x 32 tile. */
#define STEP(kk)                                                                                    \
    do {                                                                                            \
        __m512 b0 = _mm512_loadu_ps(b + (size_t)(kk) * NR);                                         \
        __m512 b1 = _mm512_loadu_ps(b + (size_t)(kk) * NR + 16);                                    \
        _Pragma("GCC unroll 14") for (int i = 0; i < R; i++) {                                      \
            __m512 av = _mm512_set1_ps(a[(size_t)i * LDA + (kk)]);                                  \
            c0[i] = _mm512_fmadd_ps(av, b0, c0[i]);                                                 \
            c1[i] = _mm512_fmadd_ps(av, b1, c1[i]);                                                 \
        }                                                                                           \
    } while (0)

/* R rows (1..MR), inlined with R constant: a tile of R < MR rows runs the
 * same per-output sequence as a full tile. */
AVX512_INLINE void ukr_body(const float *a, const float *b, int kc, float *c, int ldc, int first, float *stage,
                            const float *next, int next_rows, const float *pf, const int R) {
    __m512 c0[MR], c1[MR];
#pragma GCC unroll 14
    for (int i = 0; i < R; i++) {
        c0[i] = first ? _mm512_setzero_ps() : _mm512_load_ps(stage + i * NR);
        c1[i] = first ? _mm512_setzero_ps() : _mm512_load_ps(stage + i * NR + 16);
    }
    /* pf is an integer: rows past the end of y are prefetched harmlessly */
    uintptr_t pn = (uintptr_t)pf;
#pragma GCC unroll 14
    for (int i = 0; i < MR; i++) {
        _mm_prefetch((const char *)(pn + (size_t)i * ldc * sizeof(float)), _MM_HINT_T0);
        _mm_prefetch((const char *)(pn + ((size_t)i * ldc + NR - 1) * sizeof(float)), _MM_HINT_T0);
    }
    int half = kc / 2;
#pragma GCC unroll 2
    for (int kk = 0; kk < half; kk++) STEP(kk);
    for (int i = 0; i < next_rows; i++) {
        _mm512_store_ps(stage + i * NR, _mm512_loadu_ps(next + (size_t)i * ldc));
        _mm512_store_ps(stage + i * NR + 16, _mm512_loadu_ps(next + (size_t)i * ldc + 16));
    }
#pragma GCC unroll 2
    for (int kk = half; kk < kc; kk++) STEP(kk);
#pragma GCC unroll 14
    for (int i = 0; i < R; i++) {
        _mm512_storeu_ps(c + (size_t)i * ldc, c0[i]);
        _mm512_storeu_ps(c + (size_t)i * ldc + 16, c1[i]);
    }
}

#define UKR(R)                                                                                      \
    static AVX512_FN void ukr_##R(const float *a, const float *b, int kc, float *c, int ldc, int first, \
                                  float *stage, const float *next, int next_rows, const float *pf) {   \
        ukr_body(a, b, kc, c, ldc, first, stage, next, next_rows, pf, R);                           \
    }
UKR(1) UKR(2) UKR(3) UKR(4) UKR(5) UKR(6) UKR(7) UKR(8) UKR(9) UKR(10) UKR(11) UKR(12) UKR(13) UKR(14)

const bs_gemm_impl bs_gemm_impl_avx512 = {
    MR, NR, KC, MC, NC_MAX, LDA, KC * NR, pack_a, pack_b,
    {NULL, ukr_1, ukr_2, ukr_3, ukr_4, ukr_5, ukr_6, ukr_7, ukr_8, ukr_9, ukr_10, ukr_11, ukr_12, ukr_13, ukr_14},
    "avx512", BS_WPACK_NONE, NULL};

#endif
