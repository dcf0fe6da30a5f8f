#include "model/quant_cache.h"

#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/log.h"
#include "base/sha256.h"
#include "base/util.h"

const char bs_quant_rule_int8w[] = "per-row symmetric: s = amax/127, q = rint(w/s)";

static void add_file_id(bs_buf *id, const char *p) {
    char *real = realpath(p, NULL);
    struct stat st;
    if (stat(p, &st) == 0)
        bs_buf_printf(id, "%s\n%lld\n%lld.%09ld\n", real ? real : p, (long long)st.st_size,
                      (long long)st.st_mtim.tv_sec, st.st_mtim.tv_nsec);
    else
        bs_buf_printf(id, "%s\nmissing\n", p);
    free(real);
}

int bs_quant_cache_key(const bs_model *m, const char *rule, char key[65], bs_err *e) {
    bs_buf id;
    bs_buf_init(&id);
    bs_buf_printf(&id, "%s\n", rule);
    for (int i = 0; i < m->weights.n_files; i++) {
        struct stat st;
        if (stat(m->weights.files[i].path, &st) != 0) {
            bs_buf_free(&id);
            return bs_fail(e, BS_EIO, "%s: %s", m->weights.files[i].path, strerror(errno));
        }
        add_file_id(&id, m->weights.files[i].path);
    }
    if (m->dir) { /* the calibration forward reads config.json too */
        char *cfg = bs_path_join(m->dir, "config.json");
        if (cfg) add_file_id(&id, cfg);
        else id.oom = 1;
        free(cfg);
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

char *bs_quant_cache_path(const char *cache_dir, const char *subdir, const char *key, bs_err *e) {
    char *path = bs_strfmt("%s/%s/%s.safetensors", cache_dir, subdir, key), *top = NULL;
    if (!path) return bs_fail(e, BS_ENOMEM, "out of memory"), NULL;
    if (bs_mkdir_parents(path, &top, e) < 0) {
        free(path);
        return NULL;
    }
    free(top);
    return path;
}

/* ---- reading ---------------------------------------------------------------- */

struct bs_qc_file {
    char *path;
    int fd;
    uint64_t data_at, data_len; /* the data area: file offset and bytes */
    json_t *hdr;
};

static int pread_all(int fd, void *p, size_t n, uint64_t at) {
    char *c = p;
    while (n) {
        ssize_t r = pread(fd, c, n, (off_t)at);
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) return -1;
        c += r;
        n -= (size_t)r;
        at += (uint64_t)r;
    }
    return 0;
}

void bs_qc_close(bs_qc_file *f) {
    if (!f) return;
    if (f->fd >= 0) close(f->fd);
    json_decref(f->hdr);
    free(f->path);
    free(f);
}

int bs_qc_open(bs_qc_file **out, const char *path, const char *format, const char *key, bs_err *e) {
    *out = NULL;
    bs_qc_file *f = calloc(1, sizeof *f);
    if (!f || !(f->path = strdup(path))) {
        free(f);
        return BS_ENOMEM;
    }
    int rc = 0;
    char *text = NULL;
    struct stat st;
    uint8_t len8[8];
    uint64_t hl = 0, size = 0;
    if ((f->fd = open(path, O_RDONLY | O_CLOEXEC)) < 0 || fstat(f->fd, &st) != 0) {
        bs_fail(e, BS_EIO, "%s: %s", path, strerror(errno));
        goto done;
    }
    size = (uint64_t)st.st_size;
    if (size < 8 || pread_all(f->fd, len8, 8, 0) < 0) {
        bs_fail(e, BS_EFORMAT, "%s: %llu bytes (truncated)", path, (unsigned long long)size);
        goto done;
    }
    for (int i = 7; i >= 0; i--) hl = hl << 8 | len8[i];
    if (hl > size - 8 || hl > (64u << 20)) {
        bs_fail(e, BS_EFORMAT, "%s: header of %llu bytes past the end (truncated)", path, (unsigned long long)hl);
        goto done;
    }
    if (!(text = malloc((size_t)hl + 1))) {
        rc = BS_ENOMEM;
        goto done;
    }
    if (pread_all(f->fd, text, (size_t)hl, 8) < 0) {
        bs_fail(e, BS_EIO, "%s: cannot read its header", path);
        goto done;
    }
    json_error_t je;
    if (!(f->hdr = json_loadb(text, (size_t)hl, 0, &je))) {
        bs_fail(e, BS_EFORMAT, "%s: header is not JSON: %s", path, je.text);
        goto done;
    }
    f->data_at = 8 + hl;
    f->data_len = size - 8 - hl;
    const json_t *md = json_object_get(f->hdr, "__metadata__");
    const char *fmt = json_string_value(json_object_get(md, "format")), *src = json_string_value(json_object_get(md, "source"));
    if (!fmt || strcmp(fmt, format) || !src || strcmp(src, key)) {
        bs_fail(e, BS_EFORMAT, "%s: written for another format or source", path);
        goto done;
    }
    rc = 1;
done:
    free(text);
    if (rc == 1) *out = f;
    else bs_qc_close(f);
    return rc;
}

static size_t dtype_bytes(const char *dtype) { return strcmp(dtype, "I8") ? 4u : 1u; }

/* Where tensor name's bytes start in the file, checked for dtype, shape and
 * bounds: 1, or 0 with e set. */
static int locate(bs_qc_file *f, const char *name, const char *dtype, int64_t n, int64_t k, uint64_t *at, bs_err *e) {
    const json_t *t = json_object_get(f->hdr, name);
    const json_t *sh = json_object_get(t, "shape"), *off = json_object_get(t, "data_offsets");
    const char *dt = json_string_value(json_object_get(t, "dtype"));
    size_t nd = k ? 2 : 1;
    if (!t || !dt || strcmp(dt, dtype) || json_array_size(sh) != nd || json_integer_value(json_array_get(sh, 0)) != n ||
        (k && json_integer_value(json_array_get(sh, 1)) != k) || json_array_size(off) != 2)
        return bs_fail(e, BS_EFORMAT, "%s: tensor %s missing or not %s [%lld%s]", f->path, name, dtype, (long long)n,
                       k ? ", k" : ""), 0;
    json_int_t b = json_integer_value(json_array_get(off, 0)), en = json_integer_value(json_array_get(off, 1));
    uint64_t want = (uint64_t)n * (uint64_t)(k ? k : 1) * dtype_bytes(dtype);
    if (b < 0 || en < b || (uint64_t)en > f->data_len || (uint64_t)(en - b) != want)
        return bs_fail(e, BS_EFORMAT, "%s: tensor %s: data [%lld, %lld) outside the %llu data bytes (truncated?)",
                       f->path, name, (long long)b, (long long)en, (unsigned long long)f->data_len), 0;
    *at = f->data_at + (uint64_t)b;
    return 1;
}

int bs_qc_read(bs_qc_file *f, const char *name, const char *dtype, int64_t n, int64_t k, void *dst, bs_err *e) {
    return bs_qc_read_rows(f, name, dtype, n, k, 0, n, dst, e);
}

int bs_qc_read_rows(bs_qc_file *f, const char *name, const char *dtype, int64_t n, int64_t k, int64_t row0,
                    int64_t rows, void *dst, bs_err *e) {
    uint64_t at;
    if (!locate(f, name, dtype, n, k, &at, e)) return 0;
    size_t row_bytes = (size_t)(k ? k : 1) * dtype_bytes(dtype);
    if (row0 < 0 || rows < 0 || row0 + rows > n) return bs_fail(e, BS_EINTERNAL, "%s: rows out of range", name), 0;
    if (pread_all(f->fd, dst, (size_t)rows * row_bytes, at + (uint64_t)row0 * row_bytes) < 0)
        return bs_fail(e, BS_EIO, "%s: cannot read tensor %s", f->path, name), 0;
    return 1;
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

static size_t tensor_bytes(const bs_qc_tensor *t) {
    return (size_t)t->n * (size_t)(t->k ? t->k : 1) * dtype_bytes(t->dtype);
}

/* The header JSON: the tensors in order, back to back. */
static char *header_text(const char *format, const char *key, const char *rule, const bs_qc_tensor *t, int count) {
    json_t *h = json_object(), *md = json_pack("{s:s,s:s,s:s}", "format", format, "source", key, "rule", rule);
    if (!h || !md || json_object_set_new(h, "__metadata__", md)) {
        json_decref(h);
        return NULL;
    }
    uint64_t at = 0;
    for (int i = 0; i < count; i++) {
        uint64_t nb = tensor_bytes(&t[i]);
        json_t *shape = t[i].k ? json_pack("[I,I]", (json_int_t)t[i].n, (json_int_t)t[i].k) : json_pack("[I]", (json_int_t)t[i].n);
        if (json_object_set_new(h, t[i].name, json_pack("{s:s,s:o,s:[I,I]}", "dtype", t[i].dtype, "shape", shape,
                                                        "data_offsets", (json_int_t)at, (json_int_t)(at + nb)))) {
            json_decref(h);
            return NULL;
        }
        at += nb;
    }
    char *text = json_dumps(h, JSON_COMPACT);
    json_decref(h);
    return text;
}

static int write_tensor(int fd, const bs_qc_tensor *t) {
    if (!t->q8) return write_all(fd, t->src, tensor_bytes(t));
    int8_t *q = malloc(tensor_bytes(t));
    if (!q) return -1;
    bs_gemm_w8a8_rows(t->q8, q);
    int rc = write_all(fd, q, tensor_bytes(t));
    free(q);
    return rc;
}

int bs_qc_write(const char *path, const char *format, const char *key, const char *rule, const bs_qc_tensor *t,
                int count, bs_err *e) {
    char *text = header_text(format, key, rule, t, count);
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
    for (int i = 0; !bad && i < count; i++) bad = write_tensor(fd, &t[i]);
    int err = errno;
    if (close(fd) != 0 && !bad) bad = 1, err = errno;
    if (bad) {
        rc = bs_fail(e, BS_EIO, "%s: %s", tmp, strerror(err ? err : EIO));
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

/* ---- dtype int8w --------------------------------------------------------------- */

/* One matrix's q and scale into a fresh I8 block (cpu/quant.c's layout),
 * checking what no quantization gives. */
static int read_i8_block(bs_qc_file *f, const char *base, const bs_wmat *w, void **block, bs_err *e) {
    size_t qn = (size_t)w->n * (size_t)w->k, qbytes = (qn + 63) & ~(size_t)63;
    void *p = NULL;
    if (posix_memalign(&p, 64, qbytes + (size_t)w->n * sizeof(float))) return BS_ENOMEM;
    float *scale = (float *)(void *)((char *)p + qbytes);
    char name[192];
    snprintf(name, sizeof name, "%s.q", base);
    int rc = bs_qc_read(f, name, "I8", w->n, w->k, p, e);
    snprintf(name, sizeof name, "%s.scale", base);
    if (rc == 1) rc = bs_qc_read(f, name, "F32", w->n, 0, scale, e);
    if (rc == 1 && memchr(p, 0x80, qn)) rc = (bs_fail(e, BS_EFORMAT, "%s: %s.q holds -128", f->path, base), 0);
    for (int r = 0; rc == 1 && r < w->n; r++)
        if (!isfinite(scale[r]) || scale[r] < 0.0f)
            rc = (bs_fail(e, BS_EFORMAT, "%s: %s.scale[%d] is %g", f->path, base, r, scale[r]), 0);
    if (rc == 1) *block = p;
    else free(p);
    return rc;
}

int bs_quant_cache_read(bs_model *m, const char *path, const char *key, bs_err *e) {
    bs_qc_file *f = NULL;
    int n_mats = m->cfg.n_layers * BS_LAYER_MATS, done = 0, rc = bs_qc_open(&f, path, BS_QUANT_CACHE_FORMAT, key, e);
    void **blocks = rc == 1 ? calloc((size_t)n_mats, sizeof *blocks) : NULL;
    if (rc == 1 && !blocks) rc = BS_ENOMEM;
    for (; rc == 1 && done < n_mats; done++) {
        char base[160];
        int l = done / BS_LAYER_MATS, i = done % BS_LAYER_MATS;
        snprintf(base, sizeof base, "model.layers.%d.%s.weight", l, bs_layer_mat_name(i));
        rc = read_i8_block(f, base, bs_layer_mat(&m->layers[l], i), &blocks[done], e);
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
    bs_qc_close(f);
    return rc;
}

int bs_quant_cache_write(const bs_model *m, const char *path, const char *key, bs_err *e) {
    int n_mats = m->cfg.n_layers * BS_LAYER_MATS;
    bs_qc_tensor *t = calloc((size_t)n_mats * 2, sizeof *t);
    if (!t) return bs_fail(e, BS_ENOMEM, "out of memory");
    int rc = BS_OK;
    for (int j = 0; j < n_mats; j++) {
        const bs_wmat *w = bs_layer_mat(&m->layers[j / BS_LAYER_MATS], j % BS_LAYER_MATS);
        if (w->packed_kind != BS_WPACK_I8) {
            rc = bs_fail(e, BS_EINTERNAL, "the weights of %s are not quantized", m->dir);
            goto done;
        }
        const char *name = bs_layer_mat_name(j % BS_LAYER_MATS);
        t[2 * j] = (bs_qc_tensor){.dtype = "I8", .n = w->n, .k = w->k, .src = w->packed};
        snprintf(t[2 * j].name, sizeof t[2 * j].name, "model.layers.%d.%s.weight.q", j / BS_LAYER_MATS, name);
        t[2 * j + 1] = (bs_qc_tensor){.dtype = "F32", .n = w->n, .src = w->scale};
        snprintf(t[2 * j + 1].name, sizeof t[2 * j + 1].name, "model.layers.%d.%s.weight.scale", j / BS_LAYER_MATS, name);
    }
    rc = bs_qc_write(path, BS_QUANT_CACHE_FORMAT, key, bs_quant_rule_int8w, t, n_mats * 2, e);
done:
    free(t);
    return rc;
}

void bs_quant_cache_log_write(const bs_model *m, const char *path, int rc, const bs_err *we) {
    if (rc < 0)
        bs_log(BS_LOG_WARN, "model", "cannot keep the int8 weights in the cache (%s); the next start quantizes again",
               we->msg);
    else
        bs_log(BS_LOG_INFO, "model", "%s: int8 weights kept in %s", m->dir, path);
}
