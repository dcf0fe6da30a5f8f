#include "engine/engine.h"

#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/log.h"
#include "base/progress.h"
#include "protocol/respjson.h"
#include "base/util.h"
#include "engine/lens.h"
#include "engine/runner.h"
#include "engine/triesize.h"

void bs_engine_opts_default(bs_engine_opts *o) {
    memset(o, 0, sizeof *o);
    o->max_batch_tokens = 8192;
    o->schedule = BS_SCHED_HRRN;
    o->long_tokens = 4096;
    o->tree_max_tokens = 32768;
    o->forward_max_tokens = 8192;
    o->limits.max_questions = BS_DEFAULT_MAX_QUESTIONS;
    o->limits.max_request_tokens = BS_DEFAULT_MAX_REQUEST_TOKENS;
}

void bs_job_init(bs_job *j) {
    memset(j, 0, sizeof *j);
    atomic_init(&j->cancelled, 0);
    bs_buf_init(&j->reply);
}

/* The plan (and the request it owns), once the reply is written. */
static void drop_plan(bs_job *j) {
    if (j->plan) {
        bs_plan_free(j->plan);
        free(j->plan);
        j->plan = NULL;
    }
}

void bs_job_release(bs_job *j) {
    bs_buf_free(&j->reply);
    drop_plan(j);
    bj_free(j->body);
    j->body = NULL;
}

typedef struct lane {
    struct bs_engine *en;
    int is_long;
    pthread_t th;
    int started;
    bs_runner run;
    bs_job **wait;      /* planned, waiting for admission */
    size_t nw, capw;
    double rate;        /* packed tokens per second (04 §9) */
    /* queue: parsed jobs for the main lane, planned ones for the long lane */
    pthread_mutex_t mu;
    pthread_cond_t cv;
    bs_job *qh, *qt;
    int stopping;
    double watch_t0, watch_last, watch_every_ms; /* the log of a long forward (lane_watch) */
    int watch_lines;
} lane;

struct bs_engine {
    bs_basal_model *m;
    bs_engine_opts o;
    bs_gate *gate;
    int own_gate;
    bs_letter_cache lc;
    bs_prefix_set pinned;
    lane main, lng;
    int has_long;
    _Atomic int64_t queued, batches, batch_requests, input_tokens, dropped;
    bs_batch_fn batch_fn;
    void *batch_ctx;
};

void bs_engine_set_batch_hook(bs_engine *en, bs_batch_fn fn, void *ctx) {
    en->batch_fn = fn;
    en->batch_ctx = ctx;
}

/* ---- completing jobs ---- */

static void finish(bs_engine *en, bs_job *j) {
    drop_plan(j);
    en->queued--;
    j->done(j, j->done_ctx);
}

static void complete_reply(bs_engine *en, bs_job *j, const bs_reply *rep) {
    j->status = rep->status;
    j->reply.len = 0;
    bs_buf_put(&j->reply, rep->body.data, rep->body.len);
    finish(en, j);
}

/* 04 §7 B5: the batch's error, in the request's dialect. */
static void complete_internal(bs_engine *en, bs_job *j, const char *msg) {
    bs_reply rep;
    bs_reply_init(&rep);
    bs_reply_internal(&rep, j->dialect, msg);
    complete_reply(en, j, &rep);
    bs_reply_free(&rep);
}

/* ---- planning (04 §3) ---- */

/* Steps 8–10 on the main lane; returns 1 if the job is planned, 0 if it was
 * answered (error) here. */
static int plan_job(bs_engine *en, bs_job *j) {
    bs_reply rep;
    bs_reply_init(&rep);
    bs_err e = {0};
    bj_value *body = j->body;
    j->body = NULL;
    int rc;
    bs_plan *p = calloc(1, sizeof *p);
    if (!p) {
        bj_free(body);
        rc = bs_fail(&e, BS_ENOMEM, "out of memory");
    } else if ((rc = bs_plan_request(p, body, j->dialect, en->m, &en->lc, &en->o.limits, en->o.state_cache_mb > 0, &rep,
                                      &e)) < 0) {
        free(p);
    } else if (j->lens && (rc = bs_lens_plan(p, en->m, &rep, &e)) < 0) {
        bs_plan_free(p);
        free(p);
    } else {
        j->plan = p;
    }
    if (rc == BS_EINVAL && rep.body.len) {
        complete_reply(en, j, &rep);
    } else if (rc < 0) {
        complete_internal(en, j, e.msg[0] ? e.msg : bs_strerror(rc));
    } else {
        j->cost = bs_plan_cost(j->plan);
    }
    bs_reply_free(&rep);
    return rc == 0;
}

