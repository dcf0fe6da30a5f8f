/* cuBLASLt GEMM tables (spec 05 §13.1, 06 §9; format in src/cuda/README.md):
 * per weight shape (N, K) and M class, the opaque algorithm to run. In an
 * invariant table all algorithms of one shape belong to one bitwise-
 * equivalence group, so a row's result does not depend on the M of the call.
 *
 * Plain C over jansson: part of every build (the host tests parse and check
 * tables without a GPU). */
#ifndef BS_CUDA_GEMM_TABLE_H
#define BS_CUDA_GEMM_TABLE_H

#include <stdint.h>

#include "basal.h"
#include "model/safetensors.h"

#define BS_GEMM_ALGO_WORDS 8
#define BS_GEMM_SEARCH_VERSION 2
#define BS_GEMM_MAX_SHAPES 8

/* The 25 classes of an invariant search (05 §13.1). */
extern const int bs_gemm_invariant_classes[25];

typedef struct bs_gemm_entry {
    int m_class, n, k;
    uint64_t algo[BS_GEMM_ALGO_WORDS]; /* cublasLtMatmulAlgo_t.data */
    double ms, best_ms, tflops;        /* informational; 0 when absent */
    int configurations;
} bs_gemm_entry;

typedef struct bs_gemm_table {
    long cublaslt_version;  /* major*10000 + minor*100 + patch, as cublasLtGetVersion() */
    char *gpu;              /* the driver's device name */
    bs_dtype dtype;
    int invariant;
    int search_version;
    int n_shapes;
    int shapes[BS_GEMM_MAX_SHAPES][2]; /* [N, K]: qkv, o, gate|up, down */
    bs_gemm_entry *entries; /* sorted by (n, k, m_class), no duplicates */
    int n_entries;
    /* informational, written by gemm-search */
    char *model, *source, *note;
    double timing_s;
} bs_gemm_table;

/* 05 §13.1: M <= 512 rounded up to a multiple of 16, else of 128 (M >= 1). */
int bs_gemm_m_class(int m);

/* Parses a table; name labels the messages. Structure and ranges are
 * checked (every field of the format, 8 algorithm words, entries only for
 * listed shapes, no duplicate class); not whether it fits a device. */
int bs_gemm_table_parse(bs_gemm_table *t, const char *text, size_t len, const char *name, bs_err *e);
int bs_gemm_table_load(bs_gemm_table *t, const char *path, bs_err *e);
void bs_gemm_table_free(bs_gemm_table *t);

/* Whether the table may be used here: same GPU name, cuBLASLt version, dtype
 * and search version, and at least one entry for every shape in shapes[]. */
int bs_gemm_table_check(const bs_gemm_table *t, const char *gpu, long cublaslt_version, bs_dtype dtype,
                        const int (*shapes)[2], int n_shapes, bs_err *e);

/* The entries of shape (n, k): *first and *count (count 0: none). */
void bs_gemm_table_shape(const bs_gemm_table *t, int n, int k, int *first, int *count);
/* The entry for a call with m rows: the smallest class >= bs_gemm_m_class(m)
 * of the shape, else its largest; NULL when the shape has none. */
const bs_gemm_entry *bs_gemm_table_pick(const bs_gemm_table *t, int n, int k, int m);

/* The table as JSON text (malloc'd, NUL-terminated); NULL on allocation
 * failure. Algorithm words are written as decimal strings: JSON numbers
 * above 2^53 do not survive every parser. */
char *bs_gemm_table_dump(const bs_gemm_table *t);

#endif
