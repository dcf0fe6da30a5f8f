/* `basal gemm-search` (spec 06 §9, 05 §13.1): measures cuBLASLt
 * configurations for the four projection shapes of a model on random
 * operands and fills a GEMM table. CUDA builds only. */
#ifndef BS_CUDA_GEMM_SEARCH_H
#define BS_CUDA_GEMM_SEARCH_H

#include "cuda/gemm_table.h"
#include "model/config.h"

typedef struct bs_gemm_search_opts {
    bs_dtype dtype;
    int invariant;        /* version-2 equivalence groups (else fastest per class) */
    const int *classes;   /* NULL: the 25 invariant classes, or 16..512 step 16 then step 128 to max_m */
    int n_classes;
    int max_m;            /* non-invariant default classes end here (3072) */
    int reps;             /* timed runs per candidate and class (>= 1) */
    int max_candidates;   /* 0: every candidate that cuBLASLt accepts */
    const char *model, *source;
} bs_gemm_search_opts;

/* Searches the shapes of cfg ([qd + 2 kvd, H], [H, qd], [2I, H], [H, I]) on
 * device $BASAL_CUDA_DEVICE (default 0) and fills *out (free with
 * bs_gemm_table_free). Progress goes to stderr, one line per shape and class. */
int bs_cuda_gemm_search(const bs_config *cfg, const bs_gemm_search_opts *o, bs_gemm_table *out, bs_err *e);

#endif
