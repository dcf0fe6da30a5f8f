/* Internals shared by the server's files: routes and fixed bodies
 * (routes.c) and the HTTP layer (http.c, server.c; the server object those
 * two share is in http_int.h). */
#ifndef BS_SERVER_INT_H
#define BS_SERVER_INT_H

#include <stddef.h>

#include "protocol/request.h"
#include "base/util.h"

/* R_HEALTH: readiness (503 while the models load, 200 when ready); R_LIVE
 * (/health/live, this project's): liveness, 200 whenever the server answers. */
typedef enum { R_NONE, R_SYSTEMONE, R_BASAL, R_MODELS, R_HEALTH, R_METRICS, R_UI, R_OPENAPI, R_LIVE, R_LENS } bs_route;

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


/* CORS (opt-in): is this Origin header value one of the configured origins
 * ("*" allows any)? Scheme and host compare without regard to ASCII case
 * (RFC 6454 §6.1 serialises them lower-case; a configuration may not). */
int bs_cors_allowed(const char *const *origins, size_t n, const char *origin, size_t len);
/* The headers a preflight allows (the request's own ones are read by
 * nothing here: a fixed list keeps the answer cacheable by Max-Age). */
#define BS_CORS_ALLOW_HEADERS "Authorization, Content-Type, X-Request-Id"
#define BS_CORS_EXPOSE_HEADERS \
    "x-typesafe-request-id, x-basal-queue-ms, x-basal-compute-ms, x-basal-batch-requests, x-basal-orders, " \
    "x-basal-served-models, retry-after"
#define BS_CORS_MAX_AGE "600"

/* The served names for a header value (x-basal-served-models on an unknown
 * model's answer): comma-separated, bytes outside printable ASCII and '%'
 * or ',' percent-encoded, so that no name can break the header block. */
void bs_names_header(bs_buf *out, const char *const *names, size_t n);

/* HTTP/1.1 pieces of http.c's request handling (in routes.c). */
const char *bs_http_reason(int status);
/* ASCII-case-insensitive equality of [a, a + n) and the literal. */
int bs_http_ci_eq(const char *a, size_t n, const char *lit);
/* Trims optional whitespace (SP, HTAB) around [*p, *p + *n). */
void bs_http_trim(const char **p, size_t *n);
/* One Content-Length field value: a comma list of equal decimal numbers
 * (RFC 9112 §6.3), merged into *have / *out; -1 when invalid or different
 * from an earlier value; numbers beyond 64 bits become ULLONG_MAX. */
int bs_http_content_length(const char *v, size_t n, int *have, unsigned long long *out);
/* Does the first line of in end in an HTTP version whose major is not 1? */
int bs_http_other_major(const char *in, size_t len);
/* The path of a request target: origin-form as it is; absolute-form
 * ("http://host:port/p?q", which RFC 9112 §3.2.2 says a server MUST accept)
 * without its scheme and authority, "/" when it has no path. */
void bs_http_target_path(const char **t, size_t *n);

/* A chunked request body (RFC 9112 §7.1), decoded strictly: the chunk size is
 * one or more hex digits (a value below 2^64) followed only by optional
 * whitespace, a chunk extension (';' ...; at most 16 KiB of them per body) or
 * CRLF; every line ends in CRLF. Zeroed = at the start. */
typedef struct {
    unsigned long long left; /* the size being read, then the data bytes left in the chunk */
    int state;
    size_t ext;              /* extension bytes of the body so far */
    size_t line;             /* bytes of the current size or trailer line */
    size_t trailer;          /* bytes of the trailer section */
} bs_chunked;
/* Decodes buf[0, *n) in place: the body bytes found move to the front and
 * *n becomes their count. Returns -2 when the body continues, -1 when its
 * framing is invalid, else the number of bytes after the body's end, which
 * are left at the tail of the input (phr_decode_chunked's contract). */
long bs_chunked_decode(bs_chunked *d, char *buf, size_t *n);

/* The HTTP fuzz target's entry (tests/fuzz/fuzz_http.c): the bytes of one
 * client connection fed through the server's own reading, parsing, routing
 * and answering code as a connection on the loop would get them (in pieces
 * of `chunk` bytes, then the end of input), without a socket: what the
 * server would write is appended to out. The server behind it has one model
 * ("basal-tiny") whose engine has stopped, so a request that passes every
 * HTTP and body check is answered 500 "engine stopped" (02 §4.5); the
 * engines themselves are fuzzed through fuzz_plan. Returns 0, or -1 when out
 * of memory before anything ran. */
typedef struct bs_http_feed_opts {
    int api_key;                 /* Bearer key "k3y" required */
    int cors;                    /* cors_origins ["https://a.example"] */
    int metrics;                 /* GET /metrics served */
    unsigned long long max_body; /* max_body_bytes */
    size_t chunk;                /* bytes per read (0: all at once) */
} bs_http_feed_opts;
int bs_http_feed(const bs_http_feed_opts *o, const char *data, size_t len, bs_buf *out);

/* 32 lowercase hex digits, unique per request (02 §1.2). */
void bs_request_id(char out[33]);

#endif
