/* The HTTP layer (src/server/http.c): raw bytes as one client connection
 * sends them, read in pieces, through the server's own request-line and
 * header parser, body reading (Content-Length and chunked), routing,
 * authentication, CORS and the body checks of spec 02 §3 (bs_http_feed in
 * server_int.h; the engine is not reached: fuzz_plan covers it). Invariants
 * on what the server writes back: a sequence of HTTP/1.1 responses, each one
 * header block with a known status and a Content-Length (none for 204, 100),
 * a body that is JSON (or the Prometheus text of /metrics, or nothing after a
 * HEAD), nothing after a response with "Connection: close"; nothing leaks.
 * The first byte picks the options (API key, CORS, /metrics, body limit, the
 * size of the pieces). */
#include <stdint.h>
#include <string.h>
#include <strings.h>

#include "protocol/pyjson.h"
#include "fuzz_common.h"
#include "server/server_int.h"

static const char *find(const char *p, const char *end, const char *lit) {
    size_t n = strlen(lit);
    for (; p + n <= end; p++)
        if (!memcmp(p, lit, n)) return p;
    return NULL;
}

/* The value of a header in [h, end) (case-insensitive name), or NULL. */
static const char *header(const char *h, const char *end, const char *name, size_t *vlen) {
    size_t nl = strlen(name);
    for (const char *p = h; p < end;) {
        const char *eol = find(p, end, "\r\n");
        if (!eol) eol = end;
        if ((size_t)(eol - p) > nl && p[nl] == ':' && !strncasecmp(p, name, nl)) {
            const char *v = p + nl + 1;
            while (v < eol && *v == ' ') v++;
            *vlen = (size_t)(eol - v);
            return v;
        }
        p = eol + 2;
    }
    return NULL;
}

static void check_responses(const char *out, size_t len) {
    static const int known[] = { 100, 200, 204, 400, 401, 403, 404, 405, 408, 413, 422, 431, 500, 501, 503, 505, 529 };
    const char *p = out, *end = out + len;
    int closed = 0;
    while (p < end) {
        FUZZ_ASSERT(!closed, "bytes after a Connection: close response: %.80s", p);
        FUZZ_ASSERT(end - p >= 12 && !memcmp(p, "HTTP/1.1 ", 9), "not a status line: %.80s", p);
        int status = (p[9] - '0') * 100 + (p[10] - '0') * 10 + (p[11] - '0');
        int ok = 0;
        for (size_t i = 0; i < sizeof known / sizeof *known; i++) ok |= known[i] == status;
        FUZZ_ASSERT(ok, "status %d", status);
        const char *hend = find(p, end, "\r\n\r\n");
        FUZZ_ASSERT(hend, "header block not ended: %.120s", p);
        const char *h = find(p, hend + 2, "\r\n") + 2; /* after the status line */
        /* one header block: no second status line inside it */
        FUZZ_ASSERT(!find(h, hend, "HTTP/1.1 "), "a second status line in one header block");
        const char *body = hend + 4;
        size_t vl = 0;
        const char *cl = header(h, hend + 2, "Content-Length", &vl);
        if (status == 100 || status == 204) {
            FUZZ_ASSERT(!cl, "Content-Length on a %d", status);
            p = body;
            continue;
        }
        FUZZ_ASSERT(cl, "no Content-Length on a %d", status);
        size_t n = 0;
        for (size_t i = 0; i < vl; i++) {
            FUZZ_ASSERT(cl[i] >= '0' && cl[i] <= '9', "Content-Length %.*s", (int)vl, cl);
            n = n * 10 + (size_t)(cl[i] - '0');
        }
        size_t ctl = 0;
        const char *ct = header(h, hend + 2, "Content-Type", &ctl);
        FUZZ_ASSERT(ct, "no Content-Type on a %d", status);
        int json = ctl == 16 && !memcmp(ct, "application/json", 16);
        FUZZ_ASSERT(json || (status == 200 && ctl > 10 && !memcmp(ct, "text/plain", 10)), "Content-Type %.*s", (int)ctl, ct);
        size_t cv = 0;
        const char *conn = header(h, hend + 2, "Connection", &cv);
        closed = conn && cv == 5 && !memcmp(conn, "close", 5);
        /* a HEAD answer has the length of the body it does not send */
        int head = n && (size_t)(end - body) >= 9 ? !memcmp(body, "HTTP/1.1 ", 9) : n && body == end;
        if (head) {
            p = body;
            continue;
        }
        FUZZ_ASSERT((size_t)(end - body) >= n, "body shorter than Content-Length %zu", n);
        if (json) {
            bj_value *v = NULL;
            bs_err e = { 0 };
            FUZZ_ASSERT(bj_parse(body, n, NULL, &v, &e) == 0, "body is not JSON (%s): %.200s", e.msg, body);
            bj_free(v);
        }
        p = body + n;
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 1) return 0;
    static const size_t chunks[8] = { 0, 1, 2, 3, 7, 64, 1000, 4096 };
    bs_http_feed_opts o = {
        .api_key = data[0] & 1,
        .cors = (data[0] >> 1) & 1,
        .metrics = (data[0] >> 2) & 1,
        .max_body = (data[0] >> 3) & 1 ? 256 : 16777216,
        .chunk = chunks[(data[0] >> 4) & 7],
    };
    bs_buf out;
    bs_buf_init(&out);
    if (bs_http_feed(&o, (const char *)data + 1, size - 1, &out) == 0 && !out.oom)
        check_responses(out.data ? out.data : "", out.len);
    bs_buf_free(&out);
    return 0;
}
