/* A loaded Llama model: checked config, memory-mapped weights, and the small
 * per-layer vectors (norm weights, biases) widened to f32 once at load. */
#ifndef BS_MODEL_H
#define BS_MODEL_H

#include "model/weights.h"


/* Loads config.json and the weights of dir and checks the exact tensor set. */
int bs_model_load(bs_model *m, const char *dir, bs_pool *pool, bs_err *e);
void bs_model_free(bs_model *m);
/* After m->compute is set: packs the projection weights once for the GEMM
 * kernel of that mode when it reads its own layout (AMX, avx512-bf16 and
 * bf16-avx2 in the bf16 mode; bf16-avx2's int8 strips for the int8w copies,
 * which then replace their row-major form: call it after the quantization
 * cache is written), with progress, and drops the mapped originals from
 * memory; nothing for other kernels. BS_ENOMEM frees every packed and
 * quantized copy (the stored weights stay). */
int bs_model_prepack(bs_model *m, bs_err *e);
/* Frees the packed and quantized copies (bs_model_drop_copies) and the int8
 * mode's smoothing (bs_model_free does it too). */
void bs_model_unpack(bs_model *m);
/* Reads every page of the weights once, with progress (the modes that read
 * the stored weights: the first requests then do not wait for the disk). */
void bs_model_prefetch(const bs_model *m);
/* The int8w mode (issue 34): the seven projections of every layer get int8
 * copies with per-row scales (bs_gemm_quantize), layer by layer, with
 * progress, each stored matrix dropped from memory once its copy exists;
 * the embeddings and the letter rows of lm_head stay as stored. With
 * cache_dir, the copies are read from <cache_dir>/int8w/ when a valid file
 * for these weights is there (model/quant_cache.h), else made and written
 * there (a cache that cannot be read or written is logged, never fatal).
 * Set m->compute to BS_COMPUTE_BF16 first. BS_ENOMEM leaves m as it was. */
int bs_model_quantize(bs_model *m, const char *cache_dir, bs_err *e);
/* The CPU compute mode as users name it: "f32", "bf16", "int8w" or "int8"
 * (NULL on another backend, which names its own). */
const char *bs_model_dtype_name(const bs_model *m);

#endif
