/* Loader tests: config.json rules (spec 05 §2) and safetensors / sharded
 * checkpoints (§4), conformance items §18.1 and §18.2. Fixtures are written
 * by this file's own small writer into a temporary directory; expected values
 * come from the spec tables and from the writer's value formula, never from
 * the loader itself. */
#include <ftw.h>
#include <jansson.h>
#include <stdint.h>
#include <sys/stat.h>
#include <unistd.h>

#include "check.h"
#include "base/util.h"
#include "model/config.h"
#include "model/safetensors.h"

static char g_root[64];

static char *tpath(const char *rel) {
    static char buf[8][512];
    static int k;
    char *p = buf[k++ % 8];
    snprintf(p, 512, "%s/%s", g_root, rel);
    return p;
}

static const char *mkcase(const char *name) {
    const char *d = tpath(name);
    if (mkdir(d, 0700) != 0) {
        perror(d);
        exit(2);
    }
    return d;
}

static int rm_cb(const char *p, const struct stat *sb, int flag, struct FTW *f) {
    (void)sb; (void)flag; (void)f;
    return remove(p);
}

static void write_bytes(const char *path, const void *data, size_t len) {
    FILE *f = fopen(path, "wb");
    if (!f || fwrite(data, 1, len, f) != len || fclose(f) != 0) {
        perror(path);
        exit(2);
    }
}

static void put_le64(unsigned char *p, uint64_t v) {
    for (int i = 0; i < 8; i++) p[i] = (unsigned char)(v >> (8 * i));
}

/* A file with header length n_field, header text, then data_len bytes of data. */
static void write_raw_n(const char *path, uint64_t n_field, const char *header, size_t data_len) {
    size_t hl = strlen(header);
    unsigned char *buf = calloc(1, 8 + hl + data_len + 1);
    put_le64(buf, n_field);
    memcpy(buf + 8, header, hl);
    for (size_t i = 0; i < data_len; i++) buf[8 + hl + i] = (unsigned char)i;
    write_bytes(path, buf, 8 + hl + data_len);
    free(buf);
}

static void write_raw(const char *path, const char *header, size_t data_len) {
    write_raw_n(path, strlen(header), header, data_len);
}

/* ---- tensor fixtures ---------------------------------------------------- */

typedef struct {
    char name[96];
    const char *dtype;
    int ndim;
    int64_t shape[2];
} tdesc;

typedef struct {
    tdesc t[160];
    int n;
} tlist;

static void tl_add(tlist *l, const char *name, const char *dtype, int ndim, int64_t d0, int64_t d1) {
    tdesc *t = &l->t[l->n++];
    snprintf(t->name, sizeof t->name, "%s", name);
    t->dtype = dtype;
    t->ndim = ndim;
    t->shape[0] = d0;
    t->shape[1] = d1;
}

static int tl_find(const tlist *l, const char *name) {
    for (int i = 0; i < l->n; i++)
        if (strcmp(l->t[i].name, name) == 0) return i;
    return -1;
}

static void tl_del(tlist *l, const char *name) {
    int i = tl_find(l, name);
    if (i < 0) {
        fprintf(stderr, "fixture bug: %s not in list\n", name);
        exit(2);
    }
    memmove(&l->t[i], &l->t[i + 1], (size_t)(l->n - i - 1) * sizeof l->t[0]);
    l->n--;
}

static int64_t td_numel(const tdesc *t) {
    int64_t n = 1;
    for (int i = 0; i < t->ndim; i++) n *= t->shape[i];
    return n;
}

static unsigned name_hash(const char *s) {
    unsigned h = 2166136261u;
    while (*s) h = (h ^ (unsigned char)*s++) * 16777619u;
    return h;
}

/* m/16 with |m| <= 125: exact in BF16 (8 significant bits), F16 and F32, so
 * one formula is the oracle for every dtype. */
static float tval(const char *name, int64_t k) {
    int m = (int)((name_hash(name) % 251u + (unsigned)(k * 7)) % 251u) - 125;
    return (float)m / 16.0f;
}

static uint32_t f32_bits(float f) {
    uint32_t u;
    memcpy(&u, &f, 4);
    return u;
}

/* Encoder for the exactly representable normal values above (independent
 * of the library's rounding converters). */
static uint16_t f16_exact(float x) {
    if (x == 0) return 0;
    uint16_t sign = x < 0 ? 0x8000 : 0;
    int ex;
    float fr = frexpf(fabsf(x), &ex); /* |x| = fr * 2^ex, 0.5 <= fr < 1 */
    uint16_t man = (uint16_t)((fr * 2.0f - 1.0f) * 1024.0f);
    return (uint16_t)(sign | (uint16_t)((ex - 1 + 15) << 10) | man);
}

static void put_val(bs_buf *d, const char *dtype, float v) {
    unsigned char b[4];
    uint32_t u = f32_bits(v);
    if (strcmp(dtype, "F32") == 0) {
        for (int i = 0; i < 4; i++) b[i] = (unsigned char)(u >> (8 * i));
        bs_buf_put(d, b, 4);
    } else {
        uint16_t h = strcmp(dtype, "F16") == 0 ? f16_exact(v) : (uint16_t)(u >> 16);
        b[0] = (unsigned char)h;
        b[1] = (unsigned char)(h >> 8);
        bs_buf_put(d, b, 2);
    }
}

/* Header in list order (not sorted: the loader must sort), __metadata__
 * first, padded with spaces to a multiple of 8 as the reference writer does. */
static void write_st(const char *path, const tlist *l) {
    bs_buf h, d;
    bs_buf_init(&h);
    bs_buf_init(&d);
    bs_buf_puts(&h, "{\"__metadata__\":{\"format\":\"pt\"}");
    for (int i = 0; i < l->n; i++) {
        const tdesc *t = &l->t[i];
        size_t b = d.len;
        for (int64_t k = 0; k < td_numel(t); k++) put_val(&d, t->dtype, tval(t->name, k));
        bs_buf_printf(&h, ",\"%s\":{\"dtype\":\"%s\",\"shape\":[", t->name, t->dtype);
        for (int j = 0; j < t->ndim; j++) bs_buf_printf(&h, "%s%lld", j ? "," : "", (long long)t->shape[j]);
        bs_buf_printf(&h, "],\"data_offsets\":[%zu,%zu]}", b, d.len);
    }
    bs_buf_puts(&h, "}");
    while (h.len % 8) bs_buf_putc(&h, ' ');
    FILE *f = fopen(path, "wb");
    unsigned char n8[8];
    put_le64(n8, h.len);
    if (!f || fwrite(n8, 1, 8, f) != 8 || fwrite(h.data, 1, h.len, f) != h.len ||
        (d.len && fwrite(d.data, 1, d.len, f) != d.len) || fclose(f) != 0) {
        perror(path);
        exit(2);
    }
    bs_buf_free(&h);
    bs_buf_free(&d);
}

/* Tiny Llama: L=2, H=8, I=12, Nh=2, Nkv=1, hd=4, V=10. Tensor set and shapes
 * typed from the table of spec 05 §4.3; dtypes mixed to exercise widening. */
