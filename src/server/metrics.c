/* The Prometheus registry of spec 02 §9: fixed metric families, series keyed
 * by endpoint / model index / status / lane, one mutex (a request touches it a
 * few times; contention is negligible next to a forward pass). */
#include "server/metrics.h"

#include <pthread.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "protocol/pyjson.h"

static const double SECONDS[] = { 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2,
                                  0.3, 0.5, 0.75, 1, 1.5, 2, 3, 5, 7.5, 10,
                                  15, 20, 30, 45, 60, 90, 120, 180, 300, 600 };
#define N_SECONDS (sizeof SECONDS / sizeof *SECONDS)
static const double BATCH[] = { 1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024 };
#define N_BATCH (sizeof BATCH / sizeof *BATCH)
#define MAX_BUCKETS N_SECONDS

static const char *const ENDPOINT[BS_N_ENDPOINTS] = { "/v1/systemone", "/v1/basal" };
static const char *const LANE[2] = { "main", "long" };
static const char *const OUTCOME[2] = { "success", "error" };

typedef struct {
    int used;
    uint64_t bucket[MAX_BUCKETS]; /* non-cumulative; summed when rendered */
    uint64_t count;
    double sum;
} hist;

static void hist_observe(hist *h, const double *bounds, size_t nb, double v) {
    h->used = 1;
    for (size_t i = 0; i < nb; i++)
        if (v <= bounds[i]) {
            h->bucket[i]++;
            break;
        }
    h->count++;
    h->sum += v;
}

typedef struct {
    int endpoint;
    size_t model;
    int status; /* 0 = cancelled */
    uint64_t requests;
    hist duration;
} http_series;

typedef struct {
    int64_t admitted;
    uint64_t input_tokens, output_tokens, questions;
    hist queue[2];
    hist batch_duration[2][2];
    hist batch_requests[2];
} model_series;

struct bs_metrics {
    pthread_mutex_t mu;
    char **names;
    size_t n_models;
    long max_inflight;
    int64_t http_inflight[BS_N_ENDPOINTS];
    http_series *http;
    size_t n_http, cap_http;
    model_series *models;
};

static http_series *http_get(bs_metrics *m, int ep, size_t model, int status) {
    for (size_t i = 0; i < m->n_http; i++) {
        http_series *s = &m->http[i];
        if (s->endpoint == ep && s->model == model && s->status == status) return s;
    }
    if (m->n_http == m->cap_http) {
        size_t nc = m->cap_http ? m->cap_http * 2 : 16;
        http_series *n = realloc(m->http, nc * sizeof *n);
        if (!n) return NULL;
        m->http = n;
        m->cap_http = nc;
    }
    http_series *s = &m->http[m->n_http++];
    memset(s, 0, sizeof *s);
    s->endpoint = ep;
    s->model = model;
    s->status = status;
    return s;
}

bs_metrics *bs_metrics_create(const char *const *names, size_t n, long max_inflight) {
    bs_metrics *m = calloc(1, sizeof *m);
    if (!m) return NULL;
    pthread_mutex_init(&m->mu, NULL);
    m->max_inflight = max_inflight;
    m->names = calloc(n ? n : 1, sizeof *m->names);
    m->models = calloc(n ? n : 1, sizeof *m->models);
    if (!m->names || !m->models) goto fail;
    m->n_models = n;
    for (size_t i = 0; i < n; i++)
        if (!(m->names[i] = bs_strfmt("%s", names[i]))) goto fail;
    for (int ep = 0; ep < BS_N_ENDPOINTS; ep++)
        for (size_t i = 0; i < n; i++) {
            http_series *s = http_get(m, ep, i, 200);
            if (!s) goto fail;
            s->duration.used = 1;
        }
    return m;
fail:
    bs_metrics_destroy(m);
    return NULL;
}

void bs_metrics_destroy(bs_metrics *m) {
    if (!m) return;
    if (m->names)
        for (size_t i = 0; i < m->n_models; i++) free(m->names[i]);
    free(m->names);
    free(m->models);
    free(m->http);
    pthread_mutex_destroy(&m->mu);
    free(m);
}

