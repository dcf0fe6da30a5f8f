/* The HTTP layer: libmicrohttpd with one internal polling thread (epoll) and
 * suspend/resume. Steps 1–7 of spec 02 §3 run on that thread; a decision
 * request is then submitted to its engine and its connection suspended, so
 * thousands of requests can wait without a thread each. The engine's done
 * callback (an engine thread) releases the in-flight slot and resumes the
 * connection; the polling thread, called again, sends the reply.
 *
 * Ownership: a connection context (conn_ctx) belongs to the connection; it is
 * freed only in the request-completed callback, which libmicrohttpd never
 * calls while the connection is suspended. The in-flight slot is released
 * exactly once (atomic exchange) by whichever comes first: the done callback,
 * the hang-up watcher, or an early reply. */
#include <errno.h>
#include <microhttpd.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include "core/respjson.h"
#include "server/metrics.h"
#include "server/server.h"
#include "server/server_int.h"

/* Idle keep-alive connections are closed after this long; a suspended
 * connection is not subject to it (the timer restarts on resume). */
#define IDLE_TIMEOUT_S 600
/* how long bs_server_destroy lets queued answers drain */
#define DRAIN_S 10

typedef struct bs_server bs_server;

typedef struct {
    char *name;
    char **aliases;
    size_t n_aliases;
    bs_engine *engine;
    bs_server *s;            /* for the engine's batch hook */
} model_t;

struct bs_server {
    struct MHD_Daemon *d;
    model_t *models;
    size_t n_models, default_model;
    long max_inflight;
    unsigned long long max_body;
    char *api_key;
    size_t api_key_len;
    int access_log;
    int metrics_on;
    bs_metrics *metrics;
    bs_watch *watch;
    bs_buf models_body, health_body;
    int listen_fd;
    atomic_long inflight;    /* admitted requests of all models (02 §6) */
    atomic_long live_ctx;    /* connection contexts not yet completed */
    atomic_int stopping;
    pthread_mutex_t mu;      /* guards pending and engines_closed; with idle for the shutdown waits */
    pthread_cond_t idle;     /* signalled when pending or live_ctx reaches 0 */
    long pending;            /* jobs submitted and not yet done */
    int engines_closed;
};

/* PH_REPLY: answered from the headers alone, sent on the final call so that
 * a request without a body keeps its keep-alive connection. */
enum { PH_REPLY, PH_READING, PH_WAITING, PH_DONE };

/* A response under construction. */
typedef struct {
    int status;
    bs_buf body;
    const char *ctype;
    const char *hdr[4][2];
    int nh;
    int timing;
    double queue_ms, compute_ms;
    int batch;
} reply_t;

typedef struct conn_ctx {
    bs_server *s;
    struct MHD_Connection *c;
    int endpoint;            /* BS_EP_*, or -1: not an inference route (not in the metrics) */
    bs_dialect dialect;
    double start_ms;         /* middleware entry: the request headers are in */
    bs_buf body;
    unsigned long long received;
    int too_large;
    atomic_int phase;
    size_t model;            /* BS_METRICS_NO_MODEL until routed */
    int admitted;            /* counted in basal_model_inflight_requests */
    atomic_int slot;         /* holds an in-flight slot */
    atomic_int gone;         /* the client hung up while the request waited */
    atomic_int recorded;     /* the request is in the metrics already */
    long watch_id;
    int job_live;
    bs_job job;
    reply_t early;           /* PH_REPLY */
} conn_ctx;

static void reply_init(reply_t *r, int status) {
    memset(r, 0, sizeof *r);
    r->status = status;
    r->ctype = "application/json";
    bs_buf_init(&r->body);
}

/* Starts r as the error reply built in e (core/reply.h), taking its body. */
static void reply_take(reply_t *r, bs_reply *e) {
    reply_init(r, e->status);
    r->body = e->body;
    bs_buf_init(&e->body);
}

static void reply_header(reply_t *r, const char *k, const char *v) {
    if (r->nh < 4) {
        r->hdr[r->nh][0] = k;
        r->hdr[r->nh][1] = v;
        r->nh++;
    }
}

static void release_slot(bs_server *s, conn_ctx *x) {
    if (atomic_exchange(&x->slot, 0)) {
        atomic_fetch_sub(&s->inflight, 1);
        if (x->admitted) bs_metrics_admitted(s->metrics, x->model, -1);
    }
}

