/* config.json of a Basal (Hugging Face Llama) model directory, checked strictly
 * (spec 05 §2): anything this runtime does not implement is a load error. */
#ifndef BS_CONFIG_H
#define BS_CONFIG_H

#include <stdbool.h>
#include "basal.h"

typedef struct bs_config {
    int n_layers;      /* num_hidden_layers  L  */
    int hidden;        /* hidden_size        H  */
    int inter;         /* intermediate_size  I  */
    int n_heads;       /* num_attention_heads Nh */
    int n_kv_heads;    /* num_key_value_heads Nkv */
    int head_dim;      /* head_dim (explicit) hd */
    int vocab;         /* vocab_size         V  */
    int max_pos;       /* max_position_embeddings Pmax */
    double rms_eps;    /* rms_norm_eps */
    double rope_theta; /* rope_parameters.rope_theta (never the top-level key) */
    bool attn_bias;    /* attention_bias: q,k,v,o biases */
    bool mlp_bias;     /* mlp_bias: gate,up,down biases (must equal attn_bias) */
    /* set when a top-level rope_theta differs from rope_parameters.rope_theta;
     * the caller logs it as a warning, the value itself is never used */
    bool decoy_rope_theta;
} bs_config;

/* Parses and checks config.json text; fname is used in messages. */
int bs_config_parse(bs_config *c, const char *text, size_t len, const char *fname, bs_err *e);
/* Compact rendering of a JSON value for load-error messages ("(absent)" for
 * NULL), cut to 160 characters so a message keeps its file and key. */
struct json_t;
void bs_json_show(const struct json_t *v, char *buf, size_t size);

/* Reads <dir>/config.json and checks it. */
int bs_config_load(bs_config *c, const char *model_dir, bs_err *e);

#endif
