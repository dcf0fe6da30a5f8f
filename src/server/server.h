/* The HTTP server of `basal serve` (spec 02): POST /v1/systemone and
 * /v1/basal, GET/HEAD /v1/models, GET /health, GET /metrics, GET / (the
 * playground page) and GET /openapi.json, on libuv (one loop thread;
 * server.c: the server's life, http.c: its connections). A decision request
 * is parsed and admitted on the loop thread (02 §3 steps 1–7) and handed to
 * its model's engine; no thread waits for the answer: the engine's done
 * callback wakes the loop, which writes it. A client that hangs up while its
 * request waits has its job cancelled and its in-flight slot freed (04 §11
 * X1). */
#ifndef BS_SERVER_H
#define BS_SERVER_H

#include <stddef.h>

#include "basal.h"
#include "base/log.h"
#include "engine/engine.h"

/* The release_date of GET /v1/models unless the configuration sets one. */
#define BS_DEFAULT_RELEASE_DATE "2026-10-05"

typedef struct bs_server_model {
    const char *name;              /* served name (basal.json) */
    const char *const *aliases;    /* extra names routed here (02 §11) */
    size_t n_aliases;
    const char *dtype;             /* "bf16", "int8w" or "int8" for the opt-in CPU modes: GET /v1/models adds
                                      "dtype":"<mode>" to the model (issues 16, 34); NULL: the spec's exact
                                      body (02 §7) */
    bs_engine *engine;             /* borrowed; must outlive the server's use of it. NULL while the
                                      models load: bs_server_set_ready hands the engines over */
} bs_server_model;

typedef struct bs_server_opts {
    const bs_server_model *models;
    size_t n_models;
    size_t default_model;          /* index: the model of requests without a string "model" */
    int listen_fd;                 /* a bound, listening socket; the server closes it */
    long max_inflight;             /* 02 §6 */
    unsigned long long max_body_bytes;
    const char *api_key;           /* NULL: no authentication (02 §2) */
    size_t api_key_len;
    const char *release_date;      /* GET /v1/models; NULL = BS_DEFAULT_RELEASE_DATE */
    int metrics;                   /* serve GET /metrics */
    int no_ui;                     /* GET / is a 404 instead of the playground page */
    bs_log_sink *access_log;       /* one line per request (base/log.h), or NULL; borrowed */
    struct bs_dlog *decision_log;  /* one line per answered request (server/decision_log.h), or NULL;
                                      borrowed: close it after bs_server_stop */
    /* HTTP deadlines and connection limits; 0 = the default below */
    long header_timeout_s;         /* request line + headers, from their first byte */
    long body_timeout_s;           /* the body, from the end of the headers; also for taking an answer */
    long keepalive_timeout_s;      /* an idle keep-alive connection */
    long max_connections;          /* open connections in all (0: max_inflight + 1024, within the fd limit) */
    long max_client_connections;   /* open connections per client address */
    /* CORS, opt-in (none = off: OPTIONS is a 405 like any other method):
     * the origins allowed to call from a browser, "*" = any. */
    const char *const *cors_origins;
    size_t n_cors_origins;
} bs_server_opts;

#define BS_DEFAULT_HEADER_TIMEOUT_S 10
#define BS_DEFAULT_BODY_TIMEOUT_S 60
#define BS_DEFAULT_KEEPALIVE_TIMEOUT_S 5
#define BS_DEFAULT_MAX_CLIENT_CONNECTIONS 128

typedef struct bs_server bs_server;

/* Starts serving on o->listen_fd (the strings of o are copied). When the
 * engines of o->models are NULL the server starts in the loading state:
 * GET /health answers 503 {"status":"loading",...}, every other route 503
 * with Retry-After (unknown paths and wrong methods keep their 404 / 405),
 * until bs_server_set_ready. */
int bs_server_start(bs_server **out, const bs_server_opts *o, bs_err *e);
/* While loading: how many models are loaded (shown by /health). */
void bs_server_set_loaded(bs_server *s, size_t loaded);
/* While loading: what the start is doing now, as JSON members that /health
 * shows before "models" (e.g. "phase":"downloading","download":{...});
 * NULL or "" removes them. The text is copied; any thread may call this. */
void bs_server_set_loading_detail(bs_server *s, const char *json_members);
/* Hands over one engine per model (in o->models order) and starts answering
 * every route; /health turns 200. Call once, from one thread. */
void bs_server_set_ready(bs_server *s, bs_engine *const *engines);
/* Stops accepting connections and waits until every submitted job has been
 * completed by its engine; from then on nothing is submitted (a request still
 * arriving on an open connection gets 500 "engine stopped"), so the engines
 * may be destroyed. Responses after this call carry Connection: close. */
void bs_server_shutdown(bs_server *s);
/* Lets the last responses go out (bounded wait), stops the HTTP daemon and
 * frees the server. Call after bs_server_shutdown. */
void bs_server_destroy(bs_server *s);

#endif
