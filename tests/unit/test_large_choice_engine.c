/* Choice with 11..255 options through the engine (spec 03 §5, 04 §7 B1–B2):
 *  - the engine's answer equals an independent computation: every round-1
 *    group prompt and both finalist prompts built here from the groups,
 *    tokenized, their letter ids found by tokenizing prompt + letter, each
 *    prompt run alone in its own forward (no packing with others, no prefix
 *    cache), then core/large_choice on those logits and the choice answer
 *    formulas; probabilities compared bitwise (shortest round-trip doubles),
 *    and usage.input_tokens = the sum of those prompts' lengths;
 *  - byte-identical answers alone, batched with other requests, one item per
 *    row and forward, budget chunks, state cache, long lane, FIFO with a
 *    tiny batch budget;
 *  - round 2 is a follow-up step: a small request submitted with a large
 *    choice is answered after the first batch, the large choice after the
 *    second; a request cancelled between its rounds never runs round 2
 *    (lc_rounds counters) and the engine keeps answering;
 *  - a finalist prompt over the model's positions fails only its request
 *    (04 §3 P7), after round 1. */
#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>

#include "check.h"
#include "basal.h"
#include "decision/decide.h"
#include "decision/large_choice.h"
#include "protocol/pyjson.h"
#include "engine/engine.h"
#include "engine/pack.h"
#include "engine/plan.h"

/* ---- the independent oracle ---- */

/* Letter logits of one prompt computed alone: one row, one forward. */
static int forward_alone(const bs_basal_model *m, const int32_t *ids, int32_t n, const int32_t *letters, int k,
                         float *out) {
    bs_row row;
    bs_packed pk;
    bs_err e = {0};
    int rc = bs_pack_row(&row, &ids, &n, 1, &e);
    if (rc < 0) return rc;
    rc = bs_packed_build(&pk, &row, 1, NULL, letters, k, &e);
    if (rc == 0) {
        rc = bs_forward(&m->model, &pk.in, out, &e);
        bs_packed_free(&pk);
    }
    bs_row_free(&row);
    if (rc < 0) fprintf(stderr, "forward: %s\n", e.msg);
    return rc;
}

/* The prompt over opts[perm[0..k)], its ids, its letter ids (01 §5: the last
 * id of prompt + letter), and its letter logits from a forward of its own. */
static int ask(const bs_basal_model *m, const bs_request *r, const bs_question *q, const size_t *perm, int k,
               float *logits, size_t *n_tokens) {
    bs_buf pr;
    bs_buf_init(&pr);
    bs_err e = {0};
    int32_t *ids = NULL, letters[BS_LC_GROUP_MAX];
    size_t n = 0;
    int rc = bs_prompt_build(&pr, m->bos, strlen(m->bos), q->lang, &r->state, &q->instructions, q->options, perm,
                             (size_t)k, &e);
    if (rc == 0) rc = bs_tokenizer_encode(m->tok, pr.data, pr.len, &ids, &n, NULL, &e);
    for (int i = 0; rc == 0 && i < k; i++) {
        bs_buf pl;
        bs_buf_init(&pl);
        bs_buf_put(&pl, pr.data, pr.len);
        bs_buf_putc(&pl, "ABCDEFGHIJ"[i]);
        int32_t *t = NULL;
        size_t nt = 0;
        rc = bs_tokenizer_encode(m->tok, pl.data, pl.len, &t, &nt, NULL, &e);
        if (rc == 0 && (nt != n + 1 || memcmp(t, ids, n * sizeof *ids))) rc = -1;
        if (rc == 0) letters[i] = t[n];
        free(t);
        bs_buf_free(&pl);
    }
    if (rc == 0) rc = forward_alone(m, ids, (int32_t)n, letters, k, logits);
    *n_tokens = n;
    free(ids);
    bs_buf_free(&pr);
    return rc;
}

