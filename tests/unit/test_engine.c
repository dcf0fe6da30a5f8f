/* The engine (spec 04): trie size (§4), packing invariants on random inputs
 * (§5), HRRN/FIFO admission with a controlled clock (§9), the device gate with
 * fake lanes (§11), row and forward cuts (§6), and the whole engine on a real
 * fixture model: cancellation, the context limit, short-before-long, and
 * answers byte-identical alone, batched, with caches on/off, in the long lane
 * and under preemption (§15 items 2–4, 6–9, 11, 12). */
#include <pthread.h>
#include <stdint.h>
#include <unistd.h>

#include "check.h"
#include "cpu/gemm.h"
#include "engine/engine.h"
#include "engine/gate.h"
#include "engine/pack.h"
#include "engine/plan.h"
#include "engine/runner.h"
#include "engine/triesize.h"

static uint64_t rng = 42;
static uint32_t rnd(uint32_t n) {
    rng = rng * 6364136223846793005ull + 1442695040888963407ull;
    return (uint32_t)(rng >> 33) % n;
}

/* ---- §4 trie size ---- */
static void test_trie_size(void) {
    bs_trie_counter tc;
    bs_tc_init(&tc);
    const int32_t a[] = {1, 2, 3, 4}, b[] = {1, 2, 3, 5}, c[] = {1, 2, 9}, d[] = {1, 2, 9, 9};
    const int32_t *p1[] = {a, b}, *p2[] = {c, d};
    int32_t l1[] = {4, 4}, l2[] = {3, 4};
    CHECK_INT(bs_tc_growth(&tc, p1, l1, 2), 5);
    CHECK_INT(bs_tc_insert(&tc, p1, l1, 2), 0);
    CHECK_INT(tc.tokens, 5);
    CHECK_INT(bs_tc_growth(&tc, p2, l2, 2), 2);
    bs_tc_free(&tc);

    /* property: for random prompt sets of depth < 8, trie size == packed length,
     * and the packing invariants hold */
    int mismatches = 0, bad_visible = 0;
    for (int trial = 0; trial < 300; trial++) {
        int n = 1 + (int)rnd(6);
        int32_t buf[6][40], lens[6];
        const int32_t *pp[6];
        for (int i = 0; i < n; i++) {
            int base = i > 0 && rnd(3) ? (int)rnd((uint32_t)i) : -1; /* share a prefix with an earlier one */
            int shared = base >= 0 ? (int)rnd((uint32_t)lens[base] + 1) : 0;
            lens[i] = shared + (int)rnd(8) + (shared ? 0 : 1);
            if (lens[i] == 0) lens[i] = 1;
            for (int t = 0; t < lens[i]; t++) buf[i][t] = t < shared ? buf[base][t] : (int32_t)rnd(4);
            pp[i] = buf[i];
        }
        bs_tc_init(&tc);
        /* oracle: the number of distinct non-empty prefixes, by brute force */
        int64_t distinct = 0;
        for (int i = 0; i < n; i++)
            for (int l = 1; l <= lens[i]; l++) {
                int seen = 0;
                for (int j = 0; j < i && !seen; j++)
                    seen = lens[j] >= l && !memcmp(pp[j], pp[i], (size_t)l * sizeof(int32_t));
                distinct += !seen;
            }
        int64_t g = bs_tc_growth(&tc, pp, lens, (size_t)n);
        CHECK_INT(g, distinct);
        CHECK_INT(bs_tc_growth(&tc, pp, lens, (size_t)n), distinct); /* growth left the set empty */
        bs_tc_insert(&tc, pp, lens, (size_t)n);
        CHECK_INT(tc.tokens, distinct);
        CHECK_INT(bs_tc_growth(&tc, pp, lens, (size_t)n), 0);
        bs_row row;
        bs_err e = {0};
        if (bs_pack_row(&row, pp, lens, n, &e) < 0) { mismatches++; bs_tc_free(&tc); continue; }
        int deep = 0; /* depth of the deepest block */
        for (int b = 0; b < row.n_blocks; b++) {
            int dd = 0;
            for (int x = b; x >= 0; x = row.parent[x]) dd++;
            if (dd > deep) deep = dd;
            CHECK(row.parent[b] < b); /* ancestors precede descendants */
        }
        if (deep < 8 && tc.tokens != row.len) mismatches++;
        /* visible tokens of every readout = its prompt */
        for (int p = 0; p < n; p++) {
            int col = row.last[p], nv = 0, ok = 1;
            for (int t = 0; t <= col && ok; t++) {
                int vis = 0;
                for (int x = row.node[col]; x >= 0; x = row.parent[x]) vis |= row.node[t] == x;
                if (!vis) continue;
                ok = nv < lens[p] && row.ids[t] == pp[p][nv] && row.pos[t] == nv;
                nv++;
            }
            if (!ok || nv != lens[p]) bad_visible++;
        }
        bs_row_free(&row);
        bs_tc_free(&tc);
    }
    CHECK_INT(mismatches, 0);
    CHECK_INT(bad_visible, 0);

    /* 4,000 prompts of one shared state: the growth of a batch that forces
     * several rehashes is undone exactly, and the count matches the oracle
     * (shared part once, then each prompt's own tail). */
    enum { NB = 4000, SH = 300, TAIL = 5 };
    int32_t *big = malloc(sizeof(int32_t) * NB * (SH + TAIL));
    const int32_t **bp = malloc(sizeof *bp * NB);
    int32_t *bl = malloc(sizeof *bl * NB);
    for (int i = 0; i < NB; i++) {
        int32_t *q = big + (size_t)i * (SH + TAIL);
        for (int t = 0; t < SH; t++) q[t] = 7 + t;
        for (int t = 0; t < TAIL; t++) q[SH + t] = 100000 + i * TAIL + t;
        bp[i] = q;
        bl[i] = SH + TAIL;
    }
    bs_tc_init(&tc);
    CHECK_INT(bs_tc_insert(&tc, bp, bl, 10), 0);
    int64_t before = tc.tokens;
    CHECK_INT(bs_tc_growth(&tc, bp + 10, bl + 10, NB - 10), (int64_t)(NB - 10) * TAIL);
    CHECK_INT(tc.tokens, before);
    CHECK_INT(bs_tc_growth(&tc, bp, bl, 10), 0);
    CHECK_INT(bs_tc_insert(&tc, bp + 10, bl + 10, NB - 10), 0);
    CHECK_INT(tc.tokens, SH + (int64_t)NB * TAIL);
    bs_tc_reset(&tc);
    CHECK_INT(bs_tc_growth(&tc, bp, bl, 2), SH + 2 * TAIL);
    bs_tc_free(&tc);
    free(big);
    free(bp);
    free(bl);
}

