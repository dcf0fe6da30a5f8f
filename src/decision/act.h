/* The act decision (spec 03 §2.4–§2.6) in numbers: the expected cost of
 * every action, the action with the least, the max_error rule with its
 * defer action. engine/answer.c writes the answer object from it. */
#ifndef BS_DECISION_ACT_H
#define BS_DECISION_ACT_H

#include "base/util.h"
#include "decision/decide.h"
#include "protocol/request.h"

typedef struct bs_act_result {
    size_t best;             /* the row with the minimal expected cost */
    const bs_text *action;   /* the answered action (the defer action after a refusal) */
    int refused;             /* max_error replaced row `best` by the defer action */
    int no_threshold;        /* max_error without a certified threshold */
    int fails;               /* a refusal is due but there is no defer action (the request fails) */
} bs_act_result;

/* For the base distribution p (canonical key order) with the model's
 * calibration. expected (q->act->n_actions values) may be NULL. */
int bs_act_decide(const bs_question *q, const bs_calibration *cal, const double *p, double *expected,
                  bs_act_result *r, bs_err *e);

#endif
