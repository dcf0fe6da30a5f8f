/* The data of a loaded Llama model (bs_model): config, mapped weights, the
 * per-layer matrices and vectors, and the copies the compute modes add. The
 * layer under the loader (model.c) and the quantizers (quant_cache.c,
 * smooth.c), which all work on these structures without calling each other
 * back. */
#ifndef BS_WEIGHTS_H
#define BS_WEIGHTS_H

#include "cpu/gemm.h"
#include "cpu/pool.h"
#include "model/config.h"
#include "model/safetensors.h"

typedef struct bs_layer {
    bs_wmat wq, wk, wv, wo, wg, wu, wd;
    float *ln1, *ln2;                 /* input / post-attention RMSNorm weights [H] */
    float *bq, *bk, *bv, *bo;         /* NULL without attention_bias */
    float *bg, *bu, *bd;              /* NULL without mlp_bias */
    /* dtype int8 (model/smooth.h): the norm weights and biases with the
     * smoothing folded in, used in place of ln1, ln2, bv, bu when set */
    float *ln1_i8, *ln2_i8, *bv_i8, *bu_i8;
    int down_hadamard; /* dtype int8: down_proj's input rotated in blocks of this size (cpu/hadamard.h), or 0 */
} bs_layer;

/* The projections of a layer in a fixed order (wq wk wv wo wg wu wd), and
 * the name of each in the checkpoint ("self_attn.q_proj", ...; the tensor is
 * "model.layers.<l>.<name>.weight"). */
#define BS_LAYER_MATS 7
bs_wmat *bs_layer_mat(bs_layer *ly, int i);
const char *bs_layer_mat_name(int i);

struct bs_fwd_input;
struct bs_model;
struct bs_int8_state;

/* What the projections of a CPU model hold besides the stored weights. */
typedef enum { BS_QUANT_NONE = 0, BS_QUANT_INT8W = 1, BS_QUANT_INT8 = 2 } bs_quant;

/* A compute backend other than the built-in CPU one (spec issue "CUDA
 * backend"): when a model has one, bs_forward hands every forward to it.
 * It must honour the whole bs_fwd_input contract (units, cached prefixes,
 * capture, between_layers, profile) with the same results on every batch. */
typedef struct bs_backend {
    const char *name;     /* e.g. "cuda f16 (NVIDIA H100, sm_90)" */
    int (*forward)(struct bs_backend *b, const struct bs_model *m, const struct bs_fwd_input *in, float *logits,
                   bs_err *e);
    void (*destroy)(struct bs_backend *b);
    void *impl;
} bs_backend;

typedef struct bs_model {
    char *dir;
    bs_config cfg;
    bs_weights weights;
    bs_layer *layers;
    const bs_tensor *embed;  /* [V, H] rows gathered per token */
    bs_wmat lm_head;         /* [V, H], only requested rows are ever read */
    float *final_norm;       /* [H] */
    float *rope_cos, *rope_sin; /* [Pmax][hd/2], f64 angles rounded to f32 */
    bs_pool *pool;           /* borrowed; NULL = serial */
    bs_backend *backend;     /* owned; NULL = the CPU forward of forward.c */
    bs_compute compute;      /* CPU GEMM inputs: f32 (default) or bf16 (dtype bf16, int8w, int8: bs_device_attach) */
    bs_quant quant;          /* int8w or int8 copies of the projections (bs_model_quantize*) */
    double int8_alpha;       /* dtype int8: SmoothQuant's alpha in (0, 1], set before bs_device_attach; 0: the
                              * default (model/smooth.h), negative: no smoothing */
    int32_t *calib_ids;      /* dtype int8: the calibration text's tokens (bs_basal_load), or NULL */
    int n_calib;
    struct bs_int8_state *int8; /* dtype int8: the plan and smoothing in use (model/smooth.h), or NULL */
} bs_model;

/* Frees every layer's packed and quantized copies (cpu/wmat.h) and the int8
 * mode's folded vectors; quant becomes BS_QUANT_NONE. The int8 state
 * (m->int8) is its owner's (bs_model_unpack). */
void bs_model_drop_copies(bs_model *m);

#endif
