/* The int8 mode's W8A8 products (gemm.h: the definition and its bound): the
 * packed weight layout (gemm_i8_impl.h), the per-row quantization of the
 * activations, one driver and four kernel families.
 *
 * Every family computes each output's integer sum over the whole of K in
 * registers (int32, exact: no K blocks, nothing passes through y), then the
 * same two f32 products. So the families differ only in speed:
 *  - int8-portable: C, signed x signed;
 *  - int8-avx2: VPMADDWD on activations widened to int16 and weights
 *    widened as they are read, 4 x 8 tiles (AVX2 CPUs without VNNI: every
 *    x86 server since Haswell; products of two values within +-127 and
 *    their pairwise sums fit int16/int32 exactly, so no saturation);
 *  - avx-vnni: VEX VPDPBUSD on 6 x 16 tiles (AVX2 CPUs with AVX-VNNI);
 *  - avx512-vnni: VPDPBUSD zmm on 14 x 32 tiles;
 *  - amx-int8: TDPBSSD on 32 x 32 blocks (gemm_amx_i8.c).
 * The VNNI instructions multiply unsigned by signed bytes: the activations
 * are stored as qx + 128 (qx ^ 0x80) and each sum starts at the weights'
 * -128 * row sum (comp), which is exact in int32 within BS_I8_MAX_K.
 *
 * The VNNI families read activations in panels of their tile height, the
 * quads of one depth of all the panel's rows side by side (row r's quad j at
 * j * 4 * mr + 4 * r), so that a tile's broadcasts are consecutive words;
 * int8-avx2 reads the same panels with every value an int16 (the byte
 * offsets doubled); the portable and AMX ones read rows (AMX: 32-row
 * panels, padded with zeros). The quantization writes each layout directly. */
#include <math.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "base/util.h"
#include "cpu/gemm_i8_impl.h"
#include "cpu/gemm_impl.h"

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#include <immintrin.h>
#define BS_X86 1
#endif

/* The numbers of BASAL_INT8 and bs_gemm_i8_supported (gemm.h); the default
 * is the first of PREFERENCE the CPU runs. */
enum { K_PORTABLE = 0, K_AVXVNNI = 1, K_AVX512VNNI = 2, K_AMX = 3, K_AVX2 = 4, K_LAST = K_AVX2 };
static const int PREFERENCE[] = {K_AMX, K_AVX512VNNI, K_AVXVNNI, K_AVX2, K_PORTABLE};
_Static_assert((int)BS_Q8_STRIP_ROWS == (int)BS_Q8_NR, "a strip's rows");

/* ---- weights ------------------------------------------------------------------ */

size_t bs_gemm_w8a8_bytes(int n, int k) {
    size_t s = (size_t)bs_q8_strips(n);
    return s * bs_q8_strip_bytes(k) + s * BS_Q8_NR * (sizeof(int32_t) + sizeof(float));
}

/* Strip s of a block being built: its rows (q_rows, row stride k; the nv
 * rows 32s.. that exist) and their scales. */
static void fill_strip(int n, int k, void *block, int s, const int8_t *q_rows, const float *scale) {
    size_t strips = (size_t)bs_q8_strips(n);
    int8_t *d = (int8_t *)block + (size_t)s * bs_q8_strip_bytes(k);
    int32_t *comp = (int32_t *)(void *)((char *)block + strips * bs_q8_strip_bytes(k));
    float *sc = (float *)(void *)(comp + strips * BS_Q8_NR);
    memset(d, 0, bs_q8_strip_bytes(k));
    for (int c = 0; c < BS_Q8_NR; c++) {
        int row = s * BS_Q8_NR + c;
        int32_t sum = 0;
        if (row < n) {
            const int8_t *src = q_rows + (size_t)c * k;
            for (int t = 0; t < k; t++) {
                d[(size_t)(t / 4) * 128 + c * 4 + t % 4] = src[t];
                sum += src[t];
            }
        }
        comp[s * BS_Q8_NR + c] = -128 * sum; /* |sum| <= 127 K: no overflow within the bound */
        sc[s * BS_Q8_NR + c] = row < n ? scale[c] : 0.0f;
    }
}

void *bs_gemm_w8a8_alloc(const bs_wmat *w) {
    void *p = NULL;
    if (w->n <= 0 || w->k <= 0 || w->k > BS_I8_MAX_K) return NULL;
    return posix_memalign(&p, 64, bs_gemm_w8a8_bytes(w->n, w->k)) ? NULL : p;
}

void bs_gemm_w8a8_fill(const bs_wmat *w, void *block, int s, const int8_t *q_rows, const float *scale) {
    fill_strip(w->n, w->k, block, s, q_rows, scale);
}

void bs_gemm_w8a8_attach(bs_wmat *w, void *block) {
    size_t strips = (size_t)bs_q8_strips(w->n);
    bs_gemm_unpack(w);
    w->packed = block;
    w->packed_kind = BS_WPACK_Q8;
    w->scale = (const float *)(const void *)((const char *)block + strips * bs_q8_strip_bytes(w->k) +
                                             strips * BS_Q8_NR * sizeof(int32_t));
}