static void record(bs_server *s, conn_ctx *x, int status) {
    if (x->endpoint >= 0 && !atomic_exchange(&x->recorded, 1))
        bs_metrics_http_end(s->metrics, x->endpoint, x->model, status, (bs_now_ms() - x->start_ms) / 1e3);
}

static void access_log(const char *method, const char *url, const reply_t *r, double ms) {
    if (r->timing)
        fprintf(stderr, "[%s] %d %s %.0f ms (queue %.0f ms, compute %.0f ms, batch %d)\n", method, r->status, url, ms,
                r->queue_ms, r->compute_ms, r->batch);
    else
        fprintf(stderr, "[%s] %d %s %.0f ms\n", method, r->status, url, ms);
}

/* Queues r (its body is handed to libmicrohttpd) and accounts for it. */
static enum MHD_Result send_reply(bs_server *s, struct MHD_Connection *c, conn_ctx *x, const char *method,
                                  const char *url, double start_ms, reply_t *r) {
    if (r->body.oom) {
        bs_buf_free(&r->body);
        bs_reply er;
        bs_reply_init(&er);
        bs_reply_fatal(&er, "out of memory");
        reply_take(r, &er);
    }
    struct MHD_Response *resp;
    if (r->body.len) {
        resp = MHD_create_response_from_buffer(r->body.len, r->body.data, MHD_RESPMEM_MUST_FREE);
        if (resp) bs_buf_init(&r->body);
    } else {
        resp = MHD_create_response_from_buffer(0, NULL, MHD_RESPMEM_PERSISTENT);
    }
    bs_buf_free(&r->body);
    if (!resp) return MHD_NO;
    char rid[33], qms[32], cms[32], nb[16];
    MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE, r->ctype);
    if (!strncmp(url, "/v1/", 4)) {
        bs_request_id(rid);
        MHD_add_response_header(resp, "x-typesafe-request-id", rid);
    }
    for (int i = 0; i < r->nh; i++) MHD_add_response_header(resp, r->hdr[i][0], r->hdr[i][1]);
    if (r->timing) {
        snprintf(qms, sizeof qms, "%.3f", r->queue_ms);
        snprintf(cms, sizeof cms, "%.3f", r->compute_ms);
        snprintf(nb, sizeof nb, "%d", r->batch);
        MHD_add_response_header(resp, "x-basal-queue-ms", qms);
        MHD_add_response_header(resp, "x-basal-compute-ms", cms);
        MHD_add_response_header(resp, "x-basal-batch-requests", nb);
    }
    /* Draining for shutdown: keep-alive clients must reconnect elsewhere. */
    if (atomic_load(&s->stopping)) MHD_add_response_header(resp, MHD_HTTP_HEADER_CONNECTION, "close");
    enum MHD_Result ok = MHD_queue_response(c, (unsigned)r->status, resp);
    MHD_destroy_response(resp);
    if (x) record(s, x, r->status);
    if (s->access_log) access_log(method, url, r, bs_now_ms() - start_ms);
    return ok;
}

static size_t find_model(const bs_server *s, const char *name, size_t len) {
    for (size_t i = 0; i < s->n_models; i++) {
        const model_t *m = &s->models[i];
        if (strlen(m->name) == len && !memcmp(m->name, name, len)) return i;
        for (size_t a = 0; a < m->n_aliases; a++)
            if (strlen(m->aliases[a]) == len && !memcmp(m->aliases[a], name, len)) return i;
    }
    return BS_METRICS_NO_MODEL;
}

/* ---- the engine's and the watcher's callbacks ---- */

static void on_batch(void *ctx, int lane, int requests, double compute_ms, int ok) {
    model_t *m = ctx;
    bs_metrics_batch(m->s->metrics, (size_t)(m - m->s->models), lane, requests, compute_ms, ok);
}

static void on_done(bs_job *job, void *arg) {
    conn_ctx *x = arg;
    bs_server *s = x->s;
    bs_watch_remove(s->watch, x->watch_id);
    release_slot(s, x);
    if (job->status == 200) {
        /* no generated text: output_tokens is always 0 (02 §4.6) */
        bs_metrics_usage(s->metrics, x->model, (int64_t)job->usage.input_tokens, 0, (int64_t)job->usage.questions);
        bs_metrics_queue(s->metrics, x->model, job->lane, job->queue_ms);
    }
    atomic_store(&x->phase, PH_DONE);
    pthread_mutex_lock(&s->mu);
    if (--s->pending == 0) pthread_cond_broadcast(&s->idle);
    pthread_mutex_unlock(&s->mu);
    /* The last touch of x on this thread: once resumed, the polling thread
     * may answer and free it. */
    MHD_resume_connection(x->c);
}