static bs_config tiny_cfg(bool bias) {
    bs_config c;
    memset(&c, 0, sizeof c);
    c.n_layers = 2; c.hidden = 8; c.inter = 12; c.n_heads = 2; c.n_kv_heads = 1; c.head_dim = 4;
    c.vocab = 10; c.max_pos = 64; c.rms_eps = 1e-6; c.rope_theta = 10000;
    c.attn_bias = c.mlp_bias = bias;
    return c;
}

static void tiny_tensors(tlist *l, bool abias, bool mbias) {
    char n[96];
    l->n = 0;
    tl_add(l, "model.embed_tokens.weight", "BF16", 2, 10, 8);
    tl_add(l, "model.norm.weight", "F32", 1, 8, 0);
    tl_add(l, "lm_head.weight", "BF16", 2, 10, 8);
    for (int i = 0; i < 2; i++) {
#define LAY(suf, dt, nd, a, b) (snprintf(n, sizeof n, "model.layers.%d.%s", i, suf), tl_add(l, n, dt, nd, a, b))
        LAY("input_layernorm.weight", "F32", 1, 8, 0);
        LAY("post_attention_layernorm.weight", "F32", 1, 8, 0);
        LAY("self_attn.q_proj.weight", "BF16", 2, 8, 8);
        LAY("self_attn.k_proj.weight", "BF16", 2, 4, 8);
        LAY("self_attn.v_proj.weight", "F16", 2, 4, 8);
        LAY("self_attn.o_proj.weight", "BF16", 2, 8, 8);
        LAY("mlp.gate_proj.weight", "BF16", 2, 12, 8);
        LAY("mlp.up_proj.weight", "F16", 2, 12, 8);
        LAY("mlp.down_proj.weight", "BF16", 2, 8, 12);
        if (abias) {
            LAY("self_attn.q_proj.bias", "F16", 1, 8, 0);
            LAY("self_attn.k_proj.bias", "F16", 1, 4, 0);
            LAY("self_attn.v_proj.bias", "F32", 1, 4, 0);
            LAY("self_attn.o_proj.bias", "BF16", 1, 8, 0);
        }
        if (mbias) {
            LAY("mlp.gate_proj.bias", "F16", 1, 12, 0);
            LAY("mlp.up_proj.bias", "BF16", 1, 12, 0);
            LAY("mlp.down_proj.bias", "F32", 1, 8, 0);
        }
#undef LAY
    }
}

/* ---- helpers for expectations ------------------------------------------ */

/* Every tensor of l is present with dtype, shape and values of the formula. */
static void check_contents(const bs_weights *w, const tlist *l) {
    CHECK_INT(w->n_tensors, l->n);
    for (int i = 1; i < w->n_tensors; i++) CHECK(strcmp(w->tensors[i - 1].name, w->tensors[i].name) < 0);
    for (int i = 0; i < l->n; i++) {
        const tdesc *d = &l->t[i];
        const bs_tensor *t = bs_weights_get(w, d->name);
        CHECK(t != NULL);
        if (!t) continue;
        CHECK_STR(t->name, d->name);
        CHECK_STR(bs_dtype_name(t->dtype), d->dtype);
        CHECK_INT(t->ndim, d->ndim);
        CHECK_INT(t->shape[0], d->shape[0]);
        if (d->ndim == 2) CHECK_INT(t->shape[1], d->shape[1]);
        CHECK_INT(t->numel, td_numel(d));
        CHECK_INT(t->nbytes, (uint64_t)td_numel(d) * bs_dtype_size(t->dtype));
        int bad = 0;
        for (int64_t k = 0; k < t->numel; k++)
            if (f32_bits(bs_tensor_get_f32(t, k)) != f32_bits(tval(d->name, k))) bad++;
        CHECK_INT(bad, 0);
        float buf[96];
        int64_t n = t->numel < 96 ? t->numel : 96;
        bs_tensor_read_f32(t, 0, n, buf);
        bad = 0;
        for (int64_t k = 0; k < n; k++)
            if (f32_bits(buf[k]) != f32_bits(tval(d->name, k))) bad++;
        CHECK_INT(bad, 0);
    }
    CHECK(bs_weights_get(w, "model.no_such.weight") == NULL);
}

/* Expects the single file at path to be refused with each needle in the message. */
static void expect_file_err(const char *path, const char *n1, const char *n2) {
    bs_weights w;
    bs_err e = {0};
    int rc = bs_weights_open_file(&w, path, &e);
    CHECK(rc < 0);
    CHECK_INT(e.code, rc);
    CHECK_CONTAINS(e.msg, path);
    if (n1) CHECK_CONTAINS(e.msg, n1);
    if (n2) CHECK_CONTAINS(e.msg, n2);
    CHECK_INT(w.n_tensors, 0);
    CHECK_INT(w.n_files, 0);
    if (rc == 0) bs_weights_close(&w);
}

static void expect_hdr_err(const char *header, size_t data_len, const char *n1, const char *n2) {
    static int k;
    char name[32];
    snprintf(name, sizeof name, "hdr%03d.safetensors", k++);
    const char *p = tpath(name);
    write_raw(p, header, data_len);
    expect_file_err(p, n1, n2);
}

static void expect_dir_err(const char *dir, const char *n1, const char *n2) {
    bs_weights w;
    bs_err e = {0};
    int rc = bs_weights_open(&w, dir, &e);
    CHECK(rc < 0);
    CHECK_INT(e.code, rc);
    CHECK_CONTAINS(e.msg, dir);
    if (n1) CHECK_CONTAINS(e.msg, n1);
    if (n2) CHECK_CONTAINS(e.msg, n2);
    CHECK_INT(w.n_tensors, 0);
    if (rc == 0) bs_weights_close(&w);
}

/* ---- config.json -------------------------------------------------------- */

/* The tiny-bias config.json of 07-test-resources.md §8.2, verbatim. */
static const char *BASE_CFG =
    "{\"architectures\":[\"LlamaForCausalLM\"],\"model_type\":\"llama\",\"hidden_act\":\"silu\",\"hidden_size\":64,"
    "\"intermediate_size\":160,\"num_hidden_layers\":3,\"num_attention_heads\":4,\"num_key_value_heads\":2,"
    "\"head_dim\":16,\"vocab_size\":32002,\"rms_norm_eps\":1e-06,\"max_position_embeddings\":2048,"
    "\"tie_word_embeddings\":false,\"attention_bias\":true,\"mlp_bias\":true,\"pretraining_tp\":1,"
    "\"rope_scaling\":null,\"rope_parameters\":{\"rope_type\":\"default\",\"rope_theta\":1000000.0},"
    "\"rope_theta\":10000.0,\"bos_token_id\":1,\"eos_token_id\":32001,\"torch_dtype\":\"bfloat16\"}";

/* Base config with the keys of `mods` (a JSON object) replaced and the keys
 * in `del` (space-separated) removed; "rope_parameters.X" addresses the
 * nested object. */