/* ---- §9 admission ---- */
typedef struct {
    bs_job job;
    bs_plan plan;
    bs_item item;
    int32_t ids[2][4600];
} fake_req;

static void fake_init(fake_req *f, double arrival, int tokens, int32_t first_id) {
    memset(f, 0, sizeof *f);
    bs_job_init(&f->job);
    f->job.arrival_ms = arrival;
    /* two order prompts of tokens/2 each, no sharing: trie size = tokens */
    for (int o = 0; o < 2; o++) {
        for (int t = 0; t < tokens / 2; t++) f->ids[o][t] = first_id + o * 100000 + t;
        f->item.orders[o].ids = f->ids[o];
        f->item.orders[o].n_ids = tokens / 2;
    }
    f->item.n_orders = 2;
    f->plan.items = &f->item;
    f->plan.n_items = 1;
    f->job.plan = &f->plan;
    f->job.cost = bs_plan_cost(&f->plan);
}

static void test_admission(void) {
    static fake_req A, B, C;
    /* the §9 example: now = 10 s; A waited 1.0 s (4000 tokens), B 0.2 s (300), C 3.0 s (4000) */
    for (int sched = 0; sched < 2; sched++) {
        fake_init(&A, 9000, 4000, 1000000);
        fake_init(&B, 9800, 300, 2000000);
        fake_init(&C, 7000, 4000, 3000000);
        CHECK_INT(A.job.cost, 4000);
        bs_job *wait[3] = {&C.job, &A.job, &B.job}; /* arrival order */
        bs_job *batch[3];
        size_t nw = 3;
        int64_t tokens = 0;
        size_t nb = bs_admit(wait, &nw, 10000, 3000, sched ? BS_SCHED_FIFO : BS_SCHED_HRRN, 8192, batch, &tokens);
        if (sched == 0) { /* HRRN: order C, B, A; batch C + B, A waits */
            CHECK_INT(nb, 2);
            CHECK(nb == 2 && batch[0] == &C.job && batch[1] == &B.job);
            CHECK_INT(tokens, 4300);
            CHECK(nw == 1 && wait[0] == &A.job);
        } else { /* FIFO: C and A (8000), B (8300 > 8192) waits */
            CHECK_INT(nb, 2);
            CHECK(nb == 2 && batch[0] == &C.job && batch[1] == &A.job);
            CHECK(nw == 1 && wait[0] == &B.job);
        }
    }
    /* an oversized request runs alone; equal ratios keep their order */
    static fake_req big, s1, s2;
    fake_init(&big, 0, 9000, 1);
    fake_init(&s1, 0, 100, 50000);
    fake_init(&s2, 0, 100, 60000);
    bs_job *wait[3] = {&big.job, &s1.job, &s2.job}, *batch[3];
    size_t nw = 3;
    int64_t tokens;
    size_t nb = bs_admit(wait, &nw, 0, 3000, BS_SCHED_HRRN, 8192, batch, &tokens);
    CHECK_INT(nb, 1);
    CHECK(batch[0] == &big.job);
    CHECK(nw == 2 && wait[0] == &s1.job && wait[1] == &s2.job);
    /* shared prefixes count once: two requests sharing 3000 of 3100 tokens */
    static fake_req x, y;
    fake_init(&x, 0, 6200, 7);
    fake_init(&y, 0, 6200, 7);
    for (int o = 0; o < 2; o++) y.ids[o][3099] = 999999; /* differ in the last token only */
    y.job.cost = bs_plan_cost(&y.plan);
    bs_job *w2[2] = {&x.job, &y.job}, *b2[2];
    nw = 2;
    nb = bs_admit(w2, &nw, 0, 3000, BS_SCHED_FIFO, 8192, b2, &tokens);
    CHECK_INT(nb, 2);
    CHECK_INT(tokens, 6202);
}

