/* The GEMM against a float64 reference, and its batch invariance (spec 05
 * §13.2 A1, §18 item 6): a row's output is bitwise the same for any number of
 * rows, any row offset, 1 or 2 threads, and f32 vs bf16 storage of the same
 * values. Both kernels (portable and AVX2) are checked. */
#include <stdint.h>

#include "check.h"
#include "core/util.h"
#include "cpu/gemm.h"

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

static void check_invariance(bs_pool *pool, const bs_wmat *wm, const float *x, int m_max, int k, int n) {
    /* Reference: every row computed alone (M = 1). */
    float *solo = malloc((size_t)m_max * n * sizeof(float));
    float *y = malloc((size_t)m_max * n * sizeof(float));
    for (int i = 0; i < m_max; i++) bs_gemm(NULL, x + (size_t)i * k, k, 1, wm, solo + (size_t)i * n, n);
    int mismatches = 0, tried = 0;
    for (int m = 1; m <= m_max; m += (m < 40 ? 1 : 37)) {
        for (int off = 0; off + m <= m_max; off += (m_max - m) / 3 + 1) {
            bs_gemm(pool, x + (size_t)off * k, k, m, wm, y, n);
            tried++;
            if (memcmp(y, solo + (size_t)off * n, (size_t)m * n * sizeof(float))) mismatches++;
        }
    }
    if (mismatches) fprintf(stderr, "invariance: %d of %d (M, offset) cases differ from M=1\n", mismatches, tried);
    CHECK_INT(mismatches, 0);
    free(solo);
    free(y);
}

int main(void) {
    bs_pool *pool2 = bs_pool_create(2);
    CHECK(pool2 != NULL);
    const int shapes[][2] = {{37, 53}, {64, 64}, {160, 64}, {64, 160}, {48, 300}, {130, 517}};
    const bs_kernel kernels[] = {BS_KERNEL_GENERIC, BS_KERNEL_AVX2};
    int have_avx2 = bs_gemm_kernel() == BS_KERNEL_AVX2;
    for (int ki = 0; ki < 2; ki++) {
        if (kernels[ki] == BS_KERNEL_AVX2 && !have_avx2) {
            fprintf(stderr, "AVX2/FMA not available: skipping that kernel\n");
            continue;
        }
        bs_gemm_force_kernel(kernels[ki]);
        for (size_t s = 0; s < sizeof shapes / sizeof *shapes; s++) {
            int n = shapes[s][0], k = shapes[s][1], m_max = 100;
            float *w = malloc((size_t)n * k * sizeof(float));
            uint16_t *wb = malloc((size_t)n * k * sizeof(uint16_t));
            float *x = malloc((size_t)m_max * k * sizeof(float));
            float *y = malloc((size_t)m_max * n * sizeof(float));
            float *yb = malloc((size_t)m_max * n * sizeof(float));
            /* weights hold bf16-representable values so f32 and bf16 storage are equal */
            for (int i = 0; i < n * k; i++) {
                wb[i] = bs_f32_to_bf16(frand());
                w[i] = bs_bf16_to_f32(wb[i]);
            }
            for (int i = 0; i < m_max * k; i++) x[i] = frand();
            bs_wmat wf = {BS_F32, w, n, k}, wbf = {BS_BF16, wb, n, k};
            bs_gemm(pool2, x, k, m_max, &wf, y, n);
            check_reference(x, m_max, w, n, k, y);
            bs_gemm(NULL, x, k, m_max, &wbf, yb, n);
            CHECK(memcmp(y, yb, (size_t)m_max * n * sizeof(float)) == 0); /* bf16 == f32, 2 vs 1 thread */
            check_invariance(NULL, &wf, x, m_max, k, n);
            check_invariance(pool2, &wbf, x, m_max, k, n);
            /* fixed-order dot product: equals the M=1 GEMM? Not required; just finite and close */
            float d = bs_dot_row(x, &wf, 0);
            CHECK_NEAR(d, y[0], 1e-4 * (1 + fabs(y[0])));
            free(w); free(wb); free(x); free(y); free(yb);
        }
        fprintf(stderr, "kernel %s checked\n", bs_gemm_kernel_name(kernels[ki]));
    }
    /* f16 storage widens exactly: compare with the same values in f32 */
    {
        int n = 24, k = 40;
        uint16_t *wh = malloc((size_t)n * k * 2);
        float *w = malloc((size_t)n * k * 4), *x = malloc((size_t)3 * k * 4);
        float *y1 = malloc((size_t)3 * n * 4), *y2 = malloc((size_t)3 * n * 4);
        for (int i = 0; i < n * k; i++) { wh[i] = bs_f32_to_f16(frand()); w[i] = bs_f16_to_f32(wh[i]); }
        for (int i = 0; i < 3 * k; i++) x[i] = frand();
        bs_wmat a = {BS_F16, wh, n, k}, b = {BS_F32, w, n, k};
        bs_gemm(pool2, x, k, 3, &a, y1, n);
        bs_gemm(pool2, x, k, 3, &b, y2, n);
        CHECK(memcmp(y1, y2, (size_t)3 * n * 4) == 0);
        free(wh); free(w); free(x); free(y1); free(y2);
    }
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
    return check_report("test_gemm");
}
