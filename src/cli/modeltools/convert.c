/* `basal convert-llama2c CHECKPOINT TOKENIZER OUTDIR`: exports a llama2.c
 * "version 0" checkpoint and its tokenizer.bin to a Hugging Face Llama model
 * directory (spec 07 §4): config.json, model.safetensors (F32),
 * tokenizer.json, tokenizer_config.json. Used to run the real trained
 * stories260K model through the same loader and forward as Basal models. */
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/progress.h"
#include "basal.h"
#include "cli/cli.h"
#include "base/util.h"
#include "model/st_write.h"

#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "the checkpoint is copied byte for byte: a little-endian host is assumed"
#endif

typedef struct l2c_header {
    int dim, hidden, layers, heads, kv_heads, vocab, seq_len;
    int shared; /* classifier tied to the embedding (vocab_size > 0 in the file) */
    int head_dim, kv_dim;
} l2c_header;

/* Element offsets (in floats, after the 28-byte header) of each section. */
typedef struct l2c_layout {
    int64_t emb, rms_att, wq, wk, wv, wo, rms_ffn, w1, w2, w3, rms_final, freq, wcls, end;
} l2c_layout;

static int parse_header(const char *path, const unsigned char *b, uint64_t fsize, l2c_header *h,
                        l2c_layout *lay, bs_err *e) {
    int32_t v[7];
    memcpy(v, b, sizeof v);
    h->dim = v[0];
    h->hidden = v[1];
    h->layers = v[2];
    h->heads = v[3];
    h->kv_heads = v[4];
    h->vocab = v[5] < 0 ? -v[5] : v[5];
    h->shared = v[5] > 0;
    h->seq_len = v[6];
    /* the bounds keep every size below 2^62 bytes, so no product overflows */
    if (h->dim <= 0 || h->dim > 65536 || h->hidden <= 0 || h->hidden > (1 << 20) || h->layers <= 0 ||
        h->layers > 4096 || h->heads <= 0 || h->kv_heads <= 0 || h->vocab <= 0 ||
        h->vocab > (1 << 22) || h->seq_len <= 0 || h->seq_len > (1 << 22) || v[5] == INT32_MIN)
        return bs_fail(e, BS_EFORMAT,
                       "%s: not a llama2.c checkpoint (header dim %d, hidden_dim %d, n_layers %d, "
                       "n_heads %d, n_kv_heads %d, vocab_size %d, seq_len %d)",
                       path, v[0], v[1], v[2], v[3], v[4], v[5], v[6]);
    if (h->dim % h->heads || h->heads % h->kv_heads || (h->dim / h->heads) % 2)
        return bs_fail(e, BS_EFORMAT,
                       "%s: inconsistent header: dim %d, n_heads %d, n_kv_heads %d (dim must be a "
                       "multiple of n_heads, n_heads of n_kv_heads, head size even)",
                       path, h->dim, h->heads, h->kv_heads);
    h->head_dim = h->dim / h->heads;
    h->kv_dim = h->kv_heads * h->head_dim;
    int64_t D = h->dim, L = h->layers, F = h->hidden, V = h->vocab, KV = h->kv_dim;
    int64_t o = 0;
    lay->emb = o; o += V * D;
    lay->rms_att = o; o += L * D;
    lay->wq = o; o += L * D * D;
    lay->wk = o; o += L * KV * D;
    lay->wv = o; o += L * KV * D;
    lay->wo = o; o += L * D * D;
    lay->rms_ffn = o; o += L * D;
    lay->w1 = o; o += L * F * D;
    lay->w2 = o; o += L * D * F;
    lay->w3 = o; o += L * F * D;
    lay->rms_final = o; o += D;
    /* two legacy RoPE tables (real, imaginary), dropped by the export */
    lay->freq = o; o += 2 * (int64_t)h->seq_len * (h->head_dim / 2);
    lay->wcls = o;
    if (!h->shared) o += V * D;
    lay->end = o;
    uint64_t want = 28 + (uint64_t)o * 4;
    if (fsize != want)
        return bs_fail(e, BS_EFORMAT,
                       "%s: file is %llu bytes but its header (dim %d, hidden_dim %d, n_layers %d, "
                       "n_heads %d, n_kv_heads %d, vocab_size %d, seq_len %d) needs %llu bytes%s",
                       path, (unsigned long long)fsize, v[0], v[1], v[2], v[3], v[4], v[5], v[6],
                       (unsigned long long)want, fsize < want ? " (truncated?)" : "");
    return BS_OK;
}