/* ---- admission (04 §9) ---- */

typedef struct { bs_job *j; double ratio; size_t idx; } ranked;

static int cmp_ranked(const void *a, const void *b) {
    const ranked *x = a, *y = b;
    if (x->ratio != y->ratio) return x->ratio > y->ratio ? -1 : 1;
    return (x->idx > y->idx) - (x->idx < y->idx); /* stable */
}

size_t bs_admit(bs_job **wait, size_t *nw, double now_ms, double rate, bs_schedule sched, int64_t budget,
                bs_job **batch, int64_t *batch_tokens) {
    size_t n = *nw, nb = 0, keep = 0;
    if (n == 0) return 0;
    if (sched == BS_SCHED_HRRN) {
        ranked *r = malloc(n * sizeof *r);
        if (r) {
            for (size_t i = 0; i < n; i++) {
                r[i].j = wait[i];
                r[i].ratio = (now_ms - wait[i]->arrival_ms) / 1000.0 * rate / (double)wait[i]->cost;
                r[i].idx = i;
            }
            qsort(r, n, sizeof *r, cmp_ranked);
            for (size_t i = 0; i < n; i++) wait[i] = r[i].j;
            free(r);
        }
    }
    bs_trie_counter tc;
    bs_tc_init(&tc);
    for (size_t i = 0; i < n; i++) {
        bs_item *items;
        size_t ni = bs_plan_step_items(wait[i]->plan, &items), np = 0;
        for (size_t k = 0; k < ni; k++) np += (size_t)items[k].n_orders;
        const int32_t *pr[2 * 64];
        int32_t ln[2 * 64];
        const int32_t **prs = np <= 128 ? pr : malloc(np * sizeof *prs);
        int32_t *lns = np <= 128 ? ln : malloc(np * sizeof *lns);
        int admit = i == 0;
        if (prs && lns) {
            for (size_t k = 0, q = 0; k < ni; k++)
                for (int o = 0; o < items[k].n_orders; o++, q++) {
                    prs[q] = items[k].orders[o].ids;
                    lns[q] = items[k].orders[o].n_ids;
                }
            if (!admit) {
                int64_t g = bs_tc_growth(&tc, prs, lns, np);
                admit = g >= 0 && tc.tokens + g <= budget;
            }
            if (admit && bs_tc_insert(&tc, prs, lns, np) < 0) admit = i == 0;
        }
        if (prs != pr) free(prs);
        if (lns != ln) free(lns);
        if (admit) batch[nb++] = wait[i];
        else wait[keep++] = wait[i];
    }
    *batch_tokens = tc.tokens > 0 ? tc.tokens : 1;
    bs_tc_free(&tc);
    *nw = keep;
    return nb;
}

static int push_wait(lane *L, bs_job *j);

/* A lens job: its reply, the answer, becomes the lens document around it. */
static int lens_reply(bs_engine *en, bs_job *j, bs_err *e) {
    bs_buf doc;
    bs_buf_init(&doc);
    int rc = bs_lens_document(j->plan, en->m, j->reply.data ? j->reply.data : "", j->reply.len, &doc, e);
    if (rc < 0) {
        bs_buf_free(&doc);
        return rc;
    }
    bs_buf_free(&j->reply);
    j->reply = doc;
    return BS_OK;
}

/* Drops cancelled jobs (04 §11 X2; also a large choice waiting for its round
 * 2), admits one batch, runs one engine step of it, replies to the requests
 * it finished and puts the others (round 2 pending) back in the waiting list. */
