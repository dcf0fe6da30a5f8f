/* GEMM throughput of bs_gemm against OpenBLAS cblas_sgemm on the Basal
 * prefill shapes, and a probe of whether OpenBLAS is batch-invariant.
 * Build and usage: bench/README.md. */
#include <cblas.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "base/util.h"
#include "cpu/gemm.h"
#include "cpu/gemm_impl.h" /* bs_gemm_amx_available, bs_amx_configure (--phases) */
#if defined(__x86_64__)
#include <immintrin.h>
#endif

typedef struct {
    const char *model, *name;
    int n, k;
} shape;

/* What the forward calls (q, k, v separately) plus the fused qkv of spec 05 §15. */
static const shape all_shapes[] = {
    {"mini", "qkv", 2048, 1536}, {"mini", "q|o", 1536, 1536}, {"mini", "k|v", 256, 1536},
    {"mini", "gate|up", 8960, 1536}, {"mini", "down", 1536, 8960},
    {"4.5B", "qkv", 2560, 2048}, {"4.5B", "q|o", 2048, 2048}, {"4.5B", "k|v", 256, 2048},
    {"4.5B", "gate|up", 11008, 2048}, {"4.5B", "down", 2048, 11008},
};
enum { NSHAPES = sizeof all_shapes / sizeof *all_shapes };

static uint64_t rng = 0x2545F4914F6CDD1Dull;
static float frand(void) {
    rng ^= rng << 13; rng ^= rng >> 7; rng ^= rng << 17;
    return (float)((double)(rng >> 11) / 9007199254740992.0 * 2.0 - 1.0);
}

/* --cputime: process CPU time instead of wall time, scaled by the thread
 * count; with --best (the fastest sample instead of the median), for tuning
 * on a machine shared with other jobs, not for reports. */
static int use_cputime, use_best, cur_threads = 1;
static double now(void) {
    struct timespec t;
    clock_gettime(use_cputime ? CLOCK_PROCESS_CPUTIME_ID : CLOCK_MONOTONIC, &t);
    if (use_cputime) return ((double)t.tv_sec + 1e-9 * (double)t.tv_nsec) / cur_threads;
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static int parse_list(const char *s, int *out, int max) {
    int n = 0;
    while (*s && n < max) {
        out[n++] = atoi(s);
        const char *c = strchr(s, ',');
        if (!c) break;
        s = c + 1;
    }
    return n;
}

typedef struct {
    int m, n, k;
    const float *x;
    const bs_wmat *w;     /* ours */
    const float *wf;      /* OpenBLAS */
    float *y;
    bs_pool *pool;
} call;

/* --pad: row strides of x and y 16 floats wider than K and N (shows the cost
 * of strides that are multiples of 4 KiB) */
static int pad;
/* --compute bf16: our columns run the bf16 compute mode (its kernel: the
 * fastest of the CPU, or the one BASAL_BF16 names) */
static bs_compute compute = BS_COMPUTE_F32;
static int prepack = 1; /* --no-prepack: kernels that can read prepacked weights pack them per call */
static void run_ours(const call *c) { bs_gemm_mode(c->pool, compute, c->x, c->k + pad, c->m, c->w, c->y, c->n + pad); }
/* With --compute bf16, the f32 compute mode on the same bf16-stored weights,
 * measured in the same run (the "f32" column is still our kernel in the
 * chosen mode on f32-stored weights). */
static void run_ours_f32mode(const call *c) {
    bs_gemm_mode(c->pool, BS_COMPUTE_F32, c->x, c->k + pad, c->m, c->w, c->y, c->n + pad);
}
static void run_blas(const call *c) {
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, c->m, c->n, c->k, 1.0f, c->x, c->k + pad,
                c->wf, c->k, 0.0f, c->y, c->n + pad);
}

/* The variants of one configuration are measured in turn, sample by sample,
 * so that a slow phase of the (shared, virtual) machine hits all of them
 * alike. One sample = enough back-to-back calls for >= min_s, so tiny
 * products are not dominated by the clock; result: median GFLOP/s. */
