/* The int8 mode's W8A8 product (cpu/gemm.h, src/cpu/gemm_i8.c,
 * src/cpu/gemm_amx_i8.c).
 *
 * 1. Activation rows against the definition written here independently
 *    (float64 amax and division, then rounded to f32, nearbyint, clamp):
 *    zeros, NaN, an outlier, random rows of every length 1..300.
 * 2. Products against an exact reference computed here: int64 sums of the
 *    reference-quantized x and the row-major q, then (float)acc * (sx * s).
 *    Every int8 kernel family this CPU runs (portable, int8-avx2, avx-vnni,
 *    avx512-vnni, amx-int8) and the AMX path with its C emulation of the
 *    tiles (on every CPU: the AMX kernel's addressing where AMX is absent)
 *    must give exactly those bits, on shapes with odd K and N tails, for
 *    M = 1..40 and larger, alone and batched, on 1, 2 and 3 threads.
 * 3. The packed layout round-trips to row-major q.
 * 4. The int32 bound: a matrix deeper than BS_I8_MAX_K is refused; at
 *    BS_I8_MAX_K with every value at its extreme, every kernel's sums are
 *    exact (+-K * 127 * 127, with the VNNI kernels' +128 trick at 255 * 127).
 * 5. The block Hadamard rotation of down_proj's input (cpu/hadamard.h):
 *    against the matrix H[i][j] = (-1)^popcount(i & j) on small integers
 *    (where f32 is exact), applied twice = b times the row, the AVX-512 code
 *    bitwise equal to the portable one on random rows, and the block sizes.
 *
 * `test_gemm_i8 --dump DIR` writes random operands and every kernel's
 * outputs for tests/e2e/t_int8.sh, which checks them against numpy. */
#include <errno.h>
#include <stdint.h>
#include <sys/stat.h>

#include "check.h"
#include "base/util.h"
#include "cpu/gemm.h"
#include "cpu/gemm_i8_impl.h"
#include "cpu/hadamard.h"

static uint64_t rng = 0x8BADF00DDEADBEEFull;
static uint64_t xr(void) {
    rng ^= rng << 13; rng ^= rng >> 7; rng ^= rng << 17;
    return rng;
}
static float frand(void) { return (float)((double)(xr() >> 11) / 9007199254740992.0 * 2.0 - 1.0); }
static uint32_t ubits(float f) { uint32_t u; memcpy(&u, &f, 4); return u; }

/* The definition, independently: float64, then rounded where the definition rounds. */
static void ref_act(const float *x, int k, int8_t *q, float *s) {
    double amax = 0;
    for (int i = 0; i < k; i++)
        if (!isnan(x[i]) && fabs((double)x[i]) > amax) amax = fabs((double)x[i]);
    *s = (float)(amax / 127.0);
    for (int i = 0; i < k; i++) {
        double v = *s > 0.0f ? nearbyint((double)(float)((double)x[i] / (double)*s)) : 0.0;
        q[i] = (int8_t)(isnan(v) ? 0 : v > 127 ? 127 : v < -127 ? -127 : v);
    }
}

static void check_act_rows(void) {
    float x[300];
    int8_t q[300], rq[300];
    int bad = 0;
    for (int t = 0; t < 400; t++) {
        int k = 1 + (int)(xr() % 300);
        float mag = (float)ldexp(1.0, (int)(xr() % 30) - 15);
        for (int i = 0; i < k; i++) x[i] = frand() * mag;
        if (t % 7 == 1) x[xr() % (uint64_t)k] = mag * 60.0f; /* an outlier channel */
        if (t % 11 == 2) x[xr() % (uint64_t)k] = NAN;
        if (t % 13 == 3) memset(x, 0, sizeof(float) * (size_t)k);
        float s, rs;
        bs_quantize_act_row(x, k, q, &s);
        ref_act(x, k, rq, &rs);
        bad += ubits(s) != ubits(rs) || memcmp(q, rq, (size_t)k) != 0;
    }
    CHECK_INT(bad, 0);
    /* ties to even at s = 1 (amax 127) */
    float tie[9] = {0.5f, 1.5f, 2.5f, -0.5f, -1.5f, -2.5f, 126.5f, -126.5f, 127.0f};
    int8_t tq[9];
    float ts;
    bs_quantize_act_row(tie, 9, tq, &ts);
    int want[9] = {0, 2, 2, 0, -2, -2, 126, -126, 127};
    CHECK(ts == 1.0f);
    for (int i = 0; i < 9; i++) CHECK_INT(tq[i], want[i]);
}

