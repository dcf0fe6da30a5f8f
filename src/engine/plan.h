/* Planning and answering one request (spec 04 §3, 01 §2–§9, 02 §4.5–§5.3,
 * 03 §5): a validated request becomes items (one per question with 2..10
 * options, one per multi label, one per round-1 group of a choice with 11..255
 * options), each with its order prompts rendered, tokenized whole, and the
 * letter ids of its k options; after the forward, each item's letter logits
 * become the calibrated distribution and the dialect's answer object.
 *
 * A plan with large choices takes two engine steps: round 1 computes
 * p->items; bs_plan_advance then fits each large choice and prepares its
 * finalist readout (p->finals, both orders; order 0 alone for a model served
 * with orders 1), which the engine computes in a
 * second step; bs_plan_advance after that step gives the final distributions.
 * bs_plan_step_items names the items the next step computes. */
#ifndef BS_PLAN_H
#define BS_PLAN_H

#include <pthread.h>
#include <stdint.h>

#include "decision/large_choice.h"
#include "protocol/request.h"
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
    bs_prompt_parts parts; /* where its state, question and options lie in prompt */
    int32_t *ids;        /* its token ids */
    int32_t n_ids;
    float logits[BS_MAX_LETTER_OPTIONS]; /* filled by the forward, by position */
    float *lens;         /* a plan with lens set: lens[l * k + p], the letter logit at position p after
                            layer l (engine/lens.h; the last layer's equal logits); else NULL */
} bs_order;

typedef struct bs_item {
    size_t question;     /* index into the request's questions */
    size_t branch;       /* multi: the label index (item "<question>#<branch>", 04 §3 P2); a large choice's
                            round-1 item: its group index; else 0 */
    size_t k;            /* options */
    int n_orders;        /* order prompts computed: 2 (original, reversed), or 1 for a round-1 group of a
                            large choice (03 §5.2: order 0 only) and for every readout of a model served
                            with orders 1 (its large choices' finals too); orders[n_orders..] are
                            empty */
    int32_t state_len;   /* tokens up to and including the state (04 §3 P4); 0 = unknown */
    int32_t letter_ids[BS_MAX_LETTER_OPTIONS];
    bs_order orders[BS_N_ORDERS];
} bs_item;

/* One choice question with 11..255 options (03 §5). */
typedef struct bs_plan_lc {
    size_t question;         /* index into the request's questions */
    size_t first_item;       /* its round-1 groups are items[first_item .. first_item + lc.n_round1) */
    bs_large_choice lc;      /* groups, targets, fits: plain data (decision/large_choice.h) */
    double p[BS_LC_MAX_OPTIONS]; /* the final calibrated distribution, criteria order (after round 2) */
} bs_plan_lc;

/* What a request cost, known once it is planned (02 §4.6 usage) and once its
 * batch ran (computed_tokens). Nothing re-reads a reply to learn it. */
typedef struct bs_usage {
    size_t input_tokens;     /* sum of every order prompt's length */
    size_t questions;        /* questions in the request */
    size_t branches;         /* readouts the model computed: one per question with 2..10 options,
                                one per multi label (02 §4.6) */
    int64_t computed_tokens; /* tokens the forwards of its batch computed (the whole batch's: shared
                                prefixes are computed once for all its requests); 0 until it ran */
} bs_usage;

typedef struct bs_plan {
    bs_request *req;         /* owned */
    bs_item *items;          /* round 1: every readout of the request */
    size_t n_items;
    bs_plan_lc *lcs;         /* the large choices, question order (heap, ~11 KiB each) */
    size_t n_lc;
    bs_item *finals;         /* round 2: lcs[i]'s finalist readout is finals[i] (both orders, or orders 1's one) */
    size_t n_finals;         /* 0 until bs_plan_advance prepared round 2 */
    int round;               /* the step the plan waits for: 1 (items), 2 (finals), 3 (answered by the model) */
    int want_state_len;      /* as asked of bs_plan_request: finals get a state_len too */
    bs_usage usage;
    int64_t cost;            /* the trie size of its order prompts (04 §3 P5), at least 1 */
    struct bs_ev_job *ev;    /* evidence forwards, question order (engine/evidence_run.h) */
    size_t n_ev;
    int lens;                /* the logit lens: its forwards record every layer's letter logits of its
                                items (bs_order.lens; engine/lens.h) */
} bs_plan;

/* What one request may ask of the server, checked while it is planned and
 * before any work that grows faster than its tokens (a request over a limit
 * costs at most about the limit's worth of tokenization). 0 = no limit. */
typedef struct bs_plan_limits {
    size_t max_questions;        /* questions in one request */
    int64_t max_request_tokens;  /* distinct tokens of its prompts: its trie size, what its forward
                                    computes (a state asked many questions counts once); the prompts'
                                    plain sum (usage.input_tokens) may be BS_INPUT_TOKENS_FACTOR times it */
} bs_plan_limits;
#define BS_DEFAULT_MAX_QUESTIONS 1024
#define BS_DEFAULT_MAX_REQUEST_TOKENS 65536
#define BS_INPUT_TOKENS_FACTOR 32

