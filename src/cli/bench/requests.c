/* `basal bench-requests` (spec 06 §7.2): whole-request decisions, one client,
 * no HTTP. Each line of --requests is {"id": …, "request": {…}} (a null or
 * missing model gets the loaded model's name). For each batching mode given
 * (`tree`: the server's prefix-trie rows; `single`: one item per row and per
 * forward, i.e. no sharing between questions; `budget`: upstream's chunks of
 * one-item rows, spec 04 §6), every request is decided once as a warm-up and
 * then --reps times; the report gives per request the input tokens, the
 * tokens the forwards computed, and the timings, and per mode the totals — so
 * the modes are compared in one run. Every mode's answers are compared with
 * the first mode's, byte for byte (batch invariance): a difference is
 * reported and makes the command fail. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api/session.h"
#include "cli/cli.h"
#include "base/progress.h"
#include "protocol/respjson.h"
#include "base/util.h"
#include "engine/plan.h"
#include "engine/runner.h"
#include "engine/triesize.h"

typedef struct {
    char *id;
    char *body;
    size_t len;
} req_line;

static int cmp_d(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* Reads JSONL; fills the model field when it is null or missing. */
static int read_requests(const char *path, const char *model, req_line **out, size_t *n) {
    char *text = NULL;
    size_t len = 0;
    bs_err e = {0};
    if (bs_read_file(path, &text, &len, &e) < 0) { cli_error("bench-requests", "%s", e.msg); return -1; }
    size_t cap = 16, k = 0;
    req_line *v = calloc(cap, sizeof *v);
    char *line = text;
    int rc = 0;
    while (v && line && *line) {
        char *nl = strchr(line, '\n');
        size_t ll = nl ? (size_t)(nl - line) : strlen(line);
        if (ll > 0) {
            bj_value *root = NULL;
            if (bj_parse(line, ll, NULL, &root, &e) < 0 || root->type != BJ_OBJECT || !bj_get(root, "request") ||
                bj_get(root, "request")->type != BJ_OBJECT) {
                cli_error("bench-requests", "%s: line %zu is not {\"id\", \"request\"}", path, k + 1);
                bj_free(root);
                rc = -1;
                break;
            }
            const bj_value *id = bj_get(root, "id"), *rq = bj_get(root, "request");
            bs_buf b;
            bs_buf_init(&b);
            bs_buf_puts(&b, "{\"model\":");
            bs_resp_cstr(&b, model);
            for (size_t i = 0; i < rq->n; i++) {
                if (rq->key_lens[i] == 5 && !memcmp(rq->keys[i], "model", 5)) continue;
                bs_buf_putc(&b, ',');
                bs_resp_string(&b, rq->keys[i], rq->key_lens[i]);
                bs_buf_putc(&b, ':');
                bs_resp_value(&b, rq->items[i]);
            }
            bs_buf_putc(&b, '}');
            if (k == cap) {
                req_line *nv = realloc(v, 2 * cap * sizeof *nv);
                if (!nv) { bj_free(root); bs_buf_free(&b); rc = -1; break; }
                v = nv;
                cap *= 2;
            }
            bs_buf idb;
            bs_buf_init(&idb);
            if (id && id->type == BJ_STRING) bs_buf_put(&idb, id->str, id->len);
            else bs_buf_printf(&idb, "%zu", k + 1);
            v[k].id = idb.data;
            v[k].body = b.data;
            v[k].len = b.len;
            k++;
            bj_free(root);
        }
        line = nl ? nl + 1 : NULL;
    }
    free(text);
    if (!v) return -1;
    *out = v;
    *n = k;
    return rc;
}

/* Tokens of the request's (round-1) prompts packed as one trie row per
 * question, and as one row for the whole request (06 §7.2): the distinct
 * prefixes the engine's trie counter counts. Planned here, outside the timed
 * decisions. */
