#include "base/utf8.h"

#include <stdlib.h>

#include "basal.h"

size_t bs_utf8_put(uint32_t cp, char *buf) {
    if (cp < 0x80) { buf[0] = (char)cp; return 1; }
    if (cp < 0x800) {
        buf[0] = (char)(0xC0 | (cp >> 6));
        buf[1] = (char)(0x80 | (cp & 0x3F));
        return 2;
    }
    if (cp < 0x10000) {
        buf[0] = (char)(0xE0 | (cp >> 12));
        buf[1] = (char)(0x80 | ((cp >> 6) & 0x3F));
        buf[2] = (char)(0x80 | (cp & 0x3F));
        return 3;
    }
    buf[0] = (char)(0xF0 | (cp >> 18));
    buf[1] = (char)(0x80 | ((cp >> 12) & 0x3F));
    buf[2] = (char)(0x80 | ((cp >> 6) & 0x3F));
    buf[3] = (char)(0x80 | (cp & 0x3F));
    return 4;
}

/* Bytes after the lead byte c of a well-formed sequence, with the allowed
 * range of the second byte (that range is what excludes overlongs, surrogates
 * and values above U+10FFFF); -1 if c cannot lead. */
static int seq_shape(unsigned char c, unsigned char *lo, unsigned char *hi) {
    *lo = 0x80;
    *hi = 0xBF;
    if (c < 0x80) return 0;
    if (c >= 0xC2 && c <= 0xDF) return 1;
    if (c == 0xE0) { *lo = 0xA0; return 2; }
    if (c == 0xED) { *hi = 0x9F; return 2; }
    if (c >= 0xE1 && c <= 0xEF) return 2;
    if (c == 0xF0) { *lo = 0x90; return 3; }
    if (c >= 0xF1 && c <= 0xF3) return 3;
    if (c == 0xF4) { *hi = 0x8F; return 3; }
    return -1;
}

size_t bs_utf8_first_invalid(const void *str, size_t len) {
    const unsigned char *s = str;
    size_t i = 0;
    while (i < len) {
        unsigned char lo, hi;
        int need = seq_shape(s[i], &lo, &hi);
        if (need == 0) { i++; continue; }
        if (need < 0 || len - i <= (size_t)need) return i;
        if (s[i + 1] < lo || s[i + 1] > hi) return i;
        for (int k = 2; k <= need; k++)
            if ((s[i + k] & 0xC0) != 0x80) return i;
        i += (size_t)need + 1;
    }
    return len;
}

int bs_utf8_decode(const char *s, size_t len, uint32_t **out, size_t *n, size_t *bad_at) {
    *out = NULL;
    *n = 0;
    size_t bad = bs_utf8_first_invalid(s, len);
    if (bad < len) {
        if (bad_at) *bad_at = bad;
        return BS_EINVAL;
    }
    uint32_t *cp = malloc((len ? len : 1) * sizeof *cp);
    if (!cp) return BS_ENOMEM;
    const unsigned char *u = (const unsigned char *)s;
    size_t i = 0, k = 0;
    while (i < len) {
        unsigned char lo, hi;
        int need = seq_shape(u[i], &lo, &hi);
        uint32_t c = need == 0 ? u[i] : (uint32_t)u[i] & (0x3Fu >> need);
        for (int j = 1; j <= need; j++) c = (c << 6) | (u[i + j] & 0x3F);
        cp[k++] = c;
        i += (size_t)need + 1;
    }
    *out = cp;
    *n = k;
    return BS_OK;
}
