#include "base/util.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#ifdef __GLIBC__
#include <malloc.h>
#endif
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

int bs_fail(bs_err *e, int code, const char *fmt, ...) {
    if (e) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(e->msg, sizeof e->msg, fmt, ap);
        va_end(ap);
        e->code = code;
    }
    return code;
}

const char *bs_strerror(int code) {
    switch (code) {
    case BS_OK: return "ok";
    case BS_EINVAL: return "invalid argument";
    case BS_EIO: return "I/O error";
    case BS_ENOMEM: return "out of memory";
    case BS_EFORMAT: return "bad file format";
    case BS_EUNSUP: return "not supported";
    case BS_EINTERNAL: return "internal error";
    case BS_ERANGE: return "out of range";
    default: return "unknown error";
    }
}

int bs_read_file(const char *path, char **out, size_t *len, bs_err *e) {
    *out = NULL;
    if (len) *len = 0;
    FILE *f = fopen(path, "rb");
    if (!f) return bs_fail(e, BS_EIO, "%s: %s", path, strerror(errno));
    char *buf = NULL;
    size_t cap = 0, n = 0;
    for (;;) {
        if (cap - n < 65536) {
            size_t ncap = cap ? cap * 2 : 65536;
            char *nb = realloc(buf, ncap + 1);
            if (!nb) {
                free(buf);
                fclose(f);
                return bs_fail(e, BS_ENOMEM, "%s: out of memory", path);
            }
            buf = nb;
            cap = ncap;
        }
        size_t r = fread(buf + n, 1, cap - n, f);
        n += r;
        if (r == 0) break;
    }
    int bad = ferror(f), err = errno; /* e.g. EISDIR: fopen opens a directory, fread fails */
    fclose(f);
    if (bad) {
        free(buf);
        return bs_fail(e, BS_EIO, "%s: read error: %s", path, strerror(err));
    }
    buf[n] = 0;
    *out = buf;
    if (len) *len = n;
    return BS_OK;
}

int bs_read_regular_file(const char *path, char **out, size_t *len, size_t max_bytes, bs_err *e) {
    *out = NULL;
    if (len) *len = 0;
    /* O_NONBLOCK: opening a FIFO for reading would wait for a writer */
    int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0) return bs_fail(e, BS_EIO, "%s: %s", path, strerror(errno));
    struct stat st;
    int rc = BS_OK;
    char *buf = NULL;
    size_t n = 0;
    if (fstat(fd, &st) != 0) {
        rc = bs_fail(e, BS_EIO, "%s: %s", path, strerror(errno));
        goto done;
    }
    if (!S_ISREG(st.st_mode)) {
        rc = bs_fail(e, BS_EFORMAT, "%s: not a regular file", path);
        goto done;
    }
    if ((uint64_t)st.st_size > max_bytes) {
        rc = bs_fail(e, BS_EFORMAT, "%s: %llu bytes, more than such a file can be (%zu)", path,
                     (unsigned long long)st.st_size, max_bytes);
        goto done;
    }
    int fl = fcntl(fd, F_GETFL);
    if (fl >= 0) fcntl(fd, F_SETFL, fl & ~O_NONBLOCK);
    size_t want = (size_t)st.st_size;
    if (!(buf = malloc(want + 1))) {
        rc = bs_fail(e, BS_ENOMEM, "%s: out of memory", path);
        goto done;
    }
    while (n < want) { /* a file that grows meanwhile is read as its size was */
        ssize_t r = read(fd, buf + n, want - n);
        if (r < 0 && errno == EINTR) continue;
        if (r < 0) {
            rc = bs_fail(e, BS_EIO, "%s: read error: %s", path, strerror(errno));
            goto done;
        }
        if (r == 0) break;
        n += (size_t)r;
    }
    buf[n] = 0;
    *out = buf;
    buf = NULL;
    if (len) *len = n;
done:
    free(buf);
    close(fd);
    return rc;
}

int bs_write_file(const char *path, const void *data, size_t len, bs_err *e) {
    FILE *f = fopen(path, "wb");
    if (!f) return bs_fail(e, BS_EIO, "%s: %s", path, strerror(errno));
    size_t w = fwrite(data, 1, len, f);
    int err = w != len ? errno : 0;
    if (fclose(f) != 0 && !err) err = errno ? errno : EIO;
    if (w != len && !err) err = EIO;
    if (err) return bs_fail(e, BS_EIO, "%s: write error: %s", path, strerror(err));
    return BS_OK;
}

