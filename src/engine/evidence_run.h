/* Evidence spans in the engine (spec 03 §4, 04 §7 B3, 05 §14): planning one
 * evidence forward per question that asks for it (its order-0 prompt, the
 * state tokens and their offsets), running those forwards after the batch's
 * decisions through the same forward as the decisions (the final-normed rows
 * of the state tokens and the last token), the head and the span selection,
 * and the answer's last key. Evidence never changes a decision and is not
 * counted in usage.input_tokens. */
#ifndef BS_EVIDENCE_RUN_H
#define BS_EVIDENCE_RUN_H

#include "engine/runner.h"
#include "model/evidence.h"

typedef struct bs_ev_job {
    size_t question;      /* index into the request's questions */
    int32_t *ids;         /* the order-0 prompt's token ids */
    int32_t n_ids;
    int32_t t0, t1;       /* state tokens t0..t1-1; t1 == t0: the evidence is [] */
    int32_t *rel;         /* 2 * (t1 - t0) state-relative character offsets */
    bs_ev_span spans[BS_EV_SELECT_TOP];
    int n_spans;          /* after the facts limit (at most BS_EV_KEEP) */
} bs_ev_job;

/* Plans the evidence forwards of p's request (after its items): one job per
 * question with evidence, in question order. A single-option question whose
 * prompt exceeds the model's limit is added to too_long (04 §3 P7; longer
 * prompts of other questions are already there). */
int bs_ev_plan(bs_plan *p, const bs_basal_model *m, bs_unsupported *too_long, bs_err *e);
void bs_ev_free(bs_plan *p);

/* 04 §7 B3: the evidence forwards of the plans, in request and question order,
 * each holding the gate for its duration; fills every job's spans. */
int bs_ev_run(bs_runner *r, bs_plan *const *plans, size_t n, bs_err *e);

/* Appends `,"evidence":[…]` as the last key of question qi's answer object,
 * which out ends with (no-op for a question without evidence). */
void bs_ev_answer(bs_buf *out, const bs_plan *p, size_t qi);

#endif
