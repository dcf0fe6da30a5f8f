/* Internals shared by the server's files: routes and fixed bodies
 * (routes.c) and the HTTP layer (http.c). */
#ifndef BS_SERVER_INT_H
#define BS_SERVER_INT_H

#include <stddef.h>

#include "core/request.h"
#include "core/util.h"

/* R_HEALTH: readiness (503 while the models load, 200 when ready); R_LIVE
 * (/health/live, this project's): liveness, 200 whenever the server answers. */
typedef enum { R_NONE, R_SYSTEMONE, R_BASAL, R_MODELS, R_HEALTH, R_METRICS, R_UI, R_OPENAPI, R_LIVE } bs_route;

/* The path of a request target (raw: n bytes, up to '?'), percent-decoded
 * into out (room for n + 1 bytes, NUL-terminated). Returns the decoded length,
 * or -1 when it cannot name a route: a malformed %-escape, or a NUL byte
 * (raw or %00: C string routing would stop there, 02 §10 answers 404). */
long bs_path_decode(const char *raw, size_t n, char *out);
bs_route bs_route_of(const char *url);
/* 0 = allowed; else the 405's Allow value is given. */
int bs_route_method_ok(bs_route r, const char *method, const char **allow);

/* 02 §2: 0 when the header carries the key; 403 (missing, empty token, other
 * scheme) or 401 (wrong token). Constant time in the token. */
int bs_auth_check(const char *header, const char *key, size_t key_len);


/* 32 lowercase hex digits, unique per request (02 §1.2). */
void bs_request_id(char out[33]);

#endif