/* ---- §11 gate with fake lanes and a controlled clock ---- */
static _Atomic double fake_now;
static double fake_clock(void *ctx) { (void)ctx; return fake_now; }

static _Atomic int enter_seq;
typedef struct { bs_gate *g; _Atomic int entered, done; } urgent_arg;
static void *urgent_thread(void *a) {
    urgent_arg *u = a;
    bs_gate_enter_urgent(u->g);
    u->entered = ++enter_seq;
    bs_gate_leave(u->g);
    u->done = 1;
    return NULL;
}

static void test_gate(void) {
    fake_now = 0;
    bs_gate *g = bs_gate_create(100, fake_clock, NULL);
    bs_gate_enter_preemptible(g);
    CHECK_INT(bs_gate_checkpoint(g), 0); /* nobody waits: continue */
    urgent_arg u = {g, 0, 0};
    pthread_t th;
    pthread_create(&th, NULL, urgent_thread, &u);
    usleep(50000);
    CHECK_INT(u.entered, 0);               /* the device is busy */
    enter_seq = 0;
    fake_now = 50;
    CHECK_INT(bs_gate_checkpoint(g), 0);   /* held for less than the slice */
    CHECK_INT(u.entered, 0);
    fake_now = 100;
    CHECK_INT(bs_gate_checkpoint(g), 1);   /* yields: exactly one urgent call runs, then resumes */
    pthread_join(th, NULL);
    CHECK_INT(u.done, 1);
    fake_now = 150;
    CHECK_INT(bs_gate_checkpoint(g), 0);   /* nobody waits any more */
    bs_gate_leave(g);
    bs_gate_destroy(g);
}

/* ---- the engine on a real model ---- */
typedef struct {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int n_done;
    int order[64];
    int next;
} waiter;

static void on_done(bs_job *j, void *ctx) {
    waiter *w = ctx;
    pthread_mutex_lock(&w->mu);
    w->order[w->next++ & 63] = (int)(intptr_t)j->next; /* unused; see tags */
    w->n_done++;
    pthread_cond_broadcast(&w->cv);
    pthread_mutex_unlock(&w->mu);
}

static void wait_for(waiter *w, int n) {
    pthread_mutex_lock(&w->mu);
    while (w->n_done < n) pthread_cond_wait(&w->cv, &w->mu);
    pthread_mutex_unlock(&w->mu);
}

static const char *REQS[] = {
    "{\"model\":\"basal-tiny\",\"state\":\"Klient: od wczoraj nie mogę zalogować się do bankowości.\","
    "\"questions\":{\"d\":{\"type\":\"choice\",\"instructions\":\"Dział?\",\"criteria\":{\"cards\":\"Karty\","
    "\"online\":\"Bankowość\",\"loans\":\"Kredyty\"}},\"n\":{\"type\":\"noul\",\"instructions\":\"Czy pilne?\"}}}",
    "{\"model\":\"basal-tiny\",\"state\":{\"ticket\":\"Order 5512 arrived broken\",\"amount\":129.99},"
    "\"questions\":{\"s\":{\"type\":\"score\",\"instructions\":\"Urgency?\",\"criteria\":[\"low\",\"mid\",\"high\"]}}}",
    "{\"model\":\"basal-tiny\",\"state\":\"Klient: od wczoraj nie mogę zalogować się do bankowości.\","
    "\"questions\":{\"t\":{\"type\":\"choice\",\"criteria\":[\"a\",\"b\",\"c\",\"d\"]}}}",
    "{\"model\":\"basal-tiny\",\"state\":\"The customer wants to cancel the subscription before renewal.\","
    "\"questions\":{\"team\":{\"type\":\"choice\",\"instructions\":\"Which team?\",\"option_keys\":\"hide\","
    "\"criteria\":{\"t1\":\"Billing\",\"t2\":\"Billing\",\"t3\":\"Retention\"}}}}",
    "{\"model\":\"basal-tiny\",\"state\":\"Dzień dobry, piszę w sprawie zamówienia numer 5512, które dotarło wczoraj "
    "uszkodzone: pudełko było zgniecione, a ekran telefonu pęknięty. Proszę o wymianę albo zwrot pieniędzy.\","
    "\"questions\":{\"a\":{\"type\":\"noul\",\"instructions\":\"Czy to reklamacja?\"},"
    "\"b\":{\"type\":\"score\",\"instructions\":\"Pilność?\",\"criteria\":[\"niska\",\"wysoka\"]}}}",
    /* multi (one item per label, sharing the state and instructions) and act (03 §1-§2) */
    "{\"model\":\"basal-tiny\",\"state\":\"Klient: od wczoraj nie mogę zalogować się do bankowości.\","
    "\"questions\":{\"m\":{\"type\":\"multi\",\"instructions\":\"Których tematów dotyczy?\",\"criteria\":"
    "{\"login\":\"Logowanie\",\"card\":\"Karta\",\"loan\":null,\"other\":[\"inne\"]},\"max\":2},"
    "\"a\":{\"type\":\"act\",\"instructions\":\"Czy pilne?\",\"costs\":{\"approve\":{\"true\":0,\"false\":9},"
    "\"reject\":{\"true\":5,\"false\":0},\"human\":{\"true\":1,\"false\":1}},\"max_error\":0.05}}}",
    "{\"model\":\"basal-tiny\",\"state\":\"The customer wants to cancel the subscription before renewal.\","
    "\"questions\":{\"a\":{\"type\":\"act\",\"instructions\":\"Which team?\",\"criteria\":[\"billing\","
    "\"retention\",\"support\"],\"costs\":{\"wrong\":3,\"defer\":1}},\"m\":{\"type\":\"multi\","
    "\"criteria\":[\"billing\",\"retention\"],\"min\":1}}}",
};
enum { NREQ = 7 };

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

