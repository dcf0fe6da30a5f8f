/* The in-process session of include/basal.h, and what the command line's
 * tools need beyond the public API: the loaded model and its runner (a
 * forward's layer watch, the evidence counters). */
#ifndef BS_API_SESSION_H
#define BS_API_SESSION_H

#include "basal.h"
#include "engine/plan.h"
#include "engine/runner.h"
#include "model/basal_model.h"

const bs_basal_model *bs_session_model(const basal_session *s);
bs_runner *bs_session_runner(basal_session *s);
bs_letter_cache *bs_session_letters(basal_session *s);
/* The session's CPU thread pool, and its size. */
bs_pool *bs_session_pool(basal_session *s);
int bs_session_threads(const basal_session *s);
/* How the forwards are packed (engine/runner.h bs_batching; tree by
 * default): benchmarks compare the modes, the answers are the same. */
void bs_session_set_batching(basal_session *s, int batching);
/* basal_decide_batch in either dialect: BS_DIALECT_BASAL answers as
 * /v1/basal does (the parity export's answer_upstream). */
int bs_session_decide_batch(basal_session *s, bs_dialect d, size_t n, const char *const *requests,
                            const size_t *lens, basal_result *results, bs_err *e);
/* The last decision call's usage, summed over its requests whose forwards ran
 * (computed_tokens: what its forwards computed), and how many requests those
 * were (0: every one was refused while planning or between the rounds). */
bs_usage bs_session_last_usage(const basal_session *s);
int bs_session_last_ran(const basal_session *s);

#endif
