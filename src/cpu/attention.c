#include "cpu/attention.h"

#include <math.h>
#include <stdint.h>
#include <string.h>

#include "cpu/gemm.h"
#include "cpu/vmath.h"

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define BS_X86 1
#endif

enum { TILE = BS_ATTN_TILE, ROWS_TARGET = 96 };

/* The three inner loops of a tile. s and p rows are TILE floats apart. */
typedef struct attn_kernels {
    /* s[r][j] = (q_r . kt[.][j]) * scale for r < nr, j < TILE; kt is [hd][TILE] */
    void (*scores)(const float *const *qp, int nr, const float *kt, int hd, float scale, float *s);
    /* kt[d][j] = kp[j][d] for j < n, 0 for n <= j < TILE; d < hd */
    void (*gather)(const float *const *kp, int n, int hd, float *kt);
    /* max(m, s[0..n-1]) (exact, any order) */
    float (*row_max)(const float *s, int n, float m);
    /* s[j] = exp(s[j] - mx) for j < n; returns their sum in a fixed order over j */
    float (*exp_sum)(float *s, int n, float mx);
    /* o_r = o_r * c[r], then o_r += p[r][j] * v_j for j < n in order, r < nr */
    void (*accum)(float *const *op, const float *c, int nr, const float *p, const float *const *vp, int n, int hd);
    const char *name;
} attn_kernels;

/* ---- portable: the vector kernels' arithmetic (fmaf, bs_exp_neg_scalar),
 * so that every family gives the same bits ---- */

static void scores_generic(const float *const *qp, int nr, const float *kt, int hd, float scale, float *s) {
    for (int r = 0; r < nr; r++) {
        float acc[TILE] = {0};
        for (int d = 0; d < hd; d++) {
            float qd = qp[r][d];
            const float *kd = kt + (size_t)d * TILE;
            for (int j = 0; j < TILE; j++) acc[j] = fmaf(qd, kd[j], acc[j]);
        }
        for (int j = 0; j < TILE; j++) s[(size_t)r * TILE + j] = acc[j] * scale;
    }
}

static void gather_generic(const float *const *kp, int n, int hd, float *kt) {
    for (int j = 0; j < TILE; j++)
        for (int d = 0; d < hd; d++) kt[(size_t)d * TILE + j] = j < n ? kp[j][d] : 0.0f;
}

static float row_max_generic(const float *s, int n, float m) {
    for (int j = 0; j < n; j++)
        if (s[j] > m) m = s[j];
    return m;
}

static float exp_sum_generic(float *s, int n, float mx) {
    float part[8] = {0};
    for (int j = 0; j < n; j++) {
        s[j] = bs_exp_neg_scalar(s[j] - mx);
        part[j & 7] = part[j & 7] + s[j];
    }
    /* the vector kernels' fixed tree (bs_hsum8_avx2) */
    return ((part[0] + part[4]) + (part[2] + part[6])) + ((part[1] + part[5]) + (part[3] + part[7]));
}

static void accum_generic(float *const *op, const float *c, int nr, const float *p, const float *const *vp, int n,
                          int hd) {
    for (int r = 0; r < nr; r++) {
        float *o = op[r];
        const float *pr = p + (size_t)r * TILE;
        for (int d = 0; d < hd; d++) o[d] = o[d] * c[r];
        for (int j = 0; j < n; j++)
            for (int d = 0; d < hd; d++) o[d] = fmaf(pr[j], vp[j][d], o[d]);
    }
}

static const attn_kernels generic = {scores_generic, gather_generic, row_max_generic, exp_sum_generic, accum_generic,
                                     "generic"};

#ifdef BS_X86
/* ---- AVX2 + FMA, for hd a multiple of 8 ---- */

#define AVX2 __attribute__((target("avx2,fma")))
#define AVX2_INLINE __attribute__((target("avx2,fma"), always_inline)) static inline

