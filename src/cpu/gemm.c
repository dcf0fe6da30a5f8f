#include "cpu/gemm.h"

#include <math.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "base/util.h"
#include "cpu/gemm_i8_impl.h"
#include "cpu/gemm_impl.h"
#include "cpu/vmath.h"

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#include <immintrin.h>
#define BS_X86 1
#endif

/* Blocking of the portable and AVX2 families (Goto/BLIS scheme, with x as
 * the broadcast operand), sized for a 32 KiB L1 and 512 KiB L2 per core:
 *  - register tile MR x NR (6 x 16: 12 ymm accumulators);
 *  - KC: depth of one packed block; a 16 x KC weight strip (16 KiB) stays in
 *    L1 while the MR-row panels of a row block stream past it;
 *  - MC: rows of x packed per block (MC x KC f32 = 144 KiB), kept in L2 while
 *    all strips of a task pass over it;
 *  - a task owns a rectangle of outputs: up to NC_MAX contiguous columns,
 *    whose widened weights (NC x KC f32) are packed once per K block and
 *    reused by every row block, and all rows or a share of them.
 * None of this changes a computed bit: each output is the single chain
 * acc = fma(x[m][k], w[n][k], acc) for k = 0..K-1 in order (spec 05 §13.2
 * A1), whatever M, the row's tile, the task split, the thread count or the
 * kernel family (portable, AVX2, AVX-512: see gemm_impl.h); between K
 * blocks the chain passes exactly through y (an f32 store and reload). No
 * split-K, and M = 1 takes the same path as any M. */
enum { MR = 6, NR = 16, KC = 256, MC = 144, NC_MAX = 1024 };

/* ---- packing --------------------------------------------------------------
 * Weight strip: columns n0..n0+NR-1 (rows of w), depth k0..k0+kc-1, stored
 * as dst[kk][NR] in f32. Widening bf16/f16 is exact, so f32, bf16 and f16
 * storage of the same values give the same packed panel. Columns past N are
 * zero; their outputs are never stored. */
static float widen(const bs_wmat *w, size_t idx) {
    switch (w->dtype) {
    case BS_BF16: return bs_bf16_to_f32(((const uint16_t *)w->data)[idx]);
    case BS_F16: return bs_f16_to_f32(((const uint16_t *)w->data)[idx]);
    case BS_I8: return (float)((const int8_t *)w->data)[idx];
    default: return ((const float *)w->data)[idx];
    }
}

void bs_gemm_pack_b_portable(const bs_wmat *w, int n0, int k0, int kc, float *dst, int nr) {
    int nv = w->n - n0 < nr ? w->n - n0 : nr;
    for (int j = 0; j < nr; j++) {
        size_t base = (size_t)(n0 + j) * (size_t)w->k + (size_t)k0;
        for (int kk = 0; kk < kc; kk++) dst[kk * nr + j] = j < nv ? widen(w, base + kk) : 0.0f;
    }
}

static void pack_b_generic(const bs_wmat *w, int n0, int k0, int kc, float *dst) {
    bs_gemm_pack_b_portable(w, n0, k0, kc, dst, NR);
}

/* Rows of x for one block: ap[i][KC] <- x[i][k0..k0+kc). A fixed row stride
 * lets the micro-kernel address every row from one pointer, and a packed
 * block avoids the cache-set aliasing of x rows 8 KiB apart (K = 2048). */
static void pack_a(const float *x, int ldx, int rows, int k0, int kc, float *ap) {
    for (int i = 0; i < rows; i++)
        memcpy(ap + (size_t)i * KC, x + (size_t)i * ldx + k0, (size_t)kc * sizeof(float));
}

/* ---- micro-kernels (the contract: bs_ukr_fn in gemm_impl.h) ---------------- */

/* acc = fma(x, w, acc): one rounding, as the vector kernels' FMA (fmaf is
 * correctly rounded in C11 whether or not the CPU has the instruction), so
 * the portable kernel gives the same bits as every vector family. */
static inline __attribute__((always_inline)) void ukr_generic_body(const float *a, const float *b, int kc,
                                                                   float *c, int ldc, int first, float *stage,
                                                                   const float *next, int next_rows,
                                                                   const int R) {
    float acc[MR][NR];
    for (int i = 0; i < R; i++)
        for (int j = 0; j < NR; j++) acc[i][j] = first ? 0.0f : stage[i * NR + j];
    for (int kk = 0; kk < kc; kk++) {
        const float *bk = b + (size_t)kk * NR;
        for (int i = 0; i < R; i++) {
            float av = a[(size_t)i * KC + kk];
            for (int j = 0; j < NR; j++) acc[i][j] = fmaf(av, bk[j], acc[i][j]);
        }
    }
    for (int i = 0; i < next_rows; i++) memcpy(stage + i * NR, next + (size_t)i * ldc, NR * sizeof(float));
    for (int i = 0; i < R; i++)
        for (int j = 0; j < NR; j++) c[(size_t)i * ldc + j] = acc[i][j];
}

