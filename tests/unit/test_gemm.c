/* The GEMM against a float64 reference, and its batch invariance (spec 05
 * §13.2 A1, §18 item 6): a row's output is bitwise the same for any number of
 * rows (every M from 1 to 64 and larger M that need several row blocks and
 * row-split tasks), any row offset, 1, 2 or 3 threads, and f32, bf16 or f16
 * storage of the same values. Every kernel family the CPU supports (portable,
 * AVX2, AVX-512) is checked on shapes that reach every edge: N below, at and
 * not a multiple of the 16- and 32-wide strips; K below, at and not a
 * multiple of the 256-deep block (and of 8); M over every tile height (6 and
 * 14 rows). The families must give the same bits as each other (spec 05
 * §13.2: an answer is the same on every CPU): each family's rows are
 * compared bitwise with the portable family's on the same inputs. */
#include <stdint.h>

#include "check.h"
#include "base/util.h"
#include "cpu/gemm.h"

#if defined(__SANITIZE_ADDRESS__)
#define SANITIZED 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define SANITIZED 1
#endif
#endif
#ifndef SANITIZED
#define SANITIZED 0
#endif

static uint64_t rng = 0x9E3779B97F4A7C15ull;
static float frand(void) {
    rng ^= rng << 13; rng ^= rng >> 7; rng ^= rng << 17;
    return (float)((double)(rng >> 11) / 9007199254740992.0 * 2.0 - 1.0);
}

/* |y - ref| bounded by a few ulps of the sum of |terms| (f32 accumulation). */
static void check_reference(const float *x, int m, const float *w, int n, int k, const float *y) {
    double worst = 0;
    int bad = 0;
    for (int i = 0; i < m; i++)
        for (int j = 0; j < n; j++) {
            double ref = 0, mag = 0;
            for (int t = 0; t < k; t++) {
                ref += (double)x[(size_t)i * k + t] * w[(size_t)j * k + t];
                mag += fabs((double)x[(size_t)i * k + t] * w[(size_t)j * k + t]);
            }
            double err = fabs(y[(size_t)i * n + j] - ref), tol = mag * k * 1.2e-7 + 1e-30;
            if (err > tol) bad++;
            if (err / tol > worst) worst = err / tol;
        }
    if (bad) fprintf(stderr, "reference mismatch: %d outputs, worst err/tol %.3g\n", bad, worst);
    CHECK_INT(bad, 0);
}

/* Every (M, offset) product must equal, row by row, the rows computed alone
 * (M = 1, serial). */
static void check_invariance(bs_pool *pool, const bs_wmat *wm, const float *x, const float *solo, int m_max,
                             int every, const int *big, int nbig, float *y) {
    int n = wm->n, k = wm->k, mismatches = 0, tried = 0;
    for (int idx = 0;; idx++) {
        int m = idx < every ? idx + 1 : (idx - every < nbig ? big[idx - every] : 0);
        if (m <= 0) break;
        /* offsets 0, 1, 5 and the far end shift the row's place in its tile */
        int offs[4] = {0, 1, 5, m_max - m}, noff = m <= 64 ? 4 : 2;
        if (m > m_max) continue;
        for (int oi = 0; oi < noff; oi++) {
            int off = offs[oi] + m <= m_max ? offs[oi] : m_max - m;
            bs_gemm(pool, x + (size_t)off * k, k, m, wm, y, n);
            tried++;
            if (memcmp(y, solo + (size_t)off * n, (size_t)m * n * sizeof(float))) {
                if (mismatches++ < 3) fprintf(stderr, "  differs: N=%d K=%d M=%d offset %d\n", n, k, m, off);
            }
        }
    }
    if (mismatches)
        fprintf(stderr, "invariance (%d threads): %d of %d (M, offset) cases differ from M=1\n",
                bs_pool_size(pool), mismatches, tried);
    CHECK_INT(mismatches, 0);
}

/* Row strides wider than the matrices: the result is unchanged and the
 * padding of y is never written. */
static void check_strides(bs_pool *pool, const bs_wmat *wm, const float *x, const float *solo, int m) {
    int n = wm->n, k = wm->k, ldx = k + 3, ldy = n + 7;
    float *xp = malloc((size_t)m * ldx * sizeof(float)), *yp = malloc((size_t)m * ldy * sizeof(float));
    for (int i = 0; i < m; i++) {
        memcpy(xp + (size_t)i * ldx, x + (size_t)i * k, (size_t)k * sizeof(float));
        for (int t = k; t < ldx; t++) xp[(size_t)i * ldx + t] = NAN;
    }
    for (int i = 0; i < m * ldy; i++) yp[i] = -7.0f;
    bs_gemm(pool, xp, ldx, m, wm, yp, ldy);
    int bad = 0, canary = 0;
    for (int i = 0; i < m; i++) {
        if (memcmp(yp + (size_t)i * ldy, solo + (size_t)i * n, (size_t)n * sizeof(float))) bad++;
        for (int t = n; t < ldy; t++) canary += yp[(size_t)i * ldy + t] != -7.0f;
    }
    CHECK_INT(bad, 0);
    CHECK_INT(canary, 0);
    free(xp);
    free(yp);
}