static void admit_and_run(lane *L) {
    bs_engine *en = L->en;
    double now = bs_now_ms();
    size_t keep = 0;
    for (size_t i = 0; i < L->nw; i++) {
        bs_job *j = L->wait[i];
        if (atomic_load(&j->cancelled)) {
            j->status = 0;
            en->dropped++;
            finish(en, j);
        } else {
            L->wait[keep++] = j;
        }
    }
    L->nw = keep;
    if (!L->nw) return;
    bs_job **batch = malloc(L->nw * sizeof *batch);
    bs_plan **plans = malloc(L->nw * sizeof *plans);
    if (!batch || !plans) {
        free(batch);
        free(plans);
        for (size_t i = 0; i < L->nw; i++) complete_internal(en, L->wait[i], "out of memory");
        L->nw = 0;
        return;
    }
    int64_t tokens = 0;
    size_t nb = bs_admit(L->wait, &L->nw, now, L->rate, en->o.schedule, en->o.max_batch_tokens, batch, &tokens);
    for (size_t i = 0; i < nb; i++) plans[i] = batch[i]->plan;
    bs_err e = {0};
    int64_t computed0 = L->run.forward_tokens;
    int rc = bs_runner_run(&L->run, plans, nb, &e);
    int64_t computed = L->run.forward_tokens - computed0;
    double end = bs_now_ms(), compute_ms = end - now;
    if (compute_ms > 1) L->rate = 0.8 * L->rate + 0.2 * ((double)tokens / (compute_ms / 1000.0));
    en->batches++;
    en->batch_requests += (int64_t)nb;
    if (en->batch_fn) en->batch_fn(en->batch_ctx, L->is_long, (int)nb, compute_ms, rc >= 0);
    for (size_t i = 0; i < nb; i++) {
        bs_job *j = batch[i];
        if (rc < 0) {
            complete_internal(en, j, e.msg[0] ? e.msg : bs_strerror(rc));
            continue;
        }
        if (j->steps++ == 0) { /* the request's first step: its queue time and batch */
            j->queue_ms = now - j->arrival_ms;
            j->first_admit_ms = now;
            j->batch_requests = (int)nb;
            j->orders = en->m->orders;
        }
        j->computed += computed;
        j->compute_ms = end - j->first_admit_ms; /* 04 §14: admission start to the end of all its rounds */
        j->lane = L->is_long;
        bs_err ae = {0};
        bs_reply refusal;
        bs_reply_init(&refusal);
        /* 03 §5.4: after round 1 a large choice's finals re-enter this lane's
         * waiting list as the job's next step, packed with whatever waits then */
        int more = bs_plan_advance(j->plan, en->m, &en->lc, &refusal, &ae);
        if (more == 1) {
            bs_reply_free(&refusal);
            j->cost = bs_plan_cost(j->plan);
            if (push_wait(L, j) < 0) complete_internal(en, j, "out of memory");
            continue;
        }
        if (more < 0) {
            if (more == BS_EINVAL && refusal.body.len) complete_reply(en, j, &refusal);
            else complete_internal(en, j, ae.msg[0] ? ae.msg : bs_strerror(more));
            bs_reply_free(&refusal);
            continue;
        }
        /* 02 §4.6: handler arrival to response construction, rounded to 0.01 ms */
        double latency = round((bs_now_ms() - j->arrival_ms) * 100.0) / 100.0;
        int rf = bs_plan_refusal(j->plan, en->m, &refusal, &ae);
        if (rf != 0) { /* 03 §2.5: an act refusal without a defer action fails the request */
            if (rf > 0) complete_reply(en, j, &refusal);
            else complete_internal(en, j, ae.msg);
            bs_reply_free(&refusal);
            continue;
        }
        bs_reply_free(&refusal);
        j->reply.len = 0;
        if (bs_plan_answer(j->plan, en->m, latency, &j->reply, &ae) < 0 || (j->lens && lens_reply(en, j, &ae) < 0)) {
            complete_internal(en, j, ae.msg);
            continue;
        }
        j->usage = j->plan->usage;
        j->usage.computed_tokens = j->computed;
        en->input_tokens += (int64_t)j->usage.input_tokens;
        j->status = 200;
        finish(en, j);
    }
    free(batch);
    free(plans);
}

static int push_wait(lane *L, bs_job *j) {
    if (L->nw == L->capw) {
        size_t ncap = L->capw ? L->capw * 2 : 64;
        bs_job **nwl = realloc(L->wait, ncap * sizeof *nwl);
        if (!nwl) return BS_ENOMEM;
        L->wait = nwl;
        L->capw = ncap;
    }
    L->wait[L->nw++] = j;
    return BS_OK;
}

/* ---- lanes (04 §8) ---- */

/* Queues j; with refuse_stopping, a lane told to stop refuses it (returns -1)
 * instead, decided under the lane's lock, so a job is either refused or seen
 * by the lane before it exits. */
