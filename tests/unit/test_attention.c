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
 * kernel the CPU runs (portable emulation, AVX512-BF16, AMX, AVX2 FMA)
 * against the reference on bf16-rounded inputs, invariant in the same ways,
 * and the AVX512-BF16 and AVX2 kernels bitwise equal to the emulation; each
 * one but AMX also bitwise equal to the definition written out here on edge
 * cases (subnormal and underflowing inputs, weights near 2^-126: where
 * FMAs without the flushes differ), and its weights equal to the
 * definition's exp2 on a sweep of [-150, 0]. */
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

/* ---- the bf16 mode's definition written out, for edge cases ----
 * (attention_bf16.c, top comment). def_flush = 0 runs every step as two
 * plain FMAs, without reading subnormals as zero or flushing them: on the
 * edge cases below that must differ somewhere, or the checks could not
 * tell a kernel that skips the flushes. */
static int def_flush = 1;
static float ftz(float x) { return def_flush && fabsf(x) < 0x1p-126f ? copysignf(0.0f, x) : x; }
/* one VDPBF16PS pair step: the odd element (x1 w1) first */
static float step(float acc, float x1, float w1, float x0, float w0) {
    acc = ftz(fmaf(ftz(x1), ftz(w1), ftz(acc)));
    return ftz(fmaf(ftz(x0), ftz(w0), acc));
}

static float bits_f(uint16_t h) { return bs_bf16_to_f32(h); }

/* the weight of x <= 0: degree-4 polynomial for 2^f, ldexpf, a subnormal
 * read as zero, rounded to bf16 (x finite or -inf) */
static uint16_t exp2_def(float x) {
    float t = x * 1.44269504088896341f, n = rintf(t), f = t - n;
    float p = fmaf(fmaf(fmaf(fmaf(0.009600409306585789f, f, 0.05591697618365288f), f, 0.24023719131946564f), f,
                        0.6931219696998596f), f, 1.0f);
    float e = n < -200.0f ? 0.0f : ldexpf(p, (int)n);
    return e < 0x1p-126f ? 0 : bs_f32_to_bf16(e);
}

/* the 16 partial sums of a tile's weights (pair steps with (1, 1)), then the fixed tree */
static float weight_sum_def(const uint16_t *p, int vis) {
    float part[16] = {0}, t[8];
    for (int j0 = 0; j0 < vis; j0 += 32)
        for (int k = 0; k < 16; k++)
            part[k] = step(part[k], bits_f(p[j0 + 2 * k + 1]), 1.0f, bits_f(p[j0 + 2 * k]), 1.0f);
    for (int i = 0; i < 8; i++) t[i] = part[i] + part[i + 8];
    return ((t[0] + t[4]) + (t[2] + t[6])) + ((t[1] + t[5]) + (t[3] + t[7]));
}

/* the dot product of a bf16 query row with a key over the head's pairs */
static float score_def(const float *q, const float *k, int hd) {
    float acc = 0.0f;
    for (int d = 0; d < hd; d += 2)
        acc = step(acc, d + 1 < hd ? to_bf16(q[d + 1]) : 0.0f, d + 1 < hd ? k[d + 1] : 0.0f, to_bf16(q[d]), k[d]);
    return acc;
}

enum { BTILE = 128 }; /* the bf16 mode's key tile */

/* All outputs of c as one run() computes them (blocks of bq queries: the
 * keys of a tile past a block's last query are not there, so a zero weight
 * at the end of an odd count meets v = 0 instead of the next key's). */
static void attention_def(const case_t *c, float *out) {
    int hd = c->hd, bq = bs_attn_bf16_block_queries(c->rep);
    size_t kvd = (size_t)c->nkv * hd, qd = kvd * c->rep;
    float scale = (float)(1.0 / sqrt((double)hd)), s[BTILE], *o = malloc((size_t)hd * 4);
    uint16_t p[BTILE];
    for (int t = 0; t < c->n; t++)
        for (int h = 0; h < c->nkv * c->rep; h++) {
            const float *q = c->q + t * qd + (size_t)h * hd;
            size_t ko = (size_t)(h / c->rep) * hd;
            int n_keys = (t / bq + 1) * bq < c->n ? (t / bq + 1) * bq : c->n;
            float m = -INFINITY, l = 0.0f;
            for (int d = 0; d < hd; d++) o[d] = 0.0f;
            for (int t0 = 0; t0 <= t; t0 += BTILE) {
                int nt = n_keys - t0 < BTILE ? n_keys - t0 : BTILE, vis = t - t0 + 1 < nt ? t - t0 + 1 : nt;
                float mxs = -INFINITY;
                for (int j = 0; j < vis; j++) {
                    s[j] = score_def(q, c->k + (t0 + j) * kvd + ko, hd);
                    if (s[j] > mxs) mxs = s[j];
                }
                float m1 = mxs * scale > m ? mxs * scale : m, cc = m1 == m ? 1.0f : expf(m - m1);
                for (int j = 0; j < BTILE; j++) p[j] = j < vis ? exp2_def(s[j] * scale - m1) : 0;
                l = l * cc + weight_sum_def(p, vis);
                m = m1;
                if (cc != 1.0f)
                    for (int d = 0; d < hd; d++) o[d] = o[d] * cc;
                for (int j = 0; j < vis; j += 2) {
                    const float *v0 = c->v + (t0 + j) * kvd + ko, *v1 = v0 + kvd;
                    for (int d = 0; d < hd; d++)
                        o[d] = step(o[d], bits_f(p[j + 1]), j + 1 < nt ? v1[d] : 0.0f, bits_f(p[j]), v0[d]);
                }
            }
            for (int d = 0; d < hd; d++) out[t * qd + (size_t)h * hd + d] = o[d] * (1.0f / l);
        }
    free(o);
}

