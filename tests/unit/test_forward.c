/* Tree equivalence and batch invariance of the CPU forward pass (spec 05 §9,
 * §13, §18 items 5–6) on the synthetic Basal-format fixtures: a prompt's
 * readout logits are bitwise identical run alone, packed in a prefix trie with
 * other prompts, as one of several rows at any offset, with 1 or 2 threads,
 * and whatever other vocabulary rows are read out; the same bits from every
 * kernel family the CPU supports; dtype bf16 invariant within its mode and
 * the same from the instruction, the AVX2 FMA kernel and the emulation
 * (issue 16). Also the storage equivalences of spec 07 §8.1 (bf16 = f32 =
 * sharded), the logit lens hook, and input errors. */
#include <stdint.h>

#include "check.h"
#include "fwd_prompts.h"
#include "engine/pack.h"
#include "cpu/gemm.h"
#include "model/forward.h"

/* a 150-token state makes prompts span three 64-ordinal attention tiles */
enum { PROMPT_SEED = 12345, LONG_STATE = 150 };

/* Runs the given prompts as rows (each row a trie of consecutive prompts,
 * row_sizes[r] of them); writes logits of prompt k at out[k * nids]. */
static int run_rows(const bs_model *m, const int *order, int n, const int *row_sizes, int n_rows,
                    const int32_t *ids, int nids, float *out) {
    bs_row rows[NP];
    bs_err e = {0};
    const int32_t *pp[NP];
    int32_t pl[NP];
    int k = 0, rc = 0;
    for (int r = 0; r < n_rows; r++) {
        for (int i = 0; i < row_sizes[r]; i++) {
            pp[i] = prompts[order[k + i]];
            pl[i] = lens[order[k + i]];
        }
        rc |= bs_pack_row(&rows[r], pp, pl, row_sizes[r], &e);
        k += row_sizes[r];
    }
    if (rc || k != n) return -1;
    bs_packed pk;
    rc = bs_packed_build(&pk, rows, n_rows, NULL, ids, nids, &e);
    float *lg = malloc((size_t)pk.in.n_readouts * nids * sizeof *lg);
    rc = rc ? rc : bs_forward(m, &pk.in, lg, &e);
    if (rc) fprintf(stderr, "forward failed: %s\n", e.msg);
    else
        for (int i = 0; i < n; i++)
            memcpy(out + (size_t)order[i] * nids, lg + (size_t)pk.readout_of[i] * nids, (size_t)nids * sizeof *lg);
    free(lg);
    bs_packed_free(&pk);
    for (int r = 0; r < n_rows; r++) bs_row_free(&rows[r]);
    return rc;
}

static int load(bs_model *m, const char *name, bs_pool *pool) {
    char dir[1024];
    bs_err e = {0};
    snprintf(dir, sizeof dir, "%s/%s", check_env("FIXTURES", "build/fixtures"), name);
    int rc = bs_model_load(m, dir, pool, &e);
    if (rc) fprintf(stderr, "cannot load %s: %s\n", dir, e.msg);
    CHECK_INT(rc, 0);
    return rc;
}

static void expect_same(const char *what, const float *a, const float *b, size_t n) {
    size_t diff = 0;
    for (size_t i = 0; i < n; i++) diff += memcmp(&a[i], &b[i], sizeof *a) != 0;
    if (diff) fprintf(stderr, "%s: %zu of %zu logits differ bitwise\n", what, diff, n);
    CHECK_INT(diff, 0);
}

#if defined(__SANITIZE_ADDRESS__)
#define SANITIZED 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define SANITIZED 1
#endif
#endif
#ifndef SANITIZED
#define SANITIZED 0
#endif

/* families: also compare the kernel families and check dtype bf16 (slow in
 * the portable code, so on a few fixtures only). */
