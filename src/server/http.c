/* The HTTP/1.1 layer: our own small server on libuv, with picohttpparser
 * (picohttp.h) for the request line, the headers and chunked bodies.
 *
 * Why not libmicrohttpd (which this replaced): it writes HTML bodies for its
 * own errors (400, 413, 431, 505), sends a second header block for a bad
 * Content-Length, has one idle timeout and no deadline for the header block
 * or the body, and leaves a socket whose FIN came with the data in
 * CLOSE-WAIT until that timeout (issue 15). Here every byte the server writes
 * is ours, so every error has the JSON body of spec 02 (protocol/reply.h).
 *
 * One thread runs the libuv loop: it accepts, reads, parses, runs steps 1–7 of
 * spec 02 §3, submits decision requests to their engine and writes answers.
 * No thread waits for an answer: the engine's done callback (an engine
 * thread) queues the connection and wakes the loop (uv_async_send).
 *
 * This file is what happens on one connection, from its accept to its last
 * byte: replies, accounting, the connection's life (reading, deadlines,
 * linger), writing an answer, the engine's callbacks, the steps of 02 §3,
 * accepting, and bs_http_feed's connection. server.c starts and stops the
 * server (the loop thread, the listener, the wake-up, the loading state,
 * shutdown) and builds bs_http_feed's server; http_int.h is the server
 * object the two share.
 *
 * Deadlines, one timer per connection: the header block must arrive within
 * header_timeout_s of its first byte (of the accept for a new connection),
 * the body within body_timeout_s of the header block's end, an idle keep-alive
 * connection is closed after keepalive_timeout_s, and an answer must be taken
 * by the client within body_timeout_s. Limits: max_connections in all and
 * max_client_connections per client address (503 JSON beyond them).
 *
 * End of input (FIN). Before a request is complete it ends the connection at
 * once (no CLOSE-WAIT left behind). After a complete request it may be a
 * half-close by a client that still reads (HTTP clients and proxies do it), or
 * the client may be gone (04 §11 X1): TCP cannot tell the two apart until we
 * send something. So the server sends an interim `HTTP/1.1 100 Continue`
 * (RFC 9110 §15.2: clients must accept unexpected 1xx) and checks the socket
 * shortly after: a peer that has closed its socket answers the data with a
 * reset (the socket turns TCP_CLOSE / SO_ERROR), and only then is the job
 * cancelled and its slot released. A half-closed client gets its answer.
 * HTTP/1.0 clients must not get a 1xx, so their jobs are never cancelled on
 * EOF alone (a reset still cancels them).
 *
 * Ownership: a connection (conn) is freed when both of its handles are
 * closed and its job, if one was submitted, is done (the engine holds the job
 * until then). The in-flight slot is released exactly once (atomic exchange)
 * by whichever comes first: the done callback, the departure of the client or
 * an early reply. */
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <uv.h>

#include "server/http_int.h"
#include "server/metrics.h"
#include "server/picohttp.h"
#include "server/server.h"
#include "server/server_int.h"
#include "server/web_assets.h"

#define MAX_HEADER_BYTES 65536  /* request line and headers: beyond it 431 */
#define MAX_HEADERS 100         /* more header lines: 431 */
#define LINGER_MS 2000          /* after a closing answer: read and drop input for at most this long */

enum { C_IDLE, C_HEADERS, C_BODY, C_WAITING, C_WRITING, C_LINGER };

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
    long questions;          /* usage.questions of a 200, else -1 (access log) */
    int orders;              /* a 200 of a model: its option orders (x-basal-orders), else 0 */
    bs_dlog_entry *dlog;     /* a decision to log once the answer has its request id, or NULL */
} reply_t;

struct conn {
    uv_tcp_t tcp;
    uv_timer_t timer;
    uv_write_t wr, wr_interim;
    uv_shutdown_t shut;
    bs_server *s;
    conn *prev, *next;       /* s->conns */
    conn *next_done;         /* s->done_head */
    ip_entry *ip;            /* counted against max_client_conn */
    char peer[80];           /* client address and port, for the access log */
    char rid[33];            /* request id of the answer being written */
    int active, refused;     /* counted in n_active / n_refused */
    double since_ms;         /* when it last began to wait for a header block (idle or reading one) */
    int open_handles;        /* tcp and timer until their close callbacks */
    int closing;             /* uv_close called */
    int state;
    int peer_eof;
    int close_after;         /* end the connection after the answer being written */
    int interim_busy;        /* wr_interim in use */
    int probing;             /* EOF while waiting: checking whether the peer is gone */
    unsigned probe_ms;
    int read_stopped;
    size_t scanned;          /* bytes of an incomplete header block already parsed (phr last_len) */
    char *in;                /* received bytes not yet consumed */
    size_t in_len, in_cap;
    bs_buf out;              /* the answer being written */
    bs_buf *sink;            /* bs_http_feed: what would be written goes here */
    int sink_written;        /* bs_http_feed: a write "completed", on_written is due */
    /* the current request */
    char method[16];
    char *path;              /* decoded path (or the raw target when it names no route); NULL before */
    int minor;               /* HTTP/1.<minor> */
    int head;                /* HEAD: no body in the answer */
    char *origin;            /* the Origin header (CORS), or NULL */
    int keep_alive;
    bs_route route;
    bs_dialect dialect;
    int endpoint;            /* BS_EP_*, or -1: not an inference route (not in the metrics) */
    double start_ms;         /* the request's header block is in */
    int chunked;
    unsigned long long clen, received;
    bs_chunked dec;          /* a chunked body's decoder (routes.c) */
    bs_buf body;
    bs_buf logged_body;      /* the decision log's copy of a parsed body (only with a decision log) */
    size_t model;            /* BS_METRICS_NO_MODEL until routed */
    int admitted;            /* counted in basal_model_inflight_requests */
    atomic_int slot;         /* holds an in-flight slot */
    atomic_int recorded;     /* the request is in the metrics already */
    int job_live, job_done;
    bs_job job;
};

static void process_input(conn *c);
static void conn_close(conn *c);
static void respond(conn *c, reply_t *r, int close_after);

/* ---- replies ---- */

static void reply_init(reply_t *r, int status) {
    memset(r, 0, sizeof *r);
    r->status = status;
    r->ctype = "application/json";
    r->questions = -1;
    bs_buf_init(&r->body);
}

/* Starts r as the error reply built in e (protocol/reply.h), taking its body. */
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

/* ---- accounting ---- */

static void release_slot(bs_server *s, conn *c) {
    if (atomic_exchange(&c->slot, 0)) {
        atomic_fetch_sub(&s->inflight, 1);
        if (c->admitted) bs_metrics_admitted(s->metrics, c->model, -1);
    }
}

