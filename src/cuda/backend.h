/* The CUDA backend (spec 05 §5, §17): the forward of model/forward.c on an
 * NVIDIA GPU, behind the bs_backend hook of model/model.h. Compiled only in
 * CUDA builds (BS_HAVE_CUDA); device/device.c is the entry point for callers.
 * Details and the GEMM table format: src/cuda/README.md. */
#ifndef BS_CUDA_BACKEND_H
#define BS_CUDA_BACKEND_H

#include "model/model.h"

/* Devices this build can run on (compute capability >= 8.0); 0 when there
 * is no driver, no GPU, or any CUDA error. Never fails. */
int bs_cuda_device_count(void);

/* Loads cuBLAS(Lt) (cuda/cublas_dl.h) if not yet done and gives cuBLASLt's
 * version (major*10000 + minor*100 + patch); no GPU needed. */
int bs_cuda_cublas_version(long *version, bs_err *e);

/* The architectures the kernels were built for, for messages. */
const char *bs_cuda_arch_list(void);

/* Uploads the weights of m once (converted to the resident dtype on the
 * CPU), loads and checks the GEMM table if a path is given, and sets
 * m->backend. dtype: "f16" (also "auto" and NULL), "bf16" or "f32".
 * Device: $BASAL_CUDA_DEVICE, default 0. Errors: no usable GPU (BS_EUNSUP),
 * a table that does not fit (BS_EINVAL), too little memory (BS_ENOMEM). */
int bs_cuda_backend_create(bs_model *m, const char *dtype, const char *gemm_table_path, bs_err *e);

#endif