typedef struct {
    const bs_wmat *w;
    const int8_t *q;
    const float *scale;
    void *block;
} pack_job;

static void pack_task(void *arg, int s, int thread) {
    (void)thread;
    const pack_job *j = arg;
    fill_strip(j->w->n, j->w->k, j->block, s, j->q + (size_t)s * BS_Q8_NR * j->w->k, j->scale + (size_t)s * BS_Q8_NR);
}

int bs_gemm_pack_w8a8(bs_pool *pool, bs_wmat *w, const int8_t *q, const float *scale, size_t *bytes) {
    if (bytes) *bytes = 0;
    if (w->n <= 0 || w->k <= 0) return 0;
    if (w->k > BS_I8_MAX_K) return BS_ERANGE;
    void *p = bs_gemm_w8a8_alloc(w);
    if (!p) return BS_ENOMEM;
    pack_job j = {w, q, scale, p};
    bs_pool_run(pool, bs_q8_strips(w->n), pack_task, &j);
    bs_gemm_w8a8_attach(w, p);
    if (bytes) *bytes = bs_gemm_w8a8_bytes(w->n, w->k);
    return 1;
}

void bs_gemm_w8a8_rows(const bs_wmat *w, int8_t *q) {
    for (int row = 0; row < w->n; row++) {
        const int8_t *s = bs_q8_strip(w, row / BS_Q8_NR) + (row % BS_Q8_NR) * 4;
        for (int t = 0; t < w->k; t++) q[(size_t)row * w->k + t] = s[(size_t)(t / 4) * 128 + t % 4];
    }
}

/* ---- activations ---------------------------------------------------------------- */

/* Where row r's quad j goes when il rows interleave their quads (il 1: plain rows). */
static inline size_t quad_at(int r, int j, int il, int kp) {
    return (size_t)(r / il) * (size_t)kp * (size_t)il + (size_t)j * 4u * (size_t)il + (size_t)(r % il) * 4u;
}

static inline int8_t quant_one(float x, float s) {
    float v = rintf(x / s);
    return (int8_t)(v != v ? 0 : v > 127.0f ? 127 : v < -127.0f ? -127 : (int)v);
}

void bs_quantize_act_row(const float *x, int k, int8_t *q, float *scale) {
    float amax = 0.0f;
    for (int i = 0; i < k; i++) {
        float a = fabsf(x[i]);
        if (a > amax) amax = a; /* NaN never wins */
    }
    float s = amax / 127.0f;
    *scale = s;
    for (int i = 0; i < k; i++) q[i] = s > 0.0f ? quant_one(x[i], s) : 0;
}

/* Row r of x into its place in dst (il rows interleaved, quads flipped
 * by 0x80 for the unsigned x signed kernels), zeros (flipped) up to kp. */
static void quant_row_portable(const float *x, int k, int kp, int r, int il, uint8_t flip, uint8_t *dst, float *sx) {
    float amax = 0.0f;
    for (int i = 0; i < k; i++) {
        float a = fabsf(x[i]);
        if (a > amax) amax = a; /* as bs_quantize_act_row */
    }
    float s = amax / 127.0f;
    *sx = s;
    for (int j = 0; j < kp / 4; j++) {
        uint8_t *d = dst + quad_at(r, j, il, kp);
        for (int i = 0; i < 4; i++) {
            int t = 4 * j + i;
            d[i] = (uint8_t)(t < k && s > 0.0f ? quant_one(x[t], s) : 0) ^ flip;
        }
    }
}

#ifdef BS_X86
#define I8_512 __attribute__((target("avx512f,avx512bw,avx512vl,avx512dq,avx512vnni,avx2,fma")))
#define I8_512_INLINE __attribute__((target("avx512f,avx512bw,avx512vl,avx512dq,avx512vnni,avx2,fma"), always_inline)) static inline
#define I8_AVX2 __attribute__((target("avx2,fma,avxvnni")))
#define I8_AVX2_INLINE __attribute__((target("avx2,fma,avxvnni"), always_inline)) static inline

/* The same row as quant_row_portable, 16 values per step: the same IEEE
 * division and round-to-nearest-even, NaN to 0, the same clamp. */