static int cfg_try(bs_config *c, bs_err *e, const char *mods, const char *del) {
    json_t *root = json_loads(BASE_CFG, 0, NULL);
    if (mods) {
        json_t *m = json_loads(mods, 0, NULL);
        if (!m) {
            fprintf(stderr, "fixture bug: bad mods %s\n", mods);
            exit(2);
        }
        const char *k;
        json_t *v;
        json_object_foreach(m, k, v) {
            if (strncmp(k, "rope_parameters.", 16) == 0)
                json_object_set(json_object_get(root, "rope_parameters"), k + 16, v);
            else
                json_object_set(root, k, v);
        }
        json_decref(m);
    }
    if (del) {
        char buf[256];
        snprintf(buf, sizeof buf, "%s", del);
        for (char *s = strtok(buf, " "); s; s = strtok(NULL, " ")) {
            if (strncmp(s, "rope_parameters.", 16) == 0) json_object_del(json_object_get(root, "rope_parameters"), s + 16);
            else json_object_del(root, s);
        }
    }
    char *text = json_dumps(root, JSON_COMPACT);
    json_decref(root);
    memset(e, 0, sizeof *e);
    int rc = bs_config_parse(c, text, strlen(text), "x/config.json", e);
    free(text);
    return rc;
}

static void cfg_bad(const char *mods, const char *del, const char *n1, const char *n2) {
    bs_config c;
    bs_err e;
    int rc = cfg_try(&c, &e, mods, del);
    CHECK(rc < 0);
    CHECK_INT(e.code, rc);
    CHECK_CONTAINS(e.msg, "x/config.json: ");
    if (n1) CHECK_CONTAINS(e.msg, n1);
    if (n2) CHECK_CONTAINS(e.msg, n2);
    if (rc == 0) fprintf(stderr, "  (accepted: mods %s del %s)\n", mods ? mods : "-", del ? del : "-");
}

static void cfg_ok(const char *mods, const char *del, bs_config *out) {
    bs_err e;
    int rc = cfg_try(out, &e, mods, del);
    CHECK_INT(rc, 0);
    if (rc) fprintf(stderr, "  (refused: %s)\n", e.msg);
}