/* The large choice of question qi of body, one prompt per forward. */
static int oracle(const bs_basal_model *m, const char *body, size_t qi, double *p, size_t *input_tokens) {
    bs_request *r = NULL;
    bs_reply rep;
    bs_reply_init(&rep);
    bs_err e = {0};
    int rc = bs_request_parse(body, strlen(body), BS_DIALECT_SYSTEMONE, NULL, &r, &rep, &e);
    bs_reply_free(&rep);
    if (rc < 0) return rc;
    const bs_question *q = &r->questions[qi];
    int n = (int)q->n_options;
    bs_large_choice *lc = calloc(1, sizeof *lc);
    static float logits[BS_LC_MAX_ROUND1_GROUPS][BS_LC_GROUP_MAX];
    const float *lp[BS_LC_MAX_ROUND1_GROUPS];
    *input_tokens = 0;
    rc = lc ? bs_lc_plan_round1(lc, n, &e) : -1;
    for (int g = 0; rc == 0 && g < lc->n_round1; g++) {
        size_t perm[BS_LC_GROUP_MAX], nt = 0;
        for (int i = 0; i < lc->group[g].size; i++) perm[i] = (size_t)lc->group[g].member[i]; /* order 0 only */
        rc = ask(m, r, q, perm, lc->group[g].size, logits[g], &nt);
        *input_tokens += nt;
        lp[g] = logits[g];
    }
    if (rc == 0) rc = bs_lc_finish_round1(lc, lp, &e);
    float f[2][BS_LC_GROUP_MAX];
    for (int o = 0; rc == 0 && o < 2; o++) {
        const bs_lc_group *fin = bs_lc_finalists(lc);
        size_t perm[BS_LC_GROUP_MAX], nt = 0;
        for (int i = 0; i < fin->size; i++) perm[i] = (size_t)fin->member[o ? fin->size - 1 - i : i];
        rc = ask(m, r, q, perm, fin->size, f[o], &nt);
        *input_tokens += nt;
    }
    if (rc == 0) rc = bs_lc_finish_round2(lc, f[0], f[1], bs_calibration_temp(&m->calib, BS_TYPE_CHOICE), p, &e);
    if (rc < 0) fprintf(stderr, "oracle: %s\n", e.msg);
    free(lc);
    bs_request_free(r);
    return rc;
}

/* The answer of question `id` in reply equals p over the request's keys. */
static void check_answer(const char *reply, const char *id, const double *p, int n, size_t input_tokens,
                         const char *branches) {
    bj_value *v = NULL;
    bs_err e = {0};
    CHECK_INT(bj_parse(reply, strlen(reply), NULL, &v, &e), 0);
    if (!v) return;
    const bj_value *a = bj_get(bj_get(v, "answers"), id);
    const bj_value *probs = a ? bj_get(a, "probabilities") : NULL;
    CHECK(probs && probs->type == BJ_OBJECT && probs->n == (size_t)n);
    int m = bs_argmax(p, n), same = 0;
    double sum = 0;
    for (int i = 0; probs && i < n && i < (int)probs->n; i++) {
        double got = strtod(probs->items[i]->str, NULL);
        same += got == p[i];
        sum += got;
    }
    CHECK_INT(same, n);
    CHECK(fabs(sum - 1.0) < 1e-12);
    const bj_value *ch = a ? bj_get(a, "choice") : NULL;
    CHECK(ch && probs && ch->type == BJ_STRING && ch->len == probs->key_lens[m] && !memcmp(ch->str, probs->keys[m], ch->len));
    const bj_value *conf = a ? bj_get(a, "confidence") : NULL;
    CHECK(conf && strtod(conf->str, NULL) == bs_choice_confidence(p, n));
    const bj_value *u = bj_get(v, "usage");
    const bj_value *it = u ? bj_get(u, "input_tokens") : NULL, *br = u ? bj_get(u, "branches") : NULL;
    if (input_tokens) CHECK(it && strtoull(it->str, NULL, 10) == input_tokens);
    CHECK(br && !strcmp(br->str, branches)); /* a large choice counts once (02 §4.6) */
    bj_free(v);
}

/* ---- the engine ---- */

