#include "device/device.h"

#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/log.h"
#include "model/smooth.h"

#ifdef BS_HAVE_CUDA
#include "cuda/backend.h"
#endif

int bs_device_has_cuda(void) {
#ifdef BS_HAVE_CUDA
    return 1;
#else
    return 0;
#endif
}

int bs_device_cublas_version(long *version, bs_err *e) {
#ifdef BS_HAVE_CUDA
    return bs_cuda_cublas_version(version, e);
#else
    (void)version;
    return bs_fail(e, BS_EUNSUP, "this build has no CUDA backend");
#endif
}

int bs_device_cuda_count(void) {
#ifdef BS_HAVE_CUDA
    return bs_cuda_device_count();
#else
    return 0;
#endif
}

/* CPU modes (issue 16, superseding spec 05 Q1): f32 and auto compute in f32
 * (exact widening of any stored dtype, the same bits on every CPU); bf16
 * rounds the inputs of the GEMMs and of attention's two products to bf16
 * and runs the fastest bf16 kernel of the CPU
 * (AMX, else AVX512-BF16, else its exact emulation; BASAL_BF16 picks one:
 * src/cpu/gemm.h), with the weights packed once for it when it wants them.
 * Issue 34: int8w (int8 weights in the bf16 chain) and int8 (W8A8 with
 * smoothing, exact int32 sums; BASAL_INT8 picks the kernel), both with
 * attention as in bf16 and their weights kept in the cache. */
static int cpu_dtype(bs_model *m, const char *dtype, bs_err *e) {
    m->compute = BS_COMPUTE_F32;
    if (dtype && !strcmp(dtype, "bf16")) {
        const char *want = getenv("BASAL_BF16");
        int k = bs_gemm_bf16_parse(want);
        if (k == -2)
            return bs_fail(e, BS_EINVAL, "BASAL_BF16=%s: unknown bf16 kernel (auto, amx, avx512-bf16, avx2, portable)", want);
        static atomic_int warned;
        if (k >= 0 && k != bs_gemm_bf16_kernel() && !atomic_exchange(&warned, 1))
            bs_log(BS_LOG_WARN, "device", "BASAL_BF16=%s: this CPU (or its kernel) cannot run it; using %s", want,
                   bs_gemm_bf16_kernel_name());
        m->compute = BS_COMPUTE_BF16;
        bs_model_prefetch(m);
        int rc = bs_model_prepack(m, e);
        if (rc < 0) m->compute = BS_COMPUTE_F32;
        return rc;
    }
    if (dtype && !strcmp(dtype, "int8")) { /* W8A8 with smoothing (model/smooth.h); attention as in bf16 */
        const char *want = getenv("BASAL_INT8");
        int k = bs_gemm_i8_parse(want);
        if (k == -2)
            return bs_fail(e, BS_EINVAL, "BASAL_INT8=%s: unknown int8 kernel (auto, amx, avx512-vnni, avx-vnni, avx2, portable)",
                           want);
        static atomic_int warned_i8;
        if (k >= 0 && k != bs_gemm_i8_kernel() && !atomic_exchange(&warned_i8, 1))
            bs_log(BS_LOG_WARN, "device", "BASAL_INT8=%s: this CPU (or its kernel) cannot run it; using %s", want,
                   bs_gemm_i8_kernel_name());
        bs_model_unpack(m);
        m->compute = BS_COMPUTE_BF16;
        char *cache = NULL;
        const char *src;
        bs_err ce = { 0 };
        if (bs_cache_dir(&cache, &src, &ce) < 0) cache = NULL;
        int rc = bs_model_quantize_int8(m, cache, e);
        free(cache);
        if (rc >= 0) rc = bs_model_prepack(m, e); /* its int8w projections, for their kernel */
        bs_trim_heap(); /* the quantization's temporaries, the copies the packing replaced */
        if (rc < 0) m->compute = BS_COMPUTE_F32;
        return rc;
    }
    if (dtype && !strcmp(dtype, "int8w")) { /* weights int8, the bf16 mode's compute (gemm.h) */
        bs_model_unpack(m);
        m->compute = BS_COMPUTE_BF16;
        char *cache = NULL;
        const char *src;
        bs_err ce = { 0 };
        if (bs_cache_dir(&cache, &src, &ce) < 0) cache = NULL;
        int rc = bs_model_quantize(m, cache, e);
        free(cache);
        if (rc >= 0) rc = bs_model_prepack(m, e); /* after the cache is written: it stores q row-major */
        bs_trim_heap();
        if (rc < 0) m->compute = BS_COMPUTE_F32;
        return rc;
    }
    if (!dtype || !strcmp(dtype, "auto") || !strcmp(dtype, "f32")) {
        bs_model_unpack(m); /* f32 kernels read the stored weights */
        bs_model_prefetch(m);
        return BS_OK;
    }
    if (!strcmp(dtype, "f16")) return bs_fail(e, BS_EUNSUP, "dtype f16 needs the CUDA backend; use bf16 or f32");
    return bs_fail(e, BS_EINVAL, "unknown dtype '%s' (auto, f16, bf16, f32, int8w, int8)", dtype);
}

