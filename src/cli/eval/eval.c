/* `basal eval` (issue 33 item 3): labelled items against a model, in-process
 * (--model: one basal_session per setting of --orders x --dtype) or against
 * a running server (--url: one setting per served model name of --served),
 * with the metrics of cli/eval/metrics.c per question type, overall and per
 * question, a JSON report (--out), an HTML report (--html), the decisions
 * (--decisions) and a summary on stdout. The items are read and validated
 * before any model is loaded or any request sent. */
#include <curl/curl.h>
#include <errno.h>
#include <libgen.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "api/session.h"
#include "base/log.h"
#include "base/progress.h"
#include "cli/cli.h"
#include "cli/client/http.h"
#include "cli/eval/eval.h"
#include "cli/eval/run.h"

#define MAX_SETTINGS 16

typedef struct {
    const char *model_dir, *url, *served, *orders_list, *dtype_list, *calibration, *backend, *gemm_table;
    const char *key_env, *out, *html, *decisions, *summary;
    int no_calibration, threads, jobs, timeout, retries;
    int local_set, url_set; /* a flag of --model only / --url only was given */
    int orders_set, dtype_set;
    const char **files;
    int n_files;
    int orders[2], n_orders;
    const char *dtypes[5];
    int n_dtypes;
    char *dtype_copy;
} ev_opts;

const cli_doc cli_doc_eval = {
    "eval", "(--model REF | --url URL) [options] ITEMS.jsonl...",
    "evaluate labelled items: accuracy, macro-F1, log-loss, Brier, ECE, confusion matrices; JSON and HTML reports",
    "Items, one JSON object per line:\n"
    "  basal-run (rkinas/basal): {\"id\"?, \"state\", \"question\", \"options\": [...], \"type\"?: choice|noul|score,\n"
    "    \"gold\": index}, asked as basal-run asks it (question \"q\", options \"0\"..\"n-1\" with option_keys hide;\n"
    "    noul: {\"true\": options[0], \"false\": options[1]}); lines without gold and full requests are counted, not sent.\n"
    "  ours: {\"id\"?, \"request\": <a POST /v1/systemone body>, \"expected\": {\"<question id>\": <answer>}} with\n"
    "    the option key (score also its index; noul and yes/no act also true/false), for multi the array of the\n"
    "    labels that apply or {\"<label>\": true|false}. The request's model is replaced by the evaluated one.\n"
    "Every item is validated first; a malformed one is reported as FILE:LINE and nothing runs (exit 2).\n"
    "Metrics per setting, overall, per question type and per question (a question id across items): the\n"
    "prediction is the most probable option and the confidence its probability (top-label); accuracy;\n"
    "macro-F1 over (question, answer) classes; log-loss -ln max(p, 1e-15); Brier = sum over the options of\n"
    "the squared error (multi-class, 0..2); ECE over 15 equal-width confidence bins. A noul counts as\n"
    "(noul, 1 - noul), each multi label as a yes/no decision.\n"
    "Settings: in-process, every --orders x --dtype pair gets a session of its own, side by side. A server\n"
    "decides its own orders and dtype (basal serve --orders/--dtype, serve.yml): --url records them from\n"
    "the answers' x-basal-orders and GET /v1/models, and refuses --orders/--dtype; to compare settings over\n"
    "HTTP serve one model name per setting and list them with --served NAME,NAME.\n"
    "Exit status: 0 every item answered; 1 a runtime failure, or an item the model refused (listed in the\n"
    "reports; the metrics cover the others); 2 a usage error or a malformed item.\n",
};

static int usage_error(const char *fmt, const char *arg) {
    cli_error("eval", fmt, arg);
    return 2;
}

static int orders_opt(void *dst, const char *flag, const char *v) {
    ev_opts *o = dst;
    o->orders_list = v;
    o->orders_set = 1;
    return 0;
}

static int dtype_opt(void *dst, const char *flag, const char *v) {
    ev_opts *o = dst;
    o->dtype_list = v;
    o->dtype_set = 1;
    return 0;
}

