#include "protocol/reply.h"

#include <stdio.h>
#include <string.h>

#include "protocol/pyjson.h"

void bs_reply_init(bs_reply *r) {
    r->status = 0;
    bs_buf_init(&r->body);
}

void bs_reply_free(bs_reply *r) { bs_buf_free(&r->body); }

static bs_buf *reset(bs_reply *r, int status) {
    r->status = status;
    r->body.len = 0;
    return &r->body;
}

void bs_reply_basal(bs_reply *r, int status, const char *msg, size_t n) {
    bs_buf *b = reset(r, status);
    bs_buf_puts(b, "{\"error\":");
    bj_put_string(b, msg, n);
    bs_buf_putc(b, '}');
}

void bs_reply_fatal(bs_reply *r, const char *msg) {
    bs_buf *b = reset(r, 500);
    bs_buf_puts(b, "{\"error\":\"internal\",\"detail\":");
    bj_put_string(b, msg, strlen(msg));
    bs_buf_putc(b, '}');
}

void bs_reply_internal(bs_reply *r, bs_dialect d, const char *msg) {
    if (d == BS_DIALECT_BASAL) bs_reply_basal(r, 422, msg, strlen(msg));
    else bs_reply_fatal(r, msg);
}

/* /v1/systemone's TypeSafe error object: status {"detail":{"error_type","message"}}. */
static void typesafe(bs_reply *r, int status, const char *type, const char *msg, size_t n) {
    bs_buf *b = reset(r, status);
    bs_buf_printf(b, "{\"detail\":{\"error_type\":\"%s\",\"message\":", type);
    bj_put_string(b, msg, n);
    bs_buf_puts(b, "}}");
}

void bs_reply_json_invalid(bs_reply *r, bs_dialect d, const char *msg, size_t pos, size_t lineno, size_t colno) {
    bs_buf *b = reset(r, 422);
    if (d == BS_DIALECT_SYSTEMONE) {
        bs_buf_printf(b, "{\"detail\":[{\"type\":\"json_invalid\",\"loc\":[\"body\",%zu],"
                         "\"msg\":\"JSON decode error\",\"input\":{},\"ctx\":{\"error\":", pos);
        bj_put_string(b, msg, strlen(msg));
        bs_buf_puts(b, "}}]}");
        return;
    }
    bs_buf m;
    bs_buf_init(&m);
    bs_buf_printf(&m, "%s: line %zu column %zu (char %zu)", msg, lineno, colno, pos);
    bs_reply_basal(r, 422, m.data ? m.data : "", m.len);
    if (m.oom) r->body.oom = 1;
    bs_buf_free(&m);
}

void bs_reply_unknown_model(bs_reply *r, bs_dialect d, const char *model, size_t len) {
    bs_buf msg;
    bs_buf_init(&msg);
    bs_buf_puts(&msg, "Unknown model: ");
    bs_buf_put(&msg, model, len);
    if (d == BS_DIALECT_SYSTEMONE) typesafe(r, 400, "api_usage_error", msg.data ? msg.data : "", msg.len);
    else bs_reply_basal(r, 422, msg.data ? msg.data : "", msg.len);
    if (msg.oom) r->body.oom = 1;
    bs_buf_free(&msg);
}

void bs_reply_validation(bs_reply *r, const char *items, size_t n) {
    bs_buf *b = reset(r, 422);
    bs_buf_puts(b, "{\"detail\":[");
    bs_buf_put(b, items, n);
    bs_buf_puts(b, "]}");
}

void bs_reply_usage(bs_reply *r, int as_object, const char *msg, size_t n) {
    if (as_object) {
        typesafe(r, 400, "api_usage_error", msg, n);
        return;
    }
    bs_buf *b = reset(r, 400);
    bs_buf_puts(b, "{\"detail\":");
    bj_put_string(b, msg, n);
    bs_buf_putc(b, '}');
}

void bs_reply_unsupported_items(bs_reply *r, const char *items, size_t n) {
    bs_buf *b = reset(r, 422);
    bs_buf_puts(b, "{\"error\":\"unsupported\",\"detail\":[");
    bs_buf_put(b, items, n);
    bs_buf_puts(b, "]}");
}

void bs_reply_act_refusal(bs_reply *r, bs_dialect d, const char *qid, size_t qid_len) {
    static const char msg[] = "max_error needs a defer action (\"defer\"/\"human\" or defer_action)";
    if (d == BS_DIALECT_BASAL) {
        bs_reply_basal(r, 422, msg, sizeof msg - 1);
        return;
    }
    bs_buf item;
    bs_buf_init(&item);
    bs_buf_puts(&item, "{\"type\":\"value_error\",\"loc\":[\"body\",\"questions\",");
    bj_put_string(&item, qid, qid_len);
    bs_buf_puts(&item, "],\"msg\":");
    bj_put_string(&item, msg, sizeof msg - 1);
    bs_buf_putc(&item, '}');
    bs_reply_validation(r, item.data ? item.data : "", item.len);
    if (item.oom) r->body.oom = 1;
    bs_buf_free(&item);
}

