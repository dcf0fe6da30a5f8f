/* Hugging Face tokenizer.json engine (spec 01 §4): added tokens, normalizers,
 * pre-tokenizers, BPE with byte fallback, and decoding for debugging.
 * A component or option it does not implement is a load error naming it. */
#ifndef BS_TOKENIZER_H
#define BS_TOKENIZER_H

#include <stddef.h>
#include <stdint.h>
#include "basal.h"

typedef struct bs_tokenizer bs_tokenizer;

/* Loads a tokenizer.json file / in-memory text (fname only for messages). */
int bs_tokenizer_load(bs_tokenizer **out, const char *path, bs_err *e);
int bs_tokenizer_load_mem(bs_tokenizer **out, const char *json, size_t len,
                          const char *fname, bs_err *e);
void bs_tokenizer_free(bs_tokenizer *t);

/* Encodes UTF-8 text exactly as HF `tokenizers` with add_special_tokens=false.
 * *ids is malloc'd (caller frees). If offsets is not NULL, *offsets gets 2*n
 * malloc'd character (code point) offsets [start, end) per token. */
int bs_tokenizer_encode(const bs_tokenizer *t, const char *text, size_t len,
                        int32_t **ids, size_t *n, int32_t **offsets, bs_err *e);

/* Token string -> id (vocabulary or added token), -1 if absent. */
int32_t bs_tokenizer_token_to_id(const bs_tokenizer *t, const char *token);
/* id -> token string (vocabulary or added token), NULL if absent. */
const char *bs_tokenizer_id_to_token(const bs_tokenizer *t, int32_t id);
/* Largest id of the vocabulary and the added tokens (for the vocab_size check). */
int32_t bs_tokenizer_max_id(const bs_tokenizer *t);

/* Decodes ids with the file's decoder (Replace, ByteFallback, Fuse, Strip,
 * Metaspace, Sequence); special added tokens are skipped when skip_special.
 * *out is malloc'd and NUL-terminated. */
int bs_tokenizer_decode(const bs_tokenizer *t, const int32_t *ids, size_t n,
                        int skip_special, char **out, size_t *len, bs_err *e);

/* Basal model-directory rules (spec 01 §1.4): pre_tokenizer exactly Metaspace
 * {replacement ▁, prepend_scheme always|first, split false} (then forced to
 * "first"), normalizer absent or null, model BPE. Errors name tokenizer.json. */
int bs_tokenizer_check_basal(bs_tokenizer *t, bs_err *e);

#endif
