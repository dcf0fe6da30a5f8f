#include "cuda/gemm_table.h"

#include <errno.h>
#include <inttypes.h>
#include <jansson.h>
#include <stdlib.h>
#include <string.h>

#include "base/util.h"
#include "cuda/convert.h"

const int bs_gemm_invariant_classes[25] = {16,  32,  48,  64,   96,   128,  160,  192,  224,  256,  320,   384,  448,
                                           512, 640, 768, 1024, 1536, 2048, 3072, 4096, 6144, 8192, 12288, 16384};

int bs_gemm_m_class(int m) {
    if (m < 1) m = 1;
    return m <= 512 ? (m + 15) / 16 * 16 : (m + 127) / 128 * 128;
}

void bs_gemm_table_free(bs_gemm_table *t) {
    free(t->gpu);
    free(t->entries);
    free(t->model);
    free(t->source);
    free(t->note);
    memset(t, 0, sizeof *t);
}

static int get_int(json_t *o, const char *key, long long lo, long long hi, long long *out) {
    json_t *v = json_object_get(o, key);
    if (!json_is_integer(v)) return -1;
    long long x = json_integer_value(v);
    if (x < lo || x > hi) return -1;
    *out = x;
    return 0;
}

/* An algorithm word: a decimal or 0x-hex string, or a non-negative integer. */
static int get_word(json_t *v, uint64_t *out) {
    if (json_is_integer(v)) {
        if (json_integer_value(v) < 0) return -1;
        *out = (uint64_t)json_integer_value(v);
        return 0;
    }
    const char *s = json_string_value(v);
    if (!s || !*s || *s == '-' || *s == '+' || *s == ' ') return -1;
    char *end = NULL;
    errno = 0;
    unsigned long long x = strtoull(s, &end, 0);
    if (errno || !end || *end) return -1;
    *out = (uint64_t)x;
    return 0;
}

static char *dup_opt_string(json_t *o, const char *key) {
    const char *s = json_string_value(json_object_get(o, key));
    return s ? strdup(s) : NULL;
}

static int cmp_entry(const void *a, const void *b) {
    const bs_gemm_entry *x = a, *y = b;
    if (x->n != y->n) return x->n < y->n ? -1 : 1;
    if (x->k != y->k) return x->k < y->k ? -1 : 1;
    return (x->m_class > y->m_class) - (x->m_class < y->m_class);
}

static int parse_entry(bs_gemm_table *t, json_t *je, size_t i, bs_gemm_entry *en, const char *name, bs_err *e) {
    long long mc, n, k;
    if (!json_is_object(je)) return bs_fail(e, BS_EFORMAT, "%s: entries[%zu] is not an object", name, i);
    if (get_int(je, "m_class", 1, 1 << 24, &mc) || get_int(je, "n", 1, 1 << 24, &n) ||
        get_int(je, "k", 1, 1 << 24, &k))
        return bs_fail(e, BS_EFORMAT, "%s: entries[%zu] needs positive integers m_class, n, k", name, i);
    en->m_class = (int)mc;
    en->n = (int)n;
    en->k = (int)k;
    bs_dtype dt;
    const char *ds = json_string_value(json_object_get(je, "dtype"));
    if (ds && (bs_cuda_dtype_parse(ds, &dt) < 0 || !strcmp(ds, "auto") || dt != t->dtype))
        return bs_fail(e, BS_EFORMAT, "%s: entries[%zu] has dtype \"%s\", the table \"%s\"", name, i, ds,
                       bs_cuda_dtype_name(t->dtype));
    json_t *ja = json_object_get(je, "algo");
    if (!json_is_array(ja) || json_array_size(ja) != BS_GEMM_ALGO_WORDS)
        return bs_fail(e, BS_EFORMAT, "%s: entries[%zu].algo must hold %d words", name, i, BS_GEMM_ALGO_WORDS);
    for (int w = 0; w < BS_GEMM_ALGO_WORDS; w++)
        if (get_word(json_array_get(ja, (size_t)w), &en->algo[w]))
            return bs_fail(e, BS_EFORMAT, "%s: entries[%zu].algo[%d] is not an unsigned 64-bit word", name, i, w);
    json_t *v;
    if ((v = json_object_get(je, "ms")) && json_is_number(v)) en->ms = json_number_value(v);
    if (((v = json_object_get(je, "best_candidate_ms")) || (v = json_object_get(je, "heuristic_first_ms"))) &&
        json_is_number(v))
        en->best_ms = json_number_value(v);
    if ((v = json_object_get(je, "tflops")) && json_is_number(v)) en->tflops = json_number_value(v);
    if ((v = json_object_get(je, "configurations")) && json_is_integer(v))
        en->configurations = (int)json_integer_value(v);
    int known = 0;
    for (int s = 0; s < t->n_shapes; s++) known |= t->shapes[s][0] == en->n && t->shapes[s][1] == en->k;
    if (!known)
        return bs_fail(e, BS_EFORMAT, "%s: entries[%zu] is for shape [%d, %d], which \"shapes\" does not list", name,
                       i, en->n, en->k);
    return BS_OK;
}

