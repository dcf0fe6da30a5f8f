/* The HTTP server's life (server.h): start (the server object, the bodies
 * known at start, the libuv loop and its thread, the listener), the loading
 * state until the engines arrive, shutdown (no new connections, every
 * submitted job completed) and destroy (answers drained within DRAIN_S, then
 * the loop stops); also the server behind bs_http_feed (server_int.h). What
 * happens on a connection, from accept to its last byte, is http.c's; the
 * server object the two share is in http_int.h.
 *
 * Threads: the loop thread runs every libuv callback. Other threads (an
 * engine's done callback, the caller of set_ready / shutdown / destroy) touch
 * the server only through its atomics and the fields under s->mu, and wake
 * the loop with uv_async_send. */
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>
#include <uv.h>

#include "protocol/respjson.h"
#include "server/http_int.h"
#include "server/metrics.h"
#include "server/server.h"
#include "server/server_int.h"

#define DRAIN_S 10              /* how long bs_server_destroy lets answers drain */

/* The engine's batch hook (an engine thread): the batch metrics. */
static void on_batch(void *ctx, int lane, int requests, double compute_ms, int ok) {
    model_t *m = ctx;
    bs_metrics_batch(m->s->metrics, (size_t)(m - m->s->models), lane, requests, compute_ms, ok);
}

/* ---- the loop thread ---- */

static void on_wake(uv_async_t *a) {
    bs_server *s = a->data;
    pthread_mutex_lock(&s->mu);
    conn *done = s->done_head;
    s->done_head = NULL;
    int quit = s->quit;
    pthread_mutex_unlock(&s->mu);
    bs_http_answer_done(done);
    if (atomic_load(&s->stopping) && !s->listener_closed_loop) {
        s->listener_closed_loop = 1;
        uv_close((uv_handle_t *)&s->listener, NULL);
        bs_http_close_idle(s);
        pthread_mutex_lock(&s->mu);
        s->listener_closed = 1;
        pthread_cond_broadcast(&s->cond);
        pthread_mutex_unlock(&s->mu);
    }
    if (quit) {
        bs_http_close_all(s);
        uv_close((uv_handle_t *)&s->wake, NULL);
    }
}

static void loop_main(void *arg) {
    bs_server *s = arg;
    uv_run(&s->loop, UV_RUN_DEFAULT);
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
                       "and English\",\"mode\":\"basal-c\",\"early_exit\":[]");
        if (s->models[i].dtype) {
            bs_buf_puts(b, ",\"dtype\":");
            bs_resp_cstr(b, s->models[i].dtype);
        }
        bs_buf_putc(b, '}');
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
        free(s->models[i].dtype);
        for (size_t a = 0; a < s->models[i].n_aliases; a++) free(s->models[i].aliases[a]);
        free(s->models[i].aliases);
    }
    free(s->models);
    free(s->api_key);
    bs_metrics_destroy(s->metrics);
    bs_buf_free(&s->models_body);
    bs_buf_free(&s->health_body);
    bs_buf_free(&s->served_names);
    free(s->loading_detail);
    for (size_t i = 0; i < s->n_cors; i++) free(s->cors[i]);
    free(s->cors);
    for (size_t i = 0; i < IP_BUCKETS; i++)
        while (s->ips[i]) {
            ip_entry *n = s->ips[i]->next;
            free(s->ips[i]);
            s->ips[i] = n;
        }
    if (s->loop_ready) uv_loop_close(&s->loop);
    pthread_cond_destroy(&s->cond);
    pthread_mutex_destroy(&s->mu);
    free(s);
}

/* Closes what a failed start opened on the loop and runs it to the end. */
static void abandon_loop(bs_server *s, int listener_open) {
    if (listener_open) uv_close((uv_handle_t *)&s->listener, NULL);
    uv_close((uv_handle_t *)&s->wake, NULL);
    uv_run(&s->loop, UV_RUN_DEFAULT);
}