static void on_gone(void *arg) {
    conn_ctx *x = arg;
    atomic_store(&x->gone, 1);
    atomic_store(&x->job.cancelled, 1);
    release_slot(x->s, x);
    record(x->s, x, 0);
}

/* ---- the steps of 02 §3 ---- */

/* Steps 1–3, from the request line and headers. Returns 0 with *rep filled
 * when the answer is known already, 1 when the body must be read. */
static int headers_step(bs_server *s, struct MHD_Connection *c, const char *url, const char *method, bs_route r,
                        reply_t *rep) {
    const char *allow;
    bs_reply er;
    bs_reply_init(&er);
    if (r == R_NONE || (r == R_METRICS && !s->metrics_on)) {
        bs_reply_not_found(&er);
        reply_take(rep, &er);
        return 0;
    }
    if (bs_route_method_ok(r, method, &allow) < 0) {
        bs_reply_method(&er);
        reply_take(rep, &er);
        reply_header(rep, MHD_HTTP_HEADER_ALLOW, allow);
        return 0;
    }
    if (r == R_HEALTH) {
        reply_init(rep, 200);
        bs_buf_puts(&rep->body, s->health_body.data);
        return 0;
    }
    if (r == R_METRICS) {
        int64_t *fw = calloc(s->n_models, sizeof *fw);
        for (size_t i = 0; fw && i < s->n_models; i++) {
            bs_engine_stats st;
            bs_engine_get_stats(s->models[i].engine, &st);
            fw[i] = st.forward_tokens;
        }
        reply_init(rep, 200);
        rep->ctype = "text/plain; version=0.0.4";
        bs_metrics_render(s->metrics, fw, &rep->body);
        if (!fw) rep->body.oom = 1;
        free(fw);
        return 0;
    }
    bs_dialect d = r == R_BASAL ? BS_DIALECT_BASAL : BS_DIALECT_SYSTEMONE;
    if (s->api_key) {
        const char *h = MHD_lookup_connection_value(c, MHD_HEADER_KIND, MHD_HTTP_HEADER_AUTHORIZATION);
        int a = bs_auth_check(h, s->api_key, s->api_key_len);
        if (a) {
            bs_reply_auth(&er, d, a);
            reply_take(rep, &er);
            if (a == 401) reply_header(rep, MHD_HTTP_HEADER_WWW_AUTHENTICATE, "Bearer");
            return 0;
        }
    }
    if (r == R_MODELS) {
        reply_init(rep, 200);
        bs_buf_puts(&rep->body, s->models_body.data);
        return 0;
    }
    const char *cl = MHD_lookup_connection_value(c, MHD_HEADER_KIND, MHD_HTTP_HEADER_CONTENT_LENGTH);
    if (cl) {
        char *end;
        errno = 0;
        unsigned long long n = strtoull(cl, &end, 10);
        if (errno == ERANGE || n > s->max_body) {
            bs_reply_too_large(&er, d, s->max_body);
            reply_take(rep, &er);
            return 0;
        }
    }
    return 1;
}

static enum MHD_Result first_call(bs_server *s, struct MHD_Connection *c, const char *url, const char *method,
                                  void **con_cls) {
    conn_ctx *x = calloc(1, sizeof *x);
    if (!x) return MHD_NO;
    bs_route r = bs_route_of(url);
    int inference = r == R_SYSTEMONE || r == R_BASAL;
    x->s = s;
    x->c = c;
    x->endpoint = !inference ? -1 : r == R_BASAL ? BS_EP_BASAL : BS_EP_SYSTEMONE;
    x->dialect = r == R_BASAL ? BS_DIALECT_BASAL : BS_DIALECT_SYSTEMONE;
    x->start_ms = bs_now_ms();
    x->model = BS_METRICS_NO_MODEL;
    x->watch_id = -1;
    bs_buf_init(&x->body);
    *con_cls = x;
    atomic_fetch_add(&s->live_ctx, 1);
    if (x->endpoint >= 0) {
        if (bs_route_method_ok(r, method, &(const char *){ NULL }) < 0) x->endpoint = -1;
        else bs_metrics_http_begin(s->metrics, x->endpoint);
    }
    if (headers_step(s, c, url, method, r, &x->early)) {
        atomic_init(&x->phase, PH_READING);
        return MHD_YES;
    }
    /* With a body on its way, answer now: libmicrohttpd then closes the
     * connection instead of reading a body nobody wants. */
    const char *cl = MHD_lookup_connection_value(c, MHD_HEADER_KIND, MHD_HTTP_HEADER_CONTENT_LENGTH);
    const char *te = MHD_lookup_connection_value(c, MHD_HEADER_KIND, MHD_HTTP_HEADER_TRANSFER_ENCODING);
    if (te || (cl && strtoull(cl, NULL, 10) > 0)) return send_reply(s, c, x, method, url, x->start_ms, &x->early);
    atomic_init(&x->phase, PH_REPLY);
    return MHD_YES;
}