/* The reply without "latency_ms":<value> (it varies). */
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

/* The reply's usage object, read by the JSON parser, is the usage the job
 * carries (the server's metrics read the latter). */
static void check_usage(const bs_job *j) {
    bj_value *v = NULL;
    bs_err e = {0};
    CHECK_INT(bj_parse(j->reply.data, j->reply.len, NULL, &v, &e), 0);
    const bj_value *u = v ? bj_get(v, "usage") : NULL;
    CHECK(u != NULL);
    if (u) {
        const char *names[3] = {"input_tokens", "questions", "branches"};
        size_t want[3] = {j->usage.input_tokens, j->usage.questions, j->usage.branches};
        for (int k = 0; k < 3; k++) {
            const bj_value *f = bj_get(u, names[k]);
            CHECK(f && f->type == BJ_NUMBER);
            if (f && f->type == BJ_NUMBER) CHECK_INT(strtoll(f->str, NULL, 10), (long long)want[k]);
        }
    }
    CHECK(j->usage.input_tokens > 0 && j->usage.questions > 0);
    CHECK(j->usage.computed_tokens > 0);
    bj_free(v);
}

/* Runs requests reqs[0..n) through an engine with the given options, all
 * submitted at once; returns the reply bodies (latency stripped). */
static void run_engine(bs_basal_model *m, const bs_engine_opts *o, const int *reqs, int n, char **out, int *status,
                       bs_engine_stats *st) {
    bs_engine *en = NULL;
    bs_err e = {0};
    waiter w = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, 0, {0}, 0};
    CHECK_INT(bs_engine_create(&en, m, o, NULL, &e), 0);
    if (!en) { fprintf(stderr, "engine: %s\n", e.msg); return; }
    bs_job *jobs[16];
    for (int i = 0; i < n; i++) jobs[i] = make_job(REQS[reqs[i]], &w);
    for (int i = 0; i < n; i++) bs_engine_submit(en, jobs[i]);
    wait_for(&w, n);
    for (int i = 0; i < n; i++) {
        out[i] = strip_latency(jobs[i]);
        if (status) status[i] = jobs[i]->status;
        if (jobs[i]->status == 200) check_usage(jobs[i]);
        bs_job_release(jobs[i]);
        free(jobs[i]);
    }
    if (st) bs_engine_get_stats(en, st);
    bs_engine_destroy(en);
}

/* `budget` chunking (04 §6, §18 item 5) against hand-computed chunks. */
static void expect_chunks(const char *what, const int32_t *lens, size_t n, const char *want) {
    size_t order[64], start[65];
    size_t nc = bs_budget_chunks(lens, n, order, start);
    char got[512] = "";
    size_t at = 0;
    for (size_t c = 0; c < nc; c++) {
        at += (size_t)snprintf(got + at, sizeof got - at, "%s[", c ? " " : "");
        for (size_t j = start[c]; j < start[c + 1]; j++)
            at += (size_t)snprintf(got + at, sizeof got - at, "%s%zu", j > start[c] ? "," : "", order[j]);
        at += (size_t)snprintf(got + at, sizeof got - at, "]");
    }
    if (strcmp(got, want)) fprintf(stderr, "budget chunks, %s:\n", what);
    CHECK_STR(got, want);
}

static void test_budget_chunks(void) {
    int32_t a[] = {100, 50, 3000, 200, 129};
    /* 50,100,129,200 fit (4 rows x 256 = 1024); 3000 with 5 rows: 8 x 3072 > 12288 */
    expect_chunks("sorted, budget cut", a, 5, "[1,0,4,3] [2]");
    int32_t b[33];
    for (int i = 0; i < 33; i++) b[i] = 10;
    expect_chunks("32-row cap, stable", b, 33,
                  "[0,1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16,17,18,19,20,21,22,23,24,25,26,27,28,29,30,31] [32]");
    int32_t c[] = {4000, 10, 5000};
    expect_chunks("rows over 3072 stand alone", c, 3, "[1] [0] [2]");
    int32_t d[20];
    for (int i = 0; i < 20; i++) d[i] = 1000; /* bucket 1024: 8 rows = 8192 fit, 9 rows -> 16 x 1024 */
    expect_chunks("1024-bucket rows", d, 20, "[0,1,2,3,4,5,6,7] [8,9,10,11,12,13,14,15] [16,17,18,19]");
    int32_t e[] = {3072, 3072, 3072, 3072, 3072}; /* 4 x 3072 = 12288 exactly fits */
    expect_chunks("budget boundary", e, 5, "[0,1,2,3] [4]");
    int32_t f[] = {129, 128, 128};
    expect_chunks("equal lengths keep their order", f, 3, "[1,2,0]");
    expect_chunks("nothing", f, 0, "");
}