static int packed_sizes(const bs_basal_model *m, bs_letter_cache *lc, const req_line *r, int64_t packed[2],
                        bs_err *e) {
    bs_reply rep;
    bs_reply_init(&rep);
    bs_plan p = {0};
    bs_trie_counter one, all;
    bs_tc_init(&one);
    bs_tc_init(&all);
    int rc = bs_plan_text(&p, r->body, r->len, BS_DIALECT_SYSTEMONE, m, lc, &rep, e);
    if (rc == BS_EINVAL && rep.body.len) bs_fail(e, rc, "request %s rejected: %s", r->id, rep.body.data);
    packed[0] = packed[1] = 0;
    for (size_t i = 0; rc == 0 && i < p.n_items; i++) {
        const bs_item *it = &p.items[i];
        if (i == 0 || it->question != p.items[i - 1].question) { /* a question's items are consecutive */
            packed[0] += one.tokens;
            bs_tc_reset(&one);
        }
        const int32_t *ids[BS_N_ORDERS];
        int32_t lens[BS_N_ORDERS];
        for (int o = 0; o < it->n_orders; o++) {
            ids[o] = it->orders[o].ids;
            lens[o] = it->orders[o].n_ids;
        }
        if (bs_tc_insert(&one, ids, lens, (size_t)it->n_orders) < 0 ||
            bs_tc_insert(&all, ids, lens, (size_t)it->n_orders) < 0)
            rc = bs_fail(e, BS_ENOMEM, "out of memory");
    }
    packed[0] += one.tokens;
    packed[1] = all.tokens;
    bs_tc_free(&one);
    bs_tc_free(&all);
    bs_plan_free(&p);
    bs_reply_free(&rep);
    return rc;
}

/* One whole decision through the session (include/basal.h): an act
 * refusal (03 §2.5) is that request's answer, its 422 body; a request refused
 * before its forwards ran is an error of the workload. */
static int decide_once(basal_session *s, const req_line *r, bs_usage *usage, bs_buf *answer, bs_err *e) {
    basal_result res;
    int rc = basal_decide(s, r->body, r->len, &res, e);
    answer->len = 0;
    if (rc == 0 && res.status != 200 && !bs_session_last_ran(s))
        rc = bs_fail(e, BS_EINVAL, "request %s rejected: %s", r->id, res.json);
    else if (rc == 0)
        bs_buf_put(answer, res.json, res.len);
    *usage = bs_session_last_usage(s);
    basal_result_free(&res);
    return rc;
}

const cli_doc cli_doc_bench_requests = {
    "bench-requests", "--model REF --requests JSONL [options]",
    "whole-request latency, one client, no HTTP (spec 06 §7.2)",
    "JSONL lines are {\"id\", \"request\"}. Per request and batching mode: one warm-up, then\n"
    "--reps timed decisions; the answers of every mode must agree. JSON with --out.\n",
};

/* One run: the session, the requests, and what the batching modes share. */
typedef struct {
    basal_session *ses;
    const bs_basal_model *mp;
    bs_letter_cache *lc;
    bs_runner *run;
    req_line *rq;
    size_t nrq;
    int reps, warmup;
    double *ms;            /* one request's timed decisions */
    char **first_answers;  /* per request, the first mode's answer */
    size_t mismatches;     /* answers that differ from the first mode's */
    bs_buf rep, ans;       /* the report; the answer of the latest decision */
    bs_err e;
} breq_run;

/* One batching mode's totals over the requests. */
typedef struct {
    double total_ms;
    size_t decisions, total_input;
    int64_t total_fwd;
} breq_mode;

/* Request i in the mode tok (the nmode-th): the warm-up, --reps timed
 * decisions, the comparison with the first mode's answer, and its entry in the
 * report. Negative on a failure (reported here, but for out of memory). */
