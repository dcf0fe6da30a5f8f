/* Prefix-trie packing of prompts into one row (spec 04 §5) and the compact
 * forward input built from packed rows (spec 05 §6). */
#ifndef BS_PACK_H
#define BS_PACK_H

#include <stdint.h>
#include "model/forward.h"

typedef struct bs_row {
    int32_t len;          /* tokens in the row */
    int32_t *ids, *pos, *node;
    int32_t n_blocks;
    int32_t *parent;      /* [n_blocks], -1 for the root */
    int32_t *blk_start, *blk_len; /* [n_blocks] contiguous range of each block */
    int32_t n_prompts;
    int32_t *last;        /* [n_prompts] readout column of each prompt */
    int32_t prefix_len;   /* leading tokens in block 0 */
} bs_row;

/* Packs n prompts (flat, in question then order index order) into a trie row. */
int bs_pack_row(bs_row *row, const int32_t *const *prompts, const int32_t *lens, int32_t n, bs_err *e);
void bs_row_free(bs_row *row);

/* A forward input over several rows back to back, with owned arrays.
 * readout_of[p] is the index into in.readouts of flat prompt p (rows in order,
 * then prompts of each row); identical prompts of a row share one readout. */
typedef struct bs_packed {
    bs_fwd_input in;
    int32_t *ids, *pos, *readouts, *readout_of;
    bs_unit *units;
    int32_t n_prompts;
} bs_packed;

/* prefixes: NULL, or per row NULL / a cached prefix whose tokens the row
 * starts with (spec 05 §6 I2): those tokens are skipped and attention reads
 * their K/V from the cache. Every readout column must lie past the prefix. */
int bs_packed_build(bs_packed *p, const bs_row *rows, int32_t n_rows, const bs_kv *const *prefixes,
                    const int32_t *out_ids, int32_t n_out_ids, bs_err *e);
void bs_packed_free(bs_packed *p);

#endif