/* Steps 8–10 of 02 §3 for a decoded body already routed to m: validation,
 * the capability check and planning, the one way from a body to a plan (the
 * engine and every command use it). Takes ownership of body. A request error
 * (validation, unsupported, a prompt longer than the model's limit, letters
 * that are not single tokens) fills rep in d's form and returns BS_EINVAL;
 * other negative codes are the server's own failures (rep left empty).
 * want_state_len: find each item's state prefix length (for the state cache).
 * lim: the server's limits (NULL: none, for commands on the operator's files). */
int bs_plan_request(bs_plan *p, bj_value *body, bs_dialect d, const bs_basal_model *m, bs_letter_cache *lc,
                    const bs_plan_limits *lim, int want_state_len, bs_reply *rep, bs_err *e);
/* Steps 4–10 for commands that read a body from a file: decode, then a model
 * field other than m's name is an unknown model, then bs_plan_request without
 * limits. */
int bs_plan_text(bs_plan *p, const char *data, size_t len, bs_dialect d, const bs_basal_model *m,
                 bs_letter_cache *lc, bs_reply *rep, bs_err *e);
/* Frees the items and the request; p is then empty. */
void bs_plan_free(bs_plan *p);

/* The trie size of the plan's order prompts (04 §3 P5), at least 1: p->cost
 * when planning set it, else counted from the items of the next step. */
int64_t bs_plan_cost(const bs_plan *p);

/* The items the plan's next engine step computes (round 1: p->items; round 2:
 * p->finals; none once the model has answered): *items and the count. */
size_t bs_plan_step_items(const bs_plan *p, bs_item **items);

/* After an engine step computed bs_plan_step_items' logits. Round 1 with large
 * choices: fits each one on its groups (03 §5.3), prepares its finalist item
 * in both orders (order 0 alone with orders 1; 04 §3 P3: prompts, tokens,
 * letter ids; usage.input_tokens grows by those prompts), sets round 2 and p->cost to the finals' trie size,
 * and returns 1: the plan needs another step. Otherwise finishes every large
 * choice (refit, calibration into lcs[i].p), sets round 3 and returns 0: the
 * plan can be answered. A finalist prompt longer than the model's limit fails
 * only this request (04 §3 P7): rep filled, BS_EINVAL. Non-finite logits or
 * other failures: negative codes. */
int bs_plan_advance(bs_plan *p, const bs_basal_model *m, bs_letter_cache *lc, bs_reply *rep, bs_err *e);

/* The 200 body of the request's dialect (02 §4.6 / §5.3). latency_ms < 0
 * leaves usage.latency_ms out (the `decide` form). */
/* Written by engine/answer.c, the owner of answer JSON. */
int bs_plan_answer(const bs_plan *p, const bs_basal_model *m, double latency_ms, bs_buf *out, bs_err *e);

/* 03 §2.5: an act question whose max_error refusal has no defer action fails
 * the whole request. Returns 1 with rep filled (422 {"detail":[value_error at
 * ["body","questions",q]]} or /v1/basal {"error":…}; the first such question),
 * 0 when the plan can be answered, or a negative code. Call after the forward
 * and before bs_plan_answer (which fails on such a plan). */
int bs_plan_refusal(const bs_plan *p, const bs_basal_model *m, bs_reply *rep, bs_err *e);

/* The item's own view (06 §6 parity records): a large choice's round-1 group
 * or finalist item shows a subset of its question's options, and its
 * orders[o].perm name them by their index in the question. loc gets a shallow
 * copy of it (never freed: it shares the prompts and ids) whose perms index
 * the item's own options 0..k-1, and members[i] the question's index of the
 * item's option i (orders[0]'s order). An ordinary item is unchanged (members
 * 0..k-1). BS_EINTERNAL when an order names an option order 0 lacks. */
int bs_plan_item_local(const bs_item *it, bs_item *loc, size_t *members, bs_err *e);
/* For parity exports (06 §6): 01 §6–§8 of one item of p after its forward —
 * the order-averaged distribution avg, the temperature of the item's type key
 * and the calibrated distribution cal (it->k entries each, in the order of the
 * item's own options: bs_plan_item_local's members). */
int bs_plan_item_dist(const bs_plan *p, const bs_item *it, const bs_basal_model *m, double *avg, double *temp,
                      double *cal, bs_err *e);
/* The question text of an item: q's instructions, or for a multi branch the
 * instructions with the label suffix of 03 §1.3 (built into tmp). */
bs_text bs_plan_item_question(const bs_question *q, size_t branch, bs_buf *tmp);
#endif