void bs_reply_auth(bs_reply *r, bs_dialect d, int status) {
    const char *msg = status == 401 ? "Cannot authenticate with the server. Please check your API key and try again."
                                    : "Must supply an API key! Check your request and try again.";
    if (d == BS_DIALECT_SYSTEMONE) typesafe(r, status, "authentication_error", msg, strlen(msg));
    else bs_reply_basal(r, status, msg, strlen(msg));
}

void bs_reply_overloaded(bs_reply *r, bs_dialect d) {
    static const char so[] = "Too many requests in flight. Retry after a short delay.";
    static const char ba[] = "overloaded: too many requests in flight";
    if (d == BS_DIALECT_SYSTEMONE) typesafe(r, 529, "overloaded_error", so, sizeof so - 1);
    else bs_reply_basal(r, 529, ba, sizeof ba - 1);
}

void bs_reply_too_large(bs_reply *r, bs_dialect d, unsigned long long limit) {
    char msg[96];
    if (d == BS_DIALECT_SYSTEMONE) {
        snprintf(msg, sizeof msg, "Request body is larger than %llu bytes.", limit);
        typesafe(r, 413, "request_too_large", msg, strlen(msg));
    } else {
        snprintf(msg, sizeof msg, "request body is larger than %llu bytes", limit);
        bs_reply_basal(r, 413, msg, strlen(msg));
    }
}

void bs_reply_not_found(bs_reply *r) { bs_buf_puts(reset(r, 404), "{\"detail\":\"Not Found\"}"); }

void bs_reply_method(bs_reply *r) { bs_buf_puts(reset(r, 405), "{\"detail\":\"Method Not Allowed\"}"); }

static void http_error(bs_reply *r, bs_dialect d, int status, const char *type, const char *msg) {
    if (d == BS_DIALECT_SYSTEMONE) typesafe(r, status, type, msg, strlen(msg));
    else bs_reply_basal(r, status, msg, strlen(msg));
}

void bs_reply_bad_request(bs_reply *r, bs_dialect d, const char *why) {
    http_error(r, d, 400, "invalid_request_error", why);
}

void bs_reply_timeout(bs_reply *r, bs_dialect d, int body, long seconds) {
    char msg[96];
    snprintf(msg, sizeof msg, "The request %s did not arrive within %ld s.", body ? "body" : "headers", seconds);
    http_error(r, d, 408, "request_timeout", msg);
}

void bs_reply_headers_too_large(bs_reply *r, bs_dialect d, unsigned long limit) {
    char msg[96];
    snprintf(msg, sizeof msg, "Request header fields are larger than %lu bytes.", limit);
    http_error(r, d, 431, "request_header_fields_too_large", msg);
}

void bs_reply_too_many_headers(bs_reply *r, bs_dialect d, unsigned long limit) {
    char msg[96];
    snprintf(msg, sizeof msg, "Request has more than %lu header fields.", limit);
    http_error(r, d, 431, "request_header_fields_too_large", msg);
}

void bs_reply_not_implemented(bs_reply *r, bs_dialect d) {
    http_error(r, d, 501, "not_implemented", "Transfer-Encoding is not supported (only chunked).");
}

void bs_reply_http_version(bs_reply *r, bs_dialect d) {
    http_error(r, d, 505, "http_version_not_supported", "HTTP version not supported (HTTP/1.0 and HTTP/1.1 only).");
}

void bs_reply_connections(bs_reply *r, bs_dialect d, int per_client) {
    http_error(r, d, 503, "overloaded_error",
               per_client ? "Too many connections from this address. Retry after a short delay."
                          : "Too many connections. Retry after a short delay.");
}

void bs_reply_loading(bs_reply *r, bs_dialect d) {
    if (d == BS_DIALECT_SYSTEMONE)
        http_error(r, d, 503, "service_unavailable", "The server is loading its models. Retry after a short delay.");
    else
        http_error(r, d, 503, "", "service unavailable: the server is loading its models");
}

void bs_unsupported_init(bs_unsupported *u, bs_dialect d) {
    u->d = d;
    u->n = 0;
    bs_buf_init(&u->items);
}

void bs_unsupported_add(bs_unsupported *u, const char *type, const char *qid, size_t qid_len, const char *msg) {
    bs_buf *b = &u->items;
    if (u->d == BS_DIALECT_BASAL) {
        if (u->n) bs_buf_puts(b, "; ");
        bs_buf_puts(b, msg);
    } else {
        bs_buf_puts(b, u->n ? ",{\"type\":" : "{\"type\":");
        bj_put_string(b, type, strlen(type));
        bs_buf_puts(b, ",\"loc\":[\"body\",\"questions\"");
        if (qid) {
            bs_buf_putc(b, ',');
            bj_put_string(b, qid, qid_len);
        }
        bs_buf_puts(b, "],\"msg\":");
        bj_put_string(b, msg, strlen(msg));
        bs_buf_putc(b, '}');
    }
    u->n++;
}

void bs_unsupported_reply(const bs_unsupported *u, bs_reply *r) {
    const char *items = u->items.data ? u->items.data : "";
    if (u->d == BS_DIALECT_BASAL) bs_reply_basal(r, 422, items, u->items.len);
    else bs_reply_unsupported_items(r, items, u->items.len);
    if (u->items.oom) r->body.oom = 1;
}

void bs_unsupported_free(bs_unsupported *u) { bs_buf_free(&u->items); }