#define UKR_GENERIC(R)                                                                              \
    static void ukr_generic_##R(const float *a, const float *b, int kc, float *c, int ldc, int first, \
                                float *stage, const float *next, int next_rows, const float *pf) {  \
        (void)pf;                                                                                   \
        ukr_generic_body(a, b, kc, c, ldc, first, stage, next, next_rows, R);                       \
    }
UKR_GENERIC(1)
UKR_GENERIC(2)
UKR_GENERIC(3)
UKR_GENERIC(4)
UKR_GENERIC(5)
UKR_GENERIC(6)

#ifdef BS_X86
/* ---- AVX2 + FMA ----------------------------------------------------------- */

#define AVX2_FN __attribute__((target("avx2,fma,f16c")))

/* Loads 8 consecutive weights widened to f32; dt is a constant after inlining. */
static inline __attribute__((always_inline)) AVX2_FN __m256 load8(const void *p, const bs_dtype dt) {
    if (dt == BS_BF16)
        return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(_mm_loadu_si128(p)), 16));
    if (dt == BS_F16) return _mm256_cvtph_ps(_mm_loadu_si128(p));
    return _mm256_loadu_ps(p);
}

/* Same panel as pack_b_generic for a full strip and k8 (a multiple of 8)
 * depth: sixteen rows by eight k per step, so each step writes eight whole
 * 64-byte rows of the panel. */
static inline __attribute__((always_inline)) AVX2_FN void pack_b_avx2_t(const bs_wmat *w, int n0, int k0,
                                                                        int k8, float *dst, const bs_dtype dt) {
    const size_t es = dt == BS_F32 ? 4 : 2, ld = (size_t)w->k * es;
    const char *src = (const char *)w->data + ((size_t)n0 * w->k + (size_t)k0) * es;
    for (int kk = 0; kk < k8; kk += 8, src += 8 * es, dst += 8 * NR) {
#pragma GCC unroll 2
        for (int h = 0; h < 2; h++) {
            __m256 r[8];
#pragma GCC unroll 8
            for (int i = 0; i < 8; i++) r[i] = load8(src + (size_t)(h * 8 + i) * ld, dt);
            bs_transpose8_avx2(r);
#pragma GCC unroll 8
            for (int i = 0; i < 8; i++) _mm256_storeu_ps(dst + i * NR + h * 8, r[i]);
        }
    }
}

static AVX2_FN void pack_b_avx2(const bs_wmat *w, int n0, int k0, int kc, float *dst) {
    int k8 = kc & ~7;
    if (w->n - n0 < NR || k8 < kc || w->dtype == BS_I8 || (w->dtype == BS_F16 && !bs_gemm_have_f16c())) {
        pack_b_generic(w, n0, k0, kc, dst);
        return;
    }
    switch (w->dtype) {
    case BS_BF16: pack_b_avx2_t(w, n0, k0, k8, dst, BS_BF16); break;
    case BS_F16: pack_b_avx2_t(w, n0, k0, k8, dst, BS_F16); break;
    default: pack_b_avx2_t(w, n0, k0, k8, dst, BS_F32); break;
    }
}

/* pack_a with vector copies (a library memcpy call per 1 KiB row costs more). */
static AVX2_FN void pack_a_avx2(const float *x, int ldx, int rows, int k0, int kc, float *ap) {
    int k8 = kc & ~7;
    for (int i = 0; i < rows; i++) {
        const float *src = x + (size_t)i * ldx + k0;
        float *dst = ap + (size_t)i * KC;
        for (int kk = 0; kk < k8; kk += 8) _mm256_storeu_ps(dst + kk, _mm256_loadu_ps(src + kk));
        for (int kk = k8; kk < kc; kk++) dst[kk] = src[kk];
    }
}

/* One k step of the R x 16 tile: two weight vectors, R broadcasts of x. */
#define UKR_STEP(kk)                                                                                \
    do {                                                                                            \
        __m256 b0 = _mm256_loadu_ps(b + (size_t)(kk) * NR);                                         \
        __m256 b1 = _mm256_loadu_ps(b + (size_t)(kk) * NR + 8);                                     \
        _Pragma("GCC unroll 6") for (int i = 0; i < R; i++) {                                       \
            __m256 av = _mm256_broadcast_ss(a + (size_t)i * KC + (kk));                             \
            c0[i] = _mm256_fmadd_ps(av, b0, c0[i]);                                                 \
            c1[i] = _mm256_fmadd_ps(av, b1, c1[i]);                                                 \
        }                                                                                           \
    } while (0)

/* R rows (1..MR), inlined with R constant. One FMA per (k, output) in k
 * order; a tile of R < MR rows runs the same per-output sequence as a full
 * tile, it only skips the rows that do not exist. */
