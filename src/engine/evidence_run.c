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

/* ---- evidence rows of a decision forward ---- */

int bs_ev_rows_init(bs_ev_rows *er, const int32_t *readouts, int32_t n_readouts, int32_t M, bs_err *e) {
    memset(er, 0, sizeof *er);
    er->M = M;
    er->n_readouts = n_readouts;
    er->cap = n_readouts > 0 ? n_readouts : 1;
    er->readouts = malloc((size_t)er->cap * sizeof *er->readouts);
    if (!er->readouts) return bs_fail(e, BS_ENOMEM, "out of memory");
    memcpy(er->readouts, readouts, (size_t)n_readouts * sizeof *readouts);
    return BS_OK;
}

static int32_t slot_for(bs_ev_rows *er, int32_t compact) {
    if (er->slot_of[compact] >= 0) return er->slot_of[compact];
    if (er->n_readouts == er->cap) {
        int32_t nc = er->cap * 2;
        int32_t *nr = realloc(er->readouts, (size_t)nc * sizeof *nr);
        if (!nr) return -1;
        er->readouts = nr;
        er->cap = nc;
    }
    er->readouts[er->n_readouts] = compact;
    return er->slot_of[compact] = er->n_readouts++;
}

int bs_ev_rows_add(bs_ev_rows *er, const bs_plan *p, const bs_item *it, const bs_row *row, int32_t k, int32_t off,
                   int32_t skip, bs_err *e) {
    bs_ev_job *j = NULL;
    for (size_t i = 0; i < p->n_ev; i++)
        if (p->ev[i].question == it->question) j = &p->ev[i];
    const bs_order *o0 = &it->orders[0];
    int32_t m = j ? j->t1 - j->t0 : 0, n = o0->n_ids;
    if (!j || j->done || m <= 0 || k < 0 || k >= row->n_prompts || j->n_ids != n ||
        memcmp(j->ids, o0->ids, (size_t)n * sizeof *o0->ids))
        return BS_OK;
    for (size_t i = 0; i < er->n_jobs; i++)
        if (er->jobs[i] == j) return BS_OK; /* both orders' rows of an item are in one forward */
    /* the prompt's path of blocks, leaf up; position i of the prompt is column
     * blk_start[b] + i - pos[blk_start[b]] of the block b that holds it */
    int32_t path[BS_MAX_TREE_DEPTH + 1], depth = 0;
    for (int32_t b = row->node[row->last[k]]; b >= 0 && depth <= BS_MAX_TREE_DEPTH; b = row->parent[b]) path[depth++] = b;
    int32_t *cols = malloc((size_t)(m + 1) * sizeof *cols);
    if (!cols) return bs_fail(e, BS_ENOMEM, "out of memory");
    int ok = 1;
    for (int32_t r = 0; r <= m && ok; r++) {
        int32_t pos = r < m ? j->t0 + r : n - 1, col = -1;
        for (int d = 0; d < depth && col < 0; d++) {
            int32_t b = path[d], s = row->blk_start[b];
            if (row->blk_len[b] > 0 && pos >= row->pos[s] && pos < row->pos[s] + row->blk_len[b]) col = s + pos - row->pos[s];
        }
        /* every row must be computed here (not in a cached prefix) and be this prompt's token */
        ok = col >= skip && col < row->len && row->ids[col] == o0->ids[pos] && off + col - skip < er->M;
        cols[r] = off + col - skip;
    }
    if (!ok) { free(cols); return BS_OK; }
    if (!er->slot_of) {
        if (!(er->slot_of = malloc((size_t)er->M * sizeof *er->slot_of))) { free(cols); return bs_fail(e, BS_ENOMEM, "out of memory"); }
        for (int32_t i = 0; i < er->M; i++) er->slot_of[i] = -1;
        for (int32_t i = 0; i < er->n_readouts; i++)
            if (er->slot_of[er->readouts[i]] < 0) er->slot_of[er->readouts[i]] = i;
    }
    for (int32_t r = 0; r <= m; r++)
        if ((cols[r] = slot_for(er, cols[r])) < 0) { free(cols); return bs_fail(e, BS_ENOMEM, "out of memory"); }
    bs_ev_job **nj = realloc(er->jobs, (er->n_jobs + 1) * sizeof *nj);
    if (nj) er->jobs = nj;
    const bs_request **nq = nj ? realloc(er->reqs, (er->n_jobs + 1) * sizeof *nq) : NULL;
    if (nq) er->reqs = nq;
    int32_t **ns = nq ? realloc(er->slots, (er->n_jobs + 1) * sizeof *ns) : NULL;
    if (!ns) { free(cols); return bs_fail(e, BS_ENOMEM, "out of memory"); }
    er->slots = ns;
    er->jobs[er->n_jobs] = j;
    er->reqs[er->n_jobs] = p->req;
    er->slots[er->n_jobs++] = cols;
    return BS_OK;
}