/* status 0: cancelled (the client left before an answer was built) */
static void record(bs_server *s, conn *c, int status) {
    if (c->endpoint >= 0 && !atomic_exchange(&c->recorded, 1))
        bs_metrics_http_end(s->metrics, c->endpoint, c->model, status, (bs_now_ms() - c->start_ms) / 1e3);
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

static ip_entry **ip_slot(bs_server *s, const unsigned char addr[16]) {
    uint32_t h = 2166136261u;
    for (int i = 0; i < 16; i++) h = (h ^ addr[i]) * 16777619u;
    ip_entry **p = &s->ips[h % IP_BUCKETS];
    while (*p && memcmp((*p)->addr, addr, 16)) p = &(*p)->next;
    return p;
}

static void ip_release(bs_server *s, conn *c) {
    if (!c->ip) return;
    ip_entry **p = ip_slot(s, c->ip->addr);
    if (--c->ip->count == 0 && *p == c->ip) {
        *p = c->ip->next;
        free(c->ip);
    }
    c->ip = NULL;
}

/* The key of the per-address count, and the address as the access log shows it. */
static void peer_key(conn *c, unsigned char key[16]) {
    struct sockaddr_storage ss;
    int len = sizeof ss;
    memset(key, 0, 16);
    snprintf(c->peer, sizeof c->peer, "-");
    if (uv_tcp_getpeername(&c->tcp, (struct sockaddr *)&ss, &len) != 0) return;
    char ip[48] = "?"; /* INET6_ADDRSTRLEN */
    if (ss.ss_family == AF_INET) {
        key[10] = key[11] = 0xff;
        memcpy(key + 12, &((struct sockaddr_in *)&ss)->sin_addr, 4);
        uv_ip4_name((struct sockaddr_in *)&ss, ip, sizeof ip);
        snprintf(c->peer, sizeof c->peer, "%s:%u", ip, ntohs(((struct sockaddr_in *)&ss)->sin_port));
    } else if (ss.ss_family == AF_INET6) {
        memcpy(key, &((struct sockaddr_in6 *)&ss)->sin6_addr, 16);
        uv_ip6_name((struct sockaddr_in6 *)&ss, ip, sizeof ip);
        snprintf(c->peer, sizeof c->peer, "[%s]:%u", ip, ntohs(((struct sockaddr_in6 *)&ss)->sin6_port));
    }
}

/* ---- connection life ---- */

static void timer_set(conn *c, uint64_t ms);
static void on_timer(uv_timer_t *t);

static void reset_request(conn *c) {
    if (c->job_live) bs_job_release(&c->job);
    c->job_live = c->job_done = 0;
    bs_buf_free(&c->body);
    bs_buf_free(&c->logged_body);
    free(c->path);
    c->path = NULL;
    free(c->origin);
    c->origin = NULL;
    c->method[0] = 0;
    c->head = c->chunked = c->admitted = 0;
    c->clen = c->received = 0;
    c->scanned = 0;
    c->endpoint = -1;
    c->model = BS_METRICS_NO_MODEL;
    c->dialect = BS_DIALECT_SYSTEMONE;
    c->route = R_NONE;
    atomic_store(&c->slot, 0);
    atomic_store(&c->recorded, 0);
    memset(&c->dec, 0, sizeof c->dec);
}

static void maybe_free(conn *c) {
    if (c->open_handles || (c->job_live && !c->job_done)) return;
    bs_server *s = c->s;
    if (c->job_live) bs_job_release(&c->job);
    bs_buf_free(&c->body);
    bs_buf_free(&c->logged_body);
    bs_buf_free(&c->out);
    free(c->path);
    free(c->origin);
    free(c->in);
    free(c);
    pthread_mutex_lock(&s->mu);
    if (atomic_fetch_sub(&s->live, 1) == 1) pthread_cond_broadcast(&s->cond);
    pthread_mutex_unlock(&s->mu);
}

static void on_handle_closed(uv_handle_t *h) {
    conn *c = h->data;
    if (--c->open_handles == 0) {
        bs_server *s = c->s;
        if (c->prev) c->prev->next = c->next;
        else s->conns = c->next;
        if (c->next) c->next->prev = c->prev;
        s->n_conns--;
        maybe_free(c);
    }
}

static void conn_close(conn *c) {
    if (c->closing) return;
    c->closing = 1;
    bs_server *s = c->s;
    record(s, c, 0); /* no-op unless the client left before an answer was built */
    if (!c->job_live || c->job_done) release_slot(s, c);
    ip_release(s, c);
    if (c->active) s->n_active--;
    if (c->refused) s->n_refused--;
    c->active = c->refused = 0;
    uv_close((uv_handle_t *)&c->tcp, on_handle_closed);
    uv_close((uv_handle_t *)&c->timer, on_handle_closed);
}

static void timer_set(conn *c, uint64_t ms) {
    if (!c->closing) uv_timer_start(&c->timer, on_timer, ms, 0);
}

/* The client left while its job waits or runs (04 §11 X1): the job is
 * skipped if still queued and its slot is free at once. */
static void peer_gone(conn *c) {
    if (c->state == C_WAITING && c->job_live && !c->job_done) {
        atomic_store(&c->job.cancelled, 1);
        release_slot(c->s, c);
    }
    conn_close(c);
}

/* A reset from the peer after our interim response, or any pending error. */
static int peer_reset(conn *c) {
    uv_os_fd_t fd;
    if (uv_fileno((uv_handle_t *)&c->tcp, &fd) != 0) return 1;
    struct tcp_info ti;
    socklen_t l = sizeof ti;
    if (getsockopt(fd, IPPROTO_TCP, TCP_INFO, &ti, &l) == 0 && ti.tcpi_state == TCP_CLOSE) return 1;
    int err = 0;
    l = sizeof err;
    return getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &l) == 0 && err != 0;
}

static void on_interim_written(uv_write_t *w, int status) {
    conn *c = w->data;
    c->interim_busy = 0;
    if (c->closing) return;
    if (status < 0) peer_gone(c);
}

static const char continue_line[] = "HTTP/1.1 100 Continue\r\n\r\n";

static int write_interim(conn *c) {
    if (c->sink) {
        bs_buf_put(c->sink, continue_line, sizeof continue_line - 1);
        return 0;
    }
    if (c->interim_busy) return 0;
    uv_buf_t b = uv_buf_init((char *)continue_line, sizeof continue_line - 1);
    c->wr_interim.data = c;
    if (uv_write(&c->wr_interim, (uv_stream_t *)&c->tcp, &b, 1, on_interim_written) != 0) return -1;
    c->interim_busy = 1;
    return 0;
}

static void begin_linger(conn *c);

