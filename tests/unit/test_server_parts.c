/* Pieces of the HTTP server that need no socket: the Bearer check of spec 02
 * §2, the error bodies of protocol/reply.h, request ids, and the Prometheus
 * registry of §9 (series, histograms, batch counting). */
#include "check.h"
#include "server/config.h"
#include "server/metrics.h"
#include "server/server_int.h"

static void test_auth(void) {
    const char *key = "k3y";
    struct { const char *h; int want; } cases[] = {
        { NULL, 403 }, { "", 403 }, { "   ", 403 }, { "Bearer", 403 }, { "Bearer   ", 403 }, { "Basic k3y", 403 },
        { "Bearerk3y", 403 }, { "Bearer\tk3y", 403 }, { "Bearer k3y", 0 }, { "bearer k3y", 0 }, { "BEARER k3y", 0 },
        { "Bearer    k3y", 0 }, { "  Bearer k3y \t", 0 }, { "Bearer k3", 401 }, { "Bearer k3yy", 401 },
        { "Bearer K3Y", 401 }, { "Bearer k3y k3y", 401 }, { "Bearer x", 401 }, { "Bearer k3z", 401 },
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        int got = bs_auth_check(cases[i].h, key, strlen(key));
        if (got != cases[i].want) fprintf(stderr, "auth case %zu (%s)\n", i, cases[i].h ? cases[i].h : "NULL");
        CHECK_INT(got, cases[i].want);
    }
}

/* Every error body of protocol/reply.h against the texts of spec 02 (§2, §4.5,
 * §5.2, §6, §10), with its status. */
#define REPLY(call, want_status, want_body) \
    do { \
        call; \
        CHECK_INT(r.status, want_status); \
        CHECK_STR(r.body.data, want_body); \
    } while (0)