static I8_512 void quant_row_avx512(const float *x, int k, int kp, int r, int il, uint8_t flip, uint8_t *dst,
                                    float *sx) {
    const __m512 absmask = _mm512_castsi512_ps(_mm512_set1_epi32(0x7fffffff));
    __m512 vmax = _mm512_setzero_ps();
    int i = 0;
    for (; i + 16 <= k; i += 16) vmax = _mm512_max_ps(_mm512_and_ps(_mm512_loadu_ps(x + i), absmask), vmax);
    if (i < k)
        vmax = _mm512_max_ps(_mm512_and_ps(_mm512_maskz_loadu_ps((__mmask16)((1u << (k - i)) - 1), x + i), absmask),
                             vmax);
    float s = _mm512_reduce_max_ps(vmax) / 127.0f;
    *sx = s;
    const __m512 vs = _mm512_set1_ps(s), lo = _mm512_set1_ps(-127.0f), hi = _mm512_set1_ps(127.0f);
    const __m128i vflip = _mm_set1_epi8((char)flip);
    for (int t = 0; t < kp; t += 16) {
        int left = k - t;
        __mmask16 m = left >= 16 ? 0xffff : left > 0 ? (__mmask16)((1u << left) - 1) : 0;
        __m512 v = _mm512_roundscale_ps(_mm512_div_ps(_mm512_maskz_loadu_ps(m, x + t), vs),
                                        _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
        v = _mm512_maskz_mov_ps(_mm512_cmp_ps_mask(v, v, _CMP_ORD_Q) & m, v); /* NaN (and 0/0) to 0 */
        if (!(s > 0.0f)) v = _mm512_setzero_ps();
        v = _mm512_min_ps(_mm512_max_ps(v, lo), hi);
        __m128i b = _mm_xor_si128(_mm512_cvtepi32_epi8(_mm512_cvtps_epi32(v)), vflip);
        if (il == 1) {
            _mm_storeu_si128((__m128i *)(void *)(dst + quad_at(r, t / 4, 1, kp)), b);
        } else {
            uint32_t w4[4];
            _mm_storeu_si128((__m128i *)(void *)w4, b);
            for (int g = 0; g < 4; g++) memcpy(dst + quad_at(r, t / 4 + g, il, kp), &w4[g], 4);
        }
    }
}

#define A2 __attribute__((target("avx2,fma")))
#define A2_INLINE __attribute__((target("avx2,fma"), always_inline)) static inline

/* wide: every value as an int16 (int8-avx2's panels: byte offsets doubled,
 * flip unused), else bytes. */
A2_INLINE void quant_row_avx2_body(const float *x, int k, int kp, int r, int il, uint8_t flip, uint8_t *dst,
                                   float *sx, const int wide) {
    const __m256 absmask = _mm256_castsi256_ps(_mm256_set1_epi32(0x7fffffff));
    __m256 vmax = _mm256_setzero_ps();
    int i = 0;
    for (; i + 8 <= k; i += 8) vmax = _mm256_max_ps(_mm256_and_ps(_mm256_loadu_ps(x + i), absmask), vmax);
    float m8[8], amax = 0.0f;
    _mm256_storeu_ps(m8, vmax);
    for (int l = 0; l < 8; l++) amax = m8[l] > amax ? m8[l] : amax;
    for (; i < k; i++) amax = fabsf(x[i]) > amax ? fabsf(x[i]) : amax;
    float s = amax / 127.0f;
    *sx = s;
    const __m256 vs = _mm256_set1_ps(s), lo = _mm256_set1_ps(-127.0f), hi = _mm256_set1_ps(127.0f);
    for (int t = 0; t < kp; t += 8) {
        float in[8];
        int left = k - t;
        if (left >= 8) memcpy(in, x + t, sizeof in);
        else
            for (int l = 0; l < 8; l++) in[l] = l < left ? x[t + l] : 0.0f;
        __m256 v = _mm256_round_ps(_mm256_div_ps(_mm256_loadu_ps(in), vs), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
        v = _mm256_and_ps(v, _mm256_cmp_ps(v, v, _CMP_ORD_Q));
        if (!(s > 0.0f)) v = _mm256_setzero_ps();
        v = _mm256_min_ps(_mm256_max_ps(v, lo), hi);
        __m256i iv = _mm256_cvtps_epi32(v);
        __m128i w16 = _mm_packs_epi32(_mm256_castsi256_si128(iv), _mm256_extracti128_si256(iv, 1));
        if (wide) {
            _mm_storel_epi64((__m128i *)(void *)(dst + 2 * quad_at(r, t / 4, il, kp)), w16);
            _mm_storel_epi64((__m128i *)(void *)(dst + 2 * quad_at(r, t / 4 + 1, il, kp)), _mm_unpackhi_epi64(w16, w16));
            continue;
        }
        __m128i b = _mm_xor_si128(_mm_packs_epi16(w16, w16), _mm_set1_epi8((char)flip));
        uint32_t w4[2];
        _mm_storel_epi64((__m128i *)(void *)w4, b);
        memcpy(dst + quad_at(r, t / 4, il, kp), &w4[0], 4);
        memcpy(dst + quad_at(r, t / 4 + 1, il, kp), &w4[1], 4);
    }
}

static A2 void quant_row_avx2(const float *x, int k, int kp, int r, int il, uint8_t flip, uint8_t *dst, float *sx) {
    quant_row_avx2_body(x, k, kp, r, il, flip, dst, sx, 0);
}

static A2 void quant_row_avx2_i16(const float *x, int k, int kp, int r, int il, uint8_t flip, uint8_t *dst,
                                  float *sx) {
    quant_row_avx2_body(x, k, kp, r, il, flip, dst, sx, 1);
}
#endif

typedef void (*quant_row_fn)(const float *x, int k, int kp, int r, int il, uint8_t flip, uint8_t *dst, float *sx);

/* ---- kernels ------------------------------------------------------------------------ */

/* One tile: rows (1..mr) of quantized x (panel layout of the family) times a
 * strip, over kp, then y[i][j] = (float)acc * (sx[i] * sw[j]) for j < nv. */
typedef void (*i8_ukr)(const uint8_t *x, const int8_t *b, const int32_t *comp, int kp, const float *sx,
                       const float *sw, float *y, int ldy, int nv);

/* The epilogue, as every family computes it. */
static void store_row(const int32_t *acc, float sx, const float *sw, float *y, int nv) {
    for (int j = 0; j < nv; j++) y[j] = (float)acc[j] * (sx * sw[j]);
}

/* Portable: plain signed rows (mr 1), 4 rows x 32 columns at a time. */
enum { PMR = 4 };
static void ukr_portable_rows(const uint8_t *xu, size_t ldx, int rows, const int8_t *b, int kp, const float *sx,
                              const float *sw, float *y, int ldy, int nv) {
    const int8_t *x = (const int8_t *)xu;
    int32_t acc[PMR][BS_Q8_NR];
    memset(acc, 0, sizeof acc);
    for (int j = 0; j < kp / 4; j++) {
        const int8_t *bq = b + (size_t)j * 128;
        for (int r = 0; r < rows; r++) {
            const int8_t *xq = x + (size_t)r * ldx + 4 * j;
            int x0 = xq[0], x1 = xq[1], x2 = xq[2], x3 = xq[3];
            for (int c = 0; c < BS_Q8_NR; c++)
                acc[r][c] += x0 * bq[4 * c] + x1 * bq[4 * c + 1] + x2 * bq[4 * c + 2] + x3 * bq[4 * c + 3];
        }
    }
    for (int r = 0; r < rows; r++) store_row(acc[r], sx[r], sw, y + (size_t)r * ldy, nv);
}

#ifdef BS_X86
/* The epilogue of a block of exact sums (row stride 32) to y: the VNNI tiles' and the AMX blocks'. */
static I8_512 void store_block_avx512(const int32_t *c, int rows, const float *sx, const float *sw, float *y, int ldy,
                                      int nv) {
    const __m512 w0 = _mm512_loadu_ps(sw), w1 = _mm512_loadu_ps(sw + 16);
    const __mmask16 m0 = nv >= 16 ? 0xffff : (__mmask16)((1u << nv) - 1);
    const __mmask16 m1 = nv >= 32 ? 0xffff : nv > 16 ? (__mmask16)((1u << (nv - 16)) - 1) : 0;
    for (int r = 0; r < rows; r++) {
        const __m512 s = _mm512_set1_ps(sx[r]);
        _mm512_mask_storeu_ps(y + (size_t)r * ldy, m0,
                              _mm512_mul_ps(_mm512_cvtepi32_ps(_mm512_loadu_si512(c + r * 32)), _mm512_mul_ps(s, w0)));
        _mm512_mask_storeu_ps(y + (size_t)r * ldy + 16, m1,
                              _mm512_mul_ps(_mm512_cvtepi32_ps(_mm512_loadu_si512(c + r * 32 + 16)), _mm512_mul_ps(s, w1)));
    }
}


/* AVX512-VNNI: 14 rows x 32 columns, 28 accumulators. */
enum { VMR = 14 };

I8_512_INLINE void ukr512_body(const uint8_t *x, const int8_t *b, const int32_t *comp, int kp, const float *sx,
                               const float *sw, float *y, int ldy, int nv, const int R) {
    __m512i c0[VMR], c1[VMR];
    const __m512i k0 = _mm512_loadu_si512(comp), k1 = _mm512_loadu_si512(comp + 16);
#pragma GCC unroll 14
    for (int r = 0; r < R; r++) c0[r] = k0, c1[r] = k1;
    const int quads = kp / 4;
    for (int j = 0; j < quads; j++, x += 4 * VMR, b += 128) {
        const __m512i b0 = _mm512_loadu_si512(b), b1 = _mm512_loadu_si512(b + 64);
#pragma GCC unroll 14
        for (int r = 0; r < R; r++) {
            int32_t a4;
            memcpy(&a4, x + 4 * r, 4);
            const __m512i a = _mm512_set1_epi32(a4);
            c0[r] = _mm512_dpbusd_epi32(c0[r], a, b0);
            c1[r] = _mm512_dpbusd_epi32(c1[r], a, b1);
        }
    }
    /* the sums leave the registers before the epilogue, which would
     * otherwise need more than the 32 (gcc then spilled the sums inside
     * the loop) */
    int32_t acc[VMR * BS_Q8_NR] __attribute__((aligned(64)));
#pragma GCC unroll 14
    for (int r = 0; r < R; r++) {
        _mm512_store_si512(acc + r * BS_Q8_NR, c0[r]);
        _mm512_store_si512(acc + r * BS_Q8_NR + 16, c1[r]);
    }
    store_block_avx512(acc, R, sx, sw, y, ldy, nv);
}

#define UKR512(R)                                                                                          \
    static I8_512 void ukr512_##R(const uint8_t *x, const int8_t *b, const int32_t *comp, int kp,          \
                                  const float *sx, const float *sw, float *y, int ldy, int nv) {           \
        ukr512_body(x, b, comp, kp, sx, sw, y, ldy, nv, R);                                                \
    }
UKR512(1) UKR512(2) UKR512(3) UKR512(4) UKR512(5) UKR512(6) UKR512(7) UKR512(8) UKR512(9) UKR512(10) UKR512(11)
UKR512(12) UKR512(13) UKR512(14)

/* AVX-VNNI: 6 rows x 16 columns (half a strip) per pass, two passes. */
enum { YMR = 6 };

I8_AVX2_INLINE void ukr256_half(const uint8_t *x, const int8_t *b, const int32_t *comp, int kp, const float *sx,
                                const float *sw, float *y, int ldy, int nv, const int R) {
    __m256i c0[YMR], c1[YMR];
    const __m256i k0 = _mm256_loadu_si256((const __m256i *)(const void *)comp);
    const __m256i k1 = _mm256_loadu_si256((const __m256i *)(const void *)(comp + 8));
#pragma GCC unroll 6
    for (int r = 0; r < R; r++) c0[r] = k0, c1[r] = k1;
    const int quads = kp / 4;
#pragma GCC unroll 2
    for (int j = 0; j < quads; j++, x += 4 * YMR, b += 128) {
        const __m256i b0 = _mm256_loadu_si256((const __m256i *)(const void *)b);
        const __m256i b1 = _mm256_loadu_si256((const __m256i *)(const void *)(b + 32));
#pragma GCC unroll 6
        for (int r = 0; r < R; r++) {
            int32_t a4;
            memcpy(&a4, x + 4 * r, 4);
            const __m256i a = _mm256_set1_epi32(a4);
            c0[r] = _mm256_dpbusd_avx_epi32(c0[r], a, b0);
            c1[r] = _mm256_dpbusd_avx_epi32(c1[r], a, b1);
        }
    }
    const __m256 w0 = _mm256_loadu_ps(sw), w1 = _mm256_loadu_ps(sw + 8);
#pragma GCC unroll 6
    for (int r = 0; r < R; r++) {
        const __m256 s = _mm256_set1_ps(sx[r]);
        float out[16];
        _mm256_storeu_ps(out, _mm256_mul_ps(_mm256_cvtepi32_ps(c0[r]), _mm256_mul_ps(s, w0)));
        _mm256_storeu_ps(out + 8, _mm256_mul_ps(_mm256_cvtepi32_ps(c1[r]), _mm256_mul_ps(s, w1)));
        if (nv >= 16) memcpy(y + (size_t)r * ldy, out, sizeof out);
        else if (nv > 0) memcpy(y + (size_t)r * ldy, out, (size_t)nv * sizeof(float));
    }
}

#define UKR256(R)                                                                                          \
    static I8_AVX2 void ukr256_##R(const uint8_t *x, const int8_t *b, const int32_t *comp, int kp,         \
                                   const float *sx, const float *sw, float *y, int ldy, int nv) {          \
        ukr256_half(x, b, comp, kp, sx, sw, y, ldy, nv, R);                                                \
        ukr256_half(x, b + 64, comp + 16, kp, sx, sw + 16, y + 16, ldy, nv - 16, R);                       \
    }
