/* Safetensors weights (spec 05 §4): one model.safetensors or a sharded
 * model.safetensors.index.json. Files are memory-mapped read-only; tensors point
 * into the mappings, nothing is copied. Every header is validated before any
 * tensor data is touched. */
#ifndef BS_SAFETENSORS_H
#define BS_SAFETENSORS_H

#include <stdint.h>
#include "basal.h"
#include "base/util.h"
#include "model/config.h"

#define BS_MAX_DIMS 8

typedef struct bs_tensor {
    char *name;
    bs_dtype dtype;
    int ndim;
    int64_t shape[BS_MAX_DIMS];
    int64_t numel;
    const void *data; /* into the mapping of its file */
    uint64_t nbytes;
    int file;         /* index into bs_weights.files */
} bs_tensor;

typedef struct bs_mapped_file {
    char *path;
    void *base;
    uint64_t size;
} bs_mapped_file;

typedef struct bs_weights {
    bs_tensor *tensors; /* sorted by name */
    int n_tensors;
    bs_mapped_file *files;
    int n_files;
    char *index_path; /* sharded: the index that listed the files; NULL for one file */
} bs_weights;

/* Opens the weights of a model directory (single file or sharded index). */
int bs_weights_open(bs_weights *w, const char *model_dir, bs_err *e);
/* Opens and validates one .safetensors file (used for shards and tests). */
int bs_weights_open_file(bs_weights *w, const char *path, bs_err *e);
void bs_weights_close(bs_weights *w);
const bs_tensor *bs_weights_get(const bs_weights *w, const char *name);

/* The exact Llama tensor set of spec 05 §4.3 for config c: every tensor present
 * with its shape, biases exactly as the flags say, no other tensor. */
int bs_weights_check_llama(const bs_weights *w, const bs_config *c, bs_err *e);

/* Reads element i of a tensor widened to f32 (slow path for tools and tests). */
float bs_tensor_get_f32(const bs_tensor *t, int64_t i);
/* Widens n elements starting at element off into out. */
void bs_tensor_read_f32(const bs_tensor *t, int64_t off, int64_t n, float *out);

/* Reads every page of the mapped files once (in 64 MiB steps, with a
 * progress line titled `what` for a large model, base/progress.h), so that a
 * model is in memory when its loading ends rather than at its first
 * requests. Never fails: it only reads what is mapped already. */
void bs_weights_prefetch(const bs_weights *w, const char *what);
/* Drops the whole pages of mapped tensor data [p, p + n) from this process's
 * memory (madvise MADV_DONTNEED on the read-only private mapping: the pages
 * stay valid and are read from the file again if touched). */
void bs_weights_drop_pages(const void *p, size_t n);

#endif
