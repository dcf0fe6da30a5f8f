/* Internal interface between the GEMM driver (gemm.c) and its kernel
 * families (portable and AVX2 in gemm.c, AVX-512 in gemm_avx512.c, bf16 in
 * gemm_bf16.c). A family supplies its blocking, its packing of x and of the
 * weights, and one micro-kernel per number of rows; the driver (task split,
 * row and K blocks, strips, ragged edges) is shared.
 *
 * Every f32 family computes each output as the single chain
 * acc = fma(x[m][k], w[n][k], acc) for k = 0..K-1 in order; between K
 * blocks the chain passes exactly through y (an f32 store and reload), so
 * the blocking constants never change a bit and all f32 families give the
 * same results. */
#ifndef BS_GEMM_IMPL_H
#define BS_GEMM_IMPL_H

#include <stddef.h>
#include <stdint.h>

#include "cpu/gemm.h"

/* Limits of every family. The out-of-memory path packs one panel of x and
 * one strip on the stack: mr * lda + b_floats <= BS_GEMM_SMALL_FLOATS (each
 * family asserts it). */
enum { BS_GEMM_MAX_MR = 32, BS_GEMM_MAX_NR = 32, BS_GEMM_SMALL_FLOATS = 24576 };

/* One tile: R rows of packed x at a (row stride lda of the family) times a
 * packed strip b, depth kc, into a full nr-column tile c (row stride ldc).
 * The tile starts from zero when first, else from its current value, which
 * the caller has placed in stage (nr floats per row, 64-byte aligned). A
 * kernel given a next tile (next_rows rows at next, row stride ldc) copies
 * it into stage once its own start values are in registers, so that the
 * next kernel never loads y right after this one stored to it: rows of y
 * that are a multiple of 4 KiB apart (N = 1536, 2048, 2560) make such loads
 * wait on the stores (4K aliasing) and evict each other from one L1 set.
 * pf: a tile of y to prefetch. */
typedef void (*bs_ukr_fn)(const float *a, const float *b, int kc, float *c, int ldc, int first, float *stage,
                          const float *next, int next_rows, const float *pf);

typedef struct bs_gemm_impl {
    int mr, nr;     /* register tile */
    int kc;         /* depth of one packed block */
    int mc;         /* rows of x per packed block (a multiple of mr) */
    int nc_max;     /* columns of one task's packed weights at most */
    int lda;        /* floats from one packed x row to the next */
    int b_floats;   /* floats of one packed strip (nr x kc at most) */
    /* x rows [0, rows), depth k0..k0+kc-1, into ap (row i at ap + i*lda) */
    void (*pack_a)(const float *x, int ldx, int rows, int k0, int kc, float *ap);
    /* weight rows n0..n0+nr-1 (zero past N), depth k0..k0+kc-1, into dst */
    void (*pack_b)(const bs_wmat *w, int n0, int k0, int kc, float *dst);
    bs_ukr_fn ukr[BS_GEMM_MAX_MR + 1]; /* by number of rows */
    const char *name;
    /* The layout bs_gemm_prepack gives this family (BS_WPACK_NONE: packed
     * per call). For PAIRS, gemm.c's driver reads pack_b's strips in place,
     * stored K block after K block and, within one, strip after strip
     * (bs_gemm_pairs_offset); AMX's own driver reads its layout. */
    bs_wpack prepacked;
    /* A family with its own driver (AMX): the whole product; the fields
     * above then only describe it (name). NULL: gemm.c's driver. */
    void (*run)(bs_pool *pool, const float *x, int ldx, int m, const bs_wmat *w, float *y, int ldy);
} bs_gemm_impl;

/* f32 kernels of the AVX-512 family (gemm_avx512.c; x86 only). */
extern const bs_gemm_impl bs_gemm_impl_avx512;

/* bf16 compute mode (gemm_bf16.c): the exact portable emulation, and the
 * AVX512-BF16 kernels (x86 only). */
extern const bs_gemm_impl bs_gemm_impl_bf16_portable;
extern const bs_gemm_impl bs_gemm_impl_avx512bf16;
/* The same chain with AVX2 FMAs (gemm_bf16_avx2.c; x86 only): the same bits;
 * and its form for int8w weights prepacked as BS_WPACK_I8S (int8 pairs
 * widened as they are read, 6 x 16 tiles). */
extern const bs_gemm_impl bs_gemm_impl_bf16_avx2;
extern const bs_gemm_impl bs_gemm_impl_bf16_avx2_i8;
/* A strip of w (columns n0.., depth k0..k0+kc-1) as bf16 pairs for any strip
 * width: dst[p * nr + j] = bf16(w[n0+j][k0+2p]) | bf16(w[n0+j][k0+2p+1]) << 16
 * (zero past N and past kc). */
void bs_gemm_pack_b_pairs(const bs_wmat *w, int n0, int k0, int kc, float *dst, int nr);
/* The same words with AVX2 (x86 CPUs with AVX2 only: gemm_bf16_avx2.c). */
void bs_gemm_pack_b_pairs_avx2(const bs_wmat *w, int n0, int k0, int kc, float *dst, int nr);
/* The AMX-BF16 kernels (gemm_amx.c; x86-64 only): a separate, opt-in mode
 * whose bits differ from the two above. */
extern const bs_gemm_impl bs_gemm_impl_amx;
/* Configures this thread's tiles (all eight 16 rows x 64 bytes) once; the
 * AMX attention (attention_bf16.c) uses the same configuration. Call only
 * where bs_gemm_amx_available(). */
void bs_amx_configure(void);
/* The AMX weight layout (bs_gemm_prepack): its size, and the packing of w
 * into dst (64-byte aligned) on the pool. */
size_t bs_gemm_amx_packed_bytes(const bs_wmat *w);
void bs_gemm_amx_prepack(bs_pool *pool, const bs_wmat *w, void *dst);

/* Offset (in 32-bit words) of the prepacked strip s (nr columns wide) of the
 * K block starting at k0 (kc deep: kc pairs rounded up) in a layout of
 * `strips` strips: every earlier K block holds k0/2 pairs per column. */
static inline size_t bs_gemm_pairs_offset(int k0, int kc, int s, int strips, int nr) {
    return ((size_t)(k0 / 2) * (size_t)strips + (size_t)s * (size_t)((kc + 1) / 2)) * (size_t)nr;
}
/* 32-bit words of one pair of a strip in a family's prepacked layout (its
 * nr for PAIRS; half of it for I8S, one byte per weight): the nr argument of
 * bs_gemm_pairs_offset for that layout. */
static inline int bs_gemm_pair_words(const bs_gemm_impl *im) {
    return im->prepacked == BS_WPACK_I8S ? im->nr / 2 : im->nr;
}

/* Scratch of the drivers (gemm.c): one block is kept for the next call; NULL
 * when out of memory. */
float *bs_gemm_scratch_take(size_t floats);
void bs_gemm_scratch_give_back(float *f);
/* One VDPBF16PS lane step (gemm_bf16.c): acc with the pair of x (element k
 * in the low half) times the pair of w; _hw runs the instruction itself
 * (only where bs_gemm_bf16_hw_supported()). */
float bs_bf16_pair_step(float acc, uint32_t xpair, uint32_t wpair);
float bs_bf16_pair_step_hw(float acc, uint32_t xpair, uint32_t wpair);

/* The portable weight packing for any strip width: dst[kk][nr] in f32. */
void bs_gemm_pack_b_portable(const bs_wmat *w, int n0, int k0, int kc, float *dst, int nr);

#endif
