/* The engine of one served model (spec 04 §7–§13): its own threads and queue.
 * The HTTP layer parses a body (02 §3 steps 1–7) and submits a job; the main
 * lane validates and plans it (steps 8–10), admits batches in HRRN (or FIFO)
 * order under max_batch_tokens, packs every batch into prefix-trie rows, runs
 * the forward passes through the shared device gate, and completes each job.
 * Requests over long_tokens go to a long lane that yields the device between
 * layers to short batches of every model. */
#ifndef BS_ENGINE_H
#define BS_ENGINE_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "protocol/pyjson.h"
#include "protocol/request.h"
#include "engine/gate.h"
#include "engine/plan.h"
#include "model/basal_model.h"

typedef enum { BS_SCHED_HRRN = 0, BS_SCHED_FIFO = 1 } bs_schedule;

typedef struct bs_engine_opts {
    int max_batch_tokens;    /* packed tokens admitted per batch (8192) */
    bs_schedule schedule;    /* hrrn (default) or fifo */
    int long_tokens;         /* requests costing more go to the long lane (4096); 0 = no long lane */
    int tree_max_tokens;     /* packed tokens per row (32768) */
    int forward_max_tokens;  /* tokens per forward (8192; tests may lower it) */
    size_t state_cache_mb;   /* LRU K/V cache of recent states per lane engine (0 = off) */
    int no_prefix_cache;     /* do not pin the template prefixes */
    int readout_bf16;        /* round each letter logit to bf16 before the decision math (05 Q4) */
    int batching;            /* a bs_batching of engine/runner.h: tree (0) unless a test or benchmark asks */
    bs_plan_limits limits;   /* per request: max_questions (1024), max_request_tokens (65536) */
} bs_engine_opts;

/* The defaults of spec 04 §2. */
void bs_engine_opts_default(bs_engine_opts *o);

typedef struct bs_job bs_job;
typedef void (*bs_job_done_fn)(bs_job *job, void *ctx);

/* One request. The caller fills the input part, submits it, and must keep the
 * job alive until done() has been called — exactly once, from an engine thread,
 * or from bs_engine_submit itself when the engine is stopping (then with 500
 * "engine stopped"). */
struct bs_job {
    /* input */
    bj_value *body;          /* the parsed body; the engine takes ownership */
    bs_dialect dialect;
    int lens;                /* 1: reply with the lens document (engine/lens.h) around the answer */
    double arrival_ms;       /* bs_now_ms() when the handler started, before parsing */
    bs_job_done_fn done;
    void *done_ctx;
    atomic_int cancelled;    /* set (to 1) by the HTTP layer when the client is gone */
    /* output, valid in done() */
    int status;              /* HTTP status; 0 = dropped because cancelled (no reply) */
    bs_buf reply;            /* the JSON body (empty when dropped) */
    double queue_ms;         /* arrival -> admission start (200 only) */
    double compute_ms;       /* admission start -> end of the batch (200 only) */
    int batch_requests;      /* requests in that batch (200 only) */
    int lane;                /* 0 main, 1 long */
    int orders;              /* 200 only: the model's option orders per readout (1 or 2) */
    bs_usage usage;          /* 200 only: the usage object of the reply, and the batch's computed tokens */
    /* engine-private */
    struct bs_job *next;
    bs_plan *plan;           /* from planning until the reply is written */
    int64_t cost;            /* of the plan's next engine step */
    int steps;               /* engine steps run (2 for a request with large choices, 03 §5.4) */
    double first_admit_ms;   /* admission start of its first step */
    int64_t computed;        /* tokens computed by the batches of its steps */
};

void bs_job_init(bs_job *j);
/* Frees the reply buffer (and anything the engine left); the job struct itself
 * belongs to the caller. */
void bs_job_release(bs_job *j);

/* Counters for /metrics; monotonic totals unless said otherwise. */
typedef struct bs_engine_stats {
    int64_t queued;          /* current: jobs submitted and not yet completed */
    int64_t batches, batch_requests; /* batches run and requests in them */
    int64_t input_tokens;    /* usage.input_tokens of answered requests */
    int64_t forward_tokens;  /* tokens embedded and projected by forwards (05 §14 of 04) */
    int64_t forwards;        /* letter-logit forward calls */
    int64_t dropped;         /* cancelled jobs dropped before compute */
    int64_t state_hits, state_inserts;
    int64_t lc_rounds[2];    /* large-choice questions whose round 1 / round 2 ran (03 §5) */
} bs_engine_stats;

typedef struct bs_engine bs_engine;

/* Starts the lanes of a loaded model (the engine borrows m, which must outlive
 * it). gate may be NULL when this is the only model and it has no long lane
 * (a private gate is then made if needed). Pins the template prefixes before
 * returning unless opts->no_prefix_cache. */
int bs_engine_create(bs_engine **out, bs_basal_model *m, const bs_engine_opts *opts, bs_gate *gate, bs_err *e);

/* Called once per executed batch from the lane's thread, after the forwards
 * and before its replies: lane 0 main / 1 long, the requests admitted to it,
 * its wall time (admission and run), ok = its forwards succeeded. */
typedef void (*bs_batch_fn)(void *ctx, int lane, int requests, double compute_ms, int ok);
/* Installs the batch hook; call before the first bs_engine_submit. */
void bs_engine_set_batch_hook(bs_engine *en, bs_batch_fn fn, void *ctx);
/* Queues a job (never blocks on compute). After bs_engine_stop (or during
 * bs_engine_destroy) the job is completed at once with 500 "engine stopped". */
void bs_engine_submit(bs_engine *en, bs_job *job);
/* Stops taking jobs: later submits complete at once; queued and running work
 * is still answered. Does not wait (bs_engine_destroy does). */
void bs_engine_stop(bs_engine *en);
/* Finishes queued and running work, completes every job, joins the threads. */
void bs_engine_destroy(bs_engine *en);
const char *bs_engine_model_name(const bs_engine *en);
/* The option orders per readout of its model (1 or 2). */
int bs_engine_orders(const bs_engine *en);
void bs_engine_get_stats(bs_engine *en, bs_engine_stats *s);


/* ---- exposed for tests ---- */

/* One admission (04 §9 A2–A3) over the waiting list wait[0..*nw): orders it
 * (HRRN by descending (now - arrival) * rate / cost, stable; FIFO keeps it),
 * moves the admitted jobs to batch (returns how many) and leaves the others in
 * wait, in their new relative order. job->plan and job->cost must be set. */
size_t bs_admit(bs_job **wait, size_t *nw, double now_ms, double rate, bs_schedule sched, int64_t budget,
                bs_job **batch, int64_t *batch_tokens);

#endif
