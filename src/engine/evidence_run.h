/* Evidence spans in the engine (spec 03 §4, 04 §7 B3, 05 §14): planning one
 * evidence forward per question that asks for it (its order-0 prompt, the
 * state tokens and their offsets), running those forwards after the batch's
 * decisions through the same forward as the decisions (the final-normed rows
 * of the state tokens and the last token), the head and the span selection,
 * and the answer's last key. Evidence never changes a decision and is not
 * counted in usage.input_tokens. */
#ifndef BS_EVIDENCE_RUN_H
#define BS_EVIDENCE_RUN_H

#include "engine/pack.h"
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
    int done;             /* spans computed (in a decision forward or by bs_ev_run) */
} bs_ev_job;

/* Plans the evidence forwards of p's request (after its items): one job per
 * question with evidence, in question order. A single-option question whose
 * prompt exceeds the model's limit is added to too_long (04 §3 P7; longer
 * prompts of other questions are already there). */
int bs_ev_plan(bs_plan *p, const bs_basal_model *m, bs_unsupported *too_long, bs_err *e);
void bs_ev_free(bs_plan *p);

/* Evidence rows taken from a decision forward. A question's order-0 prompt is
 * one of its readout prompts, so the packed decision forward already computes
 * every row the evidence head reads; on the CPU backend a row's values do not
 * depend on the packing (05 §13, tested bitwise in test_forward), so reading
 * them there is the separate forward of 05 §14 E1 without its cost (only the
 * last layer runs for the extra rows). Rows inside a cached prefix are not
 * computed: such a job is left for bs_ev_run. */
typedef struct bs_ev_rows {
    int32_t M;                /* compact tokens of the forward */
    int32_t *slot_of;         /* [M] readout slot of a compact index, or -1 */
    int32_t *readouts;        /* the forward's readouts, then the added rows */
    int32_t n_readouts, cap;
    size_t n_jobs;
    bs_ev_job **jobs;
    const bs_request **reqs;
    int32_t **slots;          /* per job: the m + 1 slots of its state rows and last row */
    float *hidden;            /* [n_readouts][H], allocated by bs_ev_rows_prepare */
} bs_ev_rows;

/* Starts from the packed forward's readouts (M compact tokens). */
int bs_ev_rows_init(bs_ev_rows *er, const int32_t *readouts, int32_t n_readouts, int32_t M, bs_err *e);
/* The item's order-0 prompt is prompt k of `row`, whose column c >= skip is
 * compact index off + c - skip. Adds its job's rows if the plan wants
 * evidence on the item's question, the job is not done and every row is
 * computed by this forward. */
int bs_ev_rows_add(bs_ev_rows *er, const bs_plan *p, const bs_item *it, const bs_row *row, int32_t k, int32_t off,
                   int32_t skip, bs_err *e);
/* After the adds: allocates hidden for H wide rows; 0 when no job was added. */
int bs_ev_rows_prepare(bs_ev_rows *er, int H, bs_err *e);
/* After the forward: the head and the spans of every added job (marked done). */
int bs_ev_rows_finish(bs_ev_rows *er, const bs_evidence_head *h, bs_err *e);
void bs_ev_rows_free(bs_ev_rows *er);

/* 04 §7 B3: the evidence forwards of the plans, in request and question order,
 * each holding the gate for its duration; fills every job's spans. */
int bs_ev_run(bs_runner *r, bs_plan *const *plans, size_t n, bs_err *e);

/* Appends `,"evidence":[…]` as the last key of question qi's answer object,
 * which out ends with (no-op for a question without evidence). */
void bs_ev_answer(bs_buf *out, const bs_plan *p, size_t qi);
/* `[{"text":…,"start":a,"end":b,"probability":p},…]`, text = state[a:b] by
 * characters (clamped; empty if a >= b): the spans the model layer found,
 * written here (the model returns numbers, never JSON). */
void bs_evidence_json(bs_buf *b, const char *state, size_t state_len, const bs_ev_span *s, int n);

#endif
