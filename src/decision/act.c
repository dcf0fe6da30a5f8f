/* See decision/act.h. */
#include "decision/act.h"

#include <stdlib.h>
#include <string.h>

static void decide_into(const bs_question *q, const bs_calibration *cal, const double *p, double *expected,
                        bs_act_result *r) {
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

int bs_act_decide(const bs_question *q, const bs_calibration *cal, const double *p, double *expected,
                  bs_act_result *r, bs_err *e) {
    double *tmp = NULL;
    if (!expected) {
        if (!(tmp = malloc((q->act->n_actions ? q->act->n_actions : 1) * sizeof *tmp)))
            return bs_fail(e, BS_ENOMEM, "out of memory");
        expected = tmp;
    }
    decide_into(q, cal, p, expected, r);
    free(tmp);
    return BS_OK;
}
