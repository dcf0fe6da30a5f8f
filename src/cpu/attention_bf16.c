/* Attention in the bf16 compute mode (dtype bf16 on the CPU): its two
 * matrix products take bf16 inputs, like the projections' GEMMs.
 *
 * The definition, per (query, head), on tiles of 128 key ordinals (0..127,
 * 128..255, ...; attention.c, spec 05 §9 V4, §13.2 A3, with 64) with the
 * same online softmax:
 *  - q, k and v are rounded to bf16 (round-to-nearest-even). k and v are
 *    rounded once per layer by the forward (bs_attn_round_bf16, so that a
 *    cached prefix holds the same values); here their upper 16 bits are
 *    taken as they are. q is rounded when a block starts.
 *  - score s_j = (q . k_j) * scale, the dot product accumulated in f32 over
 *    the pairs of head dimensions (0,1), (2,3), ... in order (an odd head
 *    size ends with the pair (hd-1, zero));
 *  - m' = max(m, max s), c = exp(m - m') as in f32;
 *    p_j = bf16(exp2(x * log2(e))) with x = s_j - m', where exp2 is a
 *    degree-4 polynomial on the fraction scaled by 2^n (exp2_bf16 below:
 *    relative error 3e-6, far under bf16's 2^-9, and about half the work of
 *    the f32 mode's exponential, which was the largest cost of a tile), a
 *    subnormal result read as zero, then round-to-nearest-even (what
 *    VCVTNEPS2BF16 does); l = l*c + the sum of those rounded p_j over the
 *    tile's visible keys, so that the weights are normalised by exactly
 *    their own sum: 16 partial sums, partial k adding the pairs (32i + 2k,
 *    32i + 2k + 1), i = 0, 1, ..., as VDPBF16PS pair steps with (1, 1) (p
 *    of keys past the visible ones is zero), then a fixed tree;
 *  - o = o*c, then accumulated in f32 over the key pairs (j, j+1) of the
 *    visible keys in ordinal order (p of a key past the last visible one is
 *    zero); at the end o * (1/l).
 * The accumulations are the GEMM's bf16 arithmetic (gemm_bf16.c): in the
 * portable emulation, with AVX512-BF16 and in the AVX2 FMA kernel, one
 * VDPBF16PS pair step each (the odd element's exact product first, then the
 * even one's, each add rounded once, DAZ/FTZ; on AVX2 as two FMAs, redone
 * with the emulation where a subnormal appears), so those three kernels give
 * the same bits on every CPU. With AMX the two products are TDPBF16PS tiles
 * (one per 32 head dimensions for the scores, one per 32 keys for o; o
 * enters the tile as o*c and leaves it after the tile's four steps): its own
 * bits, as the AMX GEMM. Every kernel computes a (query, head) from its own
 * prompt only (a tile row depends on its own query row; keys past a row's
 * limit get p = 0, adding exact zeros), so results are batch-invariant and
 * thread-count independent in each kernel (tests/unit/test_attention.c).
 *
 * Against the f32 definition this rounds q, k, v and p to 8 significant
 * bits: about 2^-9 relative on each score term and each weight. */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "base/util.h"
#include "cpu/attention_bf16.h"
#include "cpu/gemm_impl.h"
#include "cpu/vmath.h"

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define BS_X86 1
#include "cpu/bf16_avx2.h"          /* the MXCSR access, round8_bf16_bits, subnormal8 */
#include "cpu/bf16_round_avx512.h" /* round16_bf16 */
#endif

/* TILE: key ordinals per tile, twice the f32 mode's 64: o passes through
 * memory once per tile between the online-softmax rescales, and with AMX
 * that round trip cost as much as the products of 64 keys (a definition
 * of this mode: the tile bounds are where the running max is updated) */
enum { TILE = 128, PAD = 16, ROWS_TARGET = 384 };

/* Layout of one block (pairs are 32-bit words, element 2i in the low half):
 *   qb [R+PAD][hp]      query pairs, hp = pairs of hd rounded up to 16
 *   kb [hp][TILE]       key pairs of the tile, transposed (keys along a row)
 *   vb [TILE/2][dv]     value pairs of the tile: word (j, d) = v[2j][d] | v[2j+1][d] << 16
 *   s  [R+PAD][TILE]    scores; pb [R+PAD][TILE] their bf16 weights
 *   oc [R+PAD][dv]      the outputs being accumulated
 * dv = hd rounded up to the kernel's column group (16, or 64 for AMX).
 * Rows past R are padding that tile kernels may compute and nobody reads. */
typedef struct {
    int hd, hp, dv, R;
    uint32_t *qb, *kb, *vb;
    float *s, *oc;
    uint16_t *pb;
} blk_t;

typedef struct bf16_kernels {
    int dv_align;
    /* one query row (hd floats) into pairs at dst (zeros past hd are there) */
    void (*pack_q)(const float *q, int hd, uint32_t *dst);
    /* kb and vb from the tile's nt keys (zeros past nt) */
    void (*gather)(const float *const *kp, const float *const *vp, int nt, const blk_t *B);
    /* s rows r0..r0+nr-1 for all TILE keys: the dot products, before the
     * scale (the two kernels below apply it: the same bits as a scaled
     * copy, without one more pass over s) */
    void (*scores)(const blk_t *B, int r0, int nr);
    /* max(m, s[j]*scale for j < n) (exact: rounding is monotonic, so it is
     * the scaled maximum) */
    float (*row_max)(const float *s, int n, float m, float scale);
    /* pb row = exp2_bf16(s*scale - mx) for j < vis, zero to TILE; returns
     * the sum of those bf16 values */
    float (*exp_sum)(const float *s, uint16_t *pb, int vis, float mx, float scale);
    /* oc rows r0..r0+nr-1: o = o*c[r], then the pairs p < npairs[r] */
    void (*accum)(const blk_t *B, int r0, int nr, const float *c, const int *npairs);
    const char *name;
} bf16_kernels;

static inline uint32_t hi16(float f) {
    uint32_t u;
    memcpy(&u, &f, 4);
    return u >> 16;
}

/* ---- portable: the exact VDPBF16PS emulation of gemm_bf16.c ---- */

static void pack_q_generic(const float *q, int hd, uint32_t *dst) {
    for (int d = 0; d < hd; d += 2)
        dst[d / 2] = bs_f32_to_bf16(q[d]) | (d + 1 < hd ? (uint32_t)bs_f32_to_bf16(q[d + 1]) << 16 : 0u);
}

static void gather_generic(const float *const *kp, const float *const *vp, int nt, const blk_t *B) {
    int hd = B->hd;
    for (int p = 0; p < B->hp; p++)
        for (int j = 0; j < TILE; j++) {
            uint32_t w = 0;
            if (j < nt && 2 * p < hd) w = hi16(kp[j][2 * p]) | (2 * p + 1 < hd ? hi16(kp[j][2 * p + 1]) << 16 : 0u);
            B->kb[(size_t)p * TILE + j] = w;
        }
    for (int jp = 0; jp < TILE / 2; jp++)
        for (int d = 0; d < B->dv; d++) {
            int j = 2 * jp;
            uint32_t w = 0;
            if (d < hd && j < nt) w = hi16(vp[j][d]) | (j + 1 < nt ? hi16(vp[j + 1][d]) << 16 : 0u);
            B->vb[(size_t)jp * B->dv + d] = w;
        }
}

