/* `basal decide` and `basal prepare` (spec 06 §5.1–§5.2): one /v1/systemone
 * request from a file or stdin through the whole pipeline (validation, prompts,
 * tokens, letter ids, one tree-packed forward, decision math), or only up to
 * the prompts (prepare: manifests and tokenizer, no weights). Validation
 * errors print the endpoint's error body on stdout and exit 2. */
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "api/session.h"
#include "protocol/respjson.h"
#include "base/util.h"
#include "engine/pack.h"
#include "engine/engine.h"
#include "engine/plan.h"
#include "engine/runner.h"

typedef struct {
    const char *model_dir, *request;
    int timing, threads, no_prefix_cache, readout_bf16, evidence_separate, tree_max_tokens;
    cli_device dev;
} opts_t;

const cli_doc cli_doc_decide = {
    "decide", "--model REF [--request FILE|-] [options]",
    "answer one /v1/systemone request from a file or stdin (pretty JSON on stdout)",
    "The response is the /v1/systemone 200 body without usage.latency_ms. A request the\n"
    "endpoint would refuse prints its error body on stdout and exits 2; a runtime failure\n"
    "(model load, I/O) prints a message on stderr and exits 1.\n",
};

const cli_doc cli_doc_prepare = {
    "prepare", "--model REF [--request FILE|-] [options]",
    "print items, prompts, token ids, letter ids and packed rows of a request (no weights)",
    "Reads the manifests and the tokenizer only. Prints a JSON array, one element per\n"
    "prepared item in plan order (spec 06 §5.2); a request the endpoint would refuse prints\n"
    "its error body on stdout and exits 2.\n",
};

static int parse_opts(const char *cmd, int argc, char **argv, opts_t *o) {
    memset(o, 0, sizeof *o);
    o->request = "-";
    const char *readout = "f32", *kernels = "fused";
    const cli_opt common[] = {
        CLI_MODEL("model directory or reference (owner/name[@revision], mini, 4.5B, max; required)", &o->model_dir),
        CLI_STR("--request", "FILE|-", NULL, NULL, "the request JSON; - reads stdin", &o->request),
    };
    const cli_opt decide[] = {
        common[0], common[1],
        CLI_INT("--threads", "N", "0 = online CPUs", NULL, "CPU compute threads", &o->threads, 0, 1 << 16),
        CLI_SW("--timing", "print prepare, forward, total (and load) ms as JSON on stderr", &o->timing),
        CLI_SW("--no-prefix-cache", "do not precompute the template prefixes", &o->no_prefix_cache),
        CLI_CHOICE("--readout", NULL, NULL, "bf16 rounds each letter logit to bf16 on the host (diagnostic)",
                   &readout, "f32|bf16"),
        CLI_SW("--evidence-separate", "run evidence questions in their own forward (diagnostic)",
               &o->evidence_separate),
        CLI_INT("--tree-max-tokens", "N", "32768", NULL, "longest packed tree row (as serve's)", &o->tree_max_tokens, 1,
                INT_MAX),
        CLI_CHOICE("--kernels", "fused", NULL, "the only value, as for serve (basal-rs's candle path is refused)",
                   &kernels, "fused"),
        CLI_DEVICE_ROWS(&o->dev),
    };
    int is_decide = !strcmp(cmd, "decide");
    const cli_doc *d = is_decide ? &cli_doc_decide : &cli_doc_prepare;
    int rc = is_decide ? cli_parse(d, decide, CLI_N(decide), NULL, argc, argv)
                       : cli_parse(d, common, CLI_N(common), NULL, argc, argv);
    if (rc) return rc;
    o->readout_bf16 = !strcmp(readout, "bf16");
    if (!o->model_dir) {
        cli_error(cmd, "--model REF is required (see basal %s --help)", cmd);
        return 2;
    }
    return 0;
}

static int read_body(const char *path, char **data, size_t *len) {
    bs_err e = {0};
    if (strcmp(path, "-")) {
        if (bs_read_file(path, data, len, &e) < 0) { cli_error(NULL, "%s", e.msg); return -1; }
        return 0;
    }
    bs_buf b;
    bs_buf_init(&b);
    char chunk[65536];
    size_t n;
    while ((n = fread(chunk, 1, sizeof chunk, stdin)) > 0) bs_buf_put(&b, chunk, n);
    if (b.oom) { bs_buf_free(&b); return -1; }
    if (!b.data) bs_buf_put(&b, "", 0);
    *data = b.data;
    *len = b.len;
    return 0;
}