/* ---- tokenizer.bin -> tokenizer.json ---- */

typedef struct piece {
    char *s; /* HF form: spaces as U+2581 */
    float score;
    int kind; /* 0 normal, 1 special (ids 0..2), 2 byte "<0xHH>" */
} piece;

/* Code points in s[0..n) or -1 if not valid UTF-8 (or contains NUL, which
 * JSON strings here must not carry). */
static int utf8_count(const unsigned char *s, size_t n) {
    int cnt = 0;
    for (size_t i = 0; i < n; cnt++) {
        unsigned c = s[i];
        size_t k;
        uint32_t cp;
        if (c == 0) return -1;
        if (c < 0x80) { k = 1; cp = c; }
        else if ((c & 0xe0) == 0xc0) { k = 2; cp = c & 0x1f; }
        else if ((c & 0xf0) == 0xe0) { k = 3; cp = c & 0x0f; }
        else if ((c & 0xf8) == 0xf0) { k = 4; cp = c & 0x07; }
        else return -1;
        if (i + k > n) return -1;
        for (size_t j = 1; j < k; j++) {
            if ((s[i + j] & 0xc0) != 0x80) return -1;
            cp = (cp << 6) | (s[i + j] & 0x3f);
        }
        if ((k == 2 && cp < 0x80) || (k == 3 && cp < 0x800) || (k == 4 && cp < 0x10000) ||
            cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff))
            return -1;
        i += k;
    }
    return cnt;
}

static int is_byte_piece(const char *s, size_t n) {
    static const char hex[] = "0123456789ABCDEF";
    return n == 6 && !memcmp(s, "<0x", 3) && strchr(hex, s[3]) && strchr(hex, s[4]) && s[5] == '>';
}

static int read_pieces(const char *path, int vocab, piece **out, bs_err *e) {
    char *buf = NULL;
    size_t len = 0;
    piece *p = NULL;
    int rc = bs_read_file(path, &buf, &len, e);
    if (rc) return rc;
    p = calloc((size_t)vocab, sizeof *p);
    if (!p) {
        rc = bs_fail(e, BS_ENOMEM, "%s: out of memory", path);
        goto done;
    }
    size_t o = 4;
    int32_t maxlen;
    if (len < 4) {
        rc = bs_fail(e, BS_EFORMAT, "%s: too short for a llama2.c tokenizer", path);
        goto done;
    }
    memcpy(&maxlen, buf, 4);
    if (maxlen <= 0) {
        rc = bs_fail(e, BS_EFORMAT, "%s: max_token_length %d", path, maxlen);
        goto done;
    }
    static const char *special[3] = {"<unk>", "<s>", "</s>"};
    for (int i = 0; i < vocab; i++) {
        float score;
        int32_t n;
        if (len - o < 8) {
            rc = bs_fail(e, BS_EFORMAT, "%s: truncated at token %d of %d (the checkpoint's vocab_size)",
                         path, i, vocab);
            goto done;
        }
        memcpy(&score, buf + o, 4);
        memcpy(&n, buf + o + 4, 4);
        o += 8;
        if (n < 0 || n > maxlen || (size_t)n > len - o) {
            rc = bs_fail(e, BS_EFORMAT, "%s: token %d: bad length %d (max_token_length %d)", path, i,
                         n, maxlen);
            goto done;
        }
        const char *raw = buf + o;
        o += (size_t)n;
        p[i].score = score;
        if (i < 3) {
            /* llama2.c stores these as "\n<s>\n" etc.; HF names them plainly */
            p[i].s = strdup(special[i]);
            p[i].kind = 1;
        } else if (is_byte_piece(raw, (size_t)n)) {
            p[i].s = strndup(raw, (size_t)n);
            p[i].kind = 2;
        } else {
            if (n == 0 || utf8_count((const unsigned char *)raw, (size_t)n) < 0) {
                rc = bs_fail(e, BS_EFORMAT, "%s: token %d is empty or not valid UTF-8", path, i);
                goto done;
            }
            bs_buf b;
            bs_buf_init(&b);
            for (int k = 0; k < n; k++) {
                if (raw[k] == ' ') bs_buf_puts(&b, "\xe2\x96\x81"); /* U+2581 */
                else bs_buf_putc(&b, raw[k]);
            }
            if (b.oom) bs_buf_free(&b);
            p[i].s = b.data; /* NULL after OOM, caught below */
        }
        if (!p[i].s) {
            rc = bs_fail(e, BS_ENOMEM, "%s: out of memory", path);
            goto done;
        }
    }
    if (o != len) {
        rc = bs_fail(e, BS_EFORMAT, "%s: %zu bytes after the %d tokens the checkpoint declares", path,
                     len - o, vocab);
        goto done;
    }
    *out = p;
    p = NULL;
done:
    if (p)
        for (int i = 0; i < vocab; i++) free(p[i].s);
    free(p);
    free(buf);
    return rc;
}

