/* The CUDA kernels of the forward pass (spec 05 §7, §17), called from C.
 * Every launcher takes the resident dtype as an int (bs_dtype values: 0 f32,
 * 1 f16, 2 bf16) for the activation type T and returns the launch status.
 *
 * Invariance (05 §13): each output value is computed by one fixed sequence
 * of operations that depends only on its own inputs and on model dimensions,
 * never on the number of rows, the row's place in a launch, or the grid. */
#ifndef BS_CUDA_KERNELS_H
#define BS_CUDA_KERNELS_H

#include <cuda_runtime_api.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define BS_CU_MAX_RANGES 8
#define BS_CU_MAX_HD 256
/* query rows (token x head of one kv group) per attention thread block */
#define BS_CU_ATT_ROWS 16

/* One attention unit of a launch: the queries qtok[qoff .. qoff+qn) (compact
 * token indices; query i writes output row qout[qoff+i]) that share one key
 * sequence: np cached prefix keys, then the ranges root-down (the own block
 * last). A query sees the keys of ordinal <= its position (05 §9 V4). */
typedef struct bs_cu_unit {
    int32_t qoff, qn;
    int32_t np, n_ranges;
    int32_t r_start[BS_CU_MAX_RANGES], r_len[BS_CU_MAX_RANGES];
    int32_t block0;  /* first thread block of the unit in the launch */
    int32_t pad_;
    const float *pk, *pv; /* prefix K/V of all layers, [L][np][kvd]; NULL when np == 0 */
} bs_cu_unit;

/* Dynamic shared memory of the attention kernel for head size hd. */
size_t bs_cu_attn_smem(int hd);
/* Raises the shared-memory limit of the attention kernels where hd needs it;
 * fails where the device cannot give that much. */
cudaError_t bs_cu_attn_prepare(int hd);
/* Whether this build has machine code (or PTX) this device can run. */
cudaError_t bs_cu_probe(void);

/* x[t] = E[ids[t]] (both T). */
cudaError_t bs_cu_embed(int dt, const int32_t *ids, int m, const void *emb, int h, void *x, cudaStream_t s);
/* out[r] = T(w * (x[rows ? rows[r] : r] * rsqrt-term)), one block per row; the
 * block size and so the summation order depend only on h. */
cudaError_t bs_cu_rmsnorm(int dt, const void *x, const int32_t *rows, int n, int h, const float *w, float eps,
                          void *out, cudaStream_t s);
/* dst[r] = src[rows[r]] for rows of width elements (T). */
cudaError_t bs_cu_gather(int dt, const void *src, const int32_t *rows, int n, int width, void *dst, cudaStream_t s);
/* From the fused projection [q | k | v] (T, [m][qd + 2 kvd]): bias added and
 * rounded to T, rotate-half RoPE at pos[t] with the host cos/sin table
 * ([Pmax][hd/2]), all in f32 -> q [m][qd], k [m][kvd], v [m][kvd] (f32).
 * Biases may be NULL. */
cudaError_t bs_cu_qkv_rope(int dt, const void *qkv, int m, int qd, int kvd, int hd, const float *bq, const float *bk,
                           const float *bv, const int32_t *pos, const float *cs, const float *sn, float *q, float *k,
                           float *v, cudaStream_t s);
/* Tree attention of one layer over all units (f32 math; output rows rounded
 * to T, [rows][nh*hd]). n_blocks = sum of ceil(qn * nh/nkv / BS_CU_ATT_ROWS). */
cudaError_t bs_cu_attention(int dt, const float *q, const float *k, const float *v, const int32_t *pos,
                            const int32_t *qtok, const int32_t *qout, const bs_cu_unit *units, int n_units,
                            int n_blocks, int layer, int nh, int nkv, int hd, float scale, void *out, cudaStream_t s);
/* x = T(x + T(y + b)) elementwise over [rows][n]; b may be NULL. */
cudaError_t bs_cu_bias_residual(int dt, void *x, const void *y, const float *b, int rows, int n, cudaStream_t s);
/* From gu = [g | u] ([rows][2i], T): g' = T(g + bg), u' = T(u + bu),
 * out = T(T(SiLU(g')) * u') ([rows][i]); biases may be NULL. */
cudaError_t bs_cu_silu_mul(int dt, const void *gu, const float *bg, const float *bu, int rows, int i, void *out,
                           cudaStream_t s);
/* logits[r][u] = sum_i h[r][i] * lm_rows[u][i] (h widened from T), one warp
 * per (r, u): lane-strided FMAs, then an xor butterfly (05 §11 Y2). */
cudaError_t bs_cu_letters(int dt, const void *h, int r, int hdim, const float *const *lm_rows, int u, float *logits,
                          cudaStream_t s);

/* gemm-search helpers: uniform values in [-1, 1) from a counter hash (T),
 * and one FNV-1a 64-bit digest per row of a [m][row_bytes] matrix. */
cudaError_t bs_cu_fill_random(int dt, void *p, size_t n, uint64_t seed, cudaStream_t s);
cudaError_t bs_cu_row_hash(const void *y, int m, size_t row_bytes, uint64_t *out, cudaStream_t s);

#ifdef __cplusplus
}
#endif

#endif
