/* The logit lens in the engine (engine/lens.h, issue 33):
 *  - the lens document does not depend on how the forwards are packed: a
 *    request (every question type, a 12-option choice) run alone with the
 *    prefix-trie rows, one item per forward, upstream's budget chunks, and
 *    packed in one step with a request that does not ask for the lens gives
 *    the same bytes; the other request's answer is unchanged and it records
 *    no layer;
 *  - every order's letter logits after the last layer are its served logits
 *    (the document checks it too) and the document's probabilities are the
 *    softmax of its logits;
 *  - a model on another backend than the CPU: bs_lens_plan refuses with 422
 *    lens_unavailable naming it, and bs_forward refuses lens rows without
 *    calling the backend; a plan not run with the lens has no document. */
#include <stdlib.h>

#include "check.h"
#include "engine/lens.h"
#include "engine/runner.h"
#include "protocol/pyjson.h"

static const char *REQ_LENS =
    "{\"model\":\"basal-tiny\",\"state\":\"Klient: paczka przyszła uszkodzona, proszę o zwrot.\",\"questions\":{"
    "\"c\":{\"type\":\"choice\",\"instructions\":\"Czego dotyczy?\",\"criteria\":{\"a\":\"zwrot\",\"b\":\"dostawa\","
    "\"c\":null}},"
    "\"n\":{\"type\":\"noul\",\"instructions\":\"Czy pilne?\"},"
    "\"s\":{\"type\":\"score\",\"instructions\":\"Jak pilne?\",\"criteria\":[\"nie\",\"trochę\",\"bardzo\"]},"
    "\"m\":{\"type\":\"multi\",\"instructions\":\"Tematy?\",\"criteria\":{\"x\":\"zwrot\",\"y\":null}},"
    "\"big\":{\"type\":\"choice\",\"instructions\":\"Która?\",\"criteria\":[\"a\",\"b\",\"c\",\"d\",\"e\",\"f\",\"g\","
    "\"h\",\"i\",\"j\",\"k\",\"l\"]}}}";
static const char *REQ_OTHER =
    "{\"model\":\"basal-tiny\",\"state\":\"Klient: paczka przyszła uszkodzona, proszę o zwrot.\",\"questions\":{"
    "\"c\":{\"type\":\"choice\",\"instructions\":\"Czego dotyczy?\",\"criteria\":{\"a\":\"zwrot\",\"b\":\"dostawa\"}}}}";

/* Plans body (with the lens when lens), runs every step on r with `batching`
 * together with `with` (another plan, or NULL), and writes the lens document
 * or the answer into out. */
static int run(const bs_basal_model *m, bs_letter_cache *lc, bs_runner *r, int batching, const char *body, int lens,
               bs_plan *with, bs_plan *p, bs_buf *out) {
    bs_reply rep;
    bs_reply_init(&rep);
    bs_err e = {0};
    int rc = bs_plan_text(p, body, strlen(body), BS_DIALECT_SYSTEMONE, m, lc, &rep, &e);
    if (rc == 0 && lens) rc = bs_lens_plan(p, m, &rep, &e);
    bs_plan *plans[2] = {p, with};
    r->batching = (bs_batching)batching;
    if (rc == 0) rc = bs_runner_run_all(r, plans, with ? 2 : 1, lc, NULL, &e);
    bs_buf ans;
    bs_buf_init(&ans);
    if (rc == 0) rc = bs_plan_answer(p, m, -1, &ans, &e);
    if (rc == 0 && lens) rc = bs_lens_document(p, m, ans.data, ans.len, out, &e);
    else if (rc == 0) bs_buf_put(out, ans.data, ans.len);
    if (rc < 0) fprintf(stderr, "run: %s %.*s\n", e.msg, (int)rep.body.len, rep.body.data ? rep.body.data : "");
    bs_buf_free(&ans);
    bs_reply_free(&rep);
    return rc;
}

/* Every order's probabilities are the softmax of its logits (one layer row
 * each) and its lens rows exist: walked over the parsed document. */
static void check_document(const char *doc, size_t len, int layers) {
    bj_value *v = NULL;
    bs_err e = {0};
    CHECK_INT(bj_parse(doc, len, NULL, &v, &e), 0);
    if (!v) return;
    const bj_value *qs = bj_get(v, "questions");
    int orders = 0;
    for (size_t qi = 0; qs && qi < qs->n; qi++) {
        const bj_value *ros = bj_get(qs->items[qi], "readouts");
        for (size_t ri = 0; ros && ri < ros->n; ri++) {
            const bj_value *ods = bj_get(ros->items[ri], "orders");
            for (size_t oi = 0; ods && oi < ods->n; oi++, orders++) {
                const bj_value *lg = bj_get(ods->items[oi], "logits"), *pr = bj_get(ods->items[oi], "probabilities");
                CHECK(lg && pr && (int)lg->n == layers && (int)pr->n == layers);
                for (int l = 0; lg && pr && l < layers && l < (int)lg->n; l++) {
                    const bj_value *a = lg->items[l], *b = pr->items[l];
                    double mx = -1e300, s = 0, x[16], q[16];
                    size_t k = a->n < 16 ? a->n : 16;
                    CHECK(b->type == BJ_ARRAY && b->n == a->n);
                    for (size_t i = 0; i < k; i++) {
                        x[i] = strtod(a->items[i]->str, NULL);
                        mx = x[i] > mx ? x[i] : mx;
                    }
                    for (size_t i = 0; i < k; i++) s += (q[i] = exp(x[i] - mx));
                    for (size_t i = 0; i < k && i < b->n; i++)
                        CHECK(fabs(q[i] / s - strtod(b->items[i]->str, NULL)) < 1e-12);
                }
            }
        }
    }
    CHECK(orders >= 12); /* c, n, s: 2 each; m: 2 labels x 2; big: 4 groups + the finalists' 2 */
    bj_free(v);
}

