/* `basal benchmark` reports: JSON (schema_version 2, bench/benchmark-report.
 * schema.json, the fields of basal-rs's report), basal-rs's text summary, and
 * a self-contained HTML page (inline CSS and SVG, no script, no network
 * asset) that a person can read at a glance. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/bench/http_report.h"
#include "protocol/pyjson.h"
#include "protocol/respjson.h"
#include "base/utf8.h"

const char *const bm_error_names[BM_N_ERR] = {"", "timeout", "transport", "response_body", "http_status",
                                              "invalid_response"};

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* nearest rank: the smallest value with at least p% of the values at or below it */
static double nearest_rank(const double *sorted, size_t n, double p) {
    size_t k = (size_t)ceil(p / 100.0 * (double)n);
    if (k < 1) k = 1;
    if (k > n) k = n;
    return sorted[k - 1];
}

bm_stats bm_compute_stats(const double *v, size_t n) {
    bm_stats s = {0};
    s.n = n;
    if (!n) return s;
    double *c = malloc(n * sizeof *c);
    if (!c) {
        s.n = 0;
        return s;
    }
    memcpy(c, v, n * sizeof *c);
    qsort(c, n, sizeof *c, cmp_double);
    double sum = 0;
    for (size_t i = 0; i < n; i++) sum += c[i];
    s.min = c[0];
    s.max = c[n - 1];
    s.p50 = n % 2 ? c[n / 2] : (c[n / 2 - 1] + c[n / 2]) / 2;
    s.p95 = nearest_rank(c, n, 95);
    s.p99 = nearest_rank(c, n, 99);
    s.mean = sum / (double)n;
    free(c);
    return s;
}

/* a measured float: shortest round-trip digits, null when unknown */
static void put_d(bs_buf *b, double x) {
    if (!isfinite(x)) bs_buf_puts(b, "null");
    else bs_resp_double(b, x);
}

/* a byte count or other whole quantity held in a double; null when unknown */
static void put_u(bs_buf *b, double x) {
    if (!isfinite(x) || x < 0) bs_buf_puts(b, "null");
    else bs_buf_printf(b, "%.0f", x);
}

/* A string up to its first byte that is not valid UTF-8: a reason clipped by
 * snprintf can end inside a character, and the report must stay JSON that
 * any reader accepts. */
static void put_str(bs_buf *b, const char *s) {
    if (!s) bs_buf_puts(b, "null");
    else bj_put_string(b, s, bs_utf8_first_invalid(s, strlen(s)));
}

/* basal-rs writes null, not an object of nulls, for no values */
static void put_stats(bs_buf *b, bm_stats s) {
    if (!s.n) {
        bs_buf_puts(b, "null");
        return;
    }
    bs_buf_printf(b, "{\"n\":%zu", s.n);
    const char *names[] = {"min", "p50", "p95", "p99", "max", "mean"};
    double vals[] = {s.min, s.p50, s.p95, s.p99, s.max, s.mean};
    for (int i = 0; i < 6; i++) {
        bs_buf_printf(b, ",\"%s\":", names[i]);
        put_d(b, vals[i]);
    }
    bs_buf_putc(b, '}');
}

enum { ST_LAT, ST_LAT_OK, ST_QUEUE, ST_COMPUTE, ST_BATCH, ST_PAYLOAD };

/* Statistics of one field of a phase's samples; cls >= 0 restricts to a class. */
static bm_stats phase_stats(const bm_phase *p, int which, int cls) {
    double *v = malloc((p->n ? p->n : 1) * sizeof *v);
    size_t k = 0;
    if (!v) return (bm_stats){0};
    for (size_t i = 0; i < p->n; i++) {
        const bm_sample *s = &p->s[i];
        if (cls >= 0 && s->cls != cls) continue;
        switch (which) {
        case ST_LAT: v[k++] = s->lat_ms; break;
        case ST_LAT_OK: if (s->error == BM_OK) v[k++] = s->lat_ms; break;
        case ST_QUEUE: if (s->queue_ms >= 0) v[k++] = s->queue_ms; break;
        case ST_COMPUTE: if (s->compute_ms >= 0) v[k++] = s->compute_ms; break;
        case ST_BATCH: if (s->batch > 0) v[k++] = s->batch; break;
        case ST_PAYLOAD: v[k++] = (double)s->payload_bytes; break;
        }
    }
    bm_stats st = bm_compute_stats(v, k);
    free(v);
    return st;
}

static size_t phase_errors(const bm_phase *p, int cls) {
    size_t n = 0;
    for (size_t i = 0; i < p->n; i++) n += (cls < 0 || p->s[i].cls == cls) && p->s[i].error != BM_OK;
    return n;
}

/* questions of the successful requests */
static long phase_questions(const bm_phase *p) {
    long q = 0;
    for (size_t i = 0; i < p->n; i++)
        if (p->s[i].error == BM_OK) q += p->s[i].questions;
    return q;
}

static double phase_rps(const bm_phase *p) {
    return p->wall_s > 0 ? (double)(p->n - phase_errors(p, -1)) / p->wall_s : NAN;
}

static int cmp_int(const void *a, const void *b) {
    int x = *(const int *)a, y = *(const int *)b;
    return x < y ? -1 : x > y;
}

/* The counts both a phase and each of its classes report (basal-rs's stats()):
 * completed = requests that finished (answered or failed), statuses by code
 * ("no_response" without one), error kinds. */
