/* The device layer, above model/ and cuda/ (neither knows the other): choosing
 * the compute backend of a loaded model (spec 06 §4.2 `backend`, 05 §5
 * precision modes), the CPU forward of model/forward.c or the CUDA backend of
 * src/cuda when this build has it and a GPU is there. */
#ifndef BS_DEVICE_H
#define BS_DEVICE_H

#include "model/model.h"

/* device: "cpu" (also NULL), "cuda" or "auto" (CUDA when the build has it and
 * at least one usable GPU, else the CPU with one log line on stderr).
 * dtype: "auto" (also NULL: f16 on CUDA, f32 compute on the CPU), "f16" (CUDA
 * only, 05 Q2), "bf16" (on the CPU: bf16 inputs to the GEMMs and attention,
 * bs_model.compute), "f32", or the CPU-only "int8w" (int8 weights in the
 * bf16 mode's compute) and "int8" (W8A8 with smoothing, model/smooth.h;
 * m->int8_alpha set first). gemm_table: a GEMM table file for CUDA, or NULL
 * (heuristic algorithms, not batch-invariant). Errors: unknown
 * values (BS_EINVAL), "cuda" in a build without it or without a GPU, f16 on the
 * CPU (BS_EUNSUP), and whatever creating the CUDA backend reports. */
int bs_device_attach_ex(bs_model *m, const char *device, const char *dtype, const char *gemm_table, bs_err *e);
int bs_device_attach(bs_model *m, const char *device, const char *dtype, bs_err *e);

/* Usable CUDA GPUs (0 in builds without CUDA). */
int bs_device_cuda_count(void);
/* Whether this build contains the CUDA backend. */
int bs_device_has_cuda(void);
/* The cuBLASLt version the CUDA backend loads when it starts (it is not
 * loaded before: src/cuda/cublas_dl.h); BS_EUNSUP without CUDA, or the
 * loader's message. */
int bs_device_cublas_version(long *version, bs_err *e);

#endif