static void scores_generic(const blk_t *B, int r0, int nr) {
    int np = (B->hd + 1) / 2;
    for (int r = r0; r < r0 + nr; r++) {
        const uint32_t *q = B->qb + (size_t)r * B->hp;
        for (int j = 0; j < TILE; j++) {
            float acc = 0.0f;
            for (int p = 0; p < np; p++) acc = bs_bf16_pair_step(acc, q[p], B->kb[(size_t)p * TILE + j]);
            B->s[(size_t)r * TILE + j] = acc;
        }
    }
}

static float row_max_generic(const float *s, int n, float m, float scale) {
    float t = -INFINITY;
    for (int j = 0; j < n; j++)
        if (s[j] > t) t = s[j];
    t = t * scale;
    return t > m ? t : m;
}

/* 2^f on [-1/2, 1/2], c0 = 1 (so x = 0 gives 1 exactly): a least-squares
 * fit of the relative error in float64, coefficients rounded to float. */
#define EXP2_C1 0.6931219696998596f
#define EXP2_C2 0.24023719131946564f
#define EXP2_C3 0.05591697618365288f
#define EXP2_C4 0.009600409306585789f
#define LOG2E 1.44269504088896341f

/* The weight of a score x - m <= 0 as bf16 bits: t = x*log2(e), n =
 * rint(t), f = t - n, p = 2^f by the polynomial (fmaf, Horner), p * 2^n
 * (exact where normal, 0 far below: scalef in the vector kernels), a
 * subnormal read as zero, rounded to nearest-even. */
static inline uint16_t exp2_bf16(float x) {
    float t = x * LOG2E, n = rintf(t), f = t - n;
    float p = fmaf(fmaf(fmaf(fmaf(EXP2_C4, f, EXP2_C3), f, EXP2_C2), f, EXP2_C1), f, 1.0f);
    float e = n < -200.0f ? 0.0f : ldexpf(p, (int)n);
    return e < 0x1p-126f ? 0 : bs_f32_to_bf16(e);
}

static float tree16(const float *part) {
    float t[8];
    for (int i = 0; i < 8; i++) t[i] = part[i] + part[i + 8];
    return ((t[0] + t[4]) + (t[2] + t[6])) + ((t[1] + t[5]) + (t[3] + t[7]));
}

enum { BF16_ONES = 0x3f803f80u }; /* the pair (1, 1) */

static float exp_sum_generic(const float *s, uint16_t *pb, int vis, float mx, float scale) {
    float part[16] = {0};
    for (int j = 0; j < TILE; j++) pb[j] = j < vis ? exp2_bf16(s[j] * scale - mx) : 0;
    for (int j0 = 0; j0 < vis; j0 += 32)
        for (int k = 0; k < 16; k++) {
            const uint16_t *p = pb + j0 + 2 * k;
            part[k] = bs_bf16_pair_step(part[k], p[0] | (uint32_t)p[1] << 16, BF16_ONES);
        }
    return tree16(part);
}

/* accum on the output dims d0..d1-1 only (the AVX2 kernel redoes a piece) */
static void accum_dims(const blk_t *B, int r0, int nr, const float *c, const int *npairs, int d0, int d1) {
    for (int r = r0; r < r0 + nr; r++) {
        float *o = B->oc + (size_t)r * B->dv;
        const uint16_t *p = B->pb + (size_t)r * TILE;
        if (c[r] != 1.0f) /* o*1 = o: skipping it changes no bit */
            for (int d = d0; d < d1; d++) o[d] = o[d] * c[r];
        for (int jp = 0; jp < npairs[r]; jp++) {
            uint32_t pw = p[2 * jp] | (uint32_t)p[2 * jp + 1] << 16;
            const uint32_t *v = B->vb + (size_t)jp * B->dv;
            for (int d = d0; d < d1; d++) o[d] = bs_bf16_pair_step(o[d], pw, v[d]);
        }
    }
}

static void accum_generic(const blk_t *B, int r0, int nr, const float *c, const int *npairs) {
    accum_dims(B, r0, nr, c, npairs, 0, B->hd);
}

static const bf16_kernels generic = {16, pack_q_generic, gather_generic, scores_generic, row_max_generic,
                                     exp_sum_generic, accum_generic, "bf16-portable"};

#ifdef BS_X86
/* ---- AVX2 + FMA ("bf16-avx2"): the pair steps as plain FMAs ----
 *
 * The GEMM's bf16-avx2 technique (gemm_bf16_avx2.c, bf16_avx2.h): a bf16 x
 * bf16 product is exact in f32, so a pair step is two FMAs (odd element
 * first) unless an input or a sum is subnormal or a result underflows. The
 * score and o products run as FMAs under the default MXCSR with its flags
 * cleared, one checked piece per 4 rows (all 128 keys for s; 64 output
 * dims for o); DE, UE or a subnormal final sum sends the piece to the
 * portable code, from its original inputs. The weights' sums need no check:
 * every weight is 0 or at least 2^-126, so no sum is subnormal and a step
 * with (1, 1) is two plain adds. */

#define A2_FN __attribute__((target("avx2,fma")))
#define A2_INLINE __attribute__((target("avx2,fma"), always_inline)) static inline

/* The last group of 4 score rows may run into the padding rows (zero
 * queries); accum leaves their o and zero weights as they are. */
_Static_assert(PAD >= 3, "the AVX2 score groups need 3 padding rows");

/* 8 words at p, those from lane n on zero (and not read). */
A2_INLINE __m256i load8_masked(const void *p, int n) {
    if (n >= 8) return _mm256_loadu_si256((const __m256i *)p);
    const __m256i lane = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
    return _mm256_maskload_epi32((const int *)p, _mm256_cmpgt_epi32(_mm256_set1_epi32(n), lane));
}

/* The upper halves of 16 words (lo's 8, then hi's) in order: 8 pair words. */
A2_INLINE __m256i pairs8(__m256i lo, __m256i hi) {
    __m256i w = _mm256_packus_epi32(_mm256_srli_epi32(lo, 16), _mm256_srli_epi32(hi, 16));
    return _mm256_permute4x64_epi64(w, 0xD8); /* packus works per 128-bit lane */
}

A2_FN static void pack_q_avx2(const float *q, int hd, uint32_t *dst) {
    int d = 0;
    for (; d + 16 <= hd; d += 16) {
        __m256i w = pairs8(round8_bf16_bits(_mm256_loadu_ps(q + d)), round8_bf16_bits(_mm256_loadu_ps(q + d + 8)));
        _mm256_storeu_si256((__m256i *)(void *)(dst + d / 2), w);
    }
    if (d < hd) pack_q_generic(q + d, hd - d, dst + d / 2);
}

