#include "model/safetensors.h"

#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/progress.h"
#include "base/util.h"

/* The reference library's limit; a larger header is either hostile or corrupt. */
#define ST_MAX_HEADER 100000000ull

static void fmt_shape(const int64_t *shape, int ndim, char *buf, size_t size) {
    size_t n = 0;
    n += (size_t)snprintf(buf, size, "[");
    for (int i = 0; i < ndim && n < size; i++)
        n += (size_t)snprintf(buf + n, size - n, "%s%lld", i ? ", " : "", (long long)shape[i]);
    if (n < size) snprintf(buf + n, size - n, "]");
}

static uint64_t le64(const unsigned char *p) {
    uint64_t v = 0;
    for (int i = 7; i >= 0; i--) v = (v << 8) | p[i];
    return v;
}

/* ---- one file --------------------------------------------------------- */

static int map_file(bs_weights *w, const char *path, bs_err *e) {
    int rc = BS_OK;
    void *base = MAP_FAILED;
    uint64_t size = 0;
    char *pcopy = NULL;
    int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC); /* a FIFO: no wait for a writer */
    if (fd < 0) return bs_fail(e, BS_EIO, "%s: %s", path, strerror(errno));
    struct stat st;
    if (fstat(fd, &st) != 0) {
        rc = bs_fail(e, BS_EIO, "%s: %s", path, strerror(errno));
        goto done;
    }
    if (!S_ISREG(st.st_mode)) {
        rc = bs_fail(e, BS_EIO, "%s: not a regular file", path);
        goto done;
    }
    size = (uint64_t)st.st_size;
    /* Checked before mapping: a zero-length mapping is invalid, and this is
     * the first safetensors rule anyway. */
    if (size < 8) {
        rc = bs_fail(e, BS_EFORMAT, "%s: file has %llu bytes, fewer than the 8-byte header length: truncated header",
                     path, (unsigned long long)size);
        goto done;
    }
    if (size > SIZE_MAX) {
        rc = bs_fail(e, BS_ERANGE, "%s: file too large to map (%llu bytes)", path, (unsigned long long)size);
        goto done;
    }
    base = mmap(NULL, (size_t)size, PROT_READ, MAP_PRIVATE, fd, 0);
    if (base == MAP_FAILED) {
        rc = bs_fail(e, BS_EIO, "%s: mmap: %s", path, strerror(errno));
        goto done;
    }
    pcopy = strdup(path);
    bs_mapped_file *nf = realloc(w->files, (size_t)(w->n_files + 1) * sizeof *nf);
    if (!pcopy || !nf) {
        if (nf) w->files = nf;
        rc = bs_fail(e, BS_ENOMEM, "%s: out of memory", path);
        goto done;
    }
    w->files = nf;
    nf[w->n_files].path = pcopy;
    nf[w->n_files].base = base;
    nf[w->n_files].size = size;
    w->n_files++;
    pcopy = NULL;
    base = MAP_FAILED;
done:
    free(pcopy);
    if (base != MAP_FAILED) munmap(base, (size_t)size);
    close(fd);
    return rc;
}

typedef struct {
    uint64_t b, end;
    int idx; /* into the file's local tensor array */
} st_range;

static int cmp_range(const void *a, const void *b) {
    const st_range *x = a, *y = b;
    if (x->b != y->b) return x->b < y->b ? -1 : 1;
    if (x->end != y->end) return x->end < y->end ? -1 : 1;
    return 0;
}

/* A non-negative JSON integer; jansson has already refused integers that do
 * not fit in 64 bits. */
static int json_u64(const json_t *v, uint64_t *out) {
    if (!json_is_integer(v) || json_integer_value(v) < 0) return 0;
    *out = (uint64_t)json_integer_value(v);
    return 1;
}

