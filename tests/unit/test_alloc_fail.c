/* Allocation failure injection (issue: faults). This binary is linked with
 * malloc, calloc, realloc, strdup, posix_memalign and aligned_alloc wrapped
 * (-Wl,--wrap=…, see the Makefile), so the n-th allocation made by this
 * project's code can be made to fail; libraries' own allocations are not
 * touched. Swept over every allocation of a whole decision (bytes → plan →
 * packed forward → answer) and over a sample of a model load's:
 *   - nothing crashes (ASan/UBSan in the asan build), nothing leaks (LSan at
 *     exit covers every iteration);
 *   - a step that fails says so (a negative code, or a JSON error reply);
 *   - a step that succeeds despite the failure (an allocation with a fallback)
 *     gives the answer bitwise equal to the one without failures. */
#include <stdint.h>

#include "check.h"
#include "basal.h"
#include "protocol/pyjson.h"
#include "device/device.h"
#include "engine/engine.h"
#include "engine/plan.h"
#include "engine/runner.h"

static long n_alloc;      /* allocations since arm() */
static long fail_at = -1; /* the allocation (1-based) that fails; -1 = none */
static long n_failed;

static int should_fail(void) {
    if (fail_at < 0) return 0;
    if (++n_alloc == fail_at) {
        n_failed++;
        return 1;
    }
    return 0;
}

void *__real_malloc(size_t n);
void *__real_calloc(size_t a, size_t b);
void *__real_realloc(void *p, size_t n);
char *__real_strdup(const char *s);
int __real_posix_memalign(void **p, size_t al, size_t n);
void *__real_aligned_alloc(size_t al, size_t n);
void *__wrap_malloc(size_t n) { return should_fail() ? NULL : __real_malloc(n); }
void *__wrap_calloc(size_t a, size_t b) { return should_fail() ? NULL : __real_calloc(a, b); }
void *__wrap_realloc(void *p, size_t n) { return should_fail() ? NULL : __real_realloc(p, n); }
char *__wrap_strdup(const char *s) { return should_fail() ? NULL : __real_strdup(s); }
int __wrap_posix_memalign(void **p, size_t al, size_t n) { return should_fail() ? 12 : __real_posix_memalign(p, al, n); }
void *__wrap_aligned_alloc(size_t al, size_t n) { return should_fail() ? NULL : __real_aligned_alloc(al, n); }

/* Counting only (at = 0) or failing the at-th allocation from now on. */
static void arm(long at) {
    n_alloc = 0;
    n_failed = 0;
    fail_at = at;
}
static long disarm(void) {
    long n = n_alloc;
    fail_at = -1;
    return n;
}

static const char *BODY =
    "{\"model\":\"basal-tiny\",\"state\":\"Klient: od wczoraj nie mogę zalogować się do bankowości.\","
    "\"questions\":{\"d\":{\"type\":\"choice\",\"instructions\":\"Dział?\",\"criteria\":{\"cards\":\"Karty\","
    "\"online\":\"Bankowość\",\"loans\":\"Kredyty\"}},\"n\":{\"type\":\"noul\",\"instructions\":\"Czy pilne?\"},"
    "\"s\":{\"type\":\"score\",\"instructions\":\"Pilność?\",\"criteria\":[\"niska\",\"średnia\",\"wysoka\"]},"
    "\"m\":{\"type\":\"multi\",\"instructions\":\"Tematy?\",\"criteria\":[\"karta\",\"login\",\"karta\"],\"max\":1},"
    "\"a\":{\"type\":\"act\",\"instructions\":\"Czy pilne?\",\"costs\":{\"go\":{\"true\":0,\"false\":9},"
    "\"human\":{\"true\":1,\"false\":1}},\"max_error\":0.05},"
    /* a choice with 11 options: two engine steps (03 §5) */
    "\"L\":{\"type\":\"choice\",\"criteria\":[\"a\",\"b\",\"c\",\"d\",\"e\",\"f\",\"g\",\"h\",\"i\",\"j\",\"k\"]}}}";

/* One whole decision. Returns 0 with the answer in out, 1 with a JSON error
 * reply (its status in *status), or a negative code. */