static void test_bodies(void) {
    bs_reply r;
    bs_reply_init(&r);
    const bs_dialect SO = BS_DIALECT_SYSTEMONE, BA = BS_DIALECT_BASAL;
    REPLY(bs_reply_auth(&r, SO, 403), 403, "{\"detail\":{\"error_type\":\"authentication_error\",\"message\":"
          "\"Must supply an API key! Check your request and try again.\"}}");
    REPLY(bs_reply_auth(&r, BA, 401), 401,
          "{\"error\":\"Cannot authenticate with the server. Please check your API key and try again.\"}");
    REPLY(bs_reply_overloaded(&r, SO), 529, "{\"detail\":{\"error_type\":\"overloaded_error\",\"message\":\"Too "
          "many requests in flight. Retry after a short delay.\"}}");
    REPLY(bs_reply_overloaded(&r, BA), 529, "{\"error\":\"overloaded: too many requests in flight\"}");
    REPLY(bs_reply_too_large(&r, SO, 16777216), 413, "{\"detail\":{\"error_type\":\"request_too_large\",\"message\":"
          "\"Request body is larger than 16777216 bytes.\"}}");
    REPLY(bs_reply_too_large(&r, BA, 5), 413, "{\"error\":\"request body is larger than 5 bytes\"}");
    /* the HTTP layer's own errors: the dialect's shape */
    REPLY(bs_reply_timeout(&r, SO, 0, 10), 408, "{\"detail\":{\"error_type\":\"request_timeout\",\"message\":"
          "\"The request headers did not arrive within 10 s.\"}}");
    REPLY(bs_reply_timeout(&r, BA, 1, 60), 408, "{\"error\":\"The request body did not arrive within 60 s.\"}");
    REPLY(bs_reply_bad_request(&r, BA, "Invalid chunked body."), 400, "{\"error\":\"Invalid chunked body.\"}");
    REPLY(bs_reply_headers_too_large(&r, SO, 65536), 431, "{\"detail\":{\"error_type\":"
          "\"request_header_fields_too_large\",\"message\":\"Request header fields are larger than 65536 bytes.\"}}");
    REPLY(bs_reply_not_implemented(&r, SO), 501, "{\"detail\":{\"error_type\":\"not_implemented\",\"message\":"
          "\"Transfer-Encoding is not supported (only chunked).\"}}");
    REPLY(bs_reply_http_version(&r, BA), 505, "{\"error\":\"HTTP version not supported (HTTP/1.0 and HTTP/1.1 only).\"}");
    REPLY(bs_reply_connections(&r, SO, 1), 503, "{\"detail\":{\"error_type\":\"overloaded_error\",\"message\":"
          "\"Too many connections from this address. Retry after a short delay.\"}}");
    REPLY(bs_reply_not_found(&r), 404, "{\"detail\":\"Not Found\"}");
    REPLY(bs_reply_method(&r), 405, "{\"detail\":\"Method Not Allowed\"}");
    REPLY(bs_reply_unknown_model(&r, SO, "x\"y", 3), 400,
          "{\"detail\":{\"error_type\":\"api_usage_error\",\"message\":\"Unknown model: x\\\"y\"}}");
    REPLY(bs_reply_unknown_model(&r, BA, "nope", 4), 422, "{\"error\":\"Unknown model: nope\"}");
    const char *letters = "option letters are not single tokens for this tokenizer (3 options)";
    REPLY(bs_reply_internal(&r, SO, letters), 500, "{\"error\":\"internal\",\"detail\":\"option letters are not "
          "single tokens for this tokenizer (3 options)\"}");
    REPLY(bs_reply_internal(&r, BA, letters), 422,
          "{\"error\":\"option letters are not single tokens for this tokenizer (3 options)\"}");
    REPLY(bs_reply_fatal(&r, BS_MSG_ENGINE_STOPPED), 500, "{\"error\":\"internal\",\"detail\":\"engine stopped\"}");
    for (int d = 0; d < 2; d++) {
        bs_unsupported u;
        bs_unsupported_init(&u, d ? BA : SO);
        bs_unsupported_add(&u, "prompt_too_long", "q\n1", 3, "a prompt of 9000 tokens exceeds the model limit 8192");
        bs_unsupported_add(&u, "prompt_too_long", "q2", 2, "a prompt of 8200 tokens exceeds the model limit 8192");
        if (d)
            REPLY(bs_unsupported_reply(&u, &r), 422, "{\"error\":\"a prompt of 9000 tokens exceeds the model limit "
                  "8192; a prompt of 8200 tokens exceeds the model limit 8192\"}");
        else
            REPLY(bs_unsupported_reply(&u, &r), 422, "{\"error\":\"unsupported\",\"detail\":[{\"type\":"
                  "\"prompt_too_long\",\"loc\":[\"body\",\"questions\",\"q\\n1\"],\"msg\":\"a prompt of 9000 tokens "
                  "exceeds the model limit 8192\"},{\"type\":\"prompt_too_long\",\"loc\":[\"body\",\"questions\","
                  "\"q2\"],\"msg\":\"a prompt of 8200 tokens exceeds the model limit 8192\"}]}");
        bs_unsupported_free(&u);
    }
    bs_reply_free(&r);
    CHECK_INT(bs_route_of("/v1/systemone"), R_SYSTEMONE);
    CHECK_INT(bs_route_of("/v1/systemone/"), R_NONE);
    CHECK_INT(bs_route_of("/V1/models"), R_NONE);
    CHECK_INT(bs_route_of("/health"), R_HEALTH);
    CHECK_INT(bs_route_of("/health/live"), R_LIVE);
    CHECK_INT(bs_route_of("/health/live/"), R_NONE);
    CHECK_INT(bs_route_of("/"), R_UI);
    CHECK_INT(bs_route_of("/openapi.json"), R_OPENAPI);
    CHECK_INT(bs_route_of("//"), R_NONE);
    CHECK_INT(bs_route_of(""), R_NONE);
    /* percent-decoding of the path: a NUL (raw or %00) or a broken escape names no route */
    char dec[64];
    CHECK_INT(bs_path_decode("/h%65alth", 9, dec), 7);
    CHECK_STR(dec, "/health");
    CHECK_INT(bs_path_decode("/v1/systemone%00anything", 24, dec), -1);
    CHECK_INT(bs_path_decode("/health\0x", 9, dec), -1);
    CHECK_INT(bs_path_decode("/a%2", 4, dec), -1);
    CHECK_INT(bs_path_decode("/a%zz", 5, dec), -1);
    CHECK_INT(bs_path_decode("/a%2F%2f", 8, dec), 4);
    CHECK_STR(dec, "/a//");
    const char *allow;
    CHECK_INT(bs_route_method_ok(R_MODELS, "HEAD", &allow), 0);
    CHECK(bs_route_method_ok(R_BASAL, "GET", &allow) < 0);
    CHECK_STR(allow, "POST");
    CHECK(bs_route_method_ok(R_HEALTH, "POST", &allow) < 0);
    CHECK_STR(allow, "GET, HEAD");
    CHECK(bs_route_method_ok(R_UI, "POST", &allow) < 0);
    CHECK_STR(allow, "GET, HEAD");
    CHECK_INT(bs_route_method_ok(R_OPENAPI, "HEAD", &allow), 0);
}

