/* Quantized copies of a model's projections kept across runs (issue 34): one
 * safetensors file per model source and quantization, so that a restart
 * reads int8 weights instead of quantizing (and, for dtype int8,
 * calibrating) again.
 *
 * <cache dir>/int8w/<key>.safetensors (dtype int8w, format basal-int8w-v1)
 * and <cache dir>/int8/<key>.safetensors (dtype int8, basal-int8-v1). The
 * key is the SHA-256 of the format, the quantization rule and plan (for
 * int8: alpha, the smoothed inputs, the int8w projections, the calibration
 * text's version and a hash of its tokens), and, for config.json and every
 * weight file of the model, its real path, size and modification time: a
 * changed, moved or re-downloaded file, another alpha or calibration gives
 * another key. Tensors, for every layer l and projection P
 * (self_attn.{q,k,v,o}_proj, mlp.{gate,up,down}_proj):
 *     model.layers.<l>.<P>.weight.q      I8  [n, k]   q (cpu/gemm.h)
 *     model.layers.<l>.<P>.weight.scale  F32 [n]      s
 * and for dtype int8 also (model/smooth.h)
 *     model.layers.<l>.smooth.<g>        F32          the smoothing factors of input g
 *     model.layers.<l>.act_max.<g>       F32          the calibration maxima they come from
 *     calibration.ids                    I32 [T]      the calibration tokens
 * with __metadata__ {"format", "source": <key>, "rule"}. A file that is
 * truncated, for another source, format or rule, or holds a value no
 * quantization gives (q = -128, a negative or non-finite scale or factor)
 * is never used: the weights are quantized again and the file replaced.
 * Files are written to a temporary name and renamed, so a reader never sees
 * half of one; tensors are read one at a time into their final place, so a
 * start from the cache holds about the int8 size, never the file twice. */
#ifndef BS_QUANT_CACHE_H
#define BS_QUANT_CACHE_H

#include "model/weights.h"

#define BS_QUANT_CACHE_FORMAT "basal-int8w-v1"
#define BS_QUANT_CACHE_FORMAT_INT8 "basal-int8-v1"

/* The key of m's weights and config.json under the rule text (64 hex digits
 * and a NUL). */
int bs_quant_cache_key(const bs_model *m, const char *rule, char key[65], bs_err *e);
/* <cache_dir>/<subdir>/<key>.safetensors (malloc'd), the directory created;
 * NULL with e set. */
char *bs_quant_cache_path(const char *cache_dir, const char *subdir, const char *key, bs_err *e);

/* Reading: open checks the header and its metadata; then each tensor is
 * read, checked for dtype, shape (k 0: one dimension) and bounds, into dst.
 * Both return 1 when usable, 0 when not (e->msg says why), BS_ENOMEM. */
typedef struct bs_qc_file bs_qc_file;
int bs_qc_open(bs_qc_file **f, const char *path, const char *format, const char *key, bs_err *e);
int bs_qc_read(bs_qc_file *f, const char *name, const char *dtype, int64_t n, int64_t k, void *dst, bs_err *e);
/* Rows [row0, row0 + rows) of the same tensor (checked as a whole) into dst. */
int bs_qc_read_rows(bs_qc_file *f, const char *name, const char *dtype, int64_t n, int64_t k, int64_t row0,
                    int64_t rows, void *dst, bs_err *e);
void bs_qc_close(bs_qc_file *f);

/* Writing: every tensor in order. src: the bytes; or q8, a W8A8-packed
 * matrix whose row-major q is written (bs_gemm_w8a8_rows). */
typedef struct bs_qc_tensor {
    char name[160];
    const char *dtype; /* "I8", "F32", "I32" */
    int64_t n, k;      /* [n] when k is 0, else [n, k] */
    const void *src;
    const bs_wmat *q8;
} bs_qc_tensor;
int bs_qc_write(const char *path, const char *format, const char *key, const char *rule, const bs_qc_tensor *t,
                int count, bs_err *e);

/* dtype int8w: fills the int8w copies of m from path (1), or 0 (not usable:
 * e->msg says why; m unchanged), BS_ENOMEM; and writes them. */
int bs_quant_cache_read(bs_model *m, const char *path, const char *key, bs_err *e);
int bs_quant_cache_write(const bs_model *m, const char *path, const char *key, bs_err *e);
/* The log line of a cache write of either mode: rc < 0 (we->msg says why)
 * is a warning, never an error (the next start quantizes again). */
void bs_quant_cache_log_write(const bs_model *m, const char *path, int rc, const bs_err *we);
/* The rule text of dtype int8w (its key's and metadata's). */
extern const char bs_quant_rule_int8w[];

#endif