/* A bf16 value for the edge cases: subnormals, values just above 2^-126,
 * near 2^-97 and 2^-63 (products near 2^-195 and 2^-126), zeros of both
 * signs, and ordinary values times big (big = 16: scores of hundreds, so
 * weights reach 2^-126 and below). */
static float edge_value(float big) {
    int kind = irand(8);
    float sign = irand(2) ? -1.0f : 1.0f, man = 1.0f + (float)irand(128) / 128.0f;
    switch (kind) {
    case 0: return sign * ldexpf((float)irand(128), -133); /* subnormal (or zero) in bf16 */
    case 1: return sign * ldexpf(man, -126 + irand(3));
    case 2: return sign * ldexpf(man, -97 + irand(6));
    case 3: return sign * ldexpf(man, -66 + irand(6));
    case 4: return sign * 0.0f;
    default: return to_bf16(frand() * big);
    }
}

/* The weights against exp2_def on every x in [-150, 0] in steps of 2^-10,
 * on [-88, -86] (2^n at -126, where ldexpf rounds into the subnormals) in
 * steps of 2^-17, and on random rows (scale, maximum, visible count), with
 * their sums against weight_sum_def: bitwise. */
static void check_weights(void) {
    float s[BTILE];
    uint16_t p[BTILE];
    long bad = 0, n = 0;
    for (int sweep = 0; sweep < 3; sweep++) {
        double x0 = sweep == 0 ? -150.0 : -88.0, dx = sweep == 0 ? 0x1p-10 : 0x1p-17, x1 = sweep == 0 ? 0.0 : -86.0;
        int rows = sweep == 2 ? 4000 : (int)((x1 - x0) / dx / BTILE) + 1;
        for (int r = 0; r < rows; r++) {
            int vis = BTILE;
            float scale = 1.0f, mx = 0.0f;
            if (sweep < 2) {
                for (int j = 0; j < BTILE; j++) {
                    double x = x0 + ((double)r * BTILE + j) * dx;
                    s[j] = (float)(x < x1 ? x : x1);
                }
            } else {
                vis = 1 + irand(BTILE);
                scale = 0.05f + 0.5f * (frand() + 1.0f);
                float top = -INFINITY, spread = (float)(1 << irand(10));
                for (int j = 0; j < vis; j++) {
                    s[j] = frand() * spread;
                    if (irand(64) == 0) s[j] = irand(2) ? -1e30f : -INFINITY;
                    if (s[j] > top) top = s[j];
                }
                mx = top * scale;
            }
            float sum = bs_attn_bf16_weights_probe(s, vis, mx, scale, p);
            uint16_t want[BTILE];
            for (int j = 0; j < BTILE; j++) {
                want[j] = j < vis ? exp2_def(s[j] * scale - mx) : 0;
                if (p[j] != want[j] && bad++ < 3)
                    fprintf(stderr, "weight of %a (scale %a, max %a): %04x, definition %04x\n", s[j], scale, mx, p[j],
                            want[j]);
            }
            float ws = weight_sum_def(want, vis);
            if (memcmp(&sum, &ws, 4) && bad++ < 3) fprintf(stderr, "weight sum %a, definition %a\n", sum, ws);
            n += vis;
        }
    }
    CHECK_INT(bad, 0);
    printf("  weights: %ld compared bitwise with the definition, %ld differ (exp2 sweep, its subnormal edge, "
           "random rows)\n", n, bad);
}

/* Scores (before the scale) on edge values against score_def: bitwise;
 * FMAs without the flushes must differ somewhere. hd 130 has a 65th pair
 * (the AVX2 kernel stages 64 at a time); 9 queries end in a partial group. */
