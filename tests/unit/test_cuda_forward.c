/* The CUDA backend on a GPU (spec 05 §18 item 8): f32 logits against the CPU
 * backend (max |dlogit| <= 1e-4, same argmax), f16 and bf16 within loose
 * bounds, prefix capture and cached prefixes, a forward paused between layers
 * while another one runs, input errors, and — given invariant GEMM tables in
 * $BASAL_CUDA_TEST_TABLES (<fixture>-<dtype>.json, written by
 * tools/gpu-check.sh with basal gemm-search --invariant) — bitwise batch
 * invariance: alone, in one trie, as separate rows, at other offsets, with a
 * cached prefix. Without a usable GPU it reports a skip and passes. */
#include <stdint.h>

#include "check.h"
#include "fwd_prompts.h"
#include "base/util.h"
#include "engine/pack.h"
#include "device/device.h"
#include "model/forward.h"

enum { PROMPT_SEED = 4242, LONG_STATE = 64 };

/* Rows of consecutive prompts (row_sizes[r] each), optionally each row
 * starting with a cached prefix; logits of prompt order[i] at out[order[i]]. */
static int run_rows(const bs_model *m, const int *order, int n, const int *row_sizes, int n_rows,
                    const bs_kv *const *prefixes, float *out) {
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
    int built = bs_packed_build(&pk, rows, n_rows, prefixes, out_ids, NIDS, &e) == 0;
    float *lg = built ? malloc((size_t)pk.in.n_readouts * NIDS * sizeof *lg) : NULL;
    rc = built ? bs_forward(m, &pk.in, lg, &e) : -1;
    if (rc) fprintf(stderr, "forward failed: %s\n", e.msg);
    else
        for (int i = 0; i < n; i++)
            memcpy(out + (size_t)order[i] * NIDS, lg + (size_t)pk.readout_of[i] * NIDS, NIDS * sizeof *lg);
    free(lg);
    if (built) bs_packed_free(&pk);
    for (int r = 0; r < n_rows; r++) bs_row_free(&rows[r]);
    return rc;
}

static int load(bs_model *m, const char *name, const char *device, const char *dtype, const char *table) {
    char dir[1024];
    bs_err e = {0};
    snprintf(dir, sizeof dir, "%s/%s", check_env("FIXTURES", "build/fixtures"), name);
    int rc = bs_model_load(m, dir, NULL, &e);
    if (rc == 0 && (rc = bs_device_attach_ex(m, device, dtype, table, &e)) < 0) bs_model_free(m);
    if (rc) fprintf(stderr, "cannot load %s on %s %s: %s\n", dir, device, dtype ? dtype : "", e.msg);
    CHECK_INT(rc, 0);
    return rc;
}

static int same_bits(const char *what, const float *a, const float *b, size_t n) {
    size_t diff = 0;
    for (size_t i = 0; i < n; i++) diff += memcmp(&a[i], &b[i], sizeof *a) != 0;
    if (diff) fprintf(stderr, "%s: %zu of %zu logits differ bitwise\n", what, diff, n);
    return diff == 0;
}

static double max_diff(const float *a, const float *b, size_t n, int *argmax_bad) {
    double w = 0;
    *argmax_bad = 0;
    for (size_t i = 0; i < n; i++) w = fmax(w, fabs((double)a[i] - b[i]));
    for (size_t p = 0; p < n / NIDS; p++) {
        int ia = 0, ib = 0;
        for (int j = 1; j < NIDS; j++) {
            if (a[p * NIDS + j] > a[p * NIDS + ia]) ia = j;
            if (b[p * NIDS + j] > b[p * NIDS + ib]) ib = j;
        }
        *argmax_bad += ia != ib;
    }
    return w;
}

/* Captures the K/V of the first `np` tokens of prompt 0 (one forward); on
 * failure *kv is left empty. */
static int capture(const bs_model *m, int np, bs_kv *kv) {
    bs_err e = {0};
    int32_t pos[MAXLEN];
    for (int i = 0; i < np; i++) pos[i] = i;
    if (bs_kv_alloc(kv, m, np, &e) < 0) return -1;
    bs_unit u = {.q_start = 0, .q_len = np, .n_ranges = 1, .r_start = {0}, .r_len = {np}};
    bs_fwd_input in = {.n_tokens = np, .ids = prompts[0], .pos = pos, .n_units = 1, .units = &u, .capture = kv};
    int rc = bs_forward(m, &in, NULL, &e);
    if (rc) {
        fprintf(stderr, "capture: %s\n", e.msg);
        bs_kv_free(kv);
    }
    return rc;
}