typedef void (*run_fn)(const call *);
static void measure(int nv, run_fn const *fn, const call *const *c, int reps, double min_s, double *out) {
    enum { MAXV = 4, MAXR = 64 };
    int inner[MAXV];
    double gf[MAXV][MAXR];
    if (reps > MAXR) reps = MAXR;
    for (int v = 0; v < nv; v++) {
        fn[v](c[v]); /* warm-up: page faults, pool wake-up, caches */
        double t0 = now();
        fn[v](c[v]);
        double one = now() - t0;
        inner[v] = one > 0 && one < min_s ? (int)(min_s / one) + 1 : 1;
    }
    for (int r = 0; r < reps; r++)
        for (int v = 0; v < nv; v++) {
            double t0 = now();
            for (int i = 0; i < inner[v]; i++) fn[v](c[v]);
            double dt = (now() - t0) / inner[v];
            gf[v][r] = 2.0 * c[v]->m * (double)c[v]->n * c[v]->k / dt * 1e-9;
        }
    for (int v = 0; v < nv; v++) {
        qsort(gf[v], (size_t)reps, sizeof(double), cmp_double);
        out[v] = use_best ? gf[v][reps - 1] : gf[v][reps / 2];
    }
}

/* --int8: the CPU modes on the same bf16 weights, sample by sample: bf16
 * (prepacked for its kernel), int8w (int8 weights in the bf16 chain) and
 * int8 (W8A8, bs_gemm_pack_w8a8 of the same per-row int8 weights). */
static void run_mode(const call *c) { bs_gemm_mode(c->pool, BS_COMPUTE_BF16, c->x, c->k, c->m, c->w, c->y, c->n); }

static int compare_int8(const int *sel, int nsel, const int *ms, int nm, const int *threads, int nthr, int reps) {
    printf("# --int8: bf16 mode (%s), int8w (int8 weights, bf16 chain) and int8 (W8A8, %s) on the same weights,\n"
           "# measured in turn; GFLOP/s (int8: GOP/s) = 2*M*N*K / time, median of %d samples\n",
           bs_gemm_bf16_kernel_name(), bs_gemm_i8_kernel_name(), reps);
    printf("%-5s %-8s %6s %6s %5s %2s | %8s %8s %8s | %9s %9s\n", "model", "proj", "N", "K", "M", "t", "bf16",
           "int8w", "int8", "int8w/bf16", "int8/bf16");
    for (int si = 0; si < nsel; si++) {
        const shape *s = &all_shapes[sel[si]];
        int mx = 0;
        for (int i = 0; i < nm; i++)
            if (ms[i] > mx) mx = ms[i];
        size_t nk = (size_t)s->n * s->k;
        float *x = malloc((size_t)mx * s->k * sizeof(float)), *y = malloc((size_t)mx * s->n * sizeof(float));
        float *sc = malloc((size_t)s->n * sizeof(float));
        uint16_t *wb = malloc(nk * sizeof(uint16_t));
        int8_t *q = malloc(nk);
        if (!x || !y || !sc || !wb || !q) { fprintf(stderr, "out of memory\n"); return 1; }
        for (size_t i = 0; i < (size_t)mx * s->k; i++) x[i] = frand();
        for (size_t i = 0; i < nk; i++) wb[i] = bs_f32_to_bf16(frand() * 0.05f);
        bs_wmat wbf = {BS_BF16, wb, s->n, s->k, NULL, BS_WPACK_NONE, NULL}, w8w = wbf, w8 = wbf;
        for (int r = 0; r < s->n; r++) bs_quantize_row_i8(wb + (size_t)r * s->k, BS_BF16, s->k, q + (size_t)r * s->k, &sc[r]);
        /* int8w laid out for its kernel as a model load does (bf16-avx2; a no-op elsewhere) */
        if (bs_gemm_prepack(NULL, &wbf, BS_COMPUTE_BF16, NULL) < 0 || bs_gemm_quantize(NULL, &w8w, NULL) < 0 ||
            (prepack && bs_gemm_prepack(NULL, &w8w, BS_COMPUTE_BF16, NULL) < 0) ||
            bs_gemm_pack_w8a8(NULL, &w8, q, sc, NULL) < 0) {
            fprintf(stderr, "out of memory\n");
            return 1;
        }
        for (int ti = 0; ti < nthr; ti++) {
            bs_pool *pool = bs_pool_create(threads[ti]);
            cur_threads = threads[ti];
            for (int mi = 0; mi < nm; mi++) {
                call c0 = {ms[mi], s->n, s->k, x, &wbf, NULL, y, pool}, c1 = c0, c2 = c0;
                c1.w = &w8w;
                c2.w = &w8;
                run_fn fns[3] = {run_mode, run_mode, run_mode};
                const call *cs[3] = {&c0, &c1, &c2};
                double res[3];
                measure(3, fns, cs, reps, 0.05, res);
                printf("%-5s %-8s %6d %6d %5d %2d | %8.1f %8.1f %8.1f | %9.3f %9.3f\n", s->model, s->name, s->n, s->k,
                       ms[mi], threads[ti], res[0], res[1], res[2], res[1] / res[0], res[2] / res[0]);
                fflush(stdout);
            }
            bs_pool_destroy(pool);
        }
        bs_gemm_unpack(&wbf);
        bs_gemm_unpack(&w8w);
        bs_gemm_unpack(&w8);
        free(x); free(y); free(sc); free(wb); free(q);
    }
    return 0;
}