int bs_gemm_table_parse(bs_gemm_table *t, const char *text, size_t len, const char *name, bs_err *e) {
    memset(t, 0, sizeof *t);
    json_error_t je;
    int rc = BS_OK;
    json_t *root = json_loadb(text, len, 0, &je);
    if (!root) return bs_fail(e, BS_EFORMAT, "%s:%d: %s", name, je.line, je.text);
    long long v;
    const char *s;
    if (!json_is_object(root)) { rc = bs_fail(e, BS_EFORMAT, "%s: not a JSON object", name); goto fail; }
    if (get_int(root, "cublaslt_version", 1, 99999999, &v)) {
        rc = bs_fail(e, BS_EFORMAT, "%s: \"cublaslt_version\" must be a positive integer", name);
        goto fail;
    }
    t->cublaslt_version = (long)v;
    if (!(s = json_string_value(json_object_get(root, "gpu"))) || !*s) {
        rc = bs_fail(e, BS_EFORMAT, "%s: \"gpu\" must name the device", name);
        goto fail;
    }
    if (!(t->gpu = strdup(s))) { rc = bs_fail(e, BS_ENOMEM, "out of memory"); goto fail; }
    s = json_string_value(json_object_get(root, "dtype"));
    if (!s || !strcmp(s, "auto") || bs_cuda_dtype_parse(s, &t->dtype) < 0) {
        rc = bs_fail(e, BS_EFORMAT, "%s: \"dtype\" must be f16, bf16 or f32", name);
        goto fail;
    }
    if (!json_is_boolean(json_object_get(root, "invariant"))) {
        rc = bs_fail(e, BS_EFORMAT, "%s: \"invariant\" must be true or false", name);
        goto fail;
    }
    t->invariant = json_is_true(json_object_get(root, "invariant"));
    if (get_int(root, "gemm_search_version", 1, 1000, &v)) {
        rc = bs_fail(e, BS_EFORMAT, "%s: \"gemm_search_version\" must be a positive integer", name);
        goto fail;
    }
    t->search_version = (int)v;
    json_t *jsh = json_object_get(root, "shapes");
    if (!json_is_array(jsh) || json_array_size(jsh) == 0 || json_array_size(jsh) > BS_GEMM_MAX_SHAPES) {
        rc = bs_fail(e, BS_EFORMAT, "%s: \"shapes\" must list 1 to %d [N, K] pairs", name, BS_GEMM_MAX_SHAPES);
        goto fail;
    }
    t->n_shapes = (int)json_array_size(jsh);
    for (int i = 0; i < t->n_shapes; i++) {
        json_t *p = json_array_get(jsh, (size_t)i);
        json_t *a = json_array_get(p, 0), *b = json_array_get(p, 1);
        if (!json_is_array(p) || json_array_size(p) != 2 || !json_is_integer(a) || !json_is_integer(b) ||
            json_integer_value(a) < 1 || json_integer_value(b) < 1 || json_integer_value(a) > (1 << 24) ||
            json_integer_value(b) > (1 << 24)) {
            rc = bs_fail(e, BS_EFORMAT, "%s: shapes[%d] must be [N, K] with positive integers", name, i);
            goto fail;
        }
        t->shapes[i][0] = (int)json_integer_value(a);
        t->shapes[i][1] = (int)json_integer_value(b);
    }
    json_t *jen = json_object_get(root, "entries");
    if (!json_is_array(jen) || json_array_size(jen) == 0) {
        rc = bs_fail(e, BS_EFORMAT, "%s: \"entries\" must be a non-empty array", name);
        goto fail;
    }
    size_t ne = json_array_size(jen);
    if (ne > 100000 || !(t->entries = calloc(ne, sizeof *t->entries))) {
        rc = bs_fail(e, ne > 100000 ? BS_EFORMAT : BS_ENOMEM, "%s: %zu entries", name, ne);
        goto fail;
    }
    for (size_t i = 0; i < ne; i++)
        if ((rc = parse_entry(t, json_array_get(jen, i), i, &t->entries[i], name, e)) < 0) goto fail;
    t->n_entries = (int)ne;
    qsort(t->entries, ne, sizeof *t->entries, cmp_entry);
    for (size_t i = 1; i < ne; i++)
        if (!cmp_entry(&t->entries[i - 1], &t->entries[i])) {
            rc = bs_fail(e, BS_EFORMAT, "%s: two entries for shape [%d, %d] class %d", name, t->entries[i].n,
                         t->entries[i].k, t->entries[i].m_class);
            goto fail;
        }
    json_t *jt = json_object_get(root, "timing");
    if (json_is_number(jt)) t->timing_s = json_number_value(jt);
    else if (json_is_object(jt) && json_is_number(json_object_get(jt, "total_s")))
        t->timing_s = json_number_value(json_object_get(jt, "total_s"));
    t->model = dup_opt_string(root, "model");
    t->source = dup_opt_string(root, "source");
    t->note = dup_opt_string(root, "note");
    json_decref(root);
    return BS_OK;
fail:
    json_decref(root);
    bs_gemm_table_free(t);
    return rc;
}