typedef struct merge {
    float score;
    int id;     /* merged piece */
    int split;  /* byte offset of the split in the merged piece */
} merge;

static int cmp_merge(const void *a, const void *b) {
    const merge *x = a, *y = b;
    if (x->score != y->score) return x->score > y->score ? -1 : 1;
    if (x->id != y->id) return x->id < y->id ? -1 : 1;
    return (x->split > y->split) - (x->split < y->split);
}

static json_t *jobj_added(int id, const char *content) {
    json_t *o = json_object();
    json_object_set_new(o, "id", json_integer(id));
    json_object_set_new(o, "content", json_string(content));
    json_object_set_new(o, "single_word", json_false());
    json_object_set_new(o, "lstrip", json_false());
    json_object_set_new(o, "rstrip", json_false());
    json_object_set_new(o, "normalized", json_false());
    json_object_set_new(o, "special", json_true());
    return o;
}

/* Builds the Mistral-style tokenizer.json. SentencePiece (and llama2.c)
 * repeatedly merge the adjacent pair whose concatenation has the highest
 * score; HF BPE merges the pair of lowest rank. Listing, for every piece,
 * each split into two pieces, ranked by the piece's score, makes the two
 * agree (they can differ only on ties between two splits of one piece). */
static int build_tokenizer_json(const piece *p, int vocab, json_t **out, const char *path, bs_err *e) {
    int rc = BS_OK;
    merge *ms = NULL;
    size_t nm = 0, cap = 0;
    json_t *vocab_obj = json_object(), *merges = json_array(), *root = NULL;
    if (!vocab_obj || !merges) goto oom;
    for (int i = 0; i < vocab; i++) {
        if (json_object_get(vocab_obj, p[i].s)) {
            rc = bs_fail(e, BS_EFORMAT, "%s: token %d \"%s\" appears twice", path, i, p[i].s);
            goto done;
        }
        if (json_object_set_new(vocab_obj, p[i].s, json_integer(i))) goto oom;
    }
    for (int i = 0; i < vocab; i++) {
        if (p[i].kind != 0) continue;
        const char *s = p[i].s;
        size_t n = strlen(s);
        char *tmp = malloc(n + 1);
        if (!tmp) goto oom;
        for (size_t k = 1; k < n; k++) {
            if (((unsigned char)s[k] & 0xc0) == 0x80) continue; /* not a character boundary */
            memcpy(tmp, s, k);
            tmp[k] = 0;
            json_t *l = json_object_get(vocab_obj, tmp), *r = json_object_get(vocab_obj, s + k);
            if (!l || !r || p[json_integer_value(l)].kind != 0 || p[json_integer_value(r)].kind != 0)
                continue;
            if (nm == cap) {
                size_t nc = cap ? cap * 2 : 1024;
                merge *nmv = realloc(ms, nc * sizeof *nmv);
                if (!nmv) {
                    free(tmp);
                    goto oom;
                }
                ms = nmv;
                cap = nc;
            }
            ms[nm++] = (merge){p[i].score, i, (int)k};
        }
        free(tmp);
    }
    if (nm) qsort(ms, nm, sizeof *ms, cmp_merge);
    for (size_t m = 0; m < nm; m++) {
        const char *s = p[ms[m].id].s;
        char *str = bs_strfmt("%.*s %s", ms[m].split, s, s + ms[m].split);
        if (!str || json_array_append_new(merges, json_string(str))) {
            free(str);
            goto oom;
        }
        free(str);
    }

    root = json_object();
    json_t *added = json_array();
    json_object_set_new(root, "version", json_string("1.0"));
    json_object_set_new(root, "truncation", json_null());
    json_object_set_new(root, "padding", json_null());
    json_object_set_new(root, "added_tokens", added);
    for (int i = 0; i < 3 && i < vocab; i++) json_array_append_new(added, jobj_added(i, p[i].s));
    json_object_set_new(root, "normalizer",
                        json_pack("{s:s, s:[{s:s, s:s}, {s:s, s:{s:s}, s:s}]}", "type", "Sequence",
                                  "normalizers", "type", "Prepend", "prepend", "\xe2\x96\x81", "type",
                                  "Replace", "pattern", "String", " ", "content", "\xe2\x96\x81"));
    json_object_set_new(root, "pre_tokenizer", json_null());
    json_object_set_new(
        root, "post_processor",
        json_pack("{s:s, s:[{s:{s:s, s:i}}, {s:{s:s, s:i}}], s:[{s:{s:s, s:i}}, {s:{s:s, s:i}}, "
                  "{s:{s:s, s:i}}, {s:{s:s, s:i}}], s:{s:{s:s, s:[i], s:[s]}}}",
                  "type", "TemplateProcessing",
                  "single", "SpecialToken", "id", "<s>", "type_id", 0, "Sequence", "id", "A", "type_id", 0,
                  "pair", "SpecialToken", "id", "<s>", "type_id", 0, "Sequence", "id", "A", "type_id", 0,
                  "SpecialToken", "id", "<s>", "type_id", 1, "Sequence", "id", "B", "type_id", 1,
                  "special_tokens", "<s>", "id", "<s>", "ids", 1, "tokens", "<s>"));
    json_object_set_new(
        root, "decoder",
        json_pack("{s:s, s:[{s:s, s:{s:s}, s:s}, {s:s}, {s:s}, {s:s, s:s, s:i, s:i}]}", "type",
                  "Sequence", "decoders", "type", "Replace", "pattern", "String", "\xe2\x96\x81",
                  "content", " ", "type", "ByteFallback", "type", "Fuse", "type", "Strip", "content",
                  " ", "start", 1, "stop", 0));
    json_t *model = json_object();
    json_object_set_new(root, "model", model);
    json_object_set_new(model, "type", json_string("BPE"));
    json_object_set_new(model, "dropout", json_null());
    json_object_set_new(model, "unk_token", json_string("<unk>"));
    json_object_set_new(model, "continuing_subword_prefix", json_null());
    json_object_set_new(model, "end_of_word_suffix", json_null());
    json_object_set_new(model, "fuse_unk", json_true());
    json_object_set_new(model, "byte_fallback", json_true());
    json_object_set_new(model, "vocab", vocab_obj);
    json_object_set_new(model, "merges", merges);
    vocab_obj = merges = NULL;
    /* json_pack returns NULL on allocation failure, which set_new rejects;
     * check that every top-level member made it */
    if (json_object_size(root) != 9 || json_array_size(added) != (size_t)(vocab < 3 ? vocab : 3) ||
        json_object_size(model) != 9)
        goto oom;
    *out = root;
    root = NULL;
    goto done;
oom:
    rc = bs_fail(e, BS_ENOMEM, "%s: out of memory building tokenizer.json", path);
done:
    json_decref(root);
    json_decref(vocab_obj);
    json_decref(merges);
    free(ms);
    return rc;
}