static void test_config(void) {
    bs_config c, c2;
    bs_err e;

    /* The §8.2 example: values as written, θ from rope_parameters. */
    cfg_ok(NULL, NULL, &c);
    CHECK_INT(c.n_layers, 3);
    CHECK_INT(c.hidden, 64);
    CHECK_INT(c.inter, 160);
    CHECK_INT(c.n_heads, 4);
    CHECK_INT(c.n_kv_heads, 2);
    CHECK_INT(c.head_dim, 16);
    CHECK_INT(c.vocab, 32002);
    CHECK_INT(c.max_pos, 2048);
    CHECK(c.rms_eps == 1e-06);
    CHECK(c.rope_theta == 1000000.0);
    CHECK(c.attn_bias && c.mlp_bias);
    CHECK(c.decoy_rope_theta);

    /* Decoy: changing the top-level value changes nothing but the flag. */
    cfg_ok("{\"rope_theta\": 1234.5}", NULL, &c2);
    CHECK(memcmp(&c, &c2, sizeof c) == 0);
    cfg_ok("{\"rope_theta\": \"oops\"}", NULL, &c2);
    CHECK(c2.rope_theta == 1000000.0 && c2.decoy_rope_theta);
    cfg_ok(NULL, "rope_theta", &c2);
    CHECK(c2.rope_theta == 1000000.0 && !c2.decoy_rope_theta);
    cfg_ok("{\"rope_theta\": 1000000}", NULL, &c2);
    CHECK(c2.rope_theta == 1000000.0 && !c2.decoy_rope_theta);
    /* ... while changing rope_parameters.rope_theta changes θ. */
    cfg_ok("{\"rope_parameters.rope_theta\": 500000}", NULL, &c2);
    CHECK(c2.rope_theta == 500000.0 && c2.decoy_rope_theta);

    /* model_type */
    cfg_bad("{\"model_type\": \"mistral\"}", NULL, "model_type must be \"llama\"", "\"mistral\"");
    cfg_bad(NULL, "model_type", "model_type", "absent");
    cfg_bad("{\"model_type\": 1}", NULL, "model_type", NULL);
    /* architectures */
    cfg_bad("{\"architectures\": [\"MistralForCausalLM\"]}", NULL, "architectures", "MistralForCausalLM");
    cfg_bad("{\"architectures\": [\"LlamaForCausalLM\", \"LlamaModel\"]}", NULL, "architectures", "LlamaModel");
    cfg_bad("{\"architectures\": \"LlamaForCausalLM\"}", NULL, "architectures", NULL);
    cfg_bad("{\"architectures\": []}", NULL, "architectures", "[]");
    cfg_bad(NULL, "architectures", "architectures", "absent");
    /* hidden_act */
    cfg_bad("{\"hidden_act\": \"gelu\"}", NULL, "hidden_act must be \"silu\"", "gelu");
    cfg_bad(NULL, "hidden_act", "hidden_act", NULL);
    /* tie_word_embeddings: absent is false */
    cfg_bad("{\"tie_word_embeddings\": true}", NULL, "tie_word_embeddings", "true");
    cfg_bad("{\"tie_word_embeddings\": 0}", NULL, "tie_word_embeddings", NULL);
    cfg_ok(NULL, "tie_word_embeddings", &c2);
    /* attention_bias: present and boolean */
    cfg_bad(NULL, "attention_bias", "attention_bias", "absent");
    cfg_bad("{\"attention_bias\": \"true\"}", NULL, "attention_bias", NULL);
    cfg_bad("{\"attention_bias\": 1}", NULL, "attention_bias", NULL);
    /* mlp_bias: absent = false, must equal attention_bias */
    cfg_bad(NULL, "mlp_bias", "mlp_bias", "attention_bias");
    cfg_bad("{\"mlp_bias\": false}", NULL, "mlp_bias", "attention_bias");
    cfg_bad("{\"attention_bias\": false}", NULL, "mlp_bias", "attention_bias");
    cfg_bad("{\"mlp_bias\": 1}", NULL, "mlp_bias", NULL);
    cfg_ok("{\"attention_bias\": false}", "mlp_bias", &c2);
    CHECK(!c2.attn_bias && !c2.mlp_bias);
    cfg_ok("{\"attention_bias\": false, \"mlp_bias\": false}", NULL, &c2);
    CHECK(!c2.attn_bias && !c2.mlp_bias);
    /* pretraining_tp: absent or 1 */
    cfg_bad("{\"pretraining_tp\": 2}", NULL, "pretraining_tp", "2");
    cfg_bad("{\"pretraining_tp\": null}", NULL, "pretraining_tp", NULL);
    cfg_bad("{\"pretraining_tp\": \"1\"}", NULL, "pretraining_tp", NULL);
    cfg_ok(NULL, "pretraining_tp", &c2);
    /* rope_scaling: absent or null */
    cfg_bad("{\"rope_scaling\": {\"type\": \"linear\", \"factor\": 2.0}}", NULL, "rope_scaling", "linear");
    cfg_bad("{\"rope_scaling\": false}", NULL, "rope_scaling", NULL);
    cfg_ok(NULL, "rope_scaling", &c2);
    /* rope_parameters */
    cfg_bad(NULL, "rope_parameters", "rope_parameters must be an object", "absent");
    cfg_bad("{\"rope_parameters\": 1000000}", NULL, "rope_parameters must be an object", NULL);
    cfg_bad("{\"rope_parameters.rope_type\": \"llama3\"}", NULL, "rope_parameters.rope_type", "llama3");
    cfg_bad("{\"rope_parameters.rope_type\": \"yarn\"}", NULL, "rope_parameters.rope_type", "yarn");
    cfg_bad(NULL, "rope_parameters.rope_theta", "rope_parameters.rope_theta", "absent");
    cfg_bad("{\"rope_parameters.rope_theta\": 0}", NULL, "rope_parameters.rope_theta", "> 0");
    cfg_bad("{\"rope_parameters.rope_theta\": -10000.0}", NULL, "rope_parameters.rope_theta", "-10000");
    cfg_bad("{\"rope_parameters.rope_theta\": \"1e6\"}", NULL, "rope_parameters.rope_theta", NULL);
    cfg_ok(NULL, "rope_parameters.rope_type", &c2);
    CHECK(c2.rope_theta == 1000000.0);

    /* the eight dimensions: present, positive integers, fit in int */
    static const char *ints[] = { "num_hidden_layers", "hidden_size", "intermediate_size",
                                  "num_attention_heads", "num_key_value_heads", "head_dim",
                                  "vocab_size", "max_position_embeddings" };
    static const char *bad_vals[] = { "0", "-4", "1.5", "2.0", "\"3\"", "true", "null", "3000000000",
                                      "9223372036854775807", "[3]" };
    for (size_t i = 0; i < sizeof ints / sizeof ints[0]; i++) {
        char mods[128];
        cfg_bad(NULL, ints[i], ints[i], "absent");
        for (size_t j = 0; j < sizeof bad_vals / sizeof bad_vals[0]; j++) {
            snprintf(mods, sizeof mods, "{\"%s\": %s}", ints[i], bad_vals[j]);
            cfg_bad(mods, NULL, ints[i], "positive integer");
        }
    }
    /* rms_norm_eps: a number > 0 */
    cfg_bad(NULL, "rms_norm_eps", "rms_norm_eps", "absent");
    cfg_bad("{\"rms_norm_eps\": 0}", NULL, "rms_norm_eps", "> 0");
    cfg_bad("{\"rms_norm_eps\": -1e-6}", NULL, "rms_norm_eps", NULL);
    cfg_bad("{\"rms_norm_eps\": \"1e-6\"}", NULL, "rms_norm_eps", NULL);
    cfg_ok("{\"rms_norm_eps\": 1}", NULL, &c2);
    CHECK(c2.rms_eps == 1.0);
    /* invariants */
    cfg_bad("{\"head_dim\": 8}", NULL, "num_attention_heads * head_dim must equal hidden_size", "4 * 8 = 32");
    cfg_bad("{\"num_key_value_heads\": 3}", NULL, "multiple of num_key_value_heads", "(3)");
    cfg_bad("{\"num_key_value_heads\": 8}", NULL, "multiple of num_key_value_heads", NULL);
    cfg_bad("{\"head_dim\": 15, \"hidden_size\": 60}", NULL, "head_dim must be even", "15");
    cfg_ok("{\"num_key_value_heads\": 4}", NULL, &c2);
    cfg_ok("{\"num_key_value_heads\": 1}", NULL, &c2);
    cfg_ok("{\"num_attention_heads\": 1, \"num_key_value_heads\": 1, \"head_dim\": 64}", NULL, &c2);
    /* Nh * hd must not wrap around in int arithmetic */
    cfg_bad("{\"num_attention_heads\": 65536, \"num_key_value_heads\": 1, \"head_dim\": 65536, \"hidden_size\": 64}",
            NULL, "hidden_size", "4294967296");
    /* unknown keys ignored */
    cfg_ok("{\"use_cache\": true, \"foo\": [1, {\"x\": null}]}", NULL, &c2);

    /* malformed files */
    static const struct { const char *text, *needle; } bad_files[] = {
        { "", "not valid JSON" },
        { "{\"model_type\": \"llama\"", "not valid JSON" },
        { "[1, 2]", "must be a JSON object" },
        { "\"llama\"", "must be a JSON object" },
        { "{\"model_type\": \"llama\", \"model_type\": \"llama\"}", "duplicate key" },
    };
    for (size_t i = 0; i < sizeof bad_files / sizeof bad_files[0]; i++) {
        memset(&e, 0, sizeof e);
        int rc = bs_config_parse(&c2, bad_files[i].text, strlen(bad_files[i].text), "y/config.json", &e);
        CHECK(rc < 0);
        CHECK_CONTAINS(e.msg, "y/config.json: ");
        CHECK_CONTAINS(e.msg, bad_files[i].needle);
    }

    /* bs_config_load: reads <dir>/config.json */
    const char *d = mkcase("cfg");
    write_bytes(tpath("cfg/config.json"), BASE_CFG, strlen(BASE_CFG));
    memset(&e, 0, sizeof e);
    CHECK_INT(bs_config_load(&c2, d, &e), 0);
    CHECK(memcmp(&c, &c2, sizeof c) == 0);
    const char *d2 = mkcase("cfg_missing");
    memset(&e, 0, sizeof e);
    CHECK_INT(bs_config_load(&c2, d2, &e), BS_EIO);
    CHECK_CONTAINS(e.msg, "cfg_missing/config.json");
    const char *hd = "{\"model_type\":\"mistral\"}";
    write_bytes(tpath("cfg_missing/config.json"), hd, strlen(hd));
    memset(&e, 0, sizeof e);
    CHECK(bs_config_load(&c2, d2, &e) < 0);
    CHECK_CONTAINS(e.msg, "cfg_missing/config.json: model_type must be \"llama\", got \"mistral\"");
}

/* ---- single-file format checks (S1-S3) ---------------------------------- */

