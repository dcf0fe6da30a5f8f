#include "cuda/lt_gemm.h"

#include <cuda_runtime_api.h>
#include <string.h>

cudaDataType_t bs_lt_type(bs_dtype d) {
    return d == BS_F16 ? CUDA_R_16F : d == BS_BF16 ? CUDA_R_16BF : CUDA_R_32F;
}

const char *bs_lt_status(cublasStatus_t s) {
    switch (s) {
    case CUBLAS_STATUS_SUCCESS: return "success";
    case CUBLAS_STATUS_NOT_INITIALIZED: return "not initialized";
    case CUBLAS_STATUS_ALLOC_FAILED: return "allocation failed";
    case CUBLAS_STATUS_INVALID_VALUE: return "invalid value";
    case CUBLAS_STATUS_ARCH_MISMATCH: return "architecture mismatch";
    case CUBLAS_STATUS_MAPPING_ERROR: return "mapping error";
    case CUBLAS_STATUS_EXECUTION_FAILED: return "execution failed";
    case CUBLAS_STATUS_INTERNAL_ERROR: return "internal error";
    case CUBLAS_STATUS_NOT_SUPPORTED: return "not supported";
    default: return "cuBLAS error";
    }
}

int bs_lt_ws_init(bs_lt_ws *w, bs_dtype dtype, const bs_gemm_table *table, int use_cublas, bs_err *e) {
    memset(w, 0, sizeof *w);
    w->dtype = dtype;
    w->type = bs_lt_type(dtype);
    w->table = table;
    cublasStatus_t st;
    cudaError_t ce;
    int rc = bs_cublas_load(e);
    if (rc < 0) return rc;
    if ((st = cublasLtCreate(&w->lt)) != CUBLAS_STATUS_SUCCESS) {
        w->lt = NULL;
        return bs_fail(e, BS_EINTERNAL, "cublasLtCreate: %s", bs_lt_status(st));
    }
    if ((st = cublasLtMatmulDescCreate(&w->desc, CUBLAS_COMPUTE_32F, CUDA_R_32F)) != CUBLAS_STATUS_SUCCESS) {
        w->desc = NULL;
        bs_lt_ws_free(w);
        return bs_fail(e, BS_EINTERNAL, "cublasLtMatmulDescCreate: %s", bs_lt_status(st));
    }
    cublasOperation_t ta = CUBLAS_OP_T;
    cublasLtMatmulDescSetAttribute(w->desc, CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof ta);
    if ((ce = cudaMalloc(&w->workspace, BS_LT_WORKSPACE)) != cudaSuccess) {
        w->workspace = NULL;
        bs_lt_ws_free(w);
        return bs_fail(e, BS_ENOMEM, "cuBLASLt workspace: %s", cudaGetErrorString(ce));
    }
    if (use_cublas) {
        if ((st = cublasCreate(&w->cublas)) != CUBLAS_STATUS_SUCCESS) {
            w->cublas = NULL;
            bs_lt_ws_free(w);
            return bs_fail(e, BS_EINTERNAL, "cublasCreate: %s", bs_lt_status(st));
        }
        /* compute type 32F below; pedantic math also rules out TF32 and
         * reduced-precision reductions */
        cublasSetMathMode(w->cublas, CUBLAS_PEDANTIC_MATH);
        cublasSetWorkspace(w->cublas, w->workspace, BS_LT_WORKSPACE);
    }
    return BS_OK;
}

void bs_lt_ws_free(bs_lt_ws *w) {
    if (w->cublas) cublasDestroy(w->cublas);
    if (w->desc) cublasLtMatmulDescDestroy(w->desc);
    if (w->lt) cublasLtDestroy(w->lt);
    if (w->workspace) cudaFree(w->workspace);
    memset(w, 0, sizeof *w);
}

cublasStatus_t bs_lt_layouts_make(bs_lt_layouts *l, cudaDataType_t type, int n, int k, int m) {
    memset(l, 0, sizeof *l);
    cublasStatus_t st = cublasLtMatrixLayoutCreate(&l->a, type, (uint64_t)k, (uint64_t)n, k);
    if (st == CUBLAS_STATUS_SUCCESS) st = cublasLtMatrixLayoutCreate(&l->b, type, (uint64_t)k, (uint64_t)m, k);
    if (st == CUBLAS_STATUS_SUCCESS) st = cublasLtMatrixLayoutCreate(&l->c, type, (uint64_t)n, (uint64_t)m, n);
    if (st != CUBLAS_STATUS_SUCCESS) bs_lt_layouts_free(l);
    return st;
}

void bs_lt_layouts_free(bs_lt_layouts *l) {
    if (l->a) cublasLtMatrixLayoutDestroy(l->a);
    if (l->b) cublasLtMatrixLayoutDestroy(l->b);
    if (l->c) cublasLtMatrixLayoutDestroy(l->c);
    memset(l, 0, sizeof *l);
}