static void invariance(const char *model_name, int families) {
    bs_pool *pool1 = bs_pool_create(1), *pool2 = bs_pool_create(2);
    bs_model m;
    if (load(&m, model_name, pool2)) goto out;
    make_prompts(m.cfg.vocab, LONG_STATE);
    size_t sz = (size_t)NP * NIDS;
    float *alone = malloc(sz * 4), *got = malloc(sz * 4);
    int order[NP], ones[NP];
    for (int i = 0; i < NP; i++) { order[i] = i; ones[i] = 1; }

    for (int i = 0; i < NP; i++) CHECK_INT(run_rows(&m, &i, 1, ones, 1, out_ids, NIDS, alone), 0);

    int all[] = {NP};
    CHECK_INT(run_rows(&m, order, NP, all, 1, out_ids, NIDS, got), 0);
    expect_same("one trie row vs alone", got, alone, sz);

    CHECK_INT(run_rows(&m, order, NP, ones, NP, out_ids, NIDS, got), 0);
    expect_same("separate rows in one forward vs alone", got, alone, sz);

    int rev[NP];
    for (int i = 0; i < NP; i++) rev[i] = NP - 1 - i;
    int mixed[] = {5, 1, 4, 2};
    CHECK_INT(run_rows(&m, rev, NP, mixed, 4, out_ids, NIDS, got), 0);
    expect_same("reversed prompts in mixed tries vs alone", got, alone, sz);

    /* Cross-request sharing: questions of different "requests" interleaved. */
    int inter[NP] = {0, 4, 8, 1, 5, 9, 2, 6, 10, 3, 7, 11};
    int two[] = {6, 6};
    CHECK_INT(run_rows(&m, inter, NP, two, 2, out_ids, NIDS, got), 0);
    expect_same("interleaved requests vs alone", got, alone, sz);

    /* Thread count does not change a bit. */
    m.pool = pool1;
    CHECK_INT(run_rows(&m, order, NP, all, 1, out_ids, NIDS, got), 0);
    expect_same("1 thread vs 2 threads", got, alone, sz);
    m.pool = pool2;

    /* The readout of one id does not depend on which other ids are read. */
    int32_t one_id = out_ids[3];
    float single[NP];
    CHECK_INT(run_rows(&m, order, NP, all, 1, &one_id, 1, single), 0);
    int diff = 0;
    for (int p = 0; p < NP; p++) diff += memcmp(&single[p], &alone[p * NIDS + 3], 4) != 0;
    CHECK_INT(diff, 0);

    if (!families) goto done;
    /* Every kernel family this CPU supports gives the same logits (issue 16:
     * the same bits on every CPU). */
    bs_kernel native = bs_gemm_kernel();
    const bs_kernel fams[] = {BS_KERNEL_GENERIC, BS_KERNEL_AVX2, BS_KERNEL_AVX512};
    for (int f = 0; f < 3; f++) {
        if (!bs_kernel_supported(fams[f]) || fams[f] == native) continue;
        bs_gemm_force_kernel(fams[f]);
        CHECK_INT(run_rows(&m, order, NP, all, 1, out_ids, NIDS, got), 0);
        char what[64];
        snprintf(what, sizeof what, "kernel family %s vs %s", bs_gemm_kernel_name(fams[f]), bs_gemm_kernel_name(native));
        expect_same(what, got, alone, sz);
    }
    bs_gemm_force_kernel(native);

    /* dtype bf16: batch- and thread-invariant within the mode, the same bits
     * from the instruction and from the emulation, not the f32 bits; the
     * AMX kernel invariant within itself, with its weights packed per call
     * or once at load. */
    float *alone16 = malloc(sz * 4);
    m.compute = BS_COMPUTE_BF16;
    int bf16_native = bs_gemm_force_bf16_hw(0);
    for (int i = 0; i < NP; i++) CHECK_INT(run_rows(&m, &i, 1, ones, 1, out_ids, NIDS, alone16), 0);
    CHECK(memcmp(alone16, alone, sz * 4) != 0);
    static const char *const bf16_names[] = {"bf16-portable", "avx512-bf16", "amx-bf16", "bf16-avx2"};
    for (int k = 0; k < 4; k++) {
        if (k > 0) {
            bs_gemm_force_bf16_hw(k);
            if (strcmp(bs_gemm_bf16_kernel_name(), bf16_names[k])) continue; /* not on this CPU */
        }
        float *ref = alone16, *own = NULL;
        if (k == 2) { /* AMX: its own bits; compare it with itself alone */
            own = malloc(sz * 4);
            for (int i = 0; i < NP; i++) CHECK_INT(run_rows(&m, &i, 1, ones, 1, out_ids, NIDS, own), 0);
            ref = own;
        }
        char what[80];
        snprintf(what, sizeof what, "bf16 mode (%s): trie row vs alone (emulation)", bs_gemm_bf16_kernel_name());
        CHECK_INT(run_rows(&m, rev, NP, mixed, 4, out_ids, NIDS, got), 0);
        expect_same(what, got, ref, sz);
        m.pool = pool1;
        CHECK_INT(run_rows(&m, order, NP, all, 1, out_ids, NIDS, got), 0);
        snprintf(what, sizeof what, "bf16 mode (%s): 1 thread, one row", bs_gemm_bf16_kernel_name());
        expect_same(what, got, ref, sz);
        m.pool = pool2;
        if (k == 2) { /* the weights packed at load, as dtype bf16 does: the same bits */
            bs_err pe = {0};
            CHECK_INT(bs_model_prepack(&m, &pe), 0);
            CHECK(m.layers[0].wg.packed != NULL);
            CHECK_INT(run_rows(&m, rev, NP, mixed, 4, out_ids, NIDS, got), 0);
            expect_same("bf16 mode (amx-bf16), prepacked weights: trie row vs alone", got, ref, sz);
            m.pool = pool1;
            CHECK_INT(run_rows(&m, order, NP, all, 1, out_ids, NIDS, got), 0);
            expect_same("bf16 mode (amx-bf16), prepacked weights: 1 thread, one row", got, ref, sz);
            m.pool = pool2;
            bs_model_unpack(&m);
            CHECK(m.layers[0].wg.packed == NULL);
        }
        free(own);
    }
    bs_gemm_force_bf16_hw(bf16_native);
    m.compute = BS_COMPUTE_F32;
    free(alone16);
done:
    free(alone);
    free(got);
    bs_model_free(&m);
out:
    bs_pool_destroy(pool1);
    bs_pool_destroy(pool2);
}