/* A register tile of NR rows x 16 keys: each score is one FMA chain over d. */
AVX2_INLINE void scores_tile(const float *const *qp, int NR, const float *kt, int hd, float scale, float *s, int c0) {
    __m256 acc[6][2];
#pragma GCC unroll 6
    for (int r = 0; r < NR; r++) acc[r][0] = acc[r][1] = _mm256_setzero_ps();
    for (int d = 0; d < hd; d++) {
        __m256 k0 = _mm256_loadu_ps(kt + (size_t)d * TILE + c0), k1 = _mm256_loadu_ps(kt + (size_t)d * TILE + c0 + 8);
#pragma GCC unroll 6
        for (int r = 0; r < NR; r++) {
            __m256 b = _mm256_broadcast_ss(qp[r] + d);
            acc[r][0] = _mm256_fmadd_ps(b, k0, acc[r][0]);
            acc[r][1] = _mm256_fmadd_ps(b, k1, acc[r][1]);
        }
    }
    __m256 sc = _mm256_set1_ps(scale);
#pragma GCC unroll 6
    for (int r = 0; r < NR; r++) {
        _mm256_storeu_ps(s + (size_t)r * TILE + c0, _mm256_mul_ps(acc[r][0], sc));
        _mm256_storeu_ps(s + (size_t)r * TILE + c0 + 8, _mm256_mul_ps(acc[r][1], sc));
    }
}

AVX2 static void scores_avx2(const float *const *qp, int nr, const float *kt, int hd, float scale, float *s) {
    for (int r0 = 0; r0 < nr; r0 += 6) {
        int n = nr - r0 < 6 ? nr - r0 : 6;
        for (int c0 = 0; c0 < TILE; c0 += 16) {
            float *sr = s + (size_t)r0 * TILE;
            switch (n) { /* constant row counts let the compiler keep the tile in registers */
            case 6: scores_tile(qp + r0, 6, kt, hd, scale, sr, c0); break;
            case 5: scores_tile(qp + r0, 5, kt, hd, scale, sr, c0); break;
            case 4: scores_tile(qp + r0, 4, kt, hd, scale, sr, c0); break;
            case 3: scores_tile(qp + r0, 3, kt, hd, scale, sr, c0); break;
            case 2: scores_tile(qp + r0, 2, kt, hd, scale, sr, c0); break;
            default: scores_tile(qp + r0, 1, kt, hd, scale, sr, c0); break;
            }
        }
    }
}

/* 8 keys x 8 dims at a time through an in-register transpose. */
AVX2 static void gather_avx2(const float *const *kp, int n, int hd, float *kt) {
    for (int j0 = 0; j0 < TILE; j0 += 8) {
        if (j0 >= n) {
            for (int d = 0; d < hd; d++) _mm256_storeu_ps(kt + (size_t)d * TILE + j0, _mm256_setzero_ps());
            continue;
        }
        for (int d0 = 0; d0 < hd; d0 += 8) {
            __m256 r[8];
#pragma GCC unroll 8
            for (int i = 0; i < 8; i++) r[i] = j0 + i < n ? _mm256_loadu_ps(kp[j0 + i] + d0) : _mm256_setzero_ps();
            bs_transpose8_avx2(r);
            float *o = kt + (size_t)d0 * TILE + j0;
#pragma GCC unroll 8
            for (int i = 0; i < 8; i++) _mm256_storeu_ps(o + i * TILE, r[i]);
        }
    }
}

AVX2 static float row_max_avx2(const float *s, int n, float m) {
    __m256 acc = _mm256_set1_ps(m);
    int j = 0;
    for (; j + 8 <= n; j += 8) acc = _mm256_max_ps(acc, _mm256_loadu_ps(s + j));
    float t[8];
    _mm256_storeu_ps(t, acc);
    for (int l = 0; l < 8; l++)
        if (t[l] > m) m = t[l];
    for (; j < n; j++)
        if (s[j] > m) m = s[j];
    return m;
}

/* Eight partial sums by j mod 8, combined in a fixed tree; the tail runs
 * through the same vector code padded with -inf (exp = +0). */