/* y[i][j] of the definition: exact sums in int64 over reference-quantized x. */
static void ref_product(const float *x, int m, int k, const int8_t *q, const float *sw, int n, float *y) {
    int8_t *qx = malloc((size_t)k);
    for (int i = 0; i < m; i++) {
        float sx;
        ref_act(x + (size_t)i * k, k, qx, &sx);
        for (int j = 0; j < n; j++) {
            int64_t acc = 0;
            for (int t = 0; t < k; t++) acc += (int64_t)qx[t] * q[(size_t)j * k + t];
            y[(size_t)i * n + j] = (float)(int32_t)acc * (sx * sw[j]);
        }
    }
    free(qx);
}

/* The kernels to compare: every family this CPU runs, then the emulated AMX path (-1). */
static int families(int *list) {
    int n = 0;
    for (int k = 0; k <= 4; k++) /* portable, avx-vnni, avx512-vnni, amx-int8, int8-avx2 */
        if (bs_gemm_i8_supported(k)) list[n++] = k;
    list[n++] = -1;
    return n;
}

static void use_family(int k) {
    if (k < 0) {
        bs_gemm_i8_emulate_amx(1);
    } else {
        bs_gemm_i8_emulate_amx(0);
        bs_gemm_force_i8(k);
    }
}

static const char *family_name(int k) { return k < 0 ? "amx-int8 (emulated tiles)" : bs_gemm_i8_name_of(k); }

static void make_weights(int n, int k, int8_t *q, float *sw) {
    for (int j = 0; j < n; j++) {
        for (int t = 0; t < k; t++) q[(size_t)j * k + t] = (int8_t)((int)(xr() % 255) - 127);
        sw[j] = (float)(xr() % 1000 + 1) * 1e-4f;
    }
}

