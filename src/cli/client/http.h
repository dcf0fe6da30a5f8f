/* What the commands that talk to a running server over HTTP share (`basal
 * client`, `basal eval`): the base URL's checks and its endpoints, the
 * request headers with the API key as a bearer token, the settings every
 * libcurl handle gets, and the retry rule of basal-rs's client (transient
 * statuses, backoff 1, 2, 4, 8, 16 s or the server's Retry-After). */
#ifndef BS_CLI_CLIENT_HTTP_H
#define BS_CLI_CLIENT_HTTP_H

#include <curl/curl.h>
#include <stddef.h>

#include "base/util.h"

#define CL_DEFAULT_URL "http://127.0.0.1:8000"

typedef struct cl_http {
    char *url_decide, *url_models; /* <base>/v1/systemone, <base>/v1/models */
    struct curl_slist *headers;
    long timeout_s;                /* per attempt, the response body included */
    const char *user_agent;        /* "basal-client/0.1.0" */
} cl_http;

/* The endpoints of a base URL: url, else $BASAL_URL, else CL_DEFAULT_URL;
 * http or https, no credentials, query or fragment, trailing slashes
 * dropped. 0, or 2 after "basal CMD: ..." on stderr. */
int cl_http_urls(cl_http *h, const char *cmd, const char *url);
/* Content-Type, no Expect, and Authorization: Bearer with the value of the
 * environment variable key_env when it is set and not empty (a value with
 * control bytes is refused). 0, or 2 after a message. */
int cl_http_headers(cl_http *h, const char *cmd, const char *key_env);
void cl_http_free(cl_http *h);

/* The settings of every handle: headers, user agent, timeouts, no
 * redirects, no signals (the caller sets the URL, body and callbacks). */
void cl_http_easy(const cl_http *h, CURL *c);

/* HTTP statuses worth another attempt: 408, 429, 500, 502, 503, 504, 529. */
int cl_http_transient(long status);
/* Seconds before the next attempt after a transient failure of attempt
 * (0-based): the server's Retry-After when it is whole seconds up to 30,
 * else 1, 2, 4, 8, 16; -1 when a Retry-After asks for anything else (the
 * request then fails rather than being retried early). retry_after NULL =
 * none sent. */
double cl_http_retry_delay(int attempt, const char *retry_after);
/* The value of a "Retry-After:" header line (a libcurl header callback's
 * bytes), trimmed, into out; 1 when the line is that header, else 0. */
int cl_http_retry_after(const char *line, size_t len, char *out, size_t cap);

/* One GET of url with the handle settings above: the status (body in out,
 * at most max_bytes), or -1 with libcurl's message in e. */
long cl_http_get(const cl_http *h, const char *url, bs_buf *out, size_t max_bytes, bs_err *e);

#endif
