/* Where `basal eval` gets its answers (run.c): a basal_session, or a server. */
#ifndef BS_CLI_EVAL_RUN_H
#define BS_CLI_EVAL_RUN_H

#include "basal.h"
#include "base/progress.h"
#include "cli/client/http.h"
#include "cli/eval/eval.h"

/* Decides every item of s on the session, one at a time (the requests name
 * r->model); each item adds 1 to p. A refusal is recorded in r; a runtime
 * failure (BS_E*, message in e) stops the run. */
int ev_run_session(basal_session *ss, const ev_set *s, ev_result *r, bs_progress *p, bs_err *e);

typedef struct ev_http {
    const cl_http *http;
    int jobs;    /* requests in flight */
    int retries; /* extra attempts after a transient failure */
} ev_http;

/* Sends every item of s to hx's POST /v1/systemone; failures of single
 * items (refusals, transport errors after the retries) are recorded in r. */
int ev_run_http(const ev_http *hx, const ev_set *s, ev_result *r, bs_progress *p, bs_err *e);

#endif