static void usage(FILE *f) {
    fprintf(f,
            "usage: gemm_bench [--shapes i,j,..] [--m 1,300,2048] [--threads 1,2] [--reps 5]\n"
            "                  [--no-blas] [--no-f32] [--cputime] [--best] [--pad] [--list] [--compute f32|bf16] [--no-prepack]\n"
            "       gemm_bench --probe [--ours] [--shapes ..] [--threads 1,2] [--mmax 512] [--large 1000,2048,3000]\n"
            "       gemm_bench --phases SECONDS [--phases-blas] [--shapes ..] [--m ..] [--threads ..]\n"
            "       gemm_bench --int8 [--shapes ..] [--m ..] [--threads ..] [--reps 5] [--cputime] [--best]\n"
            "\n"
            "Throughput (GFLOP/s, median of the samples) of our GEMM against OpenBLAS cblas_sgemm on the Basal\n"
            "projection shapes; variants are measured in turn, sample by sample.\n"
            "  --shapes i,j,..   shapes by index (--list prints them; default all ten)\n"
            "  --m 1,300,2048    rows of x (default 1,300,2048)\n"
            "  --threads 1,2     thread counts (default 1,2)\n"
            "  --reps 5          samples per variant (default 5, at most 64)\n"
            "  --compute f32     our compute mode, f32 or bf16 (default f32; bf16 adds the f32 mode on the\n"
            "                    same bf16 weights as a last column)\n"
            "  --no-blas         leave OpenBLAS out (default: measured)\n"
            "  --no-f32          leave out our kernel on f32-stored weights (default: measured)\n"
            "  --no-prepack      pack the weights per call (default: packed once, as a model load does)\n"
            "  --pad             row strides 16 floats wider than K and N (default: off)\n"
            "  --cputime         process CPU time / threads instead of wall time (default: off; tuning only)\n"
            "  --best            fastest sample instead of the median (default: off; tuning only)\n"
            "  --probe           is OpenBLAS (with --ours: our GEMM) batch-invariant? M = 1..--mmax (default\n"
            "                    512) and --large (default 1000,2048,3000) against one product of all rows\n"
            "  --phases SECONDS  on a CPU with AMX: the bf16 mode (its kernel) and the f32 mode in turn for\n"
            "                    SECONDS per configuration (default: off), every sample between two probes of\n"
            "                    the AMX tile rate on every thread; medians per phase of the machine\n"
            "                    (bench/README.md, \"AMX phases\")\n"
            "  --phases-blas     with --phases: our f32 mode against OpenBLAS sgemm instead (default: off)\n"
            "  --int8            the bf16 mode, int8w and int8 (W8A8) on the same weights in turn (default: off;\n"
            "                    the int8 kernel: BASAL_INT8, the bf16 one: BASAL_BF16; int8w's weights laid out for\n"
            "                    bf16-avx2 as a model load does, per call with --no-prepack; bf16's always prepacked)\n"
            "  --list            print the shapes and exit\n"
            "  -h, --help        this help\n");
}

/* ---- --phases ------------------------------------------------------------------
 * On the shared Sapphire Rapids machines the AMX tile rate of one thread
 * alternates, in phases of milliseconds to seconds, between about 2.3-2.6
 * and 0.5-0.7 TFLOP/s (a TDPBF16PS loop on tiles in L1), while the f32 FMA
 * rate stays put: a ratio of the two modes measured over seconds depends on
 * the share of each phase. Each sample is bracketed by a probe of that rate
 * on all threads at once, and medians are given per phase. */
static double mono(void) { return bs_now_ms() * 1e-3; } /* wall time even with --cputime */

#if defined(__x86_64__)
static uint32_t probe_data[16 * 512] __attribute__((aligned(64))); /* 32 KiB of bf16 pairs: in L1 */

/* GFLOP/s of 8-step 32 x 32 tile products (the AMX GEMM's inner loop) on
 * data in L1, for about a millisecond */