static inline __attribute__((always_inline)) AVX2_FN void ukr_avx2_body(
    const float *a, const float *b, int kc, float *c, int ldc, int first, float *stage, const float *next,
    int next_rows, const float *pf, const int R) {
    __m256 c0[MR], c1[MR];
#pragma GCC unroll 6
    for (int i = 0; i < R; i++) {
        c0[i] = first ? _mm256_setzero_ps() : _mm256_load_ps(stage + i * NR);
        c1[i] = first ? _mm256_setzero_ps() : _mm256_load_ps(stage + i * NR + 8);
    }
    /* y comes from L3 or memory when K is blocked. (pf is an integer: rows
     * past the end of y are prefetched harmlessly, never formed as pointers.) */
    uintptr_t pn = (uintptr_t)pf;
#pragma GCC unroll 6
    for (int i = 0; i < MR; i++) {
        _mm_prefetch((const char *)(pn + (size_t)i * ldc * sizeof(float)), _MM_HINT_T0);
        _mm_prefetch((const char *)(pn + ((size_t)i * ldc + NR - 1) * sizeof(float)), _MM_HINT_T0);
    }
    int half = kc / 2;
#pragma GCC unroll 2
    for (int kk = 0; kk < half; kk++) UKR_STEP(kk);
    for (int i = 0; i < next_rows; i++) {
        _mm256_store_ps(stage + i * NR, _mm256_loadu_ps(next + (size_t)i * ldc));
        _mm256_store_ps(stage + i * NR + 8, _mm256_loadu_ps(next + (size_t)i * ldc + 8));
    }
#pragma GCC unroll 2
    for (int kk = half; kk < kc; kk++) UKR_STEP(kk);
#pragma GCC unroll 6
    for (int i = 0; i < R; i++) {
        _mm256_storeu_ps(c + (size_t)i * ldc, c0[i]);
        _mm256_storeu_ps(c + (size_t)i * ldc + 8, c1[i]);
    }
}

#define UKR_AVX2(R)                                                                                 \
    static AVX2_FN void ukr_avx2_##R(const float *a, const float *b, int kc, float *c, int ldc,    \
                                     int first, float *stage, const float *next, int next_rows,    \
                                     const float *pf) {                                             \
        ukr_avx2_body(a, b, kc, c, ldc, first, stage, next, next_rows, pf, R);                      \
    }
UKR_AVX2(1)
UKR_AVX2(2)
UKR_AVX2(3)
UKR_AVX2(4)
UKR_AVX2(5)
UKR_AVX2(6)

#endif

/* ---- driver ---------------------------------------------------------------- */

static const bs_gemm_impl impl_generic = {
    MR, NR, KC, MC, NC_MAX, KC, KC * NR, pack_a, pack_b_generic,
    {NULL, ukr_generic_1, ukr_generic_2, ukr_generic_3, ukr_generic_4, ukr_generic_5, ukr_generic_6}, "generic", BS_WPACK_NONE, NULL};
#ifdef BS_X86
static const bs_gemm_impl impl_avx2 = {
    MR, NR, KC, MC, NC_MAX, KC, KC * NR, pack_a_avx2, pack_b_avx2,
    {NULL, ukr_avx2_1, ukr_avx2_2, ukr_avx2_3, ukr_avx2_4, ukr_avx2_5, ukr_avx2_6}, "avx2-fma", BS_WPACK_NONE, NULL};
#endif

/* A rectangle of source lines (a block of x, or the rows of a weight strip)
 * prefetched a few lines at a time between micro-kernels, so that the next
 * packing step reads the cache instead of waiting on memory. Addresses are
 * integers: the slack line past a row may lie past the array. */
typedef struct {
    uintptr_t row; /* the next line's row start */
    size_t stride;
    int lpr, col, left, step; /* lines per row, the next line's index in its row, lines left, per call */
} pf_rect;

static void pf_init(pf_rect *r, const void *base, size_t stride, size_t row_bytes, int rows, int calls) {
    r->row = (uintptr_t)base;
    r->stride = stride;
    r->lpr = (int)(row_bytes / 64) + 1;
    r->col = 0;
    r->left = base ? rows * r->lpr : 0;
    r->step = calls > 0 ? (r->left + calls - 1) / calls : r->left;
}

/* The next step's lines, walked with counters: a division per line cost 9%
 * of a bf16 product on a Zen 5 (profiled). */
static inline void pf_issue(pf_rect *r) {
    for (int n = r->step < r->left ? r->step : r->left; n > 0; n--, r->left--) {
        __builtin_prefetch((const void *)(r->row + (size_t)r->col * 64));
        if (++r->col == r->lpr) {
            r->col = 0;
            r->row += r->stride;
        }
    }
}