/* One chunked body through bs_chunked_decode, fed in pieces of `step` bytes
 * as reads would bring it. Returns the decoder's last answer; *body gets
 * the decoded bytes, *rest the bytes left after the body's end. */
static long chunked_run(const char *in, size_t step, bs_buf *body, size_t *rest) {
    bs_chunked d = { 0 };
    size_t len = strlen(in), at = 0;
    long r = -2;
    *rest = 0;
    while (at < len && r == -2) {
        size_t k = len - at < step ? len - at : step;
        char *piece = malloc(k ? k : 1); /* exactly k bytes: ASan sees any read past them */
        if (!piece) return -3;
        memcpy(piece, in + at, k);
        size_t n = k;
        r = bs_chunked_decode(&d, piece, &n);
        bs_buf_put(body, piece, n);
        free(piece);
        at += k;
        if (r >= 0) *rest = (size_t)r + (len - at);
    }
    return r;
}

/* Chunked framing against the grammar of RFC 9112 §7.1 (chunk-size = 1*HEXDIG,
 * then BWS, chunk-ext = *( BWS ";" ... ), CRLF; chunk-data CRLF; last-chunk;
 * trailer-section; CRLF), whole and byte by byte. */
static void test_chunked(void) {
    struct { const char *in; long want; const char *body; size_t rest; } cases[] = {
        { "2\r\n{}\r\n0\r\n\r\n", 0, "{}", 0 },
        { "2\r\n{}\r\n0\r\n\r\nGET / HTTP/1.1\r\n", 0, "{}", 16 },                 /* a pipelined request */
        { "A\r\n0123456789\r\n1\r\nx\r\n0\r\n\r\n", 0, "0123456789x", 0 },
        { "a;ext=1;y=\"q\"\r\n0123456789\r\n0\r\n\r\n", 0, "0123456789", 0 },          /* extensions */
        { "2 \t;e\r\n{}\r\n0 \r\n\r\n", 0, "{}", 0 },                                  /* BWS */
        { "0002\r\n{}\r\n000\r\n\r\n", 0, "{}", 0 },                                    /* leading zeros */
        { "2\r\n{}\r\n0\r\nX-T: 1\r\nY: 2\r\n\r\n", 0, "{}", 0 },                      /* trailer fields */
        { "2\r\n{}\r\n0\r\n", -2, "{}", 0 },                                            /* trailer section to come */
        { "2\r\n{", -2, "{", 0 },
        { "0x2\r\n{}\r\n0\r\n\r\n", -1, "", 0 },                                        /* not hex after the digits */
        { "2x\r\n{}\r\n0\r\n\r\n", -1, "", 0 },
        { "-2\r\n{}\r\n0\r\n\r\n", -1, "", 0 },
        { "\r\n", -1, "", 0 },                                                            /* no digits */
        { ";e\r\n", -1, "", 0 },
        { "2\n{}\r\n0\r\n\r\n", -1, "", 0 },                                             /* bare LF */
        { "2\r\n{}\n0\r\n\r\n", -1, "{}", 0 },
        { "2\r\n{}XX0\r\n\r\n", -1, "{}", 0 },                                            /* no CRLF after data */
        { "2\r\n{}\r\n0\r\n\n", -1, "{}", 0 },
        { "2;a\nb\r\n{}\r\n0\r\n\r\n", -1, "", 0 },                                     /* LF in an extension */
        { "2;a\x01\r\n", -1, "", 0 },
        { "2\r\n{}\r\n0\r\nX: \x01\r\n\r\n", -1, "{}", 0 },
        { "ffffffffffffffff\r\n", -2, "", 0 },                                               /* 64 bits: the caller's 413 */
        { "10000000000000000\r\n", -1, "", 0 },                                             /* beyond 64 bits */
        { "00000000000000000002\r\n{}\r\n0\r\n\r\n", 0, "{}", 0 },                 /* 17+ digits, leading zeros */
        { "000000000000000010000000000000000\r\n", -1, "", 0 },                        /* beyond 64 bits after zeros */
    };
    size_t steps[] = { 1, 2, 3, 7, 1000 };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++)
        for (size_t k = 0; k < sizeof steps / sizeof *steps; k++) {
            bs_buf body;
            bs_buf_init(&body);
            size_t rest;
            long r = chunked_run(cases[i].in, steps[k], &body, &rest);
            if (r >= 0) r = 0; /* success: the bytes after the body are checked as rest */
            if (r != cases[i].want || body.len != strlen(cases[i].body) ||
                memcmp(body.data ? body.data : "", cases[i].body, body.len) || rest != cases[i].rest)
                fprintf(stderr, "chunked case %zu step %zu: %ld, %zu body bytes, rest %zu\n", i, steps[k], r,
                        body.len, rest);
            CHECK_INT(r, cases[i].want);
            CHECK_INT(body.len, strlen(cases[i].body));
            CHECK(body.len != strlen(cases[i].body) || !memcmp(body.data ? body.data : "", cases[i].body, body.len));
            CHECK_INT(rest, cases[i].rest);
            bs_buf_free(&body);
        }
    /* the size is known as soon as its digits are in (the caller answers 413 then) */
    bs_chunked d = { 0 };
    char buf[] = "1000";
    size_t n = 4;
    CHECK_INT(bs_chunked_decode(&d, buf, &n), -2);
    CHECK_INT(d.left, 0x1000);
    /* an endless extension or trailer is refused, not buffered */
    bs_buf big;
    bs_buf_init(&big);
    bs_buf_puts(&big, "1;");
    for (int i = 0; i < 5000; i++) bs_buf_putc(&big, 'e');
    bs_buf_puts(&big, "\r\nx\r\n0\r\n\r\n");
    bs_buf out;
    bs_buf_init(&out);
    size_t rest;
    CHECK_INT(chunked_run(big.data, 100, &out, &rest), -1);
    bs_buf_free(&big);
    /* extensions under the line limit, but 16 KiB of them in all: refused (a body byte per 4 KiB of framing) */
    bs_buf_init(&big);
    for (int c = 0; c < 5; c++) {
        bs_buf_puts(&big, "1;");
        for (int i = 0; i < 4000; i++) bs_buf_putc(&big, 'e');
        bs_buf_puts(&big, "\r\nx\r\n");
    }
    bs_buf_puts(&big, "0\r\n\r\n");
    bs_buf_free(&out);
    bs_buf_init(&out);
    CHECK_INT(chunked_run(big.data, 1000, &out, &rest), -1);
    CHECK_INT(out.len, 4); /* four chunks in before the fifth extension passes the cap */
    bs_buf_free(&big);
    bs_buf_free(&out);
    bs_buf_init(&big);
    bs_buf_puts(&big, "0\r\n");
    for (int i = 0; i < 10000; i++) bs_buf_puts(&big, "X: 12\r\n"); /* 70000 bytes */
    bs_buf_init(&out);
    CHECK_INT(chunked_run(big.data, 200, &out, &rest), -1);
    bs_buf_free(&big);
    bs_buf_free(&out);
}