typedef struct {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int n_done;
    bs_job *order[64];
} waiter;

static void on_done(bs_job *j, void *ctx) {
    waiter *w = ctx;
    pthread_mutex_lock(&w->mu);
    w->order[w->n_done++] = j;
    pthread_cond_broadcast(&w->cv);
    pthread_mutex_unlock(&w->mu);
}

static void wait_for(waiter *w, int n) {
    pthread_mutex_lock(&w->mu);
    while (w->n_done < n) pthread_cond_wait(&w->cv, &w->mu);
    pthread_mutex_unlock(&w->mu);
}

static bs_job *make_job(const char *body, waiter *w) {
    bs_job *j = calloc(1, sizeof *j);
    bs_job_init(j);
    bs_reply rep;
    bs_reply_init(&rep);
    bs_err e = {0};
    if (bs_body_parse(body, strlen(body), BS_DIALECT_SYSTEMONE, &j->body, &rep, &e) < 0)
        fprintf(stderr, "bad test body: %s\n", rep.body.data);
    bs_reply_free(&rep);
    j->arrival_ms = bs_now_ms();
    j->done = on_done;
    j->done_ctx = w;
    return j;
}

static char *strip_latency(const bs_job *j) {
    char *s = strdup(j->reply.data ? j->reply.data : "");
    char *p = strstr(s, ",\"latency_ms\":");
    if (p) {
        char *q = p + 14;
        while (*q && *q != '}') q++;
        memmove(p, q, strlen(q) + 1);
    }
    return s;
}

/* A choice with n options on a state of about `words` extra words; option
 * texts differ in length and wording, every fifth has no description. */
static char *large_body(int n, int words, const char *state, const char *extra) {
    bs_buf b;
    bs_buf_init(&b);
    bs_buf_printf(&b, "{\"model\":\"basal-tiny\",\"state\":\"%s", state);
    for (int i = 0; i < words; i++) bs_buf_printf(&b, " słowo%d", i * 7 % 23);
    bs_buf_puts(&b, "\",\"questions\":{\"big\":{\"type\":\"choice\",\"instructions\":\"Który temat?\",\"criteria\":{");
    static const char *const w[] = {"płatności", "zwrot", "logowanie", "karta", "kredyt", "reklamacja", "dostawa"};
    for (int i = 0; i < n; i++) {
        if (i % 5 == 4) bs_buf_printf(&b, "%s\"k%d\":null", i ? "," : "", i);
        else bs_buf_printf(&b, "%s\"k%d\":\"%s %d\"", i ? "," : "", i, w[i % 7], i * 13 % 97);
    }
    bs_buf_printf(&b, "}}%s}}", extra ? extra : "");
    return b.data;
}

static void run(bs_basal_model *m, const bs_engine_opts *o, const char *const *bodies, int n, char **out, int *status,
                bs_engine_stats *st) {
    bs_engine *en = NULL;
    bs_err e = {0};
    waiter w = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, 0, {0}};
    CHECK_INT(bs_engine_create(&en, m, o, NULL, &e), 0);
    if (!en) return;
    bs_job *jobs[32];
    for (int i = 0; i < n; i++) jobs[i] = make_job(bodies[i], &w);
    for (int i = 0; i < n; i++) bs_engine_submit(en, jobs[i]);
    wait_for(&w, n);
    for (int i = 0; i < n; i++) {
        out[i] = strip_latency(jobs[i]);
        status[i] = jobs[i]->status;
        bs_job_release(jobs[i]);
        free(jobs[i]);
    }
    if (st) bs_engine_get_stats(en, st);
    bs_engine_destroy(en);
}