/* ---- weights ---- */

static int pread_all(int fd, void *buf, size_t n, uint64_t off) {
    char *p = buf;
    while (n) {
        ssize_t r = pread(fd, p, n, (off_t)off);
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) return -1;
        p += r;
        n -= (size_t)r;
        off += (uint64_t)r;
    }
    return 0;
}

/* the weights being written (one conversion per process) */
static bs_progress *g_progress;

/* Copies n floats from element offset src of the checkpoint into tensor idx,
 * starting at its element dst. */
static int copy_floats(int fd, const char *ckpt, bs_st_writer *w, int idx, int64_t dst, int64_t src,
                       int64_t n, float *buf, int64_t bufn, bs_err *e) {
    while (n > 0) {
        int64_t k = n < bufn ? n : bufn;
        if (pread_all(fd, buf, (size_t)k * 4, 28 + (uint64_t)src * 4))
            return bs_fail(e, BS_EIO, "%s: read error", ckpt);
        int rc = bs_st_write_f32(w, idx, dst, buf, (size_t)k, e);
        if (rc) return rc;
        bs_progress_add(g_progress, (uint64_t)k * 4);
        n -= k;
        src += k;
        dst += k;
    }
    return BS_OK;
}

/* llama2.c rotates interleaved pairs (2i, 2i+1) of a head, HF rotates halves
 * (i, i + hd/2): new row h*hd + j*(hd/2) + i takes old row h*hd + 2i + j
 * (llama2.c export.py permute_original). */