/* Steps 4–10 of 02 §3 for one /v1/systemone request against m. Returns 0 with
 * a plan, 2 with the error body printed, 1 on a runtime error. */
static int plan_or_print(const bs_basal_model *m, bs_letter_cache *lc, const char *data, size_t len, bs_plan *plan) {
    bs_reply rep;
    bs_reply_init(&rep);
    bs_err e = {0};
    int status = 0, rc = bs_plan_text(plan, data, len, BS_DIALECT_SYSTEMONE, m, lc, &rep, &e);
    if (rc == BS_EINVAL && rep.body.len) {
        fwrite(rep.body.data, 1, rep.body.len, stdout);
        fputc('\n', stdout);
        status = 2;
    } else if (rc < 0) {
        cli_error(NULL, "%s", e.msg[0] ? e.msg : bs_strerror(rc));
        status = 1;
    }
    bs_reply_free(&rep);
    return status;
}

int cmd_decide(int argc, char **argv) {
    opts_t o;
    int status = parse_opts("decide", argc, argv, &o);
    if (status) return status < 0 ? 0 : status;
    status = 1;
    double t0 = bs_now_ms();
    bs_err e = {0};
    basal_session *s = NULL;
    basal_result r = {0};
    char *data = NULL;
    size_t len = 0;
    if (read_body(o.request, &data, &len) < 0) goto done;
    basal_options bo;
    basal_options_init(&bo);
    bo.threads = o.threads;
    bo.backend = o.dev.device;
    bo.dtype = o.dev.dtype;
    bo.gemm_table = o.dev.gemm_table;
    bo.no_prefix_cache = o.no_prefix_cache;
    bo.tree_max_tokens = o.tree_max_tokens;
    bo.readout_bf16 = o.readout_bf16;
    bo.evidence_separate = o.evidence_separate;
    if (basal_open(&s, o.model_dir, &bo, &e) < 0) {
        cli_error("decide", "%s", e.msg);
        goto done;
    }
    bs_runner *run = bs_session_runner(s);
    cli_fwd_progress fwd_progress = {"decide", NULL, NULL};
    run->watch = cli_fwd_progress_watch;
    run->watch_ctx = &fwd_progress;
    double t1 = bs_now_ms();
    int rc = basal_decide(s, data, len, &r, &e);
    double t2 = bs_now_ms();
    cli_fwd_progress_end(&fwd_progress);
    if (rc < 0) {
        cli_error("decide", "%s", e.msg);
        goto done;
    }
    if (r.status != 200) { /* the endpoint's error body */
        fwrite(r.json, 1, r.len, stdout);
        fputc('\n', stdout);
        status = 2;
        goto done;
    }
    cli_print_pretty(stdout, r.json, r.len);
    if (o.timing)
        /* 06 §5.1's three times first (total: the request, not the model
         * load), then this runtime's own */
        fprintf(stderr, "timing: {\"prepare_ms\": %.3f, \"forward_ms\": %.3f, \"total_ms\": %.3f, \"load_ms\": %.3f, "
                        "\"evidence_inline\": %lld, \"evidence_forwards\": %lld}\n",
                r.plan_ms, r.forward_ms, t2 - t1, t1 - t0, (long long)run->evidence_inline,
                (long long)run->evidence_forwards);
    status = 0;
done:
    basal_result_free(&r);
    basal_close(s);
    free(data);
    return status;
}

