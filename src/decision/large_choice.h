/* Choice with 11–255 options on /v1/systemone (spec 03 §5, basal-rs strategy
 * `luce2-1o`): the engine-free part. The letter readout covers at most ten
 * options, so the options are asked in groups of at most ten and one joint
 * distribution is fitted to the groups' answers (a Luce model by maximum
 * likelihood, Newton's method in float64).
 *
 * Everything here is plain data: a bs_large_choice holds no pointers, so the
 * engine can keep it in a job between its two engine steps, copy it, or drop
 * it (nothing to free). src/decision and src/base only; no engine or model dependency.
 *
 * Intended call sequence for one question with n = q->n_options in 11..255
 * (the engine owns prompts, tokenization and the forward):
 *
 *   bs_large_choice lc;
 *   bs_lc_plan_round1(&lc, n, e);
 *   // Round 1, engine step 1: one prompt per group i < lc.n_round1, order 0
 *   // only. The prompt is the question's normal prompt (state, instructions,
 *   // language) over the group's options:
 *   //   size_t perm[BS_LC_GROUP_MAX];
 *   //   bs_lc_group_perm(&lc.group[i], 0, perm);
 *   //   bs_prompt_build(..., q->options, perm, lc.group[i].size, e);
 *   // and its letter ids are those of k = lc.group[i].size options (01 §5).
 *   // The forward gives logits1[i][0..size-1] (by position, A first).
 *   bs_lc_finish_round1(&lc, logits1, e);       // targets, first fit, finalists
 *   // Round 2, engine step 2 (a follow-up of the same job): the finalist
 *   // group lc.group[lc.n_round1] (10 options) in BOTH orders:
 *   //   bs_lc_group_perm(bs_lc_finalists(&lc), 0 or 1, perm); bs_prompt_build(...)
 *   // giving logits_o0[0..9] and logits_o1[0..9] (by position).
 *   double p[BS_LC_MAX_OPTIONS];
 *   bs_lc_finish_round2(&lc, logits_o0, logits_o1,
 *                       bs_calibration_temp(&m->calib, BS_TYPE_CHOICE), p, e);
 *   // p[0..n-1] is the final calibrated distribution in criteria (canonical)
 *   // order: the normal choice answer over all n keys (choice = key at
 *   // bs_argmax(p, n), probabilities for all n keys, confidence =
 *   // bs_choice_confidence(p, n)).
 *
 * Usage (03 §5.5): the question counts as one branch; input_tokens adds the
 * token counts of the lc.n_round1 round-1 prompts (one order each) and of the
 * two round-2 prompts; bs_lc_prompt_count(n) prompts in all. More than 255
 * options is a validation error (02 C6) before planning; evidence is refused
 * for more than 10 options, also at validation. /v1/basal never uses this.
 *
 * A bs_large_choice is about 9 KiB: keep it in the job (heap), not on a small
 * thread stack. A client that leaves between the rounds just drops it. The
 * fit allocates n*n doubles (at most 508 KiB) per call and frees them.
 *
 * Behaviour of the spec's algorithm worth knowing (faithfully reproduced; the
 * fit keeps basal-rs's operation order and gives bitwise the same doubles):
 *  - for n = 199 and 200 the round-1 groups are not connected (two
 *    components, despite 03 §5.1's remark), so the round-1 fit leaves the
 *    components' relative mass at what the start point gives; the finalist
 *    group normally joins them, and the refit is then well defined;
 *  - on strongly inconsistent group answers (letter logits that disagree by
 *    many nats between groups) Newton's step can explode and the line search
 *    accepts it at t < 1e-6: from there on the result depends on the rounding
 *    of each operation; the fit usually ends after 100 steps without
 *    converging, and sometimes recovers by chance. fit_info reports both
 *    (forced_steps > 0, converged = 0); a metric of it is cheap. */
#ifndef BS_LARGE_CHOICE_H
#define BS_LARGE_CHOICE_H

#include <stddef.h>
#include "basal.h"

#define BS_LC_MIN_OPTIONS 11
#define BS_LC_MAX_OPTIONS 255
#define BS_LC_GROUP_MAX 10                              /* letters A–J */
#define BS_LC_MAX_ROUND1_GROUPS 52                      /* 2 * ceil(255 / 10) */
#define BS_LC_MAX_GROUPS (BS_LC_MAX_ROUND1_GROUPS + 1)  /* plus the finalists */
#define BS_LC_ROUND2_PROMPTS 2                          /* finalists, both orders */

/* One group: a readout over `size` options (member[] are indices into the
 * question's n options, increasing = the group's canonical order, letters A…
 * from member[0] in order 0). target[] is the observed distribution over the
 * members in the same order: the fit's input. */
typedef struct bs_lc_group {
    int size;
    int member[BS_LC_GROUP_MAX];
    double target[BS_LC_GROUP_MAX];
} bs_lc_group;