static int copy_permuted(int fd, const char *ckpt, bs_st_writer *w, int idx, int64_t src, int heads,
                         int hd, int dim, float *buf, bs_err *e) {
    for (int h = 0; h < heads; h++)
        for (int j = 0; j < 2; j++)
            for (int i = 0; i < hd / 2; i++) {
                int64_t old_row = (int64_t)h * hd + 2 * i + j;
                int64_t new_row = (int64_t)h * hd + j * (hd / 2) + i;
                int rc = copy_floats(fd, ckpt, w, idx, new_row * dim, src + old_row * dim, dim, buf,
                                     dim, e);
                if (rc) return rc;
            }
    return BS_OK;
}

static int write_weights(int fd, const char *ckpt, const l2c_header *h, const l2c_layout *lay,
                         const char *outdir, bs_err *e) {
    bs_st_writer *w = NULL;
    float *buf = NULL;
    char name[128];
    int64_t D = h->dim, F = h->hidden, V = h->vocab, KV = h->kv_dim;
    const int64_t bufn = 1 << 18;
    int rc = bs_st_new(&w, e);
    if (rc) return rc;
    buf = malloc((size_t)(bufn > D ? bufn : D) * sizeof *buf);
    if (!buf) {
        rc = bs_fail(e, BS_ENOMEM, "out of memory");
        goto done;
    }
#define ADD(nm, nd, ...) do { \
        int64_t shp_[] = {__VA_ARGS__}; \
        rc = bs_st_add(w, nm, BS_F32, nd, shp_, e); \
        if (rc) goto done; \
    } while (0)
    ADD("model.embed_tokens.weight", 2, V, D);
    ADD("lm_head.weight", 2, V, D);
    ADD("model.norm.weight", 1, D);
    for (int l = 0; l < h->layers; l++) {
        static const char *vecs[] = {"input_layernorm", "post_attention_layernorm"};
        for (int k = 0; k < 2; k++) {
            snprintf(name, sizeof name, "model.layers.%d.%s.weight", l, vecs[k]);
            ADD(name, 1, D);
        }
        snprintf(name, sizeof name, "model.layers.%d.self_attn.q_proj.weight", l); ADD(name, 2, D, D);
        snprintf(name, sizeof name, "model.layers.%d.self_attn.k_proj.weight", l); ADD(name, 2, KV, D);
        snprintf(name, sizeof name, "model.layers.%d.self_attn.v_proj.weight", l); ADD(name, 2, KV, D);
        snprintf(name, sizeof name, "model.layers.%d.self_attn.o_proj.weight", l); ADD(name, 2, D, D);
        snprintf(name, sizeof name, "model.layers.%d.mlp.gate_proj.weight", l); ADD(name, 2, F, D);
        snprintf(name, sizeof name, "model.layers.%d.mlp.up_proj.weight", l); ADD(name, 2, F, D);
        snprintf(name, sizeof name, "model.layers.%d.mlp.down_proj.weight", l); ADD(name, 2, D, F);
    }
#undef ADD
    rc = bs_st_begin(w, outdir, 1, e);
    if (rc) goto done;
    {
        uint64_t total = 0;
        for (int i = 0; i < bs_st_count(w); i++) total += (uint64_t)bs_st_numel(w, i) * 4;
        char what[300];
        snprintf(what, sizeof what, "convert-llama2c: writing the weights of %s", outdir);
        g_progress = bs_progress_start(what, total, "B");
    }