static void on_eof(conn *c) {
    c->peer_eof = 1;
    c->read_stopped = 1; /* libuv stops reading at EOF */
    switch (c->state) {
    case C_WAITING:
        if (c->minor < 1 || c->probing) return;
        c->probing = 1;
        c->probe_ms = 5;
        if (write_interim(c) < 0) {
            peer_gone(c);
            return;
        }
        timer_set(c, c->probe_ms);
        return;
    case C_WRITING:
        return; /* closed once the answer is out */
    default:
        conn_close(c); /* an incomplete request, an idle connection, or lingering done */
        return;
    }
}

static void on_alloc(uv_handle_t *h, size_t suggested, uv_buf_t *b) {
    conn *c = h->data;
    if (c->state == C_LINGER) {
        *b = uv_buf_init(c->s->scratch, sizeof c->s->scratch);
        return;
    }
    if (c->in_cap - c->in_len < READ_CHUNK) {
        size_t nc = c->in_len + 2 * READ_CHUNK;
        char *p = realloc(c->in, nc);
        if (!p) {
            *b = uv_buf_init(NULL, 0); /* read_cb gets UV_ENOBUFS */
            return;
        }
        c->in = p;
        c->in_cap = nc;
    }
    *b = uv_buf_init(c->in + c->in_len, (unsigned)(c->in_cap - c->in_len));
}

static void on_read(uv_stream_t *st, ssize_t n, const uv_buf_t *buf) {
    conn *c = st->data;
    if (c->closing) return;
    if (n > 0) {
        if (c->state == C_LINGER) return; /* dropped */
        c->in_len += (size_t)n;
        if (c->state == C_IDLE) {
            c->state = C_HEADERS;
            c->since_ms = bs_now_ms();
            timer_set(c, (uint64_t)c->s->header_timeout_s * 1000);
        }
        if (c->state == C_HEADERS || c->state == C_BODY) {
            process_input(c);
        } else if (c->in_len >= MAX_HEADER_BYTES) {
            /* a pipelining client while its answer is pending: stop taking
             * input until the answer is out (hang-ups then go unnoticed) */
            uv_read_stop(st);
            c->read_stopped = 1;
        }
        return;
    }
    if (n == 0) return;
    if (n == UV_EOF) on_eof(c);
    else peer_gone(c);
}

static void start_reading(conn *c) {
    if (c->closing || c->peer_eof || c->sink) return;
    if (uv_read_start((uv_stream_t *)&c->tcp, on_alloc, on_read) == 0) c->read_stopped = 0;
}

/* The next request on a keep-alive connection (or the ones already read). */
static void next_request(conn *c) {
    reset_request(c);
    c->state = C_IDLE;
    c->since_ms = bs_now_ms();
    c->probing = 0;
    if (atomic_load(&c->s->stopping) && !c->in_len) {
        conn_close(c);
        return;
    }
    if (c->in_len) {
        c->state = C_HEADERS;
        timer_set(c, (uint64_t)c->s->header_timeout_s * 1000);
        process_input(c);
    } else {
        if (c->peer_eof) {
            conn_close(c);
            return;
        }
        if (c->in_cap > 2 * READ_CHUNK) { /* an idle connection keeps no large buffer */
            free(c->in);
            c->in = NULL;
            c->in_cap = 0;
        }
        timer_set(c, (uint64_t)c->s->keepalive_timeout_s * 1000);
    }
    if (!c->closing && c->read_stopped && !c->peer_eof) start_reading(c);
}

static void on_shutdown(uv_shutdown_t *req, int status) { (void)req; (void)status; }

/* After a closing answer: FIN to the client, then read and drop what it still
 * sends for a while, so that closing with unread input does not reset the
 * connection before the client has read the answer. */
static void begin_linger(conn *c) {
    if (c->peer_eof) {
        conn_close(c);
        return;
    }
    c->state = C_LINGER;
    c->in_len = 0;
    if (c->sink) { /* no socket to shut down: input is dropped from now on */
        timer_set(c, LINGER_MS);
        return;
    }
    c->shut.data = c;
    if (uv_shutdown(&c->shut, (uv_stream_t *)&c->tcp, on_shutdown) != 0) {
        conn_close(c);
        return;
    }
    if (c->read_stopped) start_reading(c);
    timer_set(c, LINGER_MS);
}

static void on_written(uv_write_t *w, int status) {
    conn *c = w->data;
    bs_buf_free(&c->out);
    if (c->closing) return;
    if (status < 0) {
        conn_close(c);
        return;
    }
    if (c->close_after) begin_linger(c);
    else next_request(c);
}

static void on_timer(uv_timer_t *t) {
    conn *c = t->data;
    if (c->closing) return;
    bs_reply er;
    reply_t rep;
    bs_reply_init(&er);
    switch (c->state) {
    case C_IDLE: /* keep-alive idle, or a new connection that sent nothing */
    case C_LINGER:
    case C_WRITING: /* the client does not take its answer */
        conn_close(c);
        return;
    case C_HEADERS:
        c->start_ms = bs_now_ms();
        bs_reply_timeout(&er, BS_DIALECT_SYSTEMONE, 0, c->s->header_timeout_s);
        reply_take(&rep, &er);
        respond(c, &rep, 1);
        return;
    case C_BODY:
        bs_reply_timeout(&er, c->dialect, 1, c->s->body_timeout_s);
        reply_take(&rep, &er);
        respond(c, &rep, 1);
        return;
    case C_WAITING:
        if (!c->probing) return;
        if (peer_reset(c)) {
            peer_gone(c);
            return;
        }
        if (c->probe_ms < 1000) c->probe_ms *= 4;
        timer_set(c, c->probe_ms);
        return;
    }
}

/* ---- writing an answer ---- */

/* One access-log line (base/log.h): the message "METHOD PATH STATUS", then
 * the fields; what a request did not get to (no model routed, no batch) is
 * - in text and null in JSON. */