static void put_counts(bs_buf *b, const bm_phase *p, int cls) {
    size_t n = 0;
    int codes[64], nc = 0;
    long kinds[BM_N_ERR] = {0}, none = 0;
    for (size_t i = 0; i < p->n; i++) {
        const bm_sample *s = &p->s[i];
        if (cls >= 0 && s->cls != cls) continue;
        n++;
        kinds[s->error]++;
        if (!s->status) none++;
        int seen = 0;
        for (int k = 0; k < nc; k++) seen |= codes[k] == s->status;
        if (!seen && s->status && nc < 64) codes[nc++] = s->status;
    }
    /* statuses are keyed by the code's text, in text order as basal-rs's BTreeMap */
    qsort(codes, (size_t)nc, sizeof *codes, cmp_int);
    bs_buf_printf(b, "\"completed\":%zu,\"errors\":%zu,\"latency_ms\":", n, n - (size_t)kinds[BM_OK]);
    put_stats(b, phase_stats(p, ST_LAT, cls));
    bs_buf_puts(b, ",\"successful_latency_ms\":");
    put_stats(b, phase_stats(p, ST_LAT_OK, cls));
    bs_buf_puts(b, ",\"queue_ms\":");
    put_stats(b, phase_stats(p, ST_QUEUE, cls));
    bs_buf_puts(b, ",\"batch_compute_ms\":");
    put_stats(b, phase_stats(p, ST_COMPUTE, cls));
    bs_buf_puts(b, ",\"batch_requests\":");
    put_stats(b, phase_stats(p, ST_BATCH, cls));
    bs_buf_puts(b, ",\"payload_bytes\":");
    put_stats(b, phase_stats(p, ST_PAYLOAD, cls));
    bs_buf_puts(b, ",\"statuses\":{");
    for (int k = 0; k < nc; k++) {
        long count = 0;
        for (size_t i = 0; i < p->n; i++) count += (cls < 0 || p->s[i].cls == cls) && p->s[i].status == codes[k];
        bs_buf_printf(b, "%s\"%d\":%ld", k ? "," : "", codes[k], count);
    }
    if (none) bs_buf_printf(b, "%s\"no_response\":%ld", nc ? "," : "", none);
    bs_buf_puts(b, "},\"error_kinds\":{");
    /* in name order, as basal-rs's BTreeMap writes them */
    static const int order[] = {BM_HTTP_STATUS, BM_INVALID_RESPONSE, BM_RESPONSE_BODY, BM_TIMEOUT, BM_TRANSPORT};
    int first = 1;
    for (int k = 0; k < 5; k++)
        if (kinds[order[k]]) {
            bs_buf_printf(b, "%s\"%s\":%ld", first ? "" : ",", bm_error_names[order[k]], kinds[order[k]]);
            first = 0;
        }
    bs_buf_putc(b, '}');
}

int bm_class_order(const bm_workload *w, int *idx) {
    for (int i = 0; i < w->n_classes; i++) idx[i] = i;
    for (int i = 1; i < w->n_classes; i++)
        for (int k = i; k > 0 && strcmp(w->classes[idx[k - 1]], w->classes[idx[k]]) > 0; k--) {
            int t = idx[k];
            idx[k] = idx[k - 1];
            idx[k - 1] = t;
        }
    return w->n_classes;
}

