/* basal_session (include/basal.h): one model loaded in-process and
 * /v1/systemone requests decided on it one at a time, through the same
 * planning, packed forwards and answer writer as the server's engine
 * (bs_plan_text → bs_runner_run_all → bs_plan_refusal → bs_plan_answer).
 * basal_decide is a batch of one; the logit lens of a request goes the same
 * path (bs_lens_plan before the forwards, bs_lens_document around the answer). */
#include "api/session.h"

#include <stdlib.h>
#include <string.h>

#include "protocol/reply.h"
#include "base/util.h"
#include "cpu/pool.h"
#include "device/device.h"
#include "engine/engine.h"
#include "engine/lens.h"
#include "hub/hub.h"

struct basal_session {
    bs_pool *pool;
    bs_basal_model m;
    int loaded, run_ready;
    bs_letter_cache lc;
    bs_prefix_set pinned;
    bs_runner run;
    bs_usage last;   /* of the last decision */
    int last_ran;
};

void basal_options_init(basal_options *o) {
    if (o) memset(o, 0, sizeof *o);
}

const char *basal_version(void) {
    return BASAL_VERSION;
}

int basal_open(basal_session **out, const char *model, const basal_options *opt, bs_err *e) {
    basal_options defaults;
    char *dir = NULL;
    int rc;
    if (e) {
        e->code = 0;
        e->msg[0] = 0;
    }
    if (!out) return bs_fail(e, BS_EINVAL, "no place for the session given");
    *out = NULL;
    if (!opt) {
        basal_options_init(&defaults);
        opt = &defaults;
    }
    if (!model) return bs_fail(e, BS_EINVAL, "no model given");
    if (opt->orders < 0 || opt->orders > 2) return bs_fail(e, BS_EINVAL, "orders is %d (1 or 2)", opt->orders);
    basal_session *s = calloc(1, sizeof *s);
    if (!s) return bs_fail(e, BS_ENOMEM, "out of memory");
    bs_letter_cache_init(&s->lc);
    if ((rc = bs_hub_resolve(model, NULL, BS_HUB_DOWNLOAD, NULL, &dir, e)) < 0) goto fail;
    if (!(s->pool = bs_pool_create(opt->threads))) {
        rc = bs_fail(e, BS_ENOMEM, "cannot start the thread pool");
        goto fail;
    }
    if ((rc = bs_basal_load(&s->m, dir, s->pool, 1, e)) < 0) goto fail;
    s->loaded = 1;
    if (opt->orders) s->m.orders = opt->orders;
    if ((opt->no_calibration || opt->calibration) &&
        (rc = bs_basal_set_calibration(&s->m, opt->no_calibration ? NULL : opt->calibration, e)) < 0)
        goto fail;
    s->m.model.int8_alpha = opt->int8_smooth_alpha;
    rc = bs_device_attach_ex(&s->m.model, opt->backend ? opt->backend : "auto", opt->dtype, opt->gemm_table, e);
    if (rc < 0) goto fail;
    if (!opt->no_prefix_cache && (rc = bs_prefix_set_build(&s->pinned, &s->m, NULL, e)) < 0) goto fail;
    bs_engine_opts eo;
    bs_engine_opts_default(&eo);
    if (opt->tree_max_tokens > 0) eo.tree_max_tokens = opt->tree_max_tokens;
    bs_runner_init(&s->run, &s->m, eo.tree_max_tokens, eo.forward_max_tokens, opt->no_prefix_cache ? NULL : &s->pinned,
                   0, NULL, 0);
    s->run.readout_bf16 = opt->readout_bf16;
    s->run.evidence_separate = opt->evidence_separate;
    s->run_ready = 1;
    free(dir);
    *out = s;
    return BS_OK;
fail:
    free(dir);
    basal_close(s);
    return rc;
}