static void test_engine_invariance(bs_basal_model *m) {
    bs_engine_opts base;
    bs_engine_opts_default(&base);
    char *alone[NREQ];
    for (int i = 0; i < NREQ; i++) {
        int st;
        run_engine(m, &base, &i, 1, &alone[i], &st, NULL);
        CHECK_INT(st, 200);
    }
    CHECK_CONTAINS(alone[0], "\"usage\":{\"input_tokens\":");
    enum { NV = 9 };
    struct { const char *name; bs_engine_opts o; } variants[NV];
    for (int v = 0; v < NV; v++) variants[v].o = base;
    variants[0].name = "batched";
    variants[1].name = "no prefix cache";
    variants[1].o.no_prefix_cache = 1;
    variants[2].name = "state cache on";
    variants[2].o.state_cache_mb = 64;
    variants[3].name = "long lane (long_tokens 1)";
    variants[3].o.long_tokens = 1;
    variants[4].name = "rows of one item, one row per forward";
    variants[4].o.tree_max_tokens = 1;
    variants[4].o.forward_max_tokens = 1;
    variants[5].name = "fifo, tiny batch budget";
    variants[5].o.schedule = BS_SCHED_FIFO;
    variants[5].o.max_batch_tokens = 1;
    variants[6].name = "budget chunks of one-item rows";
    variants[6].o.batching = BS_BATCH_BUDGET;
    variants[7].name = "single batching (one item per row and forward at the default limits)";
    variants[7].o.batching = BS_BATCH_SINGLE;
    variants[8].name = "single batching without the pinned template prefixes";
    variants[8].o.batching = BS_BATCH_SINGLE;
    variants[8].o.no_prefix_cache = 1;
    int all[NREQ * 2] = {0, 1, 2, 3, 4, 5, 6, 6, 5, 4, 3, 2, 1, 0};
    int64_t single_tokens = 0, single_forwards = -1;
    for (int v = 0; v < NV; v++) {
        char *got[NREQ * 2];
        int st[NREQ * 2];
        bs_engine_stats s;
        run_engine(m, &variants[v].o, all, NREQ * 2, got, st, &s);
        int diff = 0;
        for (int i = 0; i < NREQ * 2; i++) {
            diff += st[i] != 200 || strcmp(got[i], alone[all[i]]) != 0;
            if (st[i] != 200 || strcmp(got[i], alone[all[i]]))
                fprintf(stderr, "%s: request %d differs:\n  %s\n  %s\n", variants[v].name, all[i], got[i], alone[all[i]]);
            free(got[i]);
        }
        fprintf(stderr, "%s: %d of %d replies differ; %lld forwards, %lld forward tokens, %lld input tokens\n",
                variants[v].name, diff, NREQ * 2, (long long)s.forwards, (long long)s.forward_tokens,
                (long long)s.input_tokens);
        CHECK_INT(diff, 0);
        if (v == 4) CHECK(s.forwards >= 6); /* every item its own row and forward */
        if (v == 4) single_forwards = s.forwards;
        if (v == 7) CHECK_INT(s.forwards, single_forwards); /* BS_BATCH_SINGLE does what the limits of 1 did */
        /* How jobs fall into batches depends on the lane's timing; one item per
         * forward does not, so the prefix cache's saving is measured there. */
        if (v == 7) single_tokens = s.forward_tokens;
        if (v == 8) CHECK(s.forward_tokens > single_tokens); /* the pinned template prefixes saved work */
        if (v == 0) CHECK(s.forward_tokens < s.input_tokens); /* packing saved work */
    }
    /* State cache: the same state asked twice in a row is inserted, then hit,
     * and the answers do not change. */
    {
        bs_engine_opts o = base;
        o.state_cache_mb = 64;
        bs_engine *en = NULL;
        bs_err e = {0};
        waiter w = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, 0, {0}, 0};
        CHECK_INT(bs_engine_create(&en, m, &o, NULL, &e), 0);
        for (int round = 0; round < 2 && en; round++) {
            bs_job *j = make_job(REQS[4], &w);
            bs_engine_submit(en, j);
            wait_for(&w, round + 1);
            char *got = strip_latency(j);
            CHECK_STR(got, alone[4]);
            free(got);
            bs_job_release(j);
            free(j);
        }
        bs_engine_stats s;
        if (en) {
            bs_engine_get_stats(en, &s);
            fprintf(stderr, "state cache: %lld inserts, %lld hits\n", (long long)s.state_inserts, (long long)s.state_hits);
            CHECK_INT(s.state_inserts, 1);
            CHECK_INT(s.state_hits, 1);
            bs_engine_destroy(en);
        }
    }
    for (int i = 0; i < NREQ; i++) free(alone[i]);
}