/* Request targets: absolute-form routes by its path (RFC 9112 §3.2.2). */
static void test_target(void) {
    struct { const char *t, *want; } cases[] = {
        { "/v1/systemone", "/v1/systemone" }, { "/v1/basal?x=1", "/v1/basal?x=1" },
        { "http://h:8000/v1/systemone", "/v1/systemone" }, { "HTTPS://h/health?x", "/health?x" },
        { "http://h", "/" }, { "http://h?q=1", "/" }, { "*", "*" }, { "http:/x", "http:/x" },
        { "ftp://h/v1/basal", "ftp://h/v1/basal" },
        { "http://h#/health", "/" }, /* the authority ends at '#' too (RFC 3986 §3.2) */
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        const char *p = cases[i].t;
        size_t n = strlen(p);
        bs_http_target_path(&p, &n);
        CHECK_INT(n, strlen(cases[i].want));
        CHECK(!memcmp(p, cases[i].want, n));
    }
}

static void test_ids(void) {
    char a[33], b[33];
    bs_request_id(a);
    bs_request_id(b);
    CHECK_INT(strlen(a), 32);
    CHECK_INT(strspn(a, "0123456789abcdef"), 32);
    CHECK(strcmp(a, b) != 0);
}

/* CORS origins (issue 18): what a configuration accepts, what a request's
 * Origin matches, and the served-names header. */
