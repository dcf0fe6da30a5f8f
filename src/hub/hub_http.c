/* One HTTP exchange with the Hub or its CDN through libcurl (hub_int.h):
 * no redirect is followed here and nothing is retried, so that the caller
 * sees the Hub's own answer (the 302 of an LFS file carries X-Linked-Etag
 * and X-Linked-Size) and decides, by the protocol, what comes next. The
 * token goes only to the endpoint's origin: a presigned CDN URL must never
 * receive it. */
#include "hub/hub_int.h"

#include <ctype.h>
#include <curl/curl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "base/util.h"

/* An API answer larger than this is refused (a listing of a model's files
 * is kilobytes). */
#define BODY_MAX ((size_t)64 << 20)
/* A connection that delivers less than 1 byte a second for this long is
 * stalled: the request fails as a cut connection (and is resumed). */
#define STALL_S 30L
/* An answer that is not a file's content (the API's JSON, a HEAD) has this
 * long to arrive in full: a Hub that trickles one without end is given up on
 * (a file's content is bounded by its size instead). */
#define ANSWER_S 300L

struct bs_hub_http {
    CURL *curl;
    char *auth;            /* "Authorization: Bearer <token>", or NULL */
    char origin[512];      /* the endpoint's scheme://host:port, lower case */
    bs_hub_cancel_fn cancel;
    void *ud;
};

/* scheme://host[:port] of url in lower case, with the scheme's default port
 * written out, so that equal origins compare equal. */
static int origin_of(const char *url, char *out, size_t cap) {
    const char *sep = strstr(url, "://");
    if (!sep) return -1;
    size_t sl = (size_t)(sep - url);
    const char *host = sep + 3, *end = host + strcspn(host, "/?#");
    const char *at = memchr(host, '@', (size_t)(end - host));
    if (at) host = at + 1; /* userinfo is not part of the origin */
    const char *colon;
    if (*host == '[') { /* [IPv6]:port */
        const char *rb = memchr(host, ']', (size_t)(end - host));
        colon = rb && rb + 1 < end && rb[1] == ':' ? rb + 1 : NULL;
    } else {
        colon = memchr(host, ':', (size_t)(end - host));
    }
    char scheme[16];
    if (sl == 0 || sl >= sizeof scheme) return -1;
    for (size_t i = 0; i < sl; i++) scheme[i] = (char)tolower((unsigned char)url[i]);
    scheme[sl] = 0;
    const char *port = colon ? colon + 1 : !strcmp(scheme, "https") ? "443" : "80";
    size_t hl = (size_t)((colon ? colon : end) - host), pl = colon ? (size_t)(end - port) : strlen(port);
    int n = snprintf(out, cap, "%s://%.*s:%.*s", scheme, (int)hl, host, (int)pl, port);
    if (n < 0 || (size_t)n >= cap) return -1;
    for (char *p = out; *p; p++) *p = (char)tolower((unsigned char)*p);
    return 0;
}

int bs_hub_http_same_origin(const bs_hub_http *h, const char *url) {
    char o[512];
    return origin_of(url, o, sizeof o) == 0 && !strcmp(o, h->origin);
}

int bs_hub_http_open(bs_hub_http **out, const bs_hub_env *env, bs_hub_cancel_fn cancel, void *ud, bs_err *e) {
    *out = NULL;
    static int global_done;
    if (!global_done) { /* once per process, before any thread uses curl (the CLI is single-threaded here) */
        if (curl_global_init(CURL_GLOBAL_DEFAULT) != 0) return bs_fail(e, BS_EIO, "libcurl cannot start");
        global_done = 1;
    }
    bs_hub_http *h = calloc(1, sizeof *h);
    if (!h) return bs_fail(e, BS_ENOMEM, "out of memory");
    h->cancel = cancel;
    h->ud = ud;
    if (origin_of(env->endpoint, h->origin, sizeof h->origin) < 0) {
        free(h);
        return bs_fail(e, BS_EINVAL, "HF_ENDPOINT %s is not a URL (e.g. https://huggingface.co)", env->endpoint);
    }
    if (strncmp(h->origin, "http://", 7) && strncmp(h->origin, "https://", 8)) {
        free(h);
        return bs_fail(e, BS_EINVAL, "HF_ENDPOINT %s: only http:// and https:// are supported", env->endpoint);
    }
    if (env->token) {
        for (const char *p = env->token; *p; p++)
            if ((unsigned char)*p < 0x20 || *p == 0x7f) {
                free(h);
                return bs_fail(e, BS_EINVAL, "the Hugging Face token (from %s) holds a control character; set it again",
                               env->token_from);
            }
        if (!(h->auth = bs_strfmt("Authorization: Bearer %s", env->token))) {
            free(h);
            return bs_fail(e, BS_ENOMEM, "out of memory");
        }
    }
    if (!(h->curl = curl_easy_init())) {
        free(h->auth);
        free(h);
        return bs_fail(e, BS_EIO, "libcurl cannot start");
    }
    *out = h;
    return BS_OK;
}

