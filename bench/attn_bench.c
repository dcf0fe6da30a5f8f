/* Throughput of the key-tiled CPU attention (src/cpu/attention.c, and
 * attention_bf16.c for the bf16 mode) on one causal prompt of N tokens with
 * mini's head layout (12 query heads over 2 kv heads, hd 128), next to the
 * GEMM of the same mode on mini's q|o shape (M 512) measured in the same run:
 * attention GFLOP/s and its ratio to the GEMM. With --compute both the two
 * modes alternate rep by rep. FLOP = 4*hd per (query, head, visible key), as
 * `basal bench` counts them.
 * Usage: build/bench/attn_bench [--n 2048,16384] [--threads 2] [--reps 3]
 *        [--compute f32|bf16|both] (default both) */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "base/util.h"
#include "cpu/attention.h"
#include "cpu/attention_bf16.h"
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
    int n, bq[2], bf16;
    char *scratch;
    size_t sb;
} job_t;

/* Tasks in decreasing cost, as the forward orders them: block b from the end. */
static void task(void *arg, int t, int thread) {
    job_t *j = arg;
    int bq = j->bq[j->bf16], nblocks = (j->n + bq - 1) / bq, b = nblocks - 1 - t / NKV, g = t % NKV;
    int p0 = b * bq, nq = j->n - p0 < bq ? j->n - p0 : bq;
    size_t qd = (size_t)NKV * REP * HD;
    bs_attn_block blk = {.keys = j->ks, .g = g, .rep = REP, .hd = HD, .q = j->q + p0 * qd, .q_stride = qd,
                         .out = j->out + p0 * qd, .out_stride = qd, .nq = nq, .pos0 = p0};
    if (j->bf16) bs_attn_bf16_run(&blk, j->scratch + (size_t)thread * j->sb);
    else bs_attn_run(&blk, j->scratch + (size_t)thread * j->sb);
}

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static void usage(FILE *f) {
    fprintf(f, "usage: attn_bench [--n N,...] [--threads T] [--reps R] [--compute f32|bf16|both]\n"
               "Causal attention of one mini-shape layer (12 query heads over 2 kv heads, head size 128) over n\n"
               "tokens: GFLOP/s and the ratio to the GEMM of the same mode, the modes alternated rep by rep.\n"
               "  --n 2048,16384   token counts (default 2048,16384; at most 8)\n"
               "  --threads 2      threads (default 2)\n"
               "  --reps 3         repetitions, median reported (default 3, at most 16)\n"
               "  --compute both   f32, bf16 or both (default both)\n"
               "  -h, --help       this help\n");
}

