/* Weight conversion for the CUDA backend (spec 05 §5, §17 "Host side"): a
 * checkpoint tensor (F32, F16 or BF16) is converted once at load into the
 * resident dtype of the mode, on the CPU. Narrowing goes through f32 with
 * round-to-nearest-even (bs_f32_to_f16 / bs_f32_to_bf16 of base/util.h), so
 * bf16 -> f16 is one correctly rounded step from the exact bf16 value.
 *
 * Plain C, no CUDA headers: part of every build, so the host tests run on
 * machines without a GPU and under the sanitizers. */
#ifndef BS_CUDA_CONVERT_H
#define BS_CUDA_CONVERT_H

#include <stdint.h>

#include "cpu/pool.h"
#include "model/safetensors.h"

/* "f16", "bf16", "f32"; "auto" and NULL mean f16 (the CUDA default, 05 Q2).
 * Returns 0 and sets *out, or BS_EINVAL for anything else. */
int bs_cuda_dtype_parse(const char *s, bs_dtype *out);
/* "f16" | "bf16" | "f32" */
const char *bs_cuda_dtype_name(bs_dtype d);

/* One element of a tensor of dtype sdt (element i of src) in dtype ddt,
 * written to out (bs_dtype_size(ddt) bytes). */
void bs_cvt_one(const void *src, bs_dtype sdt, int64_t i, bs_dtype ddt, void *out);

/* n elements of src (dtype sdt) into out (dtype ddt), split over the pool's
 * threads. The bytes written do not depend on the split. */
void bs_cvt(bs_pool *pool, const void *src, bs_dtype sdt, int64_t n, bs_dtype ddt, void *out);

#endif
