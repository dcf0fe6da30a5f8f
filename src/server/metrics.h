/* Process-local Prometheus registry of `basal serve` (spec 02 §9). Only the
 * two inference routes are observed. Thread-safe: HTTP and engine threads
 * record, the /metrics handler renders. */
#ifndef BS_SERVE_METRICS_H
#define BS_SERVE_METRICS_H

#include <stddef.h>
#include <stdint.h>

#include "base/util.h"

enum { BS_EP_SYSTEMONE = 0, BS_EP_BASAL = 1, BS_N_ENDPOINTS = 2 };
/* The model label of a request not (yet) routed: "". */
#define BS_METRICS_NO_MODEL ((size_t)-1)

typedef struct bs_metrics bs_metrics;

/* names: the served names, in configuration order (series are pre-created
 * for them). NULL on allocation failure. */
bs_metrics *bs_metrics_create(const char *const *names, size_t n, long max_inflight);
void bs_metrics_destroy(bs_metrics *m);

/* An inference handler started (gauge up) / finished (gauge down). status 0
 * means cancelled: counted, but not put in the duration histogram. */
void bs_metrics_http_begin(bs_metrics *m, int endpoint);
void bs_metrics_http_end(bs_metrics *m, int endpoint, size_t model, int status, double seconds);
/* Admitted requests awaiting a model reply (the queue depth). */
void bs_metrics_admitted(bs_metrics *m, size_t model, int delta);
/* usage of a constructed 200 response. */
void bs_metrics_usage(bs_metrics *m, size_t model, int64_t input_tokens, int64_t output_tokens, int64_t questions);
/* A request answered from a batch: its time from arrival to admission. */
void bs_metrics_queue(bs_metrics *m, size_t model, int lane, double queue_ms);
/* An executed batch (the engine's batch hook): lane 0 main / 1 long, its
 * size, wall time, and whether its forwards succeeded. */
void bs_metrics_batch(bs_metrics *m, size_t model, int lane, int requests, double compute_ms, int ok);

/* The engine counters of one model, read when /metrics is rendered. */
typedef struct bs_metrics_engine {
    int64_t forward_tokens;  /* basal_forward_tokens_total */
    int64_t lc_rounds[2];    /* basal_large_choice_rounds_total{round="1"|"2"} */
    int orders;              /* basal_model_option_orders (0: not known yet) */
} bs_metrics_engine;

/* The decision log's counts (server/decision_log.h), when there is one. */
typedef struct bs_metrics_dlog {
    uint64_t lines, dropped, failed;
} bs_metrics_dlog;

/* The text exposition 0.0.4; eng[i] = the engine counters of model i (NULL:
 * all zero); dlog NULL: no decision log (its families are left out). */
void bs_metrics_render(bs_metrics *m, const bs_metrics_engine *eng, const bs_metrics_dlog *dlog, bs_buf *out);

#endif
