/* Running the plans of one batch on one lane's engine (spec 04 §6, §7, §13):
 * items are grouped by language and state, cut into prefix-trie rows under
 * tree_max_tokens, rows grouped into forwards under forward_max_tokens; each
 * row may start from a cached prefix (the pinned template prefixes, or the
 * lane's LRU state cache); every forward holds the device gate. */
#ifndef BS_RUNNER_H
#define BS_RUNNER_H

#include <stdatomic.h>
#include <stdint.h>

#include "engine/fwd_hook.h"
#include "engine/gate.h"
#include "engine/plan.h"
#include "model/forward.h"

typedef struct bs_cache_entry {
    int32_t *ids;        /* the prefix tokens (positions 0..n-1) */
    bs_kv kv;            /* kv.n_tokens = number of ids */
    int pinned;
    uint64_t last_use;
    size_t bytes;
} bs_cache_entry;

/* The pinned template prefixes of a model (04 §13 K2), shared read-only by
 * its lanes. */
typedef struct bs_prefix_set {
    bs_cache_entry e[2];
    int n;
} bs_prefix_set;

/* Computes and pins the PL and EN template prefixes (holding the gate, if any). */
int bs_prefix_set_build(bs_prefix_set *ps, const bs_basal_model *m, bs_gate *gate, bs_err *e);
void bs_prefix_set_free(bs_prefix_set *ps);

/* How items are grouped into forwards (spec 04 §6): prefix-trie rows (the
 * server's only mode), or, for benchmarks and exports, one item per forward or
 * upstream's length-bucketed chunks of one-item rows. */
typedef enum { BS_BATCH_TREE = 0, BS_BATCH_SINGLE = 1, BS_BATCH_BUDGET = 2 } bs_batching;

/* Upstream chunking (04 §6 `budget`): sorts indices 0..n-1 by lens (stable,
 * ascending) into order[] and cuts them into chunks: chunk c is
 * order[start[c] .. start[c+1]). Returns the number of chunks (start has n+1
 * entries). */
size_t bs_budget_chunks(const int32_t *lens, size_t n, size_t *order, size_t *start);

typedef struct bs_runner {
    const bs_basal_model *m;
    int tree_max_tokens, forward_max_tokens;
    const bs_prefix_set *pinned;  /* may be NULL (no_prefix_cache) */
    bs_cache_entry *st;           /* the LRU state cache (unpinned entries) */
    size_t n_st, cap_st, st_used, st_budget;
    uint64_t clock;
    bs_gate *gate;                /* may be NULL */
    int preemptible;              /* long lane: yields between layers */
    int readout_bf16;             /* `--readout bf16`: letter logits rounded to bf16 (05 Q4) */
    bs_batching batching;         /* BS_BATCH_TREE unless a benchmark asks otherwise */
    bs_fwd_profile *profile;      /* optional stage timings of every forward (bench) */
    int evidence_separate;        /* diagnostic: every evidence job by its own forward (never from a decision forward) */
    bs_layer_watch watch;         /* optional, with watch_ctx (engine/fwd_hook.h) */
    void *watch_ctx;
    /* counters (read by metrics from other threads) */
    _Atomic int64_t forward_tokens, forwards, state_hits, state_inserts;
    _Atomic int64_t evidence_inline, evidence_forwards; /* evidence jobs from decision forwards / their own */
    _Atomic int64_t lc_rounds[2];  /* large-choice questions whose round 1 / round 2 this runner computed */
} bs_runner;

void bs_runner_init(bs_runner *r, const bs_basal_model *m, int tree_max_tokens, int forward_max_tokens,
                    const bs_prefix_set *pinned, size_t state_cache_bytes, bs_gate *gate, int preemptible);
void bs_runner_free(bs_runner *r);

/* One engine step of 04 §7 for the plans: the items each plan's next step
 * computes (bs_plan_step_items: round 1, or the finals of round 2), packed
 * together; fills each order's logits, then runs the evidence forwards. The
 * caller advances each plan (bs_plan_advance) afterwards. */
int bs_runner_run(bs_runner *r, bs_plan *const *plans, size_t n, bs_err *e);

/* Every step of the plans on this runner (commands and the session, not the
 * server): runs a step, advances each plan, repeats while any plan needs
 * another step (03 §5: round 2 of the large choices). A request error found
 * between the rounds (04 §3 P7 for a finalist prompt) fails only the plan i
 * it belongs to: with reps (n pointers to initialised replies) reps[i] gets
 * its error body, plan i takes no further step and the others go on (0 is
 * returned; a caller tells the refused plans by their reply's body); with reps
 * NULL the run stops with BS_EINVAL and the body as e's message. */
int bs_runner_run_all(bs_runner *r, bs_plan *const *plans, size_t n, bs_letter_cache *lc, bs_reply *const *reps,
                      bs_err *e);

#endif
