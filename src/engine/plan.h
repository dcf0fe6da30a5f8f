/* Planning and answering one request (spec 04 §3, 01 §2–§9, 02 §4.5–§5.3):
 * a validated request becomes items (one per question with 2..10 options),
 * each with its two order prompts rendered, tokenized whole, and the letter
 * ids of its k options; after the forward, each item's letter logits become
 * the calibrated distribution and the dialect's answer object. */
#ifndef BS_PLAN_H
#define BS_PLAN_H

#include <pthread.h>
#include <stdint.h>

#include "core/request.h"
#include "model/basal_model.h"

#define BS_N_ORDERS 2

/* Letter ids per option count k, computed once from the first prompt with k
 * options and kept for the process (01 §5). Thread-safe. */
typedef struct bs_letter_cache {
    pthread_mutex_t mu;
    int state[BS_MAX_LETTER_OPTIONS + 1]; /* 0 unknown, 1 known, -1 not single tokens */
    int32_t ids[BS_MAX_LETTER_OPTIONS + 1][BS_MAX_LETTER_OPTIONS];
} bs_letter_cache;

void bs_letter_cache_init(bs_letter_cache *c);
void bs_letter_cache_free(bs_letter_cache *c);

typedef struct bs_order {
    size_t perm[BS_MAX_LETTER_OPTIONS];
    bs_buf prompt;       /* the prompt text */
    int32_t *ids;        /* its token ids */
    int32_t n_ids;
    float logits[BS_MAX_LETTER_OPTIONS]; /* filled by the forward, by position */
} bs_order;

typedef struct bs_item {
    size_t question;     /* index into the request's questions */
    size_t branch;       /* multi: the label index (item "<question>#<branch>", 04 §3 P2); else 0 */
    size_t k;            /* options */
    int32_t state_len;   /* tokens up to and including the state (04 §3 P4); 0 = unknown */
    int32_t letter_ids[BS_MAX_LETTER_OPTIONS];
    bs_order orders[BS_N_ORDERS];
} bs_item;

typedef struct bs_plan {
    const bs_request *req;   /* borrowed */
    bs_item *items;
    size_t n_items;
    size_t input_tokens;     /* sum of every order prompt's length (02 §4.6) */
} bs_plan;

/* Builds the items of a validated request. Planning errors (a prompt longer
 * than the model's limit: 422 prompt_too_long; letters that are not single
 * tokens: 500) fill rep and return BS_EINVAL. */
int bs_plan_build(bs_plan *p, const bs_basal_model *m, bs_letter_cache *lc, const bs_request *r,
                  int want_state_len, bs_reply *rep, bs_err *e);
void bs_plan_free(bs_plan *p);

/* The trie size of the plan's order prompts (04 §3 P5), at least 1. */
int64_t bs_plan_cost(const bs_plan *p);

/* The 200 body of the request's dialect (02 §4.6 / §5.3). latency_ms < 0
 * leaves usage.latency_ms out (the `decide` form). */
int bs_plan_answer(const bs_plan *p, const bs_basal_model *m, double latency_ms, bs_buf *out, bs_err *e);

/* 03 §2.5: an act question whose max_error refusal has no defer action fails
 * the whole request. Returns 1 with rep filled (422 {"detail":[value_error at
 * ["body","questions",q]]} or /v1/basal {"error":…}; the first such question),
 * 0 when the plan can be answered, or a negative code. Call after the forward
 * and before bs_plan_answer (which fails on such a plan). */
int bs_plan_refusal(const bs_plan *p, const bs_basal_model *m, bs_reply *rep, bs_err *e);

/* The internal-error reply: 500 {"error":"internal","detail":"<msg>"}
 * (/v1/basal: 500 {"error":"internal","detail":…} as well, 02 §5.2). */
void bs_reply_internal(bs_reply *rep, const char *msg);

#endif
