/* `basal benchmark` results and their two reports: the JSON report (schema
 * bench/benchmark-report.schema.json, spec 06 §7.5–§7.6) and a self-contained
 * HTML page with inline SVG charts. cmd_benchmark.c fills the structures. */
#ifndef BS_CLI_BENCH_REPORT_H
#define BS_CLI_BENCH_REPORT_H

#include <stddef.h>

#include "core/util.h"

#define BM_MAX_CLASSES 16
#define BM_MAX_STATUS 16

/* One request of a phase, send to full body. */
typedef struct bm_sample {
    double lat_ms, queue_ms, compute_ms; /* queue/compute from x-basal-* headers; < 0 = absent */
    int status;                          /* HTTP status; 0 = transport error or timeout */
    int batch;                           /* x-basal-batch-requests; 0 = absent */
    int cls;                             /* class index in the workload */
    int questions;                       /* questions answered (0 unless 200) */
    int payload_bytes;
} bm_sample;

typedef struct bm_phase {
    int workload, concurrency;
    bm_sample *s;
    size_t n, cap;
    double wall_s;
    int codes[BM_MAX_STATUS];
    long code_counts[BM_MAX_STATUS];
    int n_codes;
    long completed, errors, overloaded, transport, invalid, skipped_too_long, answer_changes;
    char stop_reason[160];
    /* token counters from /metrics (deltas over the phase); known = /metrics answered */
    int tokens_known;
    double input_tokens, forward_tokens;
    /* resource window, sampled every 200 ms */
    int rss_known, n_samples;
    double min_avail_mib, peak_rss_mib, mean_cpu_cores, swap_growth_mib;
} bm_phase;

typedef struct bm_workload {
    char *name, *path;
    size_t requests, questions, unique_payloads;
    char *classes[BM_MAX_CLASSES];
    int n_classes;
    long skipped_too_long; /* requests found over the model's context, left out of later phases */
} bm_workload;

typedef struct bm_report {
    /* machine and build */
    char cpu_model[128];
    int cpus;
    double mem_total_gib;
    char kernel[128];
    const char *version, *compiler, *cflags;
    /* server */
    const char *url;
    int started_server;  /* 1 = started here on loopback */
    char *server_argv;   /* the command line, when started here */
    char *model_name, *model_path;
    double checkpoint_bytes, load_s;
    /* settings */
    int *concurrency, n_concurrency, warmup, timeout_ms, max_requests;
    double ram_reserve_gib;
    char started_at[32];
    bm_workload *workloads;
    int n_workloads;
    bm_phase *phases;
    int n_phases;
} bm_report;

/* Latency statistics by nearest rank over n values (sorted copy). */
typedef struct bm_stats {
    size_t n;
    double min, p50, p95, p99, max, mean;
} bm_stats;
bm_stats bm_compute_stats(const double *v, size_t n);

void bm_write_json(const bm_report *r, bs_buf *out);
void bm_write_html(const bm_report *r, bs_buf *out);
/* One text line per phase (HTTP min/p50/p99, req/s, p99 queue, batch compute). */
void bm_write_text(const bm_report *r, bs_buf *out);

#endif