static __attribute__((target("amx-tile,amx-bf16"))) double amx_rate(void) {
    enum { ITERS = 2000, STEPS = 8 };
    bs_amx_configure();
    _tile_zero(0); _tile_zero(1); _tile_zero(2); _tile_zero(3);
    double t0 = mono();
    for (int i = 0; i < ITERS; i++) {
        const uint32_t *a = probe_data, *b = probe_data + STEPS * 512;
        for (int s = 0; s < STEPS; s++, a += 512, b += 512) {
            _tile_loadd(6, b, 128);
            _tile_loadd(4, a, 64);
            _tile_loadd(7, b + 16, 128);
            _tile_dpbf16ps(0, 4, 6);
            _tile_loadd(5, a + 256, 64);
            _tile_dpbf16ps(1, 4, 7);
            _tile_dpbf16ps(2, 5, 6);
            _tile_dpbf16ps(3, 5, 7);
        }
    }
    double dt = mono() - t0;
    return (double)ITERS * STEPS * 4 * 2 * 16 * 16 * 32 / dt * 1e-9;
}
#else
static double amx_rate(void) { return 0; }
#endif

enum { PROBE_MAX_THREADS = 64 };
typedef struct {
    atomic_int arrived;
    int n;
    double rate[PROBE_MAX_THREADS];
} probe_job;

static void probe_task(void *arg, int task, int thread) {
    (void)task;
    probe_job *p = arg;
    atomic_fetch_add(&p->arrived, 1);
    /* every thread probes at the same time (a thread waiting here cannot
     * take a second task, so the n tasks land on n threads) */
    double t0 = mono();
    while (atomic_load(&p->arrived) < p->n && mono() - t0 < 0.05) {
    }
    if (thread < PROBE_MAX_THREADS) p->rate[thread] = amx_rate();
}

/* The slowest thread's AMX rate now. */
static double probe_rate(bs_pool *pool) {
    probe_job p;
    memset(&p, 0, sizeof p);
    atomic_init(&p.arrived, 0);
    p.n = bs_pool_size(pool);
    bs_pool_run(pool, p.n, probe_task, &p);
    double lo = 0;
    for (int i = 0; i < p.n && i < PROBE_MAX_THREADS; i++)
        if (p.rate[i] > 0 && (lo == 0 || p.rate[i] < lo)) lo = p.rate[i];
    return lo;
}

typedef struct {
    double gflops, lo, hi; /* lo, hi: the lower and higher of the probes around it */
} phase_sample;

/* Median GFLOP/s of the samples of mode want (-1: every sample's lower
 * probe instead) with probes in [lo_min, hi_max]; their number in *count. */
static double phase_median(const phase_sample *s, const int *mode, int n, int want, double lo_min, double hi_max,
                           int *count) {
    double *v = malloc((size_t)(n ? n : 1) * sizeof *v);
    int k = 0;
    if (!v) return 0;
    for (int i = 0; i < n; i++)
        if ((want < 0 || mode[i] == want) && s[i].lo >= lo_min && s[i].hi <= hi_max)
            v[k++] = want < 0 ? s[i].lo : s[i].gflops;
    qsort(v, (size_t)k, sizeof *v, cmp_double);
    double med = k ? v[k / 2] : 0;
    free(v);
    if (count) *count = k;
    return med;
}

/* The pair measured in turn: the bf16 mode against the f32 mode, or (vs_blas)
 * the f32 mode against OpenBLAS cblas_sgemm on the same weights widened to
 * f32 (the slow phase slows both, by different amounts). */
static void phase_run(int vs_blas, int v, bs_pool *pool, const float *x, int m, const bs_wmat *w, const float *wf,
                      float *y) {
    if (vs_blas && v == 1)
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, m, w->n, w->k, 1.0f, x, w->k, wf, w->k, 0.0f, y, w->n);
    else
        bs_gemm_mode(pool, !vs_blas && v == 0 ? BS_COMPUTE_BF16 : BS_COMPUTE_F32, x, w->k, m, w, y, w->n);
}