int bs_gemm_table_load(bs_gemm_table *t, const char *path, bs_err *e) {
    char *text = NULL;
    size_t len = 0;
    memset(t, 0, sizeof *t);
    int rc = bs_read_file(path, &text, &len, e);
    if (rc < 0) return rc;
    rc = bs_gemm_table_parse(t, text, len, path, e);
    free(text);
    return rc;
}

void bs_gemm_table_shape(const bs_gemm_table *t, int n, int k, int *first, int *count) {
    *first = 0;
    *count = 0;
    for (int i = 0; i < t->n_entries; i++)
        if (t->entries[i].n == n && t->entries[i].k == k) {
            if (!*count) *first = i;
            ++*count;
        }
}

const bs_gemm_entry *bs_gemm_table_pick(const bs_gemm_table *t, int n, int k, int m) {
    int first, count, cls = bs_gemm_m_class(m);
    bs_gemm_table_shape(t, n, k, &first, &count);
    if (!count) return NULL;
    for (int i = first; i < first + count; i++) /* entries are sorted by class */
        if (t->entries[i].m_class >= cls) return &t->entries[i];
    return &t->entries[first + count - 1];
}

int bs_gemm_table_check(const bs_gemm_table *t, const char *gpu, long cublaslt_version, bs_dtype dtype,
                        const int (*shapes)[2], int n_shapes, bs_err *e) {
    if (t->search_version != BS_GEMM_SEARCH_VERSION)
        return bs_fail(e, BS_EINVAL, "GEMM table of search version %d; this build needs version %d (run basal "
                                     "gemm-search again)", t->search_version, BS_GEMM_SEARCH_VERSION);
    if (strcmp(t->gpu, gpu))
        return bs_fail(e, BS_EINVAL, "GEMM table made on \"%s\", this GPU is \"%s\"", t->gpu, gpu);
    if (t->cublaslt_version != cublaslt_version)
        return bs_fail(e, BS_EINVAL, "GEMM table made with cuBLASLt %ld, this process has %ld", t->cublaslt_version,
                       cublaslt_version);
    if (t->dtype != dtype)
        return bs_fail(e, BS_EINVAL, "GEMM table for dtype %s, the model runs in %s", bs_cuda_dtype_name(t->dtype),
                       bs_cuda_dtype_name(dtype));
    for (int s = 0; s < n_shapes; s++) {
        int first, count;
        bs_gemm_table_shape(t, shapes[s][0], shapes[s][1], &first, &count);
        if (!count)
            return bs_fail(e, BS_EINVAL, "GEMM table has no entry for the projection shape [%d, %d]", shapes[s][0],
                           shapes[s][1]);
    }
    return BS_OK;
}