void basal_close(basal_session *s) {
    if (!s) return;
    if (s->run_ready) bs_runner_free(&s->run);
    bs_prefix_set_free(&s->pinned);
    if (s->loaded) bs_basal_free(&s->m);
    bs_letter_cache_free(&s->lc);
    bs_pool_destroy(s->pool);
    free(s);
}

const char *basal_model_name(const basal_session *s) {
    return s ? s->m.name : "";
}

const bs_basal_model *bs_session_model(const basal_session *s) {
    return &s->m;
}

bs_runner *bs_session_runner(basal_session *s) {
    return &s->run;
}

bs_letter_cache *bs_session_letters(basal_session *s) {
    return &s->lc;
}

bs_pool *bs_session_pool(basal_session *s) {
    return s->pool;
}

int bs_session_threads(const basal_session *s) {
    return bs_pool_size(s->pool);
}

void bs_session_set_batching(basal_session *s, int batching) {
    s->run.batching = batching;
}

bs_usage bs_session_last_usage(const basal_session *s) {
    return s->last;
}

int bs_session_last_ran(const basal_session *s) {
    return s->last_ran;
}

void basal_result_free(basal_result *r) {
    if (!r) return;
    free(r->json);
    memset(r, 0, sizeof *r);
}

/* The result takes b's bytes. */
static int take(basal_result *r, int status, bs_buf *b, bs_err *e) {
    if (b->oom) return bs_fail(e, BS_ENOMEM, "out of memory");
    if (!b->data) bs_buf_put(b, "", 0);
    if (b->oom) return bs_fail(e, BS_ENOMEM, "out of memory");
    r->status = status;
    r->json = b->data;
    r->len = b->len;
    bs_buf_init(b);
    return BS_OK;
}

/* One request of a call: its plan, and the error body that refuses it
 * (validation and planning, a finalist prompt, an act refusal). */
typedef struct {
    bs_plan plan;
    bs_reply rep;
    int planned, ran; /* its forwards were asked for; they ran and it was not refused between the rounds */
} decision;

/* Steps 4-10 of 02 §3 for every request: a refused one keeps its error body in
 * rep; the others' plans go to pp (*np of them). */
static int plan_all(basal_session *s, bs_dialect d, size_t n, const char *const *req, const size_t *lens, int lens_doc,
                    decision *dc, bs_plan **pp, bs_reply **rp, size_t *np, basal_result *res, bs_err *e) {
    *np = 0;
    for (size_t i = 0; i < n; i++) {
        double t0 = bs_now_ms();
        const char *body = req && req[i] ? req[i] : "";
        int rc = bs_plan_text(&dc[i].plan, body, req && req[i] ? lens[i] : 0, d, &s->m, &s->lc, &dc[i].rep, e);
        if (rc == BS_OK && lens_doc) rc = bs_lens_plan(&dc[i].plan, &s->m, &dc[i].rep, e);
        res[i].plan_ms = bs_now_ms() - t0;
        if (rc == BS_EINVAL && dc[i].rep.body.len) continue;
        if (rc < 0) return rc;
        dc[i].planned = 1;
        pp[*np] = &dc[i].plan;
        rp[(*np)++] = &dc[i].rep;
    }
    return BS_OK;
}

/* A request whose forwards ran: its refusal (03 §2.5: an act refusal without
 * a defer action is the request's error body) or its answer; with lens_doc,
 * the lens document (engine/lens.h) around that answer. */
static int answer_one(basal_session *s, decision *dc, int lens_doc, basal_result *r, bs_err *e) {
    int rc = bs_plan_refusal(&dc->plan, &s->m, &dc->rep, e);
    if (rc > 0) return take(r, dc->rep.status, &dc->rep.body, e);
    if (rc < 0) return rc;
    bs_buf out, doc;
    bs_buf_init(&out);
    bs_buf_init(&doc);
    rc = bs_plan_answer(&dc->plan, &s->m, -1, &out, e);
    if (rc == 0 && lens_doc) rc = bs_lens_document(&dc->plan, &s->m, out.data ? out.data : "", out.len, &doc, e);
    if (rc == 0) rc = take(r, 200, lens_doc ? &doc : &out, e);
    bs_buf_free(&doc);
    bs_buf_free(&out);
    return rc;
}