UKR256(1) UKR256(2) UKR256(3) UKR256(4) UKR256(5) UKR256(6)

/* int8-avx2: 4 rows x 8 columns per pass, four passes per strip. One
 * VPMADDWD multiplies a row's quad (4 int16, broadcast) by 4 columns' quads
 * (16 weights widened to int16) and adds adjacent products: lanes (2c, 2c+1)
 * hold column c's sums of depths 4j, 4j+1 and 4j+2, 4j+3; a horizontal add
 * at the end joins them (every partial sum is exact: |each| <= 127 * 127 *
 * K < 2^31). 8 sums, 4 activation quads, a weight vector and a product fit
 * the 16 registers. */
enum { AMR = 4 };

A2_INLINE void ukr_avx2_pass(const int16_t *x, const int8_t *b, int kp, const float *sx, const float *sw, float *y,
                             int ldy, int nv, const int R) {
    __m256i c0[AMR], c1[AMR];
#pragma GCC unroll 4
    for (int r = 0; r < R; r++) c0[r] = c1[r] = _mm256_setzero_si256();
    const int quads = kp / 4;
#pragma GCC unroll 2
    for (int j = 0; j < quads; j++, x += 4 * AMR, b += 128) {
        __m256i a[AMR];
#pragma GCC unroll 4
        for (int r = 0; r < R; r++) {
            int64_t q4;
            memcpy(&q4, x + 4 * r, 8);
            a[r] = _mm256_set1_epi64x(q4);
        }
        const __m256i b0 = _mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i *)(const void *)b));
