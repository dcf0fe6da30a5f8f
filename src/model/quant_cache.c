#include "model/quant_cache.h"

#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/sha256.h"
#include "base/util.h"

#define RULE "per-row symmetric: s = amax/127, q = rint(w/s)"

int bs_quant_cache_key(const bs_model *m, char key[65], bs_err *e) {
    bs_buf id;
    bs_buf_init(&id);
    bs_buf_puts(&id, BS_QUANT_CACHE_FORMAT "\n" RULE "\n");
    for (int i = 0; i < m->weights.n_files; i++) {
        const char *p = m->weights.files[i].path;
        char *real = realpath(p, NULL);
        struct stat st;
        if (stat(p, &st) != 0) {
            free(real);
            bs_buf_free(&id);
            return bs_fail(e, BS_EIO, "%s: %s", p, strerror(errno));
        }
        bs_buf_printf(&id, "%s\n%lld\n%lld.%09ld\n", real ? real : p, (long long)st.st_size,
                      (long long)st.st_mtim.tv_sec, st.st_mtim.tv_nsec);
        free(real);
    }
    if (id.oom) {
        bs_buf_free(&id);
        return bs_fail(e, BS_ENOMEM, "out of memory");
    }
    uint8_t d[32];
    bs_sha256(id.data, id.len, d);
    bs_sha256_hex(d, key);
    bs_buf_free(&id);
    return BS_OK;
}

/* ---- reading ---------------------------------------------------------------- */

typedef struct {
    const char *path;
    const uint8_t *data; /* the data area */
    uint64_t data_len;
    json_t *hdr;
} cfile;

/* The bytes of tensor name if it has exactly this dtype and shape (ndim 1
 * or 2), else NULL with e->msg set. */
static const void *tensor(const cfile *f, const char *name, const char *dtype, int64_t n, int64_t k, bs_err *e) {
    const json_t *t = json_object_get(f->hdr, name);
    const json_t *sh = json_object_get(t, "shape"), *off = json_object_get(t, "data_offsets");
    const char *dt = json_string_value(json_object_get(t, "dtype"));
    size_t nd = k ? 2 : 1;
    if (!t || !dt || strcmp(dt, dtype) || json_array_size(sh) != nd ||
        json_integer_value(json_array_get(sh, 0)) != n || (k && json_integer_value(json_array_get(sh, 1)) != k) ||
        json_array_size(off) != 2) {
        bs_fail(e, BS_EFORMAT, "%s: tensor %s missing or not %s %s[%lld%s]", f->path, name, dtype, "",
                (long long)n, k ? ", k" : "");
        return NULL;
    }
    json_int_t b = json_integer_value(json_array_get(off, 0)), en = json_integer_value(json_array_get(off, 1));
    uint64_t want = (uint64_t)n * (uint64_t)(k ? k : 1) * (strcmp(dtype, "I8") ? 4u : 1u);
    if (b < 0 || en < b || (uint64_t)en > f->data_len || (uint64_t)(en - b) != want) {
        bs_fail(e, BS_EFORMAT, "%s: tensor %s: data [%lld, %lld) outside the %llu data bytes (truncated?)", f->path,
                name, (long long)b, (long long)en, (unsigned long long)f->data_len);
        return NULL;
    }
    return f->data + b;
}

/* Copies one matrix's q and scale into a fresh I8 block (cpu/quant.c's
 * layout), checking what no quantization gives. */
static int load_mat(const cfile *f, const char *base, bs_wmat *w, void **block, bs_err *e) {
    char name[192];
    snprintf(name, sizeof name, "%s.q", base);
    const int8_t *q = tensor(f, name, "I8", w->n, w->k, e);
    snprintf(name, sizeof name, "%s.scale", base);
    const float *s = q ? tensor(f, name, "F32", w->n, 0, e) : NULL;
    if (!s) return 0;
    size_t qn = (size_t)w->n * (size_t)w->k, qbytes = (qn + 63) & ~(size_t)63;
    if (memchr(q, 0x80, qn)) return bs_fail(e, BS_EFORMAT, "%s: %s.q holds -128", f->path, base), 0;
    void *p = NULL;
    if (posix_memalign(&p, 64, qbytes + (size_t)w->n * sizeof(float))) return BS_ENOMEM;
    memcpy(p, q, qn);
    float *scale = (float *)(void *)((char *)p + qbytes);
    memcpy(scale, s, (size_t)w->n * sizeof(float));
    for (int r = 0; r < w->n; r++)
        if (!isfinite(scale[r]) || scale[r] < 0.0f) {
            free(p);
            return bs_fail(e, BS_EFORMAT, "%s: %s.scale[%d] is %g", f->path, base, r, scale[r]), 0;
        }
    *block = p;
    return 1;
}

