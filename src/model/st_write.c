#include "st_write.h"

#include <errno.h>
#include <fcntl.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/util.h"

typedef struct st_entry {
    char *name;
    bs_dtype dtype;
    int ndim;
    int64_t shape[BS_MAX_DIMS];
    int64_t numel;
    uint64_t nbytes;
    uint64_t offset; /* within its shard's data buffer */
    int shard;
    /* bytes written so far; only a sum, so overlapping writes would go
     * unnoticed, but a short or missing tensor is caught at finish */
    _Atomic uint64_t written;
} st_entry;

typedef struct st_shard {
    char *path;
    char *fname; /* plain file name, for the index */
    int fd;
    uint64_t data_start; /* 8 + header length */
    uint64_t data_len;
} st_shard;

struct bs_st_writer {
    st_entry *ents;
    int n, cap;
    st_shard *shards;
    int n_shards;
    int begun, finished;
    char *index_path; /* sharded only */
};

/* Local copies so the writer does not depend on the reader's object file. */
static size_t elem_size(bs_dtype d) { return d == BS_F32 ? 4 : 2; }
static const char *dtype_str(bs_dtype d) {
    return d == BS_F32 ? "F32" : d == BS_F16 ? "F16" : "BF16";
}

int bs_st_new(bs_st_writer **out, bs_err *e) {
    *out = calloc(1, sizeof **out);
    if (!*out) return bs_fail(e, BS_ENOMEM, "safetensors writer: out of memory");
    return BS_OK;
}

void bs_st_free(bs_st_writer *w) {
    if (!w) return;
    for (int s = 0; s < w->n_shards; s++) {
        if (w->shards[s].fd >= 0) close(w->shards[s].fd);
        if (!w->finished && w->shards[s].path) unlink(w->shards[s].path);
        free(w->shards[s].path);
        free(w->shards[s].fname);
    }
    if (!w->finished && w->index_path) unlink(w->index_path);
    free(w->index_path);
    free(w->shards);
    for (int i = 0; i < w->n; i++) free(w->ents[i].name);
    free(w->ents);
    free(w);
}

int bs_st_add(bs_st_writer *w, const char *name, bs_dtype dtype, int ndim,
              const int64_t *shape, bs_err *e) {
    if (w->begun) return bs_fail(e, BS_EINTERNAL, "safetensors writer: %s added after begin", name);
    if (ndim < 0 || ndim > BS_MAX_DIMS)
        return bs_fail(e, BS_EINVAL, "safetensors writer: %s: %d dimensions", name, ndim);
    if (dtype != BS_F32 && dtype != BS_F16 && dtype != BS_BF16)
        return bs_fail(e, BS_EINVAL, "safetensors writer: %s: unknown dtype", name);
    int64_t numel = 1;
    for (int d = 0; d < ndim; d++) {
        if (shape[d] < 0 || (shape[d] > 0 && numel > INT64_MAX / 4 / shape[d]))
            return bs_fail(e, BS_EINVAL, "safetensors writer: %s: bad shape", name);
        numel *= shape[d];
    }
    if (w->n == w->cap) {
        int ncap = w->cap ? w->cap * 2 : 64;
        st_entry *ne = realloc(w->ents, (size_t)ncap * sizeof *ne);
        if (!ne) return bs_fail(e, BS_ENOMEM, "safetensors writer: out of memory");
        w->ents = ne;
        w->cap = ncap;
    }
    st_entry *t = &w->ents[w->n];
    memset(t, 0, sizeof *t);
    t->name = strdup(name);
    if (!t->name) return bs_fail(e, BS_ENOMEM, "safetensors writer: out of memory");
    t->dtype = dtype;
    t->ndim = ndim;
    for (int d = 0; d < ndim; d++) t->shape[d] = shape[d];
    t->numel = numel;
    t->nbytes = (uint64_t)numel * elem_size(dtype);
    atomic_init(&t->written, 0);
    w->n++;
    return BS_OK;
}

static int cmp_ent(const void *a, const void *b) {
    return strcmp(((const st_entry *)a)->name, ((const st_entry *)b)->name);
}