static void test_cancel_and_limit(bs_basal_model *m) {
    bs_engine_opts o;
    bs_engine_opts_default(&o);
    bs_engine *en = NULL;
    bs_err e = {0};
    waiter w = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, 0, {0}, 0};
    CHECK_INT(bs_engine_create(&en, m, &o, NULL, &e), 0);
    if (!en) return;
    /* a cancelled request is never computed (X2) */
    bs_job *c = make_job(REQS[0], &w);
    atomic_store(&c->cancelled, 1);
    bs_engine_submit(en, c);
    wait_for(&w, 1);
    bs_engine_stats s;
    bs_engine_get_stats(en, &s);
    CHECK_INT(c->status, 0);
    CHECK_INT(s.forwards, 0);
    CHECK_INT(s.dropped, 1);
    /* an over-long request fails alone (04 §3 P7); its neighbours succeed */
    size_t big = 3 * 2048 * 4;
    char *body = malloc(big + 256);
    int n = sprintf(body, "{\"model\":\"basal-tiny\",\"state\":\"");
    for (size_t i = 0; i < big / 4; i++) n += sprintf(body + n, "ab c");
    sprintf(body + n, "\",\"questions\":{\"q\":{\"type\":\"noul\",\"instructions\":\"x\"}}}");
    bs_job *ok1 = make_job(REQS[1], &w), *lng = make_job(body, &w), *ok2 = make_job(REQS[3], &w);
    bs_engine_submit(en, ok1);
    bs_engine_submit(en, lng);
    bs_engine_submit(en, ok2);
    wait_for(&w, 4);
    CHECK_INT(ok1->status, 200);
    CHECK_INT(ok2->status, 200);
    CHECK_INT(lng->status, 422);
    CHECK_CONTAINS(lng->reply.data, "{\"error\":\"unsupported\",\"detail\":[{\"type\":\"prompt_too_long\","
                                    "\"loc\":[\"body\",\"questions\",\"q\"],\"msg\":\"a prompt of ");
    CHECK_CONTAINS(lng->reply.data, "tokens exceeds the model limit 2048\"}]}");
    bs_job *all[] = {c, ok1, lng, ok2};
    for (int i = 0; i < 4; i++) { bs_job_release(all[i]); free(all[i]); }
    free(body);
    bs_engine_destroy(en);
}

/* The request limits (max_questions, max_request_tokens and its input-token
 * bound): 422 in the unsupported shape of both dialects, the neighbours
 * unaffected. */
static void test_request_limits(bs_basal_model *m) {
    bs_engine_opts o;
    bs_engine_opts_default(&o);
    CHECK_INT(o.limits.max_questions, 1024);
    CHECK_INT(o.limits.max_request_tokens, 65536);
    o.limits.max_questions = 3;
    o.limits.max_request_tokens = 400;
    bs_engine *en = NULL;
    bs_err e = {0};
    waiter w = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, 0, {0}, 0};
    CHECK_INT(bs_engine_create(&en, m, &o, NULL, &e), 0);
    if (!en) return;
    const char *four = "{\"model\":\"basal-tiny\",\"state\":\"s\",\"questions\":{\"a\":{\"type\":\"noul\","
                       "\"instructions\":\"x\"},\"b\":{\"type\":\"noul\",\"instructions\":\"y\"},\"c\":{\"type\":"
                       "\"noul\",\"instructions\":\"z\"},\"d\":{\"type\":\"noul\",\"instructions\":\"w\"}}}";
    /* three questions on a ~300-token state: about 300 + 3 x 2 x 20 distinct
     * tokens, over 400; the same state with one question fits */
    char state[2048] = "";
    for (int i = 0; i < 150; i++) strcat(state, "ab cd ");
    char three[4096], one[4096];
    snprintf(three, sizeof three, "{\"model\":\"basal-tiny\",\"state\":\"%s\",\"questions\":{\"a\":{\"type\":"
             "\"noul\",\"instructions\":\"first question here\"},\"b\":{\"type\":\"noul\",\"instructions\":"
             "\"a second question\"},\"c\":{\"type\":\"noul\",\"instructions\":\"and a third one\"}}}", state);
    snprintf(one, sizeof one, "{\"model\":\"basal-tiny\",\"state\":\"%.200s\",\"questions\":{\"a\":{\"type\":"
             "\"noul\",\"instructions\":\"first question here\"}}}", state);
    bs_job *j4 = make_job(four, &w), *j3 = make_job(three, &w), *j1 = make_job(one, &w);
    bs_job *b4 = make_job(four, &w);
    b4->dialect = BS_DIALECT_BASAL;
    bs_engine_submit(en, j4);
    bs_engine_submit(en, j3);
    bs_engine_submit(en, j1);
    bs_engine_submit(en, b4);
    wait_for(&w, 4);
    CHECK_INT(j4->status, 422);
    CHECK_STR(j4->reply.data, "{\"error\":\"unsupported\",\"detail\":[{\"type\":\"too_many_questions\",\"loc\":"
              "[\"body\",\"questions\"],\"msg\":\"4 questions; the server answers at most 3 in one request "
              "(max_questions)\"}]}");
    CHECK_INT(b4->status, 422);
    CHECK_STR(b4->reply.data, "{\"error\":\"4 questions; the server answers at most 3 in one request (max_questions)\"}");
    CHECK_INT(j3->status, 422);
    CHECK_STR(j3->reply.data, "{\"error\":\"unsupported\",\"detail\":[{\"type\":\"request_too_long\",\"loc\":"
              "[\"body\",\"questions\"],\"msg\":\"the prompts of this request hold more than 400 distinct tokens, "
              "the server's limit (max_request_tokens); ask fewer questions or send a shorter state\"}]}");
    CHECK_INT(j1->status, 200);
    bs_job *all[] = {j4, j3, j1, b4};
    for (int i = 0; i < 4; i++) { bs_job_release(all[i]); free(all[i]); }
    bs_engine_destroy(en);
}