#pragma GCC unroll 4
        for (int r = 0; r < R; r++) c0[r] = _mm256_add_epi32(c0[r], _mm256_madd_epi16(a[r], b0));
        const __m256i b1 = _mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i *)(const void *)(b + 16)));
#pragma GCC unroll 4
        for (int r = 0; r < R; r++) c1[r] = _mm256_add_epi32(c1[r], _mm256_madd_epi16(a[r], b1));
    }
    const __m256 w = _mm256_loadu_ps(sw);
#pragma GCC unroll 4
    for (int r = 0; r < R; r++) {
        /* hadd per 128-bit lane: (c0: cols 0 1, c1: cols 4 5 | c0: 2 3, c1: 6 7); the 64-bit permute orders them */
        __m256i sum = _mm256_permute4x64_epi64(_mm256_hadd_epi32(c0[r], c1[r]), 0xD8);
        float out[8];
        _mm256_storeu_ps(out, _mm256_mul_ps(_mm256_cvtepi32_ps(sum), _mm256_mul_ps(_mm256_set1_ps(sx[r]), w)));
        memcpy(y + (size_t)r * ldy, out, (size_t)(nv < 8 ? nv : 8) * sizeof(float));
    }
}

#define UKRA2(R)                                                                                           \
    static A2 void ukra2_##R(const uint8_t *x, const int8_t *b, const int32_t *comp, int kp, const float *sx, \
                             const float *sw, float *y, int ldy, int nv) {                                  \
        (void)comp;                                                                                        \
        for (int c = 0; c < BS_Q8_NR && c < nv; c += 8)                                                    \
            ukr_avx2_pass((const int16_t *)(const void *)x, b + 4 * c, kp, sx, sw + c, y + c, ldy, nv - c, R); \
    }