/* One element of the prepare output (06 §5.2). */
static int put_item(bs_buf *b, const bs_request *r, const bs_item *it, const bs_plan_lc *lc, bs_err *e) {
    const bs_question *q = &r->questions[it->question];
    bs_buf_puts(b, "{\"item\":{\"question\":");
    if (q->multi) { /* a multi branch is the item "<question>#<label index>" (04 §3 P2) */
        bs_buf qn;
        bs_buf_init(&qn);
        bs_buf_put(&qn, q->id.s, q->id.len);
        bs_buf_printf(&qn, "#%zu", it->branch);
        bs_resp_string(b, qn.data ? qn.data : "", qn.len);
        if (qn.oom) b->oom = 1;
        bs_buf_free(&qn);
    } else {
        bs_resp_string(b, q->id.s, q->id.len);
    }
    bs_buf_printf(b, ",\"type\":\"%s\",\"lang\":\"%s\",\"keys\":", bs_qtype_name(q->type), bs_lang_name(q->lang));
    bs_resp_texts(b, q->keys, q->n_options);
    bs_buf_puts(b, ",\"options\":");
    bs_resp_texts(b, q->options, q->n_options);
    if (lc) { /* a round-1 group of a choice with 11..255 options (03 §5.1–§5.2): perm indexes all n options */
        const bs_lc_group *g = &lc->lc.group[it->branch];
        bs_buf_printf(b, ",\"large_choice\":{\"round\":1,\"group\":%zu,\"groups\":%d,\"members\":[", it->branch,
                      lc->lc.n_round1);
        for (int i = 0; i < g->size; i++) bs_buf_printf(b, i ? ",%d" : "%d", g->member[i]);
        bs_buf_puts(b, "],\"round2\":\"the 10 finalists of the fit over round 1, asked in both orders: depends on "
                       "the answers of round 1\"}");
    }
    bs_buf_puts(b, "},\"orders\":[");
    const int32_t *prompts[BS_N_ORDERS];
    int32_t lens[BS_N_ORDERS];
    for (int o = 0; o < it->n_orders; o++) {
        const bs_order *od = &it->orders[o];
        if (o) bs_buf_putc(b, ',');
        cli_put_order(b, it, od);
        bs_buf_putc(b, '}');
        prompts[o] = od->ids;
        lens[o] = od->n_ids;
    }
    bs_row row;
    int rc = bs_pack_row(&row, prompts, lens, it->n_orders, e);
    if (rc < 0) return rc;
    bs_buf_puts(b, "],\"packed\":{\"ids\":");
    bs_resp_ids(b, row.ids, (size_t)row.len);
    bs_buf_puts(b, ",\"pos\":");
    bs_resp_ids(b, row.pos, (size_t)row.len);
    bs_buf_puts(b, ",\"node\":");
    bs_resp_ids(b, row.node, (size_t)row.len);
    bs_buf_puts(b, ",\"parent\":");
    bs_resp_ids(b, row.parent, (size_t)row.n_blocks);
    bs_buf_puts(b, ",\"last\":");
    bs_resp_ids(b, row.last, (size_t)row.n_prompts);
    bs_buf_printf(b, ",\"prefix_len\":%d,\"state_len\":0},\"state_len\":0}", row.prefix_len);
    bs_row_free(&row);
    return BS_OK;
}

int cmd_prepare(int argc, char **argv) {
    opts_t o;
    int status = parse_opts("prepare", argc, argv, &o);
    if (status) return status < 0 ? 0 : status;
    status = 1;
    bs_err e = {0};
    bs_basal_model m;
    bs_letter_cache lc;
    bs_letter_cache_init(&lc);
    bs_plan plan = {0};
    bs_buf out;
    bs_buf_init(&out);
    char *data = NULL;
    size_t len = 0;
    int loaded = 0;
    if (read_body(o.request, &data, &len) < 0) goto done;
    if (bs_basal_load(&m, o.model_dir, NULL, 0, &e) < 0) { cli_error("prepare", "%s", e.msg); goto done; }
    loaded = 1;
    if ((status = plan_or_print(&m, &lc, data, len, &plan)) != 0) goto done;
    status = 1;
    bs_buf_putc(&out, '[');
    for (size_t i = 0; i < plan.n_items; i++) {
        if (i) bs_buf_putc(&out, ',');
        const bs_plan_lc *plc = NULL; /* the large choice the item is a group of */
        for (size_t k = 0; k < plan.n_lc && !plc; k++)
            if (plan.lcs[k].question == plan.items[i].question) plc = &plan.lcs[k];
        if (put_item(&out, plan.req, &plan.items[i], plc, &e) < 0) { cli_error("prepare", "%s", e.msg); goto done; }
    }
    bs_buf_putc(&out, ']');
    if (out.oom) goto done;
    cli_print_pretty(stdout, out.data, out.len);
    status = 0;
done:
    bs_plan_free(&plan);
    if (loaded) bs_basal_free(&m);
    bs_letter_cache_free(&lc);
    bs_buf_free(&out);
    free(data);
    return status;
}