/* JSON string with the escapes RFC 8259 requires; names are normally ASCII. */
static void put_json_str(bs_buf *b, const char *s) {
    bs_buf_putc(b, '"');
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        if (*p == '"' || *p == '\\') {
            bs_buf_putc(b, '\\');
            bs_buf_putc(b, (char)*p);
        } else if (*p < 0x20) {
            bs_buf_printf(b, "\\u%04x", *p);
        } else {
            bs_buf_putc(b, (char)*p);
        }
    }
    bs_buf_putc(b, '"');
}

static int write_all_at(int fd, const void *data, size_t n, uint64_t off) {
    const char *p = data;
    while (n) {
        ssize_t r = pwrite(fd, p, n, (off_t)off);
        if (r < 0) {
            if (errno == EINTR) continue;
            return -1;
        }
        p += r;
        n -= (size_t)r;
        off += (uint64_t)r;
    }
    return 0;
}

/* Cuts the name-ordered list into n groups of about total/n bytes each; a
 * group must not be empty (the reader refuses a shard without tensors only
 * indirectly, but an empty shard is pointless), so when sizes are too uneven
 * the cut falls back to equal tensor counts. */
static void assign_shards(bs_st_writer *w, int n) {
    uint64_t total = 0;
    for (int i = 0; i < w->n; i++) total += w->ents[i].nbytes;
    uint64_t cum = 0;
    int ok = 1, prev = -1;
    for (int i = 0; i < w->n; i++) {
        /* the shard holding the tensor's midpoint */
        uint64_t mid = cum + w->ents[i].nbytes / 2;
        int s = total ? (int)(mid * (uint64_t)n / total) : 0; /* sizes < 2^46 B, n < 2^17: no overflow */
        if (s >= n) s = n - 1;
        if (s < prev) s = prev;
        if (s > prev + 1) ok = 0;
        w->ents[i].shard = s;
        prev = s;
        cum += w->ents[i].nbytes;
    }
    if (!ok || prev != n - 1)
        for (int i = 0; i < w->n; i++) w->ents[i].shard = (int)((int64_t)i * n / w->n);
}

static int write_header(bs_st_writer *w, int s, bs_err *e) {
    st_shard *sh = &w->shards[s];
    bs_buf b;
    bs_buf_init(&b);
    bs_buf_puts(&b, "{\"__metadata__\":{\"format\":\"pt\"}");
    uint64_t off = 0;
    for (int i = 0; i < w->n; i++) {
        st_entry *t = &w->ents[i];
        if (t->shard != s) continue;
        t->offset = off;
        bs_buf_putc(&b, ',');
        put_json_str(&b, t->name);
        bs_buf_printf(&b, ":{\"dtype\":\"%s\",\"shape\":[", dtype_str(t->dtype));
        for (int d = 0; d < t->ndim; d++) bs_buf_printf(&b, "%s%lld", d ? "," : "", (long long)t->shape[d]);
        bs_buf_printf(&b, "],\"data_offsets\":[%llu,%llu]}", (unsigned long long)off,
                      (unsigned long long)(off + t->nbytes));
        off += t->nbytes;
    }
    bs_buf_putc(&b, '}');
    /* pad so that the data buffer (at 8 + N) is 8-byte aligned */
    while (b.len % 8) bs_buf_putc(&b, ' ');
    int rc = BS_OK;
    if (b.oom) {
        rc = bs_fail(e, BS_ENOMEM, "%s: out of memory building the header", sh->path);
        goto done;
    }
    unsigned char len8[8];
    for (int k = 0; k < 8; k++) len8[k] = (unsigned char)((uint64_t)b.len >> (8 * k));
    if (write_all_at(sh->fd, len8, 8, 0) || write_all_at(sh->fd, b.data, b.len, 8)) {
        rc = bs_fail(e, BS_EIO, "%s: write error: %s", sh->path, strerror(errno));
        goto done;
    }
    sh->data_start = 8 + (uint64_t)b.len;
    sh->data_len = off;
    /* size the file now so a tensor written last still leaves no gap to
     * fill, and a full disk shows up early */
    if (ftruncate(sh->fd, (off_t)(sh->data_start + off)) != 0) {
        rc = bs_fail(e, BS_EIO, "%s: cannot size file: %s", sh->path, strerror(errno));
        goto done;
    }
done:
    bs_buf_free(&b);
    return rc;
}

