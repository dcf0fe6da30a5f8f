/* Vector math shared by the kernels (attention, element-wise). Each
 * function depends only on its input lanes, so results never depend on the
 * batch, and the portable, AVX2 and AVX-512 versions of a function perform
 * the same IEEE operations in the same order lane by lane (fmaf is the
 * fused multiply-add, rintf under the default rounding mode is
 * round-to-nearest-even like _MM_FROUND_TO_NEAREST_INT), so they give the
 * same bits on every CPU. */
#ifndef BS_VMATH_H
#define BS_VMATH_H

#include <math.h>
#include <stdint.h>
#include <string.h>

/* exp(x) for x <= 0 (or NaN), the portable twin of bs_exp_neg_avx2 below:
 * x = n*ln2 + r, |r| <= ln2/2, a degree-6 polynomial for e^r (relative
 * error about 2e-7), 2^n through the exponent bits; below -87.3 the result
 * is +0. max_ps(x, lo) returns lo when x is NaN, and so does this. */
static inline float bs_exp_neg_scalar(float x) {
    const float lo = -87.3f;
    int under = x < lo;
    x = x > lo ? x : lo;
    float nf = rintf(x * 1.44269504088896341f);
    float r = fmaf(-nf, 0.693359375f, x);
    r = fmaf(-nf, -2.12194440e-4f, r);
    float p = 1.9875691500e-4f;
    p = fmaf(p, r, 1.3981999507e-3f);
    p = fmaf(p, r, 8.3334519073e-3f);
    p = fmaf(p, r, 4.1665795894e-2f);
    p = fmaf(p, r, 1.6666665459e-1f);
    p = fmaf(p, r, 5.0000001201e-1f);
    float r2 = r * r;
    p = fmaf(p, r2, r + 1.0f);
    /* n is in [-126, 0] here: the scale is a normal power of two */
    uint32_t bits = (uint32_t)((int32_t)nf + 127) << 23;
    float scale;
    memcpy(&scale, &bits, sizeof scale);
    float y = p * scale;
    return under ? 0.0f : y;
}

/* SiLU(g) * u lane by lane as the vector kernels compute it: the exponential
 * only ever sees -|g|, where it is accurate and cannot overflow;
 * SiLU(g) = g / (1 + e^-g) for g >= 0 and g e^g / (1 + e^g) for g < 0. */
static inline float bs_silu_mul_scalar(float g, float u) {
    float e = bs_exp_neg_scalar(-fabsf(g));
    float num = g < 0.0f ? g * e : g;
    return num / (1.0f + e) * u;
}

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>

#define BS_AVX2_INLINE __attribute__((target("avx2,fma"), always_inline)) static inline

/* exp(x) for x <= 0: x = n*ln2 + r, |r| <= ln2/2, a degree-6 polynomial for
 * e^r (relative error about 2e-7), 2^n through the exponent bits; below
 * -87.3 the result is 0. Deterministic: depends only on x. */
BS_AVX2_INLINE __m256 bs_exp_neg_avx2(__m256 x) {
    const __m256 lo = _mm256_set1_ps(-87.3f);
    __m256 under = _mm256_cmp_ps(x, lo, _CMP_LT_OQ);
    x = _mm256_max_ps(x, lo);
    __m256 nf = _mm256_round_ps(_mm256_mul_ps(x, _mm256_set1_ps(1.44269504088896341f)),
                                _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m256 r = _mm256_fnmadd_ps(nf, _mm256_set1_ps(0.693359375f), x);
    r = _mm256_fnmadd_ps(nf, _mm256_set1_ps(-2.12194440e-4f), r);
    __m256 p = _mm256_set1_ps(1.9875691500e-4f);
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.3981999507e-3f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(8.3334519073e-3f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(4.1665795894e-2f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.6666665459e-1f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(5.0000001201e-1f));
    __m256 r2 = _mm256_mul_ps(r, r);
    p = _mm256_fmadd_ps(p, r2, _mm256_add_ps(r, _mm256_set1_ps(1.0f)));
    __m256i e = _mm256_slli_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(nf), _mm256_set1_epi32(127)), 23);
    __m256 y = _mm256_mul_ps(p, _mm256_castsi256_ps(e));
    return _mm256_andnot_ps(under, y);
}

