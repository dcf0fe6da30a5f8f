/* The key-tiled attention (spec 05 §9 V4, §13.2 A3) against a float64
 * two-pass softmax, in the f32 mode and in the bf16 mode (attention_bf16.c),
 * and its invariance: a (query, head) output is bitwise the
 * same whatever block it is computed in (alone, or among other queries that
 * start before or after it) and however its key sequence is split into
 * segments (cached prefix, ancestor ranges, own block). Every kernel family
 * the CPU supports (portable, AVX2, AVX-512), each against the reference and
 * bitwise against the portable family on the same inputs; head sizes with
 * and without a 16-wide tail, GQA ratios 1, 2, 6 and 7, key counts below, at
 * and across the 64-ordinal tiles (128 in the bf16 mode); the output written
 * over the queries (how the forward runs it) gives the same bits. The bf16 mode: every bf16
 * kernel the CPU runs (portable emulation, AVX512-BF16, AMX) against the
 * reference on bf16-rounded inputs, invariant in the same ways, and the
 * AVX512-BF16 kernel bitwise equal to the emulation. */
#include <stdint.h>

#include "check.h"
#include "cpu/attention.h"
#include "cpu/attention_bf16.h"
#include "cpu/gemm.h"

static uint64_t rng = 0x2545F4914F6CDD1Dull;
static float frand(void) {
    rng ^= rng << 13; rng ^= rng >> 7; rng ^= rng << 17;
    return (float)((double)(rng >> 11) / 9007199254740992.0 * 2.0 - 1.0);
}
static int irand(int n) {
    rng ^= rng << 13; rng ^= rng >> 7; rng ^= rng << 17;
    return (int)((rng >> 33) % (uint64_t)n);
}

typedef struct {
    int hd, nkv, rep, n;    /* n = keys = queries (a causal prompt) */
    float *k, *v, *q;       /* [n][nkv*hd], [n][nkv*hd], [n][nkv*rep*hd] */
} case_t;

/* The mode under test: 0 f32, 1 bf16 (k and v rounded as the forward
 * rounds them; the reference rounds q too). */
static int bf16_mode;

static float to_bf16(float f) { return bs_bf16_to_f32(bs_f32_to_bf16(f)); }

static void make_case(case_t *c, int hd, int nkv, int rep, int n, float qscale) {
    c->hd = hd; c->nkv = nkv; c->rep = rep; c->n = n;
    size_t kvd = (size_t)nkv * hd, qd = kvd * rep;
    c->k = malloc(n * kvd * 4); c->v = malloc(n * kvd * 4); c->q = malloc(n * qd * 4);
    for (size_t i = 0; i < n * kvd; i++) { c->k[i] = frand(); c->v[i] = frand(); }
    for (size_t i = 0; i < n * qd; i++) c->q[i] = frand() * qscale;
    if (bf16_mode) {
        bs_attn_round_bf16(c->k, n * kvd);
        bs_attn_round_bf16(c->v, n * kvd);
        for (size_t i = 0; i < n * kvd; i++) /* the vector rounding against the scalar one */
            if (c->k[i] != to_bf16(c->k[i]) || c->v[i] != to_bf16(c->v[i])) { CHECK(0); break; }
    }
}

static void free_case(case_t *c) { free(c->k); free(c->v); free(c->q); }

/* Queries p0..p0+nq-1 of the prompt, keys split at the given cut points. */
static void run(const case_t *c, int p0, int nq, const int *cuts, int ncuts, float *out) {
    size_t kvd = (size_t)c->nkv * c->hd, qd = kvd * c->rep;
    bs_attn_keys ks = {.stride = kvd};
    int at = 0;
    for (int s = 0; s <= ncuts; s++) {
        int end = s < ncuts ? cuts[s] : p0 + nq;
        ks.k[s] = c->k + at * kvd;
        ks.v[s] = c->v + at * kvd;
        ks.len[s] = end - at;
        at = end;
    }
    ks.n_seg = ncuts + 1;
    void *scratch = aligned_alloc(64, bf16_mode ? bs_attn_bf16_scratch_bytes(c->hd, c->rep)
                                                : bs_attn_scratch_bytes(c->hd, c->rep));
    int bq = bf16_mode ? bs_attn_bf16_block_queries(c->rep) : bs_attn_block_queries(c->rep);
    for (int g = 0; g < c->nkv; g++)
        for (int i = 0; i < nq; i += bq) {
            bs_attn_block b = {.keys = &ks, .g = g, .rep = c->rep, .hd = c->hd,
                               .q = c->q + (size_t)(p0 + i) * qd, .q_stride = qd,
                               .out = out + (size_t)i * qd, .out_stride = qd,
                               .nq = nq - i < bq ? nq - i : bq, .pos0 = p0 + i};
            if (bf16_mode) bs_attn_bf16_run(&b, scratch);
            else bs_attn_run(&b, scratch);
        }
    free(scratch);
}