/* Two model directories holding the same values must give bitwise equal logits. */
static void same_model(const char *a, const char *b) {
    bs_pool *pool = bs_pool_create(2);
    bs_model ma, mb;
    if (load(&ma, a, pool)) goto out;
    if (load(&mb, b, pool)) { bs_model_free(&ma); goto out; }
    make_prompts(ma.cfg.vocab, LONG_STATE);
    float la[NP * NIDS], lb[NP * NIDS];
    int order[NP], all[] = {NP};
    for (int i = 0; i < NP; i++) order[i] = i;
    CHECK_INT(run_rows(&ma, order, NP, all, 1, out_ids, NIDS, la), 0);
    CHECK_INT(run_rows(&mb, order, NP, all, 1, out_ids, NIDS, lb), 0);
    char what[256];
    snprintf(what, sizeof what, "%s vs %s", a, b);
    expect_same(what, la, lb, (size_t)NP * NIDS);
    bs_model_free(&ma);
    bs_model_free(&mb);
out:
    bs_pool_destroy(pool);
}

static void input_errors(void) {
    bs_model m;
    if (load(&m, "tiny-bias", NULL)) return;
    check_input_errors(&m);
    bs_model_free(&m);
}

/* More readout rows than the forward's row chunk: every position of a
 * 300-token prompt read out in one forward equals the last-token readout of
 * that prefix run alone (sampled). */
static void many_readouts(const char *model_name) {
    enum { L = 300 };
    bs_model m;
    if (load(&m, model_name, NULL)) return;
    bs_err e = {0};
    int32_t ids[L], pos[L], ro[L];
    for (int i = 0; i < L; i++) {
        ids[i] = (int32_t)rnd((uint32_t)m.cfg.vocab);
        pos[i] = ro[i] = i;
    }
    bs_unit u = {.q_start = 0, .q_len = L, .n_ranges = 1, .r_start = {0}, .r_len = {L}};
    bs_fwd_input in = {.n_tokens = L, .ids = ids, .pos = pos, .n_units = 1, .units = &u,
                       .n_readouts = L, .readouts = ro, .n_out_ids = NIDS, .out_ids = out_ids};
    float *all = malloc((size_t)L * NIDS * sizeof *all);
    CHECK_INT(bs_forward(&m, &in, all, &e), 0);
    int diff = 0, runs = 0;
    for (int n = 1; n <= L; n += 23) {
        float one[NIDS];
        int32_t last = n - 1;
        bs_unit un = {.q_start = 0, .q_len = n, .n_ranges = 1, .r_start = {0}, .r_len = {n}};
        bs_fwd_input i1 = in;
        i1.n_tokens = n;
        i1.units = &un;
        i1.n_readouts = 1;
        i1.readouts = &last;
        CHECK_INT(bs_forward(&m, &i1, one, &e), 0);
        diff += memcmp(one, all + (size_t)last * NIDS, sizeof one) != 0;
        runs++;
    }
    if (diff) fprintf(stderr, "%s: %d of %d prefixes differ from the all-readouts forward\n", model_name, diff, runs);
    CHECK_INT(diff, 0);
    free(all);
    bs_model_free(&m);
}

/* The evidence output (05 §14 E1): the final-normed rows of a 300-token
 * prompt read out at every position, without logits, equal bitwise those of
 * each prefix run alone with its logits, and those of the prompt packed after
 * another prompt as a second unit with 2 threads (packing never changes them). */
