#include "cpu/elementwise.h"

#include <math.h>
#include <string.h>

#include "cpu/gemm.h"
#include "cpu/vmath.h"

/* The vector kernels' arithmetic lane by lane (vmath.h): the same bits. */
static void silu_mul_generic(float *g, const float *u, const float *bg, const float *bu, int n) {
    for (int i = 0; i < n; i++) {
        float gv = bg ? g[i] + bg[i] : g[i];
        float uv = bu ? u[i] + bu[i] : u[i];
        g[i] = bs_silu_mul_scalar(gv, uv);
    }
}

#if defined(__x86_64__) || defined(__i386__)
/* SiLU(x) = x / (1 + e^-x) for x >= 0 and x * e^x / (1 + e^x) for x < 0: the
 * exponential only ever sees -|x|, where bs_exp_neg_avx2 is accurate and
 * cannot overflow. */
BS_AVX2_INLINE __m256 silu_mul8(__m256 gv, __m256 uv) {
    __m256 sign = _mm256_set1_ps(-0.0f);
    __m256 e = bs_exp_neg_avx2(_mm256_or_ps(gv, sign));
    __m256 neg = _mm256_cmp_ps(gv, _mm256_setzero_ps(), _CMP_LT_OQ);
    __m256 num = _mm256_blendv_ps(gv, _mm256_mul_ps(gv, e), neg);
    __m256 s = _mm256_div_ps(num, _mm256_add_ps(_mm256_set1_ps(1.0f), e));
    return _mm256_mul_ps(s, uv);
}

__attribute__((target("avx2,fma"))) static void silu_mul_avx2(float *g, const float *u, const float *bg,
                                                              const float *bu, int n) {
    int i = 0;
    for (; i + 8 <= n; i += 8) {
        __m256 gv = _mm256_loadu_ps(g + i), uv = _mm256_loadu_ps(u + i);
        if (bg) gv = _mm256_add_ps(gv, _mm256_loadu_ps(bg + i));
        if (bu) uv = _mm256_add_ps(uv, _mm256_loadu_ps(bu + i));
        _mm256_storeu_ps(g + i, silu_mul8(gv, uv));
    }
    if (i < n) { /* the tail through the same lanes, padded with zeros */
        float tg[8] = {0}, tu[8] = {0};
        for (int l = 0; i + l < n; l++) {
            tg[l] = bg ? g[i + l] + bg[i + l] : g[i + l];
            tu[l] = bu ? u[i + l] + bu[i + l] : u[i + l];
        }
        _mm256_storeu_ps(tg, silu_mul8(_mm256_loadu_ps(tg), _mm256_loadu_ps(tu)));
        memcpy(g + i, tg, (size_t)(n - i) * sizeof *g);
    }
}

BS_AVX512_INLINE __m512 silu_mul16(__m512 gv, __m512 uv) {
    __m512 e = bs_exp_neg_avx512(_mm512_castsi512_ps(
        _mm512_or_si512(_mm512_castps_si512(gv), _mm512_set1_epi32((int)0x80000000u))));
    __mmask16 neg = _mm512_cmp_ps_mask(gv, _mm512_setzero_ps(), _CMP_LT_OQ);
    __m512 num = _mm512_mask_mul_ps(gv, neg, gv, e);
    __m512 s = _mm512_div_ps(num, _mm512_add_ps(_mm512_set1_ps(1.0f), e));
    return _mm512_mul_ps(s, uv);
}

/* 16 lanes with the AVX2 version's arithmetic; the tail through a masked
 * load (inactive lanes are 0 and never stored). */
__attribute__((target("avx512f,avx2,fma"))) static void silu_mul_avx512(float *g, const float *u, const float *bg,
                                                                        const float *bu, int n) {
    for (int i = 0; i < n; i += 16) {
        __mmask16 m = n - i >= 16 ? (__mmask16)0xFFFF : (__mmask16)((1u << (n - i)) - 1);
        __m512 gv = _mm512_maskz_loadu_ps(m, g + i), uv = _mm512_maskz_loadu_ps(m, u + i);
        if (bg) gv = _mm512_add_ps(gv, _mm512_maskz_loadu_ps(m, bg + i));
        if (bu) uv = _mm512_add_ps(uv, _mm512_maskz_loadu_ps(m, bu + i));
        _mm512_mask_storeu_ps(g + i, m, silu_mul16(gv, uv));
    }
}
#endif

void bs_silu_mul(float *g, const float *u, const float *bg, const float *bu, int n) {
#if defined(__x86_64__) || defined(__i386__)
    bs_kernel k = bs_gemm_kernel();
    if (k == BS_KERNEL_AVX512) {
        silu_mul_avx512(g, u, bg, bu, n);
        return;
    }
    if (k == BS_KERNEL_AVX2) {
        silu_mul_avx2(g, u, bg, bu, n);
        return;
    }
#endif
    silu_mul_generic(g, u, bg, bu, n);
}
