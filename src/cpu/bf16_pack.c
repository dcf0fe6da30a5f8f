/* Weight strips as bf16 pairs (gemm_impl.h: bs_gemm_pack_b_pairs and its
 * AVX2 form), the layout every pair-step family reads: the portable and
 * bf16-avx2 kernels in strips of 16, avx512-bf16 in strips of 32. Below the
 * families (gemm_bf16.c, gemm_bf16_avx2.c), which both pack with it. */
#include <stdint.h>
#include <string.h>

#include "base/util.h"
#include "cpu/gemm_impl.h"

/* A weight rounded to bf16 bits (bf16 storage is used as is; f16 widens
 * exactly first). */
static inline uint32_t weight_bf16(const bs_wmat *w, size_t idx) {
    switch (w->dtype) {
    case BS_BF16: return ((const uint16_t *)w->data)[idx];
    case BS_F16: return bs_f32_to_bf16(bs_f16_to_f32(((const uint16_t *)w->data)[idx]));
    case BS_I8: return bs_f32_to_bf16((float)((const int8_t *)w->data)[idx]); /* exact: |q| <= 127 */
    default: return bs_f32_to_bf16(((const float *)w->data)[idx]);
    }
}

/* The portable packing (gemm_impl.h). */
void bs_gemm_pack_b_pairs(const bs_wmat *w, int n0, int k0, int kc, float *dstf, int nr) {
    uint32_t *dst = (uint32_t *)(void *)dstf;
    int nv = w->n - n0 < nr ? w->n - n0 : nr;
    for (int j = 0; j < nr; j++) {
        size_t base = (size_t)(n0 + j) * (size_t)w->k + (size_t)k0;
        for (int kk = 0; kk < kc; kk += 2) {
            uint32_t v = 0;
            if (j < nv) v = weight_bf16(w, base + kk) | (kk + 1 < kc ? weight_bf16(w, base + kk + 1) << 16 : 0u);
            dst[(kk / 2) * nr + j] = v;
        }
    }
}

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>

#include "cpu/bf16_avx2.h" /* round8_bf16_bits */
#include "cpu/vmath.h"     /* bs_transpose8_avx2 */

#define A2_FN __attribute__((target("avx2,fma")))
#define A2_INLINE __attribute__((target("avx2,fma"), always_inline)) static inline

/* 8 pairs (16 consecutive weights) of one row as 8 words; dt constant. */
A2_INLINE __m256 load8pairs(const void *p, const bs_dtype dt) {
    if (dt == BS_BF16) return _mm256_loadu_ps(p);
    __m256i lo, hi;
    if (dt == BS_I8) { /* |q| <= 127: the f32's top half is the exact bf16 */
        __m128i b = _mm_loadu_si128((const __m128i *)p);
        lo = _mm256_castps_si256(_mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(b)));
        hi = _mm256_castps_si256(_mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_srli_si128(b, 8))));
    } else {
        lo = round8_bf16_bits(_mm256_loadu_ps(p));
        hi = round8_bf16_bits(_mm256_loadu_ps((const float *)p + 8));
    }
    /* the 16 top halves in order: packus works per 128-bit lane, a 64-bit permute restores it */
    __m256i w = _mm256_packus_epi32(_mm256_srli_epi32(lo, 16), _mm256_srli_epi32(hi, 16));
    return _mm256_castsi256_ps(_mm256_permute4x64_epi64(w, 0xD8));
}

/* A full strip of nr columns (a multiple of 8), k16 (a multiple of 16)
 * deep: 8 x 8 word transposes. */
A2_INLINE void pack_b_t(const bs_wmat *w, int n0, int k0, int k16, float *dst, int nr, const bs_dtype dt) {
    const size_t es = dt == BS_F32 ? 4 : dt == BS_I8 ? 1 : 2, ld = (size_t)w->k * es;
    const char *src = (const char *)w->data + ((size_t)n0 * w->k + (size_t)k0) * es;
    for (int kk = 0; kk < k16; kk += 16, src += 16 * es, dst += 8 * nr) {
        for (int h = 0; h < nr / 8; h++) {
            __m256 r[8];
#pragma GCC unroll 8
            for (int i = 0; i < 8; i++) r[i] = load8pairs(src + (size_t)(h * 8 + i) * ld, dt);
            bs_transpose8_avx2(r);
#pragma GCC unroll 8
            for (int i = 0; i < 8; i++) _mm256_storeu_ps(dst + i * nr + h * 8, r[i]);
        }
    }
}

A2_FN void bs_gemm_pack_b_pairs_avx2(const bs_wmat *w, int n0, int k0, int kc, float *dst, int nr) {
    int k16 = kc & ~15;
    if (w->n - n0 < nr || k16 < kc || nr % 8 || w->dtype == BS_F16) {
        bs_gemm_pack_b_pairs(w, n0, k0, kc, dst, nr);
        return;
    }
    if (w->dtype == BS_BF16) pack_b_t(w, n0, k0, k16, dst, nr, BS_BF16);
    else if (w->dtype == BS_I8) pack_b_t(w, n0, k0, k16, dst, nr, BS_I8);
    else pack_b_t(w, n0, k0, k16, dst, nr, BS_F32);
}

#endif
