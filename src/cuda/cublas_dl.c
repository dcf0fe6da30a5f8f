#define BS_CUBLAS_DL_IMPL
#include "cuda/cublas_dl.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>

#define BS_STR2(x) #x
#define BS_STR(x) BS_STR2(x)

/* the sonames of the headers this file is compiled against */
static const char *const LIB_LT = "libcublasLt.so." BS_STR(CUBLAS_VER_MAJOR);
static const char *const LIB_BLAS = "libcublas.so." BS_STR(CUBLAS_VER_MAJOR);

bs_cublas_api bs_cublas;

static pthread_once_t once = PTHREAD_ONCE_INIT;
static int load_rc;
static char load_msg[512];

static void load(void) {
    /* cuBLAS needs cuBLASLt: load it first, both kept for the process */
    void *lt = dlopen(LIB_LT, RTLD_NOW | RTLD_LOCAL);
    void *blas = lt ? dlopen(LIB_BLAS, RTLD_NOW | RTLD_LOCAL) : NULL;
    if (!lt || !blas) {
        snprintf(load_msg, sizeof load_msg,
                 "cannot load %s (%s); install the CUDA %d cuBLAS libraries or run on the CPU (--device cpu)",
                 lt ? LIB_BLAS : LIB_LT, dlerror(), CUBLAS_VER_MAJOR);
        load_rc = BS_EUNSUP;
        return;
    }
#define BS_CUBLAS_RESOLVE(lib, name)                                                                              \
    if (!(*(void **)&bs_cublas.name = dlsym(BS_CUBLAS_##lib, #name))) {                                          \
        snprintf(load_msg, sizeof load_msg, "%s has no %s: a cuBLAS older than the CUDA %d headers basal was built with",    \
                 BS_CUBLAS_##lib == lt ? LIB_LT : LIB_BLAS, #name, CUBLAS_VER_MAJOR);                             \
        load_rc = BS_EUNSUP;                                                                                      \
        return;                                                                                                   \
    }
#define BS_CUBLAS_LT lt
#define BS_CUBLAS_BLAS blas
    BS_CUBLAS_FUNCTIONS(BS_CUBLAS_RESOLVE)
#undef BS_CUBLAS_RESOLVE
    load_rc = BS_OK;
}

int bs_cublas_load(bs_err *e) {
    pthread_once(&once, load);
    return load_rc < 0 ? bs_fail(e, load_rc, "%s", load_msg) : BS_OK;
}