static void access_log(const conn *c, const reply_t *r, double ms) {
    const bs_server *s = c->s;
    const char *m = c->method[0] ? c->method : "-", *p = c->path ? c->path : "-";
    char msg[192];
    snprintf(msg, sizeof msg, "%.15s %.120s %d %.1f ms", m, p, r->status, ms);
    const char *model = c->model < s->n_models ? s->models[c->model].name : NULL;
    bs_log_field f[] = {
        { "request_id", BS_LF_STR, c->rid[0] ? c->rid : NULL, 0, 0, 0 },
        { "client", BS_LF_STR, c->peer[0] ? c->peer : NULL, 0, 0, 0 },
        { "method", BS_LF_STR, m, 0, 0, 1 },
        { "path", BS_LF_STR, p, 0, 0, 1 },
        { "status", BS_LF_INT, NULL, r->status, 0, 1 },
        { "duration_ms", BS_LF_MS, NULL, 0, ms, 1 },
        { "model", BS_LF_STR, model, 0, 0, 0 },
        { "questions", r->questions >= 0 ? BS_LF_INT : BS_LF_STR, NULL, r->questions, 0, 0 },
        { "queue_ms", BS_LF_MS, NULL, 0, r->timing ? r->queue_ms : -1, 0 },
        { "compute_ms", BS_LF_MS, NULL, 0, r->timing ? r->compute_ms : -1, 0 },
        { "batch", r->timing ? BS_LF_INT : BS_LF_STR, NULL, r->batch, 0, 0 },
    };
    bs_log_fields(s->access_log, BS_LOG_INFO, "access", msg, f, sizeof f / sizeof *f);
}

static const char *http_date(bs_server *s) {
    time_t now = time(NULL);
    if (now != s->date_at) {
        struct tm tm;
        gmtime_r(&now, &tm);
        strftime(s->date, sizeof s->date, "%a, %d %b %Y %H:%M:%S GMT", &tm);
        s->date_at = now;
    }
    return s->date;
}

static int cors_any(const bs_server *s) {
    for (size_t i = 0; i < s->n_cors; i++)
        if (!strcmp(s->cors[i], "*")) return 1;
    return 0;
}

/* CORS is on and the request came from an allowed origin. */
static int cors_ok(const bs_server *s, const conn *c) {
    return c->origin && bs_cors_allowed((const char *const *)s->cors, s->n_cors, c->origin, strlen(c->origin));
}

/* Writes r (one header block, then the body unless HEAD) and accounts for it. */
static void respond(conn *c, reply_t *r, int close_after) {
    bs_server *s = c->s;
    if (r->body.oom) {
        bs_buf_free(&r->body);
        bs_reply er;
        bs_reply_init(&er);
        bs_reply_fatal(&er, "out of memory");
        reply_take(r, &er);
        close_after = 1;
    }
    if (!c->keep_alive || atomic_load(&s->stopping) || c->peer_eof) close_after = 1;
    c->close_after = close_after;
    bs_buf *o = &c->out;
    bs_buf_free(o);
    bs_buf_printf(o, "HTTP/1.1 %d %s\r\nDate: %s\r\n", r->status, bs_http_reason(r->status), http_date(s));
    /* a 204 (CORS preflight) has neither (RFC 9110 §8.6) */
    if (r->status != 204) bs_buf_printf(o, "Content-Type: %s\r\nContent-Length: %zu\r\n", r->ctype, r->body.len);
    if (cors_ok(s, c)) {
        /* "*" answers any origin with "*"; a list echoes the one allowed,
         * and the answer varies with Origin for caches */
        int any = cors_any(s);
        bs_buf_printf(o, "Access-Control-Allow-Origin: %s\r\n", any ? "*" : c->origin);
        if (!any) bs_buf_puts(o, "Vary: Origin\r\n");
        if (r->status != 204) bs_buf_puts(o, "Access-Control-Expose-Headers: " BS_CORS_EXPOSE_HEADERS "\r\n");
    }
    /* every answer has an id for the access log; the /v1 routes also send it (02 §1.2) */
    bs_request_id(c->rid);
    if (c->path && !strncmp(c->path, "/v1/", 4)) bs_buf_printf(o, "x-typesafe-request-id: %s\r\n", c->rid);
    for (int i = 0; i < r->nh; i++) bs_buf_printf(o, "%s: %s\r\n", r->hdr[i][0], r->hdr[i][1]);
    if (r->timing)
        bs_buf_printf(o, "x-basal-queue-ms: %.3f\r\nx-basal-compute-ms: %.3f\r\nx-basal-batch-requests: %d\r\n",
                      r->queue_ms, r->compute_ms, r->batch);
    if (r->orders) bs_buf_printf(o, "x-basal-orders: %d\r\n", r->orders);
    /* Draining for shutdown: keep-alive clients must reconnect elsewhere. */
    if (close_after) bs_buf_puts(o, "Connection: close\r\n");
    else if (c->minor == 0) bs_buf_puts(o, "Connection: keep-alive\r\n");
    bs_buf_puts(o, "\r\n");
    if (!c->head && r->body.len) bs_buf_put(o, r->body.data, r->body.len);
    if (r->dlog) { /* the decision log gets the body as sent, moved */
        bs_buf_free(&r->dlog->reply);
        r->dlog->reply = r->body;
        bs_buf_init(&r->body);
    }
    bs_buf_free(&r->body);
    record(s, c, r->status);
    if (s->access_log) access_log(c, r, bs_now_ms() - c->start_ms);
    if (r->dlog) {
        memcpy(r->dlog->request_id, c->rid, sizeof r->dlog->request_id);
        r->dlog->ts_ms = bs_wall_ms();
        bs_dlog_submit(s->decision_log, r->dlog);
    }
    c->rid[0] = 0;
    if (c->state == C_WAITING || c->state == C_BODY) release_slot(s, c);
    c->state = C_WRITING;
    c->probing = 0;
    if (o->oom) {
        conn_close(c);
        return;
    }
    timer_set(c, (uint64_t)s->body_timeout_s * 1000);
    c->wr.data = c;
    if (c->sink) { /* bs_http_feed: the write completes when the feeder says so */
        bs_buf_put(c->sink, o->data, o->len);
        c->sink_written = 1;
        return;
    }
    uv_buf_t b = uv_buf_init(o->data, (unsigned)o->len);
    if (uv_write(&c->wr, (uv_stream_t *)&c->tcp, &b, 1, on_written) != 0) conn_close(c);
}

static void respond_error(conn *c, bs_reply *er, int close_after) {
    reply_t rep;
    reply_take(&rep, er);
    respond(c, &rep, close_after);
}

/* ---- the engine's callbacks ---- */

/* An engine thread: account, then hand the connection to the loop. */
static void on_done(bs_job *job, void *arg) {
    conn *c = arg;
    bs_server *s = c->s;
    release_slot(s, c);
    if (job->status == 200) {
        /* no generated text: output_tokens is always 0 (02 §4.6) */
        bs_metrics_usage(s->metrics, c->model, (int64_t)job->usage.input_tokens, 0, (int64_t)job->usage.questions);
        bs_metrics_queue(s->metrics, c->model, job->lane, job->queue_ms);
    }
    pthread_mutex_lock(&s->mu);
    c->next_done = s->done_head;
    s->done_head = c;
    if (--s->pending == 0) pthread_cond_broadcast(&s->cond);
    uv_async_send(&s->wake); /* under mu: the loop closes wake only after the last job is done */
    pthread_mutex_unlock(&s->mu);
}