/* --orders 1,2 and --dtype f32,bf16 as lists of distinct values. */
static int parse_lists(ev_opts *o) {
    char buf[64];
    snprintf(buf, sizeof buf, "%s", o->orders_list);
    for (char *sv = NULL, *t = strtok_r(buf, ",", &sv); t; t = strtok_r(NULL, ",", &sv)) {
        int v = !strcmp(t, "1") ? 1 : !strcmp(t, "2") ? 2 : 0;
        if (!v) return usage_error("--orders takes 1, 2 or 1,2 (got '%s')", o->orders_list);
        for (int i = 0; i < o->n_orders; i++)
            if (o->orders[i] == v) return usage_error("--orders names a value twice ('%s')", o->orders_list);
        o->orders[o->n_orders++] = v;
    }
    if (!o->n_orders) return usage_error("--orders takes 1, 2 or 1,2 (got '%s')", o->orders_list);
    if (!(o->dtype_copy = strdup(o->dtype_list))) return usage_error("%s", "out of memory");
    static const char *known = ",auto,f16,bf16,f32,int8w,";
    for (char *sv = NULL, *t = strtok_r(o->dtype_copy, ",", &sv); t; t = strtok_r(NULL, ",", &sv)) {
        char probe[16];
        snprintf(probe, sizeof probe, ",%s,", t);
        if (strlen(t) > 8 || !strstr(known, probe))
            return usage_error("--dtype takes a list of auto, f16, bf16, f32, int8w (got '%s')", o->dtype_list);
        for (int i = 0; i < o->n_dtypes; i++)
            if (!strcmp(o->dtypes[i], t)) return usage_error("--dtype names a value twice ('%s')", o->dtype_list);
        if (o->n_dtypes == 5) return usage_error("--dtype: too many values ('%s')", o->dtype_list);
        o->dtypes[o->n_dtypes++] = t;
    }
    if (!o->n_dtypes) return usage_error("--dtype takes a list of auto, f16, bf16, f32, int8w (got '%s')", o->dtype_list);
    return 0;
}

static int check_args(ev_opts *o) {
    if (!o->model_dir == !o->url) return usage_error("%s", "give --model REF (in-process) or --url URL (a server), not both");
    if (!o->n_files) return usage_error("%s", "give at least one item file (ITEMS.jsonl, or - for stdin)");
    if (strcmp(o->summary, "text") && strcmp(o->summary, "json"))
        return usage_error("--summary must be text or json (got '%s')", o->summary);
    if (o->url && (o->orders_set || o->dtype_set))
        return usage_error("%s", "--orders and --dtype choose in-process settings (--model); a server uses its own "
                                 "(basal serve --orders/--dtype): serve one model name per setting and compare them "
                                 "with --url URL --served NAME,NAME");
    if (o->url && o->local_set)
        return usage_error("%s", "--calibration, --no-calibration, --backend, --threads and --gemm-table need --model");
    if (o->model_dir && o->url_set) return usage_error("%s", "--served, --key-env, --jobs, --timeout and --retries need --url");
    if (o->calibration && o->no_calibration) return usage_error("%s", "--calibration excludes --no-calibration");
    return parse_lists(o);
}