static const char *SMALL[] = {
    "{\"model\":\"basal-tiny\",\"state\":\"Klient: od wczoraj nie mogę zalogować się do bankowości.\","
    "\"questions\":{\"d\":{\"type\":\"choice\",\"instructions\":\"Dział?\",\"criteria\":{\"cards\":\"Karty\","
    "\"online\":\"Bankowość\",\"loans\":\"Kredyty\"}},\"n\":{\"type\":\"noul\",\"instructions\":\"Czy pilne?\"}}}",
    "{\"model\":\"basal-tiny\",\"state\":\"The customer wants to cancel the subscription before renewal.\","
    "\"questions\":{\"m\":{\"type\":\"multi\",\"criteria\":[\"billing\",\"retention\"],\"min\":1}}}",
};

/* The batch hook runs on the lane thread after a batch's forwards and before
 * its replies: after the first batch it submits g_inject (which then waits
 * with the large choice's round 2) or cancels g_cancel (the client left
 * between the rounds). */
static bs_engine *g_en;
static bs_job *_Atomic g_inject, *_Atomic g_cancel;
static atomic_int g_batches;
static void after_batch(void *ctx, int lane, int requests, double ms, int ok) {
    (void)ctx; (void)lane; (void)requests; (void)ms; (void)ok;
    if (atomic_fetch_add(&g_batches, 1) != 0) return;
    bs_job *j = atomic_exchange(&g_inject, NULL);
    if (j) bs_engine_submit(g_en, j);
    j = atomic_exchange(&g_cancel, NULL);
    if (j) atomic_store(&j->cancelled, 1);
}

/* The P7 request (round 2 refused), a small request and a large choice in one
 * basal_decide_batch call (include/basal.h): the refused request leaves the
 * run after round 1 while the large choice goes on to its finalists; each
 * result has the status and bytes the engine gave that request, and those of
 * a basal_decide call of its own. */
static const char *g_dir;
static void session_batch(const char *p7, const char *p7_engine, const char *b11, const char *b11_engine,
                          const char *small_engine) {
    basal_session *s = NULL;
    bs_err e;
    CHECK_INT(basal_open(&s, g_dir, NULL, &e), 0);
    if (!s) return;
    const char *req[3] = {p7, SMALL[0], b11}, *want[3] = {p7_engine, small_engine, b11_engine};
    const int want_st[3] = {422, 200, 200};
    size_t lens[3];
    for (int i = 0; i < 3; i++) lens[i] = strlen(req[i]);
    basal_result r[3];
    CHECK_INT(basal_decide_batch(s, 3, req, lens, r, &e), 0);
    for (int i = 0; i < 3; i++) {
        CHECK_INT(r[i].status, want_st[i]);
        CHECK_STR(r[i].json ? r[i].json : "", want[i]);
        basal_result one;
        CHECK_INT(basal_decide(s, req[i], lens[i], &one, &e), 0);
        CHECK_INT(one.status, want_st[i]);
        CHECK_STR(one.json ? one.json : "", want[i]);
        basal_result_free(&one);
        basal_result_free(&r[i]);
    }
    basal_close(s);
}