static void hidden_rows(const char *model_name) {
    enum { L = 300, P = 37 };
    bs_pool *pool = bs_pool_create(2);
    bs_model m;
    if (load(&m, model_name, pool)) { bs_pool_destroy(pool); return; }
    bs_err e = {0};
    int H = m.cfg.hidden;
    int32_t ids[P + L], pos[P + L], ro[L];
    for (int i = 0; i < P + L; i++) ids[i] = (int32_t)rnd((uint32_t)m.cfg.vocab);
    for (int i = 0; i < L; i++) pos[i] = ro[i] = i;
    bs_unit u = {.q_start = 0, .q_len = L, .n_ranges = 1, .r_start = {0}, .r_len = {L}};
    bs_fwd_input in = {.n_tokens = L, .ids = ids + P, .pos = pos, .n_units = 1, .units = &u,
                       .n_readouts = L, .readouts = ro, .n_out_ids = 0};
    float *all = malloc((size_t)L * H * sizeof *all), *one = malloc((size_t)H * sizeof *one);
    float *packed = malloc((size_t)L * H * sizeof *packed);
    CHECK_INT(bs_forward(&m, &in, NULL, &e), BS_EINVAL); /* no logits and no hidden: nothing to read out */
    in.hidden = all;
    CHECK_INT(bs_forward(&m, &in, NULL, &e), 0);
    int diff = 0;
    for (int n = 1; n <= L; n += 29) {
        float lg[NIDS];
        int32_t last = n - 1;
        bs_unit un = {.q_start = 0, .q_len = n, .n_ranges = 1, .r_start = {0}, .r_len = {n}};
        bs_fwd_input i1 = in;
        i1.n_tokens = n;
        i1.units = &un;
        i1.n_readouts = 1;
        i1.readouts = &last;
        i1.n_out_ids = NIDS;
        i1.out_ids = out_ids;
        i1.hidden = one;
        CHECK_INT(bs_forward(&m, &i1, lg, &e), 0);
        diff += memcmp(one, all + (size_t)last * H, (size_t)H * sizeof *one) != 0;
    }
    CHECK_INT(diff, 0);
    /* packed: another prompt of P tokens first, then ours as a second unit */
    int32_t pos2[P + L], ro2[L];
    for (int i = 0; i < P; i++) pos2[i] = i;
    for (int i = 0; i < L; i++) { pos2[P + i] = i; ro2[i] = P + i; }
    bs_unit us[2] = {{.q_start = 0, .q_len = P, .n_ranges = 1, .r_start = {0}, .r_len = {P}},
                     {.q_start = P, .q_len = L, .n_ranges = 1, .r_start = {P}, .r_len = {L}}};
    bs_fwd_input i2 = {.n_tokens = P + L, .ids = ids, .pos = pos2, .n_units = 2, .units = us,
                       .n_readouts = L, .readouts = ro2, .n_out_ids = 0, .hidden = packed};
    CHECK_INT(bs_forward(&m, &i2, NULL, &e), 0);
    CHECK(memcmp(packed, all, (size_t)L * H * sizeof *all) == 0);
    free(all); free(one); free(packed);
    bs_model_free(&m);
    bs_pool_destroy(pool);
}

/* The logit lens hook (bs_fwd_input.after_layer): called once per layer in
 * order; the rows it gets after the last layer, read out with
 * bs_forward_letters, are the forward's logits bit for bit; asking for them
 * changes no logit; every layer's rows of a readout are the same bits when
 * the prompt runs alone (with 1 thread) as packed after another prompt (with
 * 2); malformed lens inputs are refused. */
typedef struct {
    int H, n, calls, bad_order;
    float *rows; /* [layer][n][H] */
} lens_sink;

static void lens_cb(void *ctx, int layer, const float *rows) {
    lens_sink *s = ctx;
    s->bad_order |= layer != s->calls;
    memcpy(s->rows + (size_t)layer * s->n * s->H, rows, (size_t)s->n * s->H * sizeof *rows);
    s->calls++;
}

