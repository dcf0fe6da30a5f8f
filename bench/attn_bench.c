/* Throughput of the key-tiled CPU attention (src/cpu/attention.c) on one
 * causal prompt of N tokens with mini's head layout (12 query heads over 2 kv
 * heads, hd 128), next to bs_gemm on mini's q|o shape (M 512) measured in the
 * same run: attention GFLOP/s and its ratio to the GEMM. FLOP = 4*hd per
 * (query, head, visible key), as `basal bench` counts them.
 * Usage: build/bench/attn_bench [--n 2048,16384] [--threads 2] [--reps 3] */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/util.h"
#include "cpu/attention.h"
#include "cpu/gemm.h"
#include "cpu/pool.h"

enum { HD = 128, NKV = 2, REP = 6 };

static uint64_t rng = 0x9E3779B97F4A7C15ull;
static float frand(void) {
    rng ^= rng << 13; rng ^= rng >> 7; rng ^= rng << 17;
    return (float)((double)(rng >> 11) / 9007199254740992.0 * 2.0 - 1.0);
}

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

typedef struct {
    const bs_attn_keys *ks;
    const float *q;
    float *out;
    int n, bq;
    char *scratch;
    size_t sb;
} job_t;

/* Tasks in decreasing cost, as the forward orders them: block b from the end. */
static void task(void *arg, int t, int thread) {
    job_t *j = arg;
    int nblocks = (j->n + j->bq - 1) / j->bq, b = nblocks - 1 - t / NKV, g = t % NKV;
    int p0 = b * j->bq, nq = j->n - p0 < j->bq ? j->n - p0 : j->bq;
    size_t qd = (size_t)NKV * REP * HD;
    bs_attn_block blk = {.keys = j->ks, .g = g, .rep = REP, .hd = HD, .q = j->q + p0 * qd, .q_stride = qd,
                         .out = j->out + p0 * qd, .out_stride = qd, .nq = nq, .pos0 = p0};
    bs_attn_run(&blk, j->scratch + (size_t)thread * j->sb);
}

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

int main(int argc, char **argv) {
    int ns[8] = {2048, 16384}, nn = 2, threads = 2, reps = 3;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--n") && i + 1 < argc) {
            nn = 0;
            for (char *s = argv[++i]; *s && nn < 8;) {
                ns[nn++] = atoi(s);
                char *c = strchr(s, ',');
                if (!c) break;
                s = c + 1;
            }
        } else if (!strcmp(argv[i], "--threads") && i + 1 < argc) threads = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--reps") && i + 1 < argc) reps = atoi(argv[++i]);
        else { fprintf(stderr, "usage: attn_bench [--n N,...] [--threads T] [--reps R]\n"); return 2; }
    }
    bs_pool *pool = bs_pool_create(threads);
    printf("attention kernel %s, %d threads\n", bs_attn_kernel_name(HD), bs_pool_size(pool));

    /* GEMM reference: mini's q|o projection, M 512, f32 weights */
    int gm = 512, gn = 1536, gk = 1536;
    float *gx = malloc((size_t)gm * gk * 4), *gw = malloc((size_t)gn * gk * 4), *gy = malloc((size_t)gm * gn * 4);
    for (size_t i = 0; i < (size_t)gm * gk; i++) gx[i] = frand();
    for (size_t i = 0; i < (size_t)gn * gk; i++) gw[i] = frand();
    bs_wmat w = {BS_F32, gw, gn, gk, NULL, BS_WPACK_NONE};
    double best_g[16];
    for (int r = 0; r < reps; r++) {
        double t0 = now();
        for (int it = 0; it < 4; it++) bs_gemm(pool, gx, gk, gm, &w, gy, gn);
        best_g[r] = 4 * 2.0 * gm * gn * gk / (now() - t0) / 1e9;
    }
    qsort(best_g, (size_t)reps, sizeof *best_g, cmp_double);
    double gemm_gf = best_g[reps / 2];
    printf("bs_gemm %dx%dx%d f32: %.1f GFLOP/s (median of %d)\n", gm, gn, gk, gemm_gf, reps);

    for (int c = 0; c < nn; c++) {
        int n = ns[c];
        size_t kvd = (size_t)NKV * HD, qd = kvd * REP;
        float *k = malloc(n * kvd * 4), *v = malloc(n * kvd * 4), *q = malloc(n * qd * 4), *o = malloc(n * qd * 4);
        for (size_t i = 0; i < n * kvd; i++) { k[i] = frand(); v[i] = frand(); }
        for (size_t i = 0; i < n * qd; i++) q[i] = frand();
        bs_attn_keys ks = {.n_seg = 1, .k = {k}, .v = {v}, .len = {n}, .stride = kvd};
        size_t sb = bs_attn_scratch_bytes(HD, REP);
        job_t j = {&ks, q, o, n, bs_attn_block_queries(REP), aligned_alloc(64, sb * threads), sb};
        int ntasks = (n + j.bq - 1) / j.bq * NKV;
        double flop = 4.0 * HD * NKV * REP * ((double)n * (n + 1) / 2), gf[16];
        for (int r = 0; r < reps; r++) {
            double t0 = now();
            bs_pool_run(pool, ntasks, task, &j);
            gf[r] = flop / (now() - t0) / 1e9;
        }
        qsort(gf, (size_t)reps, sizeof *gf, cmp_double);
        printf("attention n %5d: %.1f GFLOP/s (median of %d) = %.2f x bs_gemm, %.2f s per layer\n", n, gf[reps / 2],
               reps, gf[reps / 2] / gemm_gf, flop / gf[reps / 2] / 1e9);
        free(k); free(v); free(q); free(o); free(j.scratch);
    }
    free(gx); free(gw); free(gy);
    bs_pool_destroy(pool);
    return 0;
}