static int decide_calls(basal_session *s, bs_dialect d, size_t n, const char *const *req, const size_t *lens,
                        int lens_doc, basal_result *res, bs_err *e) {
    if (e) {
        e->code = 0;
        e->msg[0] = 0;
    }
    if (res) memset(res, 0, n * sizeof *res);
    if (!s || (n && (!res || (req && !lens)))) return bs_fail(e, BS_EINVAL, "no session, results or lengths given");
    memset(&s->last, 0, sizeof s->last);
    s->last_ran = 0;
    decision *dc = calloc(n ? n : 1, sizeof *dc);
    bs_plan **pp = calloc(n ? n : 1, sizeof *pp);
    bs_reply **rp = calloc(n ? n : 1, sizeof *rp);
    size_t np = 0;
    int rc = dc && pp && rp ? BS_OK : bs_fail(e, BS_ENOMEM, "out of memory");
    for (size_t i = 0; dc && i < n; i++) bs_reply_init(&dc[i].rep);
    if (rc == BS_OK) rc = plan_all(s, d, n, req, lens, lens_doc, dc, pp, rp, &np, res, e);
    double t1 = bs_now_ms();
    int64_t f0 = s->run.forward_tokens;
    /* every step of every plan (03 §5.4: round 1, then the large choices'
     * finalists); a finalist prompt over the model's limit fails only its
     * request (04 §3 P7), its rep filled */
    if (rc == BS_OK && np) rc = bs_runner_run_all(&s->run, pp, np, &s->lc, rp, e);
    for (size_t i = 0; rc == BS_OK && i < n; i++) {
        decision *di = &dc[i];
        if (!di->planned || di->rep.body.len) { /* refused while planning, or its finalists were */
            rc = take(&res[i], di->rep.status, &di->rep.body, e);
            continue;
        }
        di->ran = 1;
        s->last.input_tokens += di->plan.usage.input_tokens;
        s->last.questions += di->plan.usage.questions;
        s->last.branches += di->plan.usage.branches;
        s->last_ran++;
        rc = answer_one(s, di, lens_doc, &res[i], e);
    }
    s->last.computed_tokens = s->run.forward_tokens - f0;
    double fwd_ms = bs_now_ms() - t1;
    for (size_t i = 0; rc == BS_OK && i < n; i++)
        if (dc[i].ran) res[i].forward_ms = fwd_ms;
    for (size_t i = 0; dc && i < n; i++) {
        bs_plan_free(&dc[i].plan);
        bs_reply_free(&dc[i].rep);
    }
    free(dc);
    free(pp);
    free(rp);
    if (rc < 0) {
        if (e && !e->msg[0]) bs_fail(e, rc, "%s", bs_strerror(rc));
        for (size_t i = 0; res && i < n; i++) basal_result_free(&res[i]);
    }
    return rc;
}

int bs_session_decide_batch(basal_session *s, bs_dialect d, size_t n, const char *const *req, const size_t *lens,
                            basal_result *res, bs_err *e) {
    return decide_calls(s, d, n, req, lens, 0, res, e);
}

int basal_decide_batch(basal_session *s, size_t n, const char *const *requests, const size_t *lens,
                       basal_result *results, bs_err *e) {
    return bs_session_decide_batch(s, BS_DIALECT_SYSTEMONE, n, requests, lens, results, e);
}

int basal_decide(basal_session *s, const char *request, size_t len, basal_result *r, bs_err *e) {
    return bs_session_decide_batch(s, BS_DIALECT_SYSTEMONE, 1, &request, &len, r, e);
}

int basal_lens(basal_session *s, const char *request, size_t len, basal_result *r, bs_err *e) {
    return decide_calls(s, BS_DIALECT_SYSTEMONE, 1, &request, &len, 1, r, e);
}
