/* The int8w copies of a model's projections, kept across runs (issue 34):
 * one safetensors file per model source in <cache dir>/int8w/, so that a
 * restart reads int8 weights instead of quantizing them again.
 *
 * File: <key>.safetensors, key = SHA-256 of the quantization rule's name and,
 * for every weight file of the model, its real path, size and modification
 * time (a changed, moved or re-downloaded file gives another key). Tensors,
 * for every layer l and projection P (self_attn.{q,k,v,o}_proj,
 * mlp.{gate,up,down}_proj):
 *     model.layers.<l>.<P>.weight.q      I8  [n, k]   q (cpu/gemm.h)
 *     model.layers.<l>.<P>.weight.scale  F32 [n]      s
 * and __metadata__ {"format": "basal-int8w-v1", "source": "<key>", "rule":
 * "per-row symmetric: s = amax/127, q = rint(w/s)"}. A file that is
 * truncated, for another source or rule, or holds a value no quantization
 * gives (q = -128, a negative or non-finite scale) is never used: the
 * weights are quantized again and the file replaced. Files are written to a
 * temporary name and renamed, so a reader never sees half of one. */
#ifndef BS_QUANT_CACHE_H
#define BS_QUANT_CACHE_H

#include "model/model.h"

#define BS_QUANT_CACHE_FORMAT "basal-int8w-v1"

/* The key of m's weights (64 hex digits and a NUL). */
int bs_quant_cache_key(const bs_model *m, char key[65], bs_err *e);
/* Fills the int8w copies of m from path. 1: loaded; 0: not usable (absent,
 * truncated, stale, malformed: e->msg says why, m unchanged); BS_ENOMEM. */
int bs_quant_cache_read(bs_model *m, const char *path, const char *key, bs_err *e);
/* Writes m's int8w copies (after bs_model_quantize) to path. */
int bs_quant_cache_write(const bs_model *m, const char *path, const char *key, bs_err *e);

#endif