/* ---- a forward paused between layers while another runs (04 §10 L4) ---- */

typedef struct pause_ctx {
    const bs_model *m;
    int calls, inner_rc;
    float inner[NP * NIDS];
} pause_ctx;

static void pause_cb(void *arg) {
    pause_ctx *c = arg;
    if (c->calls++ == 0) { /* another forward of other shapes on the same backend */
        int order[2] = {5, 9}, sizes[1] = {2};
        c->inner_rc = run_rows(c->m, order, 2, sizes, 1, NULL, c->inner);
    }
}

static int run_paused(const bs_model *m, pause_ctx *pc, float *out) {
    bs_row row;
    bs_packed pk;
    bs_err e = {0};
    const int32_t *pp[4] = {prompts[0], prompts[1], prompts[2], prompts[3]};
    int32_t pl[4] = {lens[0], lens[1], lens[2], lens[3]};
    int rc = bs_pack_row(&row, pp, pl, 4, &e);
    if (rc == 0) rc = bs_packed_build(&pk, &row, 1, NULL, out_ids, NIDS, &e);
    if (rc == 0) {
        float *lg = malloc((size_t)pk.in.n_readouts * NIDS * sizeof *lg);
        if (pc) {
            pk.in.between_layers = pause_cb;
            pk.in.between_ctx = pc;
        }
        rc = bs_forward(m, &pk.in, lg, &e);
        for (int i = 0; rc == 0 && i < 4; i++)
            memcpy(out + i * NIDS, lg + (size_t)pk.readout_of[i] * NIDS, NIDS * sizeof *lg);
        free(lg);
        bs_packed_free(&pk);
    }
    if (rc) fprintf(stderr, "paused forward: %s\n", e.msg);
    bs_row_free(&row);
    return rc;
}

static void invariance(const bs_model *m, const char *label, const float *alone) {
    size_t sz = (size_t)NP * NIDS;
    float *got = malloc(sz * sizeof *got);
    int order[NP], ones[NP], all[] = {NP};
    char what[256];
    for (int i = 0; i < NP; i++) { order[i] = i; ones[i] = 1; }
    CHECK_INT(run_rows(m, order, NP, all, 1, NULL, got), 0);
    snprintf(what, sizeof what, "%s: one trie row vs alone", label);
    CHECK(same_bits(what, got, alone, sz));
    CHECK_INT(run_rows(m, order, NP, ones, NP, NULL, got), 0);
    snprintf(what, sizeof what, "%s: separate rows in one forward vs alone", label);
    CHECK(same_bits(what, got, alone, sz));
    int rev[NP], mixed[] = {5, 1, 4, 2};
    for (int i = 0; i < NP; i++) rev[i] = NP - 1 - i;
    CHECK_INT(run_rows(m, rev, NP, mixed, 4, NULL, got), 0);
    snprintf(what, sizeof what, "%s: reversed prompts in mixed tries (other offsets) vs alone", label);
    CHECK(same_bits(what, got, alone, sz));
    int inter[NP] = {0, 4, 8, 1, 5, 9, 2, 6, 10, 3, 7, 11}, two[] = {6, 6};
    CHECK_INT(run_rows(m, inter, NP, two, 2, NULL, got), 0);
    snprintf(what, sizeof what, "%s: interleaved requests vs alone", label);
    CHECK(same_bits(what, got, alone, sz));
    /* the template prefix (24 tokens, shared by every prompt) from a cache */
    bs_kv kv;
    if (capture(m, 24, &kv) == 0) {
        const bs_kv *px[NP];
        for (int i = 0; i < NP; i++) px[i] = &kv;
        CHECK_INT(run_rows(m, order, NP, all, 1, px, got), 0);
        snprintf(what, sizeof what, "%s: cached template prefix vs alone", label);
        CHECK(same_bits(what, got, alone, sz));
        CHECK_INT(run_rows(m, order, NP, ones, NP, px, got), 0);
        snprintf(what, sizeof what, "%s: cached prefix, separate rows vs alone", label);
        CHECK(same_bits(what, got, alone, sz));
    } else {
        CHECK(0);
    }
    bs_kv_free(&kv);
    free(got);
}

