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


/* 32 lowercase hex digits, unique per request (02 §1.2). */
void bs_request_id(char out[33]);

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