AVX2 static float exp_sum_avx2(float *s, int n, float mx) {
    __m256 m = _mm256_set1_ps(mx), acc = _mm256_setzero_ps();
    int j = 0;
    for (; j + 8 <= n; j += 8) {
        __m256 e = bs_exp_neg_avx2(_mm256_sub_ps(_mm256_loadu_ps(s + j), m));
        _mm256_storeu_ps(s + j, e);
        acc = _mm256_add_ps(acc, e);
    }
    if (j < n) {
        float t[8];
        for (int l = 0; l < 8; l++) t[l] = j + l < n ? s[j + l] : -INFINITY;
        __m256 e = bs_exp_neg_avx2(_mm256_sub_ps(_mm256_loadu_ps(t), m));
        _mm256_storeu_ps(t, e);
        acc = _mm256_add_ps(acc, e);
        memcpy(s + j, t, (size_t)(n - j) * sizeof *s);
    }
    return bs_hsum8_avx2(acc);
}

/* A register tile of NR rows x NC*8 output dims: o = o*c, then one FMA chain
 * over the tile's keys per output. The tile shape never changes an output's
 * arithmetic, only how many outputs are in flight. */
AVX2_INLINE void accum_tile(float *const *op, const float *c, int NR, int NC, const float *p,
                            const float *const *vp, int n, int d0) {
    __m256 acc[6][4];
#pragma GCC unroll 6
    for (int r = 0; r < NR; r++) {
        __m256 cr = _mm256_set1_ps(c[r]);
#pragma GCC unroll 4
        for (int k = 0; k < NC; k++) acc[r][k] = _mm256_mul_ps(_mm256_loadu_ps(op[r] + d0 + 8 * k), cr);
    }
    for (int j = 0; j < n; j++) {
        __m256 v[4];
#pragma GCC unroll 4
        for (int k = 0; k < NC; k++) v[k] = _mm256_loadu_ps(vp[j] + d0 + 8 * k);
#pragma GCC unroll 6
        for (int r = 0; r < NR; r++) {
            __m256 b = _mm256_broadcast_ss(p + (size_t)r * TILE + j);
#pragma GCC unroll 4
            for (int k = 0; k < NC; k++) acc[r][k] = _mm256_fmadd_ps(b, v[k], acc[r][k]);
        }
    }
#pragma GCC unroll 6
    for (int r = 0; r < NR; r++)
#pragma GCC unroll 4
        for (int k = 0; k < NC; k++) _mm256_storeu_ps(op[r] + d0 + 8 * k, acc[r][k]);
}

#define ACCUM_ROWS(NR)                                                                        \
    case NR:                                                                                  \
        if (nc == 2) accum_tile(op + r0, c + r0, NR, 2, p + (size_t)r0 * TILE, vp, n, d0);     \
        else accum_tile(op + r0, c + r0, NR, 1, p + (size_t)r0 * TILE, vp, n, d0);             \
        break;

/* d outermost: a 16-wide column strip of the V tile (4 KB) stays in L1 while
 * every row group uses it. */
AVX2 static void accum_avx2(float *const *op, const float *c, int nr, const float *p, const float *const *vp, int n,
                            int hd) {
    for (int d0 = 0; d0 < hd; d0 += 16) {
        int nc = hd - d0 >= 16 ? 2 : 1;
        for (int r0 = 0; r0 < nr; r0 += 6) {
            switch (nr - r0 < 6 ? nr - r0 : 6) {
            ACCUM_ROWS(6)
            ACCUM_ROWS(5)
            ACCUM_ROWS(4)
            ACCUM_ROWS(3)
            ACCUM_ROWS(2)
            ACCUM_ROWS(1)
            }
        }
    }
}

static const attn_kernels avx2 = {scores_avx2, gather_avx2, row_max_avx2, exp_sum_avx2, accum_avx2, "avx2-fma"};

/* ---- AVX-512F, for hd a multiple of 16: the AVX2 kernels' arithmetic on
 * wider registers (each lane is an independent output); the gather and the
 * row max are shared with AVX2 (exact whatever the width) ---- */

#define AVX512 __attribute__((target("avx512f,avx2,fma")))
#define AVX512_INLINE __attribute__((target("avx512f,avx2,fma"), always_inline)) static inline

