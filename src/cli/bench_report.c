/* `basal benchmark` reports: JSON (bench/benchmark-report.schema.json), text,
 * and a self-contained HTML page (inline CSS and SVG, no script, no network
 * asset) that a person can read at a glance. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/bench_report.h"
#include "core/pyjson.h"

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
    s.p50 = nearest_rank(c, n, 50);
    s.p95 = nearest_rank(c, n, 95);
    s.p99 = nearest_rank(c, n, 99);
    s.mean = sum / (double)n;
    free(c);
    return s;
}

static void put_num(bs_buf *b, double x) {
    if (!isfinite(x)) bs_buf_puts(b, "null");
    else bs_buf_printf(b, "%.4f", x);
}

static void put_str(bs_buf *b, const char *s) {
    if (!s) bs_buf_puts(b, "null");
    else bj_put_string(b, s, strlen(s));
}

static void put_stats(bs_buf *b, bm_stats s) {
    bs_buf_printf(b, "{\"n\":%zu", s.n);
    const char *names[] = {"min", "p50", "p95", "p99", "max", "mean"};
    double vals[] = {s.min, s.p50, s.p95, s.p99, s.max, s.mean};
    for (int i = 0; i < 6; i++) {
        bs_buf_printf(b, ",\"%s\":", names[i]);
        if (s.n) put_num(b, vals[i]);
        else bs_buf_puts(b, "null");
    }
    bs_buf_putc(b, '}');
}

/* Statistics of one field of a phase's samples; which: 0 latency (all), 1 latency of
 * 200s, 2 queue, 3 compute, 4 batch size; cls >= 0 restricts to a class. */
static bm_stats phase_stats(const bm_phase *p, int which, int cls) {
    double *v = malloc((p->n ? p->n : 1) * sizeof *v);
    size_t k = 0;
    if (!v) return (bm_stats){0};
    for (size_t i = 0; i < p->n; i++) {
        const bm_sample *s = &p->s[i];
        if (cls >= 0 && s->cls != cls) continue;
        switch (which) {
        case 0: v[k++] = s->lat_ms; break;
        case 1: if (s->status == 200) v[k++] = s->lat_ms; break;
        case 2: if (s->queue_ms >= 0) v[k++] = s->queue_ms; break;
        case 3: if (s->compute_ms >= 0) v[k++] = s->compute_ms; break;
        case 4: if (s->batch > 0) v[k++] = s->batch; break;
        }
    }
    bm_stats st = bm_compute_stats(v, k);
    free(v);
    return st;
}

static long phase_questions(const bm_phase *p) {
    long q = 0;
    for (size_t i = 0; i < p->n; i++) q += p->s[i].questions;
    return q;
}

