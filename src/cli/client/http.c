/* HTTP pieces shared by `basal client` and `basal eval` (cli/client/http.h). */
#include "cli/client/http.h"

#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "basal.h"
#include "cli/cli_opts.h"

int cl_http_urls(cl_http *h, const char *cmd, const char *url) {
    if (!url) {
        const char *env = getenv("BASAL_URL");
        url = env && *env ? env : CL_DEFAULT_URL;
    }
    const char *rest = !strncasecmp(url, "http://", 7) ? url + 7 : !strncasecmp(url, "https://", 8) ? url + 8 : NULL;
    if (!rest || !*rest) return cli_error(cmd, "server URL must use http or https"), 2;
    size_t auth = strcspn(rest, "/");
    if (memchr(rest, '@', auth) || strpbrk(url, "?#"))
        return cli_error(cmd, "server base URL must not contain credentials, a query or a fragment"), 2;
    size_t n = strlen(url);
    while (n > 0 && url[n - 1] == '/') n--;
    h->url_decide = bs_strfmt("%.*s/v1/systemone", (int)n, url);
    h->url_models = bs_strfmt("%.*s/v1/models", (int)n, url);
    if (!h->url_decide || !h->url_models) return cli_error(cmd, "out of memory"), 2;
    return 0;
}

int cl_http_headers(cl_http *h, const char *cmd, const char *key_env) {
    struct curl_slist *l = curl_slist_append(NULL, "Content-Type: application/json");
    /* no "Expect: 100-continue" round trip before larger bodies */
    if (l) l = curl_slist_append(l, "Expect:");
    const char *key = key_env ? getenv(key_env) : NULL;
    if (l && key && *key) {
        /* what an HTTP header value may hold (basal-rs: reqwest's HeaderValue::from_str): visible bytes,
         * space and tab; any other control byte is refused */
        int bad = 0;
        for (const unsigned char *k = (const unsigned char *)key; *k; k++) bad |= (*k < 0x20 && *k != '\t') || *k == 0x7f;
        if (bad) {
            curl_slist_free_all(l);
            cli_error(cmd, "%s contains an invalid bearer token", key_env);
            return 2;
        }
        char *line = bs_strfmt("Authorization: Bearer %s", key);
        struct curl_slist *l2 = line ? curl_slist_append(l, line) : NULL;
        free(line);
        if (!l2) {
            curl_slist_free_all(l);
            l = NULL;
        }
    }
    h->headers = l;
    if (!l) return cli_error(cmd, "out of memory"), 2;
    return 0;
}

void cl_http_free(cl_http *h) {
    curl_slist_free_all(h->headers);
    free(h->url_decide);
    free(h->url_models);
    memset(h, 0, sizeof *h);
}

void cl_http_easy(const cl_http *h, CURL *c) {
    curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(c, CURLOPT_HTTPHEADER, h->headers);
    curl_easy_setopt(c, CURLOPT_USERAGENT, h->user_agent);
    curl_easy_setopt(c, CURLOPT_TIMEOUT, h->timeout_s);
    curl_easy_setopt(c, CURLOPT_CONNECTTIMEOUT, h->timeout_s < 10 ? h->timeout_s : 10L);
    curl_easy_setopt(c, CURLOPT_FOLLOWLOCATION, 0L);
}

int cl_http_transient(long status) {
    return status == 408 || status == 429 || status == 500 || status == 502 || status == 503 || status == 504 ||
           status == 529;
}

double cl_http_retry_delay(int attempt, const char *retry_after) {
    if (retry_after) {
        /* only whole seconds up to 30; a longer or other value is not shortened */
        const char *r = retry_after;
        if (!*r || strspn(r, "0123456789") != strlen(r) || strlen(r) > 2 || atoi(r) > 30) return -1;
        return atoi(r);
    }
    return (double)(1 << (attempt < 4 ? attempt : 4));
}

int cl_http_retry_after(const char *p, size_t len, char *out, size_t cap) {
    if (len <= 12 || strncasecmp(p, "retry-after:", 12)) return 0;
    size_t a = 12, z = len;
    while (a < z && (p[a] == ' ' || p[a] == '\t')) a++;
    while (z > a && (p[z - 1] == '\r' || p[z - 1] == '\n' || p[z - 1] == ' ' || p[z - 1] == '\t')) z--;
    size_t m = z - a < cap - 1 ? z - a : cap - 1;
    memcpy(out, p + a, m);
    out[m] = 0;
    return 1;
}

typedef struct {
    bs_buf *out;
    size_t max;
    int too_big;
} get_sink;

static size_t on_get_body(char *p, size_t size, size_t n, void *ud) {
    get_sink *s = ud;
    size_t len = size * n;
    if (s->out->len + len > s->max) {
        s->too_big = 1;
        return 0;
    }
    bs_buf_put(s->out, p, len);
    return s->out->oom ? 0 : len;
}

long cl_http_get(const cl_http *h, const char *url, bs_buf *out, size_t max_bytes, bs_err *e) {
    CURL *c = curl_easy_init();
    if (!c) return bs_fail(e, BS_ENOMEM, "curl_easy_init failed"), -1;
    char errbuf[CURL_ERROR_SIZE] = "";
    get_sink sink = {out, max_bytes, 0};
    cl_http_easy(h, c);
    curl_easy_setopt(c, CURLOPT_URL, url);
    curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, on_get_body);
    curl_easy_setopt(c, CURLOPT_WRITEDATA, &sink);
    curl_easy_setopt(c, CURLOPT_ERRORBUFFER, errbuf);
    CURLcode rc = curl_easy_perform(c);
    long status = -1;
    if (rc == CURLE_OK) curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &status);
    else if (sink.too_big) bs_fail(e, BS_EFORMAT, "GET %s: the response exceeds %zu bytes", url, max_bytes);
    else bs_fail(e, BS_EIO, "GET %s: %s", url, errbuf[0] ? errbuf : curl_easy_strerror(rc));
    curl_easy_cleanup(c);
    return status;
}