/* gather_avx512's plan with AVX2 moves (the same words as gather_generic). */
A2_FN static void gather_avx2(const float *const *kp, const float *const *vp, int nt, const blk_t *B) {
    int hd = B->hd, dv = B->dv;
    for (int j0 = 0; j0 < TILE; j0 += 8)
        for (int p0 = 0; p0 < B->hp; p0 += 8) {
            int e = 2 * p0, left = hd - e; /* floats of the 8 pairs */
            __m256 r[8];
            for (int i = 0; i < 8; i++) {
                __m256i w = _mm256_setzero_si256();
                if (j0 + i < nt && left > 0) {
                    const float *k = kp[j0 + i] + e;
                    w = pairs8(load8_masked(k, left), left > 8 ? load8_masked(k + 8, left - 8) : _mm256_setzero_si256());
                }
                r[i] = _mm256_castsi256_ps(w);
            }
            bs_transpose8_avx2(r);
            for (int i = 0; i < 8; i++) _mm256_storeu_ps((float *)(void *)(B->kb + (size_t)(p0 + i) * TILE + j0), r[i]);
        }
    const __m256i mhi = _mm256_set1_epi32((int)0xffff0000u);
    for (int jp = 0; jp < TILE / 2; jp++) {
        int j = 2 * jp;
        uint32_t *dst = B->vb + (size_t)jp * dv;
        for (int d = 0; d < dv; d += 8) {
            __m256i a = _mm256_setzero_si256(), b = a;
            if (d < hd && j < nt) a = load8_masked(vp[j] + d, hd - d);
            if (d < hd && j + 1 < nt) b = load8_masked(vp[j + 1] + d, hd - d);
            __m256i w = _mm256_or_si256(_mm256_srli_epi32(a, 16), _mm256_and_si256(b, mhi));
            _mm256_storeu_si256((__m256i *)(void *)(dst + d), w);
        }
    }
}


enum { QCH = 64 }; /* head pairs per staged piece of the query rows */

/* s of rows r..r+3 x 16 keys from c0 over the pairs p0..p0+pn-1, going on
 * from the sums in s unless first. qw: the rows' pairs widened (odd element,
 * even element), so that a broadcast from memory feeds the FMAs. Returns the
 * lanes whose sum is subnormal. 8 chains of 2 FMAs per pair: as many as the
 * two FMA pipes keep in flight. */
A2_INLINE __m256 scores_4x16(const blk_t *B, int r, int c0, int p0, int pn, const float (*qw)[2 * QCH], int first) {
    __m256 acc[4][2];
#pragma GCC unroll 4
    for (int i = 0; i < 4; i++) {
        const float *s = B->s + (size_t)(r + i) * TILE + c0;
        acc[i][0] = first ? _mm256_setzero_ps() : _mm256_loadu_ps(s);
        acc[i][1] = first ? _mm256_setzero_ps() : _mm256_loadu_ps(s + 8);
    }
    for (int p = 0; p < pn; p++)
        bs_bf16_pair_step_4x16(acc, &qw[0][2 * p], 2 * QCH, B->kb + (size_t)(p0 + p) * TILE + c0, 4);
    __m256 sub = _mm256_setzero_ps();
#pragma GCC unroll 4
    for (int i = 0; i < 4; i++) {
        float *s = B->s + (size_t)(r + i) * TILE + c0;
        sub = _mm256_or_ps(sub, _mm256_or_ps(subnormal8(acc[i][0]), subnormal8(acc[i][1])));
        _mm256_storeu_ps(s, acc[i][0]);
        _mm256_storeu_ps(s + 8, acc[i][1]);
    }
    return sub;
}

/* s of rows r..r+3, all keys: nonzero when a sum ended subnormal (a sum
 * passed on through s between pieces of the head is an FMA operand next,
 * which DE reports). */
A2_FN static int scores_group(const blk_t *B, int r) {
    float qw[4][2 * QCH];
    int np = (B->hd + 1) / 2;
    __m256 sub = _mm256_setzero_ps();
    for (int p0 = 0; p0 < np; p0 += QCH) {
        int pn = np - p0 < QCH ? np - p0 : QCH;
        for (int i = 0; i < 4; i++)
            for (int p = 0; p < pn; p++) {
                uint32_t w = B->qb[(size_t)(r + i) * B->hp + p0 + p], o = w & 0xffff0000u, e = w << 16;
                memcpy(&qw[i][2 * p], &o, 4);
                memcpy(&qw[i][2 * p + 1], &e, 4);
            }
        for (int c0 = 0; c0 < TILE; c0 += 16) sub = _mm256_or_ps(sub, scores_4x16(B, r, c0, p0, pn, qw, p0 == 0));
    }
    return _mm256_movemask_ps(sub);
}

A2_FN static void scores_avx2(const blk_t *B, int r0, int nr) {
    const unsigned csr = csr_get();
    for (int r = r0; r < r0 + nr; r += 4) {
        csr_set(CSR_DEFAULT);
        int sub = scores_group(B, r);
        unsigned flags = csr_get();
        if ((flags & (CSR_DE | CSR_UE)) || sub) { /* s is only written: redo it from qb and kb */
            csr_set(csr);
            scores_generic(B, r, 4);
        }
    }
    csr_set(csr);
}

/* Exact, as the maximum is; a maximum of zero goes to the scalar loop, which
 * keeps the first zero's sign (vmaxps keeps its second operand on ties). */
A2_FN static float row_max_avx2(const float *s, int n, float m, float scale) {
    __m256 acc = _mm256_set1_ps(-INFINITY);
    int j = 0;
    for (; j + 8 <= n; j += 8) acc = _mm256_max_ps(_mm256_loadu_ps(s + j), acc); /* a NaN score keeps acc */
    float lane[8], t = -INFINITY;
    _mm256_storeu_ps(lane, acc);
    for (int i = 0; i < 8; i++)
        if (lane[i] > t) t = lane[i];
    for (; j < n; j++)
        if (s[j] > t) t = s[j];
    if (t == 0.0f) return row_max_generic(s, n, m, scale);
    t = t * scale;
    return t > m ? t : m;
}

/* exp2_bf16 of s*scale - m on 8 lanes as bf16 bits in the upper halves,
 * zero past the first n. 2^n for n >= -126 is a normal float, so p * 2^n is
 * ldexpf(p, n): exact, or (n = -126, p < 1) rounded once like ldexpf; for
 * n <= -127, p * 2^n < 2^-126 after any rounding, flushed, as below -200.
 * A NaN lane stays NaN (!(n < -126), !(e < 2^-126)), as in exp2_bf16. */
