/* Every answer object basal-c writes (spec 02 §4.6, 03): choice, noul and
 * score from their final distributions, multi and act from the decision
 * layer's numbers, evidence spans, and the whole 200 body of a plan. The one
 * owner of answer JSON (error bodies are protocol/reply.c's): the engine,
 * the decision maths and the model return numbers. */
#include "engine/answer.h"

#include <stdlib.h>
#include <string.h>

#include "decision/act.h"
#include "decision/decide.h"
#include "engine/evidence_run.h"
#include "engine/plan_int.h"
#include "protocol/respjson.h"

void bs_answer_put_probs(bs_buf *b, const bs_question *q, const double *p) {
    bs_buf_puts(b, "\"probabilities\":{");
    for (size_t i = 0; i < q->n_options; i++) {
        if (i) bs_buf_putc(b, ',');
        bs_resp_string(b, q->keys[i].s, q->keys[i].len);
        bs_buf_putc(b, ':');
        bs_resp_double(b, p[i]);
    }
    bs_buf_putc(b, '}');
}


static int text_same(const bs_text *x, const bs_text *y) {
    return x->len == y->len && (x->len == 0 || !memcmp(x->s, y->s, x->len));
}

static void put_act(bs_buf *b, const bs_question *q, const bs_calibration *cal, const double *p,
                    const double *expected, const bs_act_result *r) {
    const bs_act_spec *a = q->act;
    size_t k = q->n_options;
    bs_buf_puts(b, "{\"type\":\"act\",\"action\":");
    bs_resp_string(b, r->action->s, r->action->len);
    bs_buf_puts(b, ",\"expected_costs\":{");
    /* a JSON object: an action name that repeats (a short-form outcome named
     * "defer") keeps its first position and takes the last row's value */
    int first = 1;
    for (size_t i = 0; i < a->n_actions; i++) {
        size_t j, last = i;
        for (j = 0; j < i && !text_same(&a->actions[j], &a->actions[i]); j++) {}
        if (j < i) continue;
        for (j = i + 1; j < a->n_actions; j++)
            if (text_same(&a->actions[j], &a->actions[i])) last = j;
        if (!first) bs_buf_putc(b, ',');
        first = 0;
        bs_resp_string(b, a->actions[i].s, a->actions[i].len);
        bs_buf_putc(b, ':');
        bs_resp_double(b, bs_round6(expected[last]));
    }
    bs_buf_puts(b, "},\"answer\":");
    int am = bs_argmax(p, (int)k);
    bs_resp_string(b, q->keys[am].s, q->keys[am].len);
    bs_buf_putc(b, ',');
    bs_answer_put_probs(b, q, p);
    bs_buf_puts(b, ",\"confidence\":");
    bs_resp_double(b, bs_max_p(p, (int)k));
    if (r->no_threshold) {
        bs_buf_puts(b, ",\"max_error\":\"no certified threshold for this target\"");
    } else if (r->refused) {
        bs_buf_puts(b, ",\"refused\":");
        bs_resp_string(b, a->actions[r->best].s, a->actions[r->best].len);
    }
    /* certified thresholds hold only for yes/no prompts and prompts without keys */
    int validated = cal->calibrated && (a->base == BS_Q_NOUL || q->hide);
    bs_buf_puts(b, validated ? ",\"calibration\":\"validated\"}" : ",\"calibration\":\"unvalidated\"}");
}


int bs_answer_multi(bs_buf *b, const bs_question *q, const double *pyes, bs_err *e) {
    const bs_multi_spec *ms = q->multi;
    size_t n = ms->n_labels, ns = 0;
    size_t *order = malloc(n * sizeof *order), *sel = malloc(n * sizeof *sel);
    unsigned char *mark = malloc(n);
    int rc = BS_OK;
    if (!order || !sel || !mark) {
        rc = bs_fail(e, BS_ENOMEM, "out of memory");
        goto done;
    }
    double conf = bs_multi_select(pyes, n, ms->threshold, ms->has_max, ms->max, ms->has_min, ms->min, order, sel,
                                  &ns, mark, &rc);
    if (rc < 0) {
        rc = bs_fail(e, rc, "out of memory");
        goto done;
    }
    bs_buf_puts(b, "{\"type\":\"multi\",\"selected\":[");
    for (size_t i = 0; i < ns; i++) {
        if (i) bs_buf_putc(b, ',');
        bs_resp_string(b, ms->label_keys[sel[i]].s, ms->label_keys[sel[i]].len);
    }
    bs_buf_puts(b, "],\"probabilities\":{");
    for (size_t i = 0; i < n; i++) {
        if (i) bs_buf_putc(b, ',');
        bs_resp_string(b, ms->label_keys[i].s, ms->label_keys[i].len);
        bs_buf_putc(b, ':');
        bs_resp_double(b, pyes[i]);
    }
    bs_buf_puts(b, "},\"threshold\":");
    bs_resp_double(b, ms->threshold);
    bs_buf_puts(b, ",\"set_confidence\":");
    bs_resp_double(b, conf);
    bs_buf_putc(b, '}');
done:
    free(order);
    free(sel);
    free(mark);
    return rc;
}

