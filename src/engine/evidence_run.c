#include "engine/evidence_run.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int plan_job(bs_ev_job *j, const bs_basal_model *m, const bs_request *r, size_t qi, bs_err *e) {
    const bs_question *q = &r->questions[qi];
    bs_buf pr;
    bs_buf_init(&pr);
    int32_t *offs = NULL;
    size_t n = 0;
    memset(j, 0, sizeof *j);
    j->question = qi;
    /* 03 §4.3 step 1: the readout prompt in the original option order */
    int rc = bs_prompt_build(&pr, m->bos, strlen(m->bos), q->lang, &r->state, &q->instructions, q->options, NULL,
                             q->n_options, e);
    if (rc == BS_OK && pr.oom) rc = bs_fail(e, BS_ENOMEM, "out of memory");
    if (rc == BS_OK) rc = bs_tokenizer_encode(m->tok, pr.data, pr.len, &j->ids, &n, &offs, e);
    if (rc == BS_OK) {
        j->n_ids = (int32_t)n;
        int found = bs_evidence_locate(pr.data, pr.len, r->state.s, r->state.len, offs, n, &j->t0, &j->t1, &j->rel, e);
        if (found < 0) rc = found;
    }
    free(offs);
    bs_buf_free(&pr);
    return rc;
}

int bs_ev_plan(bs_plan *p, const bs_basal_model *m, bs_unsupported *too_long, bs_err *e) {
    const bs_request *r = p->req;
    size_t want = 0;
    for (size_t qi = 0; qi < r->n_questions; qi++) want += r->questions[qi].evidence != 0;
    if (!want) return BS_OK;
    if (!m->evidence) return bs_fail(e, BS_EINTERNAL, "evidence planned for a model without evidence_head.pt");
    if (!(p->ev = calloc(want, sizeof *p->ev))) return bs_fail(e, BS_ENOMEM, "out of memory");
    for (size_t qi = 0; qi < r->n_questions; qi++) {
        const bs_question *q = &r->questions[qi];
        if (!q->evidence) continue;
        bs_ev_job *j = &p->ev[p->n_ev++];
        int rc = plan_job(j, m, r, qi, e);
        if (rc < 0) return rc;
        /* 04 §3 P7; a question with 2+ options was checked with its readout prompts */
        if (j->n_ids > m->cfg.max_pos && q->n_options < 2) {
            char msg[160];
            snprintf(msg, sizeof msg, "a prompt of %d tokens exceeds the model limit %d", j->n_ids, m->cfg.max_pos);
            bs_unsupported_add(too_long, "prompt_too_long", q->id.s, q->id.len, msg);
        }
    }
    return BS_OK;
}

void bs_ev_free(bs_plan *p) {
    for (size_t i = 0; i < p->n_ev; i++) {
        free(p->ev[i].ids);
        free(p->ev[i].rel);
    }
    free(p->ev);
    p->ev = NULL;
    p->n_ev = 0;
}

static void checkpoint(void *ctx) { bs_gate_checkpoint((bs_gate *)ctx); }

/* 05 §14 E1: one unit over the whole prompt, positions 0..n-1; the readout
 * rows are the state tokens and the last token, read as hidden states. */
static int run_job(bs_runner *r, const bs_request *req, bs_ev_job *j, bs_err *e) {
    const bs_basal_model *bm = r->m;
    const bs_model *m = &bm->model;
    int32_t n = j->n_ids, ms = j->t1 - j->t0, R = ms + 1, H = m->cfg.hidden;
    if (ms <= 0) return BS_OK; /* 03 §4.3: no state tokens, evidence [] */
    int32_t *pos = malloc((size_t)n * sizeof *pos), *ro = malloc((size_t)R * sizeof *ro);
    float *hid = malloc((size_t)R * H * sizeof *hid);
    float *ls = malloc((size_t)ms * sizeof *ls), *le = malloc((size_t)ms * sizeof *le);
    int rc = BS_OK;
    if (!pos || !ro || !hid || !ls || !le) { rc = bs_fail(e, BS_ENOMEM, "out of memory"); goto done; }
    for (int32_t i = 0; i < n; i++) pos[i] = i;
    for (int32_t i = 0; i < ms; i++) ro[i] = j->t0 + i;
    ro[ms] = n - 1;
    bs_unit u = {.q_start = 0, .q_len = n, .n_ranges = 1, .r_start = {0}, .r_len = {n}};
    bs_fwd_input in = {.n_tokens = n, .ids = j->ids, .pos = pos, .n_units = 1, .units = &u, .n_readouts = R,
                       .readouts = ro, .n_out_ids = 0, .hidden = hid, .profile = r->profile};
    if (r->preemptible && r->gate) {
        in.between_layers = checkpoint;
        in.between_ctx = r->gate;
    }
    if (r->gate) (r->preemptible ? bs_gate_enter_preemptible : bs_gate_enter_urgent)(r->gate);
    rc = bs_forward(m, &in, NULL, e);
    if (r->gate) bs_gate_leave(r->gate);
    r->forwards++;
    r->forward_tokens += n;
    if (rc < 0) goto done;
    if ((rc = bs_evidence_scores(bm->evidence, hid, ms, hid + (size_t)ms * H, ls, le, e)) < 0) goto done;
    int ns = bs_best_spans(ls, le, ms, j->rel, BS_EV_SELECT_TOP, j->spans, e);
    if (ns < 0) { rc = ns; goto done; }
    j->n_spans = bs_evidence_limit(j->spans, ns, req->facts_applied ? (int64_t)req->facts_limit : -1);
done:
    free(pos); free(ro); free(hid); free(ls); free(le);
    return rc;
}

int bs_ev_run(bs_runner *r, bs_plan *const *plans, size_t n, bs_err *e) {
    for (size_t i = 0; i < n; i++)
        for (size_t k = 0; k < plans[i]->n_ev; k++) {
            if (!r->m->evidence) return bs_fail(e, BS_EINTERNAL, "evidence requested from a model without a head");
            if (!r->m->has_weights) return bs_fail(e, BS_EINTERNAL, "forward: model loaded without weights");
            int rc = run_job(r, plans[i]->req, &plans[i]->ev[k], e);
            if (rc < 0) return rc;
        }
    return BS_OK;
}

void bs_ev_answer(bs_buf *out, const bs_plan *p, size_t qi) {
    for (size_t i = 0; i < p->n_ev; i++) {
        const bs_ev_job *j = &p->ev[i];
        if (j->question != qi) continue;
        if (out->len && out->data[out->len - 1] == '}') out->len--; /* reopen the answer object */
        bs_buf_puts(out, ",\"evidence\":");
        bs_evidence_json(out, p->req->state.s, p->req->state.len, j->spans, j->n_spans);
        bs_buf_putc(out, '}');
        return;
    }
}
