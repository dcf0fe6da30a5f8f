/* Paths, methods, authentication and request ids (spec 02 §1.2, §2); the error
 * bodies themselves are in protocol/reply.c. */
#include <limits.h>
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
    if (!strcmp(url, "/health/live")) return R_LIVE;
    if (!strcmp(url, "/metrics")) return R_METRICS;
    if (!strcmp(url, "/")) return R_UI;                /* the playground (issue 18) */
    if (!strcmp(url, "/openapi.json")) return R_OPENAPI;
    if (!strcmp(url, "/v1/lens")) return R_LENS;       /* the playground's logit lens (issue 33) */
    return R_NONE;
}

int bs_route_method_ok(bs_route r, const char *method, const char **allow) {
    if (r == R_SYSTEMONE || r == R_BASAL || r == R_LENS) {
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

/* ---- HTTP/1.1 pieces of the request parser (http.c) ---- */

const char *bs_http_reason(int status) {
    switch (status) {
    case 100: return "Continue";
    case 200: return "OK";
    case 204: return "No Content";
    case 400: return "Bad Request";
    case 401: return "Unauthorized";
    case 403: return "Forbidden";
    case 404: return "Not Found";
    case 405: return "Method Not Allowed";
    case 408: return "Request Timeout";
    case 413: return "Content Too Large";
    case 422: return "Unprocessable Content";
    case 431: return "Request Header Fields Too Large";
    case 500: return "Internal Server Error";
    case 501: return "Not Implemented";
    case 503: return "Service Unavailable";
    case 505: return "HTTP Version Not Supported";
    case 529: return "Overloaded";
    default: return "Unknown";
    }
}


int bs_http_ci_eq(const char *a, size_t n, const char *lit) { return strlen(lit) == n && !strncasecmp(a, lit, n); }


/* Trims optional whitespace around [*p, *p + *n). */
void bs_http_trim(const char **p, size_t *n) {
    while (*n && (**p == ' ' || **p == '\t')) (*p)++, (*n)--;
    while (*n && ((*p)[*n - 1] == ' ' || (*p)[*n - 1] == '\t')) (*n)--;
}


/* One Content-Length field value: a comma list of equal decimal numbers
 * (RFC 9112 §6.3). Returns 0 and merges into *have and *out (a different value
 * than before is an error), -1 when invalid or conflicting. Numbers too large
 * for 64 bits become ULLONG_MAX (answered 413 like any body over the limit). */
int bs_http_content_length(const char *v, size_t n, int *have, unsigned long long *out) {
    size_t i = 0;
    do {
        size_t j = i;
        while (j < n && v[j] != ',') j++;
        const char *p = v + i;
        size_t len = j - i;
        bs_http_trim(&p, &len);
        if (!len) return -1;
        unsigned long long x = 0;
        for (size_t k = 0; k < len; k++) {
            if (p[k] < '0' || p[k] > '9') return -1;
            unsigned d = (unsigned)(p[k] - '0');
            x = x > (ULLONG_MAX - d) / 10 ? ULLONG_MAX : x * 10 + d;
        }
        if (*have && *out != x) return -1;
        *have = 1;
        *out = x;
        i = j + 1;
    } while (i <= n);
    return 0;
}


/* Does the first line end in an HTTP version whose major is not 1? */
int bs_http_other_major(const char *in, size_t len) {
    const char *eol = memchr(in, '\n', len);
    if (!eol) return 0;
    size_t n = (size_t)(eol - in);
    if (n && in[n - 1] == '\r') n--;
    const char *sp = NULL;
    for (size_t i = 0; i < n; i++)
        if (in[i] == ' ') sp = in + i;
    if (!sp) return 0;
    size_t vl = (size_t)(in + n - sp - 1);
    const char *v = sp + 1;
    return vl >= 6 && !memcmp(v, "HTTP/", 5) && v[5] >= '0' && v[5] <= '9' && v[5] != '1';
}


void bs_http_target_path(const char **t, size_t *n) {
    const char *p = *t;
    size_t len = *n, i;
    if (len >= 7 && !strncasecmp(p, "http://", 7)) i = 7;
    else if (len >= 8 && !strncasecmp(p, "https://", 8)) i = 8;
    else return;
    while (i < len && p[i] != '/' && p[i] != '?' && p[i] != '#') i++; /* RFC 3986: the authority ends there */
    if (i < len && p[i] == '/') {
        *t = p + i;
        *n = len - i;
    } else { /* "http://host", "http://host?q" or "http://host#f": the root */
        *t = "/";
        *n = 1;
    }
}


/* Why our own decoder: the picohttpparser of Debian's libh2o reads any bytes
 * between the chunk size and the LF as an extension, so "0x2" is a last
 * chunk (size 0, extension "x2"), and it takes bare LFs. A proxy in front
 * that reads such framing otherwise would see other request boundaries than
 * this server (request smuggling); hyper (basal-rs) refuses them. */
enum { CK_SIZE0, CK_SIZE, CK_BWS, CK_EXT, CK_SIZE_LF, CK_DATA, CK_DATA_CR, CK_DATA_LF, CK_TRAILER0, CK_TRAILER,
       CK_TRAILER_LF, CK_END_LF };
#define CK_MAX_LINE 4096       /* a chunk-size line with its extensions */
#define CK_MAX_EXT 16384       /* the extension bytes of a whole body (as hyper): else 4 KiB of
                                * framing could carry each body byte, 64 GiB at a 16 MiB limit */
#define CK_MAX_TRAILER 65536   /* the trailer section (as the header block) */

/* Field content: visible ASCII, obs-text, SP and HTAB (RFC 9110 §5.5). */
static int ck_text(unsigned char ch) { return ch == '\t' || (ch >= 0x20 && ch != 0x7f); }

long bs_chunked_decode(bs_chunked *d, char *buf, size_t *n) {
    size_t src = 0, dst = 0, len = *n;
    long ret = -2;
    while (src < len) {
        unsigned char ch = (unsigned char)buf[src];
        int h;
        switch (d->state) {
        case CK_DATA: {
            size_t k = len - src < d->left ? len - src : (size_t)d->left;
            memmove(buf + dst, buf + src, k);
            dst += k;
            src += k;
            if ((d->left -= k) == 0) d->state = CK_DATA_CR;
            continue;
        }
        case CK_SIZE0:
        case CK_SIZE:
            if ((h = hexval((char)ch)) >= 0) {
                if (d->left >> 60) goto fail; /* beyond 64 bits (leading zeros are fine) */
                d->left = d->left << 4 | (unsigned)h;
                d->state = CK_SIZE;
                break;
            }
            if (d->state == CK_SIZE0) goto fail;
            /* what may follow the digits: */
            /* fallthrough */
        case CK_BWS:
            if (ch == ' ' || ch == '\t') d->state = CK_BWS;
            else if (ch == ';') d->state = CK_EXT;
            else if (ch == '\r') d->state = CK_SIZE_LF;
            else goto fail;
            break;
        case CK_EXT:
            if (ch == '\r') d->state = CK_SIZE_LF;
            else if (!ck_text(ch) || ++d->ext > CK_MAX_EXT) goto fail;
            break;
        case CK_SIZE_LF:
            if (ch != '\n') goto fail;
            d->state = d->left ? CK_DATA : CK_TRAILER0;
            d->line = 0;
            break;
        case CK_DATA_CR:
            if (ch != '\r') goto fail;
            d->state = CK_DATA_LF;
            break;
        case CK_DATA_LF:
            if (ch != '\n') goto fail;
            d->state = CK_SIZE0;
            d->left = 0;
            break;
        case CK_TRAILER0:
            if (ch == '\r') d->state = CK_END_LF;
            else if (ck_text(ch)) d->state = CK_TRAILER;
            else goto fail;
            break;
        case CK_TRAILER:
            if (ch == '\r') d->state = CK_TRAILER_LF;
            else if (!ck_text(ch)) goto fail;
            break;
        case CK_TRAILER_LF:
            if (ch != '\n') goto fail;
            d->state = CK_TRAILER0;
            break;
        case CK_END_LF:
            if (ch != '\n') goto fail;
            src++;
            ret = (long)(len - src);
            goto done;
        }
        src++;
        if (d->state == CK_SIZE || d->state == CK_BWS || d->state == CK_EXT || d->state == CK_SIZE_LF) {
            if (++d->line > CK_MAX_LINE) goto fail;
        } else if (d->state >= CK_TRAILER0 && ++d->trailer > CK_MAX_TRAILER) {
            goto fail;
        }
    }
done:
    *n = dst;
    return ret;
fail:
    *n = dst;
    return -1;
}
