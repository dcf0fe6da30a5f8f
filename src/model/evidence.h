/* Evidence spans (spec 03 §4, 05 §14): the pointer head of evidence_head.pt,
 * its input (the state's tokens in the order-0 prompt, with character offsets),
 * its math (start/end log-probabilities from final-normed hidden states) and
 * upstream's span selection (`best_spans`), the facts limit and the JSON form.
 * The forward that produces the hidden states is the engine's (model/forward.h
 * `hidden`); this module never touches the model weights. */
#ifndef BS_EVIDENCE_H
#define BS_EVIDENCE_H

#include <stddef.h>
#include <stdint.h>
#include "basal.h"
#include "base/util.h"
#include "model/torchfile.h"

#define BS_EVIDENCE_FILE "evidence_head.pt"
#define BS_EV_MAX_SPAN 80  /* longest span in tokens */
#define BS_EV_SELECT_TOP 5 /* best_spans(top = 5) (03 §4.5) */
#define BS_EV_KEEP 3       /* spans in the answer (03 §4.6) */

/* The six projections, f32, row-major: ws/us/we/ue [k][d], bs/be [d]. */
typedef struct bs_evidence_head {
    int d, k;
    float *ws, *us, *we, *ue, *bs, *be;
} bs_evidence_head;

/* Loads <path> for a model of hidden size `hidden` (03 §4.2): exactly the six
 * tensors, [k, d] and [1, d], d = hidden. Messages start with evidence_head.pt. */
int bs_evidence_head_load(bs_evidence_head *h, const char *path, int hidden, bs_err *e);
/* The same checks on an already read file (for tests). */
int bs_evidence_head_from_pt(bs_evidence_head *h, const bs_pt_file *f, int hidden, bs_err *e);
void bs_evidence_head_free(bs_evidence_head *h);

/* 03 §4.3 steps 2–3: the state tokens of a prompt. offsets are the tokens'
 * [start, end) character offsets (tokenizer.h). Returns 1 with t0, t1 and
 * *rel (malloc'd, 2 * (t1 - t0) state-relative offsets), 0 when the evidence
 * is empty (state not found after an LF, or no token inside it), or a negative
 * code. */
int bs_evidence_locate(const char *prompt, size_t prompt_len, const char *state, size_t state_len,
                       const int32_t *offsets, size_t n_tokens, int32_t *t0, int32_t *t1, int32_t **rel, bs_err *e);

/* 03 §4.4: ls, le [m] from the state rows hs [m][d] and the last row q [d].
 * Intermediates are f64 and the results are rounded once to f32, so the only
 * difference from an f32 evaluation is that evaluation's own rounding; the
 * bilinear term is evaluated as h·(Wsᵀ(Us q')) (the same value, without the
 * m×k×d product). A non-finite input is BS_EINTERNAL. */
int bs_evidence_scores(const bs_evidence_head *h, const float *hs, int32_t m, const float *q, float *ls, float *le,
                       bs_err *e);

typedef struct bs_ev_span {
    int64_t start, end; /* state character offsets */
    double p;
} bs_ev_span;

/* 03 §4.5 `best_spans`: at most `top` spans into out (selection order).
 * rel: 2*m state-relative token offsets. Returns the count or a negative code. */
int bs_best_spans(const float *ls, const float *le, int32_t m, const int32_t *rel, int top, bs_ev_span *out, bs_err *e);

/* 03 §4.6: with facts_limit >= 0, drops spans starting at or after it and
 * clips the others' end; then keeps the first BS_EV_KEEP. Returns the count. */
int bs_evidence_limit(bs_ev_span *s, int n, int64_t facts_limit);


#endif