static void check_products(bs_pool *pool2, bs_pool *pool3) {
    static const int shapes[][2] = {{1, 1}, {5, 3}, {33, 65}, {64, 64}, {100, 130}, {257, 200}, {32, 513},
                                    {70, 1000}, {16, 4}, {31, 127}};
    int fam[6], nf = families(fam), chosen = bs_gemm_i8_kernel();
    for (int f = 0; f < nf; f++) printf("int8 kernel: %s\n", family_name(fam[f]));
    enum { MBIG = 203 };
    for (size_t si = 0; si < sizeof shapes / sizeof *shapes; si++) {
        int n = shapes[si][0], k = shapes[si][1];
        int8_t *q = malloc((size_t)n * k), *back = malloc((size_t)n * k);
        float *sw = malloc(sizeof(float) * (size_t)n), *x = malloc(sizeof(float) * (size_t)MBIG * k);
        float *ref = malloc(sizeof(float) * (size_t)MBIG * n), *y = malloc(sizeof(float) * (size_t)MBIG * (n + 3));
        make_weights(n, k, q, sw);
        for (int i = 0; i < MBIG * k; i++) x[i] = frand() * 3.0f;
        for (int i = 0; i < MBIG; i += 17) x[(size_t)i * k + (size_t)(xr() % (uint64_t)k)] = 90.0f; /* outliers */
        memset(x + (size_t)5 * k, 0, sizeof(float) * (size_t)k);                                  /* a zero row */
        ref_product(x, MBIG, k, q, sw, n, ref);
        bs_wmat w = {BS_F32, NULL, n, k, NULL, BS_WPACK_NONE, NULL};
        CHECK_INT(bs_gemm_pack_w8a8(pool2, &w, q, sw, NULL), 1);
        CHECK(w.packed_kind == BS_WPACK_Q8);
        bs_gemm_w8a8_rows(&w, back);
        CHECK(!memcmp(back, q, (size_t)n * k));
        for (int f = 0; f < nf; f++) {
            use_family(fam[f]);
            int bad = 0;
            /* every M up to 40 at two offsets, serial and threaded */
            for (int m = 1; m <= 40; m++)
                for (int off = 0; off < 2; off++) {
                    int o = off ? MBIG - m : m % 3;
                    bs_pool *pl = m % 3 == 0 ? NULL : m % 3 == 1 ? pool2 : pool3;
                    bs_gemm_mode(pl, BS_COMPUTE_BF16, x + (size_t)o * k, k, m, &w, y, n);
                    bad += memcmp(y, ref + (size_t)o * n, sizeof(float) * (size_t)m * n) != 0;
                }
            /* all rows at once, with a row stride wider than n (the padding untouched) */
            for (int i = 0; i < MBIG * (n + 3); i++) y[i] = -7.0f;
            bs_gemm_mode(pool3, BS_COMPUTE_F32, x, k, MBIG, &w, y, n + 3);
            for (int i = 0; i < MBIG; i++) {
                bad += memcmp(y + (size_t)i * (n + 3), ref + (size_t)i * n, sizeof(float) * (size_t)n) != 0;
                for (int j = n; j < n + 3; j++) bad += y[(size_t)i * (n + 3) + j] != -7.0f;
            }
            if (bad) fprintf(stderr, "%s: n %d k %d: %d products differ from the definition\n", family_name(fam[f]), n, k, bad);
            CHECK_INT(bad, 0);
        }
        bs_gemm_unpack(&w);
        CHECK(w.packed == NULL && w.scale == NULL);
        free(q); free(back); free(sw); free(x); free(ref); free(y);
    }
    bs_gemm_i8_emulate_amx(0);
    bs_gemm_force_i8(chosen);
}

/* K = BS_I8_MAX_K with every value at its extreme: the sums are +-K*127*127
 * exactly; one deeper is refused. */
static void check_bound(bs_pool *pool2) {
    int k = BS_I8_MAX_K, n = 3;
    int8_t *q = malloc((size_t)n * k);
    float sw[3] = {1.0f, 1.0f, 1.0f}, *x = malloc(sizeof(float) * 2 * (size_t)k), y[6];
    for (int t = 0; t < k; t++) {
        q[t] = 127;
        q[(size_t)k + t] = -127;
        q[(size_t)2 * k + t] = t % 2 ? 127 : -127;
        x[t] = 1.0f;   /* qx 127, the VNNI kernels' 255 */
        x[(size_t)k + t] = -1.0f;
    }
    bs_wmat w = {BS_F32, NULL, n, k, NULL, BS_WPACK_NONE, NULL};
    CHECK_INT(bs_gemm_pack_w8a8(pool2, &w, q, sw, NULL), 1);
    double full = (double)k * 127.0 * 127.0;
    float sx = 1.0f / 127.0f, want[6] = {(float)(full)*sx, (float)(-full)*sx, (float)(-127 * 127)*sx, (float)(-full)*sx,
                                         (float)(full)*sx, (float)(127 * 127)*sx};
    /* k odd: the alternating row sums to -127*127 (one more -127) for x = +1 */
    int fam[6], nf = families(fam), chosen = bs_gemm_i8_kernel();
    for (int f = 0; f < nf; f++) {
        use_family(fam[f]);
        bs_gemm_mode(pool2, BS_COMPUTE_BF16, x, k, 2, &w, y, n);
        int bad = 0;
        for (int i = 0; i < 6; i++) bad += ubits(y[i]) != ubits(want[i]);
        if (bad) fprintf(stderr, "%s at K = %d: %g %g %g %g %g %g\n", family_name(fam[f]), k, y[0], y[1], y[2], y[3], y[4], y[5]);
        CHECK_INT(bad, 0);
    }
    bs_gemm_i8_emulate_amx(0);
    bs_gemm_force_i8(chosen);
    bs_gemm_unpack(&w);
    bs_wmat deep = {BS_F32, NULL, 1, BS_I8_MAX_K + 1, NULL, BS_WPACK_NONE, NULL};
    int8_t *qd = calloc((size_t)BS_I8_MAX_K + 1, 1);
    CHECK_INT(bs_gemm_pack_w8a8(pool2, &deep, qd, sw, NULL), BS_ERANGE);
    CHECK(deep.packed == NULL);
    free(qd);
    free(q);
    free(x);
}