A2_INLINE __m256i exp2_bf16_8(const float *s, int n, __m256 sc, __m256 m) {
    const __m256 x = _mm256_sub_ps(_mm256_mul_ps(_mm256_loadu_ps(s), sc), m);
    const __m256 t = _mm256_mul_ps(x, _mm256_set1_ps(LOG2E));
    const __m256 nf = _mm256_round_ps(t, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC), f = _mm256_sub_ps(t, nf);
    __m256 p = _mm256_fmadd_ps(_mm256_set1_ps(EXP2_C4), f, _mm256_set1_ps(EXP2_C3));
    p = _mm256_fmadd_ps(p, f, _mm256_set1_ps(EXP2_C2));
    p = _mm256_fmadd_ps(p, f, _mm256_set1_ps(EXP2_C1));
    p = _mm256_fmadd_ps(p, f, _mm256_set1_ps(1.0f));
    const __m256i bits = _mm256_slli_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(nf), _mm256_set1_epi32(127)), 23);
    const __m256 e = _mm256_mul_ps(p, _mm256_castsi256_ps(bits));
    const __m256i lane = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
    __m256 keep = _mm256_and_ps(_mm256_cmp_ps(nf, _mm256_set1_ps(-126.0f), _CMP_NLT_UQ),
                                _mm256_cmp_ps(e, _mm256_set1_ps(0x1p-126f), _CMP_NLT_UQ));
    keep = _mm256_and_ps(keep, _mm256_castsi256_ps(_mm256_cmpgt_epi32(_mm256_set1_epi32(n), lane)));
    return _mm256_and_si256(round8_bf16_bits(e), _mm256_castps_si256(keep));
}

/* exp_sum_generic 16 keys at a time: their 8 pair words feed partial sums
 * 0-7 (keys 32i..32i+15) or 8-15 (keys 32i+16..32i+31), odd element first.
 * A chunk past vis adds only zeros to sums >= 0, so stopping at vis (where
 * the generic code goes on to the end of 32 keys) changes no bit. */
A2_FN static float exp_sum_avx2(const float *s, uint16_t *pb, int vis, float mx, float scale) {
    const __m256 m = _mm256_set1_ps(mx), sc = _mm256_set1_ps(scale);
    __m256 part[2] = {_mm256_setzero_ps(), _mm256_setzero_ps()};
    int j = 0;
    for (; j < vis; j += 16) {
        __m256i w = pairs8(exp2_bf16_8(s + j, vis - j, sc, m), exp2_bf16_8(s + j + 8, vis - j - 8, sc, m));
        _mm256_storeu_si256((__m256i *)(void *)(pb + j), w);
        __m256 *acc = &part[(j / 16) & 1];
        *acc = _mm256_add_ps(_mm256_add_ps(*acc, bs_odd8(w)), bs_even8(w));
    }
    for (; j < TILE; j += 16) _mm256_storeu_si256((__m256i *)(void *)(pb + j), _mm256_setzero_si256());
    return bs_hsum8_avx2(_mm256_add_ps(part[0], part[1])); /* tree16 */
}

/* o of rows r..r+3 x dims d..d+15: o = o*c, the pairs below npmin for the
 * four rows together (sharing each load of v), then each row's own
 * remaining pairs: no row takes a step past its own (a zero step could turn
 * -0 into +0). pw: the rows' weights widened, the odd key of a pair first.
 * Returns the lanes whose sum is subnormal. */
A2_INLINE __m256 accum_4x16(const blk_t *B, int r, int d, const float (*pw)[TILE], const float *cr, const int *np,
                            int npmin) {
    const int dv = B->dv;
    __m256 acc[4][2];
#pragma GCC unroll 4
    for (int i = 0; i < 4; i++) {
        const float *o = B->oc + (size_t)(r + i) * dv + d;
        acc[i][0] = _mm256_loadu_ps(o);
        acc[i][1] = _mm256_loadu_ps(o + 8);
        if (cr[i] != 1.0f) { /* skipped as accum_generic skips it */
            acc[i][0] = _mm256_mul_ps(acc[i][0], _mm256_set1_ps(cr[i]));
            acc[i][1] = _mm256_mul_ps(acc[i][1], _mm256_set1_ps(cr[i]));
        }
    }
    for (int jp = 0; jp < npmin; jp++) bs_bf16_pair_step_4x16(acc, &pw[0][2 * jp], TILE, B->vb + (size_t)jp * dv + d, 4);
    __m256 sub = _mm256_setzero_ps();
#pragma GCC unroll 4
    for (int i = 0; i < 4; i++) {
        for (int jp = npmin; jp < np[i]; jp++) {
            const uint32_t *v = B->vb + (size_t)jp * dv + d;
            const __m256i v0 = _mm256_loadu_si256((const __m256i *)(const void *)v);
            const __m256i v1 = _mm256_loadu_si256((const __m256i *)(const void *)(v + 8));
            __m256 a = _mm256_broadcast_ss(&pw[i][2 * jp]), b = _mm256_broadcast_ss(&pw[i][2 * jp + 1]);
            acc[i][0] = _mm256_fmadd_ps(b, bs_even8(v0), _mm256_fmadd_ps(a, bs_odd8(v0), acc[i][0]));
            acc[i][1] = _mm256_fmadd_ps(b, bs_even8(v1), _mm256_fmadd_ps(a, bs_odd8(v1), acc[i][1]));
        }
        float *o = B->oc + (size_t)(r + i) * dv + d;
        sub = _mm256_or_ps(sub, _mm256_or_ps(subnormal8(acc[i][0]), subnormal8(acc[i][1])));
        _mm256_storeu_ps(o, acc[i][0]);
        _mm256_storeu_ps(o + 8, acc[i][1]);
    }
    return sub;
}

/* Rows in groups of 4 (a last group's rows past r0+nr are padding: c = 1 and
 * no pairs of their own, so their zero o stays as it is); per group and 64
 * output dims one checked piece, its o saved first so that the portable
 * code can redo it from the start. */
A2_FN static void accum_avx2(const blk_t *B, int r0, int nr, const float *c, const int *npairs) {
    const unsigned csr = csr_get();
    const int dv = B->dv, end = r0 + nr;
    float pw[4][TILE], save[4][64], cr[4];
    int np[4];
    for (int r = r0; r < end; r += 4) {
        int n = end - r < 4 ? end - r : 4, npmin = npairs[r], npmax = npairs[r];
        for (int i = 0; i < 4; i++) {
            cr[i] = i < n ? c[r + i] : 1.0f;
            np[i] = i < n ? npairs[r + i] : npairs[r];
            npmin = np[i] < npmin ? np[i] : npmin;
            npmax = np[i] > npmax ? np[i] : npmax;
        }
        for (int i = n; i < 4; i++) np[i] = npmin;
        for (int i = 0; i < 4; i++) /* keys (2jp, 2jp+1) -> (p[2jp+1], p[2jp]) as f32 */
            for (int k = 0; k < 2 * npmax; k += 8) {
                __m128i h = _mm_loadu_si128((const __m128i *)(const void *)(B->pb + (size_t)(r + i) * TILE + k));
                __m256 f = _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16));
                _mm256_storeu_ps(&pw[i][k], _mm256_permute_ps(f, 0xB1));
            }
        for (int d0 = 0; d0 < dv; d0 += 64) {
            int nd = dv - d0 < 64 ? dv - d0 : 64;
            for (int i = 0; i < 4; i++) memcpy(save[i], B->oc + (size_t)(r + i) * dv + d0, (size_t)nd * 4);
            csr_set(CSR_DEFAULT);
            __m256 sub = _mm256_setzero_ps();
            for (int d = d0; d < d0 + nd; d += 16) sub = _mm256_or_ps(sub, accum_4x16(B, r, d, pw, cr, np, npmin));
            unsigned flags = csr_get();
            if ((flags & (CSR_DE | CSR_UE)) || _mm256_movemask_ps(sub)) {
                csr_set(csr);
                for (int i = 0; i < 4; i++) memcpy(B->oc + (size_t)(r + i) * dv + d0, save[i], (size_t)nd * 4);
                if (d0 < B->hd) accum_dims(B, r, n, c, npairs, d0, d0 + nd < B->hd ? d0 + nd : B->hd);
            }
        }
    }
    csr_set(csr);
}