static void answer(conn *c) {
    c->job_done = 1;
    if (c->closing) {
        maybe_free(c);
        return;
    }
    bs_job *j = &c->job;
    if (j->status == 0) { /* dropped: nobody to answer */
        conn_close(c);
        return;
    }
    reply_t rep;
    reply_init(&rep, j->status);
    rep.body = j->reply;
    bs_buf_init(&j->reply);
    bs_dlog_entry le;
    if (j->status == 200) {
        rep.timing = 1;
        rep.queue_ms = j->queue_ms;
        rep.compute_ms = j->compute_ms;
        rep.batch = j->batch_requests;
        rep.questions = (long)j->usage.questions;
        rep.orders = j->orders;
        if (c->s->decision_log && !j->lens) { /* respond() adds the reply and the request id */
            memset(&le, 0, sizeof le);
            bs_buf_init(&le.reply);
            le.body = c->logged_body;
            bs_buf_init(&c->logged_body);
            le.model = c->model;
            le.basal_dialect = c->dialect == BS_DIALECT_BASAL;
            le.latency_ms = bs_now_ms() - j->arrival_ms;
            le.queue_ms = j->queue_ms;
            le.compute_ms = j->compute_ms;
            rep.dlog = &le;
        }
    }
    respond(c, &rep, 0);
}

/* The loop thread (server.c's wake-up), with the connections whose job is done. */
void bs_http_answer_done(conn *done) {
    /* oldest first */
    conn *rev = NULL;
    while (done) {
        conn *n = done->next_done;
        done->next_done = rev;
        rev = done;
        done = n;
    }
    while (rev) {
        conn *n = rev->next_done;
        answer(rev);
        rev = n;
    }
}

/* ---- the steps of 02 §3 ---- */

/* Steps 4–7 once the body is in, then the engine (or an answer now). */
static void body_complete(conn *c) {
    bs_server *s = c->s;
    bs_reply er;
    bs_reply_init(&er);
    uv_timer_stop(&c->timer);
    if (c->body.oom) {
        bs_reply_too_large(&er, c->dialect, s->max_body);
        respond_error(c, &er, 1);
        return;
    }
    double arrival = bs_now_ms();
    bs_err e = { 0 };
    bj_value *body = NULL;
    int rc = bs_body_parse(c->body.data ? c->body.data : "", c->body.len, c->dialect, &body, &er, &e);
    bs_buf_free(&c->logged_body);
    if (s->decision_log && rc >= 0) { /* kept for the line of its answer; moved, not copied */
        c->logged_body = c->body;
        bs_buf_init(&c->body);
    }
    bs_buf_free(&c->body);
    if (rc < 0) {
        if (!er.body.len) bs_reply_fatal(&er, "out of memory");
        respond_error(c, &er, 0);
        return;
    }
    reply_t rep;
    if (atomic_fetch_add(&s->inflight, 1) >= s->max_inflight) {
        atomic_fetch_sub(&s->inflight, 1);
        bj_free(body);
        bs_reply_overloaded(&er, c->dialect);
        reply_take(&rep, &er);
        reply_header(&rep, "Retry-After", "1");
        respond(c, &rep, 0);
        return;
    }
    atomic_store(&c->slot, 1);
    size_t ml = 0;
    const char *mname = bs_body_model(body, &ml);
    size_t mi = mname ? find_model(s, mname, ml) : s->default_model;
    if (mi == BS_METRICS_NO_MODEL) {
        /* the body is the spec's, byte for byte (02 §12: as hosted TypeSafe
         * answers); the served names go in a header, so that a client sees
         * what it could have asked for */
        bs_reply_unknown_model(&er, c->dialect, mname, ml);
        bj_free(body);
        release_slot(s, c);
        reply_take(&rep, &er);
        reply_header(&rep, "x-basal-served-models", s->served_names.data ? s->served_names.data : "");
        respond(c, &rep, 0);
        return;
    }
    c->model = mi;
    pthread_mutex_lock(&s->mu);
    int closed = s->engines_closed;
    if (!closed) s->pending++;
    pthread_mutex_unlock(&s->mu);
    if (closed) {
        bj_free(body);
        release_slot(s, c);
        bs_reply_fatal(&er, BS_MSG_ENGINE_STOPPED);
        respond_error(c, &er, 1);
        return;
    }
    bs_reply_free(&er);
    c->admitted = 1;
    bs_metrics_admitted(s->metrics, mi, +1);
    bs_job_init(&c->job);
    c->job.body = body;
    c->job.dialect = c->dialect;
    c->job.lens = c->route == R_LENS;
    c->job.arrival_ms = arrival;
    c->job.done = on_done;
    c->job.done_ctx = c;
    c->job_live = 1;
    c->state = C_WAITING;
    bs_engine_submit(s->models[mi].engine, &c->job);
}

/* Steps 1–3 from the request line and headers. Returns 0 with *rep filled
 * when the answer is known already, 1 when the body must be read. */