void bs_hub_http_close(bs_hub_http *h) {
    if (!h) return;
    curl_easy_cleanup(h->curl);
    bs_hub_wipe(h->auth); /* the token does not outlive its use in freed memory */
    free(h->auth);
    free(h);
}

void bs_hub_resp_free(bs_hub_resp *r) {
    free(r->body);
    r->body = NULL;
    r->body_len = 0;
}

void bs_hub_url_shown(const char *url, char *out, size_t cap) {
    size_t n = strcspn(url, "?#");
    snprintf(out, cap, "%.*s%s", (int)n, url, url[n] ? "?..." : "");
}

char *bs_hub_url_join(const char *base, const char *path) {
    const char *sep = strstr(base, "://");
    const char *host = sep ? sep + 3 : base;
    size_t n = (size_t)(host - base) + strcspn(host, "/?#");
    return bs_strfmt("%.*s%s", (int)n, base, path);
}

void bs_hub_url_segment(bs_buf *b, const char *s, int keep_slash) {
    static const char hex[] = "0123456789ABCDEF";
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        if (isalnum(*p) || *p == '-' || *p == '_' || *p == '.' || *p == '~' || (keep_slash && *p == '/')) {
            bs_buf_putc(b, (char)*p);
        } else {
            bs_buf_putc(b, '%');
            bs_buf_putc(b, hex[*p >> 4]);
            bs_buf_putc(b, hex[*p & 15]);
        }
    }
}

typedef struct {
    bs_hub_http *h;
    const bs_hub_req *rq;
    bs_hub_resp *resp;
    int sink_stopped, too_big;
    size_t cap;       /* of resp->body: grown by doubling (a realloc per piece copies it all each time) */
} xfer_t;

/* ETag: W/"abc" -> abc (huggingface_hub _normalize_etag). */
static void etag_norm(const char *v, size_t n, char *out, size_t cap) {
    if (n >= 2 && v[0] == 'W' && v[1] == '/') v += 2, n -= 2;
    while (n && *v == '"') v++, n--;
    while (n && v[n - 1] == '"') n--;
    snprintf(out, cap, "%.*s", (int)n, v);
}

static void header_value(const char *v, size_t n, char *out, size_t cap) {
    snprintf(out, cap, "%.*s", (int)(n < cap ? n : cap - 1), v);
}

/* Link: <url>; rel="next", possibly among other links. */
static void link_next(const char *v, size_t n, char *out, size_t cap) {
    const char *end = v + n;
    while (v < end) {
        const char *lt = memchr(v, '<', (size_t)(end - v));
        if (!lt) return;
        const char *gt = memchr(lt, '>', (size_t)(end - lt));
        if (!gt) return;
        const char *next = memchr(gt, ',', (size_t)(end - gt));
        const char *stop = next ? next : end;
        for (const char *p = gt; p + 3 < stop; p++)
            if (!strncasecmp(p, "rel", 3)) {
                const char *q = p + 3;
                while (q < stop && (*q == ' ' || *q == '=' || *q == '"')) q++;
                if (stop - q >= 4 && !strncasecmp(q, "next", 4)) {
                    if ((size_t)(gt - lt - 1) < cap) snprintf(out, cap, "%.*s", (int)(gt - lt - 1), lt + 1);
                    return;
                }
            }
        v = next ? next + 1 : end;
    }
}

void bs_hub_resp_reset(bs_hub_resp *r) {
    char *body = r->body;
    size_t bl = r->body_len;
    memset(r, 0, sizeof *r);
    r->body = body;
    r->body_len = bl;
    r->linked_size = r->content_length = r->range_start = r->range_total = -1;
    r->retry_after = r->ratelimit_reset = -1;
}

/* RateLimit: "api";r=0;t=55 (IETF draft httpapi-ratelimit-headers, as the Hub
 * sends it with a 429): the seconds until the window resets when none is
 * left, else -1. */