typedef struct {
    const float *x;
    int ldx, m;
    const bs_wmat *w;
    float *y;
    int ldy;
    const bs_gemm_impl *impl;
    int row_groups, col_groups; /* task t covers row group t / col_groups, column group t % col_groups */
    int panels, strips;         /* mr-row panels in M, nr-column strips in N */
    float *scratch;             /* per thread: x block (mc x lda) then weight block */
    size_t per_thread;          /* floats of scratch per thread */
    int mc_cap;                 /* rows per x block at most */
} gemm_job;

/* One strip (nr columns at n0) of one row block: mc rows of packed x at ap.
 * *staged: stage already holds the first tile's start values (copied by the
 * kernel before); on return, whether it holds those of the next strip's
 * first tile (next_full: that strip exists and is nr columns wide). */
/* Tile rows c[0..r) *= colscale per column (int8 weights, BS_I8: the one f32
 * product after the chain), while the tile is still in L1; the staged copy
 * of the next tile was taken before, so it is the unscaled partial sum. */
static void scale_tile(float *c, int ldc, int r, int nv, const float *colscale) {
    for (int i = 0; i < r; i++)
        for (int jj = 0; jj < nv; jj++) c[(size_t)i * ldc + jj] *= colscale[jj];
}

/* colscale: NULL, or (the last K block of BS_I8 weights) the strip's scales. */
static void run_strip(const gemm_job *j, const float *ap, int mc, const float *bs, int kc, float *cs, int nv,
                      int first, int next_full, float *stage, int *staged, pf_rect *pfa, pf_rect *pfw,
                      const float *colscale) {
    const int mr = j->impl->mr, nr = j->impl->nr, lda = j->impl->lda;
    for (int i0 = 0; i0 < mc; i0 += mr) {
        int r = mc - i0 < mr ? mc - i0 : mr;
        float *c = cs + (size_t)i0 * j->ldy;
        /* the next tile of this strip, else the first of the next strip */
        const float *next = NULL;
        int next_rows = 0, stage_next;
        if (i0 + mr < mc) {
            next = c + (size_t)mr * j->ldy;
            next_rows = mc - i0 - mr < mr ? mc - i0 - mr : mr;
            stage_next = !first && nv == nr;
        } else {
            if (next_full) {
                next = cs + nr;
                next_rows = mc < mr ? mc : mr;
            }
            stage_next = !first && next_full;
        }
        pf_issue(pfa);
        if (pfw) pf_issue(pfw);
        if (!first && !*staged) {
            memset(stage, 0, (size_t)mr * nr * sizeof(float));
            for (int i = 0; i < r; i++) memcpy(stage + i * nr, c + (size_t)i * j->ldy, (size_t)nv * sizeof(float));
        }
        if (nv == nr) {
            j->impl->ukr[r](ap + (size_t)i0 * lda, bs, kc, c, j->ldy, first, stage, stage_next ? next : NULL,
                            stage_next ? next_rows : 0, next ? next : c);
        } else {
            /* Last strip of a ragged N: the same kernel on a full nr-column
             * copy of the valid columns. */
            float t[BS_GEMM_MAX_MR * BS_GEMM_MAX_NR] __attribute__((aligned(64)));
            j->impl->ukr[r](ap + (size_t)i0 * lda, bs, kc, t, nr, first, stage, NULL, 0, c);
            for (int i = 0; i < r; i++) memcpy(c + (size_t)i * j->ldy, t + i * nr, (size_t)nv * sizeof(float));
        }
        if (colscale) scale_tile(c, j->ldy, r, nv, colscale);
        *staged = stage_next;
    }
}