UKRA2(1) UKRA2(2) UKRA2(3) UKRA2(4)

#endif

/* ---- kernel choice -------------------------------------------------------------------- */

static atomic_int i8_kernel = -1, i8_emulate = 0;

static int cpu_has(const char *what) {
#ifdef BS_X86
    __builtin_cpu_init();
    if (!strcmp(what, "avx512vnni"))
        return __builtin_cpu_supports("avx512vnni") && __builtin_cpu_supports("avx512bw") &&
               __builtin_cpu_supports("avx512dq") && __builtin_cpu_supports("avx512vl");
    if (!strcmp(what, "avxvnni")) { /* CPUID.(7,1):EAX bit 4 (clang 14 has no "avxvnni" for the builtin) */
        unsigned a, b, c, d;
        return __get_cpuid_count(7, 1, &a, &b, &c, &d) && (a >> 4 & 1u);
    }
#endif
    (void)what;
    return 0;
}

int bs_gemm_i8_supported(int k) {
    switch (k) {
    case K_PORTABLE: return 1;
    case K_AVXVNNI: return bs_gemm_kernel() >= BS_KERNEL_AVX2 && cpu_has("avxvnni");
    case K_AVX512VNNI: return bs_gemm_kernel() == BS_KERNEL_AVX512 && cpu_has("avx512vnni");
    case K_AMX: return bs_gemm_i8_supported(K_AVX512VNNI) && bs_gemm_amx_i8_available();
    case K_AVX2: return bs_gemm_kernel() >= BS_KERNEL_AVX2;
    default: return 0;
    }
}

int bs_gemm_i8_parse(const char *name) {
    if (!name || !*name || !strcmp(name, "auto")) return -1;
    if (!strcmp(name, "amx") || !strcmp(name, "amx-int8")) return K_AMX;
    if (!strcmp(name, "avx512-vnni") || !strcmp(name, "avx512vnni")) return K_AVX512VNNI;
    if (!strcmp(name, "avx-vnni") || !strcmp(name, "avxvnni")) return K_AVXVNNI;
    if (!strcmp(name, "avx2") || !strcmp(name, "int8-avx2")) return K_AVX2;
    if (!strcmp(name, "portable") || !strcmp(name, "int8-portable")) return K_PORTABLE;
    return -2;
}

int bs_gemm_i8_kernel(void) {
    int k = atomic_load(&i8_kernel);
    if (k >= 0) return k;
    int want = bs_gemm_i8_parse(getenv("BASAL_INT8")), i = 0;
    if (want >= 0)
        while (PREFERENCE[i] != want) i++;
    while (PREFERENCE[i] != K_PORTABLE && !bs_gemm_i8_supported(PREFERENCE[i])) i++;
    int expected = -1;
    atomic_compare_exchange_strong(&i8_kernel, &expected, PREFERENCE[i]);
    return atomic_load(&i8_kernel);
}

int bs_gemm_force_i8(int k) {
    int old = bs_gemm_i8_kernel();
    if (bs_gemm_i8_supported(k)) atomic_store(&i8_kernel, k);
    return old;
}