int bs_answer_act(bs_buf *out, const bs_question *q, const bs_calibration *cal, const double *p, int *fails,
                  bs_err *e) {
    *fails = 0;
    double *expected = malloc((q->act->n_actions ? q->act->n_actions : 1) * sizeof *expected);
    if (!expected) return bs_fail(e, BS_ENOMEM, "out of memory");
    bs_act_result ar;
    int rc = bs_act_decide(q, cal, p, expected, &ar, e);
    if (rc == BS_OK && ar.fails) *fails = 1;
    else if (rc == BS_OK) put_act(out, q, cal, p, expected, &ar);
    free(expected);
    return rc;
}

/* Byte offset of character c of s (clamped to the end). */
static size_t char_to_byte(const char *s, size_t len, int64_t c) {
    size_t i = 0;
    for (int64_t k = 0; k < c && i < len; k++) {
        i++;
        while (i < len && ((unsigned char)s[i] & 0xC0) == 0x80) i++;
    }
    return i;
}

void bs_evidence_json(bs_buf *b, const char *state, size_t state_len, const bs_ev_span *s, int n) {
    bs_buf_putc(b, '[');
    for (int i = 0; i < n; i++) {
        size_t a = char_to_byte(state, state_len, s[i].start), z = char_to_byte(state, state_len, s[i].end);
        if (i) bs_buf_putc(b, ',');
        bs_buf_puts(b, "{\"text\":");
        bs_resp_string(b, state + a, a < z ? z - a : 0);
        bs_buf_printf(b, ",\"start\":%lld,\"end\":%lld,\"probability\":", (long long)s[i].start, (long long)s[i].end);
        bs_resp_double(b, s[i].p);
        bs_buf_putc(b, '}');
    }
    bs_buf_putc(b, ']');
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

static void put_legend(bs_buf *b, const bs_question *q, bs_dialect d) {
    bs_buf_puts(b, "\"legend\":{");
    for (size_t i = 0; i < q->n_options; i++) {
        if (i) bs_buf_putc(b, ',');
        bs_resp_string(b, q->keys[i].s, q->keys[i].len);
        bs_buf_putc(b, ':');
        if (d == BS_DIALECT_SYSTEMONE && q->legend && q->legend[i]) bs_resp_value(b, q->legend[i]);
        else bs_resp_string(b, q->options[i].s, q->options[i].len);
    }
    bs_buf_putc(b, '}');
}

/* One answer object from the final distribution p (canonical key order). */
static void put_answer(bs_buf *b, const bs_question *q, bs_dialect d, const double *p) {
    size_t k = q->n_options;
    int m = bs_argmax(p, (int)k);
    bs_buf_puts(b, "{\"type\":");
    if (q->type == BS_Q_NOUL) {
        bs_buf_puts(b, "\"noul\",\"noul\":");
        bs_resp_double(b, p[0]);
        if (d == BS_DIALECT_BASAL) {
            bs_buf_puts(b, ",\"probabilities\":{\"true\":");
            bs_resp_double(b, p[0]);
            bs_buf_puts(b, ",\"false\":");
            bs_resp_double(b, p[1]);
            bs_buf_puts(b, "},\"confidence\":");
            bs_resp_double(b, bs_max_p(p, (int)k));
        }
    } else if (q->type == BS_Q_SCORE) {
        bs_buf_puts(b, "\"score\",\"score\":");
        bs_resp_double(b, bs_score_value(p, (int)k));
        bs_buf_putc(b, ',');
        put_legend(b, q, d);
        bs_buf_putc(b, ',');
        bs_answer_put_probs(b, q, p);
        bs_buf_puts(b, ",\"confidence\":");
        /* a single level is certain (02 §4.6); the formula would divide by zero */
        bs_resp_double(b, k == 1 ? 1.0 : d == BS_DIALECT_BASAL ? bs_max_p(p, (int)k) : bs_score_confidence(p, (int)k));
    } else {
        bs_buf_puts(b, "\"choice\",\"choice\":");
        bs_resp_string(b, q->keys[m].s, q->keys[m].len);
        bs_buf_putc(b, ',');
        bs_answer_put_probs(b, q, p);
        bs_buf_puts(b, ",\"confidence\":");
        bs_resp_double(b, k == 1 ? 1.0 : d == BS_DIALECT_BASAL ? bs_max_p(p, (int)k) : bs_choice_confidence(p, (int)k));
    }
    bs_buf_putc(b, '}');
}

int bs_plan_answer(const bs_plan *p, const bs_basal_model *m, double latency_ms, bs_buf *out, bs_err *e) {
    const bs_request *r = p->req;
    size_t branches = 0, item = 0;
    bs_buf_puts(out, "{\"model\":");
    bs_resp_cstr(out, m->name);
    bs_buf_puts(out, ",\"answers\":{");
    for (size_t qi = 0; qi < r->n_questions; qi++) {
        const bs_question *q = &r->questions[qi];
        double pf[BS_MAX_LETTER_OPTIONS] = {1.0};
        size_t ni = bs_plan_question_items(q);
        if (qi) bs_buf_putc(out, ',');
        bs_resp_string(out, q->id.s, q->id.len);
        bs_buf_putc(out, ':');
        if (item + ni > p->n_items || (ni && p->items[item].question != qi))
            return bs_fail(e, BS_EINTERNAL, "plan and request disagree at question %zu", qi);
        int rc;
        if (q->multi) { /* one yes/no readout per label; P = element 0 */
            double *pyes = malloc((ni ? ni : 1) * sizeof *pyes);
            if (!pyes) return bs_fail(e, BS_ENOMEM, "out of memory");
            for (size_t b = 0; b < ni; b++) {
                if ((rc = bs_plan_item_distribution(&p->items[item + b], q, m, pf, e)) < 0) {
                    free(pyes);
                    return rc;
                }
                pyes[b] = pf[0];
            }
            rc = bs_answer_multi(out, q, pyes, e);
            free(pyes);
            if (rc < 0) return rc;
            item += ni;
            branches += ni;
            continue;
        }
        if (bs_plan_is_large_choice(q)) { /* 03 §5.4: the normal choice answer over all n keys */
            const bs_plan_lc *plc = NULL;
            for (size_t i = 0; i < p->n_lc && !plc; i++)
                if (p->lcs[i].question == qi) plc = &p->lcs[i];
            if (!plc || p->round != 3 || plc->lc.stage != BS_LC_DONE)
                return bs_fail(e, BS_EINTERNAL, "large choice %zu reached the answer unfinished", qi);
            put_answer(out, q, r->dialect, plc->p);
            item += ni;
            branches++;
            continue;
        }
        if (ni) {
            if ((rc = bs_plan_item_distribution(&p->items[item++], q, m, pf, e)) < 0) return rc;
            branches++;
        }
        if (q->act) {
            int fails = 0;
            if ((rc = bs_answer_act(out, q, &m->calib, pf, &fails, e)) < 0) return rc;
            if (fails) return bs_fail(e, BS_EINTERNAL, "act refusal without a defer action reached the answer");
        } else {
            put_answer(out, q, r->dialect, pf);
        }
        /* 03 §2.6: an act answer takes its evidence as the last key too */
        bs_ev_answer(out, p, qi);
    }
    if (branches != p->usage.branches)
        return bs_fail(e, BS_EINTERNAL, "plan answers %zu readouts by the model, planned %zu", branches,
                       p->usage.branches);
    bs_buf_printf(out, "},\"usage\":{\"input_tokens\":%zu,\"output_tokens\":0,\"questions\":%zu,\"branches\":%zu",
                  p->usage.input_tokens, p->usage.questions, p->usage.branches);
    if (latency_ms >= 0) {
        bs_buf_puts(out, ",\"latency_ms\":");
        bs_resp_double(out, latency_ms);
    }
    bs_buf_puts(out, "}}");
    if (out->oom) return bs_fail(e, BS_ENOMEM, "out of memory");
    return BS_OK;
}