void bs_metrics_http_begin(bs_metrics *m, int endpoint) {
    if (!m) return;
    pthread_mutex_lock(&m->mu);
    m->http_inflight[endpoint]++;
    pthread_mutex_unlock(&m->mu);
}

void bs_metrics_http_end(bs_metrics *m, int endpoint, size_t model, int status, double seconds) {
    if (!m) return;
    pthread_mutex_lock(&m->mu);
    m->http_inflight[endpoint]--;
    http_series *s = http_get(m, endpoint, model < m->n_models ? model : BS_METRICS_NO_MODEL, status);
    if (s) {
        s->requests++;
        if (status) hist_observe(&s->duration, SECONDS, N_SECONDS, seconds);
    }
    pthread_mutex_unlock(&m->mu);
}

void bs_metrics_admitted(bs_metrics *m, size_t model, int delta) {
    if (!m || model >= m->n_models) return;
    pthread_mutex_lock(&m->mu);
    m->models[model].admitted += delta;
    pthread_mutex_unlock(&m->mu);
}

void bs_metrics_usage(bs_metrics *m, size_t model, int64_t input_tokens, int64_t output_tokens, int64_t questions) {
    if (!m || model >= m->n_models) return;
    pthread_mutex_lock(&m->mu);
    model_series *s = &m->models[model];
    s->input_tokens += (uint64_t)(input_tokens > 0 ? input_tokens : 0);
    s->output_tokens += (uint64_t)(output_tokens > 0 ? output_tokens : 0);
    s->questions += (uint64_t)(questions > 0 ? questions : 0);
    pthread_mutex_unlock(&m->mu);
}

void bs_metrics_queue(bs_metrics *m, size_t model, int lane, double queue_ms) {
    if (!m || model >= m->n_models) return;
    pthread_mutex_lock(&m->mu);
    hist_observe(&m->models[model].queue[lane ? 1 : 0], SECONDS, N_SECONDS, queue_ms / 1e3);
    pthread_mutex_unlock(&m->mu);
}

void bs_metrics_batch(bs_metrics *m, size_t model, int lane, int requests, double compute_ms, int ok) {
    if (!m || model >= m->n_models || requests < 1) return;
    lane = lane ? 1 : 0;
    pthread_mutex_lock(&m->mu);
    model_series *s = &m->models[model];
    hist_observe(&s->batch_duration[lane][ok ? 0 : 1], SECONDS, N_SECONDS, compute_ms / 1e3);
    hist_observe(&s->batch_requests[lane], BATCH, N_BATCH, (double)requests);
    pthread_mutex_unlock(&m->mu);
}

/* ---- rendering ---- */

static void label_value(bs_buf *b, const char *s) {
    for (; *s; s++) {
        if (*s == '\\') bs_buf_puts(b, "\\\\");
        else if (*s == '"') bs_buf_puts(b, "\\\"");
        else if (*s == '\n') bs_buf_puts(b, "\\n");
        else bs_buf_putc(b, *s);
    }
}