static const bf16_kernels avx2 = {16, pack_q_avx2, gather_avx2, scores_avx2, row_max_avx2, exp_sum_avx2,
                                  accum_avx2, "bf16-avx2"};

/* bs_attn_round_bf16 8 floats at a time */
A2_FN static size_t round_avx2(float *x, size_t n) {
    size_t i = 0;
    for (; i + 8 <= n; i += 8)
        _mm256_storeu_si256((__m256i *)(void *)(x + i), round8_bf16_bits(_mm256_loadu_ps(x + i)));
    return i;
}
#endif

#ifdef BS_X86
/* ---- AVX-512 pieces shared by the AVX512-BF16 and AMX kernels ---- */

#define AVX512 __attribute__((target("avx512f,avx512bw,avx2,fma")))

/* The gather with vector moves (the same words as gather_generic): keys in
 * groups of 8 through an 8 x 8 transpose of pair words, values as two key
 * rows merged half by half. */
AVX512 static void gather_avx512(const float *const *kp, const float *const *vp, int nt, const blk_t *B) {
    int hd = B->hd, hp = B->hp, dv = B->dv;
    /* the upper halves of 32 floats in order = 16 pair words */
    const __m512i odd = _mm512_set_epi16(63, 61, 59, 57, 55, 53, 51, 49, 47, 45, 43, 41, 39, 37, 35, 33, 31, 29, 27,
                                         25, 23, 21, 19, 17, 15, 13, 11, 9, 7, 5, 3, 1);
    for (int j0 = 0; j0 < TILE; j0 += 8) {
        for (int p0 = 0; p0 < hp; p0 += 8) {
            __m256 r[8];
            int e = 2 * p0, left = hd - e; /* floats of the 8 pairs */
            __mmask16 m0 = left >= 16 ? 0xffff : left > 0 ? (__mmask16)((1u << left) - 1) : 0;
            for (int i = 0; i < 8; i++) {
                if (j0 + i >= nt || !m0) {
                    r[i] = _mm256_setzero_ps();
                    continue;
                }
                __m512 a = _mm512_maskz_loadu_ps(m0, kp[j0 + i] + e);
                __m512i w = _mm512_permutexvar_epi16(odd, _mm512_castps_si512(a));
                r[i] = _mm256_castsi256_ps(_mm512_castsi512_si256(w));
            }
            bs_transpose8_avx2(r);
            for (int i = 0; i < 8; i++) _mm256_storeu_ps((float *)(void *)(B->kb + (size_t)(p0 + i) * TILE + j0), r[i]);
        }
    }
    const __m512i mhi = _mm512_set1_epi32((int)0xffff0000u);
    for (int jp = 0; jp < TILE / 2; jp++) {
        int j = 2 * jp;
        uint32_t *dst = B->vb + (size_t)jp * dv;
        for (int d = 0; d < dv; d += 16) {
            __mmask16 m = hd - d >= 16 ? 0xffff : hd - d > 0 ? (__mmask16)((1u << (hd - d)) - 1) : 0;
            __m512i a = j < nt ? _mm512_maskz_loadu_epi32(m, vp[j] + d) : _mm512_setzero_si512();
            __m512i b = j + 1 < nt ? _mm512_maskz_loadu_epi32(m, vp[j + 1] + d) : _mm512_setzero_si512();
            _mm512_storeu_si512(dst + d, _mm512_or_si512(_mm512_srli_epi32(a, 16), _mm512_and_si512(b, mhi)));
        }
    }
}

AVX512 static float row_max_avx512(const float *s, int n, float m, float scale) {
    __m512 acc = _mm512_set1_ps(-INFINITY);
    for (int j = 0; j < n; j += 16) {
        __mmask16 k = n - j >= 16 ? (__mmask16)0xFFFF : (__mmask16)((1u << (n - j)) - 1);
        acc = _mm512_mask_max_ps(acc, k, acc, _mm512_maskz_loadu_ps(k, s + j));
    }
    float t = _mm512_reduce_max_ps(acc) * scale;
    return t > m ? t : m;
}

AVX512 static void pack_q_avx512(const float *q, int hd, uint32_t *dst) {
    for (int d = 0; d < hd; d += 32) {
        int left = hd - d;
        __mmask16 m0 = left >= 16 ? 0xffff : (__mmask16)((1u << left) - 1);
        __mmask16 m1 = left >= 32 ? 0xffff : left > 16 ? (__mmask16)((1u << (left - 16)) - 1) : 0;
        __m256i lo = round16_bf16(_mm512_maskz_loadu_ps(m0, q + d));
        __m256i hi = round16_bf16(_mm512_maskz_loadu_ps(m1, q + d + 16));
        int words = (left + 1) / 2 < 16 ? (left + 1) / 2 : 16;
        _mm512_mask_storeu_epi32(dst + d / 2, (__mmask16)((1u << words) - 1),
                                 _mm512_inserti64x4(_mm512_castsi256_si512(lo), hi, 1));
    }
}

/* AVX-512F only: used whenever the f32 family is avx512 (the pieces above
 * serve the kernels that need AVX512-BF16, whose CPUs all have AVX512BW). */
__attribute__((target("avx512f"))) static size_t round_avx512(float *x, size_t n) {
    size_t i = 0;
    for (; i + 16 <= n; i += 16) {
        __m256i h = round16_bf16(_mm512_loadu_ps(x + i));
        _mm512_storeu_ps(x + i, _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16)));
    }
    return i;
}

/* ---- AVX512-BF16: VDPBF16PS, the portable chains lane by lane ---- */

#define BF16_FN __attribute__((target("avx512f,avx512bw,avx512bf16,avx2,fma")))
#define BF16_INLINE __attribute__((target("avx512f,avx512bw,avx512bf16,avx2,fma"), always_inline)) static inline

