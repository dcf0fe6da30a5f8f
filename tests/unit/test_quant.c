/* The int8w mode's weights (src/cpu/quant.c, gemm.h bs_gemm_quantize).
 *
 * 1. One row's quantization against its definition computed here in float64
 *    (scale = amax / 127 rounded to f32, q = the nearest integer of w / s
 *    with ties to even, |q| <= 127): all-zero, constant, one outlier, NaN,
 *    f32/bf16/f16 storage of the same values, and random rows; the largest
 *    |w| always maps to +-127 and s * q is within s / 2 of w.
 *    (tests/e2e/t_int8.sh checks a whole model against numpy.)
 * 2. Int8w products, bs_gemm_mode(BF16) on a quantized w: bitwise the chain
 *    of the VDPBF16PS step (bs_bf16_pair_step, pinned to the instruction by
 *    test_gemm_bf16) over bf16(x) and q, times s, computed here one output
 *    at a time; the avx512-bf16 kernel and the portable one bitwise equal;
 *    batch invariance (M = 1..37, 1/2/3 threads); unpack restores the
 *    stored weights' bf16 product. On AVX2 CPUs, q prepacked for bf16-avx2
 *    (BS_WPACK_I8S) gives the same bits, alone and batched, and with
 *    activations in the subnormals (its exact fallback) the definition's. */
#include <stdint.h>

#include "check.h"
#include "base/util.h"
#include "cpu/gemm.h"
#include "cpu/gemm_impl.h"

static uint64_t rng = 0x2545F4914F6CDD1Dull;
static uint64_t xr(void) {
    rng ^= rng << 13; rng ^= rng >> 7; rng ^= rng << 17;
    return rng;
}
static float frand(void) { return (float)((double)(xr() >> 11) / 9007199254740992.0 * 2.0 - 1.0); }
static uint32_t ubits(float f) { uint32_t u; memcpy(&u, &f, 4); return u; }

/* The definition, written independently: float64 for the division (then
 * rounded to the f32 quotient the definition divides in), nearbyint. */
static void reference_row(const float *w, int n, int8_t *q, float *s) {
    double amax = 0.0;
    for (int i = 0; i < n; i++)
        if (fabs((double)w[i]) > amax) amax = fabs((double)w[i]);
    *s = (float)(amax / 127.0);
    for (int i = 0; i < n; i++) {
        if (*s == 0.0f || isnan(w[i])) { q[i] = 0; continue; }
        double v = nearbyint((double)(float)((double)w[i] / (double)*s));
        q[i] = (int8_t)(v > 127 ? 127 : v < -127 ? -127 : v);
    }
}

static void check_row(const char *what, const float *w, int n) {
    int8_t q[512], rq[512];
    float s, rs;
    bs_quantize_row_i8(w, BS_F32, n, q, &s);
    reference_row(w, n, rq, &rs);
    int bad = 0, maxq = 0;
    for (int i = 0; i < n; i++) {
        bad += q[i] != rq[i];
        if (abs(q[i]) > maxq) maxq = abs(q[i]);
        if (!isnan(w[i]) && fabsf(s * q[i] - w[i]) > s * 0.5f * 1.0001f + 1e-30f) bad++;
    }
    if (ubits(s) != ubits(rs) || bad) fprintf(stderr, "%s: scale %a vs %a, %d bad values\n", what, s, rs, bad);
    CHECK(ubits(s) == ubits(rs));
    CHECK_INT(bad, 0);
    if (rs > 0.0f) CHECK_INT(maxq, 127);
    /* bf16 and f16 storage of the same (representable) values quantize alike */
    uint16_t b[512], h[512];
    float wb[512];
    for (int i = 0; i < n; i++) {
        b[i] = bs_f32_to_bf16(w[i]);
        wb[i] = bs_bf16_to_f32(b[i]);
        h[i] = bs_f32_to_f16(wb[i]);
    }
    int8_t qb[512], qf[512], qh[512];
    float sb, sf, sh;
    bs_quantize_row_i8(b, BS_BF16, n, qb, &sb);
    bs_quantize_row_i8(wb, BS_F32, n, qf, &sf);
    CHECK(ubits(sb) == ubits(sf) && !memcmp(qb, qf, (size_t)n));
    int f16_exact = 1;
    for (int i = 0; i < n; i++) f16_exact &= bs_f16_to_f32(h[i]) == wb[i] || isnan(wb[i]);
    if (f16_exact) {
        bs_quantize_row_i8(h, BS_F16, n, qh, &sh);
        CHECK(ubits(sh) == ubits(sf) && !memcmp(qh, qf, (size_t)n));
    }
}