static int bench_request(breq_run *b, size_t i, const char *tok, int nmode, bs_progress *pg, breq_mode *m) {
    bs_buf *rep = &b->rep;
    const req_line *r = &b->rq[i];
    int reps = b->reps;
    double *ms = b->ms;
    bs_progress_set(pg, i);
    bs_usage u = {0};
    int64_t packed[2] = {0, 0};
    if (packed_sizes(b->mp, b->lc, r, packed, &b->e) < 0 ||
        (b->warmup && decide_once(b->ses, r, &u, &b->ans, &b->e) < 0)) { /* warm-up */
        bs_progress_end(pg);
        cli_error("bench-requests", "%s", b->e.msg);
        return -1;
    }
    int64_t fwd_sum = 0;
    for (int k = 0; k < reps; k++) {
        double s = bs_now_ms();
        if (decide_once(b->ses, r, &u, &b->ans, &b->e) < 0) {
            bs_progress_end(pg);
            cli_error("bench-requests", "%s", b->e.msg);
            return -1;
        }
        ms[k] = bs_now_ms() - s;
        m->total_ms += ms[k];
        fwd_sum += u.computed_tokens;
    }
    int64_t fwd = fwd_sum / reps;
    size_t nq = u.questions, input = u.input_tokens;
    if (!nmode) {
        if (!(b->first_answers[i] = bs_strfmt("%s", b->ans.data))) {
            bs_progress_end(pg);
            return -1;
        }
    } else if (strcmp(b->first_answers[i], b->ans.data)) {
        cli_error("bench-requests", "%s: the %s answer differs from the first mode's", r->id, tok);
        b->mismatches++;
    }
    m->decisions += nq * (size_t)reps;
    m->total_input += input;
    m->total_fwd += fwd;
    if (i) bs_buf_putc(rep, ',');
    bs_buf_puts(rep, "{\"id\":");
    bs_resp_cstr(rep, r->id);
    size_t at = rep->len;
    for (int k = 0; k < reps; k++) bs_buf_printf(rep, k ? ",%.3f" : "%.3f", ms[k]); /* run order */
    char *all = bs_strfmt("%.*s", (int)(rep->len - at), rep->data ? rep->data + at : "");
    rep->len = at;
    qsort(ms, (size_t)reps, sizeof *ms, cmp_d);
    bs_buf_printf(rep, ",\"questions\":%zu,\"input_tokens\":%zu,\"packed_tokens_per_question_rows\":%lld,"
                       "\"packed_tokens_shared_tree\":%lld,\"forward_tokens\":%lld,\"median_ms\":%.3f,"
                       "\"min_ms\":%.3f,\"max_ms\":%.3f,\"all_ms\":[%s]}",
                  nq, input, (long long)packed[0], (long long)packed[1], (long long)fwd, ms[reps / 2], ms[0],
                  ms[reps - 1], all ? all : "");
    if (!all) rep->oom = 1;
    free(all);
    return 0;
}

/* Every request in the batching mode tok (the nmode-th): its report object
 * and its summary line; its decisions per second and forward tokens in
 * *dec_s_out and *fwd_out. Negative on a failure. */
static int bench_mode(breq_run *b, const char *tok, int nmode, double *dec_s_out, int64_t *fwd_out) {
    int single = !strcmp(tok, "single"), budget = !strcmp(tok, "budget");
    bs_session_set_batching(b->ses, budget ? BS_BATCH_BUDGET : single ? BS_BATCH_SINGLE : BS_BATCH_TREE);
    breq_mode m = {0};
    if (nmode) bs_buf_putc(&b->rep, ',');
    bs_buf_printf(&b->rep, "{\"batching\":\"%s\",\"requests\":[", tok);
    char what[96];
    snprintf(what, sizeof what, "bench-requests: %s batching", tok);
    bs_progress *pg = bs_progress_start(what, (uint64_t)b->nrq, "requests");
    cli_fwd_progress fwd_progress = {"bench-requests", pg, NULL};
    b->run->watch = pg ? cli_fwd_progress_watch : NULL;
    b->run->watch_ctx = &fwd_progress;
    for (size_t i = 0; i < b->nrq; i++)
        if (bench_request(b, i, tok, nmode, pg, &m) < 0) return -1;
    bs_progress_set(pg, b->nrq);
    bs_progress_end(pg);
    double dec_s = m.total_ms > 0 ? (double)m.decisions / (m.total_ms / 1000.0) : 0;
    bs_buf_printf(&b->rep, "],\"input_tokens\":%zu,\"forward_tokens\":%lld,\"decisions_per_s\":%.3f}", m.total_input,
                  (long long)m.total_fwd, dec_s);
    fprintf(stderr, "%-6s: input tokens %zu, computed %lld (%.2fx fewer), %.2f decisions/s\n", tok, m.total_input,
            (long long)m.total_fwd, m.total_fwd ? (double)m.total_input / (double)m.total_fwd : 0.0, dec_s);
    *dec_s_out = dec_s;
    *fwd_out = m.total_fwd;
    return 0;
}