/* NR rows x 64 keys from key c0: each score one chain over the head's pairs. */
BF16_INLINE void scores_rows_vdp(const blk_t *B, int r, int NR, int c0) {
    __m512 acc[4][4];
    int np = (B->hd + 1) / 2;
#pragma GCC unroll 4
    for (int i = 0; i < NR; i++) acc[i][0] = acc[i][1] = acc[i][2] = acc[i][3] = _mm512_setzero_ps();
    for (int p = 0; p < np; p++) {
        const uint32_t *kr = B->kb + (size_t)p * TILE + c0;
        __m512bh k0 = (__m512bh)_mm512_loadu_si512(kr), k1 = (__m512bh)_mm512_loadu_si512(kr + 16);
        __m512bh k2 = (__m512bh)_mm512_loadu_si512(kr + 32), k3 = (__m512bh)_mm512_loadu_si512(kr + 48);
#pragma GCC unroll 4
        for (int i = 0; i < NR; i++) {
            __m512bh a = (__m512bh)_mm512_set1_epi32((int)B->qb[(size_t)(r + i) * B->hp + p]);
            acc[i][0] = _mm512_dpbf16_ps(acc[i][0], a, k0);
            acc[i][1] = _mm512_dpbf16_ps(acc[i][1], a, k1);
            acc[i][2] = _mm512_dpbf16_ps(acc[i][2], a, k2);
            acc[i][3] = _mm512_dpbf16_ps(acc[i][3], a, k3);
        }
    }
#pragma GCC unroll 4
    for (int i = 0; i < NR; i++)
#pragma GCC unroll 4
        for (int c = 0; c < 4; c++) _mm512_storeu_ps(B->s + (size_t)(r + i) * TILE + c0 + 16 * c, acc[i][c]);
}

_Static_assert(TILE % 64 == 0, "the bf16 score kernels cover 64 keys at a time");

/* 2^x of 16 lanes as exp2_bf16 computes it, zero where k is clear. */
BF16_INLINE __m512 exp2_16(const float *s, __mmask16 k, __m512 sc, __m512 m) {
    __m512 t = _mm512_mul_ps(_mm512_sub_ps(_mm512_mul_ps(_mm512_maskz_loadu_ps(k, s), sc), m), _mm512_set1_ps(LOG2E));
    __m512 n = _mm512_roundscale_ps(t, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC), f = _mm512_sub_ps(t, n);
    __m512 p = _mm512_fmadd_ps(_mm512_set1_ps(EXP2_C4), f, _mm512_set1_ps(EXP2_C3));
    p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(EXP2_C2));
    p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(EXP2_C1));
    p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(1.0f));
    return _mm512_maskz_scalef_ps(k, p, n);
}

static inline __mmask16 lanes(int n) { return n >= 16 ? (__mmask16)0xFFFF : n > 0 ? (__mmask16)((1u << n) - 1) : 0; }

/* exp_sum_generic 32 keys at a time: VCVTNE2PS2BF16 reads a subnormal as
 * zero and rounds to nearest-even, as exp2_bf16; lane k of the sum is the
 * pair step of keys 2k, 2k+1 of each 32 (VDPBF16PS with ones). */
BF16_FN static float exp_sum_bf16hw(const float *s, uint16_t *pb, int vis, float mx, float scale) {
    const __m512 m = _mm512_set1_ps(mx), sc = _mm512_set1_ps(scale);
    const __m512bh ones = (__m512bh)_mm512_set1_epi32((int)BF16_ONES);
    __m512 acc = _mm512_setzero_ps();
    int j = 0;
    for (; j < vis; j += 32) {
        __m512 e0 = exp2_16(s + j, lanes(vis - j), sc, m), e1 = exp2_16(s + j + 16, lanes(vis - j - 16), sc, m);
        __m512bh h = _mm512_cvtne2ps_pbh(e1, e0); /* e0 in the low half */
        _mm512_storeu_si512(pb + j, (__m512i)h);
        acc = _mm512_dpbf16_ps(acc, h, ones);
    }
    for (; j < TILE; j += 32) _mm512_storeu_si512(pb + j, _mm512_setzero_si512());
    /* tree16: the halves, then the 8-wide tree */
    __m256 hi = _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(acc), 1));
    return bs_hsum8_avx2(_mm256_add_ps(_mm512_castps512_ps256(acc), hi));
}

BF16_FN static void scores_vdp(const blk_t *B, int r0, int nr) {
    for (int c0 = 0; c0 < TILE; c0 += 64) {
        int r = r0, end = r0 + nr;
        for (; r + 4 <= end; r += 4) scores_rows_vdp(B, r, 4, c0);
        for (; r < end; r++) scores_rows_vdp(B, r, 1, c0);
    }
}

/* NR rows from r x 64 output dims from d0 (nv vectors of 16): o = o*c, then
 * each row's chain over its own pairs in order. The rows of a group share
 * each load of v (one row at a time was load- and latency-bound: 8 chains,
 * 8 loads per 8 steps, half the time of a bf16 attention on a Zen 5); the
 * pairs past the group's smallest count are one row at a time, so no row
 * takes a step beyond its own (a zero step could turn -0 into +0). */
BF16_INLINE void accum_rows_vdp(const blk_t *B, int r, int NR, int d0, int nv, const float *c, const int *npairs) {
    __m512 acc[4][4];
    int dv = B->dv, np = npairs[r];
#pragma GCC unroll 4
    for (int i = 1; i < NR; i++) np = npairs[r + i] < np ? npairs[r + i] : np;
#pragma GCC unroll 4
    for (int i = 0; i < NR; i++) {
        const float *o = B->oc + (size_t)(r + i) * dv + d0;
        __m512 cr = _mm512_set1_ps(c[r + i]);
#pragma GCC unroll 4
        for (int v = 0; v < 4; v++) acc[i][v] = v < nv ? _mm512_mul_ps(_mm512_loadu_ps(o + 16 * v), cr) : _mm512_setzero_ps();
    }
    for (int jp = 0; jp < np; jp++) {
        const uint32_t *vr = B->vb + (size_t)jp * dv + d0;
        __m512bh w[4];
#pragma GCC unroll 4
        for (int v = 0; v < 4; v++) w[v] = (__m512bh)(v < nv ? _mm512_loadu_si512(vr + 16 * v) : _mm512_setzero_si512());
#pragma GCC unroll 4
        for (int i = 0; i < NR; i++) {
            uint32_t pw;
            memcpy(&pw, B->pb + (size_t)(r + i) * TILE + 2 * jp, 4);
            __m512bh a = (__m512bh)_mm512_set1_epi32((int)pw);
#pragma GCC unroll 4
            for (int v = 0; v < 4; v++)
                if (v < nv) acc[i][v] = _mm512_dpbf16_ps(acc[i][v], a, w[v]);
        }
    }
#pragma GCC unroll 4
    for (int i = 0; i < NR; i++) {
        for (int jp = np; jp < npairs[r + i]; jp++) {
            const uint32_t *vr = B->vb + (size_t)jp * dv + d0;
            uint32_t pw;
            memcpy(&pw, B->pb + (size_t)(r + i) * TILE + 2 * jp, 4);
            __m512bh a = (__m512bh)_mm512_set1_epi32((int)pw);
#pragma GCC unroll 4
            for (int v = 0; v < 4; v++)
                if (v < nv) acc[i][v] = _mm512_dpbf16_ps(acc[i][v], a, (__m512bh)_mm512_loadu_si512(vr + 16 * v));
        }
        float *o = B->oc + (size_t)(r + i) * dv + d0;
#pragma GCC unroll 4
        for (int v = 0; v < 4; v++)
            if (v < nv) _mm512_storeu_ps(o + 16 * v, acc[i][v]);
    }
}

