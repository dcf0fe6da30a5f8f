/* The forward pass over a compact token list (spec 05 §6–§11): the tokens of
 * all packed rows back to back, no padding; attention follows the tree-block
 * structure given as units. Returns letter logits at readout rows only. */
#ifndef BS_FORWARD_H
#define BS_FORWARD_H

#include <stdint.h>
#include "model/model.h"

#define BS_MAX_TREE_DEPTH 8

/* K and V of every layer for the tokens at positions 0..n_tokens-1 of a
 * prefix (spec 04 §13): k[l][t][kvd] and v[l][t][kvd], f32, as the forward
 * computed them (after bias and RoPE). */
typedef struct bs_kv {
    int32_t n_tokens, n_layers, kvd;
    float *k, *v;
} bs_kv;

/* One attention unit (spec 05 §6 I3): a non-empty block's query tokens
 * [q_start, q_start + q_len) of the compact list, and its key ranges: the
 * ancestor blocks root-down, then its own block last (r_start[n_ranges-1] ==
 * q_start, r_len[n_ranges-1] == q_len). A query sees all ancestor keys and the
 * keys of its own block up to itself. */
typedef struct bs_unit {
    int32_t q_start, q_len;
    int32_t n_ranges;
    int32_t r_start[BS_MAX_TREE_DEPTH], r_len[BS_MAX_TREE_DEPTH];
    /* keys before every range: positions 0..prefix->n_tokens-1 from a cache (or NULL) */
    const bs_kv *prefix;
} bs_unit;

/* Per-stage time and work of forwards (accumulated; for `basal bench`). */
typedef struct bs_fwd_profile {
    double gemm_ms, attn_ms, total_ms;
    double gemm_flop, attn_flop;
    long long tokens;
} bs_fwd_profile;

typedef struct bs_fwd_input {
    int32_t n_tokens;           /* M */
    const int32_t *ids;         /* [M] token ids */
    const int32_t *pos;         /* [M] position within the token's own prompt */
    int32_t n_units;
    const bs_unit *units;       /* cover every token exactly once */
    int32_t n_readouts;
    const int32_t *readouts;    /* [R] compact indices whose logits are wanted */
    int32_t n_out_ids;
    const int32_t *out_ids;     /* [U] vocabulary rows of lm_head to compute */
    /* Optional (evidence, 05 §14 E1): the final-RMSNorm hidden state of every
     * readout row, hidden[r * H + i], f32. With it n_out_ids may be 0 (no
     * logits). Same code path as the logits, so packing never changes it. */
    float *hidden;
    /* Prefix capture (04 §13 K2/K4): when set, the forward stores the K/V of
     * its tokens — one unit covering all of them, continuing the unit's prefix
     * if any — into *capture (prefix part copied first) and stops after the
     * last layer's K/V; no readouts are needed then. */
    bs_kv *capture;
    /* Called after every layer except the last (the long lane's checkpoint,
     * 04 §10 L4); it may block. Never changes a result. */
    void (*between_layers)(void *ctx);
    void *between_ctx;
    /* Optional (the logit lens): after every layer l = 0..n_layers-1,
     * after_layer(after_ctx, l, rows) with rows[j * H + i] the residual
     * stream of readout lens_rows[j] (an index into readouts), j < n_lens,
     * before the final norm; after the last layer these are the very rows
     * the logits are read from (bs_forward_letters). n_lens 0: no call and
     * no cost. Never changes a result; the CPU backend only. */
    int32_t n_lens;
    const int32_t *lens_rows;
    void (*after_layer)(void *ctx, int layer, const float *rows);
    void *after_ctx;
    bs_fwd_profile *profile;    /* optional: accumulates stage timings */
    /* Optional (the int8 mode's calibration, model/smooth.h): the largest
     * |x| of every channel of each product's input, per layer, over the
     * rows the forward computes (every row when every row is read out). */
    struct bs_act_stats *act_stats;
} bs_fwd_input;

/* The input checks of bs_forward, shared by every backend: ids, positions,
 * units (each token in exactly one, seeing exactly pos + 1 keys), readouts,
 * output ids, capture shape. Fills unit_of[M] with each token's unit. */
int bs_forward_validate(const bs_model *m, const bs_fwd_input *in, int32_t *unit_of, bs_err *e);

/* Allocates a K/V record for n tokens of model m (zeroed); free with bs_kv_free. */
int bs_kv_alloc(bs_kv *kv, const bs_model *m, int32_t n_tokens, bs_err *e);
void bs_kv_free(bs_kv *kv);
size_t bs_kv_bytes(const bs_model *m, int32_t n_tokens);

/* The readout of one residual-stream row x[H] (spec 05 §11): the final
 * RMSNorm into h[H], then logits[u] = lm_head row out_ids[u] · h for u < n.
 * The forward reads its logits with exactly this, so a row given to the
 * logit lens after the last layer gives the served logits bit for bit. */
void bs_forward_letters(const bs_model *m, const float *x, const int32_t *out_ids, int n, float *h, float *logits);

/* logits[r * n_out_ids + u] = logit of out_ids[u] at readouts[r].
 * Errors: malformed input (BS_EINVAL/BS_EINTERNAL), position past the model's
 * limit (BS_ERANGE), a non-finite logit (BS_EINTERNAL), allocation (BS_ENOMEM). */
int bs_forward(const bs_model *m, const bs_fwd_input *in, float *logits, bs_err *e);

#endif