/* The end of the report (the answers' agreement, the first two modes' ratios),
 * then the report to --out or pretty on stdout. The exit status: 1 when
 * something failed or two modes' answers differ. */
static int finish_report(breq_run *b, int nmode, const double mode_dec_s[3], const int64_t mode_fwd[3],
                         const char *out_path) {
    bs_buf *rep = &b->rep;
    bs_buf_putc(rep, ']');
    bs_buf_printf(rep, ",\"answers_identical\":%s", b->mismatches ? "false" : "true");
    if (nmode >= 2 && mode_dec_s[1] > 0 && mode_fwd[0] > 0) {
        bs_buf_printf(rep, ",\"ratio_decisions_per_s\":%.3f,\"ratio_forward_tokens\":%.3f", mode_dec_s[0] / mode_dec_s[1],
                      (double)mode_fwd[1] / (double)mode_fwd[0]);
        fprintf(stderr, "ratio (first / second mode): %.2fx decisions/s, %.2fx fewer computed tokens\n",
                mode_dec_s[0] / mode_dec_s[1], (double)mode_fwd[1] / (double)mode_fwd[0]);
    }
    bs_buf_putc(rep, '}');
    if (rep->oom) return 1;
    if (out_path) {
        bs_buf_putc(rep, '\n');
        if (bs_write_file(out_path, rep->data, rep->len, &b->e) < 0) { cli_error("bench-requests", "%s", b->e.msg); return 1; }
    } else {
        cli_print_pretty(stdout, rep->data, rep->len);
    }
    return b->mismatches ? 1 : 0;
}

