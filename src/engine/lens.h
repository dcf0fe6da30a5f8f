/* The logit lens (issue 33): for one request, the letter distribution of
 * every order of every readout after every layer — the final RMSNorm and the
 * letter rows of the output head applied to each layer's residual stream at
 * the readout token, as upstream's basal-viz shows it. It runs inside the
 * request's own packed forward (bs_fwd_input.after_layer), so the last layer
 * is the served distribution bit for bit; a forward without lens rows pays
 * nothing. CPU backend only. */
#ifndef BS_ENGINE_LENS_H
#define BS_ENGINE_LENS_H

#include <stddef.h>
#include <stdint.h>

#include "base/util.h"
#include "engine/plan.h"
#include "model/forward.h"

/* A letter logit as the decision reads it: with readout_bf16 (the `--readout
 * bf16` diagnostic) rounded to bf16 and widened back. */
static inline float bs_readout_logit(int readout_bf16, float v) {
    return readout_bf16 ? bs_bf16_to_f32(bs_f32_to_bf16(v)) : v;
}

/* Marks p for the lens: the runner then records every layer's letter logits
 * of its items into bs_order.lens. A model on another backend than the CPU
 * gets BS_EINVAL with rep filled (422 unsupported, type lens_unavailable). */
int bs_lens_plan(bs_plan *p, const bs_basal_model *m, bs_reply *rep, bs_err *e);

/* ---- in a forward (engine/runner.c) ---- */

typedef struct bs_lens_dst {
    bs_item *it;
    int order;
    int32_t slot;  /* its row among the lens rows */
} bs_lens_dst;

typedef struct bs_lens_rows {
    const bs_model *m;
    int readout_bf16;
    int32_t *rows;     /* [n_rows] readout index of each lens row (distinct) */
    int32_t n_rows, cap_rows;
    bs_lens_dst *dst;
    size_t n_dst, cap_dst;
    float *h;          /* [H] scratch of the callback */
} bs_lens_rows;

void bs_lens_rows_init(bs_lens_rows *lr, const bs_model *m, int readout_bf16);
/* Order o of it is read at readout `readout` of the coming forward: its
 * logits after every layer go to it->orders[o].lens (allocated here). */
int bs_lens_rows_add(bs_lens_rows *lr, bs_item *it, int o, int32_t readout, bs_err *e);
/* Sets in's lens fields when anything was added (lr must then outlive the
 * forward); no-op otherwise. */
int bs_lens_rows_attach(bs_lens_rows *lr, bs_fwd_input *in, bs_err *e);
void bs_lens_rows_free(bs_lens_rows *lr);

/* ---- the document ---- */

/* The lens document of an answered plan (bs_lens_plan'd, run, advanced):
 * {"model","dtype","layers","orders","questions":[{"id","type","lang",
 * "readouts":[{"kind","keys","orders":[{"order","tokens","letters","options",
 * "letter_ids","parts":[{"part","text","tokens"}],"logits","probabilities"}],
 * "mean",("temperature","calibrated")}]}],"answer":<answer>}, where answer is
 * the 200 body bs_plan_answer wrote (answer_len bytes). README "Logit lens"
 * describes every field. */
int bs_lens_document(const bs_plan *p, const bs_basal_model *m, const char *answer, size_t answer_len, bs_buf *out,
                     bs_err *e);

#endif