static enum MHD_Result body_chunk(conn_ctx *x, const char *data, size_t n) {
    x->received += n;
    if (x->received > x->s->max_body) {
        /* A chunked body over the limit: keep reading (and dropping) it so
         * that the 413 can be sent once the request is complete. */
        x->too_large = 1;
        bs_buf_free(&x->body);
        return MHD_YES;
    }
    bs_buf_put(&x->body, data, n);
    return MHD_YES;
}

static enum MHD_Result body_complete(bs_server *s, conn_ctx *x, const char *method, const char *url) {
    struct MHD_Connection *c = x->c;
    reply_t rep;
    bs_reply er;
    bs_reply_init(&er);
    if (x->too_large || x->body.oom) {
        bs_reply_too_large(&er, x->dialect, s->max_body);
        reply_take(&rep, &er);
        return send_reply(s, c, x, method, url, x->start_ms, &rep);
    }
    double arrival = bs_now_ms();
    bs_err e = { 0 };
    bj_value *body = NULL;
    int rc = bs_body_parse(x->body.data ? x->body.data : "", x->body.len, x->dialect, &body, &er, &e);
    bs_buf_free(&x->body);
    if (rc < 0) {
        if (!er.body.len) bs_reply_fatal(&er, "out of memory");
        reply_take(&rep, &er);
        return send_reply(s, c, x, method, url, x->start_ms, &rep);
    }
    if (atomic_fetch_add(&s->inflight, 1) >= s->max_inflight) {
        atomic_fetch_sub(&s->inflight, 1);
        bj_free(body);
        bs_reply_overloaded(&er, x->dialect);
        reply_take(&rep, &er);
        reply_header(&rep, MHD_HTTP_HEADER_RETRY_AFTER, "1");
        return send_reply(s, c, x, method, url, x->start_ms, &rep);
    }
    atomic_store(&x->slot, 1);
    size_t ml = 0;
    const char *mname = bs_body_model(body, &ml);
    size_t mi = mname ? find_model(s, mname, ml) : s->default_model;
    if (mi == BS_METRICS_NO_MODEL) {
        bs_reply_unknown_model(&er, x->dialect, mname, ml);
        bj_free(body);
        release_slot(s, x);
        reply_take(&rep, &er);
        return send_reply(s, c, x, method, url, x->start_ms, &rep);
    }
    bs_reply_free(&er);
    x->model = mi;
    pthread_mutex_lock(&s->mu);
    int closed = s->engines_closed;
    if (!closed) s->pending++;
    pthread_mutex_unlock(&s->mu);
    if (closed) {
        bj_free(body);
        release_slot(s, x);
        bs_reply_fatal(&er, BS_MSG_ENGINE_STOPPED);
        reply_take(&rep, &er);
        return send_reply(s, c, x, method, url, x->start_ms, &rep);
    }
    x->admitted = 1;
    bs_metrics_admitted(s->metrics, mi, +1);
    bs_job_init(&x->job);
    x->job.body = body;
    x->job.dialect = x->dialect;
    x->job.arrival_ms = arrival;
    x->job.done = on_done;
    x->job.done_ctx = x;
    x->job_live = 1;
    atomic_store(&x->phase, PH_WAITING);
    MHD_suspend_connection(c);
    const union MHD_ConnectionInfo *ci = MHD_get_connection_info(c, MHD_CONNECTION_INFO_CONNECTION_FD);
    if (ci) x->watch_id = bs_watch_add(s->watch, ci->connect_fd, x);
    bs_engine_submit(s->models[mi].engine, &x->job);
    return MHD_YES;
}