#define IDX(...) (snprintf(name, sizeof name, __VA_ARGS__), bs_st_find(w, name))
#define COPY(i, src, n) do { \
        rc = copy_floats(fd, ckpt, w, (i), 0, (src), (n), buf, bufn, e); \
        if (rc) goto done; \
    } while (0)
    COPY(IDX("model.embed_tokens.weight"), lay->emb, V * D);
    COPY(IDX("lm_head.weight"), h->shared ? lay->emb : lay->wcls, V * D);
    COPY(IDX("model.norm.weight"), lay->rms_final, D);
    for (int64_t l = 0; l < h->layers; l++) {
        const char *pre = "model.layers";
        int li = (int)l;
        COPY(IDX("%s.%d.input_layernorm.weight", pre, li), lay->rms_att + l * D, D);
        COPY(IDX("%s.%d.post_attention_layernorm.weight", pre, li), lay->rms_ffn + l * D, D);
        rc = copy_permuted(fd, ckpt, w, IDX("%s.%d.self_attn.q_proj.weight", pre, li),
                           lay->wq + l * D * D, h->heads, h->head_dim, h->dim, buf, e);
        if (rc) goto done;
        rc = copy_permuted(fd, ckpt, w, IDX("%s.%d.self_attn.k_proj.weight", pre, li),
                           lay->wk + l * KV * D, h->kv_heads, h->head_dim, h->dim, buf, e);
        if (rc) goto done;
        COPY(IDX("%s.%d.self_attn.v_proj.weight", pre, li), lay->wv + l * KV * D, KV * D);
        COPY(IDX("%s.%d.self_attn.o_proj.weight", pre, li), lay->wo + l * D * D, D * D);
        COPY(IDX("%s.%d.mlp.gate_proj.weight", pre, li), lay->w1 + l * F * D, F * D);
        COPY(IDX("%s.%d.mlp.down_proj.weight", pre, li), lay->w2 + l * D * F, D * F);
        COPY(IDX("%s.%d.mlp.up_proj.weight", pre, li), lay->w3 + l * F * D, F * D);
    }
#undef COPY
#undef IDX
    rc = bs_st_finish(w, e);
done:
    bs_progress_end(g_progress);
    g_progress = NULL;
    bs_st_free(w);
    free(buf);
    return rc;
}

static const char *const out_files[] = {"config.json", "tokenizer.json", "tokenizer_config.json",
                                        "model.safetensors"};

static int write_text(const char *dir, const char *fname, const char *text, bs_err *e) {
    char *path = bs_path_join(dir, fname);
    if (!path) return bs_fail(e, BS_ENOMEM, "out of memory");
    int rc = bs_write_file(path, text, strlen(text), e);
    free(path);
    return rc;
}

