/* The int8 mode (dtype int8, W8A8; issue 34): per-channel smoothing computed
 * at load, then the projections quantized for the int8 kernels (cpu/gemm.h).
 *
 * Calibration. The model runs once, in f32 on its stored weights, over the
 * built-in text (calib_text.c: BOS then the text, tokenized by the model's
 * own tokenizer; at most max_position_embeddings tokens, every row read
 * out), recording for every layer the largest |x| of each channel of the
 * four inputs of its products:
 *     qkv      RMSNorm(x; input_layernorm)            [H]   (q, k, v_proj)
 *     gate_up  RMSNorm(x; post_attention_layernorm)   [H]   (gate, up_proj)
 *     o        the attention output                   [Nh * hd]   (o_proj)
 *     down     SiLU(gate) * up                        [I]   (down_proj)
 *
 * Smoothing (SmoothQuant, Xiao et al. 2023): for an input channel j with
 * activation maximum a_j and weight maximum w_j (the largest |W[n][j]| over
 * every row of the products that read it, widened to f32),
 *     s_j = a_j^alpha / w_j^(1 - alpha)    (float64, then rounded to f32;
 *           1 when a_j or w_j is 0 or the result is not finite; clamped to
 *           [2^-16, 2^16])
 * divides the activation and multiplies the weight column, which leaves the
 * product unchanged and moves the activations' outliers into the weights,
 * whose scales are per row. The division is folded into what produces the
 * input, so it costs nothing at run time:
 *     qkv      input_layernorm.weight[j] / s_j;     W[n][j] * s_j for q, k, v
 *     gate_up  post_attention_layernorm.weight / s;  W[n][j] * s_j for gate, up
 *     o        v_proj row (g, d) (and its bias) / t_(g,d); o_proj column
 *              (h, d) * t_(g(h),d): one factor per kv head and dimension,
 *              a_ and w_ the maxima over the query heads h of kv head g
 *     down     up_proj row j (and its bias) / s_j;  down_proj column j * s_j
 * A column factor enters the weight before it is quantized,
 * w'[n][k] = f32(w[n][k]) * s_k (one f32 product), and the per-row rule of
 * bs_quantize_row_i8 follows; a row divisor only divides the row's scale,
 * scale[n] = (amax'_n / 127) / t_n, as a row's quantization is invariant to
 * its scaling. alpha 0 turns smoothing off (s = 1 everywhere).
 *
 * Rotation (for a product whose input is heavy-tailed per token, as
 * down_proj's SiLU(gate) * up is): its input is multiplied, online and per
 * token, by a block Walsh-Hadamard matrix (cpu/hadamard.h: blocks of the
 * largest power of two dividing K, at most 256) and its weight rows by the
 * same matrix divided by the block size before quantization, which leaves
 * the product unchanged while making each token's values closer to Gaussian
 * (on the fixtures the W8A8 error of down_proj drops from 1.5% to 0.9%; an
 * int8w down_proj's is 0.7%). A rotated input is not smoothed.
 *
 * Defaults (measured: bench/README.md, issue 34): alpha 0.5; smoothed
 * inputs qkv and gate_up; down_proj kept as int8 weights with bf16
 * activations (int8w: the other choices doubled the decisions' error on the
 * fixtures), the other six projections W8A8; down_proj's input rotated
 * whenever down_proj is W8A8. BASAL_INT8_SMOOTH (a comma list of qkv,
 * gate_up, o, down, or none), BASAL_INT8_WEIGHT_ONLY (a comma list of q, k,
 * v, o, gate, up, down, or none; none: every projection W8A8, the faster
 * plan) and BASAL_INT8_ROTATE (down or none) change them. The letter readout
 * (lm_head rows) and the embeddings stay as stored in every mode; attention,
 * norms and the residual stream compute as in the bf16 mode. */
#ifndef BS_SMOOTH_H
#define BS_SMOOTH_H

#include <stdint.h>

#include "model/weights.h"

/* The calibration text (calib_text.c) and its version (part of the
 * quantized-weights cache key). */
extern const char bs_int8_calib_text[];
extern const int bs_int8_calib_text_len;
#define BS_INT8_CALIB_VERSION "pl-en-1"

#define BS_INT8_ALPHA_DEFAULT 0.5

/* The four inputs (groups) and their bits in bs_int8_plan.smooth. */
enum { BS_G_QKV = 0, BS_G_GATE_UP = 1, BS_G_O = 2, BS_G_DOWN = 3, BS_SMOOTH_GROUPS = 4 };

typedef struct bs_int8_plan {
    double alpha;            /* 0: no smoothing */
    unsigned smooth;         /* bit g (1u << BS_G_*): input g smoothed */
    unsigned weight_only;    /* bit i: projection i (bs_layer_mat order) kept int8w */
    unsigned rotate;         /* bit g: input g rotated (cpu/hadamard.h; only BS_G_DOWN) */
} bs_int8_plan;

/* The plan of m (alpha from m->int8_alpha: 0 the default, negative no
 * smoothing) and the environment; BS_EINVAL names a bad BASAL_INT8_* value. */
int bs_int8_plan_get(const bs_model *m, bs_int8_plan *p, bs_err *e);
/* The plan as text for logs and the cache key, e.g.
 * "alpha 0.5, smooth qkv+gate_up, int8w down". */
void bs_int8_plan_text(const bs_int8_plan *p, char *buf, size_t len);
/* Input g's name ("qkv", "gate_up", "o", "down"), the length of its
 * maxima (H, H, Nh * hd, I) and of its factors (H, H, Nkv * hd, I). */
const char *bs_smooth_group_name(int g);
int bs_smooth_amax_len(const bs_config *c, int g);
int bs_smooth_factor_len(const bs_config *c, int g);

/* Per-layer maxima of a calibration forward: amax[g][l * len_g + j]. */
typedef struct bs_act_stats {
    int n_layers;
    float *amax[BS_SMOOTH_GROUPS];
} bs_act_stats;
int bs_act_stats_alloc(bs_act_stats *st, const bs_model *m, bs_err *e);
void bs_act_stats_free(bs_act_stats *st);

/* The calibration forward (m in the f32 mode, on its stored weights; each
 * layer's pages are dropped when it is done, so the resident memory stays
 * about one layer's). ids: n tokens (cut at max_position_embeddings). */
int bs_int8_calibrate(bs_model *m, const int32_t *ids, int n, bs_act_stats *st, bs_err *e);

/* What the int8 mode keeps (bs_model.int8): the plan, the calibration
 * tokens used, their maxima and the factors (per layer, [l * len + j]; NULL
 * for an input not smoothed; the maxima are absent after a cache read). */
typedef struct bs_int8_state {
    bs_int8_plan plan;
    int n_ids;
    int32_t *ids;
    bs_act_stats stats;
    float *s[BS_SMOOTH_GROUPS];
} bs_int8_state;
void bs_int8_state_free(bs_int8_state *st);

/* The dtype int8 of m: calibration (or the cache), smoothing, quantization
 * and packing, layer by layer with progress; with cache_dir the result is
 * read from and kept in <cache_dir>/int8/ (model/quant_cache.h). Call with
 * m->compute BS_COMPUTE_BF16 and nothing packed; BS_ENOMEM/BS_ERANGE leave m
 * unquantized. */
int bs_model_quantize_int8(bs_model *m, const char *cache_dir, bs_err *e);

/* One smoothing factor, the rule above. */
float bs_smooth_factor(float amax, float wmax, double alpha);

#endif