static int parse_args(int argc, char **argv, ev_opts *o) {
    memset(o, 0, sizeof *o);
    o->orders_list = "2";
    o->dtype_list = "auto";
    o->key_env = "BASAL_API_KEY";
    o->summary = "text";
    o->jobs = 16;
    o->timeout = 300;
    o->retries = 3;
    o->files = calloc((size_t)argc, sizeof *o->files);
    if (!o->files) return usage_error("%s", "out of memory");
    const cli_opt opts[] = {
        CLI_STR("--model", "REF", "", NULL,
                "evaluate in-process: a model directory or reference (owner/name[@revision], mini, 4.5B, max)",
                &o->model_dir),
        CLI_STR("--url", "URL", "", NULL, "evaluate against a running server (its POST /v1/systemone)", &o->url),
        CLI_ROW("--served", "NAME[,NAME...]", "the server's only model", NULL,
                "with --url: the served model names to evaluate side by side", CLI_STR, .dst = &o->served,
                .seen = &o->url_set),
        CLI_CALL("--orders", "1|2|1,2", "2", NULL, "with --model: option orders per question, a list = one setting each",
                 o, orders_opt),
        CLI_CALL("--dtype", "LIST", "auto", NULL, "with --model: compute modes (auto, f16, bf16, f32, int8w), one setting each",
                 o, dtype_opt),
        CLI_ROW("--calibration", "FILE", "the model's CALIBRATION.json", NULL, "with --model: per-type temperatures from this file",
                CLI_STR, .dst = &o->calibration, .seen = &o->local_set),
        CLI_ROW("--no-calibration", NULL, "", NULL, "with --model: temperature 1 for every question type", CLI_SWITCH,
                .dst = &o->no_calibration, .min = 1, .seen = &o->local_set),
        CLI_ROW("--backend", "auto|cpu|cuda", "auto", NULL, "with --model: compute backend", CLI_CHOICE, .dst = &o->backend,
                .choices = "auto|cpu|cuda", .seen = &o->local_set),
        CLI_ROW("--threads", "N", "0 = online CPUs", NULL, "with --model: CPU compute threads", CLI_INT, .dst = &o->threads,
                .min = 0, .max = 1 << 16, .seen = &o->local_set),
        CLI_ROW("--gemm-table", "FILE", "", NULL, "with --model: cuBLASLt GEMM table from gemm-search (CUDA only)", CLI_STR,
                .dst = &o->gemm_table, .seen = &o->local_set),
        CLI_ROW("--key-env", "NAME", "BASAL_API_KEY", NULL, "with --url: environment variable with the API key (Bearer)",
                CLI_STR, .dst = &o->key_env, .seen = &o->url_set),
        CLI_ROW("--jobs", "N", "16", NULL, "with --url: requests in flight, 1..256", CLI_INT, .dst = &o->jobs, .min = 1,
                .max = 256, .seen = &o->url_set),
        CLI_ROW("--timeout", "SECONDS", "300", NULL, "with --url: limit per attempt, the answer included", CLI_INT,
                .dst = &o->timeout, .min = 1, .max = 86400, .seen = &o->url_set),
        CLI_ROW("--retries", "N", "3", NULL, "with --url: extra attempts after 408/429/5xx/529 or a lost connection", CLI_INT,
                .dst = &o->retries, .min = 0, .max = 10, .seen = &o->url_set),
        CLI_STR("--out", "FILE", "", NULL, "the JSON report (docs/eval-report.schema.json)", &o->out),
        CLI_STR("--html", "FILE", "", NULL, "the HTML report (self-contained: reliability diagrams, histograms, matrices)",
                &o->html),
        CLI_STR("--decisions", "FILE", "", NULL, "one JSON line per decision and setting", &o->decisions),
        CLI_CHOICE("--summary", "text", NULL, "stdout: the metric table, or basal-run's summary line per setting",
                   &o->summary, "text|json"),
    };
    cli_pos pos = {o->files, 0, argc};
    int rc = cli_parse(&cli_doc_eval, opts, CLI_N(opts), &pos, argc, argv);
    o->n_files = pos.n;
    return rc ? rc : check_args(o);
}

/* An output's directory must exist and be writable before any work. */
static int check_output(const char *path) {
    if (!path) return 0;
    char *copy = strdup(path);
    if (!copy) return usage_error("%s", "out of memory");
    const char *dir = dirname(copy);
    int ok = access(dir, W_OK | X_OK) == 0;
    int err = errno;
    free(copy);
    if (!ok) {
        cli_error("eval", "cannot write %s: %s", path, strerror(err));
        return 2;
    }
    return 0;
}

