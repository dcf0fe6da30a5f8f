/* A weight matrix as the CPU kernels read it: the stored Hugging Face
 * row-major w[N][K] and, optionally, a copy in one kernel's own layout. The
 * layer under every GEMM family (gemm.c, gemm_bf16.c, gemm_i8.c): each reads
 * a bs_wmat and frees a packed copy through bs_gemm_unpack, without calling
 * into another family's file. */
#ifndef BS_WMAT_H
#define BS_WMAT_H

#include "base/util.h"

/* Layouts of prepacked weights (bs_gemm_prepack). */
/* AMX: 32-column strips of tile rows (gemm_amx.c). PAIRS: the avx512-bf16
 * kernels' strips, bf16 pairs in 32 columns per K block, laid out as that
 * kernel packs them per call (gemm_bf16.c). */
/* I8: the int8w mode's quantized copy (bs_gemm_quantize): q[n][k] int8 and
 * its per-row scales (bs_wmat.scale). */
/* Q8: the int8 mode's W8A8 weights (bs_gemm_pack_w8a8): 32-column strips of
 * int8 quads, one layout for every int8 kernel (gemm_i8.c). */
/* I8S: an I8 copy laid out for the bf16-avx2 kernels (bs_gemm_prepack): the
 * strips of PAIRS, 16 columns wide, with per pair the 16 odd int8 weights
 * and then the 16 even ones (half PAIRS' bytes), then the per-row scales. */
typedef enum {
    BS_WPACK_NONE = 0,
    BS_WPACK_AMX = 1,
    BS_WPACK_PAIRS = 2,
    BS_WPACK_I8 = 3,
    BS_WPACK_Q8 = 4,
    BS_WPACK_I8S = 5
} bs_wpack;

typedef struct bs_wmat {
    bs_dtype dtype;
    const void *data; /* row-major [n][k] */
    int n, k;
    /* The same weights in a kernel's own layout (owned by whoever called
     * bs_gemm_prepack), or NULL: kernels that read it use it, the others
     * read data. */
    const void *packed;
    bs_wpack packed_kind;
    const float *scale; /* BS_I8 data, BS_WPACK_I8, I8S or Q8: row n's weights are scale[n] * q[n][k] */
} bs_wmat;

/* Frees w->packed (any layout) and clears packed_kind and scale; the stored
 * weights stay. */
void bs_gemm_unpack(bs_wmat *w);

/* The deepest matrix a W8A8 (BS_WPACK_Q8) product sums exactly in int32:
 * K * 127 * 255 < 2^31 (gemm.h, the int8 mode). */
#define BS_I8_MAX_K 66311

#endif