static long ratelimit_reset(const char *v, size_t n) {
    char buf[256];
    snprintf(buf, sizeof buf, "%.*s", (int)(n < sizeof buf ? n : sizeof buf - 1), v);
    long rem = -1, reset = -1;
    for (char *p = buf; *p; p++) {
        if ((*p != 'r' && *p != 't') || (p > buf && p[-1] != ';' && p[-1] != ' ')) continue;
        char *q = p + 1;
        while (*q == ' ') q++;
        if (*q != '=') continue;
        q++;
        while (*q == ' ') q++;
        if (*q < '0' || *q > '9') continue;
        long x = strtol(q, NULL, 10);
        if (*p == 'r') rem = x;
        else reset = x;
    }
    return rem == 0 && reset >= 0 ? (reset > 3600 ? 3600 : reset) : -1;
}

void bs_hub_header_line(bs_hub_resp *r, const char *data, size_t n) {
    while (n && (data[n - 1] == '\r' || data[n - 1] == '\n')) n--;
    if (n >= 5 && !strncmp(data, "HTTP/", 5)) { /* a new answer (after 100 Continue): forget the last one's */
        bs_hub_resp_reset(r);
        const char *sp = memchr(data, ' ', n), *end = data + n; /* (curl's line is not NUL-terminated) */
        long st = 0;
        for (const char *p = sp ? sp + 1 : end; p < end && p < sp + 4 && *p >= '0' && *p <= '9'; p++)
            st = st * 10 + (*p - '0');
        r->status = st;
        return;
    }
    const char *colon = memchr(data, ':', n);
    if (!colon) return;
    size_t kl = (size_t)(colon - data);
    const char *v = colon + 1;
    while (v < data + n && (*v == ' ' || *v == '\t')) v++;
    size_t vl = (size_t)(data + n - v);
#define IS(name) (kl == sizeof name - 1 && !strncasecmp(data, name, kl))
    char tmp[64];
    if (IS("X-Error-Code")) header_value(v, vl, r->error_code, sizeof r->error_code);
    else if (IS("X-Error-Message")) header_value(v, vl, r->error_message, sizeof r->error_message);
    else if (IS("X-Repo-Commit")) header_value(v, vl, r->repo_commit, sizeof r->repo_commit);
    else if (IS("ETag")) etag_norm(v, vl, r->etag, sizeof r->etag);
    else if (IS("X-Linked-Etag")) etag_norm(v, vl, r->linked_etag, sizeof r->linked_etag);
    else if (IS("Location")) {
        if (vl < sizeof r->location) header_value(v, vl, r->location, sizeof r->location);
    }
    else if (IS("Link")) link_next(v, vl, r->next, sizeof r->next);
    else if (IS("RateLimit")) r->ratelimit_reset = ratelimit_reset(v, vl);
    else if (IS("X-Linked-Size") || IS("Content-Length") || IS("Retry-After")) {
        header_value(v, vl, tmp, sizeof tmp);
        char *end;
        long long x = strtoll(tmp, &end, 10);
        int ok = end != tmp && !*end && x >= 0 && tmp[0] >= '0' && tmp[0] <= '9';
        if (IS("X-Linked-Size")) r->linked_size = ok ? x : -1;
        else if (IS("Content-Length")) r->content_length = ok ? x : -1;
        else r->retry_after = ok ? (long)(x > 3600 ? 3600 : x) : -1; /* an HTTP date: not used, as huggingface_hub */
    } else if (IS("Content-Range")) {
        long long a, b, t;
        header_value(v, vl, tmp, sizeof tmp);
        if (sscanf(tmp, "bytes %lld-%lld/%lld", &a, &b, &t) == 3 && a >= 0 && b >= a && t > b)
            r->range_start = a, r->range_total = t;
    }
#undef IS
}

static size_t on_header(char *data, size_t size, size_t nitems, void *ud) {
    xfer_t *x = ud;
    bs_hub_header_line(x->resp, data, size * nitems);
    return size * nitems;
}

static size_t on_body(char *data, size_t size, size_t nmemb, void *ud) {
    xfer_t *x = ud;
    size_t n = size * nmemb;
    if (x->rq->sink) {
        if (x->resp->status / 100 != 2) return n; /* an error page is not file content */
        if (x->rq->sink(x->rq->sink_ud, data, n)) {
            x->sink_stopped = 1;
            return 0;
        }
        return n;
    }
    bs_hub_resp *r = x->resp;
    if (r->body_len + n > BODY_MAX) {
        x->too_big = 1;
        return 0;
    }
    if (r->body_len + n + 1 > x->cap) {
        size_t nc = x->cap ? x->cap : 4096;
        while (nc < r->body_len + n + 1) nc *= 2;
        char *nb = realloc(r->body, nc);
        if (!nb) {
            x->too_big = 1;
            return 0;
        }
        r->body = nb;
        x->cap = nc;
    }
    char *nb = r->body;
    memcpy(nb + r->body_len, data, n);
    r->body_len += n;
    nb[r->body_len] = 0;
    return n;
}

