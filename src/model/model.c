#include "model/model.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/log.h"
#include "base/progress.h"
#include "base/util.h"
#include "model/quant_cache.h"
#include "model/smooth.h"

static int widen_vec(const bs_weights *w, const char *name, int64_t n, float **out, bs_err *e) {
    *out = NULL;
    const bs_tensor *t = bs_weights_get(w, name);
    if (!t) return bs_fail(e, BS_EFORMAT, "model.safetensors: missing tensor %s", name);
    if (t->numel != n)
        return bs_fail(e, BS_EFORMAT, "model.safetensors: %s has %lld elements, expected %lld", name,
                       (long long)t->numel, (long long)n);
    float *v = malloc((size_t)n * sizeof *v);
    if (!v) return bs_fail(e, BS_ENOMEM, "out of memory widening %s", name);
    bs_tensor_read_f32(t, 0, n, v);
    *out = v;
    return BS_OK;
}

static int get_mat(const bs_weights *w, const char *name, bs_wmat *out, bs_err *e) {
    const bs_tensor *t = bs_weights_get(w, name);
    if (!t || t->ndim != 2) return bs_fail(e, BS_EFORMAT, "model.safetensors: missing matrix %s", name);
    out->dtype = t->dtype;
    out->data = t->data;
    out->n = (int)t->shape[0];
    out->k = (int)t->shape[1];
    return BS_OK;
}

static size_t mat_bytes(const bs_wmat *w) { return (size_t)w->n * (size_t)w->k * bs_dtype_size(w->dtype); }

static int load_layer(bs_model *m, int l, bs_err *e) {
    const bs_config *c = &m->cfg;
    bs_layer *ly = &m->layers[l];
    char name[128];
    int rc;
#define MAT(field, suffix) \
    snprintf(name, sizeof name, "model.layers.%d.%s.weight", l, suffix); \
    if ((rc = get_mat(&m->weights, name, &ly->field, e)) < 0) return rc;
#define VEC(field, suffix, kind, n) \
    snprintf(name, sizeof name, "model.layers.%d.%s." kind, l, suffix); \
    if ((rc = widen_vec(&m->weights, name, (n), &ly->field, e)) < 0) return rc;
    int qd = c->n_heads * c->head_dim, kvd = c->n_kv_heads * c->head_dim;
    MAT(wq, "self_attn.q_proj") MAT(wk, "self_attn.k_proj") MAT(wv, "self_attn.v_proj")
    MAT(wo, "self_attn.o_proj") MAT(wg, "mlp.gate_proj") MAT(wu, "mlp.up_proj") MAT(wd, "mlp.down_proj")
    VEC(ln1, "input_layernorm", "weight", c->hidden)
    VEC(ln2, "post_attention_layernorm", "weight", c->hidden)
    if (c->attn_bias) {
        VEC(bq, "self_attn.q_proj", "bias", qd) VEC(bk, "self_attn.k_proj", "bias", kvd)
        VEC(bv, "self_attn.v_proj", "bias", kvd) VEC(bo, "self_attn.o_proj", "bias", c->hidden)
    }
    if (c->mlp_bias) {
        VEC(bg, "mlp.gate_proj", "bias", c->inter) VEC(bu, "mlp.up_proj", "bias", c->inter)
        VEC(bd, "mlp.down_proj", "bias", c->hidden)
    }
#undef MAT
#undef VEC
    return BS_OK;
}

/* cos/sin for every position below Pmax: inv_freq and angles in f64 (spec 05
 * §7.3), rounded to f32 once. */
static int build_rope(bs_model *m, bs_err *e) {
    const bs_config *c = &m->cfg;
    int d = c->head_dim / 2;
    size_t n = (size_t)c->max_pos * (size_t)d;
    m->rope_cos = malloc(n * sizeof(float));
    m->rope_sin = malloc(n * sizeof(float));
    if (!m->rope_cos || !m->rope_sin)
        return bs_fail(e, BS_ENOMEM, "%s/config.json: max_position_embeddings %d: out of memory for its RoPE table "
                       "(%zu bytes)", m->dir ? m->dir : ".", c->max_pos, 2 * n * sizeof(float));
    for (int i = 0; i < d; i++) {
        double inv = 1.0 / pow(c->rope_theta, (2.0 * i) / (double)c->head_dim);
        for (int p = 0; p < c->max_pos; p++) {
            double a = (double)p * inv;
            m->rope_cos[(size_t)p * d + i] = (float)cos(a);
            m->rope_sin[(size_t)p * d + i] = (float)sin(a);
        }
    }
    return BS_OK;
}