static void put_phase(bs_buf *b, const bm_report *r, const bm_phase *p) {
    const bm_workload *w = &r->workloads[p->workload];
    bs_buf_puts(b, "{\"workload\":");
    put_str(b, w->name);
    bs_buf_printf(b, ",\"concurrency\":%d,\"requests\":%zu,\"completed\":%ld,\"errors\":%ld,\"overloaded_529\":%ld,"
                     "\"transport_errors\":%ld,\"invalid_responses\":%ld,\"skipped_too_long\":%ld,\"statuses\":{",
                  p->concurrency, p->n, p->completed, p->errors, p->overloaded, p->transport, p->invalid,
                  p->skipped_too_long);
    for (int i = 0; i < p->n_codes; i++) bs_buf_printf(b, "%s\"%d\":%ld", i ? "," : "", p->codes[i], p->code_counts[i]);
    bs_buf_puts(b, "},\"stop_reason\":");
    put_str(b, p->stop_reason[0] ? p->stop_reason : NULL);
    bs_buf_puts(b, ",\"wall_s\":");
    put_num(b, p->wall_s);
    long q = phase_questions(p);
    bs_buf_puts(b, ",\"successful_requests_per_second\":");
    put_num(b, p->wall_s > 0 ? p->completed / p->wall_s : NAN);
    bs_buf_puts(b, ",\"successful_questions_per_second\":");
    put_num(b, p->wall_s > 0 ? q / p->wall_s : NAN);
    bs_buf_printf(b, ",\"questions_answered\":%ld", q);
    bs_buf_puts(b, ",\"latency_ms\":");
    put_stats(b, phase_stats(p, 0, -1));
    bs_buf_puts(b, ",\"successful_latency_ms\":");
    put_stats(b, phase_stats(p, 1, -1));
    bs_buf_puts(b, ",\"queue_ms\":");
    put_stats(b, phase_stats(p, 2, -1));
    bs_buf_puts(b, ",\"batch_compute_ms\":");
    put_stats(b, phase_stats(p, 3, -1));
    bs_buf_puts(b, ",\"batch_requests\":");
    put_stats(b, phase_stats(p, 4, -1));
    double payload = 0;
    for (size_t i = 0; i < p->n; i++) payload += p->s[i].payload_bytes;
    bs_buf_printf(b, ",\"payload_bytes\":{\"total\":%.0f,\"mean\":", payload);
    put_num(b, p->n ? payload / (double)p->n : NAN);
    bs_buf_puts(b, "},\"tokens\":");
    if (p->tokens_known) {
        bs_buf_puts(b, "{\"prompt\":");
        put_num(b, p->input_tokens);
        bs_buf_puts(b, ",\"computed\":");
        put_num(b, p->forward_tokens);
        bs_buf_puts(b, ",\"computed_over_prompt\":");
        put_num(b, p->input_tokens > 0 ? p->forward_tokens / p->input_tokens : NAN);
        bs_buf_putc(b, '}');
    } else {
        bs_buf_puts(b, "null");
    }
    bs_buf_printf(b, ",\"answer_changes_vs_first_success\":%ld,\"per_class\":[", p->answer_changes);
    int first = 1;
    for (int c = 0; c < w->n_classes; c++) {
        long n = 0, done = 0;
        for (size_t i = 0; i < p->n; i++)
            if (p->s[i].cls == c) {
                n++;
                done += p->s[i].status == 200;
            }
        if (!n) continue;
        bs_buf_puts(b, first ? "{\"class\":" : ",{\"class\":");
        first = 0;
        put_str(b, w->classes[c]);
        bs_buf_printf(b, ",\"requests\":%ld,\"completed\":%ld,\"latency_ms\":", n, done);
        put_stats(b, phase_stats(p, 0, c));
        bs_buf_puts(b, ",\"queue_ms\":");
        put_stats(b, phase_stats(p, 2, c));
        bs_buf_putc(b, '}');
    }
    bs_buf_printf(b, "],\"resources\":{\"samples\":%d,\"min_available_mib\":", p->n_samples);
    put_num(b, p->n_samples ? p->min_avail_mib : NAN);
    bs_buf_puts(b, ",\"peak_rss_mib\":");
    put_num(b, p->rss_known ? p->peak_rss_mib : NAN);
    bs_buf_puts(b, ",\"mean_cpu_cores\":");
    put_num(b, p->rss_known ? p->mean_cpu_cores : NAN);
    bs_buf_puts(b, ",\"swap_growth_mib\":");
    put_num(b, p->n_samples ? p->swap_growth_mib : NAN);
    bs_buf_puts(b, "},\"samples\":[");
    for (size_t i = 0; i < p->n; i++) {
        const bm_sample *s = &p->s[i];
        bs_buf_printf(b, "%s[%.3f,%d,", i ? "," : "", s->lat_ms, s->status);
        if (s->queue_ms >= 0) bs_buf_printf(b, "%.3f", s->queue_ms);
        else bs_buf_puts(b, "null");
        if (s->batch > 0) bs_buf_printf(b, ",%d,%d]", s->batch, s->cls);
        else bs_buf_printf(b, ",null,%d]", s->cls);
    }
    bs_buf_puts(b, "]}");
}

