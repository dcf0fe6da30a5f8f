/* One compute pool per process (spec 05 §16 item 7): a fixed set of worker
 * threads that run numbered tasks. Task results never depend on which thread
 * ran them, so the pool size never changes a computed bit. */
#ifndef BS_POOL_H
#define BS_POOL_H

typedef struct bs_pool bs_pool;
typedef void (*bs_task_fn)(void *arg, int task, int thread);

/* n_threads <= 0 means the number of online CPUs. NULL on failure. */
bs_pool *bs_pool_create(int n_threads);
void bs_pool_destroy(bs_pool *p);
int bs_pool_size(const bs_pool *p);
/* Runs fn(arg, t, thread) for t in [0, n_tasks) and returns when all are done.
 * The calling thread takes part (as thread 0). p may be NULL: runs serially. */
void bs_pool_run(bs_pool *p, int n_tasks, bs_task_fn fn, void *arg);

#endif
