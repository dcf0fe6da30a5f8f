#include "cpu/attention.h"

#include <math.h>
#include <string.h>

#include "cpu/gemm.h"

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define BS_X86 1
#endif

/* ---- portable: plain f32 arithmetic, no contraction ---- */

static float dot_generic(const float *a, const float *b, int n) {
    float s[8] = {0};
    int i = 0;
    for (; i + 8 <= n; i += 8)
        for (int l = 0; l < 8; l++) s[l] = s[l] + a[i + l] * b[i + l];
    for (; i < n; i++) s[i & 7] = s[i & 7] + a[i] * b[i];
    return ((s[0] + s[1]) + (s[2] + s[3])) + ((s[4] + s[5]) + (s[6] + s[7]));
}

static void scores_generic(const float *q, const float *k, size_t stride, int n, int hd, float scale, float *out) {
    for (int i = 0; i < n; i++) out[i] = dot_generic(q, k + (size_t)i * stride, hd) * scale;
}

static float exp_sum_generic(float *s, int n, float mx) {
    float sum = 0.0f;
    for (int i = 0; i < n; i++) {
        s[i] = expf(s[i] - mx);
        sum = sum + s[i];
    }
    return sum;
}

static void accum_generic(const float *p, const float *v, size_t stride, int n, int hd, float *o) {
    for (int i = 0; i < n; i++) {
        const float *vv = v + (size_t)i * stride;
        for (int d = 0; d < hd; d++) o[d] = o[d] + p[i] * vv[d];
    }
}

static const bs_attn_kernels generic = {scores_generic, exp_sum_generic, accum_generic, "generic"};

#ifdef BS_X86
/* ---- AVX2 + FMA, for hd a multiple of 8 ---- */

#define AVX2 __attribute__((target("avx2,fma")))

AVX2 static inline float hsum8(__m256 v) {
    /* fixed tree: (l0+l4, l1+l5, l2+l6, l3+l7), then pairs, then the last two */
    __m128 a = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    __m128 b = _mm_add_ps(a, _mm_movehl_ps(a, a));
    __m128 c = _mm_add_ss(b, _mm_shuffle_ps(b, b, 1));
    return _mm_cvtss_f32(c);
}

AVX2 static void scores_avx2(const float *q, const float *k, size_t stride, int n, int hd, float scale, float *out) {
    for (int i = 0; i < n; i++) {
        const float *kk = k + (size_t)i * stride;
        __m256 acc = _mm256_setzero_ps();
        for (int d = 0; d < hd; d += 8) acc = _mm256_fmadd_ps(_mm256_loadu_ps(q + d), _mm256_loadu_ps(kk + d), acc);
        out[i] = hsum8(acc) * scale;
    }
}

/* exp(x) for x <= 0: x = n*ln2 + r, |r| <= ln2/2, a degree-6 polynomial for
 * e^r (relative error about 2e-7), 2^n through the exponent bits; below
 * -87.3 the result is 0. Deterministic: depends only on x. */
AVX2 static inline __m256 exp_neg_avx2(__m256 x) {
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

/* Eight partial sums by ordinal (i mod 8), combined in a fixed tree; the tail
 * runs through the same vector code padded with -inf (exp = 0). */
AVX2 static float exp_sum_avx2(float *s, int n, float mx) {
    __m256 m = _mm256_set1_ps(mx), acc = _mm256_setzero_ps();
    int i = 0;
    for (; i + 8 <= n; i += 8) {
        __m256 e = exp_neg_avx2(_mm256_sub_ps(_mm256_loadu_ps(s + i), m));
        _mm256_storeu_ps(s + i, e);
        acc = _mm256_add_ps(acc, e);
    }
    if (i < n) {
        float t[8];
        for (int l = 0; l < 8; l++) t[l] = i + l < n ? s[i + l] : -INFINITY;
        __m256 e = exp_neg_avx2(_mm256_sub_ps(_mm256_loadu_ps(t), m));
        _mm256_storeu_ps(t, e);
        acc = _mm256_add_ps(acc, e);
        memcpy(s + i, t, (size_t)(n - i) * sizeof *s);
    }
    return hsum8(acc);
}

AVX2 static void accum_avx2(const float *p, const float *v, size_t stride, int n, int hd, float *o) {
    /* 64 outputs at a time stay in registers; each output is one FMA chain over i */
    for (int d0 = 0; d0 < hd; d0 += 64) {
        int nd = hd - d0 < 64 ? (hd - d0) / 8 : 8;
        __m256 acc[8];
        for (int c = 0; c < nd; c++) acc[c] = _mm256_loadu_ps(o + d0 + 8 * c);
        for (int i = 0; i < n; i++) {
            __m256 pi = _mm256_set1_ps(p[i]);
            const float *vv = v + (size_t)i * stride + d0;
            for (int c = 0; c < nd; c++) acc[c] = _mm256_fmadd_ps(pi, _mm256_loadu_ps(vv + 8 * c), acc[c]);
        }
        for (int c = 0; c < nd; c++) _mm256_storeu_ps(o + d0 + 8 * c, acc[c]);
    }
}

static const bs_attn_kernels avx2 = {scores_avx2, exp_sum_avx2, accum_avx2, "avx2-fma"};
#endif

const bs_attn_kernels *bs_attn_kernels_for(int hd) {
#ifdef BS_X86
    if (bs_gemm_kernel() == BS_KERNEL_AVX2 && hd % 8 == 0) return &avx2;
#endif
    (void)hd;
    return &generic;
}