/* The header: metadata of this format and source. 1 usable, 0 not (e set). */
static int check_header(cfile *f, const uint8_t *map, uint64_t size, const char *key, bs_err *e) {
    if (size < 8) return bs_fail(e, BS_EFORMAT, "%s: %llu bytes (truncated)", f->path, (unsigned long long)size), 0;
    uint64_t hl = 0;
    for (int i = 7; i >= 0; i--) hl = hl << 8 | map[i];
    if (hl > size - 8) return bs_fail(e, BS_EFORMAT, "%s: header of %llu bytes past the end (truncated)", f->path,
                                      (unsigned long long)hl), 0;
    json_error_t je;
    if (!(f->hdr = json_loadb((const char *)map + 8, (size_t)hl, 0, &je)))
        return bs_fail(e, BS_EFORMAT, "%s: header is not JSON: %s", f->path, je.text), 0;
    f->data = map + 8 + hl;
    f->data_len = size - 8 - hl;
    const json_t *md = json_object_get(f->hdr, "__metadata__");
    const char *fmt = json_string_value(json_object_get(md, "format")), *src = json_string_value(json_object_get(md, "source"));
    if (!fmt || strcmp(fmt, BS_QUANT_CACHE_FORMAT) || !src || strcmp(src, key))
        return bs_fail(e, BS_EFORMAT, "%s: written for another format or source", f->path), 0;
    return 1;
}

int bs_quant_cache_read(bs_model *m, const char *path, const char *key, bs_err *e) {
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return bs_fail(e, BS_EIO, "%s: %s", path, strerror(errno)), 0;
    struct stat st;
    void *map = MAP_FAILED;
    if (fstat(fd, &st) == 0 && st.st_size > 0)
        map = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
    close(fd);
    if (map == MAP_FAILED) return bs_fail(e, BS_EIO, "%s: cannot map it", path), 0;
    cfile f = { path, NULL, 0, NULL };
    int n_mats = m->cfg.n_layers * BS_LAYER_MATS, done = 0, rc = check_header(&f, map, (uint64_t)st.st_size, key, e);
    void **blocks = rc == 1 ? calloc((size_t)n_mats, sizeof *blocks) : NULL;
    if (rc == 1 && !blocks) rc = BS_ENOMEM;
    for (; rc == 1 && done < n_mats; done++) {
        char base[160];
        int l = done / BS_LAYER_MATS, i = done % BS_LAYER_MATS;
        snprintf(base, sizeof base, "model.layers.%d.%s.weight", l, bs_layer_mat_name(i));
        rc = load_mat(&f, base, bs_layer_mat(&m->layers[l], i), &blocks[done], e);
    }
    if (rc == 1) { /* all or nothing: only now do the copies replace anything */
        for (int j = 0; j < n_mats; j++) {
            bs_wmat *w = bs_layer_mat(&m->layers[j / BS_LAYER_MATS], j % BS_LAYER_MATS);
            bs_gemm_unpack(w);
            w->packed = blocks[j];
            w->packed_kind = BS_WPACK_I8;
            w->scale = (const float *)(const void *)((const char *)blocks[j] +
                                                     (((size_t)w->n * (size_t)w->k + 63) & ~(size_t)63));
            blocks[j] = NULL;
        }
    }
    for (int j = 0; blocks && j < n_mats; j++) free(blocks[j]);
    free(blocks);
    json_decref(f.hdr);
    munmap(map, (size_t)st.st_size);
    return rc;
}

/* ---- writing ---------------------------------------------------------------- */

static int write_all(int fd, const void *p, size_t n) {
    const char *c = p;
    while (n) {
        ssize_t w = write(fd, c, n);
        if (w < 0 && errno == EINTR) continue;
        if (w <= 0) return -1;
        c += w;
        n -= (size_t)w;
    }
    return 0;
}

