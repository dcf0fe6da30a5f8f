/* `basal bench` (spec 06 §7.1): single-decision latency with the basal-bench
 * methodology — lat1 (one option order) and lat2 (both orders sharing their
 * prefix), each including rendering, tokenization, packing, the forward with
 * readout and the host math; warm-up first, the first 5 items discarded,
 * median and p95 of the rest — then decisions/s in groups of 16 questions, a
 * per-stage profile, and the achieved GFLOP/s next to the sgemm peak of the
 * same machine measured in the same run (this project's GEMM on the model's
 * MLP shape, and OpenBLAS's cblas_sgemm when libopenblas can be loaded).
 * Items: those of a reference export's bench.jsonl (--reference DIR: one
 * question each with raw option texts, accuracy against `gold`), else
 * synthetic ones: one choice question with 4 options on a distinct state of
 * about --state-tokens tokens each. */
#include <dlfcn.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/bench/item.h"
#include "api/session.h"
#include "cli/cli.h"
#include "cli/parity/stats.h"
#include "base/progress.h"
#include "protocol/respjson.h"
#include "base/util.h"
#include "engine/pack.h"
#include "engine/plan.h"
#include "engine/runner.h"

static int cmp_d(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* {"n","max","p50","p95","p99","mean"} of the absolute values of xs
 * (basal-rs stats.rs summary, computed as `basal compare` does); 0 on success. */
static int put_summary(bs_buf *b, const double *xs, int n) {
    ps_stats t;
    if (ps_summary_stats(xs, (size_t)(n > 0 ? n : 0), &t) < 0) return -1;
    const char *names[] = {"max", "p50", "p95", "p99", "mean"};
    const double vals[] = {t.max, t.p50, t.p95, t.p99, t.mean};
    bs_buf_printf(b, "{\"n\":%zu", t.n);
    for (int i = 0; i < 5; i++) {
        bs_buf_printf(b, ",\"%s\":", names[i]);
        if (isfinite(vals[i])) bs_resp_double(b, vals[i]);
        else bs_buf_puts(b, "null");
    }
    bs_buf_putc(b, '}');
    return 0;
}

/* A Polish support-ticket state of roughly `tokens` tokens, different per item. */
static void make_body(bs_buf *b, const char *model, int item, int tokens) {
    static const char *words[] = {"klient", "zamówienie", "paczka", "dostawa", "reklamacja", "zwrot", "faktura",
                                  "płatność", "konto", "hasło", "karta", "przelew", "termin", "umowa", "sklep"};
    b->len = 0;
    bs_buf_puts(b, "{\"model\":");
    bs_resp_cstr(b, model);
    bs_buf_printf(b, ",\"state\":\"Zgłoszenie %d: ", item);
    /* about 2.2 tokens per word with the fixture tokenizer */
    for (int w = 0; w < tokens * 10 / 22; w++)
        bs_buf_printf(b, "%s%s", words[(item * 7 + w * 13 + w / 5) % 15], w % 9 == 8 ? ". " : " ");
    bs_buf_puts(b, "\",\"questions\":{\"q\":{\"type\":\"choice\",\"instructions\":\"Którego działu dotyczy zgłoszenie?\","
                   "\"criteria\":[\"płatności\",\"dostawy\",\"reklamacje\",\"inne\"]}}}");
}

/* One item of a reference export's bench.jsonl (06 §6), asked as the
 * request of cli/bench/item.h (keys "0".."n-1" in option order, noul "true"
 * and "false"), and its gold index (-1: none). */
typedef struct {
    size_t k;
    int noul, gold;
} ref_item;

/* Reads DIR/bench.jsonl into bodies and items; returns the count, or -1
 * after printing what is wrong with which line. */
static int read_reference(const char *dir, const char *model, bs_buf **bodies, ref_item **items) {
    char *path = bs_path_join(dir, "bench.jsonl");
    cli_jsonl recs = {0};
    bs_err e = {0};
    int rc = -1;
    size_t n = 0;
    if (!path || cli_jsonl_read(path, &recs, &e) < 0) {
        cli_error("bench", "%s", path ? e.msg : "out of memory");
        goto done;
    }
    *bodies = calloc(recs.n ? recs.n : 1, sizeof **bodies);
    *items = calloc(recs.n ? recs.n : 1, sizeof **items);
    if (!*bodies || !*items) {
        cli_error("bench", "out of memory");
        goto done;
    }
    for (; n < recs.n; n++) {
        const bj_value *v = recs.v[n], *opts = bj_get(v, "options"), *gold = bj_get(v, "gold");
        const bj_value *type = bj_get(v, "type");
        bs_buf_init(&(*bodies)[n]);
        if (cli_bench_item_body(v, model, &(*bodies)[n], &e) < 0) {
            cli_error("bench", "%s line %zu: %s", path, recs.line[n], e.msg);
            n++;
            goto done;
        }
        char *gend = NULL;
        long g = gold && gold->type == BJ_NUMBER ? strtol(gold->str, &gend, 10) : -1;
        if (gold && gold->type != BJ_NULL && (gold->type != BJ_NUMBER || *gend || g < 0 || (size_t)g >= opts->n)) {
            cli_error("bench", "%s line %zu: \"gold\" must be an option index", path, recs.line[n]);
            n++;
            goto done;
        }
        ref_item *it = &(*items)[n];
        it->k = opts->n;
        it->noul = type && type->type == BJ_STRING && !strcmp(type->str, "noul");
        it->gold = gold && gold->type == BJ_NUMBER ? (int)g : -1;
    }
    if (n < 6) {
        cli_error("bench", "%s has %zu items; the method needs at least 6 (5 warm-up)", path, n);
        goto done;
    }
    rc = (int)n;
done:
    if (rc < 0) {
        for (size_t i = 0; *bodies && i < n; i++) bs_buf_free(&(*bodies)[i]);
        free(*bodies);
        free(*items);
        *bodies = NULL;
        *items = NULL;
    }
    cli_jsonl_free(&recs);
    free(path);
    return rc;
}

/* The index of the most probable option of question "q" in an answer body
 * (the first of equals, as argmax), or -1. */
static int answer_argmax(const basal_result *ans, const ref_item *it) {
    bj_value *v = NULL;
    if (bj_parse(ans->json, ans->len, NULL, &v, NULL) < 0) return -1;
    const bj_value *a = bj_get(bj_get(v, "answers"), "q");
    int best = -1;
    if (it->noul) { /* noul answers P(true), option 0 */
        const bj_value *p = bj_get(a, "noul");
        if (p && p->type == BJ_NUMBER) best = strtod(p->str, NULL) >= 0.5 ? 0 : 1;
    } else {
        const bj_value *p = bj_get(a, "probabilities");
        double bp = -1;
        for (size_t j = 0; p && j < it->k; j++) {
            char key[24];
            snprintf(key, sizeof key, "%zu", j);
            const bj_value *x = bj_get(p, key);
            double xv = x && x->type == BJ_NUMBER ? strtod(x->str, NULL) : -1;
            if (xv > bp) {
                bp = xv;
                best = (int)j;
            }
        }
    }
    bj_free(v);
    return best;
}

/* Plans one item as the session would (lat1's own forward and the packed
 * token count need its prompts). */
static int prepare(const bs_basal_model *m, bs_letter_cache *lc, const bs_buf *body, bs_plan *p, bs_err *e) {
    bs_reply rep;
    bs_reply_init(&rep);
    int rc = bs_plan_text(p, body->data, body->len, BS_DIALECT_SYSTEMONE, m, lc, &rep, e);
    if (rc == BS_EINVAL && rep.body.len) bs_fail(e, rc, "bench item rejected: %s", rep.body.data);
    bs_reply_free(&rep);
    return rc;
}

/* lat1: prepare, then the order-0 prompt alone: pack, forward, softmax.
 * basal-rs's lat1 reads one option order, which no decision does (every
 * readout averages both, 01 §7), so it is not a basal_decide. */
static int decide_one_order(const bs_basal_model *m, bs_letter_cache *lc, const bs_buf *body, bs_fwd_profile *pf,
                            bs_err *e) {
    bs_plan p;
    int rc = prepare(m, lc, body, &p, e);
    if (rc == 0) {
        bs_item *it = &p.items[0];
        const int32_t *pr = it->orders[0].ids;
        int32_t len = it->orders[0].n_ids;
        bs_row row;
        bs_packed pk;
        float lg[BS_MAX_LETTER_OPTIONS];
        double q[BS_MAX_LETTER_OPTIONS];
        if ((rc = bs_pack_row(&row, &pr, &len, 1, e)) == 0) {
            if ((rc = bs_packed_build(&pk, &row, 1, NULL, it->letter_ids, (int32_t)it->k, e)) == 0) {
                pk.in.profile = pf;
                rc = bs_forward(&m->model, &pk.in, lg, e);
                if (rc == 0) rc = bs_softmax_logits(lg, (int)it->k, q, e);
                bs_packed_free(&pk);
            }
            bs_row_free(&row);
        }
    }
    bs_plan_free(&p);
    return rc;
}

/* Tokens of an item's orders packed in one row with their shared prefix, for
 * every item of the request (basal-rs bench: p.packed.ids.len(), template
 * prefix included). Planned again here, outside the timed decision. */
static int packed_tokens(const bs_basal_model *m, bs_letter_cache *lc, const bs_buf *body, int64_t *out, bs_err *e) {
    bs_plan p;
    int rc = prepare(m, lc, body, &p, e);
    *out = 0;
    for (size_t i = 0; rc == 0 && i < p.n_items; i++) {
        const bs_item *it = &p.items[i];
        const int32_t *pr[BS_N_ORDERS];
        int32_t len[BS_N_ORDERS];
        for (int o = 0; o < it->n_orders; o++) {
            pr[o] = it->orders[o].ids;
            len[o] = it->orders[o].n_ids;
        }
        bs_row row;
        if ((rc = bs_pack_row(&row, pr, len, it->n_orders, e)) == 0) {
            *out += row.len;
            bs_row_free(&row);
        }
    }
    bs_plan_free(&p);
    return rc;
}

/* lat2, accuracy and throughput: n items decided in one call of the session
 * (basal_decide_batch: each request planned from scratch, their forwards
 * packed together). Optional: the preparation and the rest (forwards, host
 * math) in ms, and each item's most probable option (refs: the items'
 * reference data). A refused item is an error of the bench. */
static int decide_items(basal_session *ses, const bs_buf *bodies, int n, bs_err *e, double *prep_ms, double *fwd_ms,
                        const ref_item *refs, int *argmax) {
    basal_result *res = calloc((size_t)n, sizeof *res);
    const char **req = calloc((size_t)n, sizeof *req);
    size_t *lens = calloc((size_t)n, sizeof *lens);
    int rc = res && req && lens ? 0 : bs_fail(e, BS_ENOMEM, "out of memory");
    for (int i = 0; rc == 0 && i < n; i++) {
        req[i] = bodies[i].data ? bodies[i].data : "";
        lens[i] = bodies[i].len;
    }
    if (rc == 0) rc = basal_decide_batch(ses, (size_t)n, req, lens, res, e);
    double prep = 0;
    for (int i = 0; rc == 0 && i < n; i++) {
        if (res[i].status != 200) {
            rc = bs_fail(e, BS_EINVAL, "bench item rejected: %s", res[i].json);
            break;
        }
        prep += res[i].plan_ms;
        if (refs && argmax) argmax[i] = answer_argmax(&res[i], &refs[i]);
    }
    if (rc == 0 && prep_ms) *prep_ms = prep;
    if (rc == 0 && fwd_ms) *fwd_ms = n ? res[0].forward_ms : 0; /* the call's, shared by its items */
    for (int i = 0; res && i < n; i++) basal_result_free(&res[i]);
    free(res);
    free(req);
    free(lens);
    return rc;
}

typedef void (*sgemm_fn)(int, int, int, int, int, int, float, const float *, int, const float *, int, float, float *,
                         int);
typedef void (*set_threads_fn)(int);

/* GFLOP/s of y[M,N] = x[M,K] w[N,K]^T: best of 3 after a warm-up. */
static double gemm_gflops(bs_pool *pool, int M, int N, int K, sgemm_fn blas, bs_compute mode, int int8) {
    float *x = malloc((size_t)M * K * 4), *w = malloc((size_t)N * K * 4), *y = malloc((size_t)M * N * 4);
    if (!x || !w || !y) { free(x); free(w); free(y); return 0; }
    for (size_t i = 0; i < (size_t)M * K; i++) x[i] = (float)((i * 2654435761u) % 1000) / 1000.0f - 0.5f;
    for (size_t i = 0; i < (size_t)N * K; i++) w[i] = (float)((i * 40503u) % 1000) / 1000.0f - 0.5f;
    bs_wmat wm = {BS_F32, w, N, K, NULL, BS_WPACK_NONE, NULL};
    /* the weights as a loaded model holds them in this mode (int8: W8A8, the definition's per-row rule) */
    int8_t *q = int8 ? malloc((size_t)N * K) : NULL;
    float *sc = int8 ? malloc((size_t)N * sizeof *sc) : NULL;
    if (int8) {
        if (!q || !sc) { free(x); free(w); free(y); free(q); free(sc); return 0; }
        bs_gemm_quantize_rows(pool, &wm, NULL, NULL, q, sc);
        int pr = bs_gemm_pack_w8a8(pool, &wm, q, sc, NULL);
        free(q);
        free(sc);
        if (pr < 0) { free(x); free(w); free(y); return 0; }
    } else if (!blas && bs_gemm_prepack(pool, &wm, mode, NULL) < 0) { free(x); free(w); free(y); return 0; }
    double best = 1e30;
    for (int r = 0; r < 4; r++) {
        double t0 = bs_now_ms();
        if (blas) blas(101, 111, 112, M, N, K, 1.0f, x, K, w, K, 0.0f, y, N); /* row-major, x * w^T */
        else bs_gemm_mode(pool, mode, x, K, M, &wm, y, N);
        double t = bs_now_ms() - t0;
        if (r > 0 && t < best) best = t;
    }
    bs_gemm_unpack(&wm);
    free(x); free(w); free(y);
    return 2.0 * M * (double)N * K / (best / 1000.0) / 1e9;
}

const cli_doc cli_doc_bench = {
    "bench", "--model REF [options]",
    "single-decision latency (lat1, lat2), accuracy, decisions per second and GEMM GFLOP/s",
    "The basal-bench methodology (spec 06 §7.1). Items: a reference export's bench.jsonl\n"
    "(--reference DIR: one question per line with state, question, options, type choice,\n"
    "score or noul, gold; accuracy over all items in calls of 32 questions, budget batching), else\n"
    "synthetic choice questions of --state-tokens tokens. The first 5 latency items are warm-up;\n"
    "medians and p95 of the rest. Summary on stderr, JSON on stdout or with --out.\n",
};

/* One run of `basal bench`: the options, the session, the items, and the
 * figures of every pass. */
typedef struct {
    const char *reference, *batching;
    int lat_n, state_tokens, group, passes, tp_items, acc_group;
    basal_session *ses;
    const bs_basal_model *mp;
    bs_letter_cache *lc;
    bs_runner *run;            /* the session's: its stage profile */
    bs_pool *pool;
    int n, nb, n_ref;          /* latency items (5 warm-up + lat_n), bodies, reference items */
    bs_buf *bodies;
    ref_item *refs;
    int *argmax;               /* per reference item, the answer's option */
    double *lat1, *lat2, *prep, *fwd;
    int64_t *item_tokens;
    bs_fwd_profile prof, prof1;
    int correct, with_gold;
    double all_items_s;        /* the accuracy pass */
    double dec_runs[3];        /* the throughput passes, in run order */
    double ours, blas, ours_bf16; /* the GEMM peaks, GFLOP/s */
    int bf16;                  /* dtype bf16 on the CPU: also the bf16 GEMM peak */
    double ours_int8;          /* dtype int8: the W8A8 GEMM peak, GOP/s */
    bs_err e;
} bench_run;

/* What the report and the summary line say of the timed items. */
typedef struct {
    double l1, l2, p95, dec_s, gemm_gf, total_gf;
} bench_figures;

/* The items: a reference export's bench.jsonl, else synthetic ones; the
 * counts of the passes follow from them. Negative on a failure (reported by
 * read_reference; out of memory silently, as before). */
static int load_items(bench_run *b) {
    if (b->reference) {
        if ((b->n_ref = read_reference(b->reference, b->mp->name, &b->bodies, &b->refs)) < 0) return -1;
        if (b->lat_n > b->n_ref - 5) b->lat_n = b->n_ref - 5;
        if (b->tp_items < 0) b->tp_items = b->n_ref < 128 ? b->n_ref : 128;
        if (b->tp_items > b->n_ref) b->tp_items = b->n_ref;
        b->n = b->lat_n + 5;
        b->nb = b->n_ref;
    } else {
        if (b->tp_items < 0) b->tp_items = 32;
        b->n = b->lat_n + 5;
        b->nb = b->n > b->tp_items ? b->n : b->tp_items;
        if (!(b->bodies = calloc((size_t)b->nb, sizeof *b->bodies))) return -1;
        for (int i = 0; i < b->nb; i++) make_body(&b->bodies[i], b->mp->name, i, b->state_tokens);
    }
    return 0;
}

/* The per-item results of the passes. Negative when out of memory. */
static int alloc_results(bench_run *b) {
    size_t n = (size_t)b->n;
    b->lat1 = calloc(n, sizeof *b->lat1);
    b->lat2 = calloc(n, sizeof *b->lat2);
    b->prep = calloc(n, sizeof *b->prep);
    b->fwd = calloc(n, sizeof *b->fwd);
    b->item_tokens = calloc(n, sizeof *b->item_tokens);
    b->argmax = calloc((size_t)(b->n_ref ? b->n_ref : 1), sizeof *b->argmax);
    return b->lat1 && b->lat2 && b->prep && b->fwd && b->item_tokens && b->argmax ? 0 : -1;
}

/* accuracy: every item, 32 questions per call, budget batching (06 §7.1 step 2).
 * Negative on a failure (in e). */
static int accuracy_pass(bench_run *b) {
    if (!b->n_ref) return 0;
    bs_session_set_batching(b->ses, BS_BATCH_BUDGET);
    double s = bs_now_ms();
    bs_progress *pg = bs_progress_start("bench: accuracy", (uint64_t)b->n_ref, "items");
    for (int g0 = 0; g0 < b->n_ref; g0 += b->acc_group) {
        int k = b->n_ref - g0 < b->acc_group ? b->n_ref - g0 : b->acc_group;
        if (decide_items(b->ses, &b->bodies[g0], k, &b->e, NULL, NULL, &b->refs[g0], &b->argmax[g0]) < 0) {
            bs_progress_end(pg);
            return -1;
        }
        bs_progress_add(pg, (uint64_t)k);
    }
    bs_progress_end(pg);
    b->all_items_s = (bs_now_ms() - s) / 1000.0;
    for (int i = 0; i < b->n_ref; i++)
        if (b->refs[i].gold >= 0) {
            b->with_gold++;
            b->correct += b->argmax[i] == b->refs[i].gold;
        }
    bs_session_set_batching(b->ses, BS_BATCH_TREE);
    return 0;
}

/* lat1 and lat2 of each latency item, the first 5 discarded; the profile of
 * the timed ones. Negative on a failure (in e). */
static int latency_pass(bench_run *b) {
    const bs_basal_model *mp = b->mp;
    bs_letter_cache *lcp = b->lc;
    bs_runner *runp = b->run;
    for (int i = 0; i < b->n; i++) {
        /* warm-up once with one order and once with both, then the timed runs */
        if (decide_one_order(mp, lcp, &b->bodies[i], NULL, &b->e) < 0 ||
            decide_items(b->ses, &b->bodies[i], 1, &b->e, NULL, NULL, NULL, NULL) < 0)
            return -1;
        double s = bs_now_ms();
        if (decide_one_order(mp, lcp, &b->bodies[i], i >= 5 ? &b->prof1 : NULL, &b->e) < 0) return -1;
        b->lat1[i] = bs_now_ms() - s;
        runp->profile = i >= 5 ? &b->prof : NULL;
        s = bs_now_ms();
        if (decide_items(b->ses, &b->bodies[i], 1, &b->e, &b->prep[i], &b->fwd[i], NULL, NULL) < 0) return -1;
        b->lat2[i] = bs_now_ms() - s;
        runp->profile = NULL;
        if (packed_tokens(mp, lcp, &b->bodies[i], &b->item_tokens[i], &b->e) < 0) return -1;
        fprintf(stderr, "item %d/%d%s: lat1 %.1f ms, lat2 %.1f ms\n", i + 1, b->n, i < 5 ? " (discarded)" : "",
                b->lat1[i], b->lat2[i]);
    }
    return 0;
}

/* decisions/s: a warm-up group, then --passes passes over the throughput
 * items in groups. Negative on a failure (in e). */
static int throughput_pass(bench_run *b) {
    /* decisions/s groups use the chosen batching; the latency items above are single decisions either way */
    bs_session_set_batching(b->ses, strcmp(b->batching, "budget") ? BS_BATCH_TREE : BS_BATCH_BUDGET);
    if (b->tp_items <= 0) return 0;
    int group = b->group, tp_items = b->tp_items;
    int warm = group < tp_items ? group : tp_items;
    char what[96];
    snprintf(what, sizeof what, "bench: throughput, %d passes of %d decisions", b->passes, tp_items);
    bs_progress *pg = bs_progress_start(what, (uint64_t)(warm + b->passes * tp_items), "decisions");
    for (int pass = -1; pass < b->passes; pass++) { /* pass -1 is the warm-up group */
        double s = bs_now_ms();
        int items = pass < 0 ? warm : tp_items;
        for (int g0 = 0; g0 < items; g0 += group) {
            int k = items - g0 < group ? items - g0 : group;
            if (decide_items(b->ses, &b->bodies[g0], k, &b->e, NULL, NULL, NULL, NULL) < 0) {
                bs_progress_end(pg);
                return -1;
            }
            bs_progress_add(pg, (uint64_t)k);
        }
        if (pass >= 0) b->dec_runs[pass] = items / ((bs_now_ms() - s) / 1000.0);
    }
    bs_progress_end(pg);
    return 0;
}

/* sgemm peak on the model's gate/up shape at 300 rows, same threads (CPU
 * backend only: it says nothing about a GPU) */
static void gemm_peak(bench_run *b) {
    int H = b->mp->cfg.hidden, I = b->mp->cfg.inter;
    const bs_backend *be = b->mp->model.backend;
    b->ours = be ? 0 : gemm_gflops(b->pool, 300, I, H, NULL, BS_COMPUTE_F32, 0);
    b->blas = 0;
    b->bf16 = !be && b->mp->model.compute == BS_COMPUTE_BF16; /* dtype bf16: also the bf16 GEMM peak */
    b->ours_bf16 = b->bf16 ? gemm_gflops(b->pool, 300, I, H, NULL, BS_COMPUTE_BF16, 0) : 0;
    b->ours_int8 = !be && b->mp->model.quant == BS_QUANT_INT8 ? gemm_gflops(b->pool, 300, I, H, NULL, BS_COMPUTE_BF16, 1) : 0;
    void *lib = be ? NULL : dlopen("libopenblas.so.0", RTLD_NOW | RTLD_LOCAL);
    if (lib) {
        sgemm_fn f = (sgemm_fn)dlsym(lib, "cblas_sgemm");
        set_threads_fn st = (set_threads_fn)dlsym(lib, "openblas_set_num_threads");
        if (f && st) {
            st(bs_pool_size(b->pool));
            b->blas = gemm_gflops(b->pool, 300, I, H, f, BS_COMPUTE_F32, 0);
        }
        dlclose(lib);
    }
}

/* The report's first fields, up to the opening of "lat2_ms_all". */
static void put_report_head(const bench_run *b, bs_buf *rep, double load_s, const char *wsha, const bench_figures *fig) {
    const bs_basal_model *mp = b->mp;
    const bs_backend *be = mp->model.backend;
    const bs_fwd_profile *prof = &b->prof;
    int L = b->lat_n, H = mp->cfg.hidden, I = mp->cfg.inter;
    double flop_per_dec = (prof->gemm_flop + prof->attn_flop) / L;
    /* basal-rs writes the batching with Rust's Debug name */
    const char *batching_name = strcmp(b->batching, "budget") ? "Tree" : "Budget";
    int tp_done = b->tp_items > 0 ? b->tp_items : 0;
    bs_buf_printf(rep,
                  "{\"model\":\"%s\",\"weights_sha256\":%s,\"backend\":\"%s\",\"load_s\":%.3f,\"threads\":%d,\"kernel\":\"%s\","
                  "\"compute\":\"%s\",\"bf16_kernel\":\"%s\",\"int8_kernel\":\"%s\","
                  "\"state_tokens\":%d,\"n\":%d,"
                  "\"lat_n\":%d,\"lat1_ms\":%.3f,\"lat2_ms\":%.3f,\"lat2_p95_ms\":%.3f,"
                  "\"dec_s\":%.4f,\"dec_s_runs\":[%.4f,%.4f,%.4f],\"dec_s_questions\":%d,\"dec_s_group\":%d,"
                  "\"dec_s_batching\":\"%s\","
                  "\"profile_lat2\":{\"forward_ms\":%.3f,\"gemm_ms\":%.3f,\"attention_ms\":%.3f,\"other_ms\":%.3f,"
                  "\"gemm_gflop\":%.3f,\"attention_gflop\":%.3f},\"gemm_gflops_in_forward\":%.2f,"
                  "\"forward_gflops\":%.2f,\"sgemm_peak\":{\"shape\":[300,%d,%d],\"basal_gflops\":%.2f,"
                  "\"openblas_gflops\":%.2f,\"basal_bf16_gflops\":%.2f,\"basal_int8_gops\":%.2f},\"flop_bound_ms_at_openblas_peak\":%.3f,\"lat2_ms_all\":[",
                  mp->name, wsha, be ? be->name : "cpu", load_s, bs_pool_size(b->pool), bs_gemm_kernel_name(bs_gemm_kernel()),
                  be ? "f32" : bs_model_dtype_name(&b->mp->model), b->bf16 ? bs_gemm_bf16_kernel_name() : "",
                  b->ours_int8 > 0 ? bs_gemm_i8_kernel_name() : "", b->state_tokens,
                  b->n_ref ? b->n_ref : b->nb, L, fig->l1, fig->l2, fig->p95, fig->dec_s, b->dec_runs[0], b->dec_runs[1],
                  b->dec_runs[2], tp_done, b->group, batching_name, prof->total_ms / L, prof->gemm_ms / L,
                  prof->attn_ms / L, (prof->total_ms - prof->gemm_ms - prof->attn_ms) / L, prof->gemm_flop / L / 1e9,
                  prof->attn_flop / L / 1e9, fig->gemm_gf, fig->total_gf, I, H, b->ours, b->blas, b->ours_bf16, b->ours_int8,
                  b->blas > 0 ? flop_per_dec / (b->blas * 1e9) * 1000.0 : 0.0);
}

/* The JSON report into rep, and the figures of the summary line (the
 * latency arrays end up sorted). acc: the accuracy as JSON. Negative when
 * out of memory. */
static int put_report(bench_run *b, bs_buf *rep, double load_s, const char *wsha, const bs_buf *acc,
                      bench_figures *fig) {
    int n = b->n, L = b->lat_n;
    double *lat1 = b->lat1, *lat2 = b->lat2;
    const bs_fwd_profile *prof = &b->prof;
    /* per timed item, in item order (before the sorts below) */
    bs_buf per_item;
    bs_buf_init(&per_item);
    for (int i = 5; i < n; i++)
        bs_buf_printf(&per_item, "%s{\"index\":%d,\"packed_tokens\":%lld,\"lat1_ms\":%.3f,\"lat2_ms\":%.3f,"
                                 "\"lat2_prepare_ms\":%.3f,\"lat2_forward_ms\":%.3f}",
                      i > 5 ? "," : "", i, (long long)b->item_tokens[i], lat1[i], lat2[i], b->prep[i], b->fwd[i]);
    double *tok = calloc((size_t)L, sizeof *tok);
    if (!tok) { bs_buf_free(&per_item); return -1; }
    for (int i = 0; i < L; i++) tok[i] = (double)b->item_tokens[5 + i];
    qsort(lat1 + 5, (size_t)L, sizeof *lat1, cmp_d);
    qsort(lat2 + 5, (size_t)L, sizeof *lat2, cmp_d);
    double dec_sorted[3] = {b->dec_runs[0], b->dec_runs[1], b->dec_runs[2]};
    qsort(dec_sorted, 3, sizeof(double), cmp_d);
    fig->l1 = ps_median_sorted(lat1 + 5, (size_t)L);
    fig->l2 = ps_median_sorted(lat2 + 5, (size_t)L);
    fig->p95 = ps_quantile_sorted(lat2 + 5, (size_t)L, 0.95);
    fig->dec_s = dec_sorted[1];
    fig->gemm_gf = prof->gemm_ms > 0 ? prof->gemm_flop / (prof->gemm_ms / 1000.0) / 1e9 : 0;
    fig->total_gf = prof->total_ms > 0 ? (prof->gemm_flop + prof->attn_flop) / (prof->total_ms / 1000.0) / 1e9 : 0;
    put_report_head(b, rep, load_s, wsha, fig);
    for (int i = 5; i < n; i++) bs_buf_printf(rep, i > 5 ? ",%.3f" : "%.3f", lat2[i]);
    bs_buf_puts(rep, "],\"lat1_ms_all\":[");
    for (int i = 5; i < n; i++) bs_buf_printf(rep, i > 5 ? ",%.3f" : "%.3f", lat1[i]);
    /* per-stage summaries over the timed items (basal-rs stats.rs summary) */
    int sum_fail = 0;
    bs_buf_puts(rep, "],\"lat2_prepare_ms\":");
    sum_fail |= put_summary(rep, b->prep + 5, L);
    bs_buf_puts(rep, ",\"lat2_forward_ms\":");
    sum_fail |= put_summary(rep, b->fwd + 5, L);
    bs_buf_puts(rep, ",\"lat2_packed_tokens\":");
    sum_fail |= put_summary(rep, tok, L);
    free(tok);
    if (sum_fail) { bs_buf_free(&per_item); return -1; }
    bs_buf_puts(rep, ",\"per_item\":[");
    bs_buf_put(rep, per_item.data ? per_item.data : "", per_item.len);
    bs_buf_puts(rep, "],\"items\":");
    if (b->n_ref) {
        bs_buf_printf(rep, "\"reference\",\"reference\":");
        bs_resp_cstr(rep, b->reference);
        bs_buf_printf(rep, ",\"n_items\":%d,\"all_items_s\":%.3f,\"correct\":%d,\"with_gold\":%d,\"acc\":%s", b->n_ref,
                      b->all_items_s, b->correct, b->with_gold, acc->data);
    } else {
        bs_buf_puts(rep, "\"synthetic\",\"all_items_s\":null,\"correct\":null,\"with_gold\":0,\"acc\":null");
    }
    bs_buf_puts(rep, "}");
    bs_buf_free(&per_item);
    return 0;
}

/* basal-rs's summary line (its "GEMM probe" is CUDA's), then this project's CPU figures */
static void print_summary(const bench_run *b, const bench_figures *fig, const bs_buf *acc) {
    fprintf(stderr, "lat2 median %.1f ms, p95 %.1f ms, lat1 %.1f ms, %.3f dec/s, acc %s", fig->l2, fig->p95, fig->l1,
            fig->dec_s, acc->oom ? "?" : acc->data);
    if (b->with_gold) fprintf(stderr, " (%d/%d)", b->correct, b->with_gold);
    fprintf(stderr, "; forward %.1f GFLOP/s (GEMM %.1f GFLOP/s in the forward; sgemm peak: basal %.1f, OpenBLAS %.1f "
                    "GFLOP/s)\n", fig->total_gf, fig->gemm_gf, b->ours, b->blas);
    if (!b->mp->model.backend)
        fprintf(stderr, "CPU kernel %s, f32 GEMM peak %.1f GFLOP/s\n", bs_gemm_kernel_name(bs_gemm_kernel()), b->ours);
    if (b->bf16)
        fprintf(stderr, "dtype %s: bf16 kernel %s, bf16 GEMM peak %.1f GFLOP/s (%.2fx the f32 peak)\n",
                bs_model_dtype_name(&b->mp->model), bs_gemm_bf16_kernel_name(), b->ours_bf16,
                b->ours > 0 ? b->ours_bf16 / b->ours : 0.0);
    if (b->ours_int8 > 0)
        fprintf(stderr, "dtype int8: kernel %s, int8 GEMM peak %.1f GOP/s (%.2fx the bf16 peak)\n", bs_gemm_i8_kernel_name(),
                b->ours_int8, b->ours_bf16 > 0 ? b->ours_int8 / b->ours_bf16 : 0.0);
}

int cmd_bench(int argc, char **argv) {
    const char *model_dir = NULL, *out_path = NULL;
    bench_run b = {.batching = "budget", .lat_n = 39, .state_tokens = 250, .group = 16, .passes = 3, .tp_items = -1,
                   .acc_group = 32};
    int threads = 0;
    cli_device dev = {0};
    const cli_opt opts[] = {
        CLI_MODEL("model directory or reference (owner/name[@revision], mini, 4.5B, max; required)", &model_dir),
        CLI_STR("--reference", "DIR", "", NULL, "reference export whose bench.jsonl gives the items", &b.reference),
        CLI_INT("--lat-n", "N", NULL, NULL, "latency items measured after 5 warm-up items (at most items - 5)",
                &b.lat_n, 1, 1 << 20),
        CLI_INT("--state-tokens", "N", NULL, NULL, "approximate state length of each synthetic item", &b.state_tokens,
                1, 1 << 20),
        CLI_INT("--throughput-items", "N", "min(items, 128) with --reference, else 32", NULL,
                "items of the dec/s phase (0 skips it)", &b.tp_items, 0, 1 << 20),
        CLI_CHOICE("--batching", NULL, NULL, "packing of the dec/s groups", &b.batching, "budget|tree"),
        CLI_INT("--threads", "N", "0 = online CPUs", NULL, "CPU compute threads", &threads, 0, 1 << 16),
        CLI_STR("--out", "FILE", "", NULL, "JSON report (must not exist)", &out_path),
        CLI_DEVICE_ROWS(&dev),
    };
    int rc = cli_parse(&cli_doc_bench, opts, CLI_N(opts), NULL, argc, argv);
    if (rc) return rc < 0 ? 0 : rc;
    if (!model_dir) {
        cli_error("bench", "--model REF is required (see basal bench --help)");
        return 2;
    }
    if (out_path && bs_file_exists(out_path)) {
        cli_error("bench", "%s exists; choose a new output path", out_path);
        return 1;
    }
    int status = 1;
    basal_session *ses = NULL;
    bs_buf rep, acc;
    bs_buf_init(&rep);
    bs_buf_init(&acc);
    bs_buf wsha; /* the weights' SHA-256 (06 §7.6) */
    bs_buf_init(&wsha);
    double t0 = bs_now_ms();
    basal_options bo;
    basal_options_init(&bo);
    bo.threads = threads;
    cli_device_apply(&dev, &bo);
    if (basal_open(&ses, model_dir, &bo, &b.e) < 0) { cli_error("bench", "%s", b.e.msg); goto done; }
    b.ses = ses;
    b.mp = bs_session_model(ses);
    b.lc = bs_session_letters(ses);
    b.run = bs_session_runner(ses);
    b.pool = bs_session_pool(ses);
    double load_s = (bs_now_ms() - t0) / 1000.0;
    if (cli_weights_sha256(model_dir, &wsha, &b.e) != BS_OK) {
        cli_error("bench", "%s", b.e.msg);
        goto done;
    }
    if (load_items(&b) < 0) goto done;
    if (alloc_results(&b) < 0) { cli_error("bench", "out of memory"); goto done; }
    if (accuracy_pass(&b) < 0 || latency_pass(&b) < 0 || throughput_pass(&b) < 0) {
        cli_error("bench", "%s", b.e.msg);
        goto done;
    }
    gemm_peak(&b);
    if (b.with_gold) bs_resp_double(&acc, (double)b.correct / b.with_gold);
    else bs_buf_puts(&acc, "null");
    bench_figures fig;
    if (put_report(&b, &rep, load_s, wsha.data, &acc, &fig) < 0) { cli_error("bench", "out of memory"); goto done; }
    print_summary(&b, &fig, &acc);
    if (out_path) {
        bs_buf_putc(&rep, '\n');
        if (bs_write_file(out_path, rep.data, rep.len, &b.e) < 0) { cli_error("bench", "%s", b.e.msg); goto done; }
    } else {
        cli_print_pretty(stdout, rep.data, rep.len);
    }
    status = 0;
done:
    for (int i = 0; b.bodies && i < b.nb; i++) bs_buf_free(&b.bodies[i]);
    free(b.bodies);
    free(b.refs);
    free(b.argmax);
    free(b.prep);
    free(b.fwd);
    free(b.item_tokens);
    free(b.lat1);
    free(b.lat2);
    bs_buf_free(&rep);
    bs_buf_free(&acc);
    bs_buf_free(&wsha);
    basal_close(ses);
    return status;
}
