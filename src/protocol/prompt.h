/* The exact Basal prompt (spec 01 §2): system prompts, the user template with
 * Python str.format substitution, the option block, the ChatML wrapper of the
 * model's chat template, the answer prefill, and the two option orders. The
 * contract is hard-coded; model files are only checked against it. */
#ifndef BS_PROMPT_H
#define BS_PROMPT_H

#include <stddef.h>
#include "basal.h"
#include "base/util.h"

/* A byte string that may contain NUL (JSON strings can). */
typedef struct bs_text {
    char *s;
    size_t len;
} bs_text;

typedef enum { BS_LANG_EN = 0, BS_LANG_PL = 1 } bs_lang;

#define BS_LETTERS "ABCDEFGHIJ"
#define BS_MAX_LETTER_OPTIONS 10
#define BS_PREFILL "{\"answer\": \""
/* chat_template.jinja must be byte-identical to this (209 bytes, spec 01 §1.2). */
#define BS_CHAT_TEMPLATE_LEN 209
extern const char BS_CHAT_TEMPLATE[];

/* Polish iff state text + question text holds one of the 18 diacritics (§2.6). */
bs_lang bs_lang_detect(const char *state, size_t state_len, const char *q, size_t q_len);
const char *bs_lang_name(bs_lang lang); /* "pl" / "en" */
const char *bs_lang_yes(bs_lang lang);  /* "Tak" / "Yes" */
const char *bs_lang_no(bs_lang lang);   /* "Nie" / "No" */

/* The system prompt (§2.2) and the raw user format string (§2.3, with {state},
 * {q}, {opts}, {{ and }}) as basal.json of basal-1.0 spells them. */
const char *bs_prompt_system(bs_lang lang);
const char *bs_prompt_user_format(bs_lang lang);

/* perm[p] = option shown at position p: order 0 keeps the canonical order,
 * order 1 reverses it (§2.9). */
void bs_prompt_perm(size_t k, int order, size_t *perm);

/* The option block of the k options opts[perm[0]], …, opts[perm[k-1]]
 * (perm NULL = identity). perm may index into a larger array, so a group of a
 * large choice is a perm. Positions past the tenth have no letter and are not
 * written: callers check k (bs_prompt_build refuses it). */
void bs_prompt_options(bs_buf *out, const bs_text *opts, const size_t *perm, size_t k);
/* Where the substituted parts of a prompt lie (byte offsets [start, end) into
 * the prompt): everything outside them is the fixed template (BOS, ChatML,
 * system prompt, user format text, prefill). For the logit lens's prompt view. */
typedef enum { BS_PART_STATE = 0, BS_PART_QUESTION, BS_PART_OPTIONS, BS_N_PARTS } bs_prompt_part;
typedef struct bs_prompt_parts {
    size_t start[BS_N_PARTS], end[BS_N_PARTS];
} bs_prompt_parts;
const char *bs_prompt_part_name(bs_prompt_part p); /* "state", "question", "options" */

/* The substituted user message; substituted values are never re-scanned. */
void bs_prompt_user(bs_buf *out, bs_lang lang, const bs_text *state, const bs_text *question,
                    const bs_text *opts, const size_t *perm, size_t k);
/* Appends the whole prompt: BOS, system and user turns, the assistant header
 * and the prefill, ending with its final '"' (§2.5). BS_EINVAL if k > 10. */
int bs_prompt_build(bs_buf *out, const char *bos, size_t bos_len, bs_lang lang, const bs_text *state,
                    const bs_text *question, const bs_text *opts, const size_t *perm, size_t k, bs_err *e);
/* The same, and where its parts lie (offsets into out, which may already hold
 * bytes before the prompt). parts NULL: bs_prompt_build. */
int bs_prompt_build_parts(bs_buf *out, const char *bos, size_t bos_len, bs_lang lang, const bs_text *state,
                          const bs_text *question, const bs_text *opts, const size_t *perm, size_t k,
                          bs_prompt_parts *parts, bs_err *e);

/* Question text of the yes/no branch of a multi label (03 §1.3): instructions,
 * LF, then `Czy dotyczy: „<label>”?` or `Does this apply: "<label>"?`. */
void bs_prompt_multi_question(bs_buf *out, bs_lang lang, const bs_text *instructions, const bs_text *label);

#endif