int bs_st_begin(bs_st_writer *w, const char *dir, int n_shards, bs_err *e) {
    if (w->begun) return bs_fail(e, BS_EINTERNAL, "safetensors writer: begun twice");
    if (n_shards < 1) n_shards = 1;
    if (n_shards > 99999) return bs_fail(e, BS_EINVAL, "safetensors writer: %d shards", n_shards);
    if (w->n == 0) return bs_fail(e, BS_EINVAL, "safetensors writer: no tensors");
    if (n_shards > w->n)
        return bs_fail(e, BS_EINVAL, "safetensors writer: %d shards for %d tensors", n_shards, w->n);
    w->begun = 1;
    qsort(w->ents, (size_t)w->n, sizeof *w->ents, cmp_ent);
    for (int i = 1; i < w->n; i++)
        if (!strcmp(w->ents[i - 1].name, w->ents[i].name))
            return bs_fail(e, BS_EINVAL, "safetensors writer: duplicate tensor %s", w->ents[i].name);
    w->shards = calloc((size_t)n_shards, sizeof *w->shards);
    if (!w->shards) return bs_fail(e, BS_ENOMEM, "safetensors writer: out of memory");
    w->n_shards = n_shards;
    for (int s = 0; s < n_shards; s++) w->shards[s].fd = -1;
    if (n_shards == 1) {
        for (int i = 0; i < w->n; i++) w->ents[i].shard = 0;
        w->shards[0].fname = strdup("model.safetensors");
    } else {
        assign_shards(w, n_shards);
        for (int s = 0; s < n_shards; s++)
            w->shards[s].fname = bs_strfmt("model-%05d-of-%05d.safetensors", s + 1, n_shards);
        w->index_path = bs_path_join(dir, "model.safetensors.index.json");
        if (!w->index_path) return bs_fail(e, BS_ENOMEM, "safetensors writer: out of memory");
        if (bs_file_exists(w->index_path)) {
            char *p = w->index_path;
            w->index_path = NULL; /* not ours: never unlink it */
            int rc = bs_fail(e, BS_EIO, "%s exists", p);
            free(p);
            return rc;
        }
    }
    for (int s = 0; s < n_shards; s++) {
        st_shard *sh = &w->shards[s];
        if (!sh->fname) return bs_fail(e, BS_ENOMEM, "safetensors writer: out of memory");
        char *path = bs_path_join(dir, sh->fname);
        if (!path) return bs_fail(e, BS_ENOMEM, "safetensors writer: out of memory");
        /* O_EXCL: the file is ours, so removing it on failure is safe */
        sh->fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
        if (sh->fd < 0) {
            int rc = bs_fail(e, BS_EIO, "%s: %s", path, strerror(errno));
            free(path);
            return rc;
        }
        sh->path = path;
        int rc = write_header(w, s, e);
        if (rc) return rc;
    }
    return BS_OK;
}

int bs_st_count(const bs_st_writer *w) { return w->n; }

int bs_st_find(const bs_st_writer *w, const char *name) {
    int lo = 0, hi = w->n - 1;
    if (!w->begun) {
        for (int i = 0; i < w->n; i++)
            if (!strcmp(w->ents[i].name, name)) return i;
        return -1;
    }
    while (lo <= hi) {
        int mid = lo + (hi - lo) / 2;
        int c = strcmp(w->ents[mid].name, name);
        if (!c) return mid;
        if (c < 0) lo = mid + 1;
        else hi = mid - 1;
    }
    return -1;
}

const char *bs_st_name(const bs_st_writer *w, int idx) { return w->ents[idx].name; }
int64_t bs_st_numel(const bs_st_writer *w, int idx) { return w->ents[idx].numel; }
bs_dtype bs_st_dtype(const bs_st_writer *w, int idx) { return w->ents[idx].dtype; }

int bs_st_write(bs_st_writer *w, int idx, uint64_t off, const void *data, size_t n, bs_err *e) {
    if (!w->begun || w->finished || idx < 0 || idx >= w->n)
        return bs_fail(e, BS_EINTERNAL, "safetensors writer: bad write (tensor %d)", idx);
    st_entry *t = &w->ents[idx];
    if (off > t->nbytes || n > t->nbytes - off)
        return bs_fail(e, BS_EINTERNAL, "safetensors writer: %s: write past its %llu bytes", t->name,
                       (unsigned long long)t->nbytes);
    st_shard *sh = &w->shards[t->shard];
    if (write_all_at(sh->fd, data, n, sh->data_start + t->offset + off))
        return bs_fail(e, BS_EIO, "%s: write error: %s", sh->path, strerror(errno));
    atomic_fetch_add(&t->written, (uint64_t)n);
    return BS_OK;
}