/* A short request submitted while a long one runs in the long lane finishes
 * first: the long lane yields between layers (long_slice_ms 0). */
static double done_at[2];
static void on_done_t(bs_job *j, void *ctx) {
    done_at[(intptr_t)ctx] = bs_now_ms();
    (void)j;
}

static void test_short_before_long(const char *fixtures) {
    char dir[1024];
    snprintf(dir, sizeof dir, "%s/tiny-deep", fixtures);
    bs_pool *pool = bs_pool_create(0);
    bs_basal_model m;
    bs_err e = {0};
    if (bs_basal_load(&m, dir, pool, 1, &e) < 0) { fprintf(stderr, "%s\n", e.msg); CHECK(0); bs_pool_destroy(pool); return; }
    char *body = malloc(20000);
    int n = sprintf(body, "{\"model\":\"%s\",\"state\":\"", m.name);
    for (int i = 0; i < 1700; i++) n += sprintf(body + n, "%c ", 'a' + i % 26);
    sprintf(body + n, "\",\"questions\":{\"q\":{\"type\":\"noul\",\"instructions\":\"x\"}}}");
    char shortb[256];
    snprintf(shortb, sizeof shortb, "{\"model\":\"%s\",\"state\":\"hi\",\"questions\":{\"q\":{\"type\":\"noul\",\"instructions\":\"x\"}}}", m.name);
    char *ref_long = NULL, *ref_short = NULL;
    bs_engine_opts o;
    bs_engine_opts_default(&o);
    o.long_tokens = 0; /* reference: no long lane, no preemption */
    for (int pass = 0; pass < 2; pass++) {
        bs_gate *g = bs_gate_create(0, NULL, NULL); /* long_slice_ms 0: yield at every checkpoint */
        if (pass == 1) o.long_tokens = 1000;
        bs_engine *en = NULL;
        CHECK_INT(bs_engine_create(&en, &m, &o, g, &e), 0);
        bs_job *lj = make_job(body, NULL), *sj = make_job(shortb, NULL);
        lj->done = sj->done = on_done_t;
        lj->done_ctx = (void *)0;
        sj->done_ctx = (void *)1;
        done_at[0] = done_at[1] = 0;
        double t0 = bs_now_ms();
        bs_engine_submit(en, lj);
        usleep(100000); /* the long request is planned and running */
        double t1 = bs_now_ms();
        bs_engine_submit(en, sj);
        bs_engine_destroy(en); /* finishes everything */
        CHECK_INT(lj->status, 200);
        CHECK_INT(sj->status, 200);
        if (pass == 0) {
            ref_long = strip_latency(lj);
            ref_short = strip_latency(sj);
        } else {
            CHECK_INT(lj->lane, 1);
            CHECK_INT(sj->lane, 0);
            fprintf(stderr, "long request (long lane, preempted): %.1f ms; short request submitted at %.1f ms, "
                            "answered %.1f ms later\n", done_at[0] - t0, t1 - t0, done_at[1] - t1);
            CHECK(done_at[1] < done_at[0]);
            /* a resumed forward equals an uninterrupted one bitwise (04 §10 L5) */
            char *got_l = strip_latency(lj), *got_s = strip_latency(sj);
            CHECK_STR(got_l, ref_long);
            CHECK_STR(got_s, ref_short);
            free(got_l);
            free(got_s);
        }
        bs_job_release(lj); bs_job_release(sj);
        free(lj); free(sj);
        bs_gate_destroy(g);
    }
    free(ref_long); free(ref_short); free(body);
    bs_basal_free(&m);
    bs_pool_destroy(pool);
}