static void put_phase(bs_buf *b, const bm_report *r, const bm_phase *p) {
    const bm_workload *w = &r->workloads[p->workload];
    bs_buf_puts(b, "{\"name\":");
    put_str(b, w->name);
    bs_buf_printf(b, ",\"concurrency\":%d,\"planned_requests\":%zu,\"submitted_requests\":%zu,\"cancelled_requests\":%zu,"
                     "\"complete\":%s,\"reason\":",
                  p->concurrency, p->planned, p->submitted, p->submitted > p->n ? p->submitted - p->n : 0,
                  p->ended && p->n == p->planned && !p->reason[0] ? "true" : "false");
    put_str(b, p->reason[0] ? p->reason : NULL);
    bs_buf_puts(b, ",\"wall_s\":");
    put_d(b, p->wall_s);
    bs_buf_putc(b, ',');
    put_counts(b, p, -1);
    bs_buf_puts(b, ",\"successful_requests_per_second\":");
    put_d(b, phase_rps(p));
    bs_buf_puts(b, ",\"successful_questions_per_second\":");
    put_d(b, p->wall_s > 0 ? (double)phase_questions(p) / p->wall_s : NAN);
    long changes = 0;
    for (size_t i = 0; i < p->n; i++) changes += p->s[i].answer_changed;
    bs_buf_printf(b, ",\"answer_changes_vs_first_success\":%ld,\"classes\":{", changes);
    int idx[BM_MAX_CLASSES], first = 1;
    bm_class_order(w, idx);
    for (int k = 0; k < w->n_classes; k++) {
        int c = idx[k];
        size_t n = 0;
        for (size_t i = 0; i < p->n; i++) n += p->s[i].cls == c;
        if (!n) continue;
        if (!first) bs_buf_putc(b, ',');
        first = 0;
        put_str(b, w->classes[c]);
        bs_buf_puts(b, ":{");
        put_counts(b, p, c);
        bs_buf_putc(b, '}');
    }
    /* our addition: token counters of the server's /metrics over the phase */
    bs_buf_puts(b, "},\"tokens\":");
    if (p->tokens_known) {
        bs_buf_puts(b, "{\"prompt\":");
        put_u(b, p->input_tokens);
        bs_buf_puts(b, ",\"computed\":");
        put_u(b, p->forward_tokens);
        bs_buf_puts(b, ",\"computed_over_prompt\":");
        put_d(b, p->input_tokens > 0 ? p->forward_tokens / p->input_tokens : NAN);
        bs_buf_putc(b, '}');
    } else {
        bs_buf_puts(b, "null");
    }
    bs_buf_printf(b, ",\"resources\":{\"samples\":%d,\"min_available_ram_bytes_sampled\":", p->n_samples);
    put_u(b, p->n_samples ? p->min_avail_bytes : NAN);
    bs_buf_puts(b, ",\"min_available_gpu_bytes_sampled\":null,\"max_process_gpu_allocated_bytes_sampled\":null,"
                   "\"lifetime_peak_rss_bytes\":");
    put_u(b, p->proc_known ? p->peak_rss_bytes : NAN);
    bs_buf_puts(b, ",\"mean_process_cpu_cores\":");
    put_d(b, p->proc_known && p->cpu_window_s > 0 ? p->cpu_used_s / p->cpu_window_s : NAN);
    bs_buf_puts(b, ",\"cpu_sample_window_s\":");
    put_d(b, p->proc_known && p->cpu_window_s > 0 ? p->cpu_window_s : NAN);
    bs_buf_puts(b, ",\"scope\":");
    put_str(b, r->started_server ? "the basal serve process started by the benchmark (the load generator is a separate "
                                   "process, not included); sampled memory, not allocation peaks"
                                 : "--url: the machine's memory only; the server's process is not sampled");
    bs_buf_puts(b, "},\"per_request\":[");
    for (size_t i = 0; i < p->n; i++) {
        const bm_sample *s = &p->s[i];
        bs_buf_puts(b, i ? ",{\"id\":" : "{\"id\":");
        put_str(b, s->id);
        bs_buf_puts(b, ",\"class\":");
        put_str(b, w->classes[s->cls]);
        bs_buf_printf(b, ",\"payload_bytes\":%zu,\"input_tokens\":", s->payload_bytes);
        if (s->input_tokens >= 0) bs_buf_printf(b, "%ld", s->input_tokens);
        else bs_buf_puts(b, "null");
        bs_buf_printf(b, ",\"questions\":%d,\"latency_ms\":", s->questions);
        put_d(b, s->lat_ms);
        bs_buf_puts(b, ",\"status\":");
        if (s->status) bs_buf_printf(b, "%d", s->status);
        else bs_buf_puts(b, "null");
        bs_buf_puts(b, ",\"error\":");
        put_str(b, s->error ? bm_error_names[s->error] : NULL);
        bs_buf_puts(b, ",\"queue_ms\":");
        put_d(b, s->queue_ms >= 0 ? s->queue_ms : NAN);
        bs_buf_puts(b, ",\"batch_compute_ms\":");
        put_d(b, s->compute_ms >= 0 ? s->compute_ms : NAN);
        bs_buf_puts(b, ",\"batch_requests\":");
        if (s->batch > 0) bs_buf_printf(b, "%d", s->batch);
        else bs_buf_puts(b, "null");
        bs_buf_printf(b, ",\"answer_changed\":%s}", s->answer_changed ? "true" : "false");
    }
    bs_buf_puts(b, "]}");
}

static void put_workload(bs_buf *b, const bm_workload *w) {
    bs_buf_printf(b, "{\"source_requests\":%zu,\"requests\":%zu,\"skipped_requests\":%zu,\"skipped\":[",
                  w->source_requests, w->requests, w->n_skipped);
    for (size_t i = 0; i < w->n_skipped; i++) {
        bs_buf_puts(b, i ? ",{\"id\":" : "{\"id\":");
        put_str(b, w->skipped[i].id);
        bs_buf_puts(b, ",\"class\":");
        put_str(b, w->classes[w->skipped[i].cls]);
        bs_buf_puts(b, ",\"detail\":");
        bs_buf_puts(b, w->skipped[i].detail ? w->skipped[i].detail : "null");
        bs_buf_putc(b, '}');
    }
    bs_buf_printf(b, "],\"unique_payloads\":%zu,\"questions\":%zu,\"classes\":{", w->unique_payloads, w->questions);
    int idx[BM_MAX_CLASSES], first = 1;
    bm_class_order(w, idx);
    for (int k = 0; k < w->n_classes; k++) {
        if (!w->class_requests[idx[k]]) continue;
        if (!first) bs_buf_putc(b, ',');
        first = 0;
        put_str(b, w->classes[idx[k]]);
        bs_buf_printf(b, ":%zu", w->class_requests[idx[k]]);
    }
    bs_buf_puts(b, "},\"ordered_payloads_sha256\":");
    put_str(b, w->ordered_payloads_sha256);
    bs_buf_puts(b, ",\"payload_bytes\":");
    put_stats(b, bm_compute_stats(w->payload_bytes, w->requests));
    bs_buf_puts(b, ",\"input_tokens_both_orders\":");
    if (w->input_tokens) put_stats(b, bm_compute_stats(w->input_tokens, w->requests));
    else bs_buf_puts(b, "null");
    bs_buf_putc(b, '}');
}