static void test_format(void) {
    char h[512];
    /* File too short for the length prefix, and N past the end of the file. */
    write_bytes(tpath("empty.safetensors"), "", 0);
    expect_file_err(tpath("empty.safetensors"), "truncated header", NULL);
    write_bytes(tpath("short.safetensors"), "\x10\0\0\0", 4);
    expect_file_err(tpath("short.safetensors"), "truncated header", NULL);
    write_raw_n(tpath("trunc.safetensors"), 100, "{\"a\":{\"dtype\":\"F32\",\"sh", 0);
    expect_file_err(tpath("trunc.safetensors"), "truncated header", "N = 100");
    /* N too large: the limit, then a value that would overflow 8 + N. */
    write_raw_n(tpath("big.safetensors"), 100000001, "{}", 0);
    expect_file_err(tpath("big.safetensors"), "too large", "100000001");
    write_raw_n(tpath("huge.safetensors"), UINT64_MAX - 3, "{}", 0);
    expect_file_err(tpath("huge.safetensors"), "too large", NULL);
    /* N exactly at the limit but past the end of a small file. */
    write_raw_n(tpath("limit.safetensors"), 100000000, "{}", 0);
    expect_file_err(tpath("limit.safetensors"), "runs past the end of the file", NULL);

    /* header syntax and type */
    expect_hdr_err("not json", 0, "header is not valid JSON", NULL);
    expect_hdr_err("{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]}", 4, "not valid JSON", NULL);
    expect_hdr_err("[{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]}]", 4, "header must be a JSON object",
                   NULL);
    expect_hdr_err("\"x\"", 0, "header must be a JSON object", NULL);
    expect_hdr_err("{}\x01", 0, "not valid JSON", NULL);
    expect_hdr_err("{}\xff", 0, "not valid JSON", NULL);

    /* a valid minimal file: empty header and padding spaces */
    write_raw(tpath("emptyhdr.safetensors"), "{}      ", 0);
    bs_weights w;
    bs_err e = {0};
    CHECK_INT(bs_weights_open_file(&w, tpath("emptyhdr.safetensors"), &e), 0);
    CHECK_INT(w.n_tensors, 0);
    CHECK(bs_weights_get(&w, "a") == NULL);
    bs_weights_close(&w);

    /* __metadata__ ignored when strings, refused otherwise */
    write_raw(tpath("meta.safetensors"),
              "{\"__metadata__\":{\"format\":\"pt\",\"x\":\"y\"},\"a\":{\"dtype\":\"F32\",\"shape\":[],"
              "\"data_offsets\":[0,4]}}                ",
              4);
    CHECK_INT(bs_weights_open_file(&w, tpath("meta.safetensors"), &e), 0);
    CHECK_INT(w.n_tensors, 1);
    if (w.n_tensors == 1) {
        CHECK_INT(w.tensors[0].ndim, 0);
        CHECK_INT(w.tensors[0].numel, 1);
        /* bytes 00 01 02 03 little-endian */
        CHECK_BITS(bs_tensor_get_f32(&w.tensors[0], 0), (union { uint32_t u; float f; }){ 0x03020100u }.f);
        CHECK(isnan(bs_tensor_get_f32(&w.tensors[0], 1)));
        CHECK(isnan(bs_tensor_get_f32(&w.tensors[0], -1)));
    }
    bs_weights_close(&w);
    expect_hdr_err("{\"__metadata__\":{\"format\":1}}", 0, "__metadata__", NULL);
    expect_hdr_err("{\"__metadata__\":[\"pt\"]}", 0, "__metadata__", NULL);

    /* entry keys and types */
    expect_hdr_err("{\"a\":{\"dtype\":\"F32\",\"shape\":[1]}}", 4, "\"a\"", "exactly the keys");
    expect_hdr_err("{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4],\"x\":1}}", 4, "exactly the keys",
                   NULL);
    expect_hdr_err("{\"a\":[1]}", 0, "\"a\"", "must be an object");
    expect_hdr_err("{\"a\":{\"dtype\":32,\"shape\":[1],\"data_offsets\":[0,4]}}", 4, "dtype must be a string", NULL);
    expect_hdr_err("{\"a\":{\"dtype\":\"F32\",\"shape\":1,\"data_offsets\":[0,4]}}", 4, "shape must be an array", NULL);
    expect_hdr_err("{\"a\":{\"dtype\":\"F32\",\"shape\":[1.0],\"data_offsets\":[0,4]}}", 4, "non-negative integers",
                   NULL);
    expect_hdr_err("{\"a\":{\"dtype\":\"F32\",\"shape\":[\"1\"],\"data_offsets\":[0,4]}}", 4, "non-negative integers",
                   NULL);
    expect_hdr_err("{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4,4]}}", 4, "data_offsets", NULL);
    expect_hdr_err("{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":{\"b\":0}}}", 4, "data_offsets", NULL);
    expect_hdr_err("{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[-4,0]}}", 4, "data_offsets", NULL);
    /* shape with negative numbers */
    expect_hdr_err("{\"a\":{\"dtype\":\"F32\",\"shape\":[-1,-4],\"data_offsets\":[0,16]}}", 16, "non-negative integers",
                   "[-1,-4]");
    /* too many dimensions */
    expect_hdr_err("{\"a\":{\"dtype\":\"F32\",\"shape\":[1,1,1,1,1,1,1,1,1],\"data_offsets\":[0,4]}}", 4, "9 dimensions",
                   NULL);
    /* dtypes */
    expect_hdr_err("{\"a\":{\"dtype\":\"F64\",\"shape\":[1],\"data_offsets\":[0,8]}}", 8, "dtype F64 not supported",
                   NULL);
    expect_hdr_err("{\"a\":{\"dtype\":\"I8\",\"shape\":[4],\"data_offsets\":[0,4]}}", 4, "dtype I8 not supported", NULL);
    expect_hdr_err("{\"a\":{\"dtype\":\"F8_E4M3\",\"shape\":[4],\"data_offsets\":[0,4]}}", 4,
                   "dtype F8_E4M3 not supported", NULL);
    expect_hdr_err("{\"a\":{\"dtype\":\"bf16\",\"shape\":[2],\"data_offsets\":[0,4]}}", 4, "dtype bf16 not supported",
                   NULL);
    /* wrong byte length */
    expect_hdr_err("{\"a\":{\"dtype\":\"F32\",\"shape\":[3],\"data_offsets\":[0,8]}}", 8, "wrong byte length",
                   "needs 12");
    expect_hdr_err("{\"a\":{\"dtype\":\"BF16\",\"shape\":[2,2],\"data_offsets\":[0,16]}}", 16, "wrong byte length",
                   "hold 16 bytes");
    /* data_offsets reversed, past the buffer */
    expect_hdr_err("{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[8,0]}}", 8, "reversed", "[8, 0]");
    expect_hdr_err("{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}}", 4, "past the end of the data",
                   NULL);
    /* hostile shapes: 64-bit products must not wrap */
    expect_hdr_err("{\"a\":{\"dtype\":\"F32\",\"shape\":[4611686018427387904,4],\"data_offsets\":[0,16]}}", 16,
                   "too many elements", NULL);
    expect_hdr_err("{\"a\":{\"dtype\":\"F32\",\"shape\":[2147483648,2147483648,2147483648],\"data_offsets\":[0,4]}}", 4,
                   "too many elements", NULL);
    expect_hdr_err("{\"a\":{\"dtype\":\"F32\",\"shape\":[4611686018427387904],\"data_offsets\":[0,16]}}", 16,
                   "too many elements", NULL);
    expect_hdr_err("{\"a\":{\"dtype\":\"BF16\",\"shape\":[2305843009213693952,2],\"data_offsets\":[0,16]}}", 16,
                   "wrong byte length", NULL);
    expect_hdr_err("{\"a\":{\"dtype\":\"F32\",\"shape\":[18446744073709551616],\"data_offsets\":[0,4]}}", 4,
                   "not valid JSON", NULL);
    /* duplicate name */
    expect_hdr_err("{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]},"
                   "\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[4,8]}}",
                   8, "duplicate tensor name", "\"a\"");

    /* contiguity: gap, leading gap, trailing bytes, overlap, duplicate range */
    expect_hdr_err("{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]},"
                   "\"b\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[8,12]}}",
                   12, "not contiguous", "gap");
    expect_hdr_err("{\"b\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[4,8]}}", 8, "not contiguous",
                   "begins at byte 4");
    expect_hdr_err("{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]}}", 6, "not contiguous",
                   "6 bytes");
    expect_hdr_err("{}", 4, "not contiguous", NULL);
    expect_hdr_err("{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]},"
                   "\"b\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[4,12]}}",
                   12, "overlap", "\"a\"");
    expect_hdr_err("{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]},"
                   "\"b\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]}}",
                   4, "overlap", NULL);

    /* Valid: header order differs from offset order, a zero-sized tensor,
     * data at an unpadded (odd) file offset. */
    snprintf(h, sizeof h,
             "{\"z\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]},"
             "\"e\":{\"dtype\":\"F16\",\"shape\":[0,3],\"data_offsets\":[4,4]},"
             "\"m\":{\"dtype\":\"BF16\",\"shape\":[2],\"data_offsets\":[4,8]}}");
    write_raw(tpath("order.safetensors"), h, 8);
    memset(&e, 0, sizeof e);
    CHECK_INT(bs_weights_open_file(&w, tpath("order.safetensors"), &e), 0);
    CHECK_INT(w.n_tensors, 3);
    if (w.n_tensors == 3) {
        CHECK_STR(w.tensors[0].name, "e");
        CHECK_STR(w.tensors[1].name, "m");
        CHECK_STR(w.tensors[2].name, "z");
        CHECK_INT(w.tensors[0].numel, 0);
        const bs_tensor *m = bs_weights_get(&w, "m");
        /* data bytes 0..7; "m" holds bytes 4 5 | 6 7 -> bf16 0x0504, 0x0706 */
        CHECK_BITS(bs_tensor_get_f32(m, 0), (union { uint32_t u; float f; }){ 0x05040000u }.f);
        CHECK_BITS(bs_tensor_get_f32(m, 1), (union { uint32_t u; float f; }){ 0x07060000u }.f);
    }
    bs_weights_close(&w);

    /* Widening: hand-derived bit patterns for F16 (normal, negative,
     * subnormal, max, inf) and BF16. */
    {
        static const unsigned char f16[] = { 0x00, 0x3c, 0x00, 0xc0, 0x01, 0x00, 0xff, 0x7b, 0x00, 0x7c, 0x00, 0x80 };
        static const unsigned char b16[] = { 0x80, 0x3f, 0x40, 0xc0, 0x49, 0x40 };
        const char *hdr = "{\"h\":{\"dtype\":\"F16\",\"shape\":[6],\"data_offsets\":[0,12]},"
                          "\"b\":{\"dtype\":\"BF16\",\"shape\":[3],\"data_offsets\":[12,18]}}";
        size_t hl = strlen(hdr);
        unsigned char buf[8 + 256 + 18];
        put_le64(buf, hl);
        memcpy(buf + 8, hdr, hl);
        memcpy(buf + 8 + hl, f16, 12);
        memcpy(buf + 8 + hl + 12, b16, 6);
        write_bytes(tpath("widen.safetensors"), buf, 8 + hl + 18);
        CHECK_INT(bs_weights_open_file(&w, tpath("widen.safetensors"), &e), 0);
        const bs_tensor *th = bs_weights_get(&w, "h"), *tb = bs_weights_get(&w, "b");
        CHECK(th && tb);
        if (th && tb) {
            float out[6];
            bs_tensor_read_f32(th, 0, 6, out);
            CHECK_BITS(out[0], 1.0f);
            CHECK_BITS(out[1], -2.0f);
            CHECK_BITS(out[2], ldexpf(1.0f, -24));
            CHECK_BITS(out[3], 65504.0f);
            CHECK(isinf(out[4]) && out[4] > 0);
            CHECK_BITS(out[5], -0.0f);
            bs_tensor_read_f32(tb, 1, 2, out);
            CHECK_BITS(out[0], -3.0f);
            CHECK_BITS(out[1], 3.140625f);
            CHECK_BITS(bs_tensor_get_f32(tb, 0), 1.0f);
        }
        bs_weights_close(&w);
    }

    /* not a file */
    expect_file_err(tpath("no_such.safetensors"), "No such file", NULL);
    mkcase("dir.safetensors");
    expect_file_err(tpath("dir.safetensors"), "not a regular file", NULL);
}

/* ---- Llama tensor set (§4.3) -------------------------------------------- */

static void expect_llama_err(const tlist *l, const bs_config *c, const char *n1, const char *n2, const char *n3) {
    static int k;
    char name[32];
    snprintf(name, sizeof name, "llama%03d.safetensors", k++);
    const char *p = tpath(name);
    write_st(p, l);
    bs_weights w;
    bs_err e = {0};
    int rc = bs_weights_open_file(&w, p, &e);
    CHECK_INT(rc, 0);
    if (rc) {
        fprintf(stderr, "  (%s)\n", e.msg);
        return;
    }
    rc = bs_weights_check_llama(&w, c, &e);
    CHECK(rc < 0);
    CHECK_INT(e.code, rc);
    CHECK_CONTAINS(e.msg, p);
    if (n1) CHECK_CONTAINS(e.msg, n1);
    if (n2) CHECK_CONTAINS(e.msg, n2);
    if (n3) CHECK_CONTAINS(e.msg, n3);
    bs_weights_close(&w);
}

static void test_llama_set(void) {
    tlist *l = calloc(1, sizeof *l);
    bs_weights w;
    bs_err e = {0};
    for (int bias = 0; bias <= 1; bias++) {
        bs_config c = tiny_cfg(bias);
        tiny_tensors(l, bias, bias);
        CHECK_INT(l->n, 3 + 2 * (bias ? 16 : 9));
        const char *p = tpath(bias ? "tiny_bias.safetensors" : "tiny_nobias.safetensors");
        write_st(p, l);
        CHECK_INT(bs_weights_open_file(&w, p, &e), 0);
        CHECK_INT(bs_weights_check_llama(&w, &c, &e), 0);
        check_contents(&w, l);
        CHECK_INT(w.n_files, 1);
        /* the other bias setting is refused in both directions */
        bs_config other = tiny_cfg(!bias);
        CHECK(bs_weights_check_llama(&w, &other, &e) < 0);
        if (bias) {
            CHECK_CONTAINS(e.msg, "is present but config.json sets");
        } else {
            CHECK_CONTAINS(e.msg, "missing tensors");
            CHECK_CONTAINS(e.msg, "model.layers.0.self_attn.q_proj.bias");
            CHECK_CONTAINS(e.msg, "biases are required");
        }
        /* a config with more layers: the missing tensors are named */
        bs_config more = c;
        more.n_layers = 3;
        CHECK(bs_weights_check_llama(&w, &more, &e) < 0);
        CHECK_CONTAINS(e.msg, "missing tensors: model.layers.2.input_layernorm.weight");
        /* a hostile layer count must neither hang nor overflow */
        more.n_layers = 2147483647;
        CHECK(bs_weights_check_llama(&w, &more, &e) < 0);
        CHECK_CONTAINS(e.msg, "missing tensors: model.layers.2.");
        CHECK_CONTAINS(e.msg, "more)");
        bs_weights_close(&w);
    }

    bs_config nb = tiny_cfg(false), wb = tiny_cfg(true);
    /* missing tensor */
    tiny_tensors(l, false, false);
    tl_del(l, "model.layers.1.mlp.up_proj.weight");
    expect_llama_err(l, &nb, "missing tensor: model.layers.1.mlp.up_proj.weight", NULL, NULL);
    tiny_tensors(l, false, false);
    tl_del(l, "lm_head.weight");
    expect_llama_err(l, &nb, "missing tensor: lm_head.weight", NULL, NULL);
    /* extra tensors */
    tiny_tensors(l, false, false);
    tl_add(l, "model.layers.0.self_attn.rotary_emb.inv_freq", "F32", 1, 2, 0);
    expect_llama_err(l, &nb, "checkpoint has tensors this runtime does not implement",
                     "model.layers.0.self_attn.rotary_emb.inv_freq", NULL);
    tiny_tensors(l, false, false);
    tl_add(l, "model.layers.2.input_layernorm.weight", "F32", 1, 8, 0);
    tl_add(l, "model.layers.01.input_layernorm.weight", "F32", 1, 8, 0);
    tl_add(l, "model.layers.-1.input_layernorm.weight", "F32", 1, 8, 0);
    tl_add(l, "model.layers.99999999999999999999.input_layernorm.weight", "F32", 1, 8, 0);
    tl_add(l, "lm_head.bias", "F32", 1, 10, 0);
    tl_add(l, "model.layers.0.input_layernorm.weightx", "F32", 1, 8, 0);
    expect_llama_err(l, &nb, "does not implement: ", "model.layers.2.input_layernorm.weight",
                     "model.layers.01.input_layernorm.weight");
    /* wrong shapes: name, got and expected */
    tiny_tensors(l, false, false);
    l->t[tl_find(l, "model.norm.weight")].shape[0] = 9;
    expect_llama_err(l, &nb, "tensor model.norm.weight has wrong shape [9], expected [8]", NULL, NULL);
    tiny_tensors(l, false, false);
    l->t[tl_find(l, "model.layers.1.self_attn.k_proj.weight")].shape[0] = 8;
    expect_llama_err(l, &nb, "model.layers.1.self_attn.k_proj.weight", "[8, 8]", "expected [4, 8]");
    tiny_tensors(l, false, false);
    {
        tdesc *t = &l->t[tl_find(l, "model.layers.0.mlp.down_proj.weight")];
        t->shape[0] = 12;
        t->shape[1] = 8; /* transposed */
    }
    expect_llama_err(l, &nb, "model.layers.0.mlp.down_proj.weight", "[12, 8]", "expected [8, 12]");
    tiny_tensors(l, false, false);
    {
        tdesc *t = &l->t[tl_find(l, "model.layers.0.input_layernorm.weight")];
        t->ndim = 2;
        t->shape[1] = 1;
    }
    expect_llama_err(l, &nb, "model.layers.0.input_layernorm.weight", "[8, 1]", "expected [8]");
    /* bias present against the flags */
    tiny_tensors(l, false, false);
    tl_add(l, "model.layers.1.self_attn.o_proj.bias", "F32", 1, 8, 0);
    expect_llama_err(l, &nb, "model.layers.1.self_attn.o_proj.bias is present", "attention_bias false", NULL);
    tiny_tensors(l, false, false);
    tl_add(l, "model.layers.0.mlp.down_proj.bias", "F32", 1, 8, 0);
    expect_llama_err(l, &nb, "model.layers.0.mlp.down_proj.bias is present", "mlp_bias false", NULL);
    /* bias absent against the flags */
    tiny_tensors(l, true, true);
    tl_del(l, "model.layers.1.mlp.gate_proj.bias");
    expect_llama_err(l, &wb, "missing tensor: model.layers.1.mlp.gate_proj.bias", "biases are required", NULL);
    tiny_tensors(l, true, true);
    l->t[tl_find(l, "model.layers.0.self_attn.k_proj.bias")].shape[0] = 8;
    expect_llama_err(l, &wb, "model.layers.0.self_attn.k_proj.bias", "[8]", "expected [4]");
    free(l);
}

/* ---- sharded checkpoints (S5-S7) ---------------------------------------- */

static const char *SH1 = "model-00001-of-00002.safetensors";
static const char *SH2 = "model-00002-of-00002.safetensors";

static void idx_add(bs_buf *b, const tlist *l, const char *shard, const char *skip) {
    for (int i = 0; i < l->n; i++) {
        if (skip && strcmp(l->t[i].name, skip) == 0) continue;
        bs_buf_printf(b, "%s\"%s\":\"%s\"", b->len > 1 ? "," : "", l->t[i].name, shard);
    }
}

/* Writes shards A and B and an index listing A's tensors with SH1 and B's with
 * SH2 (except `skip`), plus `extra` raw entries. */
static void write_sharded(const char *dir, const tlist *a, const tlist *b, const char *skip, const char *extra) {
    char p[600];
    snprintf(p, sizeof p, "%s/%s", dir, SH1);
    write_st(p, a);
    snprintf(p, sizeof p, "%s/%s", dir, SH2);
    write_st(p, b);
    bs_buf ix;
    bs_buf_init(&ix);
    bs_buf_puts(&ix, "{");
    idx_add(&ix, a, SH1, skip);
    idx_add(&ix, b, SH2, skip);
    if (extra) bs_buf_printf(&ix, "%s%s", ix.len > 1 ? "," : "", extra);
    bs_buf_puts(&ix, "}");
    char *text = bs_strfmt("{\"metadata\":{\"total_size\":123},\"weight_map\":%s}", ix.data);
    snprintf(p, sizeof p, "%s/model.safetensors.index.json", dir);
    write_bytes(p, text, strlen(text));
    free(text);
    bs_buf_free(&ix);
}

static void split(const tlist *all, tlist *a, tlist *b) {
    a->n = b->n = 0;
    for (int i = 0; i < all->n; i++) (i % 2 ? b : a)->t[(i % 2 ? b : a)->n++] = all->t[i];
}

static void test_sharded(void) {
    tlist *all = calloc(1, sizeof *all), *a = calloc(1, sizeof *a), *b = calloc(1, sizeof *b);
    bs_config c = tiny_cfg(true);
    bs_weights ws, wsh;
    bs_err e = {0};
    char p[600];

    /* Single file and sharded pair of the same tensors: identical data. */
    tiny_tensors(all, true, true);
    const char *ds = mkcase("single");
    snprintf(p, sizeof p, "%s/model.safetensors", ds);
    write_st(p, all);
    const char *dsh = mkcase("sharded");
    split(all, a, b);
    write_sharded(dsh, a, b, NULL, NULL);
    CHECK_INT(bs_weights_open(&ws, ds, &e), 0);
    CHECK_INT(bs_weights_open(&wsh, dsh, &e), 0);
    if (e.msg[0]) fprintf(stderr, "  (%s)\n", e.msg);
    CHECK_INT(ws.n_files, 1);
    CHECK_INT(wsh.n_files, 2);
    CHECK_INT(bs_weights_check_llama(&ws, &c, &e), 0);
    CHECK_INT(bs_weights_check_llama(&wsh, &c, &e), 0);
    check_contents(&ws, all);
    check_contents(&wsh, all);
    CHECK_INT(ws.n_tensors, wsh.n_tensors);
    int same = ws.n_tensors == wsh.n_tensors;
    for (int i = 0; same && i < ws.n_tensors; i++) {
        const bs_tensor *x = &ws.tensors[i], *y = &wsh.tensors[i];
        same = strcmp(x->name, y->name) == 0 && x->dtype == y->dtype && x->nbytes == y->nbytes &&
               memcmp(x->data, y->data, x->nbytes) == 0 && memcmp(x->shape, y->shape, sizeof x->shape) == 0;
    }
    CHECK(same);
    /* tensors know their shard */
    const bs_tensor *t1 = bs_weights_get(&wsh, a->t[0].name), *t2 = bs_weights_get(&wsh, b->t[0].name);
    CHECK(t1 && t2 && t1->file != t2->file);
    if (t1 && t2) {
        CHECK(strstr(wsh.files[t1->file].path, SH1) != NULL);
        CHECK(strstr(wsh.files[t2->file].path, SH2) != NULL);
    }
    bs_weights_close(&ws);
    bs_weights_close(&wsh);

    /* missing shard */
    const char *d = mkcase("sh_missing");
    write_sharded(d, a, b, NULL, "\"extra.weight\":\"model-00003-of-00003.safetensors\"");
    expect_dir_err(d, "missing shard", "model-00003-of-00003.safetensors");
    /* tensor in the wrong shard */
    d = mkcase("sh_wrong");
    {
        char *extra = bs_strfmt("\"%s\":\"%s\"", b->t[0].name, SH1);
        write_sharded(d, a, b, b->t[0].name, extra);
        free(extra);
    }
    expect_dir_err(d, "wrong shard", b->t[0].name);
    /* tensor in two shards */
    d = mkcase("sh_two");
    {
        tlist *b2 = calloc(1, sizeof *b2);
        *b2 = *b;
        b2->t[b2->n++] = a->t[1];
        char *extra = bs_strfmt("\"%s\":\"%s\"", a->t[1].name, SH1);
        write_sharded(d, a, b2, a->t[1].name, extra);
        free(extra);
        free(b2);
    }
    expect_dir_err(d, "is in two shards", a->t[1].name);
    /* tensor of a shard not listed in weight_map */
    d = mkcase("sh_unlisted");
    write_sharded(d, a, b, a->t[2].name, NULL);
    expect_dir_err(d, "not listed in weight_map", a->t[2].name);
    /* weight_map entry absent from its shard */
    d = mkcase("sh_absent");
    write_sharded(d, a, b, NULL, "\"model.ghost.weight\":\"model-00002-of-00002.safetensors\"");
    expect_dir_err(d, "model.ghost.weight", "does not have it");
    /* shard names must stay inside the directory */
    d = mkcase("sh_dotdot");
    write_sharded(d, a, b, NULL, "\"x.weight\":\"../model.safetensors\"");
    expect_dir_err(d, "../model.safetensors", "plain file name");
    d = mkcase("sh_dotdot2");
    write_sharded(d, a, b, NULL, "\"x.weight\":\"..\"");
    expect_dir_err(d, "plain file name", NULL);
    d = mkcase("sh_slash");
    write_sharded(d, a, b, NULL, "\"x.weight\":\"sub/x.safetensors\"");
    expect_dir_err(d, "sub/x.safetensors", "plain file name");
    d = mkcase("sh_abs");
    write_sharded(d, a, b, NULL, "\"x.weight\":\"/etc/passwd\"");
    expect_dir_err(d, "plain file name", NULL);
    d = mkcase("sh_empty_name");
    write_sharded(d, a, b, NULL, "\"x.weight\":\"\"");
    expect_dir_err(d, "plain file name", NULL);
    /* an invalid shard is reported with its path */
    d = mkcase("sh_badshard");
    write_sharded(d, a, b, NULL, NULL);
    snprintf(p, sizeof p, "%s/%s", d, SH2);
    write_raw(p, "{\"x\":{\"dtype\":\"F64\",\"shape\":[1],\"data_offsets\":[0,8]}}", 8);
    expect_dir_err(d, SH2, "dtype F64 not supported");
    /* malformed index files */
    static const struct { const char *text, *needle; } bad_idx[] = {
        { "{\"weight_map\":", "not valid JSON" },
        { "[]", "weight_map" },
        { "{\"metadata\":{}}", "weight_map" },
        { "{\"weight_map\":[]}", "weight_map" },
        { "{\"weight_map\":{}}", "weight_map is empty" },
        { "{\"weight_map\":{\"a\":1}}", "must be a shard file name" },
        { "{\"weight_map\":{\"a\":\"x\"},\"metadata\":3}", "metadata must be an object" },
        { "{\"weight_map\":{\"a\":\"x\",\"a\":\"x\"}}", "duplicate key" },
    };
    for (size_t i = 0; i < sizeof bad_idx / sizeof bad_idx[0]; i++) {
        char nm[32];
        snprintf(nm, sizeof nm, "idx%zu", i);
        d = mkcase(nm);
        snprintf(p, sizeof p, "%s/model.safetensors.index.json", d);
        write_bytes(p, bad_idx[i].text, strlen(bad_idx[i].text));
        expect_dir_err(d, "model.safetensors.index.json", bad_idx[i].needle);
    }
    /* both single file and index: ambiguous; neither: no weights */
    d = mkcase("both");
    write_sharded(d, a, b, NULL, NULL);
    snprintf(p, sizeof p, "%s/model.safetensors", d);
    write_st(p, all);
    expect_dir_err(d, "ambiguous", NULL);
    d = mkcase("nothing");
    expect_dir_err(d, "no weights", NULL);
    /* only the shards, no index: still no weights */
    d = mkcase("shards_only");
    snprintf(p, sizeof p, "%s/%s", d, SH1);
    write_st(p, a);
    expect_dir_err(d, "no weights", NULL);
    expect_dir_err(tpath("does_not_exist"), "no weights", NULL);

    free(all);
    free(a);
    free(b);
}

int main(void) {
    snprintf(g_root, sizeof g_root, "/tmp/bs_loader_XXXXXX");
    if (!mkdtemp(g_root)) {
        perror("mkdtemp");
        return 2;
    }
    test_config();
    test_format();
    test_llama_set();
    test_sharded();
    nftw(g_root, rm_cb, 16, FTW_DEPTH | FTW_PHYS);
    return check_report("test_loader");
}