char *bs_gemm_table_dump(const bs_gemm_table *t) {
    json_t *root = json_object(), *shapes = json_array(), *entries = json_array();
    char *out = NULL;
    int bad = !root || !shapes || !entries;
    if (bad) goto done;
    bad |= json_object_set_new(root, "cublaslt_version", json_integer(t->cublaslt_version));
    bad |= json_object_set_new(root, "gpu", json_string(t->gpu ? t->gpu : ""));
    bad |= json_object_set_new(root, "dtype", json_string(bs_cuda_dtype_name(t->dtype)));
    bad |= json_object_set_new(root, "invariant", json_boolean(t->invariant));
    bad |= json_object_set_new(root, "gemm_search_version", json_integer(t->search_version));
    for (int s = 0; s < t->n_shapes; s++)
        bad |= json_array_append_new(shapes, json_pack("[i, i]", t->shapes[s][0], t->shapes[s][1]));
    for (int i = 0; i < t->n_entries; i++) {
        const bs_gemm_entry *en = &t->entries[i];
        json_t *algo = json_array();
        bad |= !algo;
        for (int w = 0; algo && w < BS_GEMM_ALGO_WORDS; w++) {
            char word[24];
            snprintf(word, sizeof word, "%" PRIu64, en->algo[w]);
            bad |= json_array_append_new(algo, json_string(word));
        }
        json_t *o = json_pack("{s:i, s:i, s:i, s:s, s:o, s:f, s:f, s:i, s:f}", "m_class", en->m_class, "n", en->n,
                              "k", en->k, "dtype", bs_cuda_dtype_name(t->dtype), "algo", algo, "ms", en->ms,
                              t->invariant ? "best_candidate_ms" : "heuristic_first_ms", en->best_ms,
                              "configurations", en->configurations, "tflops", en->tflops);
        bad |= json_array_append_new(entries, o);
    }
    bad |= json_object_set(root, "shapes", shapes);
    bad |= json_object_set(root, "entries", entries);
    bad |= json_object_set_new(root, "timing", json_pack("{s:f}", "total_s", t->timing_s));
    bad |= json_object_set_new(root, "note", json_string(t->note ? t->note : ""));
    bad |= json_object_set_new(root, "model", json_string(t->model ? t->model : ""));
    bad |= json_object_set_new(root, "source", json_string(t->source ? t->source : ""));
    if (!bad) out = json_dumps(root, JSON_INDENT(1) | JSON_PRESERVE_ORDER);
done:
    json_decref(shapes);
    json_decref(entries);
    json_decref(root);
    return out;
}
