/* What the bf16-avx2 kernels share (gemm_bf16_avx2.c, attention_bf16.c):
 * the MXCSR access for running VDPBF16PS pair steps as plain FMAs (each
 * piece of work under the default MXCSR with its status flags cleared, then
 * redone with the exact emulation when DE or UE is set or a subnormal sum
 * ends it), and bs_f32_to_bf16 on 8 lanes. x86 only; include after
 * <immintrin.h>. */
#ifndef BS_BF16_AVX2_H
#define BS_BF16_AVX2_H

/* MXCSR: round to nearest even, every exception masked, no FTZ/DAZ; the
 * status flags denormal operand (DE) and underflow (UE). */
enum { CSR_DEFAULT = 0x1f80u, CSR_DE = 0x02u, CSR_UE = 0x10u };

/* Through memory with a clobber, so that the compiler keeps the checked
 * work's loads after the write and its stores before the read. */
static inline unsigned csr_get(void) {
    unsigned v;
    __asm__ volatile("stmxcsr %0" : "=m"(v) : : "memory");
    return v;
}
static inline void csr_set(unsigned v) { __asm__ volatile("ldmxcsr %0" : : "m"(v) : "memory"); }

/* 8 floats rounded to bf16 (nearest even; NaN quiet, as bs_f32_to_bf16),
 * kept as f32 with the low half zero. */
__attribute__((target("avx2,fma"), always_inline)) static inline __m256i round8_bf16_bits(__m256 v) {
    __m256i u = _mm256_castps_si256(v);
    __m256i lsb = _mm256_and_si256(_mm256_srli_epi32(u, 16), _mm256_set1_epi32(1));
    __m256i r = _mm256_add_epi32(u, _mm256_add_epi32(_mm256_set1_epi32(0x7fff), lsb));
    __m256i nan = _mm256_castps_si256(_mm256_cmp_ps(v, v, _CMP_UNORD_Q));
    r = _mm256_blendv_epi8(r, _mm256_or_si256(u, _mm256_set1_epi32(0x400000)), nan);
    return _mm256_and_si256(r, _mm256_set1_epi32((int)0xffff0000u));
}

/* All-ones in the lanes of v that are nonzero with |v| < 2^-126: a
 * subnormal sum, which the pair step would have flushed. */
__attribute__((target("avx2,fma"), always_inline)) static inline __m256 subnormal8(__m256 v) {
    const __m256 absm = _mm256_castsi256_ps(_mm256_set1_epi32(0x7fffffff));
    return _mm256_and_ps(_mm256_cmp_ps(_mm256_and_ps(v, absm), _mm256_set1_ps(0x1p-126f), _CMP_LT_OQ),
                         _mm256_cmp_ps(v, _mm256_setzero_ps(), _CMP_NEQ_OQ));
}

/* The odd and the even element of 8 pair words (element 2i in the low
 * half) as f32. */
__attribute__((target("avx2,fma"), always_inline)) static inline __m256 bs_odd8(__m256i w) {
    return _mm256_castsi256_ps(_mm256_and_si256(w, _mm256_set1_epi32((int)0xffff0000u)));
}
__attribute__((target("avx2,fma"), always_inline)) static inline __m256 bs_even8(__m256i w) {
    return _mm256_castsi256_ps(_mm256_slli_epi32(w, 16));
}

/* Half of a pair step on R rows x 16 lanes: acc[i][h] (lanes 8h..8h+7 of
 * row i) += a[i * lda] * v_h, one rounding each. */
__attribute__((target("avx2,fma"), always_inline)) static inline void bs_bf16_half_step_16(
    __m256 acc[][2], const float *a, size_t lda, __m256 v0, __m256 v1, const int R) {
#pragma GCC unroll 6
    for (int i = 0; i < R; i++) {
        __m256 x = _mm256_broadcast_ss(a + (size_t)i * lda);
        acc[i][0] = _mm256_fmadd_ps(x, v0, acc[i][0]);
        acc[i][1] = _mm256_fmadd_ps(x, v1, acc[i][1]);
    }
}

/* One VDPBF16PS pair step on R (<= 4) rows x 16 lanes, as FMAs: acc[i][h]
 * (lanes 8h..8h+7 of row i) with row i's pair (a + i * lda: the odd element
 * at a[0], the even one at a[1], widened) times the 16 pair words at w; the
 * odd elements first, each add rounded once (the DAZ/FTZ cases are the
 * callers' MXCSR check). The GEMM tiles, the attention scores and its
 * outputs all run this step. */
__attribute__((target("avx2,fma"), always_inline)) static inline void bs_bf16_pair_step_4x16(
    __m256 acc[][2], const float *a, size_t lda, const uint32_t *w, const int R) {
    const __m256i w0 = _mm256_loadu_si256((const __m256i *)(const void *)w);
    const __m256i w1 = _mm256_loadu_si256((const __m256i *)(const void *)(w + 8));
    bs_bf16_half_step_16(acc, a, lda, bs_odd8(w0), bs_odd8(w1), R);
    bs_bf16_half_step_16(acc, a + 1, lda, bs_even8(w0), bs_even8(w1), R);
}

#endif