static int phases(const int *sel, int nsel, const int *ms, int nm, const int *threads, int nthr, double secs,
                  int vs_blas) {
    if (!bs_gemm_amx_available()) {
        fprintf(stderr, "gemm_bench: --phases probes the AMX tile rate; this CPU has no AMX (or the kernel refused "
                        "the tile state). Run the plain benchmark instead.\n");
        return 2;
    }
    for (size_t i = 0; i < sizeof probe_data / sizeof *probe_data; i++) probe_data[i] = 0x3f803f80u; /* 1.0, 1.0 */
    if (vs_blas)
        printf("# --phases %.0f s per configuration: our f32 mode (%s) on bf16 weights and OpenBLAS sgemm on the same\n"
               "# weights widened to f32 in turn,\n", secs, bs_gemm_kernel_name(bs_gemm_kernel()));
    else
        printf("# --phases %.0f s per configuration: bf16 mode (%s) and f32 mode on the same bf16 weights in turn,\n",
               secs, bs_gemm_bf16_kernel_name());
    printf("# each sample (>= 10 ms of calls) between two probes of the AMX tile rate on every thread (GFLOP/s\n"
           "# of the slowest thread); fast: both probes >= 0.7 x the fastest probe seen, slow: both <= 0.4 x\n");
    printf("%-5s %-8s %6s %6s %5s %2s | %5s %5s %5s | %6s %6s | %7s %7s | %7s %7s | %6s %6s %6s\n", "model", "proj",
           "N", "K", "M", "t", "fast", "slow", "mixed", "prb.f", "prb.s", vs_blas ? "f32.f" : "bf16.f",
           vs_blas ? "f32.s" : "bf16.s", vs_blas ? "blas.f" : "f32.f", vs_blas ? "blas.s" : "f32.s", "rat.f", "rat.s",
           "rat");
    for (int si = 0; si < nsel; si++) {
        const shape *s = &all_shapes[sel[si]];
        int mx = 0;
        for (int i = 0; i < nm; i++)
            if (ms[i] > mx) mx = ms[i];
        float *x = malloc((size_t)mx * s->k * sizeof(float));
        uint16_t *wb = malloc((size_t)s->n * s->k * sizeof(uint16_t));
        float *y = malloc((size_t)mx * s->n * sizeof(float));
        enum { MAXS = 20000 };
        phase_sample *smp = malloc(MAXS * sizeof *smp);
        int *mode = malloc(MAXS * sizeof *mode);
        float *wf = vs_blas ? malloc((size_t)s->n * s->k * sizeof(float)) : NULL;
        if (!x || !wb || !y || !smp || !mode || (vs_blas && !wf)) { fprintf(stderr, "out of memory\n"); return 1; }
        for (size_t i = 0; i < (size_t)mx * s->k; i++) x[i] = frand();
        for (size_t i = 0; i < (size_t)s->n * s->k; i++) wb[i] = bs_f32_to_bf16(frand());
        for (size_t i = 0; wf && i < (size_t)s->n * s->k; i++) wf[i] = bs_bf16_to_f32(wb[i]);
        bs_wmat w = {BS_BF16, wb, s->n, s->k, NULL, BS_WPACK_NONE, NULL};
        if (bs_gemm_prepack(NULL, &w, BS_COMPUTE_BF16, NULL) < 0) { fprintf(stderr, "out of memory\n"); return 1; }
        for (int ti = 0; ti < nthr; ti++) {
            bs_pool *pool = bs_pool_create(threads[ti]);
            if (!pool) { fprintf(stderr, "out of memory\n"); return 1; }
            openblas_set_num_threads(threads[ti]);
            for (int mi = 0; mi < nm; mi++) {
                int m = ms[mi], n = 0, inner[2];
                for (int v = 0; v < 2; v++) {
                    phase_run(vs_blas, v, pool, x, m, &w, wf, y); /* warm-up */
                    double t0 = mono();
                    phase_run(vs_blas, v, pool, x, m, &w, wf, y);
                    double one = mono() - t0;
                    inner[v] = one > 0 && one < 0.01 ? (int)(0.01 / one) + 1 : 1;
                }
                double end = mono() + secs, top = 0;
                while (mono() < end && n + 2 <= MAXS)
                    for (int v = 0; v < 2; v++) {
                        double p0 = probe_rate(pool), t0 = mono();
                        for (int i = 0; i < inner[v]; i++) phase_run(vs_blas, v, pool, x, m, &w, wf, y);
                        double dt = (mono() - t0) / inner[v], p1 = probe_rate(pool);
                        smp[n] = (phase_sample){2.0 * m * (double)s->n * s->k / dt * 1e-9, p0 < p1 ? p0 : p1,
                                                p0 < p1 ? p1 : p0};
                        mode[n++] = v;
                        if (smp[n - 1].hi > top) top = smp[n - 1].hi;
                    }
                int nf, ns, nall, dummy;
                double bf = phase_median(smp, mode, n, 0, 0.7 * top, 1e30, &nf);
                double bs = phase_median(smp, mode, n, 0, 0, 0.4 * top, &ns);
                double ff = phase_median(smp, mode, n, 1, 0.7 * top, 1e30, &dummy);
                double fs = phase_median(smp, mode, n, 1, 0, 0.4 * top, &dummy);
                double ba = phase_median(smp, mode, n, 0, 0, 1e30, &nall), fa = phase_median(smp, mode, n, 1, 0, 1e30, &dummy);
                double pf = phase_median(smp, mode, n, -1, 0.7 * top, 1e30, &dummy);
                double ps = phase_median(smp, mode, n, -1, 0, 0.4 * top, &dummy);
                printf("%-5s %-8s %6d %6d %5d %2d | %5d %5d %5d | %6.0f %6.0f | %7.1f %7.1f | %7.1f %7.1f | %6.2f %6.2f "
                       "%6.2f\n",
                       s->model, s->name, s->n, s->k, m, bs_pool_size(pool), nf, ns, nall - nf - ns, pf, ps, bf, bs,
                       ff, fs, ff > 0 ? bf / ff : 0, fs > 0 ? bs / fs : 0, fa > 0 ? ba / fa : 0);
                fflush(stdout);
            }
            bs_pool_destroy(pool);
        }
        bs_gemm_unpack(&w);
        free(x); free(wb); free(wf); free(y); free(smp); free(mode);
    }
    return 0;
}