/* NR rows x 64 keys (the whole tile): each score one FMA chain over d. */
AVX512_INLINE void scores_tile512(const float *const *qp, int NR, const float *kt, int hd, float scale, float *s) {
    __m512 acc[6][4];
#pragma GCC unroll 6
    for (int r = 0; r < NR; r++) acc[r][0] = acc[r][1] = acc[r][2] = acc[r][3] = _mm512_setzero_ps();
    for (int d = 0; d < hd; d++) {
        const float *kd = kt + (size_t)d * TILE;
        __m512 k0 = _mm512_loadu_ps(kd), k1 = _mm512_loadu_ps(kd + 16);
        __m512 k2 = _mm512_loadu_ps(kd + 32), k3 = _mm512_loadu_ps(kd + 48);
#pragma GCC unroll 6
        for (int r = 0; r < NR; r++) {
            __m512 b = _mm512_set1_ps(qp[r][d]);
            acc[r][0] = _mm512_fmadd_ps(b, k0, acc[r][0]);
            acc[r][1] = _mm512_fmadd_ps(b, k1, acc[r][1]);
            acc[r][2] = _mm512_fmadd_ps(b, k2, acc[r][2]);
            acc[r][3] = _mm512_fmadd_ps(b, k3, acc[r][3]);
        }
    }
    __m512 sc = _mm512_set1_ps(scale);
#pragma GCC unroll 6
    for (int r = 0; r < NR; r++)
#pragma GCC unroll 4
        for (int c = 0; c < 4; c++) _mm512_storeu_ps(s + (size_t)r * TILE + 16 * c, _mm512_mul_ps(acc[r][c], sc));
}

_Static_assert(TILE == 64, "scores_tile512 covers a 64-key tile");

AVX512 static void scores_avx512(const float *const *qp, int nr, const float *kt, int hd, float scale, float *s) {
    for (int r0 = 0; r0 < nr; r0 += 6) {
        float *sr = s + (size_t)r0 * TILE;
        switch (nr - r0 < 6 ? nr - r0 : 6) {
        case 6: scores_tile512(qp + r0, 6, kt, hd, scale, sr); break;
        case 5: scores_tile512(qp + r0, 5, kt, hd, scale, sr); break;
        case 4: scores_tile512(qp + r0, 4, kt, hd, scale, sr); break;
        case 3: scores_tile512(qp + r0, 3, kt, hd, scale, sr); break;
        case 2: scores_tile512(qp + r0, 2, kt, hd, scale, sr); break;
        default: scores_tile512(qp + r0, 1, kt, hd, scale, sr); break;
        }
    }
}

/* The AVX2 sums exactly: partial sum l (of 8) adds the keys j = l mod 8 in
 * order, so each 16-key vector adds its low half, then its high half. Lanes
 * past n hold -inf (exp = +0), and adding +0 to a partial sum (never -0)
 * leaves it unchanged, as the AVX2 kernel's skipped or padded lanes do. */
AVX512 static float exp_sum_avx512(float *s, int n, float mx) {
    __m512 m = _mm512_set1_ps(mx), ninf = _mm512_set1_ps(-INFINITY);
    __m256 acc = _mm256_setzero_ps();
    for (int j = 0; j < n; j += 16) {
        __mmask16 k = n - j >= 16 ? (__mmask16)0xFFFF : (__mmask16)((1u << (n - j)) - 1);
        __m512 e = bs_exp_neg_avx512(_mm512_sub_ps(_mm512_mask_loadu_ps(ninf, k, s + j), m));
        _mm512_mask_storeu_ps(s + j, k, e);
        acc = _mm256_add_ps(acc, _mm512_castps512_ps256(e));
        acc = _mm256_add_ps(acc, _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(e), 1)));
    }
    return bs_hsum8_avx2(acc);
}