static double worst_seen; /* against the reference, over a family's cases */

static void check_reference(const case_t *c, const float *out) {
    size_t kvd = (size_t)c->nkv * c->hd, qd = kvd * c->rep;
    double worst = 0;
    int bad = 0;
    double *p = malloc((size_t)c->n * sizeof *p);
    for (int t = 0; t < c->n; t++)
        for (int h = 0; h < c->nkv * c->rep; h++) {
            const float *q = c->q + t * qd + (size_t)h * c->hd;
            size_t ko = (size_t)(h / c->rep) * c->hd;
            double mx = -INFINITY, sum = 0;
            for (int j = 0; j <= t; j++) {
                double s = 0;
                for (int d = 0; d < c->hd; d++)
                    s += (double)(bf16_mode ? to_bf16(q[d]) : q[d]) * c->k[j * kvd + ko + d];
                p[j] = s / sqrt((double)c->hd);
                if (p[j] > mx) mx = p[j];
            }
            for (int j = 0; j <= t; j++) sum += (p[j] = exp(p[j] - mx));
            for (int d = 0; d < c->hd; d++) {
                double o = 0;
                for (int j = 0; j <= t; j++) o += p[j] * c->v[j * kvd + ko + d];
                o /= sum;
                double err = fabs(o - out[t * qd + (size_t)h * c->hd + d]);
                if (err > worst) worst = err;
                /* bf16: each weight rounded to 8 significant bits (|v| <= 1) */
                if (bf16_mode ? err > 4e-3 : err > 2e-6 + 2e-5 * fabs(o)) bad++;
            }
        }
    free(p);
    if (bad) fprintf(stderr, "hd %d rep %d n %d: %d outputs off, worst |d| %.3g\n", c->hd, c->rep, c->n, bad, worst);
    if (worst > worst_seen) worst_seen = worst;
    CHECK_INT(bad, 0);
}

static void expect_same(const char *what, const case_t *c, const float *a, const float *b, int nq) {
    size_t n = (size_t)nq * c->nkv * c->rep * c->hd, diff = 0;
    for (size_t i = 0; i < n; i++) diff += memcmp(&a[i], &b[i], 4) != 0;
    if (diff) fprintf(stderr, "hd %d rep %d n %d: %s: %zu of %zu outputs differ bitwise\n", c->hd, c->rep, c->n,
                      what, diff, n);
    CHECK_INT(diff, 0);
}

/* The whole-prompt outputs of the first family run (the portable one), per
 * case, for the comparison across families; compare = 0 for a family with
 * bits of its own (AMX), which reports its largest difference instead. */
enum { NCASES = 8 };
static float *first_family[NCASES];
static int case_no, compare = 1;
static double amx_vs_portable;

