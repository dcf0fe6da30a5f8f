/* Every error reply of both dialects, in one place (spec 02 §2, §4.3–§4.5,
 * §5.2, §6, §10). A request that fails anywhere — HTTP layer, validation,
 * planning, the engine — gets its status and JSON body from a function here
 * (request_err.c writes the error objects of validation lists; their envelopes
 * are here).
 *
 *   /v1/systemone  FastAPI/TypeSafe shapes: {"detail":…} or {"error":…,"detail":…}
 *   /v1/basal      422 {"error":"<message>"} for almost everything */
#ifndef BS_REPLY_H
#define BS_REPLY_H

#include <stddef.h>

#include "base/util.h"

typedef enum { BS_DIALECT_SYSTEMONE, BS_DIALECT_BASAL } bs_dialect;

/* A finished answer: HTTP status and JSON body. Initialise with bs_reply_init;
 * every function below replaces the body. */
typedef struct bs_reply {
    int status;
    bs_buf body;
} bs_reply;
void bs_reply_init(bs_reply *r);
void bs_reply_free(bs_reply *r);

/* /v1/basal's shape: status {"error":"<msg>"} (msg: n UTF-8 bytes). */
void bs_reply_basal(bs_reply *r, int status, const char *msg, size_t n);
/* A failure of planning or of the batch's computation (letters that are not
 * single tokens, non-finite logits, out of memory): /v1/systemone 500
 * {"error":"internal","detail":msg}; /v1/basal 422 {"error":msg}. */
void bs_reply_internal(bs_reply *r, bs_dialect d, const char *msg);
/* The server cannot compute at all (engine stopped, out of memory while
 * answering): 500 {"error":"internal","detail":msg} in both dialects. */
void bs_reply_fatal(bs_reply *r, const char *msg);
#define BS_MSG_ENGINE_STOPPED "engine stopped"
/* Step 4: the body is not JSON (msg: the decoder's message at character pos,
 * line lineno, column colno): /v1/systemone 422 {"detail":[{"type":
 * "json_invalid","loc":["body",pos],"msg":"JSON decode error","input":{},
 * "ctx":{"error":msg}}]}; /v1/basal 422 {"error":"<msg>: line L column C
 * (char P)"} (json.loads' message). */
void bs_reply_json_invalid(bs_reply *r, bs_dialect d, const char *msg, size_t pos, size_t lineno, size_t colno);
/* Step 7: /v1/systemone 400 api_usage_error, /v1/basal 422 "Unknown model: <m>". */
void bs_reply_unknown_model(bs_reply *r, bs_dialect d, const char *model, size_t len);
/* The validation envelopes (request_err.c writes the error objects, comma-
 * joined, as items): 422 {"detail":[items]} (FastAPI's list); 400
 * {"detail":{"error_type":"api_usage_error","message":msg}} (as_object) or
 * {"detail":msg}; 422 {"error":"unsupported","detail":[items]}. */
void bs_reply_validation(bs_reply *r, const char *items, size_t n);
void bs_reply_usage(bs_reply *r, int as_object, const char *msg, size_t n);
void bs_reply_unsupported_items(bs_reply *r, const char *items, size_t n);
/* 03 §2.5 / 02 §4.5: an act decision refused by max_error without a defer
 * action fails the whole request: /v1/systemone 422 {"detail":[{"type":
 * "value_error","loc":["body","questions",q],"msg":…}]}, /v1/basal 422
 * {"error":msg}. */
void bs_reply_act_refusal(bs_reply *r, bs_dialect d, const char *qid, size_t qid_len);
/* 02 §2: 403 (missing key) or 401 (wrong key). */
void bs_reply_auth(bs_reply *r, bs_dialect d, int status);
/* 02 §6: 529 (the caller adds Retry-After). */
void bs_reply_overloaded(bs_reply *r, bs_dialect d);
/* 02 §10: 413. */
void bs_reply_too_large(bs_reply *r, bs_dialect d, unsigned long long limit);
/* 404 and 405 (no dialect: the path is not one of ours, or the method). */
void bs_reply_not_found(bs_reply *r);
void bs_reply_method(bs_reply *r);

/* Errors of the HTTP layer itself (spec 02 §1.2: every body is JSON). d is the
 * route's dialect when the request line named one of the POST routes, else
 * BS_DIALECT_SYSTEMONE: /v1/systemone {"detail":{"error_type","message"}},
 * /v1/basal {"error":msg}. */
/* 400: the request is not valid HTTP/1.1 (why: a sentence, ASCII). */
void bs_reply_bad_request(bs_reply *r, bs_dialect d, const char *why);
/* 408: the header block or the body did not arrive within `seconds`. */
void bs_reply_timeout(bs_reply *r, bs_dialect d, int body, long seconds);
/* 431: the header block is larger than `limit` bytes. */
void bs_reply_headers_too_large(bs_reply *r, bs_dialect d, unsigned long limit);
void bs_reply_too_many_headers(bs_reply *r, bs_dialect d, unsigned long limit);
/* 501: a Transfer-Encoding other than chunked. */
void bs_reply_not_implemented(bs_reply *r, bs_dialect d);
/* 505: an HTTP major version other than 1. */
void bs_reply_http_version(bs_reply *r, bs_dialect d);
/* 503: too many connections (per_client: from this client's address); the
 * caller adds Retry-After. */
void bs_reply_connections(bs_reply *r, bs_dialect d, int per_client);
/* 503 while `basal serve` loads its models (the caller adds Retry-After):
 * /v1/systemone {"detail":{"error_type":"service_unavailable","message":…}},
 * /v1/basal {"error":"service unavailable: the server is loading its models"}. */
void bs_reply_loading(bs_reply *r, bs_dialect d);

/* A 422 "unsupported" list built while planning (prompt_too_long, 02 §4.5;
 * the request limits): /v1/systemone {"error":"unsupported","detail":[{"type",
 * "loc":["body","questions",q],"msg"},…]} (loc ["body","questions"] when qid
 * is NULL: the request as a whole); /v1/basal the msgs joined with "; ". */
typedef struct bs_unsupported {
    bs_dialect d;
    bs_buf items;
    size_t n;
} bs_unsupported;
void bs_unsupported_init(bs_unsupported *u, bs_dialect d);
void bs_unsupported_add(bs_unsupported *u, const char *type, const char *qid, size_t qid_len, const char *msg);
void bs_unsupported_reply(const bs_unsupported *u, bs_reply *r);
void bs_unsupported_free(bs_unsupported *u);

#endif