static int lane_push(lane *L, bs_job *j, int refuse_stopping) {
    pthread_mutex_lock(&L->mu);
    if (refuse_stopping && L->stopping) {
        pthread_mutex_unlock(&L->mu);
        return -1;
    }
    if (L->qt) L->qt->next = j;
    else L->qh = j;
    L->qt = j;
    pthread_cond_signal(&L->cv);
    pthread_mutex_unlock(&L->mu);
    return 0;
}

static void lane_stop(lane *L) {
    pthread_mutex_lock(&L->mu);
    L->stopping = 1;
    pthread_cond_broadcast(&L->cv);
    pthread_mutex_unlock(&L->mu);
}

/* T3 (main lane) and T4 (long lane): block while nothing waits, drain the
 * queue, plan (main lane only; requests over long_tokens move to the long
 * lane), admit one batch and run it. On stop, everything queued and waiting
 * is still answered; the main lane then stops the long lane. */
static void *lane_main(void *arg) {
    lane *L = arg;
    bs_engine *en = L->en;
    for (;;) {
        pthread_mutex_lock(&L->mu);
        while (!L->qh && L->nw == 0 && !L->stopping) pthread_cond_wait(&L->cv, &L->mu);
        bs_job *taken = L->qh;
        L->qh = L->qt = NULL;
        int stop = L->stopping && !taken && L->nw == 0;
        pthread_mutex_unlock(&L->mu);
        if (stop) break;
        while (taken) {
            bs_job *j = taken;
            taken = j->next;
            j->next = NULL;
            if (!L->is_long && !plan_job(en, j)) continue;
            if (!L->is_long && en->has_long && j->cost > en->o.long_tokens) lane_push(&en->lng, j, 0);
            else if (push_wait(L, j) < 0) complete_internal(en, j, "out of memory");
        }
        admit_and_run(L);
    }
    if (!L->is_long && en->has_long) lane_stop(&en->lng);
    return NULL;
}

/* A long forward (the runner's layer watch) tells the log where it is every
 * 30 s (BASAL_PROGRESS_INTERVAL_MS sets another period), so that an operator
 * looking at a lane busy for minutes on a long document sees it progress;
 * a forward shorter than the period writes nothing. */
static void lane_watch(void *ctx, int done, int n_layers, int32_t tokens) {
    lane *L = ctx;
    double now = bs_now_ms();
    if (done == 0) {
        L->watch_t0 = L->watch_last = now;
        L->watch_lines = 0;
    } else if (done < n_layers && now - L->watch_last >= L->watch_every_ms) {
        bs_log(BS_LOG_INFO, "engine", "%s: %s lane: forward of %d tokens: layer %d of %d done, %.0f s elapsed",
               L->en->m->name, L->is_long ? "long" : "main", (int)tokens, done, n_layers, (now - L->watch_t0) / 1000);
        L->watch_last = now;
        L->watch_lines++;
    } else if (done == n_layers && L->watch_lines) {
        bs_log(BS_LOG_INFO, "engine", "%s: %s lane: forward of %d tokens: done in %.1f s", L->en->m->name,
               L->is_long ? "long" : "main", (int)tokens, (now - L->watch_t0) / 1000);
    }
}

static void lane_init(lane *L, bs_engine *en, int is_long) {
    memset(L, 0, sizeof *L);
    L->en = en;
    L->is_long = is_long;
    L->rate = 3000.0;
    pthread_mutex_init(&L->mu, NULL);
    pthread_cond_init(&L->cv, NULL);
    bs_runner_init(&L->run, en->m, en->o.tree_max_tokens, en->o.forward_max_tokens,
                   en->o.no_prefix_cache ? NULL : &en->pinned, en->o.state_cache_mb << 20, en->gate, is_long);
    L->run.readout_bf16 = en->o.readout_bf16;
    L->run.batching = (bs_batching)en->o.batching;
    L->watch_every_ms = (double)bs_progress_interval_ms(30000);
    L->run.watch = lane_watch;
    L->run.watch_ctx = L;
}

static void lane_free(lane *L) {
    bs_runner_free(&L->run);
    free(L->wait);
    pthread_mutex_destroy(&L->mu);
    pthread_cond_destroy(&L->cv);
}

