/* Block Walsh-Hadamard transforms of rows (cpu/hadamard.h): the int8 mode's
 * rotation of down_proj's input. Each stage h = 1, 2, 4, ... b/2 replaces,
 * in every block, each pair (x[j], x[j + h]) with j's bit h clear by
 * (x[j] + x[j + h], x[j] - x[j + h]): one f32 add or subtract per output,
 * the same operations in the portable and the AVX-512 code, so both give
 * the same bits. */
#include "cpu/hadamard.h"

#include <string.h>

#include "cpu/gemm.h"

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define BS_X86 1
#endif

int bs_hadamard_block(int k) {
    int b = 1;
    while (b < BS_HADAMARD_MAX_BLOCK && k % (2 * b) == 0) b *= 2;
    return b >= 8 ? b : 0;
}

static void rows_portable(float *x, int rows, int ld, int k, int b) {
    for (int r = 0; r < rows; r++) {
        float *v = x + (size_t)r * ld;
        for (int h = 1; h < b; h *= 2)
            for (int i = 0; i < k; i += 2 * h)
                for (int j = i; j < i + h; j++) {
                    float a = v[j], c = v[j + h];
                    v[j] = a + c;
                    v[j + h] = a - c;
                }
    }
}

#ifdef BS_X86
#define HAD_FN __attribute__((target("avx512f")))

/* Stage h < 16 inside one vector: lanes with bit h clear get v + v[lane ^ h],
 * the others v[lane ^ h] - v (the scalar a - c with a the lower lane). */
static inline __attribute__((always_inline)) HAD_FN __m512 in_vector(__m512 v, __m512i perm, __mmask16 upper) {
    __m512 p = _mm512_permutexvar_ps(perm, v);
    return _mm512_mask_sub_ps(_mm512_add_ps(v, p), upper, p, v);
}

static HAD_FN void rows_avx512(float *x, int rows, int ld, int k, int b) {
    __m512i perm[4];
    __mmask16 upper[4];
    for (int s = 0; s < 4; s++) {
        int h = 1 << s, idx[16];
        unsigned m = 0;
        for (int l = 0; l < 16; l++) {
            idx[l] = l ^ h;
            if (l & h) m |= 1u << l;
        }
        perm[s] = _mm512_loadu_si512(idx);
        upper[s] = (__mmask16)m;
    }
    int small = b < 16 ? b : 16;
    for (int r = 0; r < rows; r++) {
        float *v = x + (size_t)r * ld;
        for (int i = 0; i < k; i += 16) { /* stages 1..8: within each vector (b >= 16) */
            __m512 a = _mm512_loadu_ps(v + i);
            for (int s = 0; (1 << s) < small; s++) a = in_vector(a, perm[s], upper[s]);
            _mm512_storeu_ps(v + i, a);
        }
        for (int h = 16; h < b; h *= 2)
            for (int i = 0; i < k; i += 2 * h)
                for (int j = i; j < i + h; j += 16) {
                    __m512 a = _mm512_loadu_ps(v + j), c = _mm512_loadu_ps(v + j + h);
                    _mm512_storeu_ps(v + j, _mm512_add_ps(a, c));
                    _mm512_storeu_ps(v + j + h, _mm512_sub_ps(a, c));
                }
    }
}
#endif

void bs_hadamard_rows_kernel(float *x, int rows, int ld, int k, int b, int vector) {
    if (b < 2) return;
#ifdef BS_X86
    if (vector && b >= 16 && bs_kernel_supported(BS_KERNEL_AVX512)) {
        rows_avx512(x, rows, ld, k, b);
        return;
    }
#endif
    (void)vector;
    rows_portable(x, rows, ld, k, b);
}

void bs_hadamard_rows(float *x, int rows, int ld, int k, int b) {
    bs_hadamard_rows_kernel(x, rows, ld, k, b, bs_gemm_kernel() == BS_KERNEL_AVX512);
}