void bm_write_json(const bm_report *r, bs_buf *b) {
    bs_buf_puts(b, "{\"schema_version\":2,\"runtime_version\":");
    put_str(b, r->version);
    bs_buf_puts(b, ",\"engine\":\"basal-c\",\"started_at\":");
    put_str(b, r->started_at);
    bs_buf_puts(b, ",\"status\":");
    put_str(b, r->status);
    bs_buf_printf(b, ",\"complete\":%s", r->complete ? "true" : "false");
    if (r->reason[0]) {
        bs_buf_puts(b, ",\"reason\":");
        put_str(b, r->reason);
    }
    bs_buf_puts(b, ",\"source\":");
    bs_buf_puts(b, r->source_json ? r->source_json : "null");
    bs_buf_puts(b, ",\"model\":{\"reference\":");
    put_str(b, r->model_ref);
    bs_buf_puts(b, ",\"name\":");
    put_str(b, r->model_name);
    bs_buf_puts(b, ",\"checkpoint_bytes\":");
    put_u(b, r->checkpoint_bytes > 0 ? r->checkpoint_bytes : NAN);
    bs_buf_puts(b, ",\"weights_sha256\":");
    bs_buf_puts(b, r->weights_sha256 ? r->weights_sha256 : "null");
    bs_buf_puts(b, ",\"resolved_revision\":null,\"load_s\":");
    put_d(b, r->load_s);
    bs_buf_puts(b, "},\"device\":{\"kind\":\"cpu\",\"cpu_model\":");
    put_str(b, r->cpu_model);
    bs_buf_printf(b, ",\"cpus\":%d,\"total_bytes\":", r->cpus);
    put_u(b, r->before.total_bytes);
    bs_buf_puts(b, ",\"kernel\":");
    put_str(b, r->kernel);
    bs_buf_puts(b, "},\"backend\":");
    put_str(b, r->backend[0] ? r->backend : NULL);
    bs_buf_puts(b, ",\"build\":{\"version\":");
    put_str(b, r->version);
    bs_buf_puts(b, ",\"compiler\":");
    put_str(b, r->compiler);
    bs_buf_puts(b, ",\"cflags\":");
    put_str(b, r->cflags);
    bs_buf_puts(b, "},\"server\":{\"url\":");
    put_str(b, r->url);
    bs_buf_printf(b, ",\"started_here\":%s,\"argv\":", r->started_server ? "true" : "false");
    put_str(b, r->server_argv);
    bs_buf_puts(b, "},\"settings\":");
    bs_buf_puts(b, r->settings_json ? r->settings_json : "null");
    bs_buf_puts(b, ",\"methodology\":{\"transport\":\"loopback HTTP /v1/systemone\",\"traffic\":\"closed_loop\","
                   "\"p99_method\":\"nearest_rank\",\"p50_method\":\"median\",");
    bs_buf_printf(b, "\"warmup_per_class\":%d,\"concurrency\":[", r->warmup);
    for (int i = 0; i < r->n_concurrency; i++) bs_buf_printf(b, "%s%d", i ? "," : "", r->concurrency[i]);
    bs_buf_printf(b, "],\"timeout_ms\":%d,\"max_requests\":", r->timeout_ms);
    if (r->max_requests > 0) bs_buf_printf(b, "%d", r->max_requests);
    else bs_buf_puts(b, "null");
    bs_buf_puts(b, ",\"client_latency_scope\":\"send request through complete response body; excludes JSON decode and "
                   "answer comparison\",\"batch_compute_scope\":\"the x-basal-compute-ms header: the whole batch the "
                   "request was part of (admission, packing, forwards), shared by its requests, not standalone "
                   "inference latency\",\"resource_sample_interval_ms\":200}");
    bs_buf_puts(b, ",\"workloads\":{");
    for (int i = 0; i < r->n_workloads; i++) {
        if (i) bs_buf_putc(b, ',');
        put_str(b, r->workloads[i].name);
        bs_buf_putc(b, ':');
        put_workload(b, &r->workloads[i]);
    }
    bs_buf_puts(b, "},\"phases\":[");
    for (int i = 0; i < r->n_phases; i++) {
        if (i) bs_buf_putc(b, ',');
        put_phase(b, r, &r->phases[i]);
    }
    bs_buf_puts(b, "],\"resources\":{\"before_load\":{\"total_bytes\":");
    put_u(b, r->before.total_bytes);
    bs_buf_puts(b, ",\"available_bytes\":");
    put_u(b, r->before.available_bytes);
    bs_buf_puts(b, ",\"swap_used_bytes\":");
    put_u(b, r->before.swap_used_bytes);
    bs_buf_puts(b, ",\"swap_out_bytes\":");
    put_u(b, r->before.swap_out_bytes);
    bs_buf_printf(b, ",\"pressure\":false,\"cgroup_limit_bytes\":null},\"checkpoints\":%d,"
                     "\"min_available_ram_bytes_sampled\":", r->guard_checks);
    put_u(b, r->min_avail_bytes);
    bs_buf_puts(b, ",\"min_available_gpu_bytes_sampled\":null,\"max_process_gpu_allocated_bytes_sampled\":null,"
                   "\"max_global_swap_growth_bytes\":");
    put_u(b, r->max_swap_growth_bytes);
    bs_buf_puts(b, ",\"ram_reserve_bytes\":");
    put_u(b, r->ram_reserve_bytes);
    bs_buf_puts(b, ",\"gpu_reserve_bytes\":");
    put_u(b, r->gpu_reserve_bytes);
    bs_buf_puts(b, ",\"swap_growth_limit_bytes\":");
    put_u(b, r->swap_limit_bytes);
    bs_buf_puts(b, "},\"limitations\":[");
    bs_buf_puts(b, "\"Closed-loop clients wait for replies; this measures concurrency and saturation, not independent "
                   "open-loop arrivals.\"");
    bs_buf_puts(b, ",\"The load generator runs on the same machine as the server and shares its CPUs.\"");
    bs_buf_puts(b, ",\"Memory is sampled, not a true allocation peak; reserve checks cannot prevent an OOM inside a "
                   "forward.\"");
    if (!r->weights_sha256)
        bs_buf_puts(b, ",\"The weights' SHA-256 is not computed (--url); checkpoint_bytes identifies their size only.\"");
    bs_buf_puts(b, ",\"No sustained thermal/power guarantee. Answer consistency is not upstream FP32 quality "
                   "validation.\"");
    if (!r->started_server)
        bs_buf_puts(b, ",\"--url: the server's process (RSS, CPU) is not sampled, its settings are not known here, and "
                       "requests over its context limit are not skipped beforehand (they count as HTTP 422 errors).\"");
    bs_buf_puts(b, "]}\n");
}