int main(int argc, char **argv) {
    int ns[8] = {2048, 16384}, nn = 2, threads = 2, reps = 3, m0 = 0, m1 = 1;
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
        else if (!strcmp(argv[i], "--compute") && i + 1 < argc) {
            const char *c = argv[++i];
            if (!strcmp(c, "f32")) m0 = m1 = 0;
            else if (!strcmp(c, "bf16")) m0 = m1 = 1;
            else if (!strcmp(c, "both")) m0 = 0, m1 = 1;
            else { fprintf(stderr, "attn_bench: --compute takes f32, bf16 or both\n"); return 2; }
        } else if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help")) {
            usage(stdout);
            return 0;
        } else {
            usage(stderr);
            return 2;
        }
    }
    if (reps < 1 || reps > 16) reps = reps < 1 ? 1 : 16;
    static const char *mode_name[2] = {"f32", "bf16"};
    bs_pool *pool = bs_pool_create(threads);
    printf("attention kernels: f32 %s, bf16 %s (GEMM %s); %d threads\n", bs_attn_kernel_name(HD),
           bs_attn_bf16_kernel_name(), bs_gemm_bf16_kernel_name(), bs_pool_size(pool));

    /* GEMM reference: mini's q|o projection, M 512, f32 weights */
    int gm = 512, gn = 1536, gk = 1536;
    float *gx = malloc((size_t)gm * gk * 4), *gw = malloc((size_t)gn * gk * 4), *gy = malloc((size_t)gm * gn * 4);
    for (size_t i = 0; i < (size_t)gm * gk; i++) gx[i] = frand();
    for (size_t i = 0; i < (size_t)gn * gk; i++) gw[i] = frand();
    bs_wmat w = {BS_F32, gw, gn, gk, NULL, BS_WPACK_NONE, NULL};
    double best_g[2][16], gemm_gf[2];
    for (int r = 0; r < reps; r++)
        for (int md = m0; md <= m1; md++) {
            double t0 = now();
            for (int it = 0; it < 4; it++)
                bs_gemm_mode(pool, md ? BS_COMPUTE_BF16 : BS_COMPUTE_F32, gx, gk, gm, &w, gy, gn);
            best_g[md][r] = 4 * 2.0 * gm * gn * gk / (now() - t0) / 1e9;
        }
    for (int md = m0; md <= m1; md++) {
        qsort(best_g[md], (size_t)reps, sizeof(double), cmp_double);
        gemm_gf[md] = best_g[md][reps / 2];
        printf("bs_gemm %dx%dx%d %s: %.1f GFLOP/s (median of %d)\n", gm, gn, gk, mode_name[md], gemm_gf[md], reps);
    }

    for (int c = 0; c < nn; c++) {
        int n = ns[c];
        size_t kvd = (size_t)NKV * HD, qd = kvd * REP;
        float *k = malloc(n * kvd * 4), *v = malloc(n * kvd * 4), *q = malloc(n * qd * 4), *o = malloc(n * qd * 4);
        for (size_t i = 0; i < n * kvd; i++) { k[i] = frand(); v[i] = frand(); }
        for (size_t i = 0; i < n * qd; i++) q[i] = frand();
        bs_attn_keys ks = {.n_seg = 1, .k = {k}, .v = {v}, .len = {n}, .stride = kvd};
        if (m1) { /* the bf16 mode's inputs (the f32 mode reads them as they are) */
            bs_attn_round_bf16(k, n * kvd);
            bs_attn_round_bf16(v, n * kvd);
        }
        size_t sb = bs_attn_scratch_bytes(HD, REP), sb16 = bs_attn_bf16_scratch_bytes(HD, REP);
        if (sb16 > sb) sb = sb16;
        job_t j = {&ks, q, o, n, {bs_attn_block_queries(REP), bs_attn_bf16_block_queries(REP)}, 0,
                   aligned_alloc(64, sb * threads), sb};
        double flop = 4.0 * HD * NKV * REP * ((double)n * (n + 1) / 2), gf[2][16];
        for (int r = 0; r < reps; r++)
            for (int md = m0; md <= m1; md++) {
                j.bf16 = md;
                int ntasks = (n + j.bq[md] - 1) / j.bq[md] * NKV;
                double t0 = now();
                bs_pool_run(pool, ntasks, task, &j);
                gf[md][r] = flop / (now() - t0) / 1e9;
            }
        for (int md = m0; md <= m1; md++) {
            qsort(gf[md], (size_t)reps, sizeof(double), cmp_double);
            double med = gf[md][reps / 2];
            printf("attention %-4s n %5d: %.1f GFLOP/s (median of %d) = %.2f x bs_gemm %s, %.2f s per layer\n",
                   mode_name[md], n, med, reps, med / gemm_gf[md], mode_name[md], flop / med / 1e9);
        }
        if (m0 != m1)
            printf("attention n %5d: bf16 / f32 = %.2f (of the medians)\n", n, gf[1][reps / 2] / gf[0][reps / 2]);
        free(k); free(v); free(q); free(o); free(j.scratch);
    }
    free(gx); free(gw); free(gy);
    bs_pool_destroy(pool);
    return 0;
}