static void gemm_task(void *arg, int task, int thread) {
    const gemm_job *j = arg;
    const bs_wmat *w = j->w;
    const bs_gemm_impl *im = j->impl;
    const int mr = im->mr, nr = im->nr, KCB = im->kc;
    float *ap = j->scratch + (size_t)thread * j->per_thread;
    float *bp = ap + (size_t)j->mc_cap * im->lda;
    int rg = task / j->col_groups, cg = task % j->col_groups;
    int s0 = (int)((long long)j->strips * cg / j->col_groups);
    int s1 = (int)((long long)j->strips * (cg + 1) / j->col_groups);
    int ma = (int)((long long)j->panels * rg / j->row_groups) * mr;
    int mb = (int)((long long)j->panels * (rg + 1) / j->row_groups) * mr;
    if (mb > j->m) mb = j->m;
    /* Row blocks of equal size (multiples of mr) rather than mc, mc, ..., rest:
     * a small last block would stream every weight strip for a few rows. */
    int mblocks = (mb - ma + im->mc - 1) / im->mc;
    int mcb = ((mb - ma + mblocks - 1) / mblocks + mr - 1) / mr * mr;
    if (mcb > j->mc_cap) mcb = j->mc_cap;
    size_t esz = bs_dtype_size(w->dtype);
    const uint32_t *wpk = im->prepacked != BS_WPACK_NONE && w->packed_kind == im->prepacked ? w->packed : NULL;
    const int pw = bs_gemm_pair_words(im);
    float stage[BS_GEMM_MAX_MR * BS_GEMM_MAX_NR] __attribute__((aligned(64)));
    for (int k0 = 0; k0 < w->k; k0 += KCB) {
        int kc = w->k - k0 < KCB ? w->k - k0 : KCB, first = k0 == 0;
        for (int m0 = ma; m0 < mb; m0 += mcb) {
            int mc = mb - m0 < mcb ? mb - m0 : mcb;
            im->pack_a(j->x + (size_t)m0 * j->ldx, j->ldx, mc, k0, kc, ap);
            /* the x block packed next: the following row block, else the
             * first one of the next K block */
            int nm0 = m0 + mcb < mb ? m0 + mcb : ma, nk0 = m0 + mcb < mb ? k0 : k0 + KCB;
            int nmc = mb - nm0 < mcb ? mb - nm0 : mcb, nkc = w->k - nk0 < KCB ? w->k - nk0 : KCB;
            int panels = (mc + mr - 1) / mr;
            pf_rect pfa, pfw;
            int staged = 0; /* a chain of staged tiles stays within one row block */
            pf_init(&pfa, nk0 < w->k ? j->x + (size_t)nm0 * j->ldx + nk0 : NULL, (size_t)j->ldx * sizeof(float),
                    (size_t)nkc * sizeof(float), nmc, (s1 - s0) * panels);
            for (int s = s0; s < s1; s++) {
                float *bs = bp + (size_t)(s - s0) * im->b_floats;
                int n0 = s * nr, nv = w->n - n0 < nr ? w->n - n0 : nr;
                float *cs = j->y + (size_t)m0 * j->ldy + n0;
                pf_rect *pfwp = NULL;
                /* the strip used next: the following one, else the first one
                 * of the next K block */
                int ps = s + 1 < s1 ? s + 1 : s0, pk0 = s + 1 < s1 ? k0 : k0 + KCB;
                int pkc = w->k - pk0 < KCB ? w->k - pk0 : KCB;
                if (wpk) {
                    /* prepacked: the strip is read in place; in the first
                     * row block the next one is brought in from memory while
                     * this one computes. Later row blocks find the strips in
                     * L2/L3: prefetching them again was 7% slower (Zen 5). */
                    bs = (float *)(void *)(wpk + bs_gemm_pairs_offset(k0, kc, s, j->strips, pw));
                    if (m0 == ma) {
                        pf_init(&pfw, pk0 < w->k ? wpk + bs_gemm_pairs_offset(pk0, pkc, ps, j->strips, pw) : NULL, 0,
                                (size_t)((pkc + 1) / 2) * pw * 4 - 1, 1, panels);
                        pfwp = &pfw;
                    }
                } else if (m0 == ma) {
                    /* The first row block packs each strip just before using
                     * it, while it is still in L1; later row blocks reuse it. */
                    im->pack_b(w, n0, k0, kc, bs);
                    int pn0 = ps * nr, prow = w->n - pn0 < nr ? w->n - pn0 : nr;
                    pf_init(&pfw, pk0 < w->k ? (const char *)w->data + ((size_t)pn0 * w->k + pk0) * esz : NULL,
                            (size_t)w->k * esz, (size_t)pkc * esz, prow, panels);
                    pfwp = &pfw;
                }
                int next_full = s + 1 < s1 && w->n - n0 - nr >= nr;
                const float *colscale = w->dtype == BS_I8 && k0 + kc >= w->k ? w->scale + n0 : NULL;
                run_strip(j, ap, mc, bs, kc, cs, nv, first, next_full, stage, &staged, &pfa, pfwp, colscale);
            }
        }
    }
}

/* Splits the outputs into tasks: column groups of at most nc_max columns and,
 * when there are few columns, row groups as well, so that no thread repacks
 * all of x for a narrow slice of w. Estimated packing work per thread (x
 * copies count 1 per element, weight widening and transposition 2) decides
 * among the divisors of the thread count. */
static void plan_tasks(gemm_job *j, int nthreads) {
    const int mr = j->impl->mr, nr = j->impl->nr, nc_max = j->impl->nc_max;
    long best = -1;
    for (int cgs = 1; cgs <= nthreads; cgs++) {
        if (nthreads % cgs) continue;
        int rgs = nthreads / cgs;
        if (rgs > j->panels || cgs > j->strips) continue;
        int cols = (j->strips + cgs - 1) / cgs * nr, rows = (j->panels + rgs - 1) / rgs * mr;
        int sub = (cols + nc_max - 1) / nc_max;
        long cost = (long)sub * rows + 2L * cols;
        if (best < 0 || cost <= best) {
            best = cost;
            j->row_groups = rgs;
            j->col_groups = cgs * sub < j->strips ? cgs * sub : j->strips;
        }
    }
    if (best < 0) { /* fewer panels and strips than threads */
        j->row_groups = 1;
        j->col_groups = j->strips < nthreads ? j->strips : nthreads;
    }
}

