/* Paths, methods, authentication and request ids (spec 02 §1.2, §2); the error
 * bodies themselves are in core/reply.c. */
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/random.h>
#include <time.h>

#include "server/server_int.h"

static int hexval(char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}

long bs_path_decode(const char *raw, size_t n, char *out) {
    size_t o = 0;
    for (size_t i = 0; i < n; i++) {
        unsigned char ch = (unsigned char)raw[i];
        if (ch == '%') {
            int hi = i + 1 < n ? hexval(raw[i + 1]) : -1;
            int lo = i + 2 < n ? hexval(raw[i + 2]) : -1;
            if (hi < 0 || lo < 0) return -1;
            ch = (unsigned char)(hi << 4 | lo);
            i += 2;
        }
        if (!ch) return -1;
        out[o++] = (char)ch;
    }
    out[o] = 0;
    return (long)o;
}

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

int bs_cors_allowed(const char *const *origins, size_t n, const char *origin, size_t len) {
    if (!len) return 0;
    for (size_t i = 0; i < n; i++) {
        if (!strcmp(origins[i], "*")) return 1;
        if (strlen(origins[i]) == len && !strncasecmp(origins[i], origin, len)) return 1;
    }
    return 0;
}

void bs_names_header(bs_buf *out, const char *const *names, size_t n) {
    static const char hex[] = "0123456789ABCDEF";
    for (size_t i = 0; i < n; i++) {
        if (i) bs_buf_puts(out, ", ");
        for (const unsigned char *p = (const unsigned char *)names[i]; *p; p++) {
            if (*p < 0x21 || *p > 0x7e || *p == '%' || *p == ',') {
                char esc[3] = { '%', hex[*p >> 4], hex[*p & 15] };
                bs_buf_put(out, esc, 3);
            } else {
                bs_buf_putc(out, (char)*p);
            }
        }
    }
}

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