/* 04 §15 item 7: cost == long_tokens stays in the main lane, one more goes long. */
static void test_lane_routing(bs_basal_model *m) {
    bs_reply rep;
    bs_reply_init(&rep);
    bs_err e = {0};
    bs_plan plan = {0};
    bs_letter_cache lc;
    bs_letter_cache_init(&lc);
    CHECK_INT(bs_plan_text(&plan, REQS[0], strlen(REQS[0]), BS_DIALECT_SYSTEMONE, m, &lc, &rep, &e), 0);
    int64_t cost = bs_plan_cost(&plan);
    bs_plan_free(&plan);
    bs_reply_free(&rep);
    bs_letter_cache_free(&lc);
    for (int k = 0; k < 3; k++) {
        bs_engine_opts o;
        bs_engine_opts_default(&o);
        o.long_tokens = k == 0 ? (int)cost : k == 1 ? (int)cost - 1 : 0;
        bs_engine *en = NULL;
        waiter w = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, 0, {0}, 0};
        CHECK_INT(bs_engine_create(&en, m, &o, NULL, &e), 0);
        if (!en) return;
        bs_job *j = make_job(REQS[0], &w);
        bs_engine_submit(en, j);
        wait_for(&w, 1);
        CHECK_INT(j->status, 200);
        CHECK_INT(j->lane, k == 1 ? 1 : 0);
        bs_job_release(j);
        free(j);
        bs_engine_destroy(en);
    }
}

/* G2: a preemptible enter waits while an urgent caller waits. */
typedef struct { bs_gate *g; _Atomic int entered; } pre_arg;
static void *pre_thread(void *a) {
    pre_arg *p = a;
    bs_gate_enter_preemptible(p->g);
    p->entered = ++enter_seq;
    bs_gate_leave(p->g);
    return NULL;
}

static void test_gate_preemptible_waits(void) {
    bs_gate *g = bs_gate_create(100, NULL, NULL);
    bs_gate_enter_urgent(g);                 /* an urgent call holds the device */
    urgent_arg u = {g, 0, 0};
    pre_arg p = {g, 0};
    pthread_t tu, tp;
    pthread_create(&tu, NULL, urgent_thread, &u); /* a second urgent caller waits */
    usleep(30000);
    pthread_create(&tp, NULL, pre_thread, &p);
    usleep(30000);
    bs_gate_leave(g);
    pthread_join(tu, NULL);
    pthread_join(tp, NULL);
    CHECK(u.entered > 0 && p.entered > 0);
    CHECK(u.entered < p.entered); /* the waiting urgent call went first */
    bs_gate_destroy(g);
}

/* engine.h: a job submitted after bs_engine_stop is completed inside the
 * submit call with 500 "engine stopped" (02 §4.5), never queued. */
static void test_submit_after_stop(bs_basal_model *m) {
    bs_engine_opts o;
    bs_engine_opts_default(&o);
    o.no_prefix_cache = 1;
    bs_engine *en = NULL;
    bs_err e = {0};
    CHECK_INT(bs_engine_create(&en, m, &o, NULL, &e), 0);
    if (!en) return;
    waiter w = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, 0, {0}, 0};
    bs_job *before = make_job(REQS[0], &w);
    bs_engine_submit(en, before);
    bs_engine_stop(en);
    bs_job *after = make_job(REQS[1], &w);
    bs_engine_submit(en, after);
    pthread_mutex_lock(&w.mu);
    int done_now = w.n_done;
    pthread_mutex_unlock(&w.mu);
    CHECK(done_now >= 1); /* after is done on return (before may be too) */
    CHECK_INT(after->status, 500);
    CHECK_STR(after->reply.data, "{\"error\":\"internal\",\"detail\":\"engine stopped\"}");
    wait_for(&w, 2);
    CHECK_INT(before->status, 200); /* work queued before the stop is still answered */
    bs_engine_destroy(en);
    bs_job_release(before);
    bs_job_release(after);
    free(before);
    free(after);
}

int main(void) {
    test_trie_size();
    test_budget_chunks();
    test_admission();
    test_gate();
    test_gate_preemptible_waits();
    const char *fx = check_env("FIXTURES", "build/fixtures");
    char dir[1024];
    snprintf(dir, sizeof dir, "%s/tiny-bias", fx);
    bs_pool *pool = bs_pool_create(0);
    bs_basal_model m;
    bs_err e = {0};
    if (bs_basal_load(&m, dir, pool, 1, &e) < 0) {
        fprintf(stderr, "%s\n", e.msg);
        CHECK(0);
    } else {
        test_engine_invariance(&m);
        /* the same in the bf16 compute mode (its attention rounds k and v
         * before a prefix is cached: cache on or off, the same bits) */
        m.model.compute = BS_COMPUTE_BF16;
        CHECK_INT(bs_model_prepack(&m.model, &e), 0);
        fprintf(stderr, "bf16 mode (%s):\n", bs_gemm_bf16_kernel_name());
        test_engine_invariance(&m);
        bs_model_unpack(&m.model);
        m.model.compute = BS_COMPUTE_F32;
        test_cancel_and_limit(&m);
        test_request_limits(&m);
        test_lane_routing(&m);
        test_submit_after_stop(&m);
        bs_basal_free(&m);
    }
    bs_pool_destroy(pool);
    test_short_before_long(fx);
    return check_report("test_engine");
}