typedef struct {
    int n, k;
} shape;

int main(void) {
    bs_pool *pool2 = bs_pool_create(2), *pool3 = bs_pool_create(3);
    CHECK(pool2 != NULL && pool3 != NULL);
    /* N: 5 (< one strip), 37 and 130 (ragged), 48 and 64 (exact), 200; K: 53
     * (< KC, not a multiple of 8), 256 (= KC), 300, 517 and 520 (several
     * blocks: start values of a tile pass through y and the kernels' stage). */
    const shape shapes[] = {{37, 53}, {64, 256}, {5, 300}, {130, 517}, {48, 520}, {200, 64}};
    _Static_assert(sizeof shapes / sizeof *shapes == 6, "NSHAPES");
    /* every M up to 64, then M beyond one row block (MC = 144) and beyond
     * one row-split task; fewer under the sanitizers */
    const int big_full[] = {100, 300, 517, 1000}, big_asan[] = {37, 64, 100, 300};
    const int *big = SANITIZED ? big_asan : big_full;
    int every = SANITIZED ? 24 : 64, nbig = 4, m_max = SANITIZED ? 303 : 1003;
    const bs_kernel kernels[] = {BS_KERNEL_GENERIC, BS_KERNEL_AVX2, BS_KERNEL_AVX512};
    enum { NSHAPES = 6 };
    float *portable[NSHAPES] = {0}; /* the portable family's rows, per shape */
    int portable_rows[NSHAPES] = {0}, families = 0;
    for (int ki = 0; ki < 3; ki++) {
        if (!bs_kernel_supported(kernels[ki])) {
            fprintf(stderr, "kernel %s not supported by this CPU: skipped\n", bs_gemm_kernel_name(kernels[ki]));
            continue;
        }
        families++;
        bs_gemm_force_kernel(kernels[ki]);
        CHECK_INT(bs_gemm_kernel(), kernels[ki]);
        for (size_t s = 0; s < sizeof shapes / sizeof *shapes; s++) {
            int n = shapes[s].n, k = shapes[s].k;
            /* The sanitized portable kernel is slow: M up to 70 there (the
             * driver's large-M paths, shared by both kernels, run with AVX2). */
            int mm = kernels[ki] == BS_KERNEL_GENERIC && SANITIZED ? 70 : m_max;
            rng = 0x9E3779B97F4A7C15ull ^ (uint64_t)s; /* the same inputs for every family */
            int nb = mm < m_max ? 2 : nbig;
            float *w = malloc((size_t)n * k * sizeof(float));
            uint16_t *wb = malloc((size_t)n * k * sizeof(uint16_t));
            float *x = malloc((size_t)mm * k * sizeof(float));
            float *y = malloc((size_t)mm * n * sizeof(float));
            float *yb = malloc((size_t)mm * n * sizeof(float));
            float *solo = malloc((size_t)mm * n * sizeof(float));
            /* weights hold bf16-representable values so f32 and bf16 storage are equal */
            for (int i = 0; i < n * k; i++) {
                wb[i] = bs_f32_to_bf16(frand());
                w[i] = bs_bf16_to_f32(wb[i]);
            }
            for (int i = 0; i < mm * k; i++) x[i] = frand();
            bs_wmat wf = {BS_F32, w, n, k, NULL, BS_WPACK_NONE, NULL}, wbf = {BS_BF16, wb, n, k, NULL, BS_WPACK_NONE, NULL};
            for (int i = 0; i < mm; i++) bs_gemm(NULL, x + (size_t)i * k, k, 1, &wf, solo + (size_t)i * n, n);

            int mr = mm < 300 ? mm : 300;
            bs_gemm(pool2, x, k, mr, &wf, y, n);
            check_reference(x, mr, w, n, k, y);
            bs_gemm(NULL, x, k, mm, &wbf, yb, n);
            CHECK(memcmp(yb, solo, (size_t)mm * n * sizeof(float)) == 0); /* bf16 == f32, M = all vs 1 */
            bs_gemm(pool3, x, k, mm, &wf, y, n);
            CHECK(memcmp(y, solo, (size_t)mm * n * sizeof(float)) == 0); /* 3 threads */

            check_invariance(NULL, &wf, x, solo, mm, every, big, nb, y);
            check_invariance(pool2, &wbf, x, solo, mm, every, big, nb, y);
            check_strides(pool2, &wbf, x, solo, mr);

            /* the same bits as the portable family, row by row */
            if (kernels[ki] == BS_KERNEL_GENERIC) {
                portable[s] = malloc((size_t)mm * n * sizeof(float));
                memcpy(portable[s], solo, (size_t)mm * n * sizeof(float));
                portable_rows[s] = mm;
            } else if (portable[s]) {
                int rows = mm < portable_rows[s] ? mm : portable_rows[s], differ = 0;
                for (int i = 0; i < rows; i++)
                    differ += memcmp(solo + (size_t)i * n, portable[s] + (size_t)i * n, (size_t)n * sizeof(float)) != 0;
                if (differ) fprintf(stderr, "  %s vs portable: N=%d K=%d: %d of %d rows differ\n",
                                    bs_gemm_kernel_name(kernels[ki]), n, k, differ, rows);
                CHECK_INT(differ, 0);
            }
            /* the fixed-order dot product of the lm_head rows: close to the GEMM */
            float d = bs_dot_row(x, &wf, 0);
            CHECK_NEAR(d, solo[0], 1e-4 * (1 + fabs(solo[0])));
            free(w); free(wb); free(x); free(y); free(yb); free(solo);
        }
        /* f16 storage widens exactly (F16C in the AVX2 packing, also for the
         * whole-strip vector path: N = 32, K = 64): equal to the same values in f32 */
        const shape hs[] = {{24, 40}, {32, 64}};
        for (int h = 0; h < 2; h++) {
            int n = hs[h].n, k = hs[h].k, m = 7;
            uint16_t *wh = malloc((size_t)n * k * 2);
            float *w = malloc((size_t)n * k * 4), *x = malloc((size_t)m * k * 4);
            float *y1 = malloc((size_t)m * n * 4), *y2 = malloc((size_t)m * n * 4);
            for (int i = 0; i < n * k; i++) { wh[i] = bs_f32_to_f16(frand()); w[i] = bs_f16_to_f32(wh[i]); }
            for (int i = 0; i < m * k; i++) x[i] = frand();
            bs_wmat a = {BS_F16, wh, n, k, NULL, BS_WPACK_NONE, NULL}, b = {BS_F32, w, n, k, NULL, BS_WPACK_NONE, NULL};
            bs_gemm(pool2, x, k, m, &a, y1, n);
            bs_gemm(pool2, x, k, m, &b, y2, n);
            CHECK(memcmp(y1, y2, (size_t)m * n * 4) == 0);
            free(wh); free(w); free(x); free(y1); free(y2);
        }
        /* K = 0: an empty sum is +0 */
        {
            float xv[2] = {1, 2}, yv[6] = {9, 9, 9, 9, 9, 9};
            bs_wmat e = {BS_F32, xv, 3, 0, NULL, BS_WPACK_NONE, NULL};
            bs_gemm(pool2, xv, 0, 2, &e, yv, 3);
            int nz = 0;
            for (int i = 0; i < 6; i++) nz += yv[i] != 0.0f;
            CHECK_INT(nz, 0);
        }
        fprintf(stderr, "kernel %s checked\n", bs_gemm_kernel_name(kernels[ki]));
    }
    for (int i = 0; i < NSHAPES; i++) free(portable[i]);
    fprintf(stderr, "%d kernel families compared bitwise\n", families);
    CHECK(families >= 1);
    /* f16 conversions against known bit patterns (IEEE 754 binary16) */
    CHECK_INT(bs_f32_to_f16(1.0f), 0x3c00);
    CHECK_INT(bs_f32_to_f16(-2.0f), 0xc000);
    CHECK_INT(bs_f32_to_f16(65504.0f), 0x7bff);
    CHECK_INT(bs_f32_to_f16(1e6f), 0x7c00);
    CHECK_INT(bs_f32_to_f16(5.9604645e-8f), 0x0001);
    CHECK_INT(bs_f32_to_f16(1.00048828125f), 0x3c00); /* tie to even */
    CHECK_NEAR(bs_f16_to_f32(0x0001), 5.9604645e-8, 1e-15);
    CHECK_NEAR(bs_f16_to_f32(0x3555), 0.333251953125, 0);
    CHECK_INT(bs_f32_to_bf16(1.00390625f), 0x3f80);   /* tie to even (down) */
    CHECK_INT(bs_f32_to_bf16(1.01171875f), 0x3f82);   /* tie to even (up) */
    bs_pool_destroy(pool2);
    bs_pool_destroy(pool3);
    return check_report("test_gemm");
}