static enum MHD_Result answer(bs_server *s, conn_ctx *x, const char *method, const char *url) {
    bs_job *j = &x->job;
    if (atomic_load(&x->gone) || j->status == 0) return MHD_NO; /* nobody to answer: close */
    reply_t rep;
    reply_init(&rep, j->status);
    rep.body = j->reply;
    bs_buf_init(&j->reply);
    if (j->status == 200) {
        rep.timing = 1;
        rep.queue_ms = j->queue_ms;
        rep.compute_ms = j->compute_ms;
        rep.batch = j->batch_requests;
    }
    return send_reply(s, x->c, x, method, url, x->start_ms, &rep);
}

static enum MHD_Result on_access(void *cls, struct MHD_Connection *c, const char *url, const char *method,
                                 const char *version, const char *upload, size_t *upload_size, void **con_cls) {
    bs_server *s = cls;
    conn_ctx *x = *con_cls;
    if (!x) return first_call(s, c, url, method, con_cls);
    switch (atomic_load(&x->phase)) {
    case PH_REPLY:
        *upload_size = 0;
        return send_reply(s, c, x, method, url, x->start_ms, &x->early);
    case PH_READING:
        if (*upload_size) {
            size_t n = *upload_size;
            *upload_size = 0;
            return body_chunk(x, upload, n);
        }
        return body_complete(s, x, method, url);
    case PH_DONE:
        return answer(s, x, method, url);
    default:
        return MHD_YES;
    }
}

static void on_completed(void *cls, struct MHD_Connection *c, void **con_cls, enum MHD_RequestTerminationCode toe) {
    bs_server *s = cls;
    conn_ctx *x = *con_cls;
    if (!x) return;
    *con_cls = NULL;
    record(s, x, 0); /* no-op unless the client left before a response was built */
    release_slot(s, x);
    if (x->job_live) bs_job_release(&x->job);
    bs_buf_free(&x->body);
    bs_buf_free(&x->early.body);
    free(x);
    pthread_mutex_lock(&s->mu);
    if (atomic_fetch_sub(&s->live_ctx, 1) == 1) pthread_cond_broadcast(&s->idle);
    pthread_mutex_unlock(&s->mu);
}

/* ---- bodies known at start ---- */

static void build_bodies(bs_server *s, const char *release_date) {
    bs_buf *b = &s->models_body;
    bs_buf_puts(b, "{\"models\":[");
    for (size_t i = 0; i < s->n_models; i++) {
        if (i) bs_buf_putc(b, ',');
        bs_buf_puts(b, "{\"name\":");
        bs_resp_cstr(b, s->models[i].name);
        bs_buf_puts(b, ",\"release_date\":");
        bs_resp_cstr(b, release_date);
        bs_buf_puts(b, ",\"description\":\"basal typed-decision model (choice / noul / score / act / multi), Polish "
                       "and English\",\"mode\":\"basal-c\",\"early_exit\":[]}");
    }
    bs_buf_puts(b, "]}");
    b = &s->health_body;
    bs_buf_puts(b, "{\"status\":\"ok\",\"models\":[");
    for (size_t i = 0; i < s->n_models; i++) {
        if (i) bs_buf_putc(b, ',');
        bs_resp_cstr(b, s->models[i].name);
    }
    bs_buf_puts(b, "],\"default_model\":");
    bs_resp_cstr(b, s->models[s->default_model].name);
    bs_buf_putc(b, '}');
}

static void free_server(bs_server *s) {
    if (!s) return;
    for (size_t i = 0; s->models && i < s->n_models; i++) {
        free(s->models[i].name);
        for (size_t a = 0; a < s->models[i].n_aliases; a++) free(s->models[i].aliases[a]);
        free(s->models[i].aliases);
    }
    free(s->models);
    free(s->api_key);
    bs_metrics_destroy(s->metrics);
    bs_watch_destroy(s->watch);
    bs_buf_free(&s->models_body);
    bs_buf_free(&s->health_body);
    pthread_cond_destroy(&s->idle);
    pthread_mutex_destroy(&s->mu);
    free(s);
}