static int parse_entry(const char *path, const char *name, const json_t *ent, uint64_t data_len, bs_tensor *t,
                       st_range *r, bs_err *e) {
    char got[160], shp[200];
    if (!json_is_object(ent)) {
        bs_json_show(ent, got, sizeof got);
        return bs_fail(e, BS_EFORMAT, "%s: tensor \"%s\": entry must be an object, got %s", path, name, got);
    }
    const json_t *jd = json_object_get(ent, "dtype"), *js = json_object_get(ent, "shape"),
                 *jo = json_object_get(ent, "data_offsets");
    if (!jd || !js || !jo || json_object_size(ent) != 3) {
        bs_json_show(ent, got, sizeof got);
        return bs_fail(e, BS_EFORMAT,
                       "%s: tensor \"%s\": entry must have exactly the keys dtype, shape, data_offsets, got %s", path,
                       name, got);
    }
    if (!json_is_string(jd)) {
        bs_json_show(jd, got, sizeof got);
        return bs_fail(e, BS_EFORMAT, "%s: tensor \"%s\": dtype must be a string, got %s", path, name, got);
    }
    const char *ds = json_string_value(jd);
    if (strcmp(ds, "BF16") == 0) t->dtype = BS_BF16;
    else if (strcmp(ds, "F16") == 0) t->dtype = BS_F16;
    else if (strcmp(ds, "F32") == 0) t->dtype = BS_F32;
    else
        return bs_fail(e, BS_EUNSUP, "%s: tensor \"%s\": dtype %.40s not supported (only BF16, F16, F32)", path, name,
                       ds);

    if (!json_is_array(js)) {
        bs_json_show(js, got, sizeof got);
        return bs_fail(e, BS_EFORMAT, "%s: tensor \"%s\": shape must be an array, got %s", path, name, got);
    }
    size_t nd = json_array_size(js);
    if (nd > BS_MAX_DIMS)
        return bs_fail(e, BS_EUNSUP, "%s: tensor \"%s\": shape has %zu dimensions, at most %d supported", path, name, nd,
                       BS_MAX_DIMS);
    t->ndim = (int)nd;
    int64_t numel = 1;
    for (size_t i = 0; i < nd; i++) {
        uint64_t d;
        if (!json_u64(json_array_get(js, i), &d)) {
            bs_json_show(js, got, sizeof got);
            return bs_fail(e, BS_EFORMAT, "%s: tensor \"%s\": shape must hold non-negative integers, got %s", path,
                           name, got);
        }
        t->shape[i] = (int64_t)d;
        if (d != 0 && (uint64_t)numel > (uint64_t)INT64_MAX / d) {
            bs_json_show(js, got, sizeof got);
            return bs_fail(e, BS_EFORMAT, "%s: tensor \"%s\": shape %s has too many elements", path, name, got);
        }
        numel *= (int64_t)d;
    }
    t->numel = numel;
    uint64_t es = bs_dtype_size(t->dtype);
    if ((uint64_t)numel > UINT64_MAX / es) {
        bs_json_show(js, got, sizeof got);
        return bs_fail(e, BS_EFORMAT, "%s: tensor \"%s\": shape %s has too many elements", path, name, got);
    }
    t->nbytes = (uint64_t)numel * es;

    uint64_t b, en;
    if (!json_is_array(jo) || json_array_size(jo) != 2 || !json_u64(json_array_get(jo, 0), &b) ||
        !json_u64(json_array_get(jo, 1), &en)) {
        bs_json_show(jo, got, sizeof got);
        return bs_fail(e, BS_EFORMAT,
                       "%s: tensor \"%s\": data_offsets must be two non-negative integers [begin, end], got %s", path,
                       name, got);
    }
    if (en < b)
        return bs_fail(e, BS_EFORMAT, "%s: tensor \"%s\": data_offsets [%llu, %llu] reversed (end before begin)",
                       path, name, (unsigned long long)b, (unsigned long long)en);
    if (en > data_len)
        return bs_fail(e, BS_EFORMAT,
                       "%s: tensor \"%s\": data_offsets [%llu, %llu] run past the end of the data buffer (%llu bytes)",
                       path, name, (unsigned long long)b, (unsigned long long)en, (unsigned long long)data_len);
    if (en - b != t->nbytes) {
        fmt_shape(t->shape, t->ndim, shp, sizeof shp);
        return bs_fail(e, BS_EFORMAT,
                       "%s: tensor \"%s\": wrong byte length: data_offsets [%llu, %llu] hold %llu bytes but %s %s "
                       "needs %llu",
                       path, name, (unsigned long long)b, (unsigned long long)en, (unsigned long long)(en - b), ds,
                       shp, (unsigned long long)t->nbytes);
    }
    r->b = b;
    r->end = en;
    return BS_OK;
}

/* One file's header while it is parsed: its tensors, not yet in w */
typedef struct {
    const char *path;
    int fi;
    const unsigned char *data; /* the data buffer, after the header */
    uint64_t data_len;
    bs_tensor *loc;
    st_range *rg;
    size_t nt; /* entries of loc with a name (the caller frees them) */
} st_header;

/* __metadata__: an object mapping strings to strings */
static int check_metadata(const char *path, json_t *val, bs_err *e) {
    int ok = json_is_object(val);
    const char *mk;
    json_t *mv;
    if (ok) json_object_foreach(val, mk, mv) if (!json_is_string(mv)) ok = 0;
    if (!ok) return bs_fail(e, BS_EFORMAT, "%s: __metadata__ must be an object mapping strings to strings", path);
    return BS_OK;
}

