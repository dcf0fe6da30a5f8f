/* What the parity tools (spec 06 §6) share: a plan's items written in the
 * reference export format of basal-rs, requests planned as the server plans
 * them, and the JSON comparisons of check-prompts. */
#ifndef BS_CLI_PARITY_ITEMS_H
#define BS_CLI_PARITY_ITEMS_H

#include "base/util.h"
#include "engine/plan.h"
#include "protocol/pyjson.h"

/* Per-item results after the forward (01 §6–§8). */
typedef struct {
    double p_avg[BS_MAX_LETTER_OPTIONS], p_cal[BS_MAX_LETTER_OPTIONS], temp;
} par_item_res;

void par_put_field(bs_buf *b, const bj_value *rec, const char *key);
int par_jeq(const bj_value *a, const bj_value *b);
void par_case_body(const bj_value *rq, const char *model, bs_buf *b);
int par_plan_body(bs_plan *p, const bs_buf *body, bs_dialect d, const bs_basal_model *m, bs_letter_cache *lc,
                     bs_buf *err, bs_err *e);
void par_item_name(bs_buf *b, const bs_plan *p, const bs_item *it);
int par_put_item_core(bs_buf *b, const bs_plan *p, const bs_item *item, const bs_basal_model *m, par_item_res *res,
                         int with_argmax, bs_err *e);
size_t par_plan_n_items(const bs_plan *p);
const bs_item *par_plan_item(const bs_plan *p, size_t i);
char *par_path_in(const char *dir, const char *name);

#endif
