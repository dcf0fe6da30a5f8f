/* The answer objects of /v1/systemone and /v1/basal (engine/answer.c, the
 * one writer of answer JSON). */
#ifndef BS_ENGINE_ANSWER_H
#define BS_ENGINE_ANSWER_H

#include "base/util.h"
#include "decision/decide.h"
#include "engine/plan.h"
#include "protocol/request.h"

/* "probabilities":{key: p, …} over q's keys in canonical order (every answer
 * type that reports a distribution writes it this way). */
void bs_answer_put_probs(bs_buf *b, const bs_question *q, const double *p);

/* {"type":"multi","selected":[…],"probabilities":{…},"threshold":t,"set_confidence":c}
 * from pyes[i] = the calibrated P(yes) of label i (label order). */
int bs_answer_multi(bs_buf *out, const bs_question *q, const double *pyes, bs_err *e);

/* The act answer for the base distribution p (canonical key order) with the
 * model's calibration (decision/act.h). When the max_error rule refuses and
 * there is no defer action, *fails is set and nothing is written (the
 * request fails, 03 §2.5). */
int bs_answer_act(bs_buf *out, const bs_question *q, const bs_calibration *cal, const double *p, int *fails,
                  bs_err *e);

#endif