int bs_model_load(bs_model *m, const char *dir, bs_pool *pool, bs_err *e) {
    memset(m, 0, sizeof *m);
    int rc;
    m->pool = pool;
    if (!(m->dir = strdup(dir))) return bs_fail(e, BS_ENOMEM, "out of memory");
    if ((rc = bs_config_load(&m->cfg, dir, e)) < 0) goto fail;
    if (m->cfg.decoy_rope_theta)
        bs_log(BS_LOG_WARN, "model", "%s/config.json: top-level rope_theta differs from rope_parameters.rope_theta "
               "(%g) and is ignored", dir, m->cfg.rope_theta);
    if ((rc = bs_weights_open(&m->weights, dir, e)) < 0) goto fail;
    if ((rc = bs_weights_check_llama(&m->weights, &m->cfg, e)) < 0) goto fail;
    m->layers = calloc((size_t)m->cfg.n_layers, sizeof *m->layers);
    if (!m->layers) { rc = bs_fail(e, BS_ENOMEM, "out of memory"); goto fail; }
    for (int l = 0; l < m->cfg.n_layers; l++)
        if ((rc = load_layer(m, l, e)) < 0) goto fail;
    m->embed = bs_weights_get(&m->weights, "model.embed_tokens.weight");
    if ((rc = get_mat(&m->weights, "lm_head.weight", &m->lm_head, e)) < 0) goto fail;
    /* Only the rows of the tokens seen (embedding) and of the answer
     * letters (lm_head) are ever read: their pages come back from the page
     * cache when touched, so the rest (200 MB for the 1.5B shape) need not
     * stay in this process's memory. */
    bs_weights_drop_pages(m->embed->data, (size_t)m->embed->numel * bs_dtype_size(m->embed->dtype));
    bs_weights_drop_pages(m->lm_head.data, mat_bytes(&m->lm_head));
    if ((rc = widen_vec(&m->weights, "model.norm.weight", m->cfg.hidden, &m->final_norm, e)) < 0) goto fail;
    if ((rc = build_rope(m, e)) < 0) goto fail;
    return BS_OK;
fail:
    bs_model_free(m);
    return rc;
}

int bs_model_prepack(bs_model *m, bs_err *e) {
    uint64_t total = 0;
    for (int l = 0; l < m->cfg.n_layers; l++)
        for (int i = 0; i < 7; i++) {
            const bs_wmat *w = bs_layer_mat(&m->layers[l], i);
            total += mat_bytes(w);
        }
    char what[512];
    snprintf(what, sizeof what, "packing the weights of %s for the %s kernels", m->dir, bs_gemm_bf16_kernel_name());
    bs_progress *p = NULL;
    uint64_t packed = 0;
    for (int l = 0; l < m->cfg.n_layers; l++)
        for (int i = 0; i < 7; i++) {
            bs_wmat *w = bs_layer_mat(&m->layers[l], i);
            size_t bytes = 0, src = mat_bytes(w);
            int rc = bs_gemm_prepack(m->pool, w, m->compute, &bytes);
            if (rc < 0) {
                bs_progress_end(p);
                bs_model_unpack(m);
                return bs_fail(e, BS_ENOMEM, "out of memory packing the weights of %s for the %s kernels (%.1f GB); "
                               "free memory or use another dtype (--dtype f32)", m->dir, bs_gemm_bf16_kernel_name(),
                               (double)total / 1e9);
            }
            if (rc == 0) continue;
            if (!p) p = bs_progress_start(what, total, "B");
            /* the kernels now read only the packed copy: the mapped pages
             * leave this process's memory (they stay valid and are read back
             * from the file if anything touches them) */
            bs_weights_drop_pages(w->data, src);
            packed += bytes;
            bs_progress_add(p, src);
        }
    bs_progress_end(p);
    if (packed)
        bs_log(BS_LOG_INFO, "model", "%s: weights packed for the %s kernels (%.1f MB)", m->dir,
               bs_gemm_bf16_kernel_name(), (double)packed / 1e6);
    return BS_OK;
}

void bs_model_prefetch(const bs_model *m) {
    char what[512];
    snprintf(what, sizeof what, "loading the weights of %s", m->dir);
    bs_weights_prefetch(&m->weights, what);
}

static int quantize_all(bs_model *m, bs_err *e);

