/* Answer objects of the basal-1.5 question types multi and act (spec 03 §1.4,
 * §2.4–§2.6), from the final distributions of their readouts. Same objects on
 * both endpoints. */
#ifndef BS_ANSWER_EXT_H
#define BS_ANSWER_EXT_H

#include "decision/decide.h"
#include "protocol/request.h"
#include "base/util.h"

/* "probabilities":{key: p, …} over q's keys in canonical order (every answer
 * type that reports a distribution writes it this way). */
void bs_answer_put_probs(bs_buf *b, const bs_question *q, const double *p);

/* {"type":"multi","selected":[…],"probabilities":{…},"threshold":t,"set_confidence":c}
 * from pyes[i] = the calibrated P(yes) of label i (label order). */
int bs_answer_multi(bs_buf *out, const bs_question *q, const double *pyes, bs_err *e);

/* The act answer for the base distribution p (canonical key order) with the
 * model's calibration (temperatures present, certified thresholds). When the
 * max_error rule refuses and there is no defer action, *fails is set and
 * nothing is written (the request fails, 03 §2.5). out may be NULL to decide
 * only. */
int bs_answer_act(bs_buf *out, const bs_question *q, const bs_calibration *cal, const double *p, int *fails,
                  bs_err *e);

#endif
