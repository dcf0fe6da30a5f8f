/* The element-wise SiLU·up kernel against float64, for every kernel family
 * the CPU supports (portable, AVX2, AVX-512), and bitwise equal across them:
 * relative error within a few f32 ulps over [-100, 100] and the edges (±0,
 * huge magnitudes, optional biases, lengths with a tail), and the same bits
 * for an element whatever the row length around it. */
#include <stdint.h>

#include "check.h"
#include "cpu/elementwise.h"
#include "cpu/gemm.h"

static uint64_t rng = 0x853C49E6748FEA9Bull;
static float frand(void) {
    rng ^= rng << 13; rng ^= rng >> 7; rng ^= rng << 17;
    return (float)((double)(rng >> 11) / 9007199254740992.0 * 2.0 - 1.0);
}

static double silu_ref(double x) { return x / (1.0 + exp(-x)); }

enum { N = 1037 };
static float first_out[2][N]; /* the first family's outputs (without, with biases) */
static int have_first;

static void check_family(void) {
    static float g[N], u[N], bg[N], bu[N], g0[N];
    rng = 0x853C49E6748FEA9Bull; /* the same inputs for every family */
    for (int i = 0; i < N; i++) {
        g0[i] = frand() * 100.0f;
        u[i] = frand() * 4.0f;
        bg[i] = frand();
        bu[i] = frand();
    }
    float edges[] = {0.0f, -0.0f, 1e-30f, -1e-30f, 87.0f, -87.0f, 88.9f, -88.9f, 200.0f, -200.0f, 1e30f, -1e30f};
    for (int i = 0; i < (int)(sizeof edges / sizeof *edges); i++) g0[i] = edges[i];
    for (int with_bias = 0; with_bias < 2; with_bias++) {
        memcpy(g, g0, sizeof g);
        bs_silu_mul(g, u, with_bias ? bg : NULL, with_bias ? bu : NULL, N);
        int bad = 0;
        for (int i = 0; i < N; i++) {
            float gv = with_bias ? g0[i] + bg[i] : g0[i], uv = with_bias ? u[i] + bu[i] : u[i];
            double ref = silu_ref(gv) * (double)uv;
            double tol = 4e-7 * fabs(ref) + 1e-35; /* below ~1e-36 both flush towards 0, as torch does */
            if (!(fabs(g[i] - ref) <= tol)) {
                if (bad++ < 5) fprintf(stderr, "silu(%g)*%g: got %.9g, float64 %.9g\n", gv, uv, g[i], ref);
            }
        }
        CHECK_INT(bad, 0);
        if (!have_first) {
            memcpy(first_out[with_bias], g, sizeof g);
        } else {
            int differ = 0;
            for (int i = 0; i < N; i++) differ += memcmp(&g[i], &first_out[with_bias][i], 4) != 0;
            if (differ) fprintf(stderr, "%d of %d outputs differ from the portable family\n", differ, N);
            CHECK_INT(differ, 0);
        }
    }
    have_first = 1;
    /* an element's bits do not depend on where the row ends */
    memcpy(g, g0, sizeof g);
    bs_silu_mul(g, u, bg, bu, N);
    int diff = 0;
    for (int n = 1; n <= 40; n++) {
        float h[40];
        memcpy(h, g0, (size_t)n * sizeof *h);
        bs_silu_mul(h, u, bg, bu, n);
        diff += memcmp(h, g, (size_t)n * sizeof *h) != 0;
    }
    CHECK_INT(diff, 0);
}

int main(void) {
    bs_kernel native = bs_gemm_kernel();
    printf("native kernel %s\n", bs_gemm_kernel_name(native));
    const bs_kernel fams[] = {BS_KERNEL_GENERIC, BS_KERNEL_AVX2, BS_KERNEL_AVX512};
    int ran = 0;
    for (int f = 0; f < 3; f++) {
        if (!bs_kernel_supported(fams[f])) continue;
        bs_gemm_force_kernel(fams[f]);
        check_family();
        ran++;
    }
    printf("%d families compared bitwise\n", ran);
    CHECK(ran >= 1);
    bs_gemm_force_kernel(native);
    return check_report("test_elementwise");
}
