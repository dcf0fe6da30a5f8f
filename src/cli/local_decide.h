/* One model loaded in-process and /v1/systemone requests decided on it, one
 * at a time: the pipeline of `basal decide` (validation, prompts, tokens, the
 * tree-packed forwards of both steps, the decision math), shared by decide
 * and `basal client --local` (spec 06 §5.1, §5.3). */
#ifndef BS_CLI_LOCAL_DECIDE_H
#define BS_CLI_LOCAL_DECIDE_H

#include "cli/cli.h"
#include "core/reply.h"
#include "core/util.h"
#include "engine/engine.h"
#include "engine/plan.h"
#include "engine/runner.h"

typedef struct cli_local {
    const char *cmd;       /* "decide", "client": prefix of the messages */
    bs_pool *pool;
    bs_basal_model m;      /* m.name: the served model name */
    int loaded, run_ready, prefix_cache;
    bs_letter_cache lc;
    bs_prefix_set pinned;
    bs_runner run;         /* set readout_bf16, evidence_separate, watch after open */
} cli_local;

/* Loads the model in dir with its weights on threads CPU threads (0 = online
 * CPUs), attaches dev's backend and, unless !prefix_cache, precomputes the
 * template prefixes. Prints "basal CMD: ..." and returns -1 on failure (call
 * cli_local_close either way). */
int cli_local_open(cli_local *l, const char *cmd, const char *dir, int threads, const cli_device *dev,
                   int prefix_cache);
/* The same with the longest packed tree row (06 §4.3 --tree-max-tokens; 0 =
 * the engine's default). */
int cli_local_open_ex(cli_local *l, const char *cmd, const char *dir, int threads, const cli_device *dev,
                      int prefix_cache, int tree_max_tokens);
void cli_local_close(cli_local *l);

/* Times of one decision (bs_now_ms), for decide --timing. */
typedef struct cli_local_times {
    double planned, answered;
} cli_local_times;

/* Decides one request body (rep initialised by the caller). 0: out holds the
 * 200 body without usage.latency_ms. 1: the endpoint would refuse the request
 * (a validation or unknown-model error, an unsupported request, an act
 * refusal); rep holds its status and error body. Negative: a runtime failure,
 * message in e, rep empty. times may be NULL. */
int cli_local_decide(cli_local *l, const char *data, size_t len, bs_buf *out, bs_reply *rep,
                     cli_local_times *times, bs_err *e);

#endif
