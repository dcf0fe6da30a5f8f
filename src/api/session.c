/* basal_session (include/basal.h): one model loaded in-process and
 * /v1/systemone requests decided on it one at a time, through the same
 * planning, packed forwards and answer writer as the server's engine
 * (bs_plan_text → bs_runner_run_all → bs_plan_refusal → bs_plan_answer). */
#include "api/session.h"

#include <stdlib.h>
#include <string.h>

#include "protocol/reply.h"
#include "base/util.h"
#include "cpu/pool.h"
#include "device/device.h"
#include "engine/engine.h"
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
    memset(o, 0, sizeof *o);
}

int basal_open(basal_session **out, const char *model, const basal_options *opt, bs_err *e) {
    basal_options defaults;
    char *dir = NULL;
    int rc;
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
    return s->m.name;
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

int basal_decide(basal_session *s, const char *request, size_t len, basal_result *r, bs_err *e) {
    bs_plan plan = { 0 };
    bs_reply rep;
    bs_buf out;
    memset(r, 0, sizeof *r);
    memset(&s->last, 0, sizeof s->last);
    s->last_ran = 0;
    bs_reply_init(&rep);
    bs_buf_init(&out);
    double t0 = bs_now_ms(), t1 = t0;
    int rc = bs_plan_text(&plan, request ? request : "", request ? len : 0, BS_DIALECT_SYSTEMONE, &s->m, &s->lc, &rep, e);
    if (rc == BS_EINVAL && rep.body.len) goto refused;
    if (rc < 0) goto fail;
    t1 = bs_now_ms();
    r->plan_ms = t1 - t0;
    bs_plan *pp = &plan;
    int64_t f0 = s->run.forward_tokens;
    /* both steps of a request with large choices (03 §5.4): round 1, then the
     * finalists; a finalist prompt over the model's limit fails only this
     * request (04 §3 P7) with rep filled */
    rc = bs_runner_run_all(&s->run, &pp, 1, &s->lc, &rep, e);
    if (rc == BS_EINVAL && rep.body.len) goto refused;
    if (rc < 0) goto fail;
    s->last = plan.usage;
    s->last.computed_tokens = s->run.forward_tokens - f0;
    s->last_ran = 1;
    bs_reply_free(&rep);
    bs_reply_init(&rep);
    /* 03 §2.5: an act refusal without a defer action is the request's error body */
    if ((rc = bs_plan_refusal(&plan, &s->m, &rep, e)) > 0) goto refused;
    if (rc < 0) goto fail;
    if ((rc = bs_plan_answer(&plan, &s->m, -1, &out, e)) < 0) goto fail;
    r->forward_ms = bs_now_ms() - t1;
    if ((rc = take(r, 200, &out, e)) < 0) goto fail;
    bs_plan_free(&plan);
    bs_reply_free(&rep);
    return BS_OK;
refused:
    if (!r->plan_ms) r->plan_ms = bs_now_ms() - t0;
    rc = take(r, rep.status, &rep.body, e);
    bs_plan_free(&plan);
    bs_reply_free(&rep);
    return rc;
fail:
    if (e && !e->msg[0]) bs_fail(e, rc, "%s", bs_strerror(rc));
    basal_result_free(r);
    bs_buf_free(&out);
    bs_reply_free(&rep);
    bs_plan_free(&plan);
    return rc;
}