static int on_progress(void *ud, curl_off_t dt, curl_off_t dn, curl_off_t ut, curl_off_t un) {
    xfer_t *x = ud;
    return x->h->cancel && x->h->cancel(x->h->ud) ? 1 : 0;
}

int bs_hub_http_do(bs_hub_http *h, const bs_hub_req *rq, bs_hub_resp *resp, int *transport, bs_err *e) {
    *transport = 0;
    free(resp->body);
    resp->body = NULL;
    resp->body_len = 0;
    bs_hub_resp_reset(resp);
    xfer_t x = { h, rq, resp, 0, 0, 0 };
    CURL *c = h->curl;
    char errbuf[CURL_ERROR_SIZE] = "";
    char range[48];
    struct curl_slist *hd = NULL;
    curl_easy_reset(c); /* keeps the open connections */
    curl_easy_setopt(c, CURLOPT_URL, rq->url);
    curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(c, CURLOPT_FOLLOWLOCATION, 0L);
    curl_easy_setopt(c, CURLOPT_PROTOCOLS_STR, "http,https");
    curl_easy_setopt(c, CURLOPT_CONNECTTIMEOUT, 10L);
    curl_easy_setopt(c, CURLOPT_LOW_SPEED_LIMIT, 1L);
    curl_easy_setopt(c, CURLOPT_LOW_SPEED_TIME, STALL_S);
    curl_easy_setopt(c, CURLOPT_USERAGENT, "basal-c/" BASAL_VERSION);
    curl_easy_setopt(c, CURLOPT_ERRORBUFFER, errbuf);
    curl_easy_setopt(c, CURLOPT_HEADERFUNCTION, on_header); /* the status too: on_body tells content from an error page by it */
    curl_easy_setopt(c, CURLOPT_HEADERDATA, &x);
    curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, on_body);
    curl_easy_setopt(c, CURLOPT_WRITEDATA, &x);
    curl_easy_setopt(c, CURLOPT_NOPROGRESS, 0L);
    curl_easy_setopt(c, CURLOPT_XFERINFOFUNCTION, on_progress);
    curl_easy_setopt(c, CURLOPT_XFERINFODATA, &x);
    if (!strcmp(rq->method, "HEAD")) curl_easy_setopt(c, CURLOPT_NOBODY, 1L);
    if (!rq->sink) curl_easy_setopt(c, CURLOPT_TIMEOUT, ANSWER_S);
    if (rq->range_from > 0) {
        snprintf(range, sizeof range, "%lld-", rq->range_from);
        curl_easy_setopt(c, CURLOPT_RANGE, range);
    }
    /* the real size, never a compressed one (huggingface_hub sends identity too) */
    hd = curl_slist_append(hd, "Accept-Encoding: identity");
    if (hd && rq->auth && h->auth && bs_hub_http_same_origin(h, rq->url)) {
        struct curl_slist *n2 = curl_slist_append(hd, h->auth);
        if (n2) hd = n2;
    }
    curl_easy_setopt(c, CURLOPT_HTTPHEADER, hd);
    CURLcode cc = curl_easy_perform(c);
    /* errbuf and hd are this frame's: curl must not keep them (it may write
     * the error buffer until it is unset, curl_easy_cleanup included) */
    curl_easy_setopt(c, CURLOPT_ERRORBUFFER, NULL);
    curl_easy_setopt(c, CURLOPT_HTTPHEADER, NULL);
    for (struct curl_slist *l = hd; l; l = l->next) bs_hub_wipe(l->data); /* its copy of the Authorization line */
    curl_slist_free_all(hd);
    long status = 0;
    curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &status);
    if (status) resp->status = status;
    if (cc == CURLE_OK) return BS_OK;
    if (x.sink_stopped) return BS_EIO; /* the sink said why, in its own record */
    if (x.too_big) return bs_fail(e, BS_EIO, "%s: the answer is larger than %zu MiB", rq->url, BODY_MAX >> 20);
    if (cc == CURLE_ABORTED_BY_CALLBACK) return bs_fail(e, BS_EIO, "cancelled");
    /* no answer at all from this address: the network or the Hub is not there */
    *transport = cc == CURLE_COULDNT_RESOLVE_HOST || cc == CURLE_COULDNT_RESOLVE_PROXY || cc == CURLE_COULDNT_CONNECT ? 2 : 1;
    char shown[600];
    bs_hub_url_shown(rq->url, shown, sizeof shown);
    return bs_fail(e, BS_EIO, "%s %s: %s", rq->method, shown, errbuf[0] ? errbuf : curl_easy_strerror(cc));
}