static int decide(bs_basal_model *m, const bs_prefix_set *pinned, bs_buf *out, int *status) {
    bs_letter_cache lc;
    bs_letter_cache_init(&lc);
    bs_reply rep;
    bs_reply_init(&rep);
    bs_err e = {0};
    bs_plan p;
    out->len = 0;
    int rc = bs_plan_text(&p, BODY, strlen(BODY), BS_DIALECT_SYSTEMONE, m, &lc, &rep, &e);
    if (rc == 0) {
        bs_runner run;
        bs_engine_opts eo;
        bs_engine_opts_default(&eo);
        bs_runner_init(&run, m, eo.tree_max_tokens, eo.forward_max_tokens, pinned, 1 << 20, NULL, 0);
        bs_plan *pp = &p;
        rc = bs_runner_run_all(&run, &pp, 1, &lc, NULL, &e);
        if (rc == 0) rc = bs_plan_refusal(&p, m, &rep, &e) == 0 ? 0 : BS_EINTERNAL; /* this act has a defer action */
        if (rc == 0) rc = bs_plan_answer(&p, m, -1, out, &e);
        if (rc == 0 && out->oom) rc = BS_ENOMEM;
        bs_runner_free(&run);
    } else if (rc == BS_EINVAL && rep.body.len) {
        *status = rep.status;
        bj_value *v = NULL;
        bs_err pe = {0};
        CHECK(!rep.body.oom && bj_parse(rep.body.data, rep.body.len, NULL, &v, &pe) == 0);
        bj_free(v);
        rc = 1;
    }
    bs_plan_free(&p);
    bs_reply_free(&rep);
    bs_letter_cache_free(&lc);
    return rc;
}

/* Every allocation of one decision made to fail in turn, in the model's
 * current compute mode. */
static void sweep_decisions(bs_basal_model *m, const char *mode) {
    bs_err e = {0};
    bs_prefix_set pinned = {0};
    CHECK_INT(bs_prefix_set_build(&pinned, m, NULL, &e), 0);
    bs_buf ref, got;
    bs_buf_init(&ref);
    bs_buf_init(&got);
    int st = 0;
    arm(0);
    CHECK_INT(decide(m, &pinned, &ref, &st), 0);
    long total = disarm();
    fprintf(stderr, "a decision makes %ld allocations\n", total);
    CHECK(total > 50);
    long failed_cleanly = 0, survived = 0;
    for (long n = 1; n <= total; n++) {
        arm(n);
        st = 0;
        int rc = decide(m, &pinned, &got, &st);
        disarm();
        if (rc == 0) {
            survived++;
            if (got.len != ref.len || memcmp(got.data, ref.data, ref.len)) {
                fprintf(stderr, "allocation %ld failed, yet a different answer came back:\n%s\n", n, got.data);
                CHECK(0);
            }
        } else {
            failed_cleanly++;
            if (rc == 1 && st != 500) { /* an out-of-memory reply is a server error, never the client's */
                fprintf(stderr, "allocation %ld failed: status %d\n", n, st);
                CHECK(0);
            }
        }
    }
    fprintf(stderr, "%s decision: %ld allocations swept, %ld failed cleanly, %ld tolerated with the same answer\n",
            mode, total, failed_cleanly, survived);
    CHECK_INT(failed_cleanly + survived, total);
    bs_prefix_set_free(&pinned);
    bs_buf_free(&ref);
    bs_buf_free(&got);
}

/* Every allocation of one basal_decide_batch call (include/basal.h) made to
 * fail in turn: a request answered, one refused while planning, the first
 * again. A failed call returns a negative code with a message and no result
 * JSON; a call that survives gives the results of the call without failures. */