int bs_server_start(bs_server **out, const bs_server_opts *o, bs_err *e) {
    *out = NULL;
    if (!o->n_models || o->default_model >= o->n_models) return bs_fail(e, BS_EINVAL, "server: no models");
    bs_server *s = calloc(1, sizeof *s);
    if (!s) return bs_fail(e, BS_ENOMEM, "out of memory");
    pthread_mutex_init(&s->mu, NULL);
    pthread_cond_init(&s->cond, NULL);
    s->listen_fd = o->listen_fd;
    s->n_models = o->n_models;
    s->default_model = o->default_model;
    s->max_inflight = o->max_inflight;
    s->max_body = o->max_body_bytes;
    s->access_log = o->access_log;
    s->decision_log = o->decision_log;
    int have_engines = 1;
    s->metrics_on = o->metrics;
    s->ui_on = !o->no_ui;
    s->header_timeout_s = o->header_timeout_s > 0 ? o->header_timeout_s : BS_DEFAULT_HEADER_TIMEOUT_S;
    s->body_timeout_s = o->body_timeout_s > 0 ? o->body_timeout_s : BS_DEFAULT_BODY_TIMEOUT_S;
    s->keepalive_timeout_s = o->keepalive_timeout_s > 0 ? o->keepalive_timeout_s : BS_DEFAULT_KEEPALIVE_TIMEOUT_S;
    s->max_client_conn = o->max_client_connections > 0 ? o->max_client_connections : BS_DEFAULT_MAX_CLIENT_CONNECTIONS;
    /* Every admitted request keeps its connection open; leave room for the
     * ones that only come to be refused, within the descriptor limit. */
    long limit = o->max_connections > 0 ? o->max_connections
                                        : (o->max_inflight > 1L << 20 ? 1L << 20 : o->max_inflight) + 1024;
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY) {
        /* Descriptors for the process's own files and the refused
         * connections; under a small limit (a hard limit below 640) half of
         * it. Past the limit accept() fails and libuv drops the newcomer
         * unanswered, while idle connections, which it would have pushed
         * out, keep their descriptors. */
        rlim_t reserve = 64 + REFUSE_SLACK;
        if (reserve > rl.rlim_cur / 2) reserve = rl.rlim_cur / 2;
        if ((rlim_t)limit > rl.rlim_cur - reserve) limit = (long)(rl.rlim_cur - reserve);
        if (limit < 1) limit = 1;
    }
    s->max_conn = limit;
    bs_buf_init(&s->models_body);
    bs_buf_init(&s->health_body);
    bs_buf_init(&s->served_names);
    const char **names = calloc(o->n_models, sizeof *names);
    if (!(s->models = calloc(o->n_models, sizeof *s->models)) || !names) goto oom;
    for (size_t i = 0; i < o->n_models; i++) {
        model_t *m = &s->models[i];
        m->engine = o->models[i].engine;
        if (!m->engine) have_engines = 0;
        if (!(m->name = bs_strfmt("%s", o->models[i].name))) goto oom;
        if (o->models[i].dtype && !(m->dtype = bs_strfmt("%s", o->models[i].dtype))) goto oom;
        names[i] = m->name;
        if (o->models[i].n_aliases && !(m->aliases = calloc(o->models[i].n_aliases, sizeof *m->aliases))) goto oom;
        for (; m->n_aliases < o->models[i].n_aliases; m->n_aliases++)
            if (!(m->aliases[m->n_aliases] = bs_strfmt("%s", o->models[i].aliases[m->n_aliases]))) goto oom;
    }
    if (o->api_key) {
        if (!(s->api_key = malloc(o->api_key_len + 1))) goto oom;
        memcpy(s->api_key, o->api_key, o->api_key_len);
        s->api_key[o->api_key_len] = 0;
        s->api_key_len = o->api_key_len;
    }
    if (!(s->metrics = bs_metrics_create(names, o->n_models, o->max_inflight))) goto oom;
    for (size_t i = 0; i < o->n_models; i++) { /* engines take no jobs before the server runs */
        s->models[i].s = s;
        if (have_engines) bs_engine_set_batch_hook(s->models[i].engine, on_batch, &s->models[i]);
    }
    atomic_store(&s->ready, have_engines);
    atomic_store(&s->n_loaded, have_engines ? (long)o->n_models : 0);
    build_bodies(s, o->release_date ? o->release_date : BS_DEFAULT_RELEASE_DATE);
    bs_names_header(&s->served_names, names, o->n_models);
    if (s->models_body.oom || s->health_body.oom || s->served_names.oom) goto oom;
    if (o->n_cors_origins && !(s->cors = calloc(o->n_cors_origins, sizeof *s->cors))) goto oom;
    for (; s->n_cors < o->n_cors_origins; s->n_cors++)
        if (!(s->cors[s->n_cors] = bs_strfmt("%s", o->cors_origins[s->n_cors]))) goto oom;
    free(names);
    names = NULL;
    int rc;
    if ((rc = uv_loop_init(&s->loop)) != 0) goto fail;
    s->loop_ready = 1;
    if ((rc = uv_async_init(&s->loop, &s->wake, on_wake)) != 0) {
        uv_loop_close(&s->loop);
        s->loop_ready = 0;
        goto fail;
    }
    s->wake.data = s;
    uv_tcp_init(&s->loop, &s->listener);
    s->listener.data = s;
    /* The loop owns a duplicate, so that on failure the caller's descriptor
     * is untouched (the caller closes it), and on success it is closed here. */
    int fd = dup(o->listen_fd);
    if (fd < 0) {
        rc = uv_translate_sys_error(errno);
        abandon_loop(s, 1);
        goto fail;
    }
    if ((rc = uv_tcp_open(&s->listener, fd)) != 0) {
        close(fd);
        abandon_loop(s, 1);
        goto fail;
    }
    if ((rc = uv_listen((uv_stream_t *)&s->listener, 1024, bs_http_on_connection)) != 0 ||
        (rc = uv_thread_create(&s->thread, loop_main, s)) != 0) {
        abandon_loop(s, 1); /* closes fd */
        goto fail;
    }
    s->thread_started = 1;
    close(o->listen_fd);
    *out = s;
    return BS_OK;