static void one_case(int hd, int nkv, int rep, int n, float qscale) {
    case_t c;
    rng = 0x2545F4914F6CDD1Dull + (uint64_t)case_no; /* the same inputs for every family */
    make_case(&c, hd, nkv, rep, n, qscale);
    size_t qd = (size_t)nkv * rep * hd;
    float *all = malloc(n * qd * 4), *got = malloc(n * qd * 4);
    run(&c, 0, n, NULL, 0, all); /* the whole prompt as one unit */
    check_reference(&c, all);
    if (!first_family[case_no]) {
        first_family[case_no] = malloc(n * qd * 4);
        memcpy(first_family[case_no], all, n * qd * 4);
    } else if (compare) {
        expect_same("this family vs the portable one", &c, all, first_family[case_no], n);
    } else {
        for (size_t i = 0; i < n * qd; i++) {
            double dlt = fabs((double)all[i] - first_family[case_no][i]);
            if (dlt > amx_vs_portable) amx_vs_portable = dlt;
        }
    }
    case_no++;

    /* every query alone, keys cut into up to 8 random segments */
    for (int t = 0; t < n; t++) {
        int cuts[8], nc = 0, at = 0;
        while (nc < 8 && at < t) {
            at += 1 + irand(t - at + 20);
            if (at <= t) cuts[nc++] = at;
        }
        run(&c, t, 1, cuts, nc, got + t * qd);
    }
    expect_same("alone with segmented keys vs one block", &c, got, all, n);

    /* blocks starting at arbitrary queries (a unit boundary anywhere) */
    for (int t = 0; t < n;) {
        int len = 1 + irand(70);
        if (len > n - t) len = n - t;
        int cut = t ? irand(t + 1) : 0;
        run(&c, t, len, cut ? &cut : NULL, cut ? 1 : 0, got + t * qd);
        t += len;
    }
    expect_same("random blocks vs one block", &c, got, all, n);

    /* in place, as the forward runs it: the output written over the queries
     * (each block reads its queries before writing; blocks of other queries
     * or other kv heads touch other memory) */
    float *saved_q = c.q;
    memcpy(got, c.q, n * qd * 4);
    c.q = got;
    run(&c, 0, n, NULL, 0, got);
    c.q = saved_q;
    expect_same("output written over the queries vs a separate output", &c, got, all, n);
    free(all); free(got);
    free_case(&c);
}

static void all_cases(void) {
    case_no = 0;
    one_case(128, 2, 6, 200, 1.0f); /* mini's shape: 12 heads over 2 kv heads */
    one_case(128, 1, 7, 130, 3.0f);
    one_case(16, 2, 2, 150, 1.0f);
    one_case(24, 1, 1, 70, 4.0f);   /* 16-wide chunk plus an 8-wide tail */
    one_case(8, 3, 2, 64, 1.0f);
    one_case(128, 2, 4, 1, 1.0f);
    one_case(128, 1, 2, 65, 8.0f);  /* peaked softmax: the running max changes often */
    one_case(128, 1, 2, 300, 2.0f); /* across two bf16 tiles of 128 */
}

static void free_firsts(void) {
    for (int i = 0; i < NCASES; i++) {
        free(first_family[i]);
        first_family[i] = NULL;
    }
}

int main(void) {
    bs_kernel native = bs_gemm_kernel();
    const bs_kernel fams[] = {BS_KERNEL_GENERIC, BS_KERNEL_AVX2, BS_KERNEL_AVX512};
    int ran = 0;
    for (int f = 0; f < 3; f++) {
        if (!bs_kernel_supported(fams[f])) {
            printf("family %s not supported by this CPU: skipped\n", bs_gemm_kernel_name(fams[f]));
            continue;
        }
        bs_gemm_force_kernel(fams[f]);
        printf("family %s: kernels %s (hd 128), %s (hd 24)\n", bs_gemm_kernel_name(fams[f]),
               bs_attn_kernel_name(128), bs_attn_kernel_name(24));
        all_cases();
        ran++;
    }
    printf("%d families compared bitwise\n", ran);
    CHECK(ran >= 1);
    bs_gemm_force_kernel(native);
    free_firsts();

    /* bf16 mode: the emulation first, then what this CPU runs */
    bf16_mode = 1;
    int bf16_native = bs_gemm_bf16_kernel(), bran = 0;
    for (int k = 0; k <= 2; k++) {
        bs_gemm_force_bf16_hw(k);
        if (bs_gemm_bf16_kernel() != k) {
            printf("bf16 kernel %d not supported by this CPU: skipped\n", k);
            continue;
        }
        compare = k < 2;
        worst_seen = 0;
        all_cases();
        printf("bf16 kernel %s: invariant, max |err| vs the float64 reference %.3g%s\n", bs_attn_bf16_kernel_name(),
               worst_seen, compare ? (k ? ", bitwise equal to the emulation" : "") : "");
        if (!compare) {
            printf("  (its own bits: max |difference| from the emulation %.3g)\n", amx_vs_portable);
            CHECK(amx_vs_portable < 1e-3); /* the same definition up to the tiles' rounding */
        }
        bran++;
    }
    CHECK(bran >= 1);
    bs_gemm_force_bf16_hw(bf16_native);
    free_firsts();
    return check_report("test_attention");
}