static void family(bs_buf *b, const char *name, const char *type, const char *help) {
    bs_buf_printf(b, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
}

static void number(bs_buf *b, double v) {
    if (v == (double)(int64_t)v && v < 9e15 && v > -9e15) bs_buf_printf(b, "%lld", (long long)v);
    else bs_fmt_double_shortest(v, b);
}

/* labels: pre-rendered `k="v",k="v"` (may be empty). */
static void sample(bs_buf *b, const char *name, const char *suffix, const char *labels, double v) {
    bs_buf_printf(b, "%s%s", name, suffix);
    if (labels && *labels) bs_buf_printf(b, "{%s}", labels);
    bs_buf_putc(b, ' ');
    number(b, v);
    bs_buf_putc(b, '\n');
}

static void histogram(bs_buf *b, const char *name, const char *labels, const hist *h, const double *bounds, size_t nb) {
    uint64_t cum = 0;
    for (size_t i = 0; i <= nb; i++) {
        cum += i < nb ? h->bucket[i] : 0;
        bs_buf_printf(b, "%s_bucket{%s%sle=\"", name, labels, *labels ? "," : "");
        if (i < nb) bs_buf_printf(b, "%g", bounds[i]);
        else bs_buf_puts(b, "+Inf");
        bs_buf_printf(b, "\"} %llu\n", (unsigned long long)(i < nb ? cum : h->count));
    }
    sample(b, name, "_sum", labels, h->sum);
    sample(b, name, "_count", labels, (double)h->count);
}

static const char *model_name(const bs_metrics *m, size_t i) { return i < m->n_models ? m->names[i] : ""; }

static void http_labels(bs_buf *l, const bs_metrics *m, const http_series *s) {
    l->len = 0;
    if (l->data) l->data[0] = 0;
    bs_buf_printf(l, "endpoint=\"%s\",model=\"", ENDPOINT[s->endpoint]);
    label_value(l, model_name(m, s->model));
    if (s->status) bs_buf_printf(l, "\",status=\"%d\"", s->status);
    else bs_buf_puts(l, "\",status=\"cancelled\"");
}

static void model_labels(bs_buf *l, const bs_metrics *m, size_t i, int lane, int outcome) {
    l->len = 0;
    if (l->data) l->data[0] = 0;
    bs_buf_puts(l, "model=\"");
    label_value(l, model_name(m, i));
    bs_buf_putc(l, '"');
    if (lane >= 0) bs_buf_printf(l, ",lane=\"%s\"", LANE[lane]);
    if (outcome >= 0) bs_buf_printf(l, ",outcome=\"%s\"", OUTCOME[outcome]);
}

void bs_metrics_render(bs_metrics *m, const bs_metrics_engine *eng, const bs_metrics_dlog *dlog, bs_buf *b) {
    bs_buf l;
    bs_buf_init(&l);
    pthread_mutex_lock(&m->mu);
    const char *n = "basal_http_requests_total";
    family(b, n, "counter", "Inference HTTP requests completed by status, or cancelled when the handler future is dropped.");
    for (size_t i = 0; i < m->n_http; i++) {
        http_labels(&l, m, &m->http[i]);
        sample(b, n, "", l.data, (double)m->http[i].requests);
    }
    n = "basal_http_request_duration_seconds";
    family(b, n, "histogram",
           "Inference HTTP time from middleware entry through response construction, excluding cancellations.");
    for (size_t i = 0; i < m->n_http; i++) {
        if (!m->http[i].duration.used) continue;
        http_labels(&l, m, &m->http[i]);
        histogram(b, n, l.data, &m->http[i].duration, SECONDS, N_SECONDS);
    }
    n = "basal_http_inflight_requests";
    family(b, n, "gauge", "Active inference HTTP handlers, including body reads and validation.");
    for (int ep = 0; ep < BS_N_ENDPOINTS; ep++) {
        l.len = 0;
        bs_buf_printf(&l, "endpoint=\"%s\"", ENDPOINT[ep]);
        sample(b, n, "", l.data, (double)m->http_inflight[ep]);
    }
    n = "basal_model_inflight_requests";
    family(b, n, "gauge", "Admitted requests awaiting a model reply; disconnected handlers release their slot.");
    for (size_t i = 0; i < m->n_models; i++) {
        model_labels(&l, m, i, -1, -1);
        sample(b, n, "", l.data, (double)m->models[i].admitted);
    }
    n = "basal_max_inflight_requests";
    family(b, n, "gauge", "Configured admission limit across all models.");
    sample(b, n, "", "", (double)m->max_inflight);
    static const struct { const char *name, *help; size_t off; } usage[] = {
        { "basal_input_tokens_total", "Sum of usage.input_tokens from successfully constructed model responses.",
          offsetof(model_series, input_tokens) },
        { "basal_output_tokens_total",
          "Sum of usage.output_tokens from successfully constructed model responses (no generated text).",
          offsetof(model_series, output_tokens) },
        { "basal_questions_total", "Sum of usage.questions from successfully constructed model responses.",
          offsetof(model_series, questions) },
    };
    for (size_t u = 0; u < sizeof usage / sizeof *usage; u++) {
        family(b, usage[u].name, "counter", usage[u].help);
        for (size_t i = 0; i < m->n_models; i++) {
            model_labels(&l, m, i, -1, -1);
            uint64_t v;
            memcpy(&v, (const char *)&m->models[i] + usage[u].off, sizeof v);
            sample(b, usage[u].name, "", l.data, (double)v);
        }
    }
    n = "basal_queue_duration_seconds";
    family(b, n, "histogram", "Per-request time from handler arrival to batch admission, including planning.");
    for (size_t i = 0; i < m->n_models; i++)
        for (int lane = 0; lane < 2; lane++)
            if (m->models[i].queue[lane].used) {
                model_labels(&l, m, i, lane, -1);
                histogram(b, n, l.data, &m->models[i].queue[lane], SECONDS, N_SECONDS);
            }
    n = "basal_batch_duration_seconds";
    family(b, n, "histogram", "Wall time of batch admission and run_plans, including GPU gate waits, once per batch.");
    for (size_t i = 0; i < m->n_models; i++)
        for (int lane = 0; lane < 2; lane++)
            for (int o = 0; o < 2; o++)
                if (m->models[i].batch_duration[lane][o].used) {
                    model_labels(&l, m, i, lane, o);
                    histogram(b, n, l.data, &m->models[i].batch_duration[lane][o], SECONDS, N_SECONDS);
                }
    n = "basal_batch_requests";
    family(b, n, "histogram", "Number of requests admitted to each executed batch.");
    for (size_t i = 0; i < m->n_models; i++)
        for (int lane = 0; lane < 2; lane++)
            if (m->models[i].batch_requests[lane].used) {
                model_labels(&l, m, i, lane, -1);
                histogram(b, n, l.data, &m->models[i].batch_requests[lane], BATCH, N_BATCH);
            }
    n = "basal_forward_tokens_total";
    family(b, n, "counter",
           "Tokens computed by forward passes after prefix sharing and caches (compare with basal_input_tokens_total).");
    for (size_t i = 0; i < m->n_models; i++) {
        model_labels(&l, m, i, -1, -1);
        sample(b, n, "", l.data, eng ? (double)eng[i].forward_tokens : 0.0);
    }
    n = "basal_large_choice_rounds_total";
    family(b, n, "counter",
           "Choice questions with 11..255 options whose round 1 (groups) or round 2 (finalists) was computed.");
    for (size_t i = 0; i < m->n_models; i++)
        for (int round = 0; round < 2; round++) {
            model_labels(&l, m, i, -1, -1);
            bs_buf_printf(&l, ",round=\"%d\"", round + 1);
            sample(b, n, "", l.data, eng ? (double)eng[i].lc_rounds[round] : 0.0);
        }
    n = "basal_model_option_orders";
    family(b, n, "gauge", "Option orders asked per question: 2 (original and reversed, averaged) or 1 (original only).");
    for (size_t i = 0; i < m->n_models; i++) {
        if (!eng || !eng[i].orders) continue; /* still loading */
        model_labels(&l, m, i, -1, -1);
        sample(b, n, "", l.data, (double)eng[i].orders);
    }
    if (dlog) {
        family(b, "basal_decision_log_lines_total", "counter", "Decision log lines written whole.");
        sample(b, "basal_decision_log_lines_total", "", "", (double)dlog->lines);
        family(b, "basal_decision_log_dropped_total", "counter",
               "Answered requests left out of the decision log because its queue was full (the disk was too slow).");
        sample(b, "basal_decision_log_dropped_total", "", "", (double)dlog->dropped);
        family(b, "basal_decision_log_failed_total", "counter",
               "Decision log lines lost to a failed write (disk full, I/O error); the server kept answering.");
        sample(b, "basal_decision_log_failed_total", "", "", (double)dlog->failed);
    }
    pthread_mutex_unlock(&m->mu);
    if (l.oom) b->oom = 1;
    bs_buf_free(&l);
}
