/* `basal decide` (spec 06 §5.1): one /v1/systemone request from a file or
 * stdin through the whole pipeline (validation, prompts, tokens, letter ids,
 * tree-packed forwards, decision math) of a basal_session (include/basal.h).
 * A request the endpoint refuses prints its error body on stdout and exits 2. */
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api/session.h"
#include "base/util.h"
#include "cli/cli.h"
#include "engine/runner.h"

typedef struct {
    const char *model_dir, *request;
    int timing, threads, no_prefix_cache, readout_bf16, evidence_separate, tree_max_tokens;
    cli_device dev;
    cli_decision knobs;
} opts_t;

const cli_doc cli_doc_decide = {
    "decide", "--model REF [--request FILE|-] [options]",
    "answer one /v1/systemone request from a file or stdin (pretty JSON on stdout)",
    "The response is the /v1/systemone 200 body without usage.latency_ms. A request the\n"
    "endpoint would refuse prints its error body on stdout and exits 2; a runtime failure\n"
    "(model load, I/O) prints a message on stderr and exits 1.\n",
};

static int parse_opts(int argc, char **argv, opts_t *o) {
    memset(o, 0, sizeof *o);
    o->request = "-";
    const char *readout = "f32", *kernels = "fused";
    const cli_opt opts[] = {
        CLI_MODEL("model directory or reference (owner/name[@revision], mini, 4.5B, max; required)", &o->model_dir),
        CLI_STR("--request", "FILE|-", NULL, NULL, "the request JSON; - reads stdin", &o->request),
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
        CLI_DECISION_ROWS(&o->knobs),
    };
    int rc = cli_parse(&cli_doc_decide, opts, CLI_N(opts), NULL, argc, argv);
    if (rc) return rc;
    o->readout_bf16 = !strcmp(readout, "bf16");
    if (!o->model_dir) {
        cli_error("decide", "--model REF is required (see basal decide --help)");
        return 2;
    }
    return 0;
}

int cmd_decide(int argc, char **argv) {
    opts_t o;
    int status = parse_opts(argc, argv, &o);
    if (status) return status < 0 ? 0 : status;
    status = 1;
    double t0 = bs_now_ms();
    bs_err e = {0};
    basal_session *s = NULL;
    basal_result r = {0};
    char *data = NULL;
    size_t len = 0;
    if (cli_read_request(o.request, &data, &len) < 0) goto done;
    basal_options bo;
    basal_options_init(&bo);
    bo.threads = o.threads;
    cli_device_apply(&o.dev, &bo);
    bo.no_prefix_cache = o.no_prefix_cache;
    bo.tree_max_tokens = o.tree_max_tokens;
    bo.readout_bf16 = o.readout_bf16;
    bo.evidence_separate = o.evidence_separate;
    cli_decision_apply(&o.knobs, &bo);
    if (basal_open(&s, o.model_dir, &bo, &e) < 0) {
        cli_error("decide", "%s", e.msg);
        goto done;
    }
    double t1 = bs_now_ms();
    if ((status = cli_session_request("decide", s, 0, data, len, &r)) != 0) goto done;
    const bs_runner *run = bs_session_runner(s);
    cli_print_pretty(stdout, r.json, r.len);
    if (o.timing)
        /* 06 §5.1's three times first (total: the request, not the model
         * load), then this runtime's own */
        fprintf(stderr, "timing: {\"prepare_ms\": %.3f, \"forward_ms\": %.3f, \"total_ms\": %.3f, \"load_ms\": %.3f, "
                        "\"evidence_inline\": %lld, \"evidence_forwards\": %lld}\n",
                r.plan_ms, r.forward_ms, r.plan_ms + r.forward_ms, t1 - t0, (long long)run->evidence_inline,
                (long long)run->evidence_forwards);
    status = 0;
done:
    basal_result_free(&r);
    basal_close(s);
    free(data);
    return status;
}