int bs_gemm_i8_emulate_amx(int on) { return atomic_exchange(&i8_emulate, on); }

const char *bs_gemm_i8_name_of(int k) {
    static const char *const names[] = {"int8-portable", "avx-vnni", "avx512-vnni", "amx-int8", "int8-avx2"};
    return k >= 0 && k <= K_LAST ? names[k] : "unknown";
}

const char *bs_gemm_i8_kernel_name(void) { return bs_gemm_i8_name_of(bs_gemm_i8_kernel()); }

/* ---- driver ------------------------------------------------------------------------------ */

typedef struct {
    int kernel, emulated; /* emulated: the AMX path with the C emulation of its block */
    int mr;               /* rows per panel (tile height) */
    int xsize;            /* bytes per quantized activation: 1, or 2 (int8-avx2's int16) */
    int il;               /* rows whose quads are interleaved: mr (VNNI panels) or 1 (plain rows) */
    uint8_t flip;         /* 0x80: unsigned x signed */
    quant_row_fn quant;
    const i8_ukr *ukr;    /* VNNI families: by rows; NULL: portable rows or AMX blocks */
} family;

typedef struct {
    const family *f;
    const bs_wmat *w;
    const float *x;
    int ldx, m, kp;
    uint8_t *xq; /* the quantized x, in the family's layout */
    float *sx;
    float *y;
    int ldy;
    int panels, strips, rgs, cgs, mb; /* mb: panels per row block */
} i8_job;

enum { QROWS = 8 };

static void quant_task(void *arg, int t, int thread) {
    (void)thread;
    const i8_job *j = arg;
    for (int r = t * QROWS; r < j->m && r < (t + 1) * QROWS; r++)
        j->f->quant(j->x + (size_t)r * j->ldx, j->w->k, j->kp, r, j->f->il, j->f->flip, j->xq, j->sx + r);
}

/* One tile or block of outputs: panel p (mr rows) times strip s. */
static void tile(const i8_job *j, int p, int s) {
    const family *f = j->f;
    const bs_wmat *w = j->w;
    int r0 = p * f->mr, rows = j->m - r0 < f->mr ? j->m - r0 : f->mr;
    int nv = w->n - s * BS_Q8_NR < BS_Q8_NR ? w->n - s * BS_Q8_NR : BS_Q8_NR;
    const int8_t *b = bs_q8_strip(w, s);
    const float *sw = w->scale + (size_t)s * BS_Q8_NR, *sx = j->sx + r0;
    float *y = j->y + (size_t)r0 * j->ldy + (size_t)s * BS_Q8_NR;
    const uint8_t *xp = j->xq + (size_t)p * j->kp * f->mr * f->xsize;
    if (f->ukr) {
        f->ukr[rows](xp, b, bs_q8_comp(w) + (size_t)s * BS_Q8_NR, j->kp, sx, sw, y, j->ldy, nv);
    } else if (f->kernel == K_AMX) {
        int32_t c[32 * 32] __attribute__((aligned(64)));
        if (f->emulated) bs_amx_i8_block_emulated((const int8_t *)xp, (size_t)j->kp, rows > 16, b, j->kp, c);
        else bs_amx_i8_block((const int8_t *)xp, (size_t)j->kp, rows > 16, b, j->kp, c);
#ifdef BS_X86
        if (!f->emulated) {
            store_block_avx512(c, rows, sx, sw, y, j->ldy, nv);
            return;
        }
#endif
        for (int r = 0; r < rows; r++) store_row(c + r * 32, sx[r], sw, y + (size_t)r * j->ldy, nv);
    } else {
        ukr_portable_rows(xp, (size_t)j->kp, rows, b, j->kp, sx, sw, y, j->ldy, nv);
    }
}

/* A task: a rectangle of panels x strips, walked in row blocks; within one,
 * strip by strip (each strip streams from memory once per row block and
 * stays in cache while the block's panels pass over it). */
static void compute_task(void *arg, int task, int thread) {
    (void)thread;
    const i8_job *j = arg;
    int rg = task / j->cgs, cg = task % j->cgs;
    int p0 = (int)((long long)j->panels * rg / j->rgs), p1 = (int)((long long)j->panels * (rg + 1) / j->rgs);
    int s0 = (int)((long long)j->strips * cg / j->cgs), s1 = (int)((long long)j->strips * (cg + 1) / j->cgs);
    int nblk = (p1 - p0 + j->mb - 1) / j->mb, mb = nblk ? (p1 - p0 + nblk - 1) / nblk : 1;
    for (int pb = p0; pb < p1; pb += mb) {
        int pe = pb + mb < p1 ? pb + mb : p1;
        for (int s = s0; s < s1; s++)
            for (int p = pb; p < pe; p++) tile(j, p, s);
    }
}

#ifdef BS_X86
static const i8_ukr ukr512[VMR + 1] = {NULL, ukr512_1, ukr512_2, ukr512_3, ukr512_4, ukr512_5, ukr512_6, ukr512_7,
                                       ukr512_8, ukr512_9, ukr512_10, ukr512_11, ukr512_12, ukr512_13, ukr512_14};