/* basal-rs's "{:.2}" of a value divided by a unit, or n/a */
static void put_disp(bs_buf *b, double v, double div) {
    if (isfinite(v)) bs_buf_printf(b, "%.2f", v / div);
    else bs_buf_puts(b, "n/a");
}

void bm_write_text(const bm_report *r, bs_buf *b) {
    bs_buf_printf(b, "benchmark: %s\n", r->status);
    /* workloads in name order, as basal-rs's report object lists them */
    for (int k = 0; k < 2; k++)
        for (int i = 0; i < r->n_workloads; i++) {
            const bm_workload *w = &r->workloads[i];
            if ((k == 0) != !strcmp(w->name, "mixed") || !w->n_skipped) continue;
            bs_buf_printf(b, "%s: skipped %zu requests exceeding the model context limit\n", w->name, w->n_skipped);
        }
    for (int i = 0; i < r->n_phases; i++) {
        const bm_phase *p = &r->phases[i];
        const bm_workload *w = &r->workloads[p->workload];
        bs_buf_printf(b, "%s / %d clients: %zu/%zu completed, %zu errors\n", w->name, p->concurrency, p->n, p->planned,
                      phase_errors(p, -1));
        bm_stats l = phase_stats(p, ST_LAT_OK, -1), q = phase_stats(p, ST_QUEUE, -1), c = phase_stats(p, ST_COMPUTE, -1);
        double rps = phase_rps(p);
        if (l.n && isfinite(rps))
            bs_buf_printf(b, "  HTTP: min %.2f ms, p50 %.2f ms, p99 %.2f ms; %.2f requests/s\n", l.min, l.p50, l.p99, rps);
        bs_buf_puts(b, "  p99: queue ");
        put_disp(b, q.n ? q.p99 : NAN, 1);
        bs_buf_puts(b, " ms, whole-batch compute ");
        put_disp(b, c.n ? c.p99 : NAN, 1);
        bs_buf_puts(b, " ms\n  sampled headroom: RAM ");
        put_disp(b, p->n_samples ? p->min_avail_bytes : NAN, 1073741824.0);
        bs_buf_puts(b, " GiB, GPU n/a GiB; CPU ");
        put_disp(b, p->proc_known && p->cpu_window_s > 0 ? p->cpu_used_s / p->cpu_window_s : NAN, 1);
        bs_buf_puts(b, " cores; lifetime peak RSS ");
        put_disp(b, p->proc_known ? p->peak_rss_bytes : NAN, 1073741824.0);
        bs_buf_puts(b, " GiB\n");
        int idx[BM_MAX_CLASSES];
        bm_class_order(w, idx);
        for (int k = 0; k < w->n_classes; k++) {
            bm_stats cl = phase_stats(p, ST_LAT_OK, idx[k]);
            if (!cl.n) continue;
            size_t n = 0;
            for (size_t j = 0; j < p->n; j++) n += p->s[j].cls == idx[k];
            bs_buf_printf(b, "  %s: p99 %.2f ms, %zu completed, %zu errors\n", w->classes[idx[k]], cl.p99, n,
                          phase_errors(p, idx[k]));
        }
    }
    bs_buf_puts(b, "Global swap growth: ");
    put_disp(b, r->max_swap_growth_bytes, 1048576.0);
    bs_buf_puts(b, " MiB\n");
    if (r->reason[0]) bs_buf_printf(b, "Reason: %s\n", r->reason);
}

/* ---- HTML ---- */

static const char *palette[] = {"#1b6ac9", "#d1495b", "#2a9d62", "#e08e0b", "#7b4fb5", "#4d4d4d"};

/* a "nice" upper bound for an axis: 1, 2, 2.5, 5 x 10^k at or above v */
static double nice_max(double v) {
    if (!(v > 0)) return 1;
    double e = pow(10, floor(log10(v)));
    const double steps[] = {1, 2, 2.5, 5, 10};
    for (int i = 0; i < 5; i++)
        if (steps[i] * e >= v) return steps[i] * e;
    return 10 * e;
}

#define CW 560
#define CH 300
#define ML 64
#define MR 16
#define MT 28
#define MB 48