/* Every entry of the header object root: a tensor into h->loc and h->rg. */
static int parse_entries(st_header *h, json_t *root, bs_err *e) {
    int rc;
    const char *key;
    json_t *val;
    json_object_foreach(root, key, val) {
        if (strcmp(key, "__metadata__") == 0) {
            if ((rc = check_metadata(h->path, val, e))) return rc;
            continue;
        }
        bs_tensor *t = &h->loc[h->nt];
        if ((rc = parse_entry(h->path, key, val, h->data_len, t, &h->rg[h->nt], e))) return rc;
        t->name = strdup(key);
        if (!t->name) return bs_fail(e, BS_ENOMEM, "%s: out of memory", h->path);
        t->file = h->fi;
        t->data = h->data + h->rg[h->nt].b;
        h->rg[h->nt].idx = (int)h->nt;
        h->nt++;
    }
    return BS_OK;
}

/* Same rule as the reference library: sorted by offsets, every range starts
 * where the previous ended, from 0 to the end of the buffer. This refuses
 * gaps, overlaps and trailing bytes alike. */
static int check_contiguous(st_header *h, bs_err *e) {
    const char *path = h->path;
    qsort(h->rg, h->nt, sizeof *h->rg, cmp_range);
    uint64_t pos = 0;
    const char *prev = NULL;
    for (size_t i = 0; i < h->nt; i++) {
        const st_range *r = &h->rg[i];
        const char *nm = h->loc[r->idx].name;
        if (r->b < pos)
            return bs_fail(e, BS_EFORMAT,
                           "%s: tensor \"%s\" data_offsets [%llu, %llu] overlap tensor \"%s\" which ends at byte %llu",
                           path, nm, (unsigned long long)r->b, (unsigned long long)r->end, prev,
                           (unsigned long long)pos);
        if (r->b > pos) {
            if (prev)
                return bs_fail(e, BS_EFORMAT,
                               "%s: tensor data not contiguous: gap between tensor \"%s\" (ends at byte %llu) and "
                               "tensor \"%s\" (begins at byte %llu)",
                               path, prev, (unsigned long long)pos, nm, (unsigned long long)r->b);
            return bs_fail(e, BS_EFORMAT,
                           "%s: tensor data not contiguous: first tensor \"%s\" begins at byte %llu, not 0", path,
                           nm, (unsigned long long)r->b);
        }
        pos = r->end;
        prev = nm;
    }
    if (pos != h->data_len)
        return bs_fail(e, BS_EFORMAT,
                       "%s: tensor data not contiguous: tensors end at byte %llu but the data buffer has %llu bytes",
                       path, (unsigned long long)pos, (unsigned long long)h->data_len);
    return BS_OK;
}

/* The header's tensors appended to w->tensors (which then owns the names). */
static int add_tensors(bs_weights *w, st_header *h, bs_err *e) {
    if (h->nt > (size_t)(INT_MAX - w->n_tensors)) return bs_fail(e, BS_ERANGE, "%s: too many tensors", h->path);
    bs_tensor *all = realloc(w->tensors, ((size_t)w->n_tensors + h->nt + 1) * sizeof *all);
    if (!all) return bs_fail(e, BS_ENOMEM, "%s: out of memory", h->path);
    w->tensors = all;
    memcpy(all + w->n_tensors, h->loc, h->nt * sizeof *h->loc);
    w->n_tensors += (int)h->nt;
    h->nt = 0;
    return BS_OK;
}

/* Validates the header of the file just mapped (w->files[fi]) and appends its
 * tensors to w->tensors, unsorted. */