static void lens_rows(const char *model_name) {
    enum { L = 300, P = 41, NR = 4 };
    bs_pool *pool = bs_pool_create(2);
    bs_model m1, m2;
    if (load(&m1, model_name, NULL)) { bs_pool_destroy(pool); return; }
    if (load(&m2, model_name, pool)) { bs_model_free(&m1); bs_pool_destroy(pool); return; }
    bs_err e = {0};
    int H = m1.cfg.hidden, NL = m1.cfg.n_layers;
    int32_t ids[P + L], pos[L], ro[NR] = {17, 130, 255, L - 1}, lr[NR] = {3, 0, 2, 1};
    for (int i = 0; i < P + L; i++) ids[i] = (int32_t)rnd((uint32_t)m1.cfg.vocab);
    for (int i = 0; i < L; i++) pos[i] = i;
    bs_unit u = {.q_start = 0, .q_len = L, .n_ranges = 1, .r_start = {0}, .r_len = {L}};
    bs_fwd_input in = {.n_tokens = L, .ids = ids + P, .pos = pos, .n_units = 1, .units = &u,
                       .n_readouts = NR, .readouts = ro, .n_out_ids = NIDS, .out_ids = out_ids};
    float plain[NR * NIDS], with[NR * NIDS], again[NIDS];
    CHECK_INT(bs_forward(&m1, &in, plain, &e), 0);
    lens_sink s1 = {H, NR, 0, 0, malloc((size_t)NL * NR * H * sizeof(float))};
    in.n_lens = NR;
    in.lens_rows = lr;
    in.after_layer = lens_cb;
    in.after_ctx = &s1;
    CHECK_INT(bs_forward(&m1, &in, with, &e), 0);
    expect_same("logits with the lens rows", with, plain, NR * NIDS);
    CHECK_INT(s1.calls, NL);
    CHECK_INT(s1.bad_order, 0);
    float *h = malloc((size_t)H * sizeof *h);
    for (int j = 0; j < NR; j++) { /* the last layer's rows are the logits' rows */
        bs_forward_letters(&m1, s1.rows + ((size_t)(NL - 1) * NR + j) * H, out_ids, NIDS, h, again);
        expect_same("bs_forward_letters on the last layer", again, plain + (size_t)lr[j] * NIDS, NIDS);
    }
    /* packed after another prompt, 2 threads: every layer's rows the same */
    int32_t pos2[P + L], ro2[NR];
    for (int i = 0; i < P; i++) pos2[i] = i;
    for (int i = 0; i < L; i++) pos2[P + i] = i;
    for (int j = 0; j < NR; j++) ro2[j] = P + ro[j];
    bs_unit us[2] = {{.q_start = 0, .q_len = P, .n_ranges = 1, .r_start = {0}, .r_len = {P}},
                     {.q_start = P, .q_len = L, .n_ranges = 1, .r_start = {P}, .r_len = {L}}};
    lens_sink s2 = {H, NR, 0, 0, malloc((size_t)NL * NR * H * sizeof(float))};
    bs_fwd_input i2 = {.n_tokens = P + L, .ids = ids, .pos = pos2, .n_units = 2, .units = us,
                       .n_readouts = NR, .readouts = ro2, .n_out_ids = NIDS, .out_ids = out_ids,
                       .n_lens = NR, .lens_rows = lr, .after_layer = lens_cb, .after_ctx = &s2};
    CHECK_INT(bs_forward(&m2, &i2, with, &e), 0);
    CHECK_INT(s2.calls, NL);
    CHECK(memcmp(s1.rows, s2.rows, (size_t)NL * NR * H * sizeof(float)) == 0);
    /* refused: a lens row outside the readouts, no callback, a capture */
    bs_fwd_input bad = in;
    int32_t out_of_range = NR;
    bad.n_lens = 1;
    bad.lens_rows = &out_of_range;
    CHECK_INT(bs_forward(&m1, &bad, with, &e), BS_EINTERNAL);
    bad = in;
    bad.after_layer = NULL;
    CHECK_INT(bs_forward(&m1, &bad, with, &e), BS_EINTERNAL);
    bs_kv cap;
    CHECK_INT(bs_kv_alloc(&cap, &m1, L, &e), 0);
    bad = in;
    bad.capture = &cap;
    CHECK_INT(bs_forward(&m1, &bad, NULL, &e), BS_EINTERNAL);
    bs_kv_free(&cap);
    free(h); free(s1.rows); free(s2.rows);
    bs_model_free(&m1);
    bs_model_free(&m2);
    bs_pool_destroy(pool);
}

int main(void) {
    rng = PROMPT_SEED;
    invariance("tiny-bias", 1);
    invariance("tiny-nobias", 0);
    invariance("tiny-hd128", !SANITIZED);
    invariance("stories260K", 0);
    same_model("tiny-bias", "tiny-f32");
    same_model("tiny-bias", "tiny-sharded");
    same_model("tiny-bias", "tiny-always");
    many_readouts("tiny-bias");
    many_readouts("tiny-hd128");
    hidden_rows("tiny-bias");
    hidden_rows("tiny-hd128");
    lens_rows("tiny-bias");
    lens_rows("tiny-hd128");
    input_errors();
    return check_report("test_forward");
}