typedef enum {
    BS_LC_AWAIT_ROUND1 = 1, /* planned; next: bs_lc_finish_round1 */
    BS_LC_AWAIT_ROUND2 = 2, /* finalists chosen; next: bs_lc_finish_round2 */
    BS_LC_DONE = 3          /* final distribution computed */
} bs_lc_stage;

/* Optional report of one fit. */
typedef struct bs_lc_fit_info {
    int iterations;          /* Newton steps taken (0..100) */
    int converged;           /* stopped because max |g_i| < 1e-10 */
    int cholesky_fallbacks;  /* steps where a pivot was <= 0 and step = g was used */
    int forced_steps;        /* steps the line search took at t < 1e-6 although F dropped: the
                                algorithm broke down there, and what follows depends on rounding
                                (it may still converge) */
    double max_grad;         /* max |g_i| at the last gradient evaluated */
} bs_lc_fit_info;

typedef struct bs_large_choice {
    int n;                  /* options, 11..255 */
    int g;                  /* groups per partition, ceil(n / 10) */
    int n_round1;           /* round-1 groups: 2g (blocks, then round-robin) */
    bs_lc_stage stage;
    /* group[0 .. n_round1-1]: the round-1 groups of 03 §5.1 (targets filled
     * by bs_lc_finish_round1); group[n_round1]: the finalists (members set by
     * bs_lc_finish_round1, target by bs_lc_finish_round2). */
    bs_lc_group group[BS_LC_MAX_GROUPS];
    double first_fit[BS_LC_MAX_OPTIONS]; /* joint p after round 1 (diagnostics) */
    bs_lc_fit_info fit_info[2];          /* the round-1 fit and the refit */
} bs_large_choice;

/* 2 * ceil(n / 10) round-1 groups plus the two round-2 prompts; BS_EINVAL
 * (negative) for n outside 11..255. */
int bs_lc_prompt_count(int n);

/* The round-1 groups of 03 §5.1 for n options (11..255): g = ceil(n/10)
 * contiguous blocks of sizes floor(n/g), the first n mod g one larger, then g
 * round-robin groups {k, k+g, k+2g, …}. Writes 2g groups (targets zeroed) and
 * returns 2g; BS_EINVAL for n outside 11..255 or cap < 2g. */
int bs_lc_make_groups(int n, bs_lc_group *groups, int cap, bs_err *e);

/* perm[p] = the option index (into all n options) shown at position p of the
 * group's prompt: order 0 as written, order 1 reversed (01 §2.9). This is the
 * perm bs_prompt_build takes with the question's full option array. */
void bs_lc_group_perm(const bs_lc_group *g, int order, size_t *perm);

/* Plans round 1: lc->group[0 .. n_round1-1], stage BS_LC_AWAIT_ROUND1. */
int bs_lc_plan_round1(bs_large_choice *lc, int n, bs_err *e);

/* Round-1 results: logits[i] are the order-0 letter logits of round-1 group i
 * (lc->group[i].size floats, by position). Each target is their float64
 * softmax (01 §6, one order, uncalibrated); the joint fit of §5.3 over the
 * round-1 groups gives lc->first_fit, and its 10 most probable options (ties:
 * lower index) in index order become the finalist group. BS_EINTERNAL
 * "non-finite letter logits" for a NaN/Inf logit; BS_EINVAL at the wrong
 * stage; BS_ENOMEM. On failure lc is unchanged in stage. */
int bs_lc_finish_round1(bs_large_choice *lc, const float *const *logits, bs_err *e);

/* The finalist group (valid from stage BS_LC_AWAIT_ROUND2 on). */
const bs_lc_group *bs_lc_finalists(const bs_large_choice *lc);

/* Round-2 results: logits_o0 / logits_o1 are the finalists' letter logits in
 * order 0 and order 1 (10 floats each, by position; logits_o1 NULL: a model
 * served with one option order asked order 0 alone). Their averaged
 * distribution (01 §6–§7, uncalibrated) is the finalist group's target; the
 * fit is run again over all round-1 groups plus the finalist group, and
 * p[0..n-1] = calibrate(joint, temp) (01 §8; temp = the choice temperature,
 * 1.0 when uncalibrated). Stage becomes BS_LC_DONE. Errors as round 1. */
int bs_lc_finish_round2(bs_large_choice *lc, const float *logits_o0, const float *logits_o1, double temp,
                        double *p, bs_err *e);

/* The joint fit of 03 §5.3 on its own: maximum-likelihood Luce weights θ for n
 * options (1..255) from n_groups groups with their targets; p[0..n-1] =
 * softmax(θ). Every group needs 1..10 distinct members in [0, n) and finite
 * non-negative targets (else BS_EINVAL). info may be NULL. */
int bs_lc_fit(int n, const bs_lc_group *groups, int n_groups, double *p, bs_lc_fit_info *info, bs_err *e);

/* The finalist group of 03 §5.4: the min(10, n) options with the largest p
 * (ties: lower index first), sorted by index; target zeroed. */
void bs_lc_top(const double *p, int n, bs_lc_group *out);

#endif
