/* A minimal, strict reader of PyTorch `torch.save` files in the zip format
 * (PyTorch >= 1.6) holding a dict of numbers and one state dict of tensors, as
 * evidence_head.pt does (spec 03 §4.2, 05 §14 E2). The file is hostile input:
 *
 *   - the ZIP archive: end record (and its ZIP64 twin, which PyTorch always
 *     writes) and every central-directory entry are checked against its local
 *     header and data descriptor; entries must be stored (method 0), inside
 *     the file, not overlapping, with a matching CRC-32, under one top folder;
 *   - data.pkl is run by a pickle interpreter that knows only the opcodes of
 *     05 §14 E2 and the globals collections.OrderedDict,
 *     torch._utils._rebuild_tensor_v2 and torch.{Float,Half,BFloat16}Storage;
 *     nothing is ever imported or executed, anything else is an error;
 *   - every length, index, shape, stride and storage extent is checked, and the
 *     memory used is bounded by the sizes below.
 *
 * Errors are BS_EFORMAT (or BS_EIO/BS_ENOMEM) with a message starting with the
 * file name given by the caller. */
#ifndef BS_TORCHFILE_H
#define BS_TORCHFILE_H

#include <stddef.h>
#include <stdint.h>
#include "basal.h"

#define BS_PT_MAX_FILE_BYTES ((size_t)1 << 30) /* 1 GiB: a real head is a few MB */
#define BS_PT_MAX_PICKLE_BYTES ((size_t)1 << 20)
#define BS_PT_MAX_ENTRIES 4096
#define BS_PT_MAX_DIMS 8
#define BS_PT_MAX_NAME 256

typedef struct bs_pt_tensor {
    char *name;                       /* state-dict key */
    int ndim;
    int64_t shape[BS_PT_MAX_DIMS];
    int64_t numel;
    const char *storage;              /* "FloatStorage", "HalfStorage" or "BFloat16Storage" */
    float *data;                      /* numel values, widened to f32 */
} bs_pt_tensor;

/* The root dict of the file: its integer entries and the tensors of its
 * "state_dict" entry, in state-dict order. */
typedef struct bs_pt_file {
    size_t n_ints;
    char **int_keys;
    int64_t *int_vals;
    int has_state_dict;
    size_t n_tensors;
    bs_pt_tensor *tensors;
} bs_pt_file;

/* Reads path (at most BS_PT_MAX_FILE_BYTES); fname names the file in messages. */
int bs_pt_read_file(const char *path, const char *fname, bs_pt_file *out, bs_err *e);
/* The same from memory (the bytes are not kept). */
int bs_pt_read_mem(const unsigned char *data, size_t len, const char *fname, bs_pt_file *out, bs_err *e);
void bs_pt_free(bs_pt_file *f);

/* The integer root entry `key`: 1 and *v when present, 0 otherwise. */
int bs_pt_int(const bs_pt_file *f, const char *key, int64_t *v);
/* The tensor named `name`, or NULL. */
const bs_pt_tensor *bs_pt_tensor_get(const bs_pt_file *f, const char *name);

#endif