static void check_rows(void) {
    float w[512];
    memset(w, 0, sizeof w);
    check_row("zeros", w, 64);
    for (int i = 0; i < 64; i++) w[i] = 0.25f;
    check_row("constant", w, 64);
    for (int i = 0; i < 256; i++) w[i] = frand() * 0.02f;
    w[17] = 3.5f; /* an outlier channel, as real checkpoints have */
    check_row("outlier", w, 256);
    w[3] = NAN;
    check_row("nan", w, 256);
    for (int t = 0; t < 200; t++) {
        int n = 1 + (int)(xr() % 512);
        float mag = (float)ldexp(1.0, (int)(xr() % 40) - 30);
        for (int i = 0; i < n; i++) w[i] = frand() * mag;
        check_row("random", w, n);
    }
    /* exact ties: s = 1 (amax 127) and halves round to even */
    for (int i = 0; i < 8; i++) w[i] = (float)i + 0.5f;
    w[8] = 127.0f;
    int8_t q[16];
    float s;
    bs_quantize_row_i8(w, BS_F32, 9, q, &s);
    CHECK(s == 1.0f);
    int even[8] = {0, 2, 2, 4, 4, 6, 6, 8};
    for (int i = 0; i < 8; i++) CHECK_INT(q[i], even[i]);
}

/* One output of the int8w product, from the definition: the VDPBF16PS pair
 * chain over bf16(x) and q (odd K ends with a zero pair), then times s. */
static float chain_out(const float *x, const int8_t *q, int k, float s) {
    float acc = 0.0f;
    for (int p = 0; p < k; p += 2) {
        uint32_t xp = bs_f32_to_bf16(x[p]), wp = bs_f32_to_bf16((float)q[p]);
        if (p + 1 < k) {
            xp |= (uint32_t)bs_f32_to_bf16(x[p + 1]) << 16;
            wp |= (uint32_t)bs_f32_to_bf16((float)q[p + 1]) << 16;
        }
        acc = bs_bf16_pair_step(acc, xp, wp);
    }
    return acc * s;
}

