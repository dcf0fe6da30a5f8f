/* What engine/plan.c shares with engine/answer.c (not for other users). */
#ifndef BS_ENGINE_PLAN_INT_H
#define BS_ENGINE_PLAN_INT_H

#include "engine/plan.h"

/* A choice with more options than letters (03 §5): asked in two rounds. */
int bs_plan_is_large_choice(const bs_question *q);
/* The readouts (items) a question takes in round 1. */
size_t bs_plan_question_items(const bs_question *q);
/* The final (calibrated) distribution of one item, canonical key order. */
int bs_plan_item_distribution(const bs_item *it, const bs_question *q, const bs_basal_model *m, double *pf,
                              bs_err *e);

#endif
