/* bs_f32_to_bf16 on 16 lanes (AVX-512F), shared by the AVX512-BF16 and the
 * AMX packings so that both round x and f32 weights alike. x86 only;
 * include after <immintrin.h>. */
#ifndef BS_BF16_ROUND_AVX512_H
#define BS_BF16_ROUND_AVX512_H

/* round-to-nearest-even, NaN kept NaN (quiet) */
__attribute__((target("avx512f"), always_inline)) static inline __m256i round16_bf16(__m512 v) {
    __m512i u = _mm512_castps_si512(v);
    __m512i lsb = _mm512_and_si512(_mm512_srli_epi32(u, 16), _mm512_set1_epi32(1));
    __m512i r = _mm512_srli_epi32(_mm512_add_epi32(u, _mm512_add_epi32(lsb, _mm512_set1_epi32(0x7fff))), 16);
    __mmask16 nan = _mm512_cmpgt_epu32_mask(_mm512_and_si512(u, _mm512_set1_epi32(0x7fffffff)),
                                            _mm512_set1_epi32(0x7f800000));
    r = _mm512_mask_mov_epi32(r, nan, _mm512_or_si512(_mm512_srli_epi32(u, 16), _mm512_set1_epi32(0x40)));
    return _mm512_cvtepi32_epi16(r);
}

#endif