/* The lanes' threads (lane_init done for both). */
static int start_lanes(bs_engine *en, bs_err *e) {
    if (pthread_create(&en->main.th, NULL, lane_main, &en->main) != 0)
        return bs_fail(e, BS_ENOMEM, "engine: cannot start the main lane thread");
    en->main.started = 1;
    if (en->has_long) {
        if (pthread_create(&en->lng.th, NULL, lane_main, &en->lng) != 0)
            return bs_fail(e, BS_ENOMEM, "engine: cannot start the long lane thread");
        en->lng.started = 1;
    }
    return BS_OK;
}

int bs_engine_create(bs_engine **out, bs_basal_model *m, const bs_engine_opts *opts, bs_gate *gate, bs_err *e) {
    *out = NULL;
    if (!m->has_weights) return bs_fail(e, BS_EINVAL, "engine: model %s loaded without weights", m->name);
    bs_engine *en = calloc(1, sizeof *en);
    if (!en) return bs_fail(e, BS_ENOMEM, "out of memory");
    en->m = m;
    if (opts) en->o = *opts;
    else bs_engine_opts_default(&en->o);
    en->has_long = en->o.long_tokens > 0;
    en->gate = gate;
    if (!gate && en->has_long) {
        if (!(en->gate = bs_gate_create(100.0, NULL, NULL))) { free(en); return bs_fail(e, BS_ENOMEM, "out of memory"); }
        en->own_gate = 1;
    }
    bs_letter_cache_init(&en->lc);
    int rc = BS_OK;
    if (!en->o.no_prefix_cache && (rc = bs_prefix_set_build(&en->pinned, m, en->gate, e)) < 0) goto fail;
    lane_init(&en->main, en, 0);
    if (en->has_long) lane_init(&en->lng, en, 1);
    if ((rc = start_lanes(en, e)) < 0) {
        bs_engine_destroy(en); /* stops and joins the lanes that started, frees the rest */
        return rc;
    }
    *out = en;
    return BS_OK;
fail:
    bs_prefix_set_free(&en->pinned);
    bs_letter_cache_free(&en->lc);
    if (en->own_gate) bs_gate_destroy(en->gate);
    free(en);
    return rc;
}

void bs_engine_submit(bs_engine *en, bs_job *job) {
    job->next = NULL;
    en->queued++;
    if (lane_push(&en->main, job, 1) < 0) {
        bj_free(job->body);
        job->body = NULL;
        bs_reply rep;
        bs_reply_init(&rep);
        bs_reply_fatal(&rep, BS_MSG_ENGINE_STOPPED);
        complete_reply(en, job, &rep);
        bs_reply_free(&rep);
    }
}

void bs_engine_stop(bs_engine *en) { lane_stop(&en->main); }

void bs_engine_destroy(bs_engine *en) {
    if (!en) return;
    bs_engine_stop(en);
    if (en->main.started) pthread_join(en->main.th, NULL);
    else if (en->has_long) lane_stop(&en->lng);
    if (en->has_long && en->lng.started) pthread_join(en->lng.th, NULL);
    lane_free(&en->main);
    if (en->has_long) lane_free(&en->lng);
    bs_prefix_set_free(&en->pinned);
    bs_letter_cache_free(&en->lc);
    if (en->own_gate) bs_gate_destroy(en->gate);
    free(en);
}

int bs_engine_orders(const bs_engine *en) { return en->m->orders; }

const char *bs_engine_model_name(const bs_engine *en) { return en->m->name; }

void bs_engine_get_stats(bs_engine *en, bs_engine_stats *s) {
    memset(s, 0, sizeof *s);
    s->queued = en->queued;
    s->batches = en->batches;
    s->batch_requests = en->batch_requests;
    s->input_tokens = en->input_tokens;
    s->dropped = en->dropped;
    s->forward_tokens = en->main.run.forward_tokens + (en->has_long ? en->lng.run.forward_tokens : 0);
    s->forwards = en->main.run.forwards + (en->has_long ? en->lng.run.forwards : 0);
    s->state_hits = en->main.run.state_hits + (en->has_long ? en->lng.run.state_hits : 0);
    s->state_inserts = en->main.run.state_inserts + (en->has_long ? en->lng.run.state_inserts : 0);
    for (int k = 0; k < 2; k++) s->lc_rounds[k] = en->main.run.lc_rounds[k] + (en->has_long ? en->lng.run.lc_rounds[k] : 0);
}
