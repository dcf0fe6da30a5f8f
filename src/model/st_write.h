/* Safetensors writer (spec 05 §4.1–4.2), the counterpart of safetensors.h for
 * tools (make-model, convert-llama2c) and tests.
 *
 * The header must list every tensor's byte range before any data can be
 * written, so a writer is used in two phases: declare all tensors
 * (bs_st_add), then bs_st_begin lays out the file(s) and writes the headers,
 * after which tensor data is streamed in with positioned writes in any order
 * and from any number of threads (each call covers its own byte range).
 * Nothing is buffered: a multi-GB checkpoint never sits in memory.
 *
 * Layout: tensors in name order (byte order of the names), data offsets
 * contiguous from 0, `__metadata__` {"format":"pt"}, header padded with
 * spaces so the data buffer starts at a multiple of 8. With n_shards > 1 the
 * name-ordered list is cut into n contiguous groups of about equal size,
 * written as model-0000i-of-0000N.safetensors plus model.safetensors.index.json. */
#ifndef BS_ST_WRITE_H
#define BS_ST_WRITE_H

#include <stddef.h>
#include <stdint.h>
#include "basal.h"
#include "safetensors.h"

typedef struct bs_st_writer bs_st_writer;

int bs_st_new(bs_st_writer **out, bs_err *e);
/* Frees the writer; if bs_st_finish did not succeed, the files it created
 * are removed so no half-written checkpoint is left behind. */
void bs_st_free(bs_st_writer *w);

/* Declares a tensor (before bs_st_begin). ndim 0 is a scalar. */
int bs_st_add(bs_st_writer *w, const char *name, bs_dtype dtype, int ndim,
              const int64_t *shape, bs_err *e);

/* Creates <dir>/model.safetensors (n_shards <= 1) or the shards and the index,
 * and writes the headers. The files must not exist yet. */
int bs_st_begin(bs_st_writer *w, const char *dir, int n_shards, bs_err *e);

/* After bs_st_begin: tensors are numbered 0..count-1 in name order. */
int bs_st_count(const bs_st_writer *w);
int bs_st_find(const bs_st_writer *w, const char *name); /* -1 if absent */
const char *bs_st_name(const bs_st_writer *w, int idx);
int64_t bs_st_numel(const bs_st_writer *w, int idx);
bs_dtype bs_st_dtype(const bs_st_writer *w, int idx);

/* Writes n raw bytes at byte offset off inside tensor idx. Thread-safe for
 * disjoint ranges. */
int bs_st_write(bs_st_writer *w, int idx, uint64_t off, const void *data, size_t n, bs_err *e);
/* Writes n values starting at element elem_off of tensor idx, converted from
 * f32 to the tensor's dtype (round-to-nearest-even for BF16/F16). Thread-safe. */
int bs_st_write_f32(bs_st_writer *w, int idx, int64_t elem_off, const float *v, size_t n, bs_err *e);

/* Checks that every byte of every tensor was written, flushes and closes the
 * files, and writes the index of a sharded checkpoint. */
int bs_st_finish(bs_st_writer *w, bs_err *e);

#endif
