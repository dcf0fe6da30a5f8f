/* bs_wmat's packed copy (cpu/wmat.h). */
#include "cpu/wmat.h"

#include <stdlib.h>

void bs_gemm_unpack(bs_wmat *w) {
    free((void *)w->packed);
    w->packed = NULL;
    w->packed_kind = BS_WPACK_NONE;
    w->scale = NULL; /* part of the I8 copy's block */
}