/* NR rows x NC*16 output dims: o = o*c, then one FMA chain over the keys. */
AVX512_INLINE void accum_tile512(float *const *op, const float *c, int NR, int NC, const float *p,
                                 const float *const *vp, int n, int d0) {
    __m512 acc[6][4];
#pragma GCC unroll 6
    for (int r = 0; r < NR; r++) {
        __m512 cr = _mm512_set1_ps(c[r]);
#pragma GCC unroll 4
        for (int k = 0; k < NC; k++) acc[r][k] = _mm512_mul_ps(_mm512_loadu_ps(op[r] + d0 + 16 * k), cr);
    }
    for (int j = 0; j < n; j++) {
        __m512 v[4];
#pragma GCC unroll 4
        for (int k = 0; k < NC; k++) v[k] = _mm512_loadu_ps(vp[j] + d0 + 16 * k);
#pragma GCC unroll 6
        for (int r = 0; r < NR; r++) {
            __m512 b = _mm512_set1_ps(p[(size_t)r * TILE + j]);
#pragma GCC unroll 4
            for (int k = 0; k < NC; k++) acc[r][k] = _mm512_fmadd_ps(b, v[k], acc[r][k]);
        }
    }
#pragma GCC unroll 6
    for (int r = 0; r < NR; r++)
#pragma GCC unroll 4
        for (int k = 0; k < NC; k++) _mm512_storeu_ps(op[r] + d0 + 16 * k, acc[r][k]);
}

#define ACCUM512_ROWS(NR)                                                                          \
    case NR:                                                                                       \
        switch (nc) {                                                                              \
        case 4: accum_tile512(op + r0, c + r0, NR, 4, p + (size_t)r0 * TILE, vp, n, d0); break;     \
        case 3: accum_tile512(op + r0, c + r0, NR, 3, p + (size_t)r0 * TILE, vp, n, d0); break;     \
        case 2: accum_tile512(op + r0, c + r0, NR, 2, p + (size_t)r0 * TILE, vp, n, d0); break;     \
        default: accum_tile512(op + r0, c + r0, NR, 1, p + (size_t)r0 * TILE, vp, n, d0); break;    \
        }                                                                                          \
        break;

/* d outermost: a 64-wide column strip of the V tile (16 KB) stays in L1
 * while every row group uses it. */
AVX512 static void accum_avx512(float *const *op, const float *c, int nr, const float *p, const float *const *vp,
                                int n, int hd) {
    for (int d0 = 0; d0 < hd; d0 += 64) {
        int nc = (hd - d0) / 16 < 4 ? (hd - d0) / 16 : 4;
        for (int r0 = 0; r0 < nr; r0 += 6) {
            switch (nr - r0 < 6 ? nr - r0 : 6) {
            ACCUM512_ROWS(6)
            ACCUM512_ROWS(5)
            ACCUM512_ROWS(4)
            ACCUM512_ROWS(3)
            ACCUM512_ROWS(2)
            ACCUM512_ROWS(1)
            }
        }
    }
}

static const attn_kernels avx512 = {scores_avx512, gather_avx2, row_max_avx2, exp_sum_avx512, accum_avx512,
                                    "avx512"};
#endif

static const attn_kernels *kernels_for(int hd) {
#ifdef BS_X86
    bs_kernel k = bs_gemm_kernel();
    if (k == BS_KERNEL_AVX512 && hd % 16 == 0) return &avx512;
    if (k >= BS_KERNEL_AVX2 && hd % 8 == 0) return &avx2;
#endif
    (void)hd;
    return &generic;
}

const char *bs_attn_kernel_name(int hd) { return kernels_for(hd)->name; }

int bs_attn_block_queries(int rep) { return rep >= ROWS_TARGET ? 1 : ROWS_TARGET / rep; }

/* Scratch layout: kt [hd][TILE], s [R][TILE], m/l/c [R], the block's
 * queries [R][hd], then pointers. */
static size_t align64(size_t n) { return (n + 63) & ~(size_t)63; }

size_t bs_attn_scratch_bytes(int hd, int rep) {
    size_t R = (size_t)bs_attn_block_queries(rep) * rep;
    return align64((size_t)hd * TILE * sizeof(float)) + align64(R * TILE * sizeof(float)) +
           3 * align64(R * sizeof(float)) + align64(R * (size_t)hd * sizeof(float)) + 2 * align64(R * sizeof(void *)) +
           4 * align64(TILE * sizeof(void *));
}