static void check_scores_edges(void) {
    static const int hds[] = {8, 40, 130};
    long bad = 0, plain_differ = 0, n = 0;
    for (int hi = 0; hi < 3; hi++) {
        int hd = hds[hi], nq = 9, nk = hi == 1 ? 77 : BTILE;
        float *q = malloc((size_t)nq * hd * 4), *k = malloc((size_t)nk * hd * 4), *s = malloc((size_t)nq * BTILE * 4);
        for (int i = 0; i < nq * hd; i++) q[i] = edge_value(1.0f);
        for (int i = 0; i < nk * hd; i++) k[i] = edge_value(1.0f);
        for (int i = 0; i < hd; i++) q[i] = to_bf16(frand()); /* one ordinary row */
        CHECK_INT(bs_attn_bf16_scores_probe(q, nq, k, nk, hd, s), 0);
        for (int i = 0; i < nq; i++)
            for (int j = 0; j < BTILE; j++, n++) {
                float want = j < nk ? score_def(q + i * hd, k + j * hd, hd) : 0.0f;
                if (memcmp(&s[i * BTILE + j], &want, 4) && bad++ < 3)
                    fprintf(stderr, "hd %d score (%d, %d): %a, definition %a\n", hd, i, j, s[i * BTILE + j], want);
                if (j < nk) {
                    def_flush = 0;
                    float plain = score_def(q + i * hd, k + j * hd, hd);
                    def_flush = 1;
                    plain_differ += memcmp(&plain, &want, 4) != 0;
                }
            }
        free(q); free(k); free(s);
    }
    CHECK_INT(bad, 0);
    CHECK(plain_differ > 0);
    printf("  scores on subnormal and underflowing inputs: %ld compared bitwise with the definition, %ld differ "
           "(FMAs without the flushes: %ld differ)\n", n, bad, plain_differ);
}

/* Whole attentions on edge values against attention_def: bitwise. Some
 * keys big (weights down to 2^-126 and below); the first 4 dims of v only
 * tiny values, so that o stays where the flushes act; FMAs without them
 * must change some output. */
static void check_attention_edges(void) {
    static const int shape[][4] = {{16, 1, 2, 150}, {130, 1, 3, 140}}; /* hd, nkv, rep, n */
    long bad = 0, plain_differ = 0, total = 0;
    for (int si = 0; si < 2; si++) {
        case_t c;
        rng = 0x9E3779B97F4A7C15ull + (uint64_t)si;
        make_case(&c, shape[si][0], shape[si][1], shape[si][2], shape[si][3], 1.0f);
        int hd = c.hd, n = c.n;
        size_t kvd = (size_t)c.nkv * hd, qd = kvd * c.rep, nout = (size_t)n * qd;
        for (size_t i = 0; i < (size_t)n * qd; i++) c.q[i] = edge_value(16.0f);
        for (int j = 0; j < n; j++) {
            int big = irand(3) == 0;
            for (size_t d = 0; d < kvd; d++) {
                c.k[j * kvd + d] = big ? to_bf16(frand() * 16.0f) : edge_value(4.0f);
                c.v[j * kvd + d] = d % (size_t)hd < 4 ? edge_value(0.0f) : edge_value(1.0f);
            }
        }
        float *got = malloc(nout * 4), *want = malloc(nout * 4), *plain = malloc(nout * 4);
        run(&c, 0, n, NULL, 0, got);
        attention_def(&c, want);
        def_flush = 0;
        attention_def(&c, plain);
        def_flush = 1;
        for (size_t i = 0; i < nout; i++) {
            if (memcmp(&got[i], &want[i], 4) && bad++ < 3)
                fprintf(stderr, "hd %d out[%zu]: %a, definition %a\n", hd, i, got[i], want[i]);
            plain_differ += memcmp(&plain[i], &want[i], 4) != 0;
        }
        total += (long)nout;
        free(got); free(want); free(plain);
        free_case(&c);
    }
    CHECK_INT(bad, 0);
    CHECK(plain_differ > 0);
    printf("  attention on subnormal, underflowing and far-apart inputs: %ld outputs compared bitwise with the "
           "definition, %ld differ (FMAs without the flushes: %ld differ)\n", total, bad, plain_differ);
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
    for (int k = 0; k <= 3; k++) {
        bs_gemm_force_bf16_hw(k);
        if (bs_gemm_bf16_kernel() != k) {
            printf("bf16 kernel %d not supported by this CPU: skipped\n", k);
            continue;
        }
        compare = k != 2; /* AMX has bits of its own */
        worst_seen = 0;
        all_cases();
        printf("bf16 kernel %s: invariant, max |err| vs the float64 reference %.3g%s\n", bs_attn_bf16_kernel_name(),
               worst_seen, compare ? (k ? ", bitwise equal to the emulation" : "") : "");
        if (!compare) {
            printf("  (its own bits: max |difference| from the emulation %.3g)\n", amx_vs_portable);
            CHECK(amx_vs_portable < 1e-3); /* the same definition up to the tiles' rounding */
        }
        check_weights(); /* AMX's weights are the VDPBF16PS kernel's */
        if (compare) {
            check_scores_edges();
            check_attention_edges();
        }
        bran++;
    }
    CHECK(bran >= 1);
    bs_gemm_force_bf16_hw(bf16_native);
    free_firsts();
    return check_report("test_attention");
}