char *bs_strfmt(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    if (n < 0) return NULL;
    char *s = malloc((size_t)n + 1);
    if (!s) return NULL;
    va_start(ap, fmt);
    vsnprintf(s, (size_t)n + 1, fmt, ap);
    va_end(ap);
    return s;
}

char *bs_path_join(const char *dir, const char *name) {
    size_t dl = strlen(dir);
    if (dl && dir[dl - 1] == '/') return bs_strfmt("%s%s", dir, name);
    return bs_strfmt("%s/%s", dir, name);
}

int bs_file_exists(const char *path) {
    struct stat st;
    return stat(path, &st) == 0;
}

/* The length of path's parent (no trailing slashes): 0 for a bare name. */
static size_t parent_len(const char *path) {
    size_t n = strlen(path);
    while (n > 1 && path[n - 1] == '/') n--;
    while (n > 0 && path[n - 1] != '/') n--;
    while (n > 1 && path[n - 1] == '/') n--;
    return n;
}

int bs_mkdir_parents(const char *path, char **top, bs_err *e) {
    *top = NULL;
    size_t n = parent_len(path);
    char *buf = bs_strfmt("%.*s", (int)n, path);
    if (!buf) return bs_fail(e, BS_ENOMEM, "out of memory");
    int rc = BS_OK;
    for (size_t i = 1; i <= n; i++) {
        if (i < n && buf[i] != '/') continue;
        char c = buf[i];
        buf[i] = '\0';
        struct stat st;
        if (stat(buf, &st) == 0) {
            if (!S_ISDIR(st.st_mode)) rc = bs_fail(e, BS_EIO, "%s: not a directory", buf);
        } else if (mkdir(buf, 0755) != 0) {
            rc = bs_fail(e, BS_EIO, "%s: cannot create the directory: %s", buf, strerror(errno));
        } else if (!*top && !(*top = bs_strfmt("%s", buf))) {
            rmdir(buf);
            rc = bs_fail(e, BS_ENOMEM, "out of memory");
        }
        buf[i] = c;
        if (rc) break;
    }
    free(buf);
    if (rc && *top) {
        bs_rmdir_parents(path, *top);
        free(*top);
        *top = NULL;
    }
    return rc;
}

void bs_rmdir_parents(const char *path, const char *top) {
    if (!top) return;
    size_t t = strlen(top), n = parent_len(path);
    char *buf = bs_strfmt("%.*s", (int)n, path);
    if (!buf) return;
    /* deepest first, up to and including top; a directory something else
     * put a file in meanwhile stays (rmdir fails) */
    while (strlen(buf) >= t) {
        int last = !strcmp(buf, top);
        if (rmdir(buf) != 0 || last) break;
        buf[parent_len(buf)] = '\0';
    }
    free(buf);
}

float bs_f16_to_f32(uint16_t h) {
    uint32_t sign = (uint32_t)(h & 0x8000) << 16;
    uint32_t exp = (h >> 10) & 0x1f, man = h & 0x3ff, u;
    if (exp == 0) {
        if (man == 0) {
            u = sign;
        } else { /* subnormal: normalise */
            int s = -1;
            do { s++; man <<= 1; } while (!(man & 0x400));
            u = sign | ((uint32_t)(127 - 15 - s) << 23) | ((man & 0x3ff) << 13);
        }
    } else if (exp == 31) {
        u = sign | 0x7f800000u | (man << 13);
    } else {
        u = sign | ((exp + 127 - 15) << 23) | (man << 13);
    }
    union { uint32_t u; float f; } v = { u };
    return v.f;
}