BF16_FN static void accum_vdp(const blk_t *B, int r0, int nr, const float *c, const int *npairs) {
    int dv = B->dv;
    for (int d0 = 0; d0 < dv; d0 += 64) {
        int nv = (dv - d0) / 16 < 4 ? (dv - d0) / 16 : 4;
        int r = r0, end = r0 + nr;
        for (; r + 4 <= end; r += 4) accum_rows_vdp(B, r, 4, d0, nv, c, npairs);
        for (; r < end; r++) accum_rows_vdp(B, r, 1, d0, nv, c, npairs);
    }
}

static const bf16_kernels vdp = {16, pack_q_avx512, gather_avx512, scores_vdp, row_max_avx512, exp_sum_bf16hw,
                                 accum_vdp, "avx512-bf16"};

#if defined(__x86_64__)
/* ---- AMX: TDPBF16PS tiles over 16-row groups (tiles 0-3 C, 4 A, 5-7 B) ---- */

#define AMX_FN __attribute__((target("amx-tile,amx-bf16,avx512f,avx512bw,avx2,fma")))

/* One step of both products: C tiles 0-3 += A (16 rows x 16 pairs at a, row
 * stride lda bytes) times four 16-column B tiles at b, b+16, b+32, b+48
 * (row stride ldb bytes). */
__attribute__((target("amx-tile,amx-bf16"), always_inline)) static inline void step4(const void *a, size_t lda,
                                                                                    const uint32_t *b, size_t ldb) {
    _tile_loadd(4, a, lda);
    _tile_loadd(5, b, ldb);
    _tile_loadd(6, b + 16, ldb);
    _tile_dpbf16ps(0, 4, 5);
    _tile_loadd(7, b + 32, ldb);
    _tile_dpbf16ps(1, 4, 6);
    _tile_loadd(5, b + 48, ldb);
    _tile_dpbf16ps(2, 4, 7);
    _tile_dpbf16ps(3, 4, 5);
}

/* S per row group of 16 and 64 keys: one TDPBF16PS per 16 pairs of the
 * head for each 16 keys. */
AMX_FN static void scores_amx(const blk_t *B, int r0, int nr) {
    bs_amx_configure();
    const size_t qs = (size_t)B->hp * 4, ks = TILE * 4, ss = TILE * 4;
    for (int g = r0; g < r0 + nr; g += 16)
        for (int c0 = 0; c0 < TILE; c0 += 64) {
        const uint32_t *q = B->qb + (size_t)g * B->hp;
        float *s = B->s + (size_t)g * TILE + c0;
        _tile_zero(0); _tile_zero(1); _tile_zero(2); _tile_zero(3);
        for (int st = 0; st < B->hp / 16; st++) step4(q + st * 16, qs, B->kb + (size_t)st * 16 * TILE + c0, ks);
        _tile_stored(0, s, ss); _tile_stored(1, s + 16, ss); _tile_stored(2, s + 32, ss); _tile_stored(3, s + 48, ss);
    }
}

/* o = o*c per row, then per row group and 64 output dims: o loaded into
 * four C tiles, the tile's keys in steps of 32, stored back. Keys past a
 * row's pairs have p = 0 (exact zero products), so npairs is not needed. */
AMX_FN static void accum_amx(const blk_t *B, int r0, int nr, const float *c, const int *npairs) {
    (void)npairs;
    bs_amx_configure();
    int dv = B->dv;
    for (int r = r0; r < r0 + nr; r++) {
        if (c[r] == 1.0f) continue; /* o*1 = o: skipping it changes no bit */
        float *o = B->oc + (size_t)r * dv;
        __m512 cr = _mm512_set1_ps(c[r]);
        for (int d = 0; d < dv; d += 16) _mm512_storeu_ps(o + d, _mm512_mul_ps(_mm512_loadu_ps(o + d), cr));
    }
    const size_t os = (size_t)dv * 4, ps = TILE * 2;
    for (int g = r0; g < r0 + nr; g += 16) {
        const uint16_t *p = B->pb + (size_t)g * TILE;
        for (int d0 = 0; d0 < dv; d0 += 64) {
            float *o = B->oc + (size_t)g * dv + d0;
            _tile_loadd(0, o, os); _tile_loadd(1, o + 16, os); _tile_loadd(2, o + 32, os); _tile_loadd(3, o + 48, os);
            for (int st = 0; st < TILE / 32; st++) step4(p + st * 32, ps, B->vb + (size_t)st * 16 * dv + d0, os);
            _tile_stored(0, o, os); _tile_stored(1, o + 16, os);
            _tile_stored(2, o + 32, os); _tile_stored(3, o + 48, os);
        }
    }
}

static const bf16_kernels amx = {64, pack_q_avx512, gather_avx512, scores_amx, row_max_avx512, exp_sum_bf16hw,
                                 accum_amx, "amx-bf16"};
#endif
#endif

/* The kernel of the GEMM's bf16 mode (bs_gemm_bf16_kernel): the same
 * instruction family for both products of a layer. */
static const bf16_kernels *kernels(void) {
#ifdef BS_X86
    switch (bs_gemm_bf16_kernel()) {
#if defined(__x86_64__)
    case 2: return &amx;
#endif
    case 1: return &vdp;
    case 3: return &avx2;
    default: break;
    }
#endif
    return &generic;
}

const char *bs_attn_bf16_kernel_name(void) { return kernels()->name; }

static size_t align64(size_t n) { return (n + 63) & ~(size_t)63; }
static int round_up(int n, int m) { return (n + m - 1) / m * m; }

int bs_attn_bf16_block_queries(int rep) { return rep >= ROWS_TARGET ? 1 : ROWS_TARGET / rep; }

size_t bs_attn_bf16_scratch_bytes(int hd, int rep) {
    size_t R = (size_t)bs_attn_bf16_block_queries(rep) * rep;
    size_t hp = (size_t)round_up((hd + 1) / 2, 16), dv = (size_t)round_up(hd, 64), Rp = (size_t)R + PAD;
    return align64(Rp * hp * 4) + align64(hp * TILE * 4) + align64(TILE / 2 * dv * 4) + align64(Rp * TILE * 4) +
           align64(Rp * TILE * 2) + align64(Rp * dv * 4) + 3 * align64(R * 4) + align64(R * sizeof(int)) +
           align64(R * sizeof(void *)) + 4 * align64(TILE * sizeof(void *));
}