static void sweep_session(const char *dir) {
    basal_options o;
    basal_options_init(&o);
    o.threads = 1;
    basal_session *s = NULL;
    bs_err e;
    CHECK_INT(basal_open(&s, dir, &o, &e), 0);
    if (!s) return;
    const char *req[3] = {BODY, "{\"model\":\"basal-tiny\",\"state\":\"x\",\"questions\":{}}", BODY};
    size_t lens[3];
    for (int i = 0; i < 3; i++) lens[i] = strlen(req[i]);
    basal_result ref[3], got[3];
    CHECK_INT(basal_decide_batch(s, 3, req, lens, ref, &e), 0); /* fills the letter cache */
    for (int i = 0; i < 3; i++) basal_result_free(&ref[i]);
    arm(0);
    CHECK_INT(basal_decide_batch(s, 3, req, lens, ref, &e), 0);
    long total = disarm();
    CHECK(ref[0].status == 200 && ref[1].status == 422 && ref[2].status == 200);
    long failed_cleanly = 0, survived = 0;
    for (long n = 1; n <= total; n++) {
        arm(n);
        int rc = basal_decide_batch(s, 3, req, lens, got, &e);
        disarm();
        if (rc < 0) {
            failed_cleanly++;
            CHECK(e.msg[0] && !got[0].json && !got[1].json && !got[2].json);
        } else {
            survived++;
            for (int i = 0; i < 3; i++)
                if (got[i].status != ref[i].status || got[i].len != ref[i].len || memcmp(got[i].json, ref[i].json, ref[i].len)) {
                    fprintf(stderr, "session: allocation %ld failed, yet result %d differs:\n%s\n", n, i, got[i].json);
                    CHECK(0);
                }
        }
        for (int i = 0; i < 3; i++) basal_result_free(&got[i]);
    }
    fprintf(stderr, "session batch of 3: %ld allocations swept, %ld failed cleanly, %ld tolerated with the same results\n",
            total, failed_cleanly, survived);
    CHECK(total > 50);
    for (int i = 0; i < 3; i++) basal_result_free(&ref[i]);
    basal_close(s);
}

int main(void) {
    const char *fx = check_env("FIXTURES", "build/fixtures");
    char dir[1024];
    snprintf(dir, sizeof dir, "%s/tiny-bias", fx);
    bs_pool *pool = bs_pool_create(1);
    bs_basal_model m;
    bs_err e = {0};
    if (bs_basal_load(&m, dir, pool, 1, &e) < 0) {
        fprintf(stderr, "%s\n", e.msg);
        CHECK(0);
        return check_report("test_alloc_fail");
    }
    sweep_decisions(&m, "f32");
    /* the bf16 compute mode: attaching it packs the weights for the AMX or
     * the avx512-bf16 kernels where the CPU has them (each failure point: a
     * clean error, the model left in f32), and the AMX driver, whose scratch
     * failing takes its serial path: the answer must stay bitwise the same */
    arm(0);
    CHECK_INT(bs_device_attach(&m.model, "cpu", "bf16", &e), 0);
    long attach_total = disarm();
    for (long n = 1; n <= attach_total; n++) {
        CHECK_INT(bs_device_attach(&m.model, "cpu", "f32", &e), 0);
        arm(n);
        bs_err ae = {0};
        int rc = bs_device_attach(&m.model, "cpu", "bf16", &ae);
        disarm();
        if (rc < 0) {
            CHECK_INT(rc, BS_ENOMEM);
            CHECK(ae.msg[0] != 0);
            CHECK(m.model.compute == BS_COMPUTE_F32);
        }
    }
    fprintf(stderr, "bf16 attach (%s kernels): %ld allocations swept\n", bs_gemm_bf16_kernel_name(), attach_total);
    CHECK_INT(bs_device_attach(&m.model, "cpu", "bf16", &e), 0);
    sweep_decisions(&m, "bf16");
    bs_basal_free(&m);

    /* model loading: the count first, then a sample of failure points spread
     * over it (a full sweep would be ~10^5 loads of the 32k-entry tokenizer) */
    arm(0);
    CHECK_INT(bs_basal_load(&m, dir, pool, 1, &e), 0);
    long load_total = disarm();
    bs_basal_free(&m);
    long tried = 0;
    for (long n = 1; n <= load_total; n += 1 + load_total / 400) {
        arm(n);
        bs_err le = {0};
        int rc = bs_basal_load(&m, dir, pool, 1, &le);
        disarm();
        tried++;
        if (rc == 0) {
            bs_basal_free(&m);
        } else if (!le.msg[0]) {
            fprintf(stderr, "load with allocation %ld failed without a message\n", n);
            CHECK(0);
        }
    }
    fprintf(stderr, "model load: %ld allocations, %ld failure points tried\n", load_total, tried);
    bs_pool_destroy(pool);
    sweep_session(dir);
    return check_report("test_alloc_fail");
}