#define BS_AVX512_INLINE __attribute__((target("avx512f,avx2,fma"), always_inline)) static inline

/* bs_exp_neg_avx2 on 16 lanes: the same operations lane by lane. */
BS_AVX512_INLINE __m512 bs_exp_neg_avx512(__m512 x) {
    const __m512 lo = _mm512_set1_ps(-87.3f);
    __mmask16 under = _mm512_cmp_ps_mask(x, lo, _CMP_LT_OQ);
    x = _mm512_max_ps(x, lo);
    __m512 nf = _mm512_roundscale_ps(_mm512_mul_ps(x, _mm512_set1_ps(1.44269504088896341f)),
                                     _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m512 r = _mm512_fnmadd_ps(nf, _mm512_set1_ps(0.693359375f), x);
    r = _mm512_fnmadd_ps(nf, _mm512_set1_ps(-2.12194440e-4f), r);
    __m512 p = _mm512_set1_ps(1.9875691500e-4f);
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.3981999507e-3f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(8.3334519073e-3f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(4.1665795894e-2f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.6666665459e-1f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(5.0000001201e-1f));
    __m512 r2 = _mm512_mul_ps(r, r);
    p = _mm512_fmadd_ps(p, r2, _mm512_add_ps(r, _mm512_set1_ps(1.0f)));
    __m512i e = _mm512_slli_epi32(_mm512_add_epi32(_mm512_cvtps_epi32(nf), _mm512_set1_epi32(127)), 23);
    __m512 y = _mm512_mul_ps(p, _mm512_castsi512_ps(e));
    return _mm512_maskz_mov_ps((__mmask16)~under, y);
}

/* The fixed tree of eight partial sums ((v0+v4)+(v2+v6)) + ((v1+v5)+(v3+v7)),
 * which the portable kernels write out in scalar code. */
BS_AVX2_INLINE float bs_hsum8_avx2(__m256 v) {
    __m128 a = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    __m128 b = _mm_add_ps(a, _mm_movehl_ps(a, a));
    __m128 c = _mm_add_ss(b, _mm_shuffle_ps(b, b, 1));
    return _mm_cvtss_f32(c);
}

/* 8 x 8 transpose: r[i] holds row i (8 consecutive values); afterwards r[k]
 * holds column k (8 consecutive rows). */
BS_AVX2_INLINE void bs_transpose8_avx2(__m256 r[8]) {
    __m256 t0 = _mm256_unpacklo_ps(r[0], r[1]), t1 = _mm256_unpackhi_ps(r[0], r[1]);
    __m256 t2 = _mm256_unpacklo_ps(r[2], r[3]), t3 = _mm256_unpackhi_ps(r[2], r[3]);
    __m256 t4 = _mm256_unpacklo_ps(r[4], r[5]), t5 = _mm256_unpackhi_ps(r[4], r[5]);
    __m256 t6 = _mm256_unpacklo_ps(r[6], r[7]), t7 = _mm256_unpackhi_ps(r[6], r[7]);
    __m256 u0 = _mm256_shuffle_ps(t0, t2, 0x44), u1 = _mm256_shuffle_ps(t0, t2, 0xEE);
    __m256 u2 = _mm256_shuffle_ps(t1, t3, 0x44), u3 = _mm256_shuffle_ps(t1, t3, 0xEE);
    __m256 u4 = _mm256_shuffle_ps(t4, t6, 0x44), u5 = _mm256_shuffle_ps(t4, t6, 0xEE);
    __m256 u6 = _mm256_shuffle_ps(t5, t7, 0x44), u7 = _mm256_shuffle_ps(t5, t7, 0xEE);
    r[0] = _mm256_permute2f128_ps(u0, u4, 0x20);
    r[1] = _mm256_permute2f128_ps(u1, u5, 0x20);
    r[2] = _mm256_permute2f128_ps(u2, u6, 0x20);
    r[3] = _mm256_permute2f128_ps(u3, u7, 0x20);
    r[4] = _mm256_permute2f128_ps(u0, u4, 0x31);
    r[5] = _mm256_permute2f128_ps(u1, u5, 0x31);
    r[6] = _mm256_permute2f128_ps(u2, u6, 0x31);
    r[7] = _mm256_permute2f128_ps(u3, u7, 0x31);
}

#endif
#endif