static void fixture(const char *name, const char *tables) {
    bs_model cpu;
    if (load(&cpu, name, "cpu", NULL, NULL)) return;
    make_prompts(cpu.cfg.vocab, LONG_STATE);
    size_t sz = (size_t)NP * NIDS;
    float *ref = malloc(sz * sizeof *ref), *alone = malloc(sz * sizeof *alone), *got = malloc(sz * sizeof *got);
    int order[NP], all[] = {NP}, one[] = {1};
    for (int i = 0; i < NP; i++) order[i] = i;
    CHECK_INT(run_rows(&cpu, order, NP, all, 1, NULL, ref), 0);
    bs_kv kv_cpu;
    int have_kv_cpu = capture(&cpu, 40, &kv_cpu) == 0;

    static const char *dtypes[3] = {"f32", "f16", "bf16"};
    static const double tol[3] = {1e-4, 0.5, 2.0};
    for (int d = 0; d < 3; d++) {
        char table[1024], label[128];
        snprintf(table, sizeof table, "%s/%s-%s.json", tables ? tables : "", name, dtypes[d]);
        int has_table = tables && bs_file_exists(table);
        bs_model m;
        if (load(&m, name, "cuda", dtypes[d], has_table ? table : NULL)) continue;
        snprintf(label, sizeof label, "%s cuda %s%s", name, dtypes[d], has_table ? " (invariant table)" : "");
        if (run_rows(&m, order, NP, all, 1, NULL, got) != 0) {
            CHECK(0);
            bs_model_free(&m);
            continue;
        }
        int bad_arg;
        double w = max_diff(got, ref, sz, &bad_arg);
        printf("%s vs CPU: max |dlogit| %.3g, argmax mismatches %d of %d\n", label, w, bad_arg, NP);
        CHECK(w <= tol[d]);
        if (d == 0) CHECK_INT(bad_arg, 0);

        /* K/V of a capture against the CPU's */
        bs_kv kv;
        if (have_kv_cpu && capture(&m, 40, &kv) == 0) {
            double kw = 0;
            size_t n = (size_t)kv.n_layers * kv.n_tokens * kv.kvd;
            for (size_t i = 0; i < n; i++) {
                kw = fmax(kw, fabs((double)kv.k[i] - kv_cpu.k[i]));
                kw = fmax(kw, fabs((double)kv.v[i] - kv_cpu.v[i]));
            }
            printf("%s: captured K/V vs CPU: max |d| %.3g\n", label, kw);
            CHECK(kw <= (d == 0 ? 1e-4 : tol[d]));
            bs_kv_free(&kv);
        } else {
            CHECK(0);
        }

        /* pausing between layers, with another forward in the pause */
        float plain[4 * NIDS], paused[4 * NIDS];
        pause_ctx pc = {.m = &m};
        CHECK_INT(run_paused(&m, NULL, plain), 0);
        CHECK_INT(run_paused(&m, &pc, paused), 0);
        CHECK_INT(pc.calls, m.cfg.n_layers - 1);
        CHECK_INT(pc.inner_rc, 0);
        CHECK(same_bits("paused vs uninterrupted", paused, plain, 4 * NIDS));

        for (int i = 0; i < NP; i++) CHECK_INT(run_rows(&m, &order[i], 1, one, 1, NULL, alone), 0);
        if (has_table) invariance(&m, label, alone);
        else printf("%s: no GEMM table, batch invariance not checked\n", label);
        bs_model_free(&m);
    }
    if (have_kv_cpu) bs_kv_free(&kv_cpu);
    free(ref);
    free(alone);
    free(got);
    bs_model_free(&cpu);
}

static void input_errors(void) {
    bs_model m;
    if (load(&m, "tiny-bias", "cuda", "f32", NULL)) return;
    check_input_errors(&m);
    bs_model_free(&m);
}

int main(void) {
    rng = PROMPT_SEED;
    setvbuf(stdout, NULL, _IOLBF, 0);
    if (bs_device_cuda_count() == 0) {
        printf("test_cuda_forward: skipped (%s): 0 passed, 0 failed\n",
               bs_device_has_cuda() ? "no usable CUDA GPU" : "no CUDA in this build");
        return 0;
    }
    const char *tables = getenv("BASAL_CUDA_TEST_TABLES");
    const char *names[] = {"tiny-bias", "tiny-nobias", "tiny-hd128", "tiny-gqa4", "tiny-f16", "stories260K"};
    for (size_t i = 0; i < sizeof names / sizeof *names; i++) fixture(names[i], tables && *tables ? tables : NULL);
    input_errors();
    return check_report("test_cuda_forward");
}