/* Written next to its place, then renamed: a failed run leaves no half report. */
static int write_output(const char *path, const bs_buf *b) {
    if (!path) return 0;
    char *tmp = bs_strfmt("%s.tmp.%ld", path, (long)getpid());
    bs_err e = {0};
    int rc = !tmp || b->oom ? bs_fail(&e, BS_ENOMEM, "out of memory") : bs_write_file(tmp, b->data, b->len, &e);
    if (rc == BS_OK && rename(tmp, path) != 0) rc = bs_fail(&e, BS_EIO, "%s: %s", path, strerror(errno));
    if (rc < 0 && tmp) unlink(tmp);
    free(tmp);
    if (rc < 0) cli_error("eval", "%s", e.msg);
    return rc < 0 ? 1 : 0;
}

typedef struct {
    ev_opts o;
    ev_set set;
    ev_result results[MAX_SETTINGS];
    size_t n_results;
} ev_ctx;

static bs_progress *setting_progress(const ev_ctx *c, const ev_result *r) {
    char what[160];
    snprintf(what, sizeof what, "eval %s", r->label);
    return bs_progress_start(what, c->set.n_items, "items");
}

static void log_setting_done(const ev_ctx *c, const ev_result *r) {
    ev_metrics m;
    bs_err e = {0};
    if (ev_metrics_compute(&c->set, r, -1, EV_ANY, &m, &e) < 0) return;
    bs_log(BS_LOG_INFO, "eval", "%s: %zu items in %.2f s, %zu refused; accuracy %.4f, ECE %.4f over %zu decisions",
           r->label, c->set.n_items, r->seconds, r->n_errors, m.accuracy, m.ece, m.n);
}

/* One in-process setting: a session of its own with these orders and dtype. */
static int run_session(ev_ctx *c, int orders, const char *dtype) {
    ev_opts *o = &c->o;
    ev_result *r = &c->results[c->n_results];
    if (ev_result_init(r, &c->set) < 0) return cli_error("eval", "out of memory"), 1;
    c->n_results++;
    basal_options bo;
    basal_options_init(&bo);
    bo.threads = o->threads;
    bo.backend = o->backend;
    bo.dtype = dtype;
    bo.gemm_table = o->gemm_table;
    bo.orders = orders;
    bo.calibration = o->calibration;
    bo.no_calibration = o->no_calibration;
    bs_log(BS_LOG_INFO, "eval", "loading %s (orders %d, dtype %s)", o->model_dir, orders, dtype);
    basal_session *ss = NULL;
    bs_err e = {0};
    double t0 = bs_now_ms();
    if (basal_open(&ss, o->model_dir, &bo, &e) < 0) return cli_error("eval", "%s", e.msg), 1;
    r->load_seconds = (bs_now_ms() - t0) / 1000;
    const bs_basal_model *bm = bs_session_model(ss);
    const char *mode = bs_model_dtype_name(&bm->model);
    r->dtype = strdup(mode ? mode : dtype);
    r->model = strdup(basal_model_name(ss));
    r->calibration = strdup(bm->calib_source ? bm->calib_source : "none");
    r->orders = orders;
    r->label = bs_strfmt("orders=%d dtype=%s", orders, r->dtype ? r->dtype : dtype);
    int rc = 1;
    if (!r->dtype || !r->model || !r->calibration || !r->label) {
        cli_error("eval", "out of memory");
        goto done;
    }
    bs_progress *p = setting_progress(c, r);
    t0 = bs_now_ms();
    int run_rc = ev_run_session(ss, &c->set, r, p, &e);
    r->seconds = (bs_now_ms() - t0) / 1000;
    bs_progress_end(p);
    if (run_rc < 0) {
        cli_error("eval", "%s: %s", r->label, e.msg);
        goto done;
    }
    log_setting_done(c, r);
    rc = 0;
done:
    basal_close(ss);
    return rc;
}

static int run_in_process(ev_ctx *c) {
    if (c->o.n_dtypes * c->o.n_orders > MAX_SETTINGS) return usage_error("%s", "too many settings: --orders x --dtype make at most 16");
    for (int d = 0; d < c->o.n_dtypes; d++)
        for (int k = 0; k < c->o.n_orders; k++) {
            int rc = run_session(c, c->o.orders[k], c->o.dtypes[d]);
            if (rc) return rc;
        }
    return 0;
}

