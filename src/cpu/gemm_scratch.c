/* The scratch blocks of the GEMM drivers (gemm.c, gemm_amx.c). */
#include <stdatomic.h>
#include <stdlib.h>

#include "cpu/gemm_impl.h"

/* Scratch blocks are a few MiB; allocating them per call would page-fault
 * them in each time (~200 faults per call measured, 1-3% of a prefill
 * product). One block is kept for the next call; concurrent callers that
 * find the slot empty allocate their own. A block starts with its size; the
 * floats start 64 bytes in. */
static _Atomic(void *) cached_scratch;

float *bs_gemm_scratch_take(size_t floats) {
    size_t bytes = floats * sizeof(float) + 64;
    void *b = atomic_exchange(&cached_scratch, NULL);
    if (b && *(size_t *)b < bytes) {
        free(b);
        b = NULL;
    }
    if (!b) {
        if (posix_memalign(&b, 64, bytes)) return NULL;
        *(size_t *)b = bytes;
    }
    return (float *)((char *)b + 64);
}

void bs_gemm_scratch_give_back(float *f) {
    void *b = (char *)f - 64, *expected = NULL;
    if (!atomic_compare_exchange_strong(&cached_scratch, &expected, b)) free(b);
}
