/* Paths, methods, authentication and the fixed bodies of spec 02 §2, §6, §10
 * (texts as hosted TypeSafe returns them, or this project's where 02 says so). */
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/random.h>
#include <time.h>

#include "server/server_int.h"

bs_route bs_route_of(const char *url) {
    if (!strcmp(url, "/v1/systemone")) return R_SYSTEMONE;
    if (!strcmp(url, "/v1/basal")) return R_BASAL;
    if (!strcmp(url, "/v1/models")) return R_MODELS;
    if (!strcmp(url, "/health")) return R_HEALTH;
    if (!strcmp(url, "/metrics")) return R_METRICS;
    return R_NONE;
}

int bs_route_method_ok(bs_route r, const char *method, const char **allow) {
    if (r == R_SYSTEMONE || r == R_BASAL) {
        *allow = "POST";
        return strcmp(method, "POST") ? -1 : 0;
    }
    *allow = "GET, HEAD";
    return strcmp(method, "GET") && strcmp(method, "HEAD") ? -1 : 0;
}

static int is_ws(char c) { return c == ' ' || c == '\t'; }

int bs_auth_check(const char *header, const char *key, size_t key_len) {
    if (!header) return 403;
    const char *s = header, *end = header + strlen(header);
    while (s < end && is_ws(*s)) s++;
    while (end > s && is_ws(end[-1])) end--;
    const char *sp = memchr(s, ' ', (size_t)(end - s));
    if (!sp || sp - s != 6 || strncasecmp(s, "bearer", 6)) return 403;
    const char *tok = sp;
    while (tok < end && *tok == ' ') tok++;
    size_t tl = (size_t)(end - tok);
    if (!tl) return 403;
    /* Every byte of the token is looked at whatever matches, so the time
     * tells nothing about how much of the key was right. */
    unsigned diff = (unsigned)(tl != key_len);
    for (size_t i = 0; i < tl; i++) diff |= (unsigned char)tok[i] ^ (unsigned char)key[key_len ? i % key_len : 0];
    return diff ? 401 : 0;
}

void bs_body_auth(bs_buf *b, bs_dialect d, int status) {
    const char *msg = status == 401 ? "Cannot authenticate with the server. Please check your API key and try again."
                                    : "Must supply an API key! Check your request and try again.";
    if (d == BS_DIALECT_SYSTEMONE)
        bs_buf_printf(b, "{\"detail\":{\"error_type\":\"authentication_error\",\"message\":\"%s\"}}", msg);
    else
        bs_buf_printf(b, "{\"error\":\"%s\"}", msg);
}

void bs_body_overloaded(bs_buf *b, bs_dialect d) {
    if (d == BS_DIALECT_SYSTEMONE)
        bs_buf_puts(b, "{\"detail\":{\"error_type\":\"overloaded_error\",\"message\":\"Too many requests in flight. "
                       "Retry after a short delay.\"}}");
    else
        bs_buf_puts(b, "{\"error\":\"overloaded: too many requests in flight\"}");
}

void bs_body_too_large(bs_buf *b, bs_dialect d, unsigned long long limit) {
    if (d == BS_DIALECT_SYSTEMONE)
        bs_buf_printf(b, "{\"detail\":{\"error_type\":\"request_too_large\",\"message\":\"Request body is larger than "
                         "%llu bytes.\"}}", limit);
    else
        bs_buf_printf(b, "{\"error\":\"request body is larger than %llu bytes\"}", limit);
}

void bs_body_engine_stopped(bs_buf *b) { bs_buf_puts(b, "{\"error\":\"internal\",\"detail\":\"engine stopped\"}"); }

static uint64_t splitmix(uint64_t *x) {
    uint64_t z = (*x += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

void bs_request_id(char out[33]) {
    static atomic_ullong counter;
    unsigned char r[16];
    if (getrandom(r, sizeof r, GRND_NONBLOCK) != (ssize_t)sizeof r) {
        /* No entropy yet (early boot): still unique within the process. */
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        uint64_t x = ((uint64_t)ts.tv_sec << 30) ^ (uint64_t)ts.tv_nsec ^ atomic_fetch_add(&counter, 1) << 40;
        uint64_t a = splitmix(&x), b = splitmix(&x);
        memcpy(r, &a, 8);
        memcpy(r + 8, &b, 8);
    }
    static const char hex[] = "0123456789abcdef";
    for (int i = 0; i < 16; i++) {
        out[2 * i] = hex[r[i] >> 4];
        out[2 * i + 1] = hex[r[i] & 15];
    }
    out[32] = 0;
}

static long long field_int(const char *s, const char *end, const char *key) {
    size_t kl = strlen(key);
    for (const char *p = s; p + kl < end; p++)
        if (!memcmp(p, key, kl)) {
            p += kl;
            long long v = 0;
            int any = 0;
            while (p < end && *p >= '0' && *p <= '9') {
                v = v * 10 + (*p++ - '0');
                any = 1;
            }
            return any ? v : -1;
        }
    return -1;
}

void bs_reply_usage(const char *body, size_t len, long long *input, long long *output, long long *questions) {
    *input = *output = *questions = -1;
    static const char pat[] = "\"usage\":{";
    const size_t pl = sizeof pat - 1;
    /* Strings in the body are escaped, so a raw `"usage":{` is structure;
     * the envelope's usage comes last (02 §4.6). */
    const char *u = NULL;
    for (size_t i = len >= pl ? len - pl + 1 : 0; i-- > 0;)
        if (!memcmp(body + i, pat, pl)) {
            u = body + i + pl;
            break;
        }
    if (!u) return;
    const char *end = memchr(u, '}', (size_t)(body + len - u));
    if (!end) return;
    *input = field_int(u, end, "\"input_tokens\":");
    *output = field_int(u, end, "\"output_tokens\":");
    *questions = field_int(u, end, "\"questions\":");
}