static size_t scratch_floats(const gemm_job *j) {
    size_t s = (size_t)j->mc_cap * j->impl->lda +
               (size_t)((j->strips + j->col_groups - 1) / j->col_groups) * j->impl->b_floats;
    return (s + 15) & ~(size_t)15; /* 64-byte multiples: each thread on its own lines */
}

/* Out of memory: the product cannot fail, so it runs serially, one strip per
 * task, one panel of rows per block, on the stack (the same arithmetic). */
enum { SMALL_FLOATS = BS_GEMM_SMALL_FLOATS };
static __attribute__((noinline)) void gemm_serial_small(gemm_job *j) {
    float stack[SMALL_FLOATS] __attribute__((aligned(64)));
    for (int pass = 0; pass < 2; pass++) {
        j->mc_cap = j->impl->mr;
        j->panels = (j->m + j->impl->mr - 1) / j->impl->mr;
        j->strips = (j->w->n + j->impl->nr - 1) / j->impl->nr;
        j->row_groups = 1;
        j->col_groups = j->strips;
        j->per_thread = scratch_floats(j);
        if (j->per_thread <= SMALL_FLOATS) break;
        j->impl = &impl_generic; /* unreachable: every family asserts the limits */
    }
    j->scratch = stack;
    bs_pool_run(NULL, j->strips, gemm_task, j);
}

static const bs_gemm_impl *impl_for(bs_kernel k) {
#ifdef BS_X86
    if (k == BS_KERNEL_AVX512) return &bs_gemm_impl_avx512;
    if (k == BS_KERNEL_AVX2) return &impl_avx2;
#endif
    (void)k;
    return &impl_generic;
}

static void gemm_run(const bs_gemm_impl *impl, bs_pool *pool, const float *x, int ldx, int m, const bs_wmat *w,
                     float *y, int ldy) {
    if (m <= 0 || w->n <= 0) return;
    if (w->k == 0) {
        for (int i = 0; i < m; i++) memset(y + (size_t)i * ldy, 0, (size_t)w->n * sizeof(float));
        return;
    }
    if (impl->run) {
        impl->run(pool, x, ldx, m, w, y, ldy);
        return;
    }
    gemm_job j = {x, ldx, m, w, y, ldy, impl, 1, 1, (m + impl->mr - 1) / impl->mr,
                  (w->n + impl->nr - 1) / impl->nr, NULL, 0, impl->mc};
    int nthreads = bs_pool_size(pool);
    plan_tasks(&j, nthreads);
    int rows = (j.panels + j.row_groups - 1) / j.row_groups * impl->mr;
    if (rows < j.mc_cap) j.mc_cap = rows;
    j.per_thread = scratch_floats(&j);
    j.scratch = bs_gemm_scratch_take((size_t)nthreads * j.per_thread);
    if (j.scratch) {
        bs_pool_run(pool, j.row_groups * j.col_groups, gemm_task, &j);
        bs_gemm_scratch_give_back(j.scratch);
        return;
    }
    gemm_serial_small(&j);
}

/* y *= scale per column (int8 weights, BS_I8: one f32 product after the chain). */
static void scale_columns(float *y, int ldy, int m, int n, const float *scale) {
    for (int i = 0; i < m; i++) {
        float *row = y + (size_t)i * ldy;
        for (int j = 0; j < n; j++) row[j] *= scale[j];
    }
}

static void gemm_with(const bs_gemm_impl *impl, bs_pool *pool, const float *x, int ldx, int m, const bs_wmat *w,
                      float *y, int ldy) {
    gemm_run(impl, pool, x, ldx, m, w, y, ldy);
    /* the tiled driver scales each tile as it finishes it (run_strip); a
     * family with its own driver, or K = 0, leaves it to this pass */
    if (w->dtype == BS_I8 && m > 0 && (impl->run || w->k == 0)) scale_columns(y, ldy, m, w->n, w->scale);
}

void bs_gemm(bs_pool *pool, const float *x, int ldx, int m, const bs_wmat *w, float *y, int ldy) {
    gemm_with(impl_for(bs_gemm_kernel()), pool, x, ldx, m, w, y, ldy);
}

int bs_gemm_bf16_hw_supported(void) {
#ifdef BS_X86
    __builtin_cpu_init();
    return bs_kernel_supported(BS_KERNEL_AVX512) && __builtin_cpu_supports("avx512bf16");
#else
    return 0;
#endif
}