int cmd_bench_requests(int argc, char **argv) {
    const char *model_dir = NULL, *requests = NULL, *out_path = NULL, *batching = "tree";
    int reps = 10, threads = 0, no_prefix_cache = 0, warmup = 1;
    cli_device dev = {0};
    const cli_opt opts[] = {
        CLI_MODEL("model directory or reference (owner/name[@revision], mini, 4.5B, max; required)", &model_dir),
        CLI_STR("--requests", "JSONL", "", NULL, "the requests, one {\"id\", \"request\"} per line (required)",
                &requests),
        CLI_STR("--batching", "MODES", NULL, NULL, "comma-separated modes of tree, single, budget", &batching),
        CLI_INT("--reps", "N", NULL, NULL, "timed decisions per request and mode", &reps, 1, 1 << 20),
        CLI_INT("--threads", "N", "0 = online CPUs", NULL, "CPU compute threads", &threads, 0, 1 << 16),
        CLI_SW("--no-prefix-cache", "do not precompute the template prefixes", &no_prefix_cache),
        CLI_SWITCH_TO("--no-warmup", "skip the warm-up decision (for runs of many minutes)", &warmup, 0),
        CLI_STR("--out", "FILE", "", NULL, "JSON report (must not exist)", &out_path),
        CLI_DEVICE_ROWS(&dev),
    };
    int rc = cli_parse(&cli_doc_bench_requests, opts, CLI_N(opts), NULL, argc, argv);
    if (rc) return rc < 0 ? 0 : rc;
    if (!model_dir || !requests) {
        cli_error("bench-requests", "--model REF and --requests JSONL are required (see basal bench-requests --help)");
        return 2;
    }
    if (out_path && bs_file_exists(out_path)) {
        cli_error("bench-requests", "%s exists; choose a new output path", out_path);
        return 1;
    }
    int status = 1;
    breq_run b = {.reps = reps, .warmup = warmup};
    bs_buf_init(&b.rep);
    bs_buf wsha; /* the weights' SHA-256 (06 §7.6) */
    bs_buf_init(&wsha);
    bs_buf_init(&b.ans);
    b.ms = malloc((size_t)reps * sizeof *b.ms);
    double t0 = bs_now_ms();
    if (!b.ms) goto done;
    basal_options bo;
    basal_options_init(&bo);
    bo.threads = threads;
    cli_device_apply(&dev, &bo);
    bo.no_prefix_cache = no_prefix_cache;
    if (basal_open(&b.ses, model_dir, &bo, &b.e) < 0) { cli_error("bench-requests", "%s", b.e.msg); goto done; }
    const bs_basal_model *mp = b.mp = bs_session_model(b.ses);
    b.lc = bs_session_letters(b.ses);
    b.run = bs_session_runner(b.ses);
    double load_s = (bs_now_ms() - t0) / 1000.0;
    if (cli_weights_sha256(model_dir, &wsha, &b.e) != BS_OK) {
        cli_error("bench-requests", "%s", b.e.msg);
        goto done;
    }
    if (read_requests(requests, mp->name, &b.rq, &b.nrq) < 0) goto done;
    int bf16 = mp->model.compute == BS_COMPUTE_BF16;
    bs_buf_printf(&b.rep, "{\"model\":\"%s\",\"weights_sha256\":%s,\"backend\":\"%s\",\"load_s\":%.3f,\"threads\":%d,\"kernel\":\"%s\",\"compute\":\"%s\",\"bf16_kernel\":\"%s\","
                          "\"int8_kernel\":\"%s\",\"reps\":%d,\"prefix_cache\":%s,\"modes\":[", mp->name, wsha.data,
                  mp->model.backend ? mp->model.backend->name : "cpu", load_s, bs_session_threads(b.ses),
                  bs_gemm_kernel_name(bs_gemm_kernel()), bs_model_dtype_name(&mp->model) ? bs_model_dtype_name(&mp->model) : "f32", bf16 ? bs_gemm_bf16_kernel_name() : "",
                  mp->model.quant == BS_QUANT_INT8 ? bs_gemm_i8_kernel_name() : "", reps, no_prefix_cache ? "false" : "true");
    char modes[64];
    snprintf(modes, sizeof modes, "%s", batching);
    double mode_dec_s[3] = {0, 0, 0};
    int64_t mode_fwd[3] = {0, 0, 0};
    int nmode = 0;
    if (!(b.first_answers = calloc(b.nrq ? b.nrq : 1, sizeof *b.first_answers))) goto done;
    for (char *tok = strtok(modes, ","); tok; tok = strtok(NULL, ","), nmode++) {
        if (strcmp(tok, "single") && strcmp(tok, "budget") && strcmp(tok, "tree")) {
            cli_error("bench-requests", "--batching takes tree, single and budget");
            status = 2;
            goto done;
        }
        if (nmode >= 3) break;
        if (bench_mode(&b, tok, nmode, &mode_dec_s[nmode], &mode_fwd[nmode]) < 0) goto done;
    }
    status = finish_report(&b, nmode, mode_dec_s, mode_fwd, out_path);
done:
    for (size_t i = 0; b.first_answers && i < b.nrq; i++) free(b.first_answers[i]);
    free(b.first_answers);
    for (size_t i = 0; i < b.nrq; i++) { free(b.rq[i].id); free(b.rq[i].body); }
    free(b.rq);
    free(b.ms);
    bs_buf_free(&b.rep);
    bs_buf_free(&wsha);
    bs_buf_free(&b.ans);
    basal_close(b.ses);
    return status;
}
