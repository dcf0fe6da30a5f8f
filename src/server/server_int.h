/* Internals shared by the server's files: routes and fixed bodies
 * (routes.c), the hang-up watcher (watch.c), the HTTP layer (http.c). */
#ifndef BS_SERVER_INT_H
#define BS_SERVER_INT_H

#include <stddef.h>

#include "core/request.h"
#include "core/util.h"

typedef enum { R_NONE, R_SYSTEMONE, R_BASAL, R_MODELS, R_HEALTH, R_METRICS } bs_route;

bs_route bs_route_of(const char *url);
/* 0 = allowed; else the 405's Allow value is given. */
int bs_route_method_ok(bs_route r, const char *method, const char **allow);

/* 02 §2: 0 when the header carries the key; 403 (missing, empty token, other
 * scheme) or 401 (wrong token). Constant time in the token. */
int bs_auth_check(const char *header, const char *key, size_t key_len);

/* The fixed error bodies of 02 §2, §6, §10 for a dialect. */
void bs_body_auth(bs_buf *b, bs_dialect d, int status);
void bs_body_overloaded(bs_buf *b, bs_dialect d);
void bs_body_too_large(bs_buf *b, bs_dialect d, unsigned long long limit);
void bs_body_engine_stopped(bs_buf *b);
#define BS_BODY_NOT_FOUND "{\"detail\":\"Not Found\"}"
#define BS_BODY_METHOD "{\"detail\":\"Method Not Allowed\"}"

/* 32 lowercase hex digits, unique per request (02 §1.2). */
void bs_request_id(char out[33]);

/* Reads usage.input_tokens / output_tokens / questions from a 200 body made
 * by the engine (the last "usage" object); -1 where absent. */
void bs_reply_usage(const char *body, size_t len, long long *input, long long *output, long long *questions);

/* ---- hang-up watcher ---- */

typedef struct bs_watch bs_watch;
typedef void (*bs_watch_fn)(void *ctx);

/* gone(ctx) runs on the watcher thread when a watched socket's peer closes. */
bs_watch *bs_watch_create(bs_watch_fn gone, bs_err *e);
void bs_watch_destroy(bs_watch *w);
/* Returns an id (>= 0) or a negative code. */
long bs_watch_add(bs_watch *w, int fd, void *ctx);
/* After this returns, gone() is neither running nor will run for that id. */
void bs_watch_remove(bs_watch *w, long id);

#endif