void bs_attn_bf16_run(const bs_attn_block *b, void *scratch) {
    const bf16_kernels *K = kernels();
    int hd = b->hd, rep = b->rep, nq = b->nq, R = nq * rep;
    float scale = (float)(1.0 / sqrt((double)hd));
    blk_t B = {.hd = hd, .hp = round_up((hd + 1) / 2, 16), .dv = round_up(hd, K->dv_align), .R = R};
    size_t Rp = (size_t)R + PAD;
    char *at = scratch;
    B.qb = (uint32_t *)(void *)at; at += align64(Rp * B.hp * 4);
    B.kb = (uint32_t *)(void *)at; at += align64((size_t)B.hp * TILE * 4);
    B.vb = (uint32_t *)(void *)at; at += align64((size_t)TILE / 2 * round_up(hd, 64) * 4);
    B.s = (float *)(void *)at; at += align64(Rp * TILE * 4);
    B.pb = (uint16_t *)(void *)at; at += align64(Rp * TILE * 2);
    B.oc = (float *)(void *)at; at += align64(Rp * round_up(hd, 64) * 4);
    float *mx = (float *)(void *)at; at += align64((size_t)R * 4);
    float *l = (float *)(void *)at; at += align64((size_t)R * 4);
    float *c = (float *)(void *)at; at += align64((size_t)R * 4);
    int *npairs = (int *)(void *)at; at += align64((size_t)R * sizeof(int));
    float **op = (float **)(void *)at; at += align64((size_t)R * sizeof(void *));
    bs_attn_tiles tl;
    tl.kp = (const float **)(void *)at; at += align64(TILE * sizeof(void *));
    tl.vp = (const float **)(void *)at; at += align64(TILE * sizeof(void *));
    tl.kn = (const float **)(void *)at; at += align64(TILE * sizeof(void *));
    tl.vn = (const float **)(void *)at;

    /* queries rounded into pairs (read before out is written: out may be q) */
    memset(B.qb, 0, Rp * B.hp * 4);
    for (int i = 0; i < nq; i++)
        for (int h = 0; h < rep; h++) {
            int r = i * rep + h;
            size_t head = (size_t)(b->g * rep + h) * hd;
            K->pack_q(b->q + (size_t)i * b->q_stride + head, hd, B.qb + (size_t)r * B.hp);
            op[r] = b->out + (size_t)i * b->out_stride + head;
            mx[r] = -INFINITY;
            l[r] = 0.0f;
        }
    memset(B.oc, 0, Rp * B.dv * 4);
    memset(B.pb + (size_t)R * TILE, 0, (size_t)PAD * TILE * 2);

    const bs_attn_keys *ks = b->keys;
    size_t kv_off = (size_t)b->g * hd;
    int n_keys = b->pos0 + nq;
    bs_attn_tiles_start(&tl, ks, kv_off, n_keys, TILE);
    for (int t0 = 0; t0 < n_keys; t0 += TILE) {
        int nt = n_keys - t0 < TILE ? n_keys - t0 : TILE;
        bs_attn_tiles_ahead(&tl, ks, kv_off, t0, n_keys, TILE, (size_t)hd * sizeof(float));
        K->gather(tl.kp, tl.vp, nt, &B);
        /* queries before ia cannot see ordinal t0 yet */
        int ia = t0 > b->pos0 ? t0 - b->pos0 : 0, r0 = ia * rep;
        K->scores(&B, r0, R - r0);
        for (int i = ia; i < nq; i++) {
            int vis = b->pos0 + i - t0 + 1;
            if (vis > nt) vis = nt;
            for (int h = 0; h < rep; h++) {
                int r = i * rep + h;
                const float *sr = B.s + (size_t)r * TILE;
                float m1 = K->row_max(sr, vis, mx[r], scale);
                /* 0 on the first tile (m = -inf); 1 when the max holds (expf(0), not called) */
                c[r] = m1 == mx[r] ? 1.0f : expf(mx[r] - m1);
                l[r] = l[r] * c[r] + K->exp_sum(sr, B.pb + (size_t)r * TILE, vis, m1, scale);
                mx[r] = m1;
                npairs[r] = (vis + 1) / 2;
            }
        }
        K->accum(&B, r0, R - r0, c, npairs);
        bs_attn_tiles_next(&tl);
    }
    for (int r = 0; r < R; r++) {
        float inv = 1.0f / l[r];
        const float *o = B.oc + (size_t)r * B.dv;
        for (int d = 0; d < hd; d++) op[r][d] = o[d] * inv;
    }
}

void bs_attn_round_bf16(float *x, size_t n) {
    size_t i = 0;
#ifdef BS_X86
    if (bs_gemm_kernel() == BS_KERNEL_AVX512) i = round_avx512(x, n);
    else if (bs_gemm_kernel() == BS_KERNEL_AVX2) i = round_avx2(x, n);
#endif
    for (; i < n; i++) x[i] = bs_bf16_to_f32(bs_f32_to_bf16(x[i]));
}

/* ---- for tests: the current kernel's tile pieces on their own ---- */

int bs_attn_bf16_scores_probe(const float *q, int nq, const float *k, int nk, int hd, float *s) {
    const bf16_kernels *K = kernels();
    if (nk < 0 || nk > TILE || nq < 1) return -1;
    blk_t B = {.hd = hd, .hp = round_up((hd + 1) / 2, 16), .dv = round_up(hd, K->dv_align), .R = nq};
    size_t Rp = (size_t)nq + PAD, nqb = align64(Rp * B.hp * 4), nkb = align64((size_t)B.hp * TILE * 4);
    size_t nvb = align64((size_t)TILE / 2 * round_up(hd, 64) * 4), ns = align64(Rp * TILE * 4);
    char *at = aligned_alloc(64, nqb + nkb + nvb + ns);
    const float *kp[TILE];
    if (!at) return -1;
    memset(at, 0, nqb);
    B.qb = (uint32_t *)(void *)at;
    B.kb = (uint32_t *)(void *)(at + nqb);
    B.vb = (uint32_t *)(void *)(at + nqb + nkb);
    B.s = (float *)(void *)(at + nqb + nkb + nvb);
    for (int j = 0; j < nk; j++) kp[j] = k + (size_t)j * hd;
    K->gather(kp, kp, nk, &B);
    for (int i = 0; i < nq; i++) K->pack_q(q + (size_t)i * hd, hd, B.qb + (size_t)i * B.hp);
    K->scores(&B, 0, nq);
    memcpy(s, B.s, (size_t)nq * TILE * 4);
    free(at);
    return 0;
}

float bs_attn_bf16_weights_probe(const float *s, int vis, float mx, float scale, uint16_t *p) {
    float row[TILE] = {0};
    memcpy(row, s, (size_t)(vis < TILE ? vis : TILE) * 4);
    return kernels()->exp_sum(row, p, vis < TILE ? vis : TILE, mx, scale);
}