static int parse_header(bs_weights *w, int fi, bs_err *e) {
    const bs_mapped_file *f = &w->files[fi];
    const char *path = f->path;
    const unsigned char *base = f->base;
    uint64_t n = le64(base);
    if (n > ST_MAX_HEADER)
        return bs_fail(e, BS_EFORMAT, "%s: header length N = %llu too large (limit %llu bytes)", path,
                       (unsigned long long)n, ST_MAX_HEADER);
    if (n > f->size - 8)
        return bs_fail(e, BS_EFORMAT,
                       "%s: header length N = %llu runs past the end of the file (%llu bytes): truncated header", path,
                       (unsigned long long)n, (unsigned long long)f->size);
    st_header h = {path, fi, base + 8 + n, f->size - 8 - n, NULL, NULL, 0};
    int rc = BS_OK;
    json_error_t je;
    /* Duplicate names would silently shadow a tensor: refused outright. */
    json_t *root = json_loadb((const char *)base + 8, (size_t)n, JSON_REJECT_DUPLICATES | JSON_DECODE_ANY, &je);
    if (!root) {
        if (json_error_code(&je) == json_error_duplicate_key)
            return bs_fail(e, BS_EFORMAT, "%s: duplicate tensor name in header: %s", path, je.text);
        return bs_fail(e, BS_EFORMAT, "%s: header is not valid JSON: %s (byte %d)", path, je.text, je.position);
    }
    if (!json_is_object(root)) {
        rc = bs_fail(e, BS_EFORMAT, "%s: header must be a JSON object", path);
        goto done;
    }
    size_t cap = json_object_size(root);
    h.loc = calloc(cap ? cap : 1, sizeof *h.loc);
    h.rg = calloc(cap ? cap : 1, sizeof *h.rg);
    if (!h.loc || !h.rg) {
        rc = bs_fail(e, BS_ENOMEM, "%s: out of memory", path);
        goto done;
    }
    if ((rc = parse_entries(&h, root, e))) goto done;
    if ((rc = check_contiguous(&h, e))) goto done;
    rc = add_tensors(w, &h, e);
done:
    for (size_t i = 0; i < h.nt; i++) free(h.loc[i].name);
    free(h.loc);
    free(h.rg);
    json_decref(root);
    return rc;
}

static int cmp_tensor(const void *a, const void *b) {
    return strcmp(((const bs_tensor *)a)->name, ((const bs_tensor *)b)->name);
}

int bs_weights_open_file(bs_weights *w, const char *path, bs_err *e) {
    memset(w, 0, sizeof *w);
    int rc = map_file(w, path, e);
    if (rc == BS_OK) rc = parse_header(w, 0, e);
    if (rc) {
        bs_weights_close(w);
        return rc;
    }
    if (w->n_tensors > 1) qsort(w->tensors, (size_t)w->n_tensors, sizeof *w->tensors, cmp_tensor);
    return BS_OK;
}

void bs_weights_close(bs_weights *w) {
    if (!w) return;
    for (int i = 0; i < w->n_tensors; i++) free(w->tensors[i].name);
    free(w->tensors);
    for (int i = 0; i < w->n_files; i++) {
        if (w->files[i].base) munmap(w->files[i].base, (size_t)w->files[i].size);
        free(w->files[i].path);
    }
    free(w->files);
    free(w->index_path);
    memset(w, 0, sizeof *w);
}

const bs_tensor *bs_weights_get(const bs_weights *w, const char *name) {
    int lo = 0, hi = w->n_tensors - 1;
    while (lo <= hi) {
        int mid = lo + (hi - lo) / 2;
        int c = strcmp(w->tensors[mid].name, name);
        if (c == 0) return &w->tensors[mid];
        if (c < 0) lo = mid + 1;
        else hi = mid - 1;
    }
    return NULL;
}

/* ---- sharded ---------------------------------------------------------- */