/* Probe: is OpenBLAS (or, with --ours, bs_gemm) batch-invariant? One product
 * with mbig rows is the reference; every other (M, offset) result must equal
 * its rows bitwise. */
static int probe(const int *sel, int nsel, const int *threads, int nthr, int mmax, const int *large,
                 int nlarge, int ours) {
    int worst_fail = 0;
    for (int si = 0; si < nsel; si++) {
        const shape *s = &all_shapes[sel[si]];
        int mbig = mmax + 3;
        for (int i = 0; i < nlarge; i++)
            if (large[i] + 3 > mbig) mbig = large[i] + 3;
        float *x = malloc((size_t)mbig * s->k * sizeof(float));
        float *wf = malloc((size_t)s->n * s->k * sizeof(float));
        float *ref = malloc((size_t)mbig * s->n * sizeof(float));
        float *y = malloc((size_t)mbig * s->n * sizeof(float));
        if (!x || !wf || !ref || !y) { fprintf(stderr, "out of memory\n"); exit(1); }
        for (size_t i = 0; i < (size_t)mbig * s->k; i++) x[i] = frand();
        for (size_t i = 0; i < (size_t)s->n * s->k; i++) wf[i] = bs_bf16_to_f32(bs_f32_to_bf16(frand()));
        bs_wmat wm = {BS_F32, wf, s->n, s->k, NULL, BS_WPACK_NONE, NULL};
        for (int ti = 0; ti < nthr; ti++) {
            int t = threads[ti];
            openblas_set_num_threads(t);
            bs_pool *pool = bs_pool_create(t);
            call c = {mbig, s->n, s->k, x, &wm, wf, ref, pool};
            (ours ? run_ours : run_blas)(&c);
            int tried = 0, differ = 0, first_bad = 0, nsame = 0, same[16];
            double maxdiff = 0;
            for (int idx = 0;; idx++) {
                int m = idx < mmax ? idx + 1 : (idx - mmax < nlarge ? large[idx - mmax] : -1);
                if (m < 0) break;
                int off = (m * 7) % 3; /* rows 0, 1, 2: the offset moves the tile phase */
                call cm = {m, s->n, s->k, x + (size_t)off * s->k, &wm, wf, y, pool};
                (ours ? run_ours : run_blas)(&cm);
                tried++;
                int eq = !memcmp(y, ref + (size_t)off * s->n, (size_t)m * s->n * sizeof(float));
                if (eq && nsame < 16) same[nsame++] = m;
                if (!eq) {
                    differ++;
                    if (!first_bad) first_bad = m;
                    for (size_t i = 0; i < (size_t)m * s->n; i++) {
                        double d = y[i] - ref[(size_t)off * s->n + i];
                        if (d < 0) d = -d;
                        if (d > maxdiff) maxdiff = d;
                    }
                }
            }
            printf("probe %-7s %-4s %-7s N=%-5d K=%-5d threads=%d: %d of %d M values differ from M=%d rows"
                   " (first M=%d, max |diff| %.3g)\n",
                   ours ? "basal" : "openblas", s->model, s->name, s->n, s->k, t, differ, tried, mbig,
                   first_bad, maxdiff);
            if (differ && nsame) {
                printf("      M values equal to the reference:");
                for (int i = 0; i < nsame; i++) printf(" %d", same[i]);
                printf(nsame == 16 ? " ...\n" : "\n");
            }
            fflush(stdout);
            if (differ) worst_fail = 1;
            bs_pool_destroy(pool);
        }
        free(x); free(wf); free(ref); free(y);
    }
    return worst_fail;
}