/* The bf16 kernel: 0 the portable emulation, 1 AVX512-BF16 (the same
 * bits), 2 AMX (its own bits, gemm_amx.c), 3 the AVX2 FMA kernel (the same
 * bits as 0 and 1, gemm_bf16_avx2.c). By default the fastest this CPU runs:
 * AMX where the CPU has it and the kernel grants the tile state, else the
 * instruction when the f32 family is avx512, else the AVX2 kernel when the
 * f32 family is at least avx2, else the emulation.
 * BASAL_BF16=amx|avx512-bf16|avx2|portable asks for one (a kernel the CPU
 * cannot run falls back to the next one down). -1: not chosen yet. */
static atomic_int bf16_kernel = -1;

static int bf16_supported(int k) {
    if (k == 1) return bs_gemm_kernel() == BS_KERNEL_AVX512 && bs_gemm_bf16_hw_supported();
    if (k == 2) return bf16_supported(1) && bs_gemm_amx_available();
#ifdef BS_X86
    if (k == 3) return bs_gemm_kernel() >= BS_KERNEL_AVX2;
#endif
    return k == 0;
}

int bs_gemm_bf16_parse(const char *name) {
    if (!name || !*name || !strcmp(name, "auto")) return -1;
    if (!strcmp(name, "amx") || !strcmp(name, "amx-bf16")) return 2;
    if (!strcmp(name, "avx512-bf16") || !strcmp(name, "avx512bf16")) return 1;
    if (!strcmp(name, "avx2") || !strcmp(name, "bf16-avx2")) return 3;
    if (!strcmp(name, "portable") || !strcmp(name, "bf16-portable")) return 0;
    return -2;
}

static int bf16_choice(void) {
    int k = atomic_load(&bf16_kernel);
    if (k >= 0) return k;
    /* from the fastest down */
    static const int order[] = {2, 1, 3, 0};
    int want = bs_gemm_bf16_parse(getenv("BASAL_BF16")), i = 0;
    if (want >= 0)
        while (order[i] != want) i++;
    while (order[i] != 0 && !bf16_supported(order[i])) i++;
    int expected = -1;
    atomic_compare_exchange_strong(&bf16_kernel, &expected, order[i]);
    return atomic_load(&bf16_kernel);
}

int bs_gemm_force_bf16_hw(int k) {
    int old = bf16_choice();
    if (bf16_supported(k)) atomic_store(&bf16_kernel, k);
    return old;
}

static const bs_gemm_impl *bf16_impl(void) {
#ifdef BS_X86
    switch (bf16_choice()) {
#if defined(__x86_64__)
    case 2: return &bs_gemm_impl_amx;
#endif
    case 1: return &bs_gemm_impl_avx512bf16;
    case 3: return &bs_gemm_impl_bf16_avx2;
    default: break;
    }
#endif
    return &bs_gemm_impl_bf16_portable;
}

const char *bs_gemm_bf16_kernel_name(void) { return bf16_impl()->name; }

int bs_gemm_bf16_kernel(void) { return bf16_choice(); }

/* An int8w product (gemm.h, bs_gemm_quantize): the bf16 chain over q, by the
 * instruction or its exact emulation (AMX's bits differ, so never AMX), then
 * the scales. q prepacked for bf16-avx2 (BS_WPACK_I8S) has that one reader,
 * whichever bf16 kernel is chosen later (every kernel gives these bits). */
static void gemm_i8w(bs_pool *pool, const float *x, int ldx, int m, const bs_wmat *w, float *y, int ldy) {
#ifdef BS_X86
    if (w->packed_kind == BS_WPACK_I8S) {
        bs_wmat qs = { BS_I8, NULL, w->n, w->k, w->packed, BS_WPACK_I8S, w->scale };
        gemm_with(&bs_gemm_impl_bf16_avx2_i8, pool, x, ldx, m, &qs, y, ldy);
        return;
    }
#endif
    bs_wmat q = { BS_I8, w->packed, w->n, w->k, NULL, BS_WPACK_NONE, w->scale };
    const bs_gemm_impl *im = bf16_impl();
#if defined(__x86_64__)
    if (im == &bs_gemm_impl_amx) im = &bs_gemm_impl_avx512bf16; /* AMX's choice: the instruction */
#endif
    gemm_with(im, pool, x, ldx, m, &q, y, ldy);
}

void bs_gemm_mode(bs_pool *pool, bs_compute mode, const float *x, int ldx, int m, const bs_wmat *w, float *y,
                  int ldy) {
    if (w->packed_kind == BS_WPACK_Q8) { /* the int8 mode's W8A8 weights, whatever the mode (gemm_i8.c) */
        bs_gemm_w8a8(pool, x, ldx, m, w, y, ldy);
        return;
    }
    if (mode == BS_COMPUTE_BF16 && (w->packed_kind == BS_WPACK_I8 || w->packed_kind == BS_WPACK_I8S)) {
        gemm_i8w(pool, x, ldx, m, w, y, ldy);
        return;
    }
    gemm_with(mode == BS_COMPUTE_BF16 ? bf16_impl() : impl_for(bs_gemm_kernel()), pool, x, ldx, m, w, y, ldy);
}