static int cmp_cstr(const void *a, const void *b) {
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* The index file's JSON: an object with an object weight_map and, if any,
 * an object metadata. */
static int load_index(const char *ipath, const char *text, size_t len, json_t **root, bs_err *e) {
    json_error_t je;
    *root = json_loadb(text, len, JSON_REJECT_DUPLICATES | JSON_DECODE_ANY, &je);
    if (!*root) {
        if (json_error_code(&je) == json_error_duplicate_key)
            return bs_fail(e, BS_EFORMAT, "%s: duplicate key: %s (line %d)", ipath, je.text, je.line);
        return bs_fail(e, BS_EFORMAT, "%s: not valid JSON: %s (line %d, column %d)", ipath, je.text, je.line,
                       je.column);
    }
    const json_t *wm = json_object_get(*root, "weight_map"), *md = json_object_get(*root, "metadata");
    if (!json_is_object(*root) || !json_is_object(wm))
        return bs_fail(e, BS_EFORMAT, "%s: must be a JSON object with an object weight_map", ipath);
    if (md && !json_is_object(md)) return bs_fail(e, BS_EFORMAT, "%s: metadata must be an object", ipath);
    return BS_OK;
}

/* The shard names of weight_map, sorted and unique, into *shards (owned by
 * the caller, strings into wm). */
static int list_shards(const char *ipath, const json_t *wm, const char ***shards, size_t *ns, bs_err *e) {
    size_t nw = json_object_size(wm);
    if (nw == 0) return bs_fail(e, BS_EFORMAT, "%s: weight_map is empty", ipath);
    const char **sh = *shards = calloc(nw, sizeof *sh);
    if (!sh) return bs_fail(e, BS_ENOMEM, "%s: out of memory", ipath);
    const char *key;
    json_t *val;
    json_object_foreach((json_t *)wm, key, val) {
        if (!json_is_string(val)) {
            char got[160];
            bs_json_show(val, got, sizeof got);
            return bs_fail(e, BS_EFORMAT, "%s: weight_map[\"%s\"] must be a shard file name, got %s", ipath, key, got);
        }
        const char *s = json_string_value(val);
        /* Only plain names: the index must not reach outside the model directory. */
        if (!*s || strcmp(s, ".") == 0 || strchr(s, '/') || strstr(s, ".."))
            return bs_fail(e, BS_EFORMAT,
                           "%s: weight_map[\"%s\"]: shard name \"%s\" must be a plain file name in the model "
                           "directory (no '/' or '..')",
                           ipath, key, s);
        sh[(*ns)++] = s;
    }
    qsort(sh, *ns, sizeof *sh, cmp_cstr);
    size_t u = 0;
    for (size_t i = 0; i < *ns; i++)
        if (u == 0 || strcmp(sh[u - 1], sh[i]) != 0) sh[u++] = sh[i];
    *ns = u;
    return BS_OK;
}

/* Maps each shard and reads its header: w->files[i] is shard shards[i], as
 * map_file appends in this order. */
static int open_shards(bs_weights *w, const char *dir, const char *ipath, const char **shards, size_t ns,
                       bs_err *e) {
    int rc = BS_OK;
    char *spath = NULL;
    for (size_t i = 0; i < ns; i++) {
        spath = bs_path_join(dir, shards[i]);
        if (!spath) {
            rc = bs_fail(e, BS_ENOMEM, "%s: out of memory", ipath);
            goto done;
        }
        if (!bs_file_exists(spath)) {
            rc = bs_fail(e, BS_EIO, "%s: missing shard: \"%s\" is listed in weight_map but %s does not exist", ipath,
                         shards[i], spath);
            goto done;
        }
        if ((rc = map_file(w, spath, e))) goto done;
        if ((rc = parse_header(w, w->n_files - 1, e))) goto done;
        free(spath);
        spath = NULL;
    }
done:
    free(spath);
    return rc;
}

/* Sorts w->tensors by name; each must be in one shard only, the one
 * weight_map gives it. */
static int check_tensor_shards(bs_weights *w, const char *ipath, const json_t *wm, const char **shards, bs_err *e) {
    if (w->n_tensors > 1) qsort(w->tensors, (size_t)w->n_tensors, sizeof *w->tensors, cmp_tensor);
    for (int i = 1; i < w->n_tensors; i++)
        if (strcmp(w->tensors[i - 1].name, w->tensors[i].name) == 0)
            return bs_fail(e, BS_EFORMAT, "%s: tensor \"%s\" is in two shards: \"%s\" and \"%s\"", ipath,
                           w->tensors[i].name, shards[w->tensors[i - 1].file], shards[w->tensors[i].file]);
    for (int i = 0; i < w->n_tensors; i++) {
        const bs_tensor *t = &w->tensors[i];
        const json_t *v = json_object_get(wm, t->name);
        if (!v)
            return bs_fail(e, BS_EFORMAT, "%s: tensor \"%s\" of shard \"%s\" is not listed in weight_map", ipath,
                           t->name, shards[t->file]);
        if (strcmp(json_string_value(v), shards[t->file]) != 0)
            return bs_fail(e, BS_EFORMAT,
                           "%s: tensor \"%s\" is in the wrong shard: found in \"%s\", weight_map says \"%s\"", ipath,
                           t->name, shards[t->file], json_string_value(v));
    }
    return BS_OK;
}

static int open_sharded(bs_weights *w, const char *dir, const char *ipath, bs_err *e) {
    int rc = BS_OK;
    char *text = NULL;
    const char **shards = NULL;
    json_t *root = NULL;
    size_t len = 0, ns = 0;

    if ((rc = bs_read_regular_file(ipath, &text, &len, BS_MODEL_FILE_MAX, e))) goto done;
    if ((rc = load_index(ipath, text, len, &root, e))) goto done;
    const json_t *wm = json_object_get(root, "weight_map");
    if ((rc = list_shards(ipath, wm, &shards, &ns, e))) goto done;
    if ((rc = open_shards(w, dir, ipath, shards, ns, e))) goto done;
    if ((rc = check_tensor_shards(w, ipath, wm, shards, e))) goto done;
    if (!(w->index_path = bs_strfmt("%s", ipath))) {
        rc = bs_fail(e, BS_ENOMEM, "%s: out of memory", ipath);
        goto done;
    }
    /* Every tensor found is listed with its own shard and names are unique, so
     * a listed entry that resolves by name is in the right shard. */
    const char *key;
    json_t *val;
    json_object_foreach((json_t *)wm, key, val) {
        if (!bs_weights_get(w, key)) {
            rc = bs_fail(e, BS_EFORMAT, "%s: weight_map lists tensor \"%s\" in shard \"%s\" but that shard does not have it",
                         ipath, key, json_string_value(val));
            goto done;
        }
    }
done:
    free(shards);
    json_decref(root);
    free(text);
    return rc;
}

int bs_weights_open(bs_weights *w, const char *model_dir, bs_err *e) {
    memset(w, 0, sizeof *w);
    int rc;
    char *single = bs_path_join(model_dir, "model.safetensors");
    char *index = bs_path_join(model_dir, "model.safetensors.index.json");
    if (!single || !index) {
        rc = bs_fail(e, BS_ENOMEM, "%s: out of memory", model_dir);
        goto done;
    }
    int hs = bs_file_exists(single), hi = bs_file_exists(index);
    if (hs && hi) {
        rc = bs_fail(e, BS_EFORMAT,
                     "%s: both model.safetensors and model.safetensors.index.json exist: ambiguous weights", model_dir);
    } else if (!hs && !hi) {
        rc = bs_fail(e, BS_EIO, "%s: no weights: neither model.safetensors nor model.safetensors.index.json exists",
                     model_dir);
    } else if (hs) {
        rc = bs_weights_open_file(w, single, e);
    } else {
        rc = open_sharded(w, model_dir, index, e);
        if (rc) bs_weights_close(w);
    }
done:
    free(single);
    free(index);
    return rc;
}

void bs_weights_drop_pages(const void *p, size_t n) {
    long page = sysconf(_SC_PAGESIZE);
    if (page <= 0) page = 4096;
    uintptr_t a = ((uintptr_t)p + (uintptr_t)page - 1) & ~(uintptr_t)(page - 1);
    uintptr_t b = ((uintptr_t)p + n) & ~(uintptr_t)(page - 1);
    if (b > a) madvise((void *)a, (size_t)(b - a), MADV_DONTNEED);
}

void bs_weights_prefetch(const bs_weights *w, const char *what) {
    uint64_t total = 0;
    for (int f = 0; f < w->n_files; f++) total += w->files[f].size;
    bs_progress *p = bs_progress_start(what, total, "B");
    long page = sysconf(_SC_PAGESIZE);
    if (page <= 0) page = 4096;
    const uint64_t step = 64ull << 20;
    volatile unsigned char sink = 0;
    for (int f = 0; f < w->n_files; f++) {
        const unsigned char *base = w->files[f].base;
        uint64_t size = w->files[f].size;
        for (uint64_t at = 0; at < size; at += step) {
            uint64_t n = size - at < step ? size - at : step;
            /* the kernel reads ahead the whole step; touching one byte per
             * page then waits for it */
            madvise((void *)((uintptr_t)(base + at) & ~(uintptr_t)(page - 1)), (size_t)n, MADV_WILLNEED);
            unsigned char acc = 0;
            for (uint64_t i = 0; i < n; i += (uint64_t)page) acc ^= base[at + i];
            sink ^= acc;
            bs_progress_add(p, n);
        }
    }
    (void)sink;
    bs_progress_end(p);
}

/* ---- Llama tensor set (spec 05 §4.3) ----------------------------------- */

enum { D_NONE, D_V, D_H, D_I, D_Q, D_KV };
enum { K_W, K_ABIAS, K_MBIAS };

typedef struct {
    const char *name; /* full name for globals, suffix after "model.layers.{l}." for layers */
    int kind, d0, d1;
} llama_spec;

static const llama_spec g_specs[] = {
    { "lm_head.weight", K_W, D_V, D_H },
    { "model.embed_tokens.weight", K_W, D_V, D_H },
    { "model.norm.weight", K_W, D_H, D_NONE },
};

static const llama_spec l_specs[] = {
    { "input_layernorm.weight", K_W, D_H, D_NONE },
    { "post_attention_layernorm.weight", K_W, D_H, D_NONE },
    { "self_attn.q_proj.weight", K_W, D_Q, D_H },
    { "self_attn.k_proj.weight", K_W, D_KV, D_H },
    { "self_attn.v_proj.weight", K_W, D_KV, D_H },
    { "self_attn.o_proj.weight", K_W, D_H, D_Q },
    { "mlp.gate_proj.weight", K_W, D_I, D_H },
    { "mlp.up_proj.weight", K_W, D_I, D_H },
    { "mlp.down_proj.weight", K_W, D_H, D_I },
    { "self_attn.q_proj.bias", K_ABIAS, D_Q, D_NONE },
    { "self_attn.k_proj.bias", K_ABIAS, D_KV, D_NONE },
    { "self_attn.v_proj.bias", K_ABIAS, D_KV, D_NONE },
    { "self_attn.o_proj.bias", K_ABIAS, D_H, D_NONE },
    { "mlp.gate_proj.bias", K_MBIAS, D_I, D_NONE },
    { "mlp.up_proj.bias", K_MBIAS, D_I, D_NONE },
    { "mlp.down_proj.bias", K_MBIAS, D_H, D_NONE },
};
#define N_GSPEC (int)(sizeof g_specs / sizeof g_specs[0])
#define N_LSPEC (int)(sizeof l_specs / sizeof l_specs[0])

static int64_t dim_of(int code, const bs_config *c) {
    switch (code) {
    case D_V: return c->vocab;
    case D_H: return c->hidden;
    case D_I: return c->inter;
    case D_Q: return (int64_t)c->n_heads * c->head_dim;
    case D_KV: return (int64_t)c->n_kv_heads * c->head_dim;
    }
    return 0;
}

static int spec_shape(const llama_spec *s, const bs_config *c, int64_t *shape) {
    shape[0] = dim_of(s->d0, c);
    if (s->d1 == D_NONE) return 1;
    shape[1] = dim_of(s->d1, c);
    return 2;
}

static bool kind_wanted(int kind, const bs_config *c) {
    return kind == K_W || (kind == K_ABIAS && c->attn_bias) || (kind == K_MBIAS && c->mlp_bias);
}

/* Maps a name to its spec (global or layer, any flags) or NULL. Layer numbers
 * are decimal without padding and below L, as Hugging Face writes them. */
static const llama_spec *classify(const char *name, const bs_config *c) {
    for (int i = 0; i < N_GSPEC; i++)
        if (strcmp(name, g_specs[i].name) == 0) return &g_specs[i];
    static const char pre[] = "model.layers.";
    if (strncmp(name, pre, sizeof pre - 1) != 0) return NULL;
    const char *p = name + sizeof pre - 1;
    if (*p < '0' || *p > '9' || (p[0] == '0' && p[1] != '.')) return NULL;
    int64_t l = 0;
    while (*p >= '0' && *p <= '9') {
        l = l * 10 + (*p++ - '0');
        if (l >= c->n_layers) return NULL;
    }
    if (*p++ != '.') return NULL;
    for (int i = 0; i < N_LSPEC; i++)
        if (strcmp(p, l_specs[i].name) == 0) return &l_specs[i];
    return NULL;
}

/* How the weights are named in messages. */
static void weights_desc(const bs_weights *w, char *buf, size_t size) {
    /* sharded: a tensor absent from every shard may just be absent from the index */
    if (w->index_path) snprintf(buf, size, "%s (the %d shard%s it lists)", w->index_path, w->n_files, w->n_files == 1 ? "" : "s");
    else if (w->n_files == 0) snprintf(buf, size, "weights");
    else if (w->n_files == 1) snprintf(buf, size, "%s", w->files[0].path);
    else snprintf(buf, size, "%s (and %d other shards)", w->files[0].path, w->n_files - 1);
}

#define LIST_MAX 8

int bs_weights_check_llama(const bs_weights *w, const bs_config *c, bs_err *e) {
    char desc[600], got[200], want[200];
    int64_t shape[2];
    int rc = BS_OK;
    bs_buf unknown, missing;
    bs_buf_init(&unknown);
    bs_buf_init(&missing);
    int n_unknown = 0;
    const bs_tensor *bad_bias = NULL, *bad_shape = NULL;
    const llama_spec *bad_shape_spec = NULL;
    int64_t matched = 0;
    weights_desc(w, desc, sizeof desc);

    for (int i = 0; i < w->n_tensors; i++) {
        const bs_tensor *t = &w->tensors[i];
        const llama_spec *s = classify(t->name, c);
        if (!s) {
            if (n_unknown < LIST_MAX) bs_buf_printf(&unknown, "%s%s", n_unknown ? ", " : "", t->name);
            n_unknown++;
            continue;
        }
        if (!kind_wanted(s->kind, c)) {
            if (!bad_bias) bad_bias = t;
            continue;
        }
        matched++;
        int nd = spec_shape(s, c, shape);
        if (!bad_shape && (t->ndim != nd || t->shape[0] != shape[0] || (nd == 2 && t->shape[1] != shape[1]))) {
            bad_shape = t;
            bad_shape_spec = s;
        }
    }
    if (bad_bias) {
        const bs_mapped_file *f = &w->files[bad_bias->file];
        rc = bs_fail(e, BS_EUNSUP, "%s: tensor %s is present but config.json sets %s false", f->path, bad_bias->name,
                     strstr(bad_bias->name, "mlp.") ? "mlp_bias" : "attention_bias");
        goto done;
    }
    if (n_unknown) {
        if (n_unknown > LIST_MAX) bs_buf_printf(&unknown, " (and %d more)", n_unknown - LIST_MAX);
        rc = bs_fail(e, BS_EUNSUP, "%s: checkpoint has tensors this runtime does not implement: %s", desc,
                     unknown.oom ? "(out of memory)" : unknown.data);
        goto done;
    }

    int64_t per_layer = 9 + (c->attn_bias ? 4 : 0) + (c->mlp_bias ? 3 : 0);
    int64_t expected = N_GSPEC + (int64_t)c->n_layers * per_layer;
    if (matched != expected) {
        /* Stops once every missing name is found (or enough for the message),
         * so a hostile num_hidden_layers cannot make this loop long. */
        int64_t to_find = expected - matched, found = 0;
        bool bias_missing = false;
        char name[256];
        for (int64_t l = -1; l < c->n_layers && found < to_find && found < LIST_MAX; l++) {
            int n = l < 0 ? N_GSPEC : N_LSPEC;
            for (int i = 0; i < n && found < to_find && found < LIST_MAX; i++) {
                const llama_spec *s = l < 0 ? &g_specs[i] : &l_specs[i];
                if (!kind_wanted(s->kind, c)) continue;
                if (l < 0) snprintf(name, sizeof name, "%s", s->name);
                else snprintf(name, sizeof name, "model.layers.%lld.%s", (long long)l, s->name);
                if (bs_weights_get(w, name)) continue;
                bs_buf_printf(&missing, "%s%s", found ? ", " : "", name);
                if (s->kind != K_W) bias_missing = true;
                found++;
            }
        }
        if (to_find > found) bs_buf_printf(&missing, " (and %lld more)", (long long)(to_find - found));
        rc = bs_fail(e, BS_EFORMAT, "%s: missing tensor%s: %s%s", desc, to_find > 1 ? "s" : "",
                     missing.oom ? "(out of memory)" : missing.data ? missing.data : "",
                     bias_missing ? " (biases are required because config.json sets attention_bias/mlp_bias true)"
                                  : "");
        goto done;
    }
    if (bad_shape) {
        int nd = spec_shape(bad_shape_spec, c, shape);
        fmt_shape(bad_shape->shape, bad_shape->ndim, got, sizeof got);
        fmt_shape(shape, nd, want, sizeof want);
        rc = bs_fail(e, BS_EFORMAT, "%s: tensor %s has wrong shape %s, expected %s from config.json",
                     w->files[bad_shape->file].path, bad_shape->name, got, want);
        goto done;
    }
done:
    bs_buf_free(&unknown);
    bs_buf_free(&missing);
    return rc;
}

/* ---- element access ---------------------------------------------------- */

float bs_tensor_get_f32(const bs_tensor *t, int64_t i) {
    /* No error channel here: an out-of-range index yields NaN, which cannot
     * pass a numeric test unnoticed. */
    if (!t || i < 0 || i >= t->numel) return NAN;
    /* Byte-wise: the data of a tensor is not necessarily aligned (the header
     * length is arbitrary) and the format is little-endian by definition. */
    const unsigned char *p = (const unsigned char *)t->data + (uint64_t)i * bs_dtype_size(t->dtype);
    switch (t->dtype) {
    case BS_F32: {
        union { uint32_t u; float f; } v;
        v.u = (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
        return v.f;
    }
    case BS_F16: return bs_f16_to_f32((uint16_t)(p[0] | p[1] << 8));
    case BS_BF16: return bs_bf16_to_f32((uint16_t)(p[0] | p[1] << 8));
    case BS_I8: return (float)(int8_t)p[0];
    }
    return NAN;
}

void bs_tensor_read_f32(const bs_tensor *t, int64_t off, int64_t n, float *out) {
    for (int64_t k = 0; k < n; k++) out[k] = bs_tensor_get_f32(t, off + k);
}