/* The setting of served model entry m of GET /v1/models; 0, or 1. */
static int add_served(ev_ctx *c, const bj_value *m) {
    if (c->n_results == MAX_SETTINGS) return cli_error("eval", "too many --served names (at most %d)", MAX_SETTINGS), 1;
    ev_result *r = &c->results[c->n_results];
    if (ev_result_init(r, &c->set) < 0) return cli_error("eval", "out of memory"), 1;
    c->n_results++;
    const bj_value *nm = bj_get(m, "name"), *dt = bj_get(m, "dtype");
    r->model = strndup(nm->str, nm->len);
    r->dtype = dt && dt->type == BJ_STRING ? strndup(dt->str, dt->len) : NULL;
    r->label = r->model ? bs_strfmt("served %s", r->model) : NULL;
    return r->label ? 0 : (cli_error("eval", "out of memory"), 1);
}

static const bj_value *served_entry(const bj_value *models, const char *name) {
    for (size_t k = 0; k < models->n; k++) {
        const bj_value *nm = bj_get(models->items[k], "name");
        if (nm && nm->type == BJ_STRING && (!name || (strlen(name) == nm->len && !memcmp(nm->str, name, nm->len))))
            return models->items[k];
    }
    return NULL;
}

/* GET /v1/models: a setting per --served name (else the server's only
 * model), with the dtype the server names. */
static int url_settings(ev_ctx *c, const cl_http *h) {
    bs_buf body;
    bs_buf_init(&body);
    bs_err e = {0};
    bj_value *v = NULL;
    char *names = NULL;
    int rc = 1;
    long st = cl_http_get(h, h->url_models, &body, 16u << 20, &e);
    if (st < 0) {
        cli_error("eval", "%s (is the server running? basal serve --model DIR)", e.msg);
        goto done;
    }
    const bj_value *models = NULL;
    if (st != 200 || bj_parse(body.data ? body.data : "", body.len, NULL, &v, &e) < 0 ||
        !(models = bj_get(v, "models")) || models->type != BJ_ARRAY) {
        cli_error("eval", "GET %s answered %ld%s", h->url_models, st,
                  st == 401 || st == 403 ? " (the server wants an API key: --key-env NAME)"
                  : st == 200            ? " without a models list"
                                         : "");
        goto done;
    }
    if (!c->o.served) {
        const bj_value *only = models->n == 1 ? served_entry(models, NULL) : NULL;
        if (!only) {
            cli_error("eval", "the server serves %zu models: name the ones to evaluate with --served NAME[,NAME...]",
                      models->n);
            goto done;
        }
        rc = add_served(c, only);
        goto done;
    }
    if (!(names = strdup(c->o.served))) {
        cli_error("eval", "out of memory");
        goto done;
    }
    rc = 0;
    for (char *sv = NULL, *t = strtok_r(names, ",", &sv); t && !rc; t = strtok_r(NULL, ",", &sv)) {
        const bj_value *m = served_entry(models, t);
        if (!m) {
            cli_error("eval", "the server serves no model named '%s' (GET /v1/models)", t);
            rc = 2;
        } else {
            rc = add_served(c, m);
        }
    }
    if (!rc && !c->n_results) rc = usage_error("--served names no model ('%s')", c->o.served);
done:
    free(names);
    bj_free(v);
    bs_buf_free(&body);
    return rc;
}

