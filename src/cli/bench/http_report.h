/* `basal benchmark` results and their reports: the JSON report, schema_version
 * 2 (bench/benchmark-report.schema.json; spec 06 §7.5-§7.6; the field names,
 * nesting, units and semantics of basal-rs's `basal benchmark`), the text
 * summary in basal-rs's layout, and a self-contained HTML page with inline
 * SVG charts. cmd_benchmark.c fills the structures. */
#ifndef BS_CLI_BENCH_REPORT_H
#define BS_CLI_BENCH_REPORT_H

#include <stddef.h>

#include "base/util.h"

#define BM_MAX_CLASSES 16

/* Why a request failed (basal-rs's error kinds); BM_OK: it did not. */
enum { BM_OK, BM_TIMEOUT, BM_TRANSPORT, BM_RESPONSE_BODY, BM_HTTP_STATUS, BM_INVALID_RESPONSE, BM_N_ERR };
extern const char *const bm_error_names[BM_N_ERR];

/* One request of a phase, send to full body. */
typedef struct bm_sample {
    const char *id;                      /* the request's id (owned by the workload) */
    double lat_ms, queue_ms, compute_ms; /* queue/compute from x-basal-* headers; < 0 = absent */
    int status;                          /* HTTP status; 0 = no response */
    int error;                           /* BM_OK or an error kind */
    int batch;                           /* x-basal-batch-requests; 0 = absent */
    int cls;                             /* class index in the workload */
    int questions;                       /* questions of the request (answered or not) */
    long input_tokens;                   /* prompt tokens of both orders; < 0 = unknown (--url) */
    size_t payload_bytes;
    int answer_changed;                  /* answers differ from the payload's first success */
} bm_sample;

typedef struct bm_phase {
    int workload, concurrency;
    size_t planned, submitted;
    bm_sample *s;
    size_t n, cap;
    double wall_s;
    int ended;                           /* the phase ran to its end or stopped (not interrupted midway) */
    char reason[200];                    /* why it stopped early; "" = it did not */
    /* token counters from /metrics (deltas over the phase); known = /metrics answered */
    int tokens_known;
    double input_tokens, forward_tokens;
    /* resource window, sampled every 200 ms */
    int n_samples, proc_known;
    double min_avail_bytes, peak_rss_bytes, cpu_used_s, cpu_window_s;
} bm_phase;

typedef struct bm_skipped {
    char *id;
    int cls;
    char *detail; /* the 422 body's "detail" (JSON) */
} bm_skipped;

typedef struct bm_workload {
    char *name;
    size_t source_requests, requests, questions, unique_payloads;
    char *classes[BM_MAX_CLASSES];
    size_t class_requests[BM_MAX_CLASSES];
    int n_classes;
    bm_skipped *skipped;
    size_t n_skipped;
    char ordered_payloads_sha256[65];
    double *payload_bytes;  /* per request in run order (requests values) */
    double *input_tokens;   /* per request in run order, NULL when not planned here */
} bm_workload;

/* w's class indices in name order (basal-rs keeps classes in a BTreeMap): idx[0, n); returns n. */
int bm_class_order(const bm_workload *w, int *idx);

typedef struct bm_host_memory {
    double total_bytes, available_bytes, swap_used_bytes, swap_out_bytes;
} bm_host_memory;

typedef struct bm_report {
    const char *status;   /* not_run, running, aborted, completed_with_errors, completed */
    int complete;
    char reason[300];
    /* machine and build */
    char cpu_model[128];
    int cpus;
    char kernel[128];
    const char *version, *compiler, *cflags;
    char started_at[32];
    /* server */
    const char *url;
    int started_server;   /* 1 = started here on loopback */
    char *server_argv;    /* the command line, when started here */
    char backend[160];    /* the server's own description ("cpu, dtype f32, kernel ..."), "" = unknown */
    /* model */
    char *model_ref, *model_name;
    char *weights_sha256; /* JSON object {"file": "hex"}; NULL = not computed (--url) */
    double checkpoint_bytes, load_s; /* <= 0 / NAN = unknown */
    /* settings and methodology */
    char *source_json;    /* the "source" object, written by cmd_benchmark.c */
    char *settings_json;  /* the "settings" object */
    int *concurrency, n_concurrency, warmup, timeout_ms, max_requests;
    /* resource guard */
    bm_host_memory before;
    int guard_checks;
    double min_avail_bytes, max_swap_growth_bytes, ram_reserve_bytes, gpu_reserve_bytes, swap_limit_bytes;
    bm_workload *workloads;
    int n_workloads;
    bm_phase *phases;
    int n_phases;
} bm_report;

/* Latency statistics as basal-rs's benchmark computes them: p50 the median
 * (mean of the middle two for an even count), p95/p99 by nearest rank. */
typedef struct bm_stats {
    size_t n;
    double min, p50, p95, p99, max, mean;
} bm_stats;
bm_stats bm_compute_stats(const double *v, size_t n);

void bm_write_json(const bm_report *r, bs_buf *out);
void bm_write_html(const bm_report *r, bs_buf *out);
/* basal-rs's text summary: status, skipped requests, per phase the counts,
 * HTTP min/p50/p99 and requests/s, p99 queue and whole-batch compute,
 * headroom, per-class p99; swap growth; the reason of an abort. */
void bm_write_text(const bm_report *r, bs_buf *out);

#endif