static void chart_open(bs_buf *b, const char *id, const char *title, const char *ylabel, double ymax) {
    bs_buf_printf(b, "<figure><svg id=\"%s\" class=\"chart\" viewBox=\"0 0 %d %d\" width=\"%d\" height=\"%d\" "
                     "xmlns=\"http://www.w3.org/2000/svg\" role=\"img\"><title>", id, CW, CH, CW, CH);
    bs_buf_put_html(b, title);
    bs_buf_printf(b, "</title><text x=\"%d\" y=\"18\" class=\"ct\">", ML);
    bs_buf_put_html(b, title);
    bs_buf_puts(b, "</text>");
    for (int t = 0; t <= 5; t++) {
        double v = ymax * t / 5, y = CH - MB - (CH - MB - MT) * t / 5.0;
        bs_buf_printf(b, "<line x1=\"%d\" x2=\"%d\" y1=\"%.1f\" y2=\"%.1f\" class=\"grid\"/>"
                         "<text x=\"%d\" y=\"%.1f\" class=\"yt\">%g</text>", ML, CW - MR, y, y, ML - 6, y + 4, v);
    }
    bs_buf_printf(b, "<text transform=\"translate(14 %d) rotate(-90)\" class=\"al\">", (CH - MB + MT) / 2);
    bs_buf_put_html(b, ylabel);
    bs_buf_puts(b, "</text>");
}

static double x_of(int i, int n) {
    if (n <= 1) return ML + (CW - ML - MR) / 2.0;
    return ML + 20 + (CW - ML - MR - 40) * (double)i / (n - 1);
}

/* Line chart over the union of concurrency levels. metric: 0 p50, 1 p95, 2 p99 latency, 3 req/s. */
static void line_chart(bs_buf *b, const bm_report *r, const char *id, const char *title, const char *ylabel,
                       const int *metrics, int n_metrics) {
    int levels[64], nl = 0;
    for (int i = 0; i < r->n_phases && nl < 64; i++) {
        int c = r->phases[i].concurrency, seen = 0;
        for (int k = 0; k < nl; k++) seen |= levels[k] == c;
        if (!seen) levels[nl++] = c;
    }
    for (int i = 1; i < nl; i++)  /* ascending */
        for (int k = i; k > 0 && levels[k - 1] > levels[k]; k--) {
            int t = levels[k];
            levels[k] = levels[k - 1];
            levels[k - 1] = t;
        }
    double *val = calloc((size_t)(r->n_phases * n_metrics + 1), sizeof *val);
    if (!val) return;
    double ymax = 0;
    for (int i = 0; i < r->n_phases; i++) {
        const bm_phase *p = &r->phases[i];
        bm_stats s = phase_stats(p, 1, -1);
        for (int m = 0; m < n_metrics; m++) {
            double v = metrics[m] == 0 ? s.p50 : metrics[m] == 1 ? s.p95 : metrics[m] == 2 ? s.p99
                     : (p->wall_s > 0 ? phase_rps(p) : 0);
            if (!s.n && metrics[m] < 3) v = NAN;
            val[i * n_metrics + m] = v;
            if (isfinite(v) && v > ymax) ymax = v;
        }
    }
    ymax = nice_max(ymax * 1.05);
    chart_open(b, id, title, ylabel, ymax);
    for (int k = 0; k < nl; k++)
        bs_buf_printf(b, "<text x=\"%.1f\" y=\"%d\" class=\"xt\">%d</text>", x_of(k, nl), CH - MB + 18, levels[k]);
    bs_buf_printf(b, "<text x=\"%d\" y=\"%d\" class=\"al\">concurrent clients</text>", (CW + ML) / 2, CH - 10);
    static const char *mname[] = {"p50", "p95", "p99", "req/s"};
    int series = 0;
    for (int w = 0; w < r->n_workloads; w++) {
        for (int m = 0; m < n_metrics; m++, series++) {
            const char *color = palette[series % 6];
            char name[96];
            snprintf(name, sizeof name, "%s %s", r->workloads[w].name, mname[metrics[m]]);
            bs_buf_puts(b, "<polyline class=\"series\" fill=\"none\" stroke-width=\"2\" stroke=\"");
            bs_buf_puts(b, color);
            bs_buf_puts(b, "\" points=\"");
            for (int k = 0; k < nl; k++)
                for (int i = 0; i < r->n_phases; i++) {
                    const bm_phase *p = &r->phases[i];
                    double v = val[i * n_metrics + m];
                    if (p->workload != w || p->concurrency != levels[k] || !isfinite(v)) continue;
                    bs_buf_printf(b, "%.1f,%.1f ", x_of(k, nl), CH - MB - (CH - MB - MT) * v / ymax);
                }
            bs_buf_puts(b, "\"/>");
            for (int k = 0; k < nl; k++)
                for (int i = 0; i < r->n_phases; i++) {
                    const bm_phase *p = &r->phases[i];
                    double v = val[i * n_metrics + m];
                    if (p->workload != w || p->concurrency != levels[k] || !isfinite(v)) continue;
                    bs_buf_printf(b, "<circle class=\"pt\" data-series=\"%s\" data-x=\"%d\" data-y=\"%.3f\" cx=\"%.1f\" "
                                     "cy=\"%.1f\" r=\"3.5\" fill=\"%s\"><title>%s, %d clients: %.2f</title></circle>",
                                  name, levels[k], v, x_of(k, nl), CH - MB - (CH - MB - MT) * v / ymax, color, name,
                                  levels[k], v);
                }
            int lx = ML + 8 + 130 * (series % 4), ly = MT + 6 + 14 * (series / 4);
            bs_buf_printf(b, "<rect x=\"%d\" y=\"%d\" width=\"10\" height=\"3\" fill=\"%s\"/>"
                             "<text x=\"%d\" y=\"%d\" class=\"lg\">%s</text>", lx, ly, color, lx + 14, ly + 4, name);
        }
    }
    bs_buf_puts(b, "</svg></figure>\n");
    free(val);
}