static int headers_step(bs_server *s, conn *c, const char *auth, reply_t *rep) {
    const char *allow;
    bs_reply er;
    bs_reply_init(&er);
    bs_route r = c->route;
    /* the lens is the playground's: off with it */
    if (r == R_NONE || (r == R_METRICS && !s->metrics_on) || ((r == R_UI || r == R_LENS) && !s->ui_on)) {
        bs_reply_not_found(&er);
        reply_take(rep, &er);
        return 0;
    }
    int post = r == R_SYSTEMONE || r == R_BASAL || r == R_LENS;
    if (s->n_cors && !strcmp(c->method, "OPTIONS")) {
        /* a CORS preflight: never authenticated (browsers send no
         * credentials with it); the methods and headers only for an
         * allowed origin, so that a browser refuses the others */
        reply_init(rep, 204);
        reply_header(rep, "Allow", post ? "POST, OPTIONS" : "GET, HEAD, OPTIONS");
        if (cors_ok(s, c)) {
            reply_header(rep, "Access-Control-Allow-Methods", post ? "POST, OPTIONS" : "GET, HEAD, OPTIONS");
            reply_header(rep, "Access-Control-Allow-Headers", BS_CORS_ALLOW_HEADERS);
            reply_header(rep, "Access-Control-Max-Age", BS_CORS_MAX_AGE);
        }
        return 0;
    }
    if (bs_route_method_ok(r, c->method, &allow) < 0) {
        bs_reply_method(&er);
        reply_take(rep, &er);
        if (s->n_cors) allow = post ? "POST, OPTIONS" : "GET, HEAD, OPTIONS";
        reply_header(rep, "Allow", allow);
        return 0;
    }
    if (r == R_LIVE) { /* liveness: the loop answers, loading or not (a probe must not restart a loading pod) */
        reply_init(rep, 200);
        bs_buf_printf(&rep->body, "{\"status\":\"alive\",\"ready\":%s}",
                      atomic_load(&s->ready) ? "true" : "false");
        return 0;
    }
    if (r == R_HEALTH) {
        if (!atomic_load_explicit(&s->ready, memory_order_acquire)) {
            /* loading: alive but not ready (readiness fails; liveness is /health/live) */
            reply_init(rep, 503);
            bs_buf_printf(&rep->body, "{\"status\":\"loading\",\"models_loaded\":%ld,\"models_total\":%zu,",
                          atomic_load(&s->n_loaded), s->n_models);
            pthread_mutex_lock(&s->mu);
            if (s->loading_detail) bs_buf_printf(&rep->body, "%s,", s->loading_detail);
            pthread_mutex_unlock(&s->mu);
            bs_buf_puts(&rep->body, "\"models\":");
            bs_buf_puts(&rep->body, s->health_body.data + strlen("{\"status\":\"ok\",\"models\":"));
            reply_header(rep, "Retry-After", "1");
            return 0;
        }
        reply_init(rep, 200);
        bs_buf_puts(&rep->body, s->health_body.data);
        return 0;
    }
    if (r == R_UI || r == R_OPENAPI) { /* built-in files, open like /health */
        size_t len;
        reply_init(rep, 200);
        const char *data = bs_web_asset(r == R_UI ? BS_WEB_PLAYGROUND : BS_WEB_OPENAPI, &len, &rep->ctype);
        bs_buf_put(&rep->body, data, len);
        if (r == R_UI) reply_header(rep, "Content-Security-Policy", BS_WEB_PLAYGROUND_CSP);
        return 0;
    }
    if (!atomic_load_explicit(&s->ready, memory_order_acquire)) {
        bs_reply_loading(&er, c->dialect);
        reply_take(rep, &er);
        reply_header(rep, "Retry-After", "1");
        return 0;
    }
    if (r == R_METRICS) {
        bs_metrics_engine *fw = calloc(s->n_models ? s->n_models : 1, sizeof *fw);
        for (size_t i = 0; fw && i < s->n_models; i++) {
            if (!s->models[i].engine) continue; /* bs_http_feed has none */
            bs_engine_stats st;
            bs_engine_get_stats(s->models[i].engine, &st);
            fw[i].forward_tokens = st.forward_tokens;
            fw[i].lc_rounds[0] = st.lc_rounds[0];
            fw[i].lc_rounds[1] = st.lc_rounds[1];
            fw[i].orders = bs_engine_orders(s->models[i].engine);
        }
        bs_metrics_dlog dl = { 0 };
        if (s->decision_log) {
            bs_dlog_counts dc;
            bs_dlog_get_counts(s->decision_log, &dc);
            dl.lines = dc.lines;
            dl.dropped = dc.dropped;
            dl.failed = dc.failed;
        }
        reply_init(rep, 200);
        rep->ctype = "text/plain; version=0.0.4";
        bs_metrics_render(s->metrics, fw, s->decision_log ? &dl : NULL, &rep->body);
        if (!fw) rep->body.oom = 1;
        free(fw);
        return 0;
    }
    if (s->api_key) {
        int a = bs_auth_check(auth, s->api_key, s->api_key_len);
        if (a) {
            bs_reply_auth(&er, c->dialect, a);
            reply_take(rep, &er);
            if (a == 401) reply_header(rep, "WWW-Authenticate", "Bearer");
            return 0;
        }
    }
    if (r == R_MODELS) {
        reply_init(rep, 200);
        bs_buf_puts(&rep->body, s->models_body.data);
        return 0;
    }
    if (!c->chunked && c->clen > s->max_body) {
        bs_reply_too_large(&er, c->dialect, s->max_body);
        reply_take(rep, &er);
        return 0;
    }
    return 1;
}

/* The path of a request whose header block failed to parse, when its
 * request line is complete: an error of a /v1 route still carries the
 * request id (02 §1.2). */
static void path_of_failed(conn *c) {
    const char *eol = memchr(c->in, '\n', c->in_len);
    const char *sp = eol ? memchr(c->in, ' ', (size_t)(eol - c->in)) : NULL;
    if (!sp || c->path) return;
    const char *t = sp + 1, *end = t;
    while (end < eol && *end != ' ' && *end != '?' && *end != '\r') {
        if (*end < 0x21 || *end > 0x7E) return; /* the access log shows printable ASCII only */
        end++;
    }
    c->path = bs_strfmt("%.*s", (int)(end - t), t);
}

/* The answer to a header block that failed to parse (rc < 0) or is too
 * large (rc == -2 with the limit reached, or rc > MAX_HEADER_BYTES); the
 * connection closes after it. */
static void refuse_header_block(conn *c, int rc, size_t nh) {
    bs_reply er;
    bs_reply_init(&er);
    path_of_failed(c);
    bs_dialect d = c->path && bs_route_of(c->path) == R_BASAL ? BS_DIALECT_BASAL : BS_DIALECT_SYSTEMONE;
    if (rc == -2 || rc > MAX_HEADER_BYTES) bs_reply_headers_too_large(&er, d, MAX_HEADER_BYTES);
    else if (bs_http_other_major(c->in, c->in_len)) bs_reply_http_version(&er, d);
    else if (nh == MAX_HEADERS) bs_reply_too_many_headers(&er, d, MAX_HEADERS);
    else bs_reply_bad_request(&er, d, "Malformed request line or header field.");
    respond_error(c, &er, 1);
}

/* The method, path and route of the request line (m, p: into c->in).
 * Returns 0 when out of memory (the connection is then closed). */
static int take_request_line(conn *c, const char *m, size_t ml, const char *p, size_t pl) {
    if (ml < sizeof c->method) {
        memcpy(c->method, m, ml);
        c->method[ml] = 0;
    } else {
        snprintf(c->method, sizeof c->method, "?"); /* no route has such a method: 405 */
    }
    c->head = !strcmp(c->method, "HEAD");
    bs_http_target_path(&p, &pl); /* absolute-form routes by its path (RFC 9112 §3.2.2) */
    const char *q = memchr(p, '?', pl);
    size_t plen = q ? (size_t)(q - p) : pl;
    if (!(c->path = malloc(pl + 1))) {
        conn_close(c);
        return 0;
    }
    if (bs_path_decode(p, plen, c->path) >= 0) {
        c->route = bs_route_of(c->path);
    } else { /* kept for the access log: printable ASCII (the parser allows no other) */
        memcpy(c->path, p, plen);
        c->path[plen] = 0;
        c->route = R_NONE;
    }
    c->dialect = c->route == R_BASAL ? BS_DIALECT_BASAL : BS_DIALECT_SYSTEMONE;
    return 1;
}