fail:
    free_server(s);
    return bs_fail(e, BS_EIO, "cannot start the HTTP server: %s", uv_strerror(rc));
oom:
    free(names);
    free_server(s);
    return bs_fail(e, BS_ENOMEM, "out of memory");
}

void bs_server_set_loaded(bs_server *s, size_t loaded) {
    if (s) atomic_store(&s->n_loaded, (long)loaded);
}

void bs_server_set_loading_detail(bs_server *s, const char *json_members) {
    if (!s) return;
    char *copy = json_members && *json_members ? bs_strfmt("%s", json_members) : NULL;
    pthread_mutex_lock(&s->mu);
    free(s->loading_detail);
    s->loading_detail = copy; /* out of memory: no detail, the rest of /health stays */
    pthread_mutex_unlock(&s->mu);
}

void bs_server_set_ready(bs_server *s, bs_engine *const *engines) {
    /* The loop thread reads models[].engine only after it has seen ready
     * (acquire), so these plain stores are published by the release below. */
    for (size_t i = 0; i < s->n_models; i++) {
        s->models[i].engine = engines[i];
        bs_engine_set_batch_hook(engines[i], on_batch, &s->models[i]);
    }
    atomic_store(&s->n_loaded, (long)s->n_models);
    atomic_store_explicit(&s->ready, 1, memory_order_release);
}

void bs_server_shutdown(bs_server *s) {
    if (!s) return;
    atomic_store(&s->stopping, 1);
    uv_async_send(&s->wake);
    pthread_mutex_lock(&s->mu);
    while (!s->listener_closed) pthread_cond_wait(&s->cond, &s->mu);
    while (s->pending > 0) pthread_cond_wait(&s->cond, &s->mu);
    s->engines_closed = 1;
    pthread_mutex_unlock(&s->mu);
}

void bs_server_destroy(bs_server *s) {
    if (!s) return;
    /* Answers are queued; give the loop time to write them out, but not
     * forever: a client that never reads its answer must not hold the
     * process (the loop closes what is left). */
    struct timespec until;
    clock_gettime(CLOCK_REALTIME, &until);
    until.tv_sec += DRAIN_S;
    atomic_store(&s->stopping, 1);
    uv_async_send(&s->wake);
    pthread_mutex_lock(&s->mu);
    while (atomic_load(&s->live) > 0)
        if (pthread_cond_timedwait(&s->cond, &s->mu, &until) == ETIMEDOUT) break;
    s->quit = 1;
    uv_async_send(&s->wake);
    pthread_mutex_unlock(&s->mu);
    uv_thread_join(&s->thread);
    free_server(s);
}

/* ---- bs_http_feed (server_int.h): one connection without a socket ---- */

int bs_http_feed(const bs_http_feed_opts *o, const char *data, size_t len, bs_buf *out) {
    static const char *const names[] = { "basal-tiny" };
    bs_server *s = calloc(1, sizeof *s);
    if (!s) return -1;
    pthread_mutex_init(&s->mu, NULL);
    pthread_cond_init(&s->cond, NULL);
    s->n_models = 1;
    s->max_inflight = 1024;
    s->max_body = o->max_body;
    s->metrics_on = o->metrics;
    s->header_timeout_s = BS_DEFAULT_HEADER_TIMEOUT_S;
    s->body_timeout_s = BS_DEFAULT_BODY_TIMEOUT_S;
    s->keepalive_timeout_s = BS_DEFAULT_KEEPALIVE_TIMEOUT_S;
    s->max_conn = s->max_client_conn = 16;
    s->engines_closed = 1; /* no engine: a valid request ends in 500 "engine stopped" */
    atomic_store(&s->ready, 1); /* past loading, so that the routes are reached */
    if (o->cors && (s->cors = calloc(1, sizeof *s->cors))) s->n_cors = 1; /* freed with s */
    if (!(s->models = calloc(1, sizeof *s->models)) || !(s->models[0].name = bs_strfmt("%s", names[0])) ||
        !(s->metrics = bs_metrics_create(names, 1, s->max_inflight)) ||
        (o->api_key && !(s->api_key = bs_strfmt("k3y"))) ||
        (o->cors && (!s->cors || !(s->cors[0] = bs_strfmt("https://a.example")))))
        goto oom;
    s->api_key_len = s->api_key ? 3 : 0;
    build_bodies(s, BS_DEFAULT_RELEASE_DATE);
    bs_names_header(&s->served_names, names, 1);
    if (s->models_body.oom || s->health_body.oom || s->served_names.oom || uv_loop_init(&s->loop) != 0) goto oom;
    s->loop_ready = 1;
    if (bs_http_feed_conn(s, data, len, o->chunk, out) < 0) goto oom;
    uv_run(&s->loop, UV_RUN_DEFAULT); /* the close callbacks free the connection */
    free_server(s);
    return 0;
oom:
    free_server(s);
    return -1;
}