/* Histogram over every sample of every phase. which: 4 batch size, 2 queue ms. */
static void histogram(bs_buf *b, const bm_report *r, const char *id, const char *title, int which) {
    static const double batch_edges[] = {1, 2, 3, 5, 9, 17, 33, 65, INFINITY};
    static const char *batch_names[] = {"1", "2", "3-4", "5-8", "9-16", "17-32", "33-64", "65+"};
    static const double queue_edges[] = {0, 1, 2, 5, 10, 20, 50, 100, 200, 500, INFINITY};
    static const char *queue_names[] = {"<1", "1-2", "2-5", "5-10", "10-20", "20-50", "50-100", "100-200", "200-500", "500+"};
    const double *edges = which == 4 ? batch_edges : queue_edges;
    const char **names = which == 4 ? batch_names : queue_names;
    int nb = which == 4 ? 8 : 10;
    long counts[10] = {0}, total = 0;
    for (int i = 0; i < r->n_phases; i++)
        for (size_t k = 0; k < r->phases[i].n; k++) {
            const bm_sample *s = &r->phases[i].s[k];
            double v = which == 4 ? s->batch : s->queue_ms;
            if ((which == 4 && s->batch <= 0) || (which == 2 && s->queue_ms < 0)) continue;
            for (int j = 0; j < nb; j++)
                if (v >= edges[j] && v < edges[j + 1]) {
                    counts[j]++;
                    total++;
                    break;
                }
        }
    long cmax = 0;
    for (int j = 0; j < nb; j++)
        if (counts[j] > cmax) cmax = counts[j];
    double ymax = nice_max((double)cmax);
    chart_open(b, id, title, "requests", ymax);
    double slot = (CW - ML - MR) / (double)nb;
    for (int j = 0; j < nb; j++) {
        double h = (CH - MB - MT) * counts[j] / ymax, x = ML + slot * j + 4;
        bs_buf_printf(b, "<rect class=\"bar\" data-bin=\"%s\" data-count=\"%ld\" x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" "
                         "height=\"%.1f\" fill=\"%s\"><title>%s: %ld requests</title></rect>"
                         "<text x=\"%.1f\" y=\"%d\" class=\"xt\">%s</text>",
                      names[j], counts[j], x, CH - MB - h, slot - 8, h, palette[which == 4 ? 2 : 4], names[j], counts[j],
                      x + (slot - 8) / 2, CH - MB + 18, names[j]);
    }
    bs_buf_printf(b, "<text x=\"%d\" y=\"%d\" class=\"al\">%s (%ld requests, all phases)</text></svg></figure>\n",
                  (CW + ML) / 2, CH - 10, which == 4 ? "requests in the same batch" : "queue time, ms", total);
}