/* The AMX block alone: the emulated tiles against the exact sums, both row
 * counts, and the instructions against the emulation where the CPU has them. */
static void check_amx_block(void) {
    int kp = 192;
    int8_t x[32 * 192], strip[192 * 32];
    for (int i = 0; i < 32 * 192; i++) x[i] = (int8_t)((int)(xr() % 255) - 127);
    for (int i = 0; i < 192 * 32; i++) strip[i] = (int8_t)((int)(xr() % 255) - 127);
    int32_t c[32 * 32], ce[32 * 32];
    for (int two = 0; two < 2; two++) {
        bs_amx_i8_block_emulated(x, kp, two, strip, kp, ce);
        int bad = 0;
        for (int i = 0; i < (two ? 32 : 16); i++)
            for (int j = 0; j < 32; j++) {
                int32_t acc = 0;
                for (int t = 0; t < kp; t++) acc += x[i * kp + t] * strip[(t / 4) * 128 + j * 4 + t % 4];
                bad += ce[i * 32 + j] != acc;
            }
        CHECK_INT(bad, 0);
        if (bs_gemm_amx_i8_available()) {
            bs_amx_i8_block(x, kp, two, strip, kp, c);
            CHECK(!memcmp(c, ce, sizeof(int32_t) * (two ? 32 : 16) * 32));
        }
    }
    if (!bs_gemm_amx_i8_available()) printf("no AMX-INT8 here (or the tile state was refused): its tiles emulated only\n");
}

static void check_hadamard(void) {
    CHECK_INT(bs_hadamard_block(160), 32);
    CHECK_INT(bs_hadamard_block(8960), 256);
    CHECK_INT(bs_hadamard_block(1536), 256);
    CHECK_INT(bs_hadamard_block(64), 64);
    CHECK_INT(bs_hadamard_block(100), 0);
    CHECK_INT(bs_hadamard_block(7), 0);
    static const int ks[] = {32, 160, 256, 1536, 8960};
    for (size_t ki = 0; ki < sizeof ks / sizeof *ks; ki++) {
        int k = ks[ki], b = bs_hadamard_block(k), rows = 5;
        float *x = malloc(sizeof(float) * (size_t)rows * k), *y = malloc(sizeof(float) * (size_t)rows * k);
        float *z = malloc(sizeof(float) * (size_t)rows * k);
        /* small integers: every sum exact in f32, so the definition is exact too */
        for (int i = 0; i < rows * k; i++) x[i] = (float)((int)(xr() % 17) - 8);
        memcpy(y, x, sizeof(float) * (size_t)rows * k);
        bs_hadamard_rows_kernel(y, rows, k, k, b, 0);
        int bad = 0;
        for (int r = 0; r < rows; r++)
            for (int i = 0; i < k; i++) {
                int blk = i / b * b;
                double want = 0;
                for (int j = 0; j < b; j++)
                    want += (__builtin_popcount((unsigned)((i - blk) & j)) & 1 ? -1.0 : 1.0) * x[(size_t)r * k + blk + j];
                bad += y[(size_t)r * k + i] != (float)want;
            }
        CHECK_INT(bad, 0);
        memcpy(z, y, sizeof(float) * (size_t)rows * k);
        bs_hadamard_rows_kernel(z, rows, k, k, b, 1);
        bs_hadamard_rows_kernel(y, rows, k, k, b, 0);
        bad = 0;
        for (int i = 0; i < rows * k; i++) bad += y[i] != (float)b * x[i] || z[i] != y[i];
        CHECK_INT(bad, 0);
        /* random values: the vector code the same bits as the portable one */
        for (int i = 0; i < rows * k; i++) x[i] = frand() * 10.0f;
        memcpy(y, x, sizeof(float) * (size_t)rows * k);
        memcpy(z, x, sizeof(float) * (size_t)rows * k);
        bs_hadamard_rows_kernel(y, rows, k, k, b, 0);
        bs_hadamard_rows_kernel(z, rows, k, k, b, 1);
        CHECK(!memcmp(y, z, sizeof(float) * (size_t)rows * k));
        free(x); free(y); free(z);
    }
}

