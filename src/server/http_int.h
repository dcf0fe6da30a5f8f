/* The server object, shared by the two halves of the HTTP server and by
 * nothing else: server.c gives it its life (start, the loop thread and its
 * wake-ups, the loading state, shutdown, destroy, bs_http_feed's server) and
 * http.c runs its connections (accept, read, parse, steps 1–7 of spec 02 §3,
 * the engine's callbacks, write, linger, deadlines). A connection (conn) is
 * http.c's alone: server.c only hands it the listener's new connections, the
 * done list and the moments to close them. Not in server_int.h, which routes.c,
 * the unit tests and the fuzz targets also include: none of them need libuv's
 * handles or the connection bookkeeping. */
#ifndef BS_HTTP_INT_H
#define BS_HTTP_INT_H

#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <time.h>
#include <uv.h>

#include "base/util.h"
#include "server/decision_log.h"
#include "server/metrics.h"
#include "server/server.h"

#define READ_CHUNK 16384
#define REFUSE_SLACK 256        /* refused connections still being answered 503; more are closed at once */

typedef struct {
    char *name;
    char **aliases;
    size_t n_aliases;
    char *dtype; /* shown by GET /v1/models, or NULL (bs_server_model.dtype) */
    bs_engine *engine;
    bs_server *s; /* for the engine's batch hook */
} model_t;

/* Connections per client address (IPv4 as v4-mapped IPv6). */
typedef struct ip_entry {
    unsigned char addr[16];
    long count;
    struct ip_entry *next;
} ip_entry;
#define IP_BUCKETS 4096

typedef struct conn conn; /* http.c */

struct bs_server {
    model_t *models;
    size_t n_models, default_model;
    long max_inflight;
    unsigned long long max_body;
    long header_timeout_s, body_timeout_s, keepalive_timeout_s;
    long max_conn, max_client_conn;
    char *api_key;
    size_t api_key_len;
    bs_log_sink *access_log; /* NULL: off */
    bs_dlog *decision_log;   /* NULL: off; borrowed */
    int metrics_on, ui_on;
    bs_metrics *metrics;
    bs_buf models_body, health_body;
    /* the loading state: engines arrive with bs_server_set_ready */
    atomic_int ready;
    atomic_long n_loaded;
    bs_buf served_names;     /* x-basal-served-models (an unknown model's answer) */
    char **cors;             /* CORS origins ("*" = any); n_cors 0 = CORS off */
    size_t n_cors;
    int listen_fd;
    /* loop thread only */
    uv_loop_t loop;
    uv_tcp_t listener;
    uv_async_t wake;
    uv_thread_t thread;
    int loop_ready, thread_started, listener_closed_loop;
    conn *conns;             /* every open connection */
    long n_conns;            /* open connections (handles not yet closed) */
    long n_active;           /* of them: served, not refused (max_conn) */
    long n_refused;          /* of them: being answered 503 (REFUSE_SLACK) */
    ip_entry *ips[IP_BUCKETS];
    char scratch[READ_CHUNK];
    char date[40];
    time_t date_at;
    /* shared */
    atomic_long inflight;    /* admitted requests of all models (02 §6) */
    atomic_long live;        /* connections not yet closed */
    atomic_int stopping;
    pthread_mutex_t mu;      /* guards the fields below */
    char *loading_detail;    /* bs_server_set_loading_detail, or NULL */
    pthread_cond_t cond;     /* pending or live reached 0, the listener closed */
    long pending;            /* jobs submitted and not yet done */
    int engines_closed, listener_closed, quit;
    conn *done_head;         /* connections whose job is done, for the loop */
};

/* ---- http.c, called on the loop thread by server.c ---- */

/* The listener's callback (uv_listen): accepts one connection, within the
 * connection limits. */
void bs_http_on_connection(uv_stream_t *l, int status);
/* Answers the connections of a done list taken from s->done_head (newest
 * first, as the engines' done callbacks push them), oldest first. */
void bs_http_answer_done(conn *done);
/* Draining for shutdown: closes the connections waiting for a request with
 * nothing of one read. */
void bs_http_close_idle(bs_server *s);
/* Closes every connection (the loop's end). */
void bs_http_close_all(bs_server *s);
/* bs_http_feed's connection on s (whose loop is initialised): set up as an
 * accepted one, fed data in pieces of chunk bytes (0: all at once) then the
 * end of input, what it writes appended to out, then closed; running s's
 * loop afterwards frees it. Returns 0, or -1 when out of memory before
 * anything ran. */
int bs_http_feed_conn(bs_server *s, const char *data, size_t len, size_t chunk, bs_buf *out);

#endif