void bm_write_html(const bm_report *r, bs_buf *b) {
    bs_buf_puts(b, "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
                   "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">"
                   "<title>basal benchmark</title><style>\n"
                   "body{font-family:system-ui,-apple-system,'Segoe UI',sans-serif;margin:24px;color:#222;max-width:1200px}\n"
                   "h1{font-size:22px;margin:0 0 4px}h2{font-size:17px;margin:24px 0 8px}\n"
                   ".meta{color:#555;font-size:13px;line-height:1.5}\n"
                   ".charts{display:flex;flex-wrap:wrap;gap:12px}figure{margin:0;border:1px solid #ddd;border-radius:6px;background:#fff}\n"
                   ".grid{stroke:#e6e6e6}.yt{font-size:11px;text-anchor:end;fill:#555}.xt{font-size:11px;text-anchor:middle;fill:#555}\n"
                   ".al{font-size:12px;text-anchor:middle;fill:#333}.ct{font-size:14px;font-weight:600;fill:#222}.lg{font-size:11px;fill:#333}\n"
                   "table{border-collapse:collapse;font-size:12.5px}td,th{border-bottom:1px solid #e3e3e3;padding:4px 8px;text-align:right}\n"
                   "th{background:#f4f6f8}td:first-child,th:first-child{text-align:left}.bad{color:#b00020;font-weight:600}\n"
                   "</style></head><body>\n<h1>basal benchmark</h1><div class=\"meta\">");
    bs_buf_puts(b, "Model <b>");
    bs_buf_put_html(b, r->model_name);
    bs_buf_puts(b, "</b>");
    if (r->checkpoint_bytes > 0) bs_buf_printf(b, " (%.1f MiB of weights)", r->checkpoint_bytes / 1048576.0);
    bs_buf_puts(b, " &middot; server ");
    bs_buf_put_html(b, r->started_server ? "started on loopback by the benchmark" : r->url);
    bs_buf_puts(b, " &middot; status <b>");
    bs_buf_put_html(b, r->status);
    bs_buf_puts(b, "</b>");
    if (r->reason[0]) {
        bs_buf_puts(b, " (");
        bs_buf_put_html(b, r->reason);
        bs_buf_puts(b, ")");
    }
    if (r->backend[0]) {
        bs_buf_puts(b, "<br>backend ");
        bs_buf_put_html(b, r->backend);
    }
    bs_buf_puts(b, "<br>CPU ");
    bs_buf_put_html(b, r->cpu_model);
    bs_buf_printf(b, " &middot; %d CPUs &middot; %.1f GiB RAM &middot; ", r->cpus, r->before.total_bytes / 1073741824.0);
    bs_buf_put_html(b, r->kernel);
    bs_buf_puts(b, "<br>basal-c ");
    bs_buf_put_html(b, r->version);
    bs_buf_puts(b, ", ");
    bs_buf_put_html(b, r->compiler);
    bs_buf_puts(b, " &middot; started ");
    bs_buf_put_html(b, r->started_at);
    bs_buf_printf(b, " &middot; warm-up %d request(s) per class &middot; closed loop, latency from send to full body, "
                     "p50 the median, p95/p99 by nearest rank</div>\n", r->warmup);
    bs_buf_puts(b, "<h2>Latency and throughput</h2><div class=\"charts\">\n");
    int lat[] = {0, 1, 2}, thr[] = {3};
    line_chart(b, r, "latency", "Latency percentiles vs concurrency (successful requests)", "ms", lat, 3);
    line_chart(b, r, "throughput", "Throughput vs concurrency", "requests / s", thr, 1);
    bs_buf_puts(b, "</div><h2>Batching and queueing</h2><div class=\"charts\">\n");
    histogram(b, r, "batch", "Batch size distribution (x-basal-batch-requests)", 4);
    histogram(b, r, "queue", "Queue time distribution (x-basal-queue-ms)", 2);
    bs_buf_puts(b, "</div><h2>Phases</h2><table><tr><th>workload</th><th>clients</th><th>requests</th><th>ok</th>"
                   "<th>errors</th><th>529</th><th>p50 ms</th><th>p95 ms</th><th>p99 ms</th><th>max ms</th><th>req/s</th>"
                   "<th>decisions/s</th><th>computed / prompt tokens</th><th>p99 queue ms</th><th>lifetime peak RSS MiB</th>"
                   "<th>CPU cores</th></tr>\n");
    for (int i = 0; i < r->n_phases; i++) {
        const bm_phase *p = &r->phases[i];
        bm_stats l = phase_stats(p, ST_LAT_OK, -1), q = phase_stats(p, ST_QUEUE, -1);
        size_t errors = phase_errors(p, -1), over = 0;
        for (size_t k = 0; k < p->n; k++) over += p->s[k].status == 529;
        bs_buf_puts(b, "<tr class=\"phase\"><td>");
        bs_buf_put_html(b, r->workloads[p->workload].name);
        bs_buf_printf(b, "</td><td>%d</td><td>%zu</td><td>%zu</td><td%s>%zu</td><td>%zu</td>", p->concurrency,
                      p->planned, p->n, errors ? " class=\"bad\"" : "", errors, over);
        if (l.n) bs_buf_printf(b, "<td>%.1f</td><td>%.1f</td><td>%.1f</td><td>%.1f</td>", l.p50, l.p95, l.p99, l.max);
        else bs_buf_puts(b, "<td>-</td><td>-</td><td>-</td><td>-</td>");
        bs_buf_printf(b, "<td>%.2f</td><td>%.2f</td>", p->wall_s > 0 ? phase_rps(p) : 0,
                      p->wall_s > 0 ? phase_questions(p) / p->wall_s : 0);
        if (p->tokens_known && p->input_tokens > 0)
            bs_buf_printf(b, "<td>%.0f / %.0f (%.2f)</td>", p->forward_tokens, p->input_tokens,
                          p->forward_tokens / p->input_tokens);
        else
            bs_buf_puts(b, "<td>-</td>");
        if (q.n) bs_buf_printf(b, "<td>%.1f</td>", q.p99);
        else bs_buf_puts(b, "<td>-</td>");
        if (p->proc_known && p->cpu_window_s > 0)
            bs_buf_printf(b, "<td>%.0f</td><td>%.2f</td>", p->peak_rss_bytes / 1048576.0, p->cpu_used_s / p->cpu_window_s);
        else
            bs_buf_puts(b, "<td>-</td><td>-</td>");
        bs_buf_puts(b, "</tr>\n");
    }
    bs_buf_puts(b, "</table>\n<p class=\"meta\">Workloads: ");
    for (int i = 0; i < r->n_workloads; i++) {
        const bm_workload *w = &r->workloads[i];
        bs_buf_puts(b, i ? "; <b>" : "<b>");
        bs_buf_put_html(b, w->name);
        bs_buf_printf(b, "</b> %zu requests, %zu questions, %zu unique payloads", w->requests, w->questions,
                      w->unique_payloads);
        if (w->n_skipped) bs_buf_printf(b, ", %zu over the context limit skipped", w->n_skipped);
    }
    bs_buf_puts(b, ". Answers of every request compared with the first successful answer to the same payload: ");
    long changes = 0;
    for (int i = 0; i < r->n_phases; i++)
        for (size_t k = 0; k < r->phases[i].n; k++) changes += r->phases[i].s[k].answer_changed;
    bs_buf_printf(b, "<b>%ld change%s</b>.</p>\n</body></html>\n", changes, changes == 1 ? "" : "s");
}