int bs_lt_algo_fits(bs_lt_ws *w, const bs_lt_layouts *l, const cublasLtMatmulAlgo_t *algo) {
    cublasLtMatmulHeuristicResult_t r;
    memset(&r, 0, sizeof r);
    cublasStatus_t st = cublasLtMatmulAlgoCheck(w->lt, w->desc, l->a, l->b, l->c, l->c, algo, &r);
    return st == CUBLAS_STATUS_SUCCESS && r.workspaceSize <= BS_LT_WORKSPACE;
}

cublasStatus_t bs_lt_run(bs_lt_ws *w, const bs_lt_layouts *l, const cublasLtMatmulAlgo_t *algo, const void *wt,
                         const void *x, void *y, cudaStream_t s) {
    const float one = 1.0f, zero = 0.0f;
    return cublasLtMatmul(w->lt, w->desc, &one, wt, l->a, x, l->b, &zero, y, l->c, y, l->c, algo, w->workspace,
                          BS_LT_WORKSPACE, s);
}

/* The algorithm for (n, k, m): table rule or heuristic (see lt_gemm.h). */
static int choose(bs_lt_ws *w, const bs_lt_layouts *l, int n, int k, int m, cublasLtMatmulAlgo_t *out, bs_err *e) {
    if (w->table) {
        const bs_gemm_entry *pick = bs_gemm_table_pick(w->table, n, k, m);
        int first, count;
        bs_gemm_table_shape(w->table, n, k, &first, &count);
        if (!pick) return bs_fail(e, BS_EINTERNAL, "GEMM table has no entry for shape [%d, %d]", n, k);
        memcpy(out->data, pick->algo, sizeof out->data);
        if (bs_lt_algo_fits(w, l, out)) return BS_OK;
        for (int i = first; i < first + count; i++) {
            memcpy(out->data, w->table->entries[i].algo, sizeof out->data);
            if (bs_lt_algo_fits(w, l, out)) return BS_OK;
        }
        return bs_fail(e, BS_EINTERNAL, "no algorithm of the GEMM table runs shape [%d, %d] at M = %d", n, k, m);
    }
    cublasLtMatmulPreference_t pref = NULL;
    cublasLtMatmulHeuristicResult_t r;
    int got = 0;
    uint64_t ws = BS_LT_WORKSPACE;
    cublasStatus_t st = cublasLtMatmulPreferenceCreate(&pref);
    if (st == CUBLAS_STATUS_SUCCESS)
        st = cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws, sizeof ws);
    if (st == CUBLAS_STATUS_SUCCESS)
        st = cublasLtMatmulAlgoGetHeuristic(w->lt, w->desc, l->a, l->b, l->c, l->c, pref, 1, &r, &got);
    if (pref) cublasLtMatmulPreferenceDestroy(pref);
    if (st != CUBLAS_STATUS_SUCCESS || got < 1 || r.state != CUBLAS_STATUS_SUCCESS)
        return bs_fail(e, BS_EINTERNAL, "cuBLASLt has no algorithm for shape [%d, %d] at M = %d (%s)", n, k, m,
                       bs_lt_status(st != CUBLAS_STATUS_SUCCESS ? st : r.state));
    *out = r.algo;
    return BS_OK;
}

int bs_lt_matmul(bs_lt_ws *w, const void *wt, int n, int k, const void *x, int m, void *y, cudaStream_t s, bs_err *e) {
    if (m <= 0) return BS_OK;
    cublasStatus_t st;
    if (w->cublas) {
        const float one = 1.0f, zero = 0.0f;
        cublasSetStream(w->cublas, s);
        st = cublasGemmEx(w->cublas, CUBLAS_OP_T, CUBLAS_OP_N, n, m, k, &one, wt, w->type, k, x, w->type, k, &zero, y,
                          w->type, n, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT);
        if (st != CUBLAS_STATUS_SUCCESS)
            return bs_fail(e, BS_EINTERNAL, "cublasGemmEx [%d, %d] M = %d: %s", n, k, m, bs_lt_status(st));
        return BS_OK;
    }
    bs_lt_layouts l;
    if ((st = bs_lt_layouts_make(&l, w->type, n, k, m)) != CUBLAS_STATUS_SUCCESS)
        return bs_fail(e, BS_EINTERNAL, "cuBLASLt layouts: %s", bs_lt_status(st));
    /* the choice for an exact (n, k, m) never changes within a process */
    unsigned slot = ((unsigned)n * 2654435761u ^ (unsigned)k * 40503u ^ (unsigned)m * 2246822519u) % BS_LT_CACHE;
    bs_lt_cached *c = &w->cache[slot];
    int rc = BS_OK;
    if (!c->valid || c->n != n || c->k != k || c->m != m) {
        cublasLtMatmulAlgo_t a;
        if ((rc = choose(w, &l, n, k, m, &a, e)) < 0) goto done;
        c->n = n;
        c->k = k;
        c->m = m;
        c->algo = a;
        c->valid = 1;
    }
    st = bs_lt_run(w, &l, &c->algo, wt, x, y, s);
    if (st != CUBLAS_STATUS_SUCCESS)
        rc = bs_fail(e, BS_EINTERNAL, "cublasLtMatmul [%d, %d] M = %d: %s", n, k, m, bs_lt_status(st));
done:
    bs_lt_layouts_free(&l);
    return rc;
}