static int run_url(ev_ctx *c) {
    if (curl_global_init(CURL_GLOBAL_DEFAULT) != 0) return cli_error("eval", "libcurl initialisation failed"), 1;
    cl_http h = {.timeout_s = c->o.timeout, .user_agent = "basal-eval/" BASAL_VERSION};
    int rc = cl_http_urls(&h, "eval", c->o.url);
    if (!rc) rc = cl_http_headers(&h, "eval", c->o.key_env);
    if (!rc) rc = url_settings(c, &h);
    ev_http hx = {&h, c->o.jobs, c->o.retries};
    for (size_t k = 0; k < c->n_results && !rc; k++) {
        ev_result *r = &c->results[k];
        bs_log(BS_LOG_INFO, "eval", "%s at %s: %zu items, %d in flight", r->label, c->o.url, c->set.n_items, c->o.jobs);
        bs_progress *p = setting_progress(c, r);
        bs_err e = {0};
        double t0 = bs_now_ms();
        if (ev_run_http(&hx, &c->set, r, p, &e) < 0) {
            cli_error("eval", "%s: %s", r->label, e.msg);
            rc = 1;
        }
        r->seconds = (bs_now_ms() - t0) / 1000;
        bs_progress_end(p);
        if (!rc) log_setting_done(c, r);
    }
    cl_http_free(&h);
    curl_global_cleanup();
    return rc;
}

static int write_reports(ev_ctx *c) {
    char created[32];
    bs_progress_timestamp(created, sizeof created);
    ev_report rp = {&c->set, c->results, c->n_results, c->o.url ? "url" : "model", c->o.model_dir, c->o.url, created, NULL};
    bs_buf b;
    bs_buf_init(&b);
    bs_err e = {0};
    int rc = 0;
    if (c->o.out && (ev_write_json(&rp, &b, &e) < 0 || write_output(c->o.out, &b))) rc = 1;
    b.len = 0;
    if (!rc && c->o.html && (ev_write_html(&rp, &b, &e) < 0 || write_output(c->o.html, &b))) rc = 1;
    b.len = 0;
    if (!rc && c->o.decisions) {
        ev_write_decisions(&rp, &b);
        if (write_output(c->o.decisions, &b)) rc = 1;
    }
    b.len = 0;
    if (!rc) {
        int w = !strcmp(c->o.summary, "json") ? ev_write_summary_json(&rp, &b, &e) : ev_write_text(&rp, &b, &e);
        if (w < 0 || fwrite(b.data, 1, b.len, stdout) != b.len || fflush(stdout) != 0) rc = 1;
    }
    if (rc && e.msg[0]) cli_error("eval", "%s", e.msg);
    bs_buf_free(&b);
    return rc;
}

int cmd_eval(int argc, char **argv) {
    ev_ctx *c = calloc(1, sizeof *c);
    if (!c) return cli_error("eval", "out of memory"), 1;
    int rc = parse_args(argc, argv, &c->o);
    if (rc) {
        rc = rc < 0 ? 0 : rc;
        goto done;
    }
    if ((rc = check_output(c->o.out)) || (rc = check_output(c->o.html)) || (rc = check_output(c->o.decisions))) goto done;
    bs_err e = {0};
    if (ev_set_read(&c->set, c->o.files, (size_t)c->o.n_files, &e) < 0) {
        cli_error("eval", "%s", e.msg);
        rc = e.code == BS_ENOMEM ? 1 : 2;
        goto done;
    }
    if (!c->set.n_items) {
        cli_error("eval", "no item has an expected answer (basal-run: \"gold\"; ours: \"expected\"): nothing to evaluate");
        rc = 2;
        goto done;
    }
    bs_log(BS_LOG_INFO, "eval", "%zu graded items, %zu decisions, %zu questions from %d file(s)%s", c->set.n_items,
           c->set.n_targets, c->set.n_groups, c->o.n_files, c->set.n_ungraded ? "; items without an expected answer skipped" : "");
    if (c->o.model_dir && (rc = cli_model_ref(&c->o.model_dir, "--model", c->o.model_dir))) goto done;
    rc = c->o.url ? run_url(c) : run_in_process(c);
    if (!rc) rc = write_reports(c);
    for (size_t k = 0; !rc && k < c->n_results; k++)
        if (c->results[k].n_errors) rc = 1;
done:
    for (size_t k = 0; k < c->n_results; k++) ev_result_free(&c->results[k]);
    ev_set_free(&c->set);
    free(c->o.files);
    free(c->o.dtype_copy);
    free(c);
    return rc;
}
