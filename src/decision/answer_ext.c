/* multi and act answer objects (spec 03 §1.4, §2.4–§2.6): the selection rule
 * and set confidence, expected costs, the defer rule of max_error and the
 * calibration flag, written with the response JSON writer. */
#include "decision/answer_ext.h"

#include <stdlib.h>
#include <string.h>

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

/* ---- act (03 §2.4–§2.6) ---- */

typedef struct act_result {
    size_t best;             /* the row with the minimal expected cost */
    const bs_text *action;   /* the answered action (the defer action after a refusal) */
    int refused;             /* max_error replaced row `best` by the defer action */
    int no_threshold;        /* max_error without a certified threshold */
    int fails;               /* a refusal is due but there is no defer action */
} act_result;

static void act_decide(const bs_question *q, const bs_calibration *cal, const double *p, double *expected,
                       act_result *r) {
    const bs_act_spec *a = q->act;
    memset(r, 0, sizeof *r);
    r->best = bs_act_expected(a->costs, a->n_actions, p, q->n_options, expected);
    r->action = &a->actions[r->best];
    if (!a->max_error) return;
    double thr;
    if (!bs_calibration_threshold(cal, a->max_error, &thr)) {
        r->no_threshold = 1;
        return;
    }
    double conf = bs_max_p(p, (int)q->n_options);
    int is_defer = a->defer.s && a->defer.len == r->action->len && !memcmp(a->defer.s, r->action->s, a->defer.len);
    if (conf < thr && !is_defer) {
        if (!a->defer.s) {
            r->fails = 1;
            return;
        }
        r->refused = 1;
        r->action = &a->defer;
    }
}

static int text_same(const bs_text *x, const bs_text *y) {
    return x->len == y->len && (x->len == 0 || !memcmp(x->s, y->s, x->len));
}

static void put_act(bs_buf *b, const bs_question *q, const bs_calibration *cal, const double *p,
                    const double *expected, const act_result *r) {
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

/* ---- multi (03 §1.4) ---- */

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
    act_result ar;
    act_decide(q, cal, p, expected, &ar);
    if (ar.fails) *fails = 1;
    else if (out) put_act(out, q, cal, p, expected, &ar);
    free(expected);
    return BS_OK;
}