static void test_engine_large_choice(bs_basal_model *m) {
    /* 40 options on a ~300-token state with two other questions, 255 options,
     * 11 options in English */
    char *b40 = large_body(40, 120, "Klient pisze: zapłaciłem dwa razy za to samo zamówienie, proszę o zwrot.",
                           ",\"u\":{\"type\":\"noul\",\"instructions\":\"Pilne?\"}");
    char *b255 = large_body(255, 20, "Zgłoszenie:", NULL);
    char *b11 = large_body(11, 5, "Ticket: the parcel never arrived.", NULL);
    double p40[BS_LC_MAX_OPTIONS], p255[BS_LC_MAX_OPTIONS], p11[BS_LC_MAX_OPTIONS];
    size_t t40 = 0, t255 = 0, t11 = 0;
    CHECK_INT(oracle(m, b40, 0, p40, &t40), 0);
    CHECK_INT(oracle(m, b255, 0, p255, &t255), 0);
    CHECK_INT(oracle(m, b11, 0, p11, &t11), 0);

    bs_engine_opts base;
    bs_engine_opts_default(&base);
    const char *reqs[] = {b40, b255, b11, SMALL[0], SMALL[1]};
    enum { NR = 5 };
    char *alone[NR];
    for (int i = 0; i < NR; i++) {
        int st = 0;
        run(m, &base, &reqs[i], 1, &alone[i], &st, NULL);
        CHECK_INT(st, 200);
    }
    /* the 40-option request also has a noul: its input tokens are the noul's
     * two prompts more, so only the 255 and 11 requests check the total */
    check_answer(alone[0], "big", p40, 40, 0, "2");
    check_answer(alone[1], "big", p255, 255, t255, "1");
    check_answer(alone[2], "big", p11, 11, t11, "1");
    CHECK_CONTAINS(alone[0], "\"u\":{\"type\":\"noul\",\"noul\":");
    CHECK_CONTAINS(alone[0], "\"questions\":2,\"branches\":2");

    enum { NV = 7 };
    struct { const char *name; bs_engine_opts o; } v[NV];
    for (int i = 0; i < NV; i++) v[i].o = base;
    v[0].name = "batched";
    v[1].name = "one item per row and forward";
    v[1].o.tree_max_tokens = 1;
    v[1].o.forward_max_tokens = 1;
    v[2].name = "budget chunks";
    v[2].o.batching = 2;
    v[3].name = "state cache on";
    v[3].o.state_cache_mb = 64;
    v[4].name = "long lane (long_tokens 1), preemptible";
    v[4].o.long_tokens = 1;
    v[5].name = "fifo, tiny batch budget";
    v[5].o.schedule = BS_SCHED_FIFO;
    v[5].o.max_batch_tokens = 1;
    v[6].name = "no prefix cache";
    v[6].o.no_prefix_cache = 1;
    int mix[] = {3, 0, 4, 1, 2, 0, 3, 2, 1, 4};
    enum { NM = 10 };
    const char *bodies[NM];
    for (int i = 0; i < NM; i++) bodies[i] = reqs[mix[i]];
    for (int k = 0; k < NV; k++) {
        char *got[NM];
        int st[NM];
        bs_engine_stats s;
        run(m, &v[k].o, bodies, NM, got, st, &s);
        int diff = 0;
        for (int i = 0; i < NM; i++) {
            if (st[i] != 200 || strcmp(got[i], alone[mix[i]])) {
                diff++;
                fprintf(stderr, "%s: request %d differs:\n  %.300s\n  %.300s\n", v[k].name, mix[i], got[i],
                        alone[mix[i]]);
            }
            free(got[i]);
        }
        fprintf(stderr, "%s: %d of %d differ; %lld forwards, %lld forward tokens; large-choice rounds %lld / %lld\n",
                v[k].name, diff, NM, (long long)s.forwards, (long long)s.forward_tokens, (long long)s.lc_rounds[0],
                (long long)s.lc_rounds[1]);
        CHECK_INT(diff, 0);
        CHECK_INT(s.lc_rounds[0], 6);
        CHECK_INT(s.lc_rounds[1], 6);
    }

    /* Round 2 is a second engine step of the same job: a request that
     * arrives while round 1 runs is packed with round 2 in the next batch;
     * a large choice whose client leaves after round 1 never gets round 2,
     * and the engine goes on answering. */
    {
        bs_err e = {0};
        waiter w = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, 0, {0}};
        CHECK_INT(bs_engine_create(&g_en, m, &base, NULL, &e), 0);
        if (g_en) {
            bs_engine_set_batch_hook(g_en, after_batch, NULL);
            bs_job *big = make_job(b11, &w), *small = make_job(SMALL[0], &w);
            atomic_store(&g_batches, 0);
            atomic_store(&g_inject, small);
            bs_engine_submit(g_en, big);
            wait_for(&w, 2);
            CHECK_INT(big->status, 200);
            CHECK_INT(small->status, 200);
            CHECK_INT(big->steps, 2);
            CHECK_INT(small->steps, 1);
            CHECK_INT(big->batch_requests, 1);   /* round 1 alone */
            CHECK_INT(small->batch_requests, 2); /* with the large choice's round 2 */
            char *got = strip_latency(big);
            CHECK_STR(got, alone[2]);
            free(got);
            got = strip_latency(small);
            CHECK_STR(got, alone[3]);
            free(got);
            bs_engine_stats s0, s1;
            bs_engine_get_stats(g_en, &s0);
            bs_job *gone = make_job(b40, &w);
            atomic_store(&g_batches, 0);
            atomic_store(&g_cancel, gone);
            bs_engine_submit(g_en, gone);
            wait_for(&w, 3);
            CHECK_INT(gone->status, 0);
            bs_engine_get_stats(g_en, &s1);
            CHECK_INT(s1.lc_rounds[0] - s0.lc_rounds[0], 1);
            CHECK_INT(s1.lc_rounds[1] - s0.lc_rounds[1], 0);
            CHECK_INT(s1.dropped - s0.dropped, 1);
            CHECK_INT(s1.batches - s0.batches, 1);
            bs_job *after = make_job(b11, &w);
            bs_engine_submit(g_en, after);
            wait_for(&w, 4);
            CHECK_INT(after->status, 200);
            got = strip_latency(after);
            CHECK_STR(got, alone[2]);
            free(got);
            bs_job *all[] = {big, small, gone, after};
            for (int i = 0; i < 4; i++) { bs_job_release(all[i]); free(all[i]); }
            bs_engine_destroy(g_en);
            g_en = NULL;
        }
    }
    /* 04 §3 P7 for round 2: 11 options of ~130 tokens each; the round-1
     * groups (5 or 6 options) fit the fixture's 2048 positions, the ten
     * finalists do not: that request alone fails with 422 after round 1. */
    {
        bs_buf b;
        bs_buf_init(&b);
        bs_buf_puts(&b, "{\"model\":\"basal-tiny\",\"state\":\"Zgłoszenie.\",\"questions\":{\"long\":{\"type\":"
                        "\"choice\",\"criteria\":{");
        for (int i = 0; i < 11; i++) {
            bs_buf_printf(&b, "%s\"o%d\":\"", i ? "," : "", i);
            for (int w = 0; w < 40; w++) bs_buf_printf(&b, "%s%d ", "xq", i * 40 + w);
            bs_buf_puts(&b, "\"");
        }
        bs_buf_puts(&b, "}}}}");
        const char *two[] = {b.data, SMALL[0]};
        char *got[2];
        int st[2];
        bs_engine_stats s;
        run(m, &base, two, 2, got, st, &s);
        CHECK_INT(st[0], 422);
        CHECK_CONTAINS(got[0], "{\"error\":\"unsupported\",\"detail\":[{\"type\":\"prompt_too_long\",\"loc\":"
                               "[\"body\",\"questions\",\"long\"],\"msg\":\"a prompt of ");
        CHECK_CONTAINS(got[0], " tokens exceeds the model limit 2048\"}]}");
        CHECK_INT(st[1], 200);
        CHECK_STR(got[1], alone[3]);
        CHECK_INT(s.lc_rounds[0], 1);
        CHECK_INT(s.lc_rounds[1], 0);
        session_batch(b.data, got[0], b11, alone[2], alone[3]);
        free(got[0]);
        free(got[1]);
        bs_buf_free(&b);
    }
    for (int i = 0; i < NR; i++) free(alone[i]);
    free(b40);
    free(b255);
    free(b11);
}

int main(void) {
    const char *fx = check_env("FIXTURES", "build/fixtures");
    char dir[1024];
    snprintf(dir, sizeof dir, "%s/tiny-bias", fx);
    g_dir = dir;
    bs_pool *pool = bs_pool_create(0);
    bs_basal_model m;
    bs_err e = {0};
    if (bs_basal_load(&m, dir, pool, 1, &e) < 0) {
        fprintf(stderr, "%s\n", e.msg);
        CHECK(0);
    } else {
        test_engine_large_choice(&m);
        bs_basal_free(&m);
    }
    bs_pool_destroy(pool);
    return check_report("test_large_choice_engine");
}
