/* cuBLAS and cuBLASLt, loaded when the CUDA backend starts, not when the
 * program does.
 *
 * Linking libcublasLt costs every process about 210 MB of resident memory
 * at start (its initialisers; measured: an empty program linked with it has
 * a 211 MB peak RSS, 1 MB without), which a CPU-only `basal` would carry for
 * nothing: `basal --help` peaked at 227 MB, 9 MB without cuBLAS. So basal
 * links only the CUDA runtime, and bs_cublas_load() dlopens the two cuBLAS
 * libraries (the soname of the headers' major version, found through the
 * binary's run path like the runtime) the first time a GEMM workspace is
 * made. The cuBLAS names below call through the loaded pointers: code in
 * src/cuda is written against the ordinary cuBLAS API. */
#ifndef BS_CUDA_CUBLAS_DL_H
#define BS_CUDA_CUBLAS_DL_H

#include <cublasLt.h>
#include <cublas_v2.h>

#include "basal.h"

/* Every cuBLAS(Lt) function src/cuda calls: X(library, name). */
#define BS_CUBLAS_FUNCTIONS(X)                                                                                    \
    X(LT, cublasLtGetVersion)                                                                                     \
    X(LT, cublasLtCreate)                                                                                         \
    X(LT, cublasLtDestroy)                                                                                        \
    X(LT, cublasLtMatmul)                                                                                         \
    X(LT, cublasLtMatmulDescCreate)                                                                               \
    X(LT, cublasLtMatmulDescDestroy)                                                                              \
    X(LT, cublasLtMatmulDescSetAttribute)                                                                         \
    X(LT, cublasLtMatrixLayoutCreate)                                                                             \
    X(LT, cublasLtMatrixLayoutDestroy)                                                                            \
    X(LT, cublasLtMatmulPreferenceCreate)                                                                         \
    X(LT, cublasLtMatmulPreferenceDestroy)                                                                        \
    X(LT, cublasLtMatmulPreferenceSetAttribute)                                                                   \
    X(LT, cublasLtMatmulAlgoGetHeuristic)                                                                         \
    X(LT, cublasLtMatmulAlgoGetIds)                                                                               \
    X(LT, cublasLtMatmulAlgoInit)                                                                                 \
    X(LT, cublasLtMatmulAlgoCheck)                                                                                \
    X(LT, cublasLtMatmulAlgoCapGetAttribute)                                                                      \
    X(LT, cublasLtMatmulAlgoConfigGetAttribute)                                                                   \
    X(LT, cublasLtMatmulAlgoConfigSetAttribute)                                                                   \
    X(BLAS, cublasCreate_v2)                                                                                      \
    X(BLAS, cublasDestroy_v2)                                                                                     \
    X(BLAS, cublasSetStream_v2)                                                                                   \
    X(BLAS, cublasSetWorkspace_v2)                                                                                \
    X(BLAS, cublasSetMathMode)                                                                                    \
    X(BLAS, cublasGemmEx)

typedef struct bs_cublas_api {
#define BS_CUBLAS_MEMBER(lib, name) __typeof__(name) *name;
    BS_CUBLAS_FUNCTIONS(BS_CUBLAS_MEMBER)
#undef BS_CUBLAS_MEMBER
} bs_cublas_api;

extern bs_cublas_api bs_cublas;

/* Loads both libraries once (thread-safe); later calls return the first
 * result. On failure e names the library and what to do. */
int bs_cublas_load(bs_err *e);

/* From here on the cuBLAS names are the loaded functions (not in
 * cublas_dl.c, which fills the table). */
#ifndef BS_CUBLAS_DL_IMPL
#define cublasLtGetVersion (*bs_cublas.cublasLtGetVersion)
#define cublasLtCreate (*bs_cublas.cublasLtCreate)
#define cublasLtDestroy (*bs_cublas.cublasLtDestroy)
#define cublasLtMatmul (*bs_cublas.cublasLtMatmul)
#define cublasLtMatmulDescCreate (*bs_cublas.cublasLtMatmulDescCreate)
#define cublasLtMatmulDescDestroy (*bs_cublas.cublasLtMatmulDescDestroy)
#define cublasLtMatmulDescSetAttribute (*bs_cublas.cublasLtMatmulDescSetAttribute)
#define cublasLtMatrixLayoutCreate (*bs_cublas.cublasLtMatrixLayoutCreate)
#define cublasLtMatrixLayoutDestroy (*bs_cublas.cublasLtMatrixLayoutDestroy)
#define cublasLtMatmulPreferenceCreate (*bs_cublas.cublasLtMatmulPreferenceCreate)
#define cublasLtMatmulPreferenceDestroy (*bs_cublas.cublasLtMatmulPreferenceDestroy)
#define cublasLtMatmulPreferenceSetAttribute (*bs_cublas.cublasLtMatmulPreferenceSetAttribute)
#define cublasLtMatmulAlgoGetHeuristic (*bs_cublas.cublasLtMatmulAlgoGetHeuristic)
#define cublasLtMatmulAlgoGetIds (*bs_cublas.cublasLtMatmulAlgoGetIds)
#define cublasLtMatmulAlgoInit (*bs_cublas.cublasLtMatmulAlgoInit)
#define cublasLtMatmulAlgoCheck (*bs_cublas.cublasLtMatmulAlgoCheck)
#define cublasLtMatmulAlgoCapGetAttribute (*bs_cublas.cublasLtMatmulAlgoCapGetAttribute)
#define cublasLtMatmulAlgoConfigGetAttribute (*bs_cublas.cublasLtMatmulAlgoConfigGetAttribute)
#define cublasLtMatmulAlgoConfigSetAttribute (*bs_cublas.cublasLtMatmulAlgoConfigSetAttribute)
#define cublasCreate_v2 (*bs_cublas.cublasCreate_v2)
#define cublasDestroy_v2 (*bs_cublas.cublasDestroy_v2)
#define cublasSetStream_v2 (*bs_cublas.cublasSetStream_v2)
#define cublasSetWorkspace_v2 (*bs_cublas.cublasSetWorkspace_v2)
#define cublasSetMathMode (*bs_cublas.cublasSetMathMode)
#define cublasGemmEx (*bs_cublas.cublasGemmEx)
#endif

#endif