static const i8_ukr ukr256[YMR + 1] = {NULL, ukr256_1, ukr256_2, ukr256_3, ukr256_4, ukr256_5, ukr256_6};
static const i8_ukr ukra2[AMR + 1] = {NULL, ukra2_1, ukra2_2, ukra2_3, ukra2_4};
#endif

static family family_of(int k, int emulate) {
    family f = {K_PORTABLE, 0, PMR, 1, 1, 0, quant_row_portable, NULL};
    if (emulate) {
        f.kernel = K_AMX;
        f.emulated = 1;
        f.mr = 32;
        return f;
    }
#ifdef BS_X86
    switch (k) {
    case K_AMX: f = (family){K_AMX, 0, 32, 1, 1, 0, quant_row_avx512, NULL}; break;
    case K_AVX512VNNI: f = (family){K_AVX512VNNI, 0, VMR, 1, VMR, 0x80, quant_row_avx512, ukr512}; break;
    case K_AVXVNNI: f = (family){K_AVXVNNI, 0, YMR, 1, YMR, 0x80, quant_row_avx2, ukr256}; break;
    case K_AVX2: f = (family){K_AVX2, 0, AMR, 2, AMR, 0, quant_row_avx2_i16, ukra2}; break;
    default: break;
    }
#else
    (void)k;
#endif
    return f;
}

/* Rows of quantized x per row block at most (2 MiB: beyond it the block
 * leaves L2/L3 before the next strip reads it again). */
static const size_t X_BLOCK = (size_t)2 << 20;

/* Out of memory: the product cannot fail, so it runs serially one row at a
 * time (the portable kernel on the stack: the same integers, the same bits). */
static __attribute__((noinline)) void gemm_i8_small(const float *x, int ldx, int m, const bs_wmat *w, float *y,
                                                     int ldy) {
    uint8_t row[BS_I8_MAX_K + BS_Q8_KALIGN] __attribute__((aligned(64))); /* 65 KiB */
    int kp = bs_q8_kp(w->k);
    for (int i = 0; i < m; i++) {
        float sx;
        quant_row_portable(x + (size_t)i * ldx, w->k, kp, 0, 1, 0, row, &sx);
        for (int s = 0; s < bs_q8_strips(w->n); s++) {
            int nv = w->n - s * BS_Q8_NR < BS_Q8_NR ? w->n - s * BS_Q8_NR : BS_Q8_NR;
            ukr_portable_rows(row, (size_t)kp, 1, bs_q8_strip(w, s), kp, &sx, w->scale + (size_t)s * BS_Q8_NR,
                              y + (size_t)i * ldy + (size_t)s * BS_Q8_NR, ldy, nv);
        }
    }
}

void bs_gemm_w8a8(bs_pool *pool, const float *x, int ldx, int m, const bs_wmat *w, float *y, int ldy) {
    if (m <= 0 || w->n <= 0) return;
    family f = family_of(bs_gemm_i8_kernel(), atomic_load(&i8_emulate));
    i8_job j = {0};
    j.f = &f;
    j.w = w;
    j.x = x;
    j.ldx = ldx;
    j.m = m;
    j.kp = bs_q8_kp(w->k);
    j.y = y;
    j.ldy = ldy;
    j.panels = (m + f.mr - 1) / f.mr;
    j.strips = bs_q8_strips(w->n);
    size_t xbytes = (size_t)j.panels * f.mr * j.kp * f.xsize; /* whole panels: AMX reads 32 rows */
    float *scratch = bs_gemm_scratch_take((xbytes + 63) / 4 + (size_t)m + 16);
    if (!scratch) {
        gemm_i8_small(x, ldx, m, w, y, ldy);
        return;
    }
    j.xq = (uint8_t *)scratch;
    j.sx = (float *)(void *)(j.xq + ((xbytes + 63) & ~(size_t)63));
    if ((size_t)m < (size_t)j.panels * f.mr) /* the rows of the last panel that do not exist read as zeros */
        memset(j.xq + (size_t)(j.panels - 1) * f.mr * j.kp * f.xsize, (int)f.flip, (size_t)f.mr * j.kp * f.xsize);
    int nthreads = bs_pool_size(pool);
    bs_pool_run(pool, (m + QROWS - 1) / QROWS, quant_task, &j);
    /* columns split among the threads; rows as well when there are too few
     * strips for each thread to stream several */
    j.cgs = nthreads < j.strips ? nthreads : j.strips;
    j.rgs = 1;
    if (j.strips < 4 * nthreads && j.panels >= nthreads) {
        j.cgs = 1;
        j.rgs = nthreads;
    }
    size_t panel_bytes = (size_t)f.mr * j.kp * f.xsize;
    j.mb = (int)(X_BLOCK / panel_bytes);
    if (j.mb < 1) j.mb = 1;
    bs_pool_run(pool, j.rgs * j.cgs, compute_task, &j);
    bs_gemm_scratch_give_back(scratch);
}