void bs_attn_run(const bs_attn_block *b, void *scratch) {
    const attn_kernels *K = kernels_for(b->hd);
    int hd = b->hd, rep = b->rep, nq = b->nq, R = nq * rep;
    float scale = (float)(1.0 / sqrt((double)hd));
    char *at = scratch;
    float *kt = (float *)at; at += align64((size_t)hd * TILE * sizeof(float));
    float *s = (float *)at; at += align64((size_t)R * TILE * sizeof(float));
    float *mx = (float *)at; at += align64((size_t)R * sizeof(float));
    float *l = (float *)at; at += align64((size_t)R * sizeof(float));
    float *c = (float *)at; at += align64((size_t)R * sizeof(float));
    float *qc = (float *)at; at += align64((size_t)R * hd * sizeof(float));
    const float **qp = (const float **)(void *)at; at += align64((size_t)R * sizeof(void *));
    float **op = (float **)(void *)at; at += align64((size_t)R * sizeof(void *));
    bs_attn_tiles tl;
    tl.kp = (const float **)(void *)at; at += align64(TILE * sizeof(void *));
    tl.vp = (const float **)(void *)at; at += align64(TILE * sizeof(void *));
    tl.kn = (const float **)(void *)at; at += align64(TILE * sizeof(void *));
    tl.vn = (const float **)(void *)at;

    for (int i = 0; i < nq; i++)
        for (int h = 0; h < rep; h++) {
            int r = i * rep + h;
            size_t head = (size_t)(b->g * rep + h) * hd;
            /* copied before out is first written: out may be q's own memory */
            qp[r] = qc + (size_t)r * hd;
            memcpy(qc + (size_t)r * hd, b->q + (size_t)i * b->q_stride + head, (size_t)hd * sizeof(float));
            op[r] = b->out + (size_t)i * b->out_stride + head;
            mx[r] = -INFINITY;
            l[r] = 0.0f;
        }
    for (int r = 0; r < R; r++) memset(op[r], 0, (size_t)hd * sizeof(float));

    const bs_attn_keys *ks = b->keys;
    size_t kv_off = (size_t)b->g * hd;
    int n_keys = b->pos0 + nq;
    bs_attn_tiles_start(&tl, ks, kv_off, n_keys, TILE);
    for (int t0 = 0; t0 < n_keys; t0 += TILE) {
        int nt = n_keys - t0 < TILE ? n_keys - t0 : TILE;
        bs_attn_tiles_ahead(&tl, ks, kv_off, t0, n_keys, TILE, (size_t)hd * sizeof(float));
        K->gather(tl.kp, nt, hd, kt);

        /* queries before ia cannot see ordinal t0 yet; from i_full on they see the whole tile */
        int ia = t0 > b->pos0 ? t0 - b->pos0 : 0;
        int i_full = t0 + nt - 1 - b->pos0;
        if (i_full < ia) i_full = ia;
        K->scores(qp + (size_t)ia * rep, (nq - ia) * rep, kt, hd, scale, s + (size_t)ia * rep * TILE);
        for (int i = ia; i < nq; i++) {
            int vis = b->pos0 + i - t0 + 1;
            if (vis > nt) vis = nt;
            for (int h = 0; h < rep; h++) {
                int r = i * rep + h;
                float *sr = s + (size_t)r * TILE, m1 = K->row_max(sr, vis, mx[r]);
                /* 0 on the first tile (m = -inf); 1 when the max holds (expf(0), not called) */
                c[r] = m1 == mx[r] ? 1.0f : expf(mx[r] - m1);
                l[r] = l[r] * c[r] + K->exp_sum(sr, vis, m1);
                mx[r] = m1;
            }
            if (i < i_full) {
                K->accum(op + (size_t)i * rep, c + (size_t)i * rep, rep, s + (size_t)i * rep * TILE, tl.vp, vis, hd);
            }
        }
        if (i_full < nq)
            K->accum(op + (size_t)i_full * rep, c + (size_t)i_full * rep, (nq - i_full) * rep,
                     s + (size_t)i_full * rep * TILE, tl.vp, nt, hd);
        bs_attn_tiles_next(&tl);
    }
    for (int r = 0; r < R; r++) {
        float inv = 1.0f / l[r];
        for (int d = 0; d < hd; d++) op[r][d] = op[r][d] * inv;
    }
}