void bm_write_json(const bm_report *r, bs_buf *b) {
    bs_buf_puts(b, "{\"schema_version\":1,\"kind\":\"basal-c benchmark\",\"started_at\":");
    put_str(b, r->started_at);
    bs_buf_puts(b, ",\"machine\":{\"cpu_model\":");
    put_str(b, r->cpu_model);
    bs_buf_printf(b, ",\"cpus\":%d,\"mem_total_gib\":", r->cpus);
    put_num(b, r->mem_total_gib);
    bs_buf_puts(b, ",\"kernel\":");
    put_str(b, r->kernel);
    bs_buf_puts(b, "},\"build\":{\"version\":");
    put_str(b, r->version);
    bs_buf_puts(b, ",\"compiler\":");
    put_str(b, r->compiler);
    bs_buf_puts(b, ",\"cflags\":");
    put_str(b, r->cflags);
    bs_buf_puts(b, "},\"server\":{\"url\":");
    put_str(b, r->url);
    bs_buf_printf(b, ",\"started_here\":%s,\"argv\":", r->started_server ? "true" : "false");
    put_str(b, r->server_argv);
    bs_buf_puts(b, ",\"load_s\":");
    put_num(b, r->started_server ? r->load_s : NAN);
    bs_buf_puts(b, "},\"model\":{\"name\":");
    put_str(b, r->model_name);
    bs_buf_puts(b, ",\"path\":");
    put_str(b, r->model_path);
    bs_buf_puts(b, ",\"checkpoint_bytes\":");
    if (r->checkpoint_bytes > 0) bs_buf_printf(b, "%.0f", r->checkpoint_bytes);
    else bs_buf_puts(b, "null");
    bs_buf_puts(b, "},\"settings\":{\"concurrency\":[");
    for (int i = 0; i < r->n_concurrency; i++) bs_buf_printf(b, "%s%d", i ? "," : "", r->concurrency[i]);
    bs_buf_printf(b, "],\"warmup\":%d,\"timeout_ms\":%d,\"max_requests\":", r->warmup, r->timeout_ms);
    if (r->max_requests > 0) bs_buf_printf(b, "%d", r->max_requests);
    else bs_buf_puts(b, "null");
    bs_buf_puts(b, ",\"ram_reserve_gib\":");
    put_num(b, r->ram_reserve_gib);
    bs_buf_puts(b, "},\"workloads\":[");
    for (int i = 0; i < r->n_workloads; i++) {
        const bm_workload *w = &r->workloads[i];
        bs_buf_puts(b, i ? ",{\"name\":" : "{\"name\":");
        put_str(b, w->name);
        bs_buf_puts(b, ",\"path\":");
        put_str(b, w->path);
        bs_buf_printf(b, ",\"requests\":%zu,\"questions\":%zu,\"unique_payloads\":%zu,\"skipped_too_long\":%ld,\"classes\":[",
                      w->requests, w->questions, w->unique_payloads, w->skipped_too_long);
        for (int c = 0; c < w->n_classes; c++) {
            if (c) bs_buf_putc(b, ',');
            put_str(b, w->classes[c]);
        }
        bs_buf_puts(b, "]}");
    }
    bs_buf_puts(b, "],\"phases\":[");
    for (int i = 0; i < r->n_phases; i++) {
        if (i) bs_buf_putc(b, ',');
        put_phase(b, r, &r->phases[i]);
    }
    bs_buf_puts(b, "],\"limitations\":[");
    bs_buf_puts(b, "\"closed loop: each of the concurrency clients sends its next request when its previous answer has arrived\"");
    bs_buf_puts(b, ",\"the load generator runs on the same machine as the server and shares its CPUs\"");
    bs_buf_puts(b, ",\"the weights' SHA-256 is not computed; checkpoint_bytes identifies the size only\"");
    if (!r->started_server) bs_buf_puts(b, ",\"--url: server process resources (RSS, CPU) are not sampled, only the machine's memory\"");
    bs_buf_puts(b, "]}\n");
}

