/* Projection GEMMs through cuBLASLt (spec 05 §13.1, §17): row-major
 * y[M,N] = x[M,K] * w[N,K]^T, issued as the column-major product
 * y^T = w * x^T with the weight operand transposed; compute and scale type
 * 32F (so f32 mode never uses TF32), alpha 1, beta 0, 32 MiB workspace.
 *
 * The algorithm of a call comes from the GEMM table when there is one (the
 * entry of the call's M class, then any other entry of the shape that
 * cublasLtMatmulAlgoCheck accepts for this exact M — all of one bitwise
 * group in an invariant table) or else from the cuBLASLt heuristic, which
 * picks by M and is therefore not batch-invariant. BASAL_GEMM=cublas runs
 * cublasGemmEx with its default algorithm instead (diagnostic, not invariant). */
#ifndef BS_CUDA_LT_GEMM_H
#define BS_CUDA_LT_GEMM_H

#include "basal.h"
#include "cuda/cublas_dl.h"
#include "cuda/gemm_table.h"

#define BS_LT_WORKSPACE (32u << 20)
#define BS_LT_CACHE 64

typedef struct bs_lt_cached {
    int n, k, m, valid;
    cublasLtMatmulAlgo_t algo;
} bs_lt_cached;

/* Everything one stream needs; owned by one forward workspace at a time. */
typedef struct bs_lt_ws {
    bs_dtype dtype;
    cudaDataType_t type;
    cublasLtHandle_t lt;
    cublasLtMatmulDesc_t desc;
    cublasHandle_t cublas;    /* only with BASAL_GEMM=cublas */
    void *workspace;          /* BS_LT_WORKSPACE bytes of device memory */
    const bs_gemm_table *table; /* borrowed; NULL = heuristic */
    bs_lt_cached cache[BS_LT_CACHE];
} bs_lt_ws;

cudaDataType_t bs_lt_type(bs_dtype d);
const char *bs_lt_status(cublasStatus_t s);

int bs_lt_ws_init(bs_lt_ws *w, bs_dtype dtype, const bs_gemm_table *table, int use_cublas, bs_err *e);
void bs_lt_ws_free(bs_lt_ws *w);

/* The three layouts of a call (A = weights, B = x, C = D = y). */
typedef struct bs_lt_layouts {
    cublasLtMatrixLayout_t a, b, c;
} bs_lt_layouts;
cublasStatus_t bs_lt_layouts_make(bs_lt_layouts *l, cudaDataType_t type, int n, int k, int m);
void bs_lt_layouts_free(bs_lt_layouts *l);

/* cublasLtMatmulAlgoCheck for this exact call; 1 when it may run within the
 * workspace. */
int bs_lt_algo_fits(bs_lt_ws *w, const bs_lt_layouts *l, const cublasLtMatmulAlgo_t *algo);
cublasStatus_t bs_lt_run(bs_lt_ws *w, const bs_lt_layouts *l, const cublasLtMatmulAlgo_t *algo, const void *wt,
                         const void *x, void *y, cudaStream_t s);

/* y = x * w^T with the algorithm rule above. */
int bs_lt_matmul(bs_lt_ws *w, const void *wt, int n, int k, const void *x, int m, void *y, cudaStream_t s, bs_err *e);

#endif