/* The projections' int8 copies from the cache file: 1 when read. */
static int quantize_from_cache(bs_model *m, const char *path, const char *key) {
    if (!bs_file_exists(path)) return 0;
    bs_err ce = { 0 };
    int rc = bs_quant_cache_read(m, path, key, &ce);
    if (rc == 1) {
        for (int l = 0; l < m->cfg.n_layers; l++) /* the stored weights are not read in this mode */
            for (int i = 0; i < BS_LAYER_MATS; i++) {
                const bs_wmat *w = bs_layer_mat(&m->layers[l], i);
                bs_weights_drop_pages(w->data, mat_bytes(w));
            }
        m->quant = BS_QUANT_INT8W;
        bs_log(BS_LOG_INFO, "model", "%s: int8 weights read from %s", m->dir, path);
        return 1;
    }
    bs_log(BS_LOG_WARN, "model", "%s; quantizing the weights again", ce.msg);
    return 0;
}

int bs_model_quantize(bs_model *m, const char *cache_dir, bs_err *e) {
    char key[65], *path = NULL, rule[160];
    snprintf(rule, sizeof rule, "%s\n%s", BS_QUANT_CACHE_FORMAT, bs_quant_rule_int8w);
    if (cache_dir) {
        bs_err ce = { 0 };
        if (bs_quant_cache_key(m, rule, key, &ce) < 0 ||
            !(path = bs_quant_cache_path(cache_dir, "int8w", key, &ce)))
            bs_log(BS_LOG_WARN, "model", "int8 weights cache: %s; quantizing without it", ce.msg);
        if (path && quantize_from_cache(m, path, key)) {
            free(path);
            return BS_OK;
        }
    }
    int rc = quantize_all(m, e);
    if (rc == BS_OK) m->quant = BS_QUANT_INT8W;
    if (rc == BS_OK && path) {
        bs_err we = { 0 };
        bs_quant_cache_log_write(m, path, bs_quant_cache_write(m, path, key, &we), &we);
    }
    free(path);
    return rc;
}

static int quantize_all(bs_model *m, bs_err *e) {
    uint64_t total = 0, made = 0;
    for (int l = 0; l < m->cfg.n_layers; l++)
        for (int i = 0; i < 7; i++) total += mat_bytes(bs_layer_mat(&m->layers[l], i));
    char what[512];
    snprintf(what, sizeof what, "quantizing the weights of %s to int8", m->dir);
    bs_progress *p = bs_progress_start(what, total, "B");
    for (int l = 0; l < m->cfg.n_layers; l++)
        for (int i = 0; i < 7; i++) {
            bs_wmat *w = bs_layer_mat(&m->layers[l], i);
            size_t bytes = 0, src = mat_bytes(w);
            if (bs_gemm_quantize(m->pool, w, &bytes) < 0) {
                bs_progress_end(p);
                bs_model_unpack(m);
                return bs_fail(e, BS_ENOMEM, "out of memory quantizing the weights of %s to int8 (%.1f GB); free "
                               "memory or use another dtype (--dtype f32)", m->dir, (double)total / 2e9);
            }
            /* layer by layer: the stored weights leave memory as soon as
             * their int8 copy exists, so the peak stays near the int8 size */
            bs_weights_drop_pages(w->data, src);
            made += bytes;
            bs_progress_add(p, src);
        }
    bs_progress_end(p);
    bs_log(BS_LOG_INFO, "model", "%s: weights quantized to int8 (%.1f MB, from %.1f MB)", m->dir, (double)made / 1e6,
           (double)total / 1e6);
    return BS_OK;
}

const char *bs_model_dtype_name(const bs_model *m) {
    if (m->backend) return NULL;
    if (m->compute != BS_COMPUTE_BF16) return "f32";
    return m->quant == BS_QUANT_INT8 ? "int8" : m->quant == BS_QUANT_INT8W ? "int8w" : "bf16";
}

void bs_model_unpack(bs_model *m) {
    bs_model_drop_copies(m);
    bs_int8_state_free(m->int8);
    m->int8 = NULL;
}

void bs_model_free(bs_model *m) {
    if (m->backend && m->backend->destroy) m->backend->destroy(m->backend);
    m->backend = NULL;
    bs_model_unpack(m);
    if (m->layers) {
        for (int l = 0; l < m->cfg.n_layers; l++) {
            bs_layer *ly = &m->layers[l];
            free(ly->ln1); free(ly->ln2);
            free(ly->bq); free(ly->bk); free(ly->bv); free(ly->bo);
            free(ly->bg); free(ly->bu); free(ly->bd);
        }
        free(m->layers);
    }
    free(m->final_norm);
    free(m->calib_ids);
    free(m->rope_cos);
    free(m->rope_sin);
    bs_weights_close(&m->weights);
    free(m->dir);
    memset(m, 0, sizeof *m);
}