int bs_ev_rows_prepare(bs_ev_rows *er, int H, bs_err *e) {
    if (!er->n_jobs) return 0;
    if (!(er->hidden = malloc((size_t)er->n_readouts * H * sizeof *er->hidden)))
        return bs_fail(e, BS_ENOMEM, "out of memory for %d evidence rows", er->n_readouts);
    return 1;
}

/* The head and the spans of job j from its m state rows hs and last row q. */
static int finish_job(bs_ev_job *j, const bs_request *req, const bs_evidence_head *h, const float *hs, const float *q,
                      bs_err *e) {
    int32_t m = j->t1 - j->t0;
    float *ls = malloc((size_t)m * sizeof *ls), *le = malloc((size_t)m * sizeof *le);
    int rc = ls && le ? bs_evidence_scores(h, hs, m, q, ls, le, e) : bs_fail(e, BS_ENOMEM, "out of memory");
    if (rc == BS_OK) {
        int ns = bs_best_spans(ls, le, m, j->rel, BS_EV_SELECT_TOP, j->spans, e);
        if (ns < 0) rc = ns;
        else {
            j->n_spans = bs_evidence_limit(j->spans, ns, req->facts_applied ? (int64_t)req->facts_limit : -1);
            j->done = 1;
        }
    }
    free(ls);
    free(le);
    return rc;
}

int bs_ev_rows_finish(bs_ev_rows *er, const bs_evidence_head *h, bs_err *e) {
    int H = h->d, rc = BS_OK;
    for (size_t i = 0; i < er->n_jobs && rc == BS_OK; i++) {
        bs_ev_job *j = er->jobs[i];
        int32_t m = j->t1 - j->t0;
        float *rows = malloc((size_t)(m + 1) * H * sizeof *rows);
        if (!rows) return bs_fail(e, BS_ENOMEM, "out of memory");
        for (int32_t r = 0; r <= m; r++)
            memcpy(rows + (size_t)r * H, er->hidden + (size_t)er->slots[i][r] * H, (size_t)H * sizeof *rows);
        rc = finish_job(j, er->reqs[i], h, rows, rows + (size_t)m * H, e);
        free(rows);
    }
    return rc;
}

void bs_ev_rows_free(bs_ev_rows *er) {
    for (size_t i = 0; i < er->n_jobs; i++) free(er->slots[i]);
    free(er->slots); free(er->jobs); free(er->reqs); free(er->slot_of); free(er->readouts); free(er->hidden);
    memset(er, 0, sizeof *er);
}

/* 05 §14 E1: one unit over the whole prompt, positions 0..n-1; the readout
 * rows are the state tokens and the last token, read as hidden states. */
static int run_job(bs_runner *r, const bs_request *req, bs_ev_job *j, bs_err *e) {
    const bs_basal_model *bm = r->m;
    const bs_model *m = &bm->model;
    int32_t n = j->n_ids, ms = j->t1 - j->t0, R = ms + 1, H = m->cfg.hidden;
    if (ms <= 0 || j->done) return BS_OK; /* 03 §4.3: no state tokens, evidence [] */
    int32_t *pos = malloc((size_t)n * sizeof *pos), *ro = malloc((size_t)R * sizeof *ro);
    float *hid = malloc((size_t)R * H * sizeof *hid);
    int rc = BS_OK;
    if (!pos || !ro || !hid) { rc = bs_fail(e, BS_ENOMEM, "out of memory"); goto done; }
    for (int32_t i = 0; i < n; i++) pos[i] = i;
    for (int32_t i = 0; i < ms; i++) ro[i] = j->t0 + i;
    ro[ms] = n - 1;
    bs_unit u = {.q_start = 0, .q_len = n, .n_ranges = 1, .r_start = {0}, .r_len = {n}};
    bs_fwd_input in = {.n_tokens = n, .ids = j->ids, .pos = pos, .n_units = 1, .units = &u, .n_readouts = R,
                       .readouts = ro, .n_out_ids = 0, .hidden = hid, .profile = r->profile};
    bs_fwd_hook hook;
    bs_fwd_hook_attach(&hook, m, r->preemptible ? r->gate : NULL, r->watch, r->watch_ctx, &in);
    if (r->gate) (r->preemptible ? bs_gate_enter_preemptible : bs_gate_enter_urgent)(r->gate);
    rc = bs_forward(m, &in, NULL, e);
    if (rc == BS_OK) bs_fwd_hook_done(&hook);
    if (r->gate) bs_gate_leave(r->gate);
    r->forwards++;
    r->forward_tokens += n;
    r->evidence_forwards++;
    if (rc < 0) goto done;
    rc = finish_job(j, req, bm->evidence, hid, hid + (size_t)ms * H, e);
done:
    free(pos); free(ro); free(hid);
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