typedef struct {
    const bs_gemm_impl *im;
    const bs_wmat *w;
    uint32_t *dst;
    int strips, per_task;
} pairs_job;

static void pairs_prepack_task(void *arg, int task, int thread) {
    (void)thread;
    const pairs_job *p = arg;
    const bs_gemm_impl *im = p->im;
    int s1 = (task + 1) * p->per_task < p->strips ? (task + 1) * p->per_task : p->strips;
    for (int k0 = 0; k0 < p->w->k; k0 += im->kc) {
        int kc = p->w->k - k0 < im->kc ? p->w->k - k0 : im->kc;
        for (int s = task * p->per_task; s < s1; s++)
            im->pack_b(p->w, s * im->nr, k0, kc,
                       (float *)(void *)(p->dst + bs_gemm_pairs_offset(k0, kc, s, p->strips, bs_gemm_pair_words(im))));
    }
}

/* int8w's copy (BS_WPACK_I8, row-major q and scales) laid out again for
 * bf16-avx2 (BS_WPACK_I8S), in place of it: 1, or 0 when the bf16 kernel is
 * another (they read q row-major), BS_ENOMEM. */
static int prepack_i8w(bs_pool *pool, bs_wmat *w, size_t *bytes) {
#ifdef BS_X86
    const bs_gemm_impl *im = &bs_gemm_impl_bf16_avx2_i8;
    if (bf16_impl() != &bs_gemm_impl_bf16_avx2) return 0;
    int strips = (w->n + im->nr - 1) / im->nr;
    size_t qbytes = ((size_t)((w->k + 1) / 2) * (size_t)strips * (size_t)bs_gemm_pair_words(im) * 4 + 63) & ~(size_t)63;
    size_t n = qbytes + (size_t)w->n * sizeof(float);
    void *p = NULL;
    if (posix_memalign(&p, 64, n)) return BS_ENOMEM;
    bs_wmat q = { BS_I8, w->packed, w->n, w->k, NULL, BS_WPACK_NONE, w->scale };
    pairs_job pj = {im, &q, p, strips, 8};
    bs_pool_run(pool, (strips + pj.per_task - 1) / pj.per_task, pairs_prepack_task, &pj);
    memcpy((char *)p + qbytes, w->scale, (size_t)w->n * sizeof(float));
    bs_gemm_unpack(w);
    w->packed = p;
    w->packed_kind = BS_WPACK_I8S;
    w->scale = (const float *)(const void *)((const char *)p + qbytes);
    if (bytes) *bytes = n;
    return 1;
#else
    (void)pool; (void)w; (void)bytes;
    return 0;
#endif
}

int bs_gemm_prepack(bs_pool *pool, bs_wmat *w, bs_compute mode, size_t *bytes) {
    if (bytes) *bytes = 0;
    if (mode != BS_COMPUTE_BF16 || w->n <= 0 || w->k <= 0) return 0;
    if (w->packed_kind == BS_WPACK_I8) return prepack_i8w(pool, w, bytes);
    if (w->packed) return 0;
    const bs_gemm_impl *im = bf16_impl();
    int strips = (w->n + im->nr - 1) / im->nr;
    size_t n;
    switch (im->prepacked) {
    case BS_WPACK_AMX: n = bs_gemm_amx_packed_bytes(w); break;
    case BS_WPACK_PAIRS: n = (size_t)((w->k + 1) / 2) * (size_t)strips * (size_t)im->nr * 4; break;
    default: return 0;
    }
    void *p = NULL;
    if (!n || posix_memalign(&p, 64, n)) return BS_ENOMEM;
    if (im->prepacked == BS_WPACK_AMX) {
        bs_gemm_amx_prepack(pool, w, p);
    } else {
        pairs_job pj = {im, w, p, strips, 8};
        bs_pool_run(pool, (strips + pj.per_task - 1) / pj.per_task, pairs_prepack_task, &pj);
    }
    w->packed = p;
    w->packed_kind = im->prepacked;
    if (bytes) *bytes = n;
    return 1;
}

float bs_dot_row(const float *a, const bs_wmat *w, int row) {
    /* Eight interleaved partial sums combined in a fixed tree: the order depends
     * only on k. */
    float s[8] = {0};
    size_t base = (size_t)row * (size_t)w->k;
    int k = w->k, i = 0;
    for (; i + 8 <= k; i += 8)
        for (int l = 0; l < 8; l++) s[l] = s[l] + a[i + l] * widen(w, base + i + l);
    for (; i < k; i++) s[i & 7] = s[i & 7] + a[i] * widen(w, base + i);
    float d = ((s[0] + s[1]) + (s[2] + s[3])) + ((s[4] + s[5]) + (s[6] + s[7]));
    return w->dtype == BS_I8 ? d * w->scale[row] : d;
}