static void check_products(bs_pool *pool2, bs_pool *pool3) {
    /* {n, k, m}: the last two go over several K blocks (the scale is applied
     * after the last) and, the last, several row blocks */
    static const int shapes[][3] = {{64, 64, 37}, {40, 33, 37}, {96, 200, 37}, {130, 257, 37}, {32, 512, 37},
                                    {72, 1100, 37}, {50, 1030, 300}};
    int chosen = bs_gemm_force_bf16_hw(1);
    int have_hw = bs_gemm_bf16_kernel() == 1;
    bs_gemm_force_bf16_hw(3);
    int have_avx2 = bs_gemm_bf16_kernel() == 3;
    for (size_t si = 0; si < sizeof shapes / sizeof *shapes; si++) {
        int n = shapes[si][0], k = shapes[si][1], M = shapes[si][2];
        float *w = malloc(sizeof(float) * (size_t)n * k), *x = malloc(sizeof(float) * (size_t)M * k);
        float *y = malloc(sizeof(float) * (size_t)M * n), *y1 = malloc(sizeof(float) * (size_t)n);
        float *yp = malloc(sizeof(float) * (size_t)M * n);
        for (int i = 0; i < n * k; i++) w[i] = frand() * 0.05f;
        for (int r = 0; r < n; r += 7) w[(size_t)r * k + (size_t)(xr() % (uint64_t)k)] = 2.0f; /* outliers */
        for (int i = 0; i < M * k; i++) x[i] = frand() * 4.0f;
        bs_wmat wm = {BS_F32, w, n, k, NULL, BS_WPACK_NONE, NULL};
        size_t bytes = 0;
        CHECK_INT(bs_gemm_quantize(pool2, &wm, &bytes), 1);
        CHECK(wm.packed_kind == BS_WPACK_I8 && wm.scale != NULL && bytes >= (size_t)n * k + (size_t)n * 4);
        const int8_t *q = wm.packed;
        /* the definition, output by output */
        bs_gemm_force_bf16_hw(0);
        bs_gemm_mode(pool3, BS_COMPUTE_BF16, x, k, M, &wm, yp, n);
        int bad = 0;
        for (int i = 0; i < M; i++)
            for (int j = 0; j < n; j++)
                bad += ubits(yp[(size_t)i * n + j]) != ubits(chain_out(x + (size_t)i * k, q + (size_t)j * k, k, wm.scale[j]));
        if (bad) fprintf(stderr, "n %d k %d: %d outputs differ from the definition\n", n, k, bad);
        CHECK_INT(bad, 0);
        /* the instruction's kernel and the AVX2 FMA one: the same bits (the
         * batch invariance below runs on the last of them) */
        for (int kern = 3; kern >= 1; kern -= 2) {
            if (!(kern == 1 ? have_hw : have_avx2)) continue;
            bs_gemm_force_bf16_hw(kern);
            bs_gemm_mode(pool2, BS_COMPUTE_BF16, x, k, M, &wm, y, n);
            CHECK(!memcmp(y, yp, sizeof(float) * (size_t)M * n));
        }
        /* bf16-avx2's own layout of q (bs_gemm_prepack: int8 strips, 6 x 16
         * tiles): the same bits, whichever bf16 kernel is chosen after; rows
         * of x scaled into the subnormals take the exact fallback */
        if (have_avx2) {
            bs_wmat ws = {BS_F32, w, n, k, NULL, BS_WPACK_NONE, NULL};
            bs_gemm_force_bf16_hw(3);
            CHECK_INT(bs_gemm_quantize(pool2, &ws, NULL), 1);
            CHECK_INT(bs_gemm_prepack(pool2, &ws, BS_COMPUTE_BF16, &bytes), 1);
            CHECK_INT(ws.packed_kind, BS_WPACK_I8S);
            CHECK(bytes >= (size_t)n * k + (size_t)n * 4 && bytes < (size_t)(n + 16) * (k + 1) + (size_t)n * 4 + 64);
            for (int kern = 3; kern >= 0; kern -= 3) {
                bs_gemm_force_bf16_hw(kern);
                bs_gemm_mode(kern ? pool2 : pool3, BS_COMPUTE_BF16, x, k, M, &ws, y, n);
                CHECK(!memcmp(y, yp, sizeof(float) * (size_t)M * n));
            }
            for (int i = 0; i < M; i += 3) {
                bs_gemm_mode(i % 2 ? NULL : pool3, BS_COMPUTE_BF16, x + (size_t)i * k, k, 1, &ws, y1, n);
                CHECK(!memcmp(y1, yp + (size_t)i * n, sizeof(float) * (size_t)n));
            }
            float *xs = malloc(sizeof(float) * (size_t)M * k);
            for (int i = 0; i < M * k; i++) xs[i] = x[i] * (i / k % 2 ? 0x1p-130f : 0x1p-122f);
            bs_gemm_mode(pool2, BS_COMPUTE_BF16, xs, k, M, &ws, y, n);
            bad = 0;
            for (int i = 0; i < M; i++)
                for (int j = 0; j < n; j++)
                    bad += ubits(y[(size_t)i * n + j]) !=
                           ubits(chain_out(xs + (size_t)i * k, q + (size_t)j * k, k, wm.scale[j]));
            if (bad) fprintf(stderr, "n %d k %d: %d tiny outputs differ from the definition\n", n, k, bad);
            CHECK_INT(bad, 0);
            free(xs);
            bs_gemm_unpack(&ws);
            CHECK(ws.packed == NULL && ws.scale == NULL);
        }
        /* batch invariance: every row alone, serial and threaded */
        for (int i = 0; i < M; i += 5) {
            bs_gemm_mode(i % 2 ? NULL : pool2, BS_COMPUTE_BF16, x + (size_t)i * k, k, 1, &wm, y1, n);
            CHECK(!memcmp(y1, yp + (size_t)i * n, sizeof(float) * (size_t)n));
        }
        /* unpacked: the stored weights' own bf16 product again */
        bs_gemm_unpack(&wm);
        CHECK(wm.packed == NULL && wm.scale == NULL && wm.packed_kind == BS_WPACK_NONE);
        bs_gemm_mode(pool2, BS_COMPUTE_BF16, x, k, M, &wm, y, n);
        CHECK(memcmp(y, yp, sizeof(float) * (size_t)M * n) != 0);
        free(w); free(x); free(y); free(y1); free(yp);
    }
    printf("int8w products checked: bf16-portable%s%s\n", have_avx2 ? ", bf16-avx2" : "", have_hw ? ", avx512-bf16" : "");
    bs_gemm_force_bf16_hw(chosen);
}

int main(void) {
    bs_pool *pool2 = bs_pool_create(2), *pool3 = bs_pool_create(3);
    CHECK(pool2 && pool3);
    check_rows();
    check_products(pool2, pool3);
    bs_pool_destroy(pool2);
    bs_pool_destroy(pool3);
    return check_report("test_quant");
}