static void test_cors(void) {
    const char *good[] = { "*", "http://a", "https://app.example", "http://localhost:3000", "http://[::1]:8080",
                           "https://x-y.example.COM" };
    const char *bad[] = { "", "a.example", "ftp://a", "https://", "https://a/", "https://a/b", "https://a b",
                          "https://a,b", "https://u@a", "https://a?x", "*.example", "http://a\n" };
    for (size_t i = 0; i < sizeof good / sizeof *good; i++) CHECK_INT(bs_cfg_check_origin(good[i]), 0);
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        if (bs_cfg_check_origin(bad[i]) == 0) fprintf(stderr, "origin accepted: %s\n", bad[i]);
        CHECK(bs_cfg_check_origin(bad[i]) < 0);
    }
    const char *list[] = { "https://a.example", "http://localhost:3000" };
    CHECK_INT(bs_cors_allowed(list, 2, "https://a.example", 17), 1);
    CHECK_INT(bs_cors_allowed(list, 2, "HTTPS://A.EXAMPLE", 17), 1);
    CHECK_INT(bs_cors_allowed(list, 2, "https://a.example.evil", 22), 0);
    CHECK_INT(bs_cors_allowed(list, 2, "https://a.exampl", 16), 0);
    CHECK_INT(bs_cors_allowed(list, 2, "http://localhost:3001", 21), 0);
    CHECK_INT(bs_cors_allowed(list, 2, "", 0), 0);
    CHECK_INT(bs_cors_allowed(list, 0, "https://a.example", 17), 0);
    const char *any[] = { "*" };
    CHECK_INT(bs_cors_allowed(any, 1, "null", 4), 1);
    bs_serve_config c;
    bs_err e;
    CHECK_INT(bs_serve_config_init(&c, &e), 0);
    CHECK_INT(bs_cfg_set_cors(&c, " https://a.example ,http://b:1", &e), 0);
    CHECK_INT(c.n_cors_origins, 2);
    CHECK_STR(c.cors_origins[0], "https://a.example");
    CHECK_STR(c.cors_origins[1], "http://b:1");
    CHECK(bs_cfg_set_cors(&c, "https://a.example,", &e) < 0); /* an empty entry */
    CHECK_INT(c.n_cors_origins, 0);
    CHECK(bs_cfg_set_cors(&c, "https://a/x", &e) < 0);
    CHECK_CONTAINS(e.msg, "https://a/x");
    bs_serve_config_free(&c);
    CHECK_INT(bs_serve_config_init(&c, &e), 0);
    const char *y = "cors_origins: [\"https://a\", \"*\"]\nmodels:\n  - path: /m\n";
    CHECK_INT(bs_serve_config_parse_yaml(&c, y, strlen(y), "t.yml", &e), 0);
    CHECK_INT(c.n_cors_origins, 2);
    bs_serve_config_free(&c);
    CHECK_INT(bs_serve_config_init(&c, &e), 0);
    y = "cors_origins: https://a/b\nmodels:\n  - path: /m\n";
    CHECK(bs_serve_config_parse_yaml(&c, y, strlen(y), "t.yml", &e) < 0);
    CHECK_CONTAINS(e.msg, "t.yml:1: cors_origins");
    bs_serve_config_free(&c);
    bs_buf b;
    bs_buf_init(&b);
    const char *names[] = { "basal-1.5-4.5B", "a b,c%\xc3\xbc\r\n" };
    bs_names_header(&b, names, 2);
    CHECK_STR(b.data, "basal-1.5-4.5B, a%20b%2Cc%25%C3%BC%0D%0A");
    bs_buf_free(&b);
}

static int has_line(const char *text, const char *line) {
    size_t n = strlen(line);
    for (const char *p = text; (p = strstr(p, line)); p++)
        if ((p == text || p[-1] == '\n') && p[n] == '\n') return 1;
    return 0;
}

#define LINE(t, l) do { if (has_line(t, l)) check_pass_++; else { check_fail_++; \
    fprintf(stderr, "%s:%d: missing line: %s\n", __FILE__, __LINE__, l); } } while (0)