int bs_st_write_f32(bs_st_writer *w, int idx, int64_t elem_off, const float *v, size_t n, bs_err *e) {
    if (!w->begun || idx < 0 || idx >= w->n)
        return bs_fail(e, BS_EINTERNAL, "safetensors writer: bad write (tensor %d)", idx);
    bs_dtype dt = w->ents[idx].dtype;
    size_t es = elem_size(dt);
    if (dt == BS_F32) return bs_st_write(w, idx, (uint64_t)elem_off * 4, v, n * 4, e);
    /* convert through a stack buffer: no allocation per call, any thread */
    uint16_t tmp[4096];
    size_t done = 0;
    while (done < n) {
        size_t k = n - done < 4096 ? n - done : 4096;
        for (size_t i = 0; i < k; i++) {
            uint16_t h = dt == BS_BF16 ? bs_f32_to_bf16(v[done + i]) : bs_f32_to_f16(v[done + i]);
            /* little-endian on disk whatever the host order */
            unsigned char *p = (unsigned char *)&tmp[i];
            p[0] = (unsigned char)(h & 0xff);
            p[1] = (unsigned char)(h >> 8);
        }
        int rc = bs_st_write(w, idx, (uint64_t)(elem_off + (int64_t)done) * es, tmp, k * es, e);
        if (rc) return rc;
        done += k;
    }
    return BS_OK;
}

static int write_index(bs_st_writer *w, bs_err *e) {
    uint64_t total = 0;
    for (int i = 0; i < w->n; i++) total += w->ents[i].nbytes;
    bs_buf b;
    bs_buf_init(&b);
    bs_buf_printf(&b, "{\n  \"metadata\": {\n    \"total_size\": %llu\n  },\n  \"weight_map\": {",
                  (unsigned long long)total);
    for (int i = 0; i < w->n; i++) {
        bs_buf_puts(&b, i ? ",\n    " : "\n    ");
        put_json_str(&b, w->ents[i].name);
        bs_buf_puts(&b, ": ");
        put_json_str(&b, w->shards[w->ents[i].shard].fname);
    }
    bs_buf_puts(&b, "\n  }\n}\n");
    int rc;
    if (b.oom) {
        rc = bs_fail(e, BS_ENOMEM, "%s: out of memory", w->index_path);
    } else {
        /* O_EXCL as for the shards: an existing index is not ours to replace */
        int fd = open(w->index_path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
        if (fd < 0) {
            rc = bs_fail(e, BS_EIO, "%s: %s", w->index_path, strerror(errno));
            if (errno == EEXIST) {
                free(w->index_path);
                w->index_path = NULL;
            }
        } else {
            rc = BS_OK;
            if (write_all_at(fd, b.data, b.len, 0))
                rc = bs_fail(e, BS_EIO, "%s: write error: %s", w->index_path, strerror(errno));
            if (close(fd) != 0 && !rc)
                rc = bs_fail(e, BS_EIO, "%s: write error: %s", w->index_path, strerror(errno));
        }
    }
    bs_buf_free(&b);
    return rc;
}

int bs_st_finish(bs_st_writer *w, bs_err *e) {
    if (!w->begun || w->finished) return bs_fail(e, BS_EINTERNAL, "safetensors writer: bad finish");
    for (int i = 0; i < w->n; i++) {
        uint64_t got = atomic_load(&w->ents[i].written);
        if (got != w->ents[i].nbytes)
            return bs_fail(e, BS_EINTERNAL, "safetensors writer: %s: %llu of %llu bytes written",
                           w->ents[i].name, (unsigned long long)got,
                           (unsigned long long)w->ents[i].nbytes);
    }
    for (int s = 0; s < w->n_shards; s++) {
        st_shard *sh = &w->shards[s];
        int bad = close(sh->fd) != 0;
        sh->fd = -1;
        if (bad) return bs_fail(e, BS_EIO, "%s: write error: %s", sh->path, strerror(errno));
    }
    if (w->n_shards > 1) {
        int rc = write_index(w, e);
        if (rc) return rc;
    }
    w->finished = 1;
    return BS_OK;
}