static int convert(const char *ckpt, const char *tokpath, const char *outdir, bs_err *e) {
    int fd = -1, rc, made_dir = 0;
    char *made_top = NULL; /* the uppermost missing parent of outdir this run created */
    piece *pieces = NULL;
    json_t *tok = NULL;
    char *cfg = NULL, *path = NULL;
    l2c_header h = {0};
    l2c_layout lay = {0};
    unsigned char hb[28];
    struct stat st;

    fd = open(ckpt, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return bs_fail(e, BS_EIO, "%s: %s", ckpt, strerror(errno));
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        rc = bs_fail(e, BS_EIO, "%s: not a regular file", ckpt);
        goto done;
    }
    if ((uint64_t)st.st_size < sizeof hb) {
        rc = bs_fail(e, BS_EFORMAT, "%s: file is %lld bytes, shorter than the 28-byte llama2.c header",
                     ckpt, (long long)st.st_size);
        goto done;
    }
    if (pread_all(fd, hb, sizeof hb, 0)) {
        rc = bs_fail(e, BS_EIO, "%s: read error", ckpt);
        goto done;
    }
    rc = parse_header(ckpt, hb, (uint64_t)st.st_size, &h, &lay, e);
    if (rc) goto done;
    rc = read_pieces(tokpath, h.vocab, &pieces, e);
    if (rc) goto done;
    rc = build_tokenizer_json(pieces, h.vocab, &tok, tokpath, e);
    if (rc) goto done;

    rc = bs_mkdir_parents(outdir, &made_top, e);
    if (rc) goto done;
    if (mkdir(outdir, 0755) != 0) {
        rc = bs_fail(e, BS_EIO, "%s%s%s", outdir,
                     errno == EEXIST ? " exists; choose a new output path" : ": ",
                     errno == EEXIST ? "" : strerror(errno));
        goto done;
    }
    made_dir = 1;
    /* θ and ε are not in a llama2.c header: llama2.c hard-codes both */
    cfg = bs_strfmt(
        "{\"architectures\":[\"LlamaForCausalLM\"],\"model_type\":\"llama\",\"hidden_act\":\"silu\","
        "\"hidden_size\":%d,\"intermediate_size\":%d,\"num_hidden_layers\":%d,"
        "\"num_attention_heads\":%d,\"num_key_value_heads\":%d,\"head_dim\":%d,\"vocab_size\":%d,"
        "\"rms_norm_eps\":1e-05,\"max_position_embeddings\":%d,\"tie_word_embeddings\":false,"
        "\"attention_bias\":false,\"mlp_bias\":false,"
        "\"rope_parameters\":{\"rope_type\":\"default\",\"rope_theta\":10000.0}}",
        h.dim, h.hidden, h.layers, h.heads, h.kv_heads, h.head_dim, h.vocab, h.seq_len);
    if (!cfg) {
        rc = bs_fail(e, BS_ENOMEM, "out of memory");
        goto done;
    }
    rc = write_text(outdir, "config.json", cfg, e);
    if (rc) goto done;
    rc = write_text(outdir, "tokenizer_config.json", "{\"bos_token\":\"<s>\"}", e);
    if (rc) goto done;
    path = bs_path_join(outdir, "tokenizer.json");
    if (!path) {
        rc = bs_fail(e, BS_ENOMEM, "out of memory");
        goto done;
    }
    char *text = json_dumps(tok, JSON_INDENT(2));
    rc = text ? bs_write_file(path, text, strlen(text), e) : bs_fail(e, BS_ENOMEM, "%s: out of memory", path);
    free(text);
    if (rc) goto done;
    rc = write_weights(fd, ckpt, &h, &lay, outdir, e);
done:
    if (rc && made_dir) {
        /* leave nothing half-made: the directory was created by this run */
        for (size_t i = 0; i < sizeof out_files / sizeof *out_files; i++) {
            char *p = bs_path_join(outdir, out_files[i]);
            if (p) unlink(p);
            free(p);
        }
        rmdir(outdir);
    }
    if (rc) bs_rmdir_parents(outdir, made_top);
    free(made_top);
    if (pieces)
        for (int i = 0; i < h.vocab; i++) free(pieces[i].s);
    free(pieces);
    json_decref(tok);
    free(cfg);
    free(path);
    if (fd >= 0) close(fd);
    return rc;
}

const cli_doc cli_doc_convert_llama2c = {
    "convert-llama2c", "CHECKPOINT TOKENIZER OUTDIR",
    "convert a llama2.c model and tokenizer to a Hugging Face directory",
    "arguments:\n"
    "  CHECKPOINT  llama2.c version-0 model (e.g. stories260K.bin)\n"
    "  TOKENIZER   llama2.c tokenizer (e.g. tok512.bin)\n"
    "  OUTDIR      new directory for the Hugging Face export (must not exist; missing parents\n"
    "              are created)\n",
};

int cmd_convert_llama2c(int argc, char **argv) {
    const char *args[3];
    cli_pos pos = {args, 0, 3};
    int rc = cli_parse(&cli_doc_convert_llama2c, NULL, 0, &pos, argc, argv);
    if (rc) return rc < 0 ? 0 : rc;
    if (pos.n != 3) {
        cli_error("convert-llama2c", "needs CHECKPOINT TOKENIZER OUTDIR (see basal convert-llama2c --help)");
        return 2;
    }
    struct stat st;
    if (stat(args[2], &st) == 0) {
        cli_error(NULL, "%s exists; choose a new output path", args[2]);
        return 1;
    }
    bs_err e = {0};
    if (convert(args[0], args[1], args[2], &e)) {
        cli_error(NULL, "convert-llama2c: %s", e.msg);
        return 1;
    }
    cli_error(NULL, "wrote %s", args[2]);
    return 0;
}