int main(int argc, char **argv) {
    /* OpenBLAS workers spin after each call (by default for ~2^28 cycles) and
     * would steal the cores from our pool in the interleaved samples; make
     * them sleep at once, as our pool does. Read when libopenblas loads, hence
     * the re-exec. */
    if (!getenv("OPENBLAS_THREAD_TIMEOUT")) {
        setenv("OPENBLAS_THREAD_TIMEOUT", "4", 1);
        execv("/proc/self/exe", argv);
    }
    int sel[NSHAPES], nsel = NSHAPES;
    for (int i = 0; i < NSHAPES; i++) sel[i] = i;
    int ms[16] = {1, 300, 2048}, nm = 3, threads[8] = {1, 2}, nthr = 2, reps = 5;
    int blas = 1, f32 = 1, do_probe = 0, probe_ours = 0, mmax = 512, large[16] = {1000, 2048, 3000},
        nlarge = 3;
    double phase_secs = 0;
    int phases_blas = 0, do_int8 = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "--shapes") && v) { nsel = parse_list(v, sel, NSHAPES); i++; }
        else if (!strcmp(a, "--m") && v) { nm = parse_list(v, ms, 16); i++; }
        else if (!strcmp(a, "--threads") && v) { nthr = parse_list(v, threads, 8); i++; }
        else if (!strcmp(a, "--reps") && v) { reps = atoi(v); i++; }
        else if (!strcmp(a, "--mmax") && v) { mmax = atoi(v); i++; }
        else if (!strcmp(a, "--large") && v) { nlarge = parse_list(v, large, 16); i++; }
        else if (!strcmp(a, "--no-blas")) blas = 0;
        else if (!strcmp(a, "--no-f32")) f32 = 0;
        else if (!strcmp(a, "--probe")) do_probe = 1;
        else if (!strcmp(a, "--cputime")) use_cputime = 1;
        else if (!strcmp(a, "--best")) use_best = 1;
        else if (!strcmp(a, "--pad")) pad = 16;
        else if (!strcmp(a, "--no-prepack")) prepack = 0;
        else if (!strcmp(a, "--compute") && v) { compute = !strcmp(v, "bf16") ? BS_COMPUTE_BF16 : BS_COMPUTE_F32; i++; }
        else if (!strcmp(a, "--ours")) probe_ours = 1;
        else if (!strcmp(a, "--phases") && v) {
            phase_secs = atof(v);
            i++;
            if (!(phase_secs > 0)) { fprintf(stderr, "gemm_bench: --phases takes seconds > 0, e.g. --phases 20\n"); return 2; }
        }
        else if (!strcmp(a, "--phases-blas")) phases_blas = 1;
        else if (!strcmp(a, "--int8")) do_int8 = 1;
        else if (!strcmp(a, "-h") || !strcmp(a, "--help")) { usage(stdout); return 0; }
        else if (!strcmp(a, "--list")) {
            for (int s = 0; s < NSHAPES; s++)
                printf("%d: %s %s N=%d K=%d\n", s, all_shapes[s].model, all_shapes[s].name, all_shapes[s].n,
                       all_shapes[s].k);
            return 0;
        } else { usage(stderr); return 2; }
    }
    for (int i = 0; i < nsel; i++)
        if (sel[i] < 0 || sel[i] >= NSHAPES) { usage(stderr); return 2; }
    if (phases_blas && !(phase_secs > 0)) { fprintf(stderr, "gemm_bench: --phases-blas goes with --phases SECONDS\n"); return 2; }
    if (reps < 1) reps = 1;
    printf("# kernel %s, compute %s%s; %s; core %s; OPENBLAS_CORETYPE=%s OPENBLAS_THREAD_TIMEOUT=%s\n",
           bs_gemm_kernel_name(bs_gemm_kernel()), compute == BS_COMPUTE_BF16 ? "bf16 with " : "f32",
           compute == BS_COMPUTE_BF16 ? bs_gemm_bf16_kernel_name() : "", openblas_get_config(), openblas_get_corename(),
           getenv("OPENBLAS_CORETYPE") ? getenv("OPENBLAS_CORETYPE") : "(unset)",
           getenv("OPENBLAS_THREAD_TIMEOUT"));
    if (do_probe) return probe(sel, nsel, threads, nthr, mmax, large, nlarge, probe_ours);
    if (phase_secs > 0) return phases(sel, nsel, ms, nm, threads, nthr, phase_secs, phases_blas);
    if (do_int8) return compare_int8(sel, nsel, ms, nm, threads, nthr, reps);

    printf("# GFLOP/s = 2*M*N*K / time, median of %d samples after a warm-up; weights warm in cache/RAM\n",
           reps);
    int f32mode = compute == BS_COMPUTE_BF16;
    printf("%-5s %-8s %6s %6s %5s %2s | %8s %8s %8s | %6s %6s%s\n", "model", "proj", "N", "K", "M", "t",
           "bf16", "f32", "openblas", "bf16/ob", "f32/ob", f32mode ? " |  f32mode bf16/f32mode" : "");
    for (int si = 0; si < nsel; si++) {
        const shape *s = &all_shapes[sel[si]];
        int mx = 0;
        for (int i = 0; i < nm; i++)
            if (ms[i] > mx) mx = ms[i];
        float *x = malloc((size_t)mx * (s->k + pad) * sizeof(float));
        float *wf = malloc((size_t)s->n * s->k * sizeof(float));
        uint16_t *wb = malloc((size_t)s->n * s->k * sizeof(uint16_t));
        float *y = malloc((size_t)mx * (s->n + pad) * sizeof(float));
        if (!x || !wf || !wb || !y) { fprintf(stderr, "out of memory\n"); return 1; }
        for (size_t i = 0; i < (size_t)mx * (s->k + pad); i++) x[i] = frand();
        for (size_t i = 0; i < (size_t)s->n * s->k; i++) {
            wb[i] = bs_f32_to_bf16(frand());
            wf[i] = bs_bf16_to_f32(wb[i]);
        }
        bs_wmat wmb = {BS_BF16, wb, s->n, s->k, NULL, BS_WPACK_NONE, NULL}, wmf = {BS_F32, wf, s->n, s->k, NULL, BS_WPACK_NONE, NULL};
        /* as a model load does for the bf16 mode (the AMX layout) */
        if (prepack && (bs_gemm_prepack(NULL, &wmb, compute, NULL) < 0 || bs_gemm_prepack(NULL, &wmf, compute, NULL) < 0)) {
            fprintf(stderr, "out of memory\n");
            return 1;
        }
        for (int ti = 0; ti < nthr; ti++) {
            int t = threads[ti];
            bs_pool *pool = bs_pool_create(t);
            openblas_set_num_threads(t);
            cur_threads = t;
            for (int mi = 0; mi < nm; mi++) {
                int m = ms[mi];
                call cb = {m, s->n, s->k, x, &wmb, wf, y, pool}, cf = cb;
                cf.w = &wmf;
                run_fn fns[4];
                const call *cs[4];
                double res[4] = {0, 0, 0, 0};
                int nv = 0;
                fns[nv] = run_ours; cs[nv++] = &cb;
                if (f32) { fns[nv] = run_ours; cs[nv++] = &cf; }
                if (blas) { fns[nv] = run_blas; cs[nv++] = &cb; }
                if (f32mode) { fns[nv] = run_ours_f32mode; cs[nv++] = &cb; }
                measure(nv, fns, cs, reps, 0.05, res);
                double gb = res[0], gf = f32 ? res[1] : 0, go = blas ? res[nv - 1 - f32mode] : 0;
                double gm = f32mode ? res[nv - 1] : 0;
                printf("%-5s %-8s %6d %6d %5d %2d | %8.1f %8.1f %8.1f | %6.3f %6.3f", s->model, s->name,
                       s->n, s->k, m, t, gb, gf, go, go > 0 ? gb / go : 0, go > 0 ? gf / go : 0);
                if (f32mode) printf(" | %8.1f %6.3f", gm, gm > 0 ? gb / gm : 0);
                printf("\n");
                fflush(stdout);
            }
            bs_pool_destroy(pool);
        }
        bs_gemm_unpack(&wmb);
        bs_gemm_unpack(&wmf);
        free(x); free(wf); free(wb); free(y);
    }
    return 0;
}