/* the header fields this server reads */
typedef struct {
    int have_cl, bad_cl, have_te, te_chunked, conn_close_tok, conn_keep, expect;
    unsigned long long cl;
    char *auth; /* the first Authorization value, or NULL (the caller frees it) */
} req_fields;

/* The tokens of a Connection field: close, keep-alive */
static void connection_tokens(const char *v, size_t vl, req_fields *f) {
    size_t a = 0;
    while (a < vl) {
        size_t b = a;
        while (b < vl && v[b] != ',') b++;
        const char *t = v + a;
        size_t tl = b - a;
        bs_http_trim(&t, &tl);
        if (bs_http_ci_eq(t, tl, "close")) f->conn_close_tok = 1;
        if (bs_http_ci_eq(t, tl, "keep-alive")) f->conn_keep = 1;
        a = b + 1;
    }
}

/* The fields of h[0..nh) into f; the first Origin (when CORS is configured) into c->origin. */
static void read_fields(conn *c, const struct phr_header *h, size_t nh, req_fields *f) {
    for (size_t i = 0; i < nh; i++) {
        const char *v = h[i].value;
        size_t vl = h[i].value_len;
        if (!h[i].name) continue; /* obsolete line folding: the parser joined it */
        if (bs_http_ci_eq(h[i].name, h[i].name_len, "content-length")) {
            if (bs_http_content_length(v, vl, &f->have_cl, &f->cl) < 0) f->bad_cl = 1;
        } else if (bs_http_ci_eq(h[i].name, h[i].name_len, "transfer-encoding")) {
            bs_http_trim(&v, &vl);
            /* only "chunked" alone, in one field (several codings, or a
             * second field, is a coding this server does not implement) */
            f->te_chunked = !f->have_te && bs_http_ci_eq(v, vl, "chunked");
            f->have_te = 1;
        } else if (bs_http_ci_eq(h[i].name, h[i].name_len, "connection")) {
            connection_tokens(v, vl, f);
        } else if (bs_http_ci_eq(h[i].name, h[i].name_len, "expect")) {
            bs_http_trim(&v, &vl);
            f->expect = bs_http_ci_eq(v, vl, "100-continue");
        } else if (bs_http_ci_eq(h[i].name, h[i].name_len, "origin") && !c->origin && c->s->n_cors) {
            bs_http_trim(&v, &vl);
            if ((c->origin = malloc(vl + 1))) {
                memcpy(c->origin, v, vl);
                c->origin[vl] = 0;
            }
        } else if (bs_http_ci_eq(h[i].name, h[i].name_len, "authorization") && !f->auth) {
            if ((f->auth = malloc(vl + 1))) {
                memcpy(f->auth, v, vl);
                f->auth[vl] = 0;
            }
        }
    }
}

/* Parses the header block in c->in. Returns 1 when the body is to be read
 * next, 0 when more input is needed or the request was answered. */
static int parse_headers(conn *c) {
    bs_server *s = c->s;
    bs_reply er;
    bs_reply_init(&er);
    struct phr_header h[MAX_HEADERS];
    size_t nh = MAX_HEADERS, ml = 0, pl = 0;
    const char *m = NULL, *p = NULL;
    int minor = 1;
    /* last_len: only the new bytes are searched for the end of the block,
     * so a header block trickling in byte by byte costs linear time */
    int rc = phr_parse_request(c->in, c->in_len, &m, &ml, &p, &pl, &minor, h, &nh, c->scanned);
    if (rc == -2 && c->in_len <= MAX_HEADER_BYTES) {
        c->scanned = c->in_len;
        return 0;
    }
    c->scanned = 0;
    c->start_ms = bs_now_ms();
    if (rc == -2 || rc > MAX_HEADER_BYTES || rc < 0) {
        refuse_header_block(c, rc, nh);
        return 0;
    }
    c->minor = minor;
    if (!take_request_line(c, m, ml, p, pl)) return 0;
    req_fields f = {0};
    read_fields(c, h, nh, &f);
    /* the header block is consumed; h[] points into it and is dead below */
    memmove(c->in, c->in + rc, c->in_len - (size_t)rc);
    c->in_len -= (size_t)rc;
    c->keep_alive = minor >= 1 ? !f.conn_close_tok : f.conn_keep && !f.conn_close_tok;
    if (f.have_te && f.have_cl) {
        bs_reply_bad_request(&er, c->dialect, "Content-Length and Transfer-Encoding together.");
    } else if (f.bad_cl) {
        bs_reply_bad_request(&er, c->dialect, "Invalid or conflicting Content-Length.");
    } else if (f.have_te && !f.te_chunked) {
        bs_reply_not_implemented(&er, c->dialect);
    }
    if (er.status) {
        free(f.auth);
        respond_error(c, &er, 1);
        return 0;
    }
    c->chunked = f.have_te;
    c->clen = f.cl;
    int inference = c->route == R_SYSTEMONE || c->route == R_BASAL;
    const char *allow;
    if (inference && bs_route_method_ok(c->route, c->method, &allow) == 0) {
        c->endpoint = c->route == R_BASAL ? BS_EP_BASAL : BS_EP_SYSTEMONE;
        bs_metrics_http_begin(s->metrics, c->endpoint);
    }
    reply_t rep;
    int more = headers_step(s, c, f.auth, &rep);
    free(f.auth);
    if (!more) {
        /* a body nobody reads: answer, then close */
        respond(c, &rep, c->chunked || c->clen > 0);
        return 0;
    }
    if (f.expect && minor >= 1 && write_interim(c) < 0) {
        conn_close(c);
        return 0;
    }
    c->state = C_BODY;
    timer_set(c, (uint64_t)s->body_timeout_s * 1000);
    return 1;
}

/* Moves body bytes from c->in to c->body. Returns 1 when the body is
 * complete, 0 when more is needed or the request was answered. */
static int read_body(conn *c) {
    bs_server *s = c->s;
    bs_reply er;
    bs_reply_init(&er);
    if (!c->chunked) {
        unsigned long long want = c->clen - c->received;
        size_t take = c->in_len < want ? c->in_len : (size_t)want;
        bs_buf_put(&c->body, c->in, take);
        c->received += take;
        memmove(c->in, c->in + take, c->in_len - take);
        c->in_len -= take;
        return c->received == c->clen;
    }
    size_t sz = c->in_len, was = c->in_len;
    long r = bs_chunked_decode(&c->dec, c->in, &sz);
    if (r == -1) {
        bs_reply_bad_request(&er, c->dialect, "Invalid chunked body.");
        respond_error(c, &er, 1);
        return 0;
    }
    c->received += sz;
    /* over the limit, or a chunk announced that would take it there: 413 now */
    if (c->received > s->max_body || c->dec.left > s->max_body - c->received) {
        bs_reply_too_large(&er, c->dialect, s->max_body);
        respond_error(c, &er, 1);
        return 0;
    }
    bs_buf_put(&c->body, c->in, sz);
    if (r == -2) {
        c->in_len = 0;
        return 0;
    }
    memmove(c->in, c->in + was - (size_t)r, (size_t)r);
    c->in_len = (size_t)r;
    return 1;
}