static void packing_invariance(void) {
    char dir[1024];
    snprintf(dir, sizeof dir, "%s/tiny-bias", check_env("FIXTURES", "build/fixtures"));
    bs_pool *pool = bs_pool_create(2);
    bs_basal_model m;
    bs_err e = {0};
    if (bs_basal_load(&m, dir, pool, 1, &e) < 0) {
        fprintf(stderr, "%s\n", e.msg);
        CHECK(0);
        bs_pool_destroy(pool);
        return;
    }
    bs_letter_cache lc;
    bs_letter_cache_init(&lc);
    bs_prefix_set ps;
    CHECK_INT(bs_prefix_set_build(&ps, &m, NULL, &e), 0);
    bs_runner r;
    bs_runner_init(&r, &m, 32768, 8192, &ps, 1 << 20, NULL, 0);
    bs_buf ref, got, other_ref, other;
    bs_buf_init(&ref);
    bs_buf_init(&other_ref);
    bs_plan p = {0}, q = {0};
    CHECK_INT(run(&m, &lc, &r, BS_BATCH_TREE, REQ_LENS, 1, NULL, &p, &ref), 0);
    bs_plan_free(&p);
    CHECK_INT(run(&m, &lc, &r, BS_BATCH_TREE, REQ_OTHER, 0, NULL, &q, &other_ref), 0);
    bs_plan_free(&q);
    check_document(ref.data, ref.len, m.model.cfg.n_layers);
    const int modes[] = {BS_BATCH_TREE, BS_BATCH_SINGLE, BS_BATCH_BUDGET};
    for (int i = 0; i < 3; i++) {
        for (int together = 0; together < 2; together++) {
            bs_buf_init(&got);
            bs_buf_init(&other);
            bs_plan o = {0};
            bs_reply rep;
            bs_reply_init(&rep);
            if (together) CHECK_INT(bs_plan_text(&o, REQ_OTHER, strlen(REQ_OTHER), BS_DIALECT_SYSTEMONE, &m, &lc, &rep, &e), 0);
            CHECK_INT(run(&m, &lc, &r, modes[i], REQ_LENS, 1, together ? &o : NULL, &p, &got), 0);
            CHECK(got.len == ref.len && memcmp(got.data, ref.data, ref.len) == 0);
            if (got.len != ref.len || memcmp(got.data, ref.data, ref.len))
                fprintf(stderr, "batching %d, together %d: the lens document differs\n", modes[i], together);
            if (together) { /* the other request: its answer as alone, and no layer recorded */
                CHECK_INT(bs_plan_answer(&o, &m, -1, &other, &e), 0);
                CHECK(other.len == other_ref.len && memcmp(other.data, other_ref.data, other.len) == 0);
                CHECK(o.n_items == 1 && !o.items[0].orders[0].lens && !o.items[0].orders[1].lens);
            }
            bs_plan_free(&p);
            bs_plan_free(&o);
            bs_reply_free(&rep);
            bs_buf_free(&got);
            bs_buf_free(&other);
        }
    }
    /* a plan run without the lens has no document */
    bs_buf_init(&got);
    CHECK_INT(run(&m, &lc, &r, BS_BATCH_TREE, REQ_OTHER, 0, NULL, &q, &other), 0);
    CHECK_INT(bs_lens_document(&q, &m, "{}", 2, &got, &e), BS_EINTERNAL);
    bs_plan_free(&q);
    bs_buf_free(&got);
    bs_buf_free(&other);
    bs_buf_free(&ref);
    bs_buf_free(&other_ref);
    bs_runner_free(&r);
    bs_prefix_set_free(&ps);
    bs_letter_cache_free(&lc);
    bs_basal_free(&m);
    bs_pool_destroy(pool);
}

static int backend_calls;
static int fake_forward(bs_backend *b, const bs_model *m, const bs_fwd_input *in, float *logits, bs_err *e) {
    backend_calls++;
    return BS_OK;
}

static void other_backend(void) {
    bs_backend be = {.name = "cuda f16 (test)", .forward = fake_forward};
    bs_basal_model m;
    memset(&m, 0, sizeof m);
    m.model.backend = &be;
    bs_plan p = {0};
    bs_reply rep;
    bs_reply_init(&rep);
    bs_err e = {0};
    CHECK_INT(bs_lens_plan(&p, &m, &rep, &e), BS_EINVAL);
    CHECK_INT(rep.status, 422);
    CHECK_CONTAINS(rep.body.data, "\"lens_unavailable\"");
    CHECK_CONTAINS(rep.body.data, "cuda f16 (test)");
    CHECK_INT(p.lens, 0);
    bs_reply_free(&rep);
    int32_t id = 1, pos = 0, ro = 0, lr = 0;
    bs_unit u = {.q_start = 0, .q_len = 1, .n_ranges = 1, .r_start = {0}, .r_len = {1}};
    bs_fwd_input in = {.n_tokens = 1, .ids = &id, .pos = &pos, .n_units = 1, .units = &u, .n_readouts = 1,
                       .readouts = &ro, .n_out_ids = 1, .out_ids = &id, .n_lens = 1, .lens_rows = &lr};
    float lg;
    CHECK_INT(bs_forward(&m.model, &in, &lg, &e), BS_EUNSUP);
    CHECK_CONTAINS(e.msg, "CPU backend");
    CHECK_INT(backend_calls, 0);
    in.n_lens = 0;
    CHECK_INT(bs_forward(&m.model, &in, &lg, &e), BS_OK); /* without the lens the backend runs it */
    CHECK_INT(backend_calls, 1);
}

int main(void) {
    packing_invariance();
    other_backend();
    return check_report("test_lens");
}