int bs_server_start(bs_server **out, const bs_server_opts *o, bs_err *e) {
    *out = NULL;
    int rc = BS_ENOMEM;
    if (!o->n_models || o->default_model >= o->n_models) return bs_fail(e, BS_EINVAL, "server: no models");
    bs_server *s = calloc(1, sizeof *s);
    if (!s) return bs_fail(e, BS_ENOMEM, "out of memory");
    pthread_mutex_init(&s->mu, NULL);
    pthread_cond_init(&s->idle, NULL);
    s->listen_fd = o->listen_fd;
    s->n_models = o->n_models;
    s->default_model = o->default_model;
    s->max_inflight = o->max_inflight;
    s->max_body = o->max_body_bytes;
    s->access_log = o->access_log;
    s->metrics_on = o->metrics;
    bs_buf_init(&s->models_body);
    bs_buf_init(&s->health_body);
    const char **names = calloc(o->n_models, sizeof *names);
    if (!(s->models = calloc(o->n_models, sizeof *s->models)) || !names) goto fail;
    for (size_t i = 0; i < o->n_models; i++) {
        model_t *m = &s->models[i];
        m->engine = o->models[i].engine;
        if (!(m->name = bs_strfmt("%s", o->models[i].name))) goto fail;
        names[i] = m->name;
        if (o->models[i].n_aliases && !(m->aliases = calloc(o->models[i].n_aliases, sizeof *m->aliases))) goto fail;
        for (; m->n_aliases < o->models[i].n_aliases; m->n_aliases++)
            if (!(m->aliases[m->n_aliases] = bs_strfmt("%s", o->models[i].aliases[m->n_aliases]))) goto fail;
    }
    if (o->api_key) {
        if (!(s->api_key = malloc(o->api_key_len + 1))) goto fail;
        memcpy(s->api_key, o->api_key, o->api_key_len);
        s->api_key[o->api_key_len] = 0;
        s->api_key_len = o->api_key_len;
    }
    if (!(s->metrics = bs_metrics_create(names, o->n_models, o->max_inflight))) goto fail;
    for (size_t i = 0; i < o->n_models; i++) { /* engines take no jobs before the server runs */
        s->models[i].s = s;
        bs_engine_set_batch_hook(s->models[i].engine, on_batch, &s->models[i]);
    }
    build_bodies(s, o->release_date ? o->release_date : BS_DEFAULT_RELEASE_DATE);
    if (s->models_body.oom || s->health_body.oom) goto fail;
    if (!(s->watch = bs_watch_create(on_gone, e))) {
        rc = e ? e->code : BS_EIO;
        free(names);
        free_server(s);
        return rc;
    }
    /* Every admitted request keeps its connection open; leave room for the
     * ones that only come to be refused, within the descriptor limit. */
    struct rlimit rl;
    unsigned limit = (unsigned)(o->max_inflight > 1u << 20 ? 1u << 20 : o->max_inflight) + 1024u;
    if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY && rl.rlim_cur > 128 &&
        limit > rl.rlim_cur - 64)
        limit = (unsigned)(rl.rlim_cur - 64);
    s->d = MHD_start_daemon(MHD_USE_AUTO_INTERNAL_THREAD | MHD_ALLOW_SUSPEND_RESUME, 0, NULL, NULL, on_access, s,
                            MHD_OPTION_LISTEN_SOCKET, (MHD_socket)o->listen_fd,
                            MHD_OPTION_NOTIFY_COMPLETED, on_completed, s,
                            MHD_OPTION_CONNECTION_LIMIT, limit,
                            MHD_OPTION_CONNECTION_TIMEOUT, (unsigned)IDLE_TIMEOUT_S,
                            MHD_OPTION_END);
    if (!s->d) {
        rc = bs_fail(e, BS_EIO, "cannot start the HTTP server (libmicrohttpd)");
        free(names);
        free_server(s);
        return rc;
    }
    free(names);
    *out = s;
    return BS_OK;
fail:
    free(names);
    free_server(s);
    return bs_fail(e, rc, "out of memory");
}

void bs_server_shutdown(bs_server *s) {
    if (!s) return;
    atomic_store(&s->stopping, 1);
    MHD_socket fd = MHD_quiesce_daemon(s->d);
    if (fd != MHD_INVALID_SOCKET) close(fd);
    pthread_mutex_lock(&s->mu);
    while (s->pending > 0) pthread_cond_wait(&s->idle, &s->mu);
    s->engines_closed = 1;
    pthread_mutex_unlock(&s->mu);
}

void bs_server_destroy(bs_server *s) {
    if (!s) return;
    /* Answers are queued; give the polling thread time to write them out, but
     * not forever: a client that never reads its answer must not hold the
     * process (MHD_stop_daemon closes what is left). */
    struct timespec until;
    clock_gettime(CLOCK_REALTIME, &until);
    until.tv_sec += DRAIN_S;
    pthread_mutex_lock(&s->mu);
    while (atomic_load(&s->live_ctx) > 0)
        if (pthread_cond_timedwait(&s->idle, &s->mu, &until) == ETIMEDOUT) break;
    pthread_mutex_unlock(&s->mu);
    MHD_stop_daemon(s->d);
    free_server(s);
}