void bm_write_text(const bm_report *r, bs_buf *b) {
    for (int i = 0; i < r->n_phases; i++) {
        const bm_phase *p = &r->phases[i];
        bm_stats l = phase_stats(p, 0, -1), q = phase_stats(p, 2, -1), c = phase_stats(p, 3, -1);
        bs_buf_printf(b, "%-10s c=%-3d n=%-5zu HTTP min %.1f p50 %.1f p99 %.1f ms; %.2f req/s, %.2f decisions/s; "
                         "p99 queue %.1f ms; p50 batch compute %.1f ms; errors %ld (529: %ld)%s%s\n",
                      r->workloads[p->workload].name, p->concurrency, p->n, l.min, l.p50, l.p99,
                      p->wall_s > 0 ? p->completed / p->wall_s : 0, p->wall_s > 0 ? phase_questions(p) / p->wall_s : 0,
                      q.p99, c.p50, p->errors, p->overloaded, p->stop_reason[0] ? "; stopped: " : "", p->stop_reason);
    }
}

/* ---- HTML ---- */

static void html_text(bs_buf *b, const char *s) {
    for (; s && *s; s++) {
        switch (*s) {
        case '<': bs_buf_puts(b, "&lt;"); break;
        case '>': bs_buf_puts(b, "&gt;"); break;
        case '&': bs_buf_puts(b, "&amp;"); break;
        case '"': bs_buf_puts(b, "&quot;"); break;
        default: bs_buf_putc(b, *s);
        }
    }
}

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
    html_text(b, title);
    bs_buf_printf(b, "</title><text x=\"%d\" y=\"18\" class=\"ct\">", ML);
    html_text(b, title);
    bs_buf_puts(b, "</text>");
    for (int t = 0; t <= 5; t++) {
        double v = ymax * t / 5, y = CH - MB - (CH - MB - MT) * t / 5.0;
        bs_buf_printf(b, "<line x1=\"%d\" x2=\"%d\" y1=\"%.1f\" y2=\"%.1f\" class=\"grid\"/>"
                         "<text x=\"%d\" y=\"%.1f\" class=\"yt\">%g</text>", ML, CW - MR, y, y, ML - 6, y + 4, v);
    }
    bs_buf_printf(b, "<text transform=\"translate(14 %d) rotate(-90)\" class=\"al\">", (CH - MB + MT) / 2);
    html_text(b, ylabel);
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
                     : (p->wall_s > 0 ? p->completed / p->wall_s : 0);
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
    html_text(b, r->model_name);
    bs_buf_puts(b, "</b>");
    if (r->checkpoint_bytes > 0) bs_buf_printf(b, " (%.1f MiB of weights)", r->checkpoint_bytes / 1048576.0);
    bs_buf_puts(b, " &middot; server ");
    html_text(b, r->started_server ? "started on loopback by the benchmark" : r->url);
    bs_buf_puts(b, "<br>CPU ");
    html_text(b, r->cpu_model);
    bs_buf_printf(b, " &middot; %d CPUs &middot; %.1f GiB RAM &middot; ", r->cpus, r->mem_total_gib);
    html_text(b, r->kernel);
    bs_buf_puts(b, "<br>basal-c ");
    html_text(b, r->version);
    bs_buf_puts(b, ", ");
    html_text(b, r->compiler);
    bs_buf_puts(b, " &middot; started ");
    html_text(b, r->started_at);
    bs_buf_printf(b, " &middot; warm-up %d request(s) per class &middot; closed loop, latency from send to full body, "
                     "percentiles by nearest rank</div>\n", r->warmup);
    bs_buf_puts(b, "<h2>Latency and throughput</h2><div class=\"charts\">\n");
    int lat[] = {0, 1, 2}, thr[] = {3};
    line_chart(b, r, "latency", "Latency percentiles vs concurrency (successful requests)", "ms", lat, 3);
    line_chart(b, r, "throughput", "Throughput vs concurrency", "requests / s", thr, 1);
    bs_buf_puts(b, "</div><h2>Batching and queueing</h2><div class=\"charts\">\n");
    histogram(b, r, "batch", "Batch size distribution (x-basal-batch-requests)", 4);
    histogram(b, r, "queue", "Queue time distribution (x-basal-queue-ms)", 2);
    bs_buf_puts(b, "</div><h2>Phases</h2><table><tr><th>workload</th><th>clients</th><th>requests</th><th>ok</th>"
                   "<th>errors</th><th>529</th><th>p50 ms</th><th>p95 ms</th><th>p99 ms</th><th>max ms</th><th>req/s</th>"
                   "<th>decisions/s</th><th>computed / prompt tokens</th><th>p99 queue ms</th><th>peak RSS MiB</th>"
                   "<th>CPU cores</th></tr>\n");
    for (int i = 0; i < r->n_phases; i++) {
        const bm_phase *p = &r->phases[i];
        bm_stats l = phase_stats(p, 1, -1), q = phase_stats(p, 2, -1);
        bs_buf_puts(b, "<tr class=\"phase\"><td>");
        html_text(b, r->workloads[p->workload].name);
        bs_buf_printf(b, "</td><td>%d</td><td>%zu</td><td>%ld</td><td%s>%ld</td><td>%ld</td>", p->concurrency, p->n,
                      p->completed, p->errors ? " class=\"bad\"" : "", p->errors, p->overloaded);
        if (l.n) bs_buf_printf(b, "<td>%.1f</td><td>%.1f</td><td>%.1f</td><td>%.1f</td>", l.p50, l.p95, l.p99, l.max);
        else bs_buf_puts(b, "<td>-</td><td>-</td><td>-</td><td>-</td>");
        bs_buf_printf(b, "<td>%.2f</td><td>%.2f</td>", p->wall_s > 0 ? p->completed / p->wall_s : 0,
                      p->wall_s > 0 ? phase_questions(p) / p->wall_s : 0);
        if (p->tokens_known && p->input_tokens > 0)
            bs_buf_printf(b, "<td>%.0f / %.0f (%.2f)</td>", p->forward_tokens, p->input_tokens,
                          p->forward_tokens / p->input_tokens);
        else
            bs_buf_puts(b, "<td>-</td>");
        if (q.n) bs_buf_printf(b, "<td>%.1f</td>", q.p99);
        else bs_buf_puts(b, "<td>-</td>");
        if (p->rss_known) bs_buf_printf(b, "<td>%.0f</td><td>%.2f</td>", p->peak_rss_mib, p->mean_cpu_cores);
        else bs_buf_puts(b, "<td>-</td><td>-</td>");
        bs_buf_puts(b, "</tr>\n");
    }
    bs_buf_puts(b, "</table>\n<p class=\"meta\">Workloads: ");
    for (int i = 0; i < r->n_workloads; i++) {
        const bm_workload *w = &r->workloads[i];
        bs_buf_puts(b, i ? "; <b>" : "<b>");
        html_text(b, w->name);
        bs_buf_printf(b, "</b> %zu requests, %zu questions, %zu unique payloads (", w->requests, w->questions,
                      w->unique_payloads);
        html_text(b, w->path);
        bs_buf_puts(b, ")");
        if (w->skipped_too_long) bs_buf_printf(b, ", %ld over the context limit skipped", w->skipped_too_long);
    }
    bs_buf_puts(b, ". Answers of every request compared with its first successful answer: ");
    long changes = 0;
    for (int i = 0; i < r->n_phases; i++) changes += r->phases[i].answer_changes;
    bs_buf_printf(b, "<b>%ld change%s</b>.</p>\n</body></html>\n", changes, changes == 1 ? "" : "s");
}
