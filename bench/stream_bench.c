/* GEMM on weights streaming from RAM, as in a forward: L layers of the
 * mini shape's MLP (gate, up: 8960 x 1536; down: 1536 x 8960) in bf16, far
 * more than the caches, multiplied in turn by M rows; the f32 mode and the
 * bf16 mode (its kernel: the fastest of the CPU, or BASAL_BF16; its weights
 * packed once as a model load does) interleaved pass by pass, so that each
 * pair of lines is comparable on a machine whose speed drifts.
 * usage: stream_bench [--layers 8] [--m 465] [--passes 6] [--threads 2] */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/util.h"
#include "cpu/gemm.h"

static void usage(FILE *f) {
    fprintf(f, "usage: stream_bench [--layers N] [--m M] [--passes N] [--threads N]\n"
               "  --layers N   layers of (gate, up, down) bf16 weights, 82 MB each (default 8)\n"
               "  --m M        rows multiplied (default 465: one mini-shape decision)\n"
               "  --passes N   interleaved passes of each mode (default 6)\n"
               "  --threads N  compute threads (default 2)\n"
               "Prints GFLOP/s per pass of the f32 mode and of the bf16 mode, and their ratio.\n");
}

int main(int argc, char **argv) {
    int L = 8, M = 465, passes = 6, threads = 2;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) { usage(stdout); return 0; }
        int *dst = !strcmp(a, "--layers") ? &L : !strcmp(a, "--m") ? &M : !strcmp(a, "--passes") ? &passes
                 : !strcmp(a, "--threads") ? &threads : NULL;
        if (!dst || !v || (*dst = atoi(v)) <= 0) { usage(stderr); return 2; }
        i++;
    }
    const int H = 1536, I = 8960;
    bs_pool *pool = bs_pool_create(threads);
    float *x = malloc((size_t)M * I * sizeof *x), *y = malloc((size_t)M * I * sizeof *y);
    bs_wmat *w = calloc((size_t)3 * L, sizeof *w);
    if (!pool || !x || !y || !w) { fprintf(stderr, "out of memory\n"); return 1; }
    for (size_t i = 0; i < (size_t)M * I; i++) x[i] = (float)((i * 2654435761u) % 1000) / 1000.0f - 0.5f;
    double flop = 0;
    for (int l = 0; l < 3 * L; l++) {
        int n = l % 3 == 2 ? H : I, k = l % 3 == 2 ? I : H;
        uint16_t *d = malloc((size_t)n * k * sizeof *d);
        if (!d) { fprintf(stderr, "out of memory\n"); return 1; }
        for (size_t i = 0; i < (size_t)n * k; i++) d[i] = bs_f32_to_bf16((float)(((i + (size_t)l) * 40503u) % 1000) / 1000.0f - 0.5f);
        w[l] = (bs_wmat){BS_BF16, d, n, k, NULL, BS_WPACK_NONE, NULL};
        flop += 2.0 * M * (double)n * k;
    }
    /* the bf16 mode's copies, packed where its kernel wants them */
    bs_wmat *wb = malloc((size_t)3 * L * sizeof *wb);
    if (!wb) { fprintf(stderr, "out of memory\n"); return 1; }
    memcpy(wb, w, (size_t)3 * L * sizeof *w);
    for (int l = 0; l < 3 * L; l++)
        if (bs_gemm_prepack(pool, &wb[l], BS_COMPUTE_BF16, NULL) < 0) { fprintf(stderr, "out of memory\n"); return 1; }
    printf("# %d layers x (gate, up, down) bf16, M = %d, %d threads; f32 kernel %s, bf16 kernel %s%s\n", L, M,
           bs_pool_size(pool), bs_gemm_kernel_name(bs_gemm_kernel()), bs_gemm_bf16_kernel_name(),
           wb[0].packed ? " (weights prepacked)" : "");
    printf("%4s %10s %10s %8s\n", "pass", "f32 GF/s", "bf16 GF/s", "bf16/f32");
    for (int p = 0; p < passes; p++) {
        double g[2];
        for (int mode = 0; mode < 2; mode++) {
            double t0 = bs_now_ms();
            for (int l = 0; l < 3 * L; l++)
                bs_gemm_mode(pool, mode ? BS_COMPUTE_BF16 : BS_COMPUTE_F32, x, w[l].k, M, mode ? &wb[l] : &w[l], y,
                             w[l].n);
            g[mode] = flop / ((bs_now_ms() - t0) * 1e6);
        }
        printf("%4d %10.1f %10.1f %8.2f\n", p + 1, g[0], g[1], g[1] / g[0]);
        fflush(stdout);
    }
    for (int l = 0; l < 3 * L; l++) {
        bs_gemm_unpack(&wb[l]);
        free((void *)w[l].data);
    }
    free(wb); free(w); free(x); free(y);
    bs_pool_destroy(pool);
    return 0;
}