/* The header JSON: every tensor in layer order, q then scale, back to back. */
static json_t *header_of(const bs_model *m, const char *key) {
    json_t *h = json_object(), *md = json_pack("{s:s,s:s,s:s}", "format", BS_QUANT_CACHE_FORMAT, "source", key, "rule",
                                               RULE);
    if (!h || !md || json_object_set_new(h, "__metadata__", md)) {
        json_decref(h);
        return NULL;
    }
    uint64_t at = 0;
    for (int j = 0; j < m->cfg.n_layers * BS_LAYER_MATS; j++) {
        const bs_wmat *w = bs_layer_mat(&m->layers[j / BS_LAYER_MATS], j % BS_LAYER_MATS);
        char name[192];
        uint64_t qn = (uint64_t)w->n * (uint64_t)w->k;
        snprintf(name, sizeof name, "model.layers.%d.%s.weight.q", j / BS_LAYER_MATS, bs_layer_mat_name(j % BS_LAYER_MATS));
        if (json_object_set_new(h, name, json_pack("{s:s,s:[I,I],s:[I,I]}", "dtype", "I8", "shape", (json_int_t)w->n,
                                                   (json_int_t)w->k, "data_offsets", (json_int_t)at,
                                                   (json_int_t)(at + qn))))
            goto oom;
        at += qn;
        snprintf(name, sizeof name, "model.layers.%d.%s.weight.scale", j / BS_LAYER_MATS,
                 bs_layer_mat_name(j % BS_LAYER_MATS));
        if (json_object_set_new(h, name, json_pack("{s:s,s:[I],s:[I,I]}", "dtype", "F32", "shape", (json_int_t)w->n,
                                                   "data_offsets", (json_int_t)at, (json_int_t)(at + 4u * (uint64_t)w->n))))
            goto oom;
        at += 4u * (uint64_t)w->n;
    }
    return h;
oom:
    json_decref(h);
    return NULL;
}

int bs_quant_cache_write(const bs_model *m, const char *path, const char *key, bs_err *e) {
    for (int j = 0; j < m->cfg.n_layers * BS_LAYER_MATS; j++)
        if (bs_layer_mat(&m->layers[j / BS_LAYER_MATS], j % BS_LAYER_MATS)->packed_kind != BS_WPACK_I8)
            return bs_fail(e, BS_EINTERNAL, "the weights of %s are not quantized", m->dir);
    json_t *h = header_of(m, key);
    char *text = h ? json_dumps(h, JSON_COMPACT) : NULL;
    json_decref(h);
    char *tmp = text ? bs_strfmt("%s.tmp.%ld", path, (long)getpid()) : NULL;
    if (!tmp) {
        free(text);
        return bs_fail(e, BS_ENOMEM, "out of memory");
    }
    int rc = BS_OK, fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0) {
        rc = bs_fail(e, BS_EIO, "%s: %s", tmp, strerror(errno));
        goto done;
    }
    size_t hl = strlen(text), pad = (8 - hl % 8) % 8;
    uint8_t len8[8];
    for (int i = 0; i < 8; i++) len8[i] = (uint8_t)((uint64_t)(hl + pad) >> (8 * i));
    int bad = write_all(fd, len8, 8) || write_all(fd, text, hl) || write_all(fd, "        ", pad);
    for (int j = 0; !bad && j < m->cfg.n_layers * BS_LAYER_MATS; j++) {
        const bs_wmat *w = bs_layer_mat(&m->layers[j / BS_LAYER_MATS], j % BS_LAYER_MATS);
        bad = write_all(fd, w->packed, (size_t)w->n * (size_t)w->k) || write_all(fd, w->scale, (size_t)w->n * 4);
    }
    if (bad || close(fd) != 0) {
        rc = bs_fail(e, BS_EIO, "%s: %s", tmp, strerror(errno ? errno : EIO));
        if (bad) close(fd);
        unlink(tmp);
        goto done;
    }
    if (rename(tmp, path) != 0) {
        rc = bs_fail(e, BS_EIO, "%s: %s", path, strerror(errno));
        unlink(tmp);
    }
done:
    free(tmp);
    free(text);
    return rc;
}