/* ---- --dump DIR: operands and outputs for the numpy check -------------------------- */

static int put(const char *dir, const char *name, const void *p, size_t bytes) {
    char path[4096];
    snprintf(path, sizeof path, "%s/%s.bin", dir, name);
    FILE *f = fopen(path, "wb");
    if (!f || fwrite(p, 1, bytes, f) != bytes) {
        if (f) fclose(f);
        return -1;
    }
    return fclose(f);
}

static int dump(const char *dir) {
    enum { M = 37, N = 45, K = 203 };
    if (mkdir(dir, 0755) != 0 && errno != EEXIST) return 1;
    static float x[M * K], w[N * K], y[M * N];
    static int8_t q[N * K];
    float sw[N];
    for (int i = 0; i < M * K; i++) x[i] = frand() * 2.0f;
    for (int i = 0; i < M; i += 5) x[i * K + (int)(xr() % K)] = 70.0f;
    for (int i = 0; i < N * K; i++) w[i] = frand() * 0.1f;
    for (int j = 0; j < N; j++) bs_quantize_row_i8(w + (size_t)j * K, BS_F32, K, q + (size_t)j * K, &sw[j]);
    bs_wmat wm = {BS_F32, w, N, K, NULL, BS_WPACK_NONE, NULL};
    if (bs_gemm_pack_w8a8(NULL, &wm, q, sw, NULL) != 1) return 1;
    FILE *meta;
    char path[4096];
    snprintf(path, sizeof path, "%s/meta.json", dir);
    if (!(meta = fopen(path, "w"))) return 1;
    fprintf(meta, "{\"m\": %d, \"n\": %d, \"k\": %d, \"kernels\": [", M, N, K);
    int rc = put(dir, "x", x, sizeof x) | put(dir, "w", w, sizeof w);
    int fam[6], nf = families(fam);
    for (int f = 0; f < nf; f++) {
        use_family(fam[f]);
        bs_gemm_mode(NULL, BS_COMPUTE_BF16, x, K, M, &wm, y, N);
        char name[64];
        snprintf(name, sizeof name, "y%d", f);
        rc |= put(dir, name, y, sizeof y);
        fprintf(meta, "%s\"%s\"", f ? ", " : "", family_name(fam[f]));
    }
    fprintf(meta, "]}\n");
    bs_gemm_i8_emulate_amx(0);
    bs_gemm_unpack(&wm);
    return (fclose(meta) | rc) ? 1 : 0;
}

int main(int argc, char **argv) {
    if (argc == 3 && !strcmp(argv[1], "--dump")) return dump(argv[2]);
    bs_pool *pool2 = bs_pool_create(2), *pool3 = bs_pool_create(3);
    CHECK(pool2 && pool3);
    check_act_rows();
    check_products(pool2, pool3);
    check_bound(pool2);
    check_amx_block();
    check_hadamard();
    bs_pool_destroy(pool2);
    bs_pool_destroy(pool3);
    return check_report("test_gemm_i8");
}