uint16_t bs_f32_to_bf16(float f) {
    union { float f; uint32_t u; } v = { f };
    if ((v.u & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((v.u >> 16) | 0x40);
    return (uint16_t)((v.u + 0x7fffu + ((v.u >> 16) & 1)) >> 16);
}

uint16_t bs_f32_to_f16(float f) {
    union { float f; uint32_t u; } v = { f };
    uint32_t u = v.u, sign = (u >> 16) & 0x8000;
    int32_t exp = (int32_t)((u >> 23) & 0xff) - 127 + 15;
    uint32_t man = u & 0x7fffff;
    if (((u >> 23) & 0xff) == 0xff) return (uint16_t)(sign | 0x7c00 | (man ? 0x200 : 0));
    if (exp >= 31) return (uint16_t)(sign | 0x7c00);
    if (exp <= 0) {
        if (exp < -10) return (uint16_t)sign;
        man |= 0x800000;
        int shift = 14 - exp;
        uint32_t half = 1u << (shift - 1);
        uint32_t r = man >> shift, rem = man & ((1u << shift) - 1);
        if (rem > half || (rem == half && (r & 1))) r++;
        return (uint16_t)(sign | r);
    }
    uint32_t r = man >> 13, rem = man & 0x1fff;
    uint32_t h = sign | ((uint32_t)exp << 10) | r;
    if (rem > 0x1000 || (rem == 0x1000 && (r & 1))) h++; /* carries into exponent correctly */
    return (uint16_t)h;
}

void bs_buf_init(bs_buf *b) { memset(b, 0, sizeof *b); }

void bs_buf_free(bs_buf *b) {
    free(b->data);
    memset(b, 0, sizeof *b);
}

void bs_buf_reserve(bs_buf *b, size_t extra) {
    if (b->oom || b->cap - b->len > extra) return;
    size_t ncap = b->cap ? b->cap : 64;
    while (ncap - b->len <= extra) ncap *= 2;
    char *nd = realloc(b->data, ncap);
    if (!nd) { b->oom = 1; return; }
    b->data = nd;
    b->cap = ncap;
}

void bs_buf_put(bs_buf *b, const void *p, size_t n) {
    bs_buf_reserve(b, n);
    if (b->oom) return;
    memcpy(b->data + b->len, p, n);
    b->len += n;
    b->data[b->len] = 0;
}

void bs_buf_puts(bs_buf *b, const char *s) { bs_buf_put(b, s, strlen(s)); }
void bs_buf_putc(bs_buf *b, char c) { bs_buf_put(b, &c, 1); }

void bs_buf_put_html(bs_buf *b, const char *s) {
    for (; s && *s; s++) {
        switch (*s) {
        case '<': bs_buf_puts(b, "&lt;"); break;
        case '>': bs_buf_puts(b, "&gt;"); break;
        case '&': bs_buf_puts(b, "&amp;"); break;
        case '"': bs_buf_puts(b, "&quot;"); break;
        case '\'': bs_buf_puts(b, "&#39;"); break;
        default: bs_buf_putc(b, *s);
        }
    }
}

void bs_buf_printf(bs_buf *b, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    if (n < 0) { b->oom = 1; return; }
    bs_buf_reserve(b, (size_t)n + 1);
    if (b->oom) return;
    va_start(ap, fmt);
    vsnprintf(b->data + b->len, (size_t)n + 1, fmt, ap);
    va_end(ap);
    b->len += (size_t)n;
}

size_t bs_dtype_size(bs_dtype d) {
    switch (d) {
    case BS_F32: return 4;
    case BS_F16: return 2;
    case BS_BF16: return 2;
    case BS_I8: return 1;
    }
    return 0;
}

const char *bs_dtype_name(bs_dtype d) {
    switch (d) {
    case BS_F32: return "F32";
    case BS_F16: return "F16";
    case BS_BF16: return "BF16";
    case BS_I8: return "I8";
    }
    return "?";
}

double bs_now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

double bs_wall_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

void bs_trim_heap(void) {
#ifdef __GLIBC__
    malloc_trim(0);
#endif
}

void *bs_malloc_big(size_t bytes) {
    const size_t huge = (size_t)2 << 20;
    if (bytes < huge) return malloc(bytes ? bytes : 1);
    void *p = NULL;
    if (posix_memalign(&p, huge, bytes)) return NULL;
#ifdef MADV_HUGEPAGE
    /* advice only: where THP is off the pages stay 4 KiB */
    (void)madvise(p, bytes, MADV_HUGEPAGE);
#endif
    return p;
}

int bs_cache_dir(char **dir, const char **source, bs_err *e) {
    const char *bh = getenv("BASAL_HOME"), *xdg = getenv("XDG_CACHE_HOME"), *home = getenv("HOME");
    if (bh && *bh) *dir = bs_strfmt("%s/.cache", bh), *source = "BASAL_HOME";
    else if (xdg && xdg[0] == '/') *dir = bs_strfmt("%s/basal", xdg), *source = "XDG_CACHE_HOME";
    else *dir = bs_strfmt("%s/.cache/basal", home ? home : ""), *source = "HOME";
    return *dir ? BS_OK : bs_fail(e, BS_ENOMEM, "out of memory");
}
