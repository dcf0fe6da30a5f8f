/* Internal layout of bs_tokenizer, shared by tokenizer.c (loading and
 * lookups), tok_encode.c (the encode pipeline), tok_bpe.c (the BPE model) and
 * tok_decode.c (decoders). Not part of the public API. */
#ifndef BS_TOK_INTERNAL_H
#define BS_TOK_INTERNAL_H

#include <stdint.h>
#include <stddef.h>
#include "tokenizer/tokenizer.h"
#include "base/util.h"

#define TK_METASPACE_CP 0x2581u /* U+2581 LOWER ONE EIGHTH BLOCK, "▁" */

/* ---- string -> id map (open addressing over a shared byte pool) ---- */
typedef struct {
    uint32_t off, len, hash;
    int32_t id;
} tk_sent;

typedef struct {
    tk_sent *slots; /* len == UINT32_MAX marks an empty slot */
    size_t mask, count;
    char *pool;
    size_t pool_len, pool_cap;
} tk_strmap;

int tk_strmap_init(tk_strmap *m, size_t expected);
void tk_strmap_free(tk_strmap *m);
/* Inserts s (keeps the first id when s is already present: *dup set to 1). */
int tk_strmap_put(tk_strmap *m, const char *s, size_t len, int32_t id, int *dup);
int32_t tk_strmap_get(const tk_strmap *m, const char *s, size_t len);
/* Pool offset of s, or -1. */
int64_t tk_strmap_off(const tk_strmap *m, const char *s, size_t len);

/* ---- merge map: (left id, right id) -> (rank, merged id) ---- */
typedef struct {
    uint64_t key;
    int32_t rank; /* -1: empty slot */
    int32_t id;
} tk_ment;

typedef struct {
    tk_ment *slots;
    size_t mask, count;
} tk_mergemap;

int tk_mergemap_init(tk_mergemap *m, size_t expected);
void tk_mergemap_free(tk_mergemap *m);
/* A later merge of the same pair replaces the earlier one, as HF's map does. */
void tk_mergemap_put(tk_mergemap *m, int32_t a, int32_t b, int32_t rank, int32_t id);
const tk_ment *tk_mergemap_get(const tk_mergemap *m, int32_t a, int32_t b);

/* ---- normalized text: code points with their original character span ---- */
typedef struct {
    uint32_t *cp;
    int32_t *os, *oe; /* original [start, end) character offsets per code point */
    size_t n, cap;
    int oom;
} tk_nstr;

void tk_nstr_free(tk_nstr *s);
void tk_nstr_push(tk_nstr *s, uint32_t cp, int32_t os, int32_t oe);

/* ---- components ---- */
typedef struct {
    int32_t id;
    char *content;   /* UTF-8 */
    size_t clen;
    uint32_t *cps;   /* pattern matched in the text: content, or for normalized
                        tokens the content passed through the normalizer */
    size_t ncp;
    int single_word, lstrip, rstrip, normalized, special;
} tk_added;

enum { TN_PREPEND, TN_REPLACE, TN_NFC, TN_NFD, TN_NFKC, TN_NFKD };
typedef struct {
    int kind;
    uint32_t *a; size_t na; /* Prepend: text; Replace: pattern */
    uint32_t *b; size_t nb; /* Replace: content */
} tk_norm;

enum { TP_ALWAYS, TP_FIRST, TP_NEVER };

enum { TD_REPLACE, TD_BYTEFALLBACK, TD_FUSE, TD_STRIP, TD_METASPACE };
typedef struct {
    int kind;
    char *pat, *rep;      /* Replace: UTF-8 pattern and content */
    size_t npat, nrep;
    uint32_t ch;          /* Strip: content char; Metaspace: replacement */
    long start, stop;     /* Strip */
    int scheme;           /* Metaspace */
} tk_dec;

struct bs_tokenizer {
    char *fname;

    /* BPE model */
    tk_strmap vocab;
    int64_t *id_off;      /* vocab id -> pool offset (-1: no vocab entry) */
    uint32_t *id_len;
    int32_t n_ids;        /* size of id_off: largest vocab id + 1 */
    tk_mergemap merges;
    int32_t unk_id;       /* -1: no unk_token */
    int byte_fallback, fuse_unk, ignore_merges;
    int32_t byte_id[256]; /* id of "<0xHH>", -1 if absent */
    char *prefix, *suffix; /* continuing_subword_prefix / end_of_word_suffix */
    size_t nprefix, nsuffix;
    int32_t *ascii_id;    /* id of each 1-byte character token, -1 if absent */
    int chunk_ms;         /* words may be cut before each U+2581 that follows another
                             character: no token spans such a boundary (tok_bpe.c) */

    /* added tokens */
    tk_added *added;
    size_t n_added;
    tk_strmap added_map;  /* content -> id */
    int32_t *added_of_id; /* id -> index in added, -1; size max_id + 1 */
    size_t *pass_idx[2];  /* indices of added tokens matched in pass 0 (raw) / 1 (normalized) */
    size_t pass_n[2];
    uint64_t first_bits[2][16]; /* bit (c & 1023) set for each first char c of a pass */
    int32_t max_id;

    /* normalizer (Sequence flattened) and pre-tokenizer */
    tk_norm *norm;
    size_t n_norm;
    int has_normalizer;   /* "normalizer" present and not null */
    int pt_metaspace;     /* 0: no pre-tokenizer */
    uint32_t pt_repl;
    int pt_scheme, pt_split;
    int pt_basal_exact;   /* the exact object of spec 01 §1.4 rule 1 */
    char *pt_json;        /* compact JSON of the pre_tokenizer, for messages */

    /* decoder (Sequence flattened); an unsupported decoder only fails decoding,
       because encoding never uses it (spec 01 §1.4 rule 5) */
    int has_decoder;
    tk_dec *dec;
    size_t n_dec;
    char *dec_err;
};

/* Applies the normalizer sequence to s (in place). */
int tk_normalize(const bs_tokenizer *t, tk_nstr *s);

/* Output of encoding: ids and original character offsets. */
typedef struct {
    int32_t *ids, *offs;
    size_t n, cap;
    int oom;
} tk_out;
void tk_out_push(tk_out *o, int32_t id, int32_t s, int32_t e);

/* Scratch memory of the BPE model, reused across words of one encode call. */
typedef struct tk_bpe_scratch tk_bpe_scratch;
tk_bpe_scratch *tk_bpe_scratch_new(void);
void tk_bpe_scratch_free(tk_bpe_scratch *s);
/* Encodes the word w[a, b) with the BPE model, appending to out. */
int tk_bpe_word(const bs_tokenizer *t, const tk_nstr *w, size_t a, size_t b,
                tk_out *out, tk_bpe_scratch *s);

#endif
