/* The forward pass over a compact token list (spec 05 §6–§11): the tokens of
 * all packed rows back to back, no padding; attention follows the tree-block
 * structure given as units. Returns letter logits at readout rows only. */
#ifndef BS_FORWARD_H
#define BS_FORWARD_H

#include <stdint.h>
#include "model/model.h"

#define BS_MAX_TREE_DEPTH 8

/* One attention unit (spec 05 §6 I3): a non-empty block's query tokens
 * [q_start, q_start + q_len) of the compact list, and its key ranges: the
 * ancestor blocks root-down, then its own block last (r_start[n_ranges-1] ==
 * q_start, r_len[n_ranges-1] == q_len). A query sees all ancestor keys and the
 * keys of its own block up to itself. */
typedef struct bs_unit {
    int32_t q_start, q_len;
    int32_t n_ranges;
    int32_t r_start[BS_MAX_TREE_DEPTH], r_len[BS_MAX_TREE_DEPTH];
} bs_unit;

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
} bs_fwd_input;

/* logits[r * n_out_ids + u] = logit of out_ids[u] at readouts[r].
 * Errors: malformed input (BS_EINVAL/BS_EINTERNAL), position past the model's
 * limit (BS_ERANGE), a non-finite logit (BS_EINTERNAL), allocation (BS_ENOMEM). */
int bs_forward(const bs_model *m, const bs_fwd_input *in, float *logits, bs_err *e);

#endif