int bs_device_attach_ex(bs_model *m, const char *device, const char *dtype, const char *gemm_table, bs_err *e) {
    if (!device) device = "cpu";
    if (strcmp(device, "cpu") && strcmp(device, "cuda") && strcmp(device, "auto"))
        return bs_fail(e, BS_EINVAL, "unknown device '%s' (cpu, cuda, auto)", device);
    if (dtype && strcmp(dtype, "auto") && strcmp(dtype, "f16") && strcmp(dtype, "bf16") && strcmp(dtype, "f32") &&
        strcmp(dtype, "int8w") && strcmp(dtype, "int8"))
        return bs_fail(e, BS_EINVAL, "unknown dtype '%s' (auto, f16, bf16, f32, int8w, int8)", dtype);
    if (m->backend) return bs_fail(e, BS_EINVAL, "the model already has the %s backend", m->backend->name);
    int cuda = !strcmp(device, "cuda");
    if (!strcmp(device, "auto")) {
        cuda = bs_device_cuda_count() > 0;
        /* once per process, not once per model: it says the same for all */
        static atomic_int said;
        if (!cuda && !atomic_exchange(&said, 1))
            bs_log(BS_LOG_INFO, "device", "no usable CUDA GPU; using the CPU backend%s",
                   bs_device_has_cuda() ? "" : " (this build has no CUDA backend)");
    }
    int cpu_only = dtype && (!strcmp(dtype, "int8w") || !strcmp(dtype, "int8"));
    if (cuda && cpu_only) {
        if (strcmp(device, "auto"))
            return bs_fail(e, BS_EUNSUP, "dtype %s runs on the CPU backend only; use --backend cpu (or auto)", dtype);
        cuda = 0;
        static atomic_int said_int8;
        if (!atomic_exchange(&said_int8, 1))
            bs_log(BS_LOG_INFO, "device", "dtype %s runs on the CPU backend; the GPU is not used for it", dtype);
    }
    if (!cuda) {
        if (gemm_table) /* 06 §4.2: accepted, and said to be of no use here */
            bs_log(BS_LOG_INFO, "device", "gemm table %s is ignored: the CPU backend does not use cuBLASLt", gemm_table);
        return cpu_dtype(m, dtype, e);
    }
#ifdef BS_HAVE_CUDA
    bs_model_prefetch(m);
    return bs_cuda_backend_create(m, dtype, gemm_table, e);
#else
    (void)gemm_table;
    return bs_fail(e, BS_EUNSUP, "this build has no CUDA backend (built without nvcc or with CUDA=0)");
#endif
}

int bs_device_attach(bs_model *m, const char *device, const char *dtype, bs_err *e) {
    return bs_device_attach_ex(m, device, dtype, NULL, e);
}