#define NO_LINE(t, l) do { if (!has_line(t, l)) check_pass_++; else { check_fail_++; \
    fprintf(stderr, "%s:%d: unexpected line: %s\n", __FILE__, __LINE__, l); } } while (0)

static void test_metrics(void) {
    const char *names[] = { "m-a", "we\"ird\\name" };
    bs_metrics *m = bs_metrics_create(names, 2, 7);
    CHECK(m != NULL);
    if (!m) return;
    bs_metrics_http_begin(m, BS_EP_SYSTEMONE);
    bs_metrics_http_end(m, BS_EP_SYSTEMONE, 0, 200, 0.004);
    bs_metrics_http_begin(m, BS_EP_SYSTEMONE);
    bs_metrics_http_end(m, BS_EP_SYSTEMONE, 0, 200, 2.5);
    bs_metrics_http_begin(m, BS_EP_BASAL);
    bs_metrics_http_end(m, BS_EP_BASAL, BS_METRICS_NO_MODEL, 422, 0.0001);
    bs_metrics_http_begin(m, BS_EP_BASAL);
    bs_metrics_http_end(m, BS_EP_BASAL, 1, 0, 9.0); /* cancelled */
    bs_metrics_http_begin(m, BS_EP_BASAL);          /* still running */
    bs_metrics_admitted(m, 0, +1);
    bs_metrics_admitted(m, 0, +1);
    bs_metrics_admitted(m, 0, -1);
    bs_metrics_usage(m, 0, 290, 0, 1);
    bs_metrics_usage(m, 0, 10, 0, 2);
    /* a batch of 3, then a batch of 1 (four answered requests), then a
     * failed batch of 2 in the long lane */
    bs_metrics_batch(m, 0, 0, 3, 500.0, 1);
    for (int i = 1; i <= 3; i++) bs_metrics_queue(m, 0, 0, (double)i);
    bs_metrics_batch(m, 0, 0, 1, 250.0, 1);
    bs_metrics_queue(m, 0, 0, 4.0);
    bs_metrics_batch(m, 0, 1, 2, 700.0, 0);
    bs_buf out;
    bs_buf_init(&out);
    bs_metrics_engine fw[2] = { { 123, { 7, 5 }, 1 }, { 0, { 0, 0 }, 0 } };
    bs_metrics_dlog dl = { 9, 2, 1 };
    bs_metrics_render(m, fw, &dl, &out);
    const char *t = out.data;
    /* a model's option orders; a model still loading (0) has no sample */
    LINE(t, "basal_model_option_orders{model=\"m-a\"} 1");
    {
        int samples = 0;
        for (const char *q = t; (q = strstr(q, "\nbasal_model_option_orders{")); q++) samples++;
        CHECK_INT(samples, 1);
    }
    LINE(t, "basal_decision_log_lines_total 9");
    LINE(t, "basal_decision_log_dropped_total 2");
    LINE(t, "basal_decision_log_failed_total 1");
    LINE(t, "# TYPE basal_http_requests_total counter");
    LINE(t, "basal_http_requests_total{endpoint=\"/v1/systemone\",model=\"m-a\",status=\"200\"} 2");
    LINE(t, "basal_http_requests_total{endpoint=\"/v1/basal\",model=\"m-a\",status=\"200\"} 0");
    LINE(t, "basal_http_requests_total{endpoint=\"/v1/basal\",model=\"we\\\"ird\\\\name\",status=\"200\"} 0");
    LINE(t, "basal_http_requests_total{endpoint=\"/v1/basal\",model=\"\",status=\"422\"} 1");
    LINE(t, "basal_http_requests_total{endpoint=\"/v1/basal\",model=\"we\\\"ird\\\\name\",status=\"cancelled\"} 1");
    LINE(t, "basal_http_request_duration_seconds_bucket{endpoint=\"/v1/systemone\",model=\"m-a\",status=\"200\",le=\"0.001\"} 0");
    LINE(t, "basal_http_request_duration_seconds_bucket{endpoint=\"/v1/systemone\",model=\"m-a\",status=\"200\",le=\"0.005\"} 1");
    LINE(t, "basal_http_request_duration_seconds_bucket{endpoint=\"/v1/systemone\",model=\"m-a\",status=\"200\",le=\"2\"} 1");
    LINE(t, "basal_http_request_duration_seconds_bucket{endpoint=\"/v1/systemone\",model=\"m-a\",status=\"200\",le=\"3\"} 2");
    LINE(t, "basal_http_request_duration_seconds_bucket{endpoint=\"/v1/systemone\",model=\"m-a\",status=\"200\",le=\"+Inf\"} 2");
    LINE(t, "basal_http_request_duration_seconds_sum{endpoint=\"/v1/systemone\",model=\"m-a\",status=\"200\"} 2.504");
    LINE(t, "basal_http_request_duration_seconds_count{endpoint=\"/v1/systemone\",model=\"m-a\",status=\"200\"} 2");
    NO_LINE(t, "basal_http_request_duration_seconds_count{endpoint=\"/v1/basal\",model=\"we\\\"ird\\\\name\",status=\"cancelled\"} 1");
    LINE(t, "basal_http_request_duration_seconds_count{endpoint=\"/v1/basal\",model=\"\",status=\"422\"} 1");
    LINE(t, "basal_http_inflight_requests{endpoint=\"/v1/systemone\"} 0");
    LINE(t, "basal_http_inflight_requests{endpoint=\"/v1/basal\"} 1");
    LINE(t, "basal_model_inflight_requests{model=\"m-a\"} 1");
    LINE(t, "basal_max_inflight_requests 7");
    LINE(t, "basal_input_tokens_total{model=\"m-a\"} 300");
    LINE(t, "basal_output_tokens_total{model=\"m-a\"} 0");
    LINE(t, "basal_questions_total{model=\"m-a\"} 3");
    LINE(t, "basal_questions_total{model=\"we\\\"ird\\\\name\"} 0");
    LINE(t, "basal_queue_duration_seconds_count{model=\"m-a\",lane=\"main\"} 4");
    LINE(t, "basal_queue_duration_seconds_bucket{model=\"m-a\",lane=\"main\",le=\"0.0025\"} 2");
    LINE(t, "basal_batch_requests_count{model=\"m-a\",lane=\"main\"} 2");
    LINE(t, "basal_batch_requests_sum{model=\"m-a\",lane=\"main\"} 4");
    LINE(t, "basal_batch_requests_bucket{model=\"m-a\",lane=\"main\",le=\"1\"} 1");
    LINE(t, "basal_batch_requests_bucket{model=\"m-a\",lane=\"main\",le=\"2\"} 1");
    LINE(t, "basal_batch_requests_bucket{model=\"m-a\",lane=\"main\",le=\"4\"} 2");
    LINE(t, "basal_batch_duration_seconds_count{model=\"m-a\",lane=\"main\",outcome=\"success\"} 2");
    LINE(t, "basal_batch_duration_seconds_sum{model=\"m-a\",lane=\"main\",outcome=\"success\"} 0.75");
    LINE(t, "basal_batch_duration_seconds_count{model=\"m-a\",lane=\"long\",outcome=\"error\"} 1");
    LINE(t, "basal_batch_requests_count{model=\"m-a\",lane=\"long\"} 1");
    LINE(t, "basal_forward_tokens_total{model=\"m-a\"} 123");
    LINE(t, "# TYPE basal_large_choice_rounds_total counter");
    LINE(t, "basal_large_choice_rounds_total{model=\"m-a\",round=\"1\"} 7");
    LINE(t, "basal_large_choice_rounds_total{model=\"m-a\",round=\"2\"} 5");
    /* every family is declared before its samples */
    const char *fams[] = { "basal_http_requests_total", "basal_http_request_duration_seconds",
                           "basal_http_inflight_requests", "basal_model_inflight_requests",
                           "basal_max_inflight_requests", "basal_input_tokens_total", "basal_output_tokens_total",
                           "basal_questions_total", "basal_queue_duration_seconds", "basal_batch_duration_seconds",
                           "basal_batch_requests", "basal_forward_tokens_total",
                           "basal_large_choice_rounds_total" };
    for (size_t i = 0; i < sizeof fams / sizeof *fams; i++) {
        char want[128];
        snprintf(want, sizeof want, "# HELP %s ", fams[i]);
        CHECK_CONTAINS(t, want);
    }
    bs_buf_free(&out);
    bs_metrics_destroy(m);
}

int main(void) {
    test_auth();
    test_bodies();
    test_chunked();
    test_target();
    test_ids();
    test_cors();
    test_metrics();
    return check_report("test_server_parts");
}