static void process_input(conn *c) {
    if (c->state == C_HEADERS && !parse_headers(c)) return;
    if (c->state == C_BODY && !c->closing && read_body(c)) body_complete(c);
}

/* ---- accepting ---- */

/* A connection over a limit gets a 503 JSON (Retry-After: 1), or, when
 * REFUSE_SLACK of them are being answered already, is closed at once. */
static void refuse(conn *c, int per_client) {
    bs_server *s = c->s;
    if (s->n_refused >= REFUSE_SLACK) {
        conn_close(c);
        return;
    }
    c->refused = 1;
    s->n_refused++;
    bs_reply er;
    bs_reply_init(&er);
    bs_reply_connections(&er, BS_DIALECT_SYSTEMONE, per_client);
    reply_t rep;
    reply_take(&rep, &er);
    reply_header(&rep, "Retry-After", "1");
    c->start_ms = bs_now_ms();
    c->state = C_WRITING;
    respond(c, &rep, 1);
}

/* With every connection taken, the one that has waited longest for a header
 * block (an idle keep-alive connection or a slow sender) makes room for the
 * newcomer: trickling connections from many addresses then cannot lock
 * clients out, they only push each other out. NULL when all are busy with
 * requests. */
static conn *oldest_waiting(bs_server *s) {
    conn *best = NULL;
    for (conn *c = s->conns; c; c = c->next)
        if (c->active && !c->closing && (c->state == C_IDLE || c->state == C_HEADERS) &&
            (!best || c->since_ms < best->since_ms))
            best = c;
    return best;
}

static void free_handle(uv_handle_t *h) { free(h); }

/* A new connection's state and handles, linked into the server's list
 * (an accepted one, or the fuzzer's in-memory one). */
static void conn_setup(bs_server *s, conn *c) {
    c->s = s;
    c->read_stopped = 1;
    reset_request(c);
    uv_tcp_init(&s->loop, &c->tcp);
    uv_timer_init(&s->loop, &c->timer);
    c->tcp.data = c->timer.data = c;
    c->open_handles = 2;
    c->next = s->conns;
    if (s->conns) s->conns->prev = c;
    s->conns = c;
    s->n_conns++;
    atomic_fetch_add(&s->live, 1);
}

void bs_http_on_connection(uv_stream_t *l, int status) {
    bs_server *s = l->data;
    if (status < 0) return;
    conn *c = calloc(1, sizeof *c);
    if (!c) {
        /* out of memory: take the connection off the queue and drop it */
        uv_tcp_t *t = malloc(sizeof *t);
        if (t && uv_tcp_init(&s->loop, t) == 0) {
            if (uv_accept(l, (uv_stream_t *)t) == 0) {}
            uv_close((uv_handle_t *)t, free_handle);
        } else {
            free(t);
        }
        return;
    }
    conn_setup(s, c);
    if (uv_accept(l, (uv_stream_t *)&c->tcp) != 0) {
        conn_close(c);
        return;
    }
    uv_tcp_nodelay(&c->tcp, 1);
    c->keep_alive = 0;
    unsigned char key[16];
    peer_key(c, key);
    ip_entry **p = ip_slot(s, key);
    if (*p && (*p)->count >= s->max_client_conn) {
        refuse(c, 1);
        return;
    }
    if (s->n_active >= s->max_conn) {
        conn *victim = oldest_waiting(s);
        if (!victim) {
            refuse(c, 0);
            return;
        }
        conn_close(victim);
        p = ip_slot(s, key); /* the victim's entry may have been freed */
    }
    if (!*p) {
        if (!(*p = calloc(1, sizeof **p))) {
            conn_close(c);
            return;
        }
        memcpy((*p)->addr, key, 16);
    }
    (*p)->count++;
    c->ip = *p;
    c->active = 1;
    s->n_active++;
    c->state = C_IDLE;
    c->since_ms = bs_now_ms();
    timer_set(c, (uint64_t)s->header_timeout_s * 1000);
    start_reading(c);
}

/* server.c's wake-up: draining for shutdown (idle ones), the loop's end (all). */
void bs_http_close_idle(bs_server *s) {
    for (conn *c = s->conns; c; c = c->next)
        if (c->state == C_IDLE && !c->in_len) conn_close(c);
}

void bs_http_close_all(bs_server *s) {
    for (conn *c = s->conns; c; c = c->next) conn_close(c);
}

/* ---- bs_http_feed's connection (server_int.h; server.c builds its server) ---- */

/* The completions a loop would deliver: finished writes. */
static void feed_settle(conn *c) {
    while (!c->closing && c->sink_written) {
        c->sink_written = 0;
        on_written(&c->wr, 0);
    }
}

int bs_http_feed_conn(bs_server *s, const char *data, size_t len, size_t chunk, bs_buf *out) {
    conn *c = calloc(1, sizeof *c);
    if (!c) return -1;
    /* set up as on_connection sets up an accepted connection (the server
     * is a fresh one: this is its only connection) */
    conn_setup(s, c);
    c->sink = out;
    s->n_active = 1;
    c->active = 1;
    c->state = C_IDLE;
    c->since_ms = bs_now_ms();
    size_t step = chunk ? chunk : len ? len : 1, at = 0;
    while (at < len && !c->closing) {
        size_t end = len - at < step ? len : at + step;
        while (at < end && !c->closing) { /* on_alloc may offer less than a piece */
            uv_buf_t b;
            on_alloc((uv_handle_t *)&c->tcp, end - at, &b);
            if (!b.base || !b.len) {
                on_read((uv_stream_t *)&c->tcp, UV_ENOBUFS, &b);
                break;
            }
            size_t k = end - at < b.len ? end - at : b.len;
            memcpy(b.base, data + at, k);
            at += k;
            on_read((uv_stream_t *)&c->tcp, (ssize_t)k, &b);
            feed_settle(c);
        }
    }
    if (!c->closing) {
        uv_buf_t b = uv_buf_init(NULL, 0);
        on_read((uv_stream_t *)&c->tcp, UV_EOF, &b);
        feed_settle(c);
    }
    if (!c->closing) conn_close(c);
    return 0;
}
