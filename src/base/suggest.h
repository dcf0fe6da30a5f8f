/* "Did you mean ...?": the closest of a list of known words to a misspelt one
 * (unknown command-line flags and commands, unknown YAML keys). */
#ifndef BS_SUGGEST_H
#define BS_SUGGEST_H

#include <stddef.h>

/* Optimal-string-alignment distance (insertions, deletions, substitutions and
 * swaps of two neighbouring characters each cost 1), bytewise. */
size_t bs_edit_distance(const char *a, const char *b);

/* The candidate closest to word, or NULL when none is close enough: at most
 * 1 edit for words of up to 3 characters, 2 up to 6, 3 beyond; failing that,
 * the only candidate that word is a prefix of (3 characters or more). Ties go
 * to the earlier candidate; a word that is a candidate gets NULL. NULL entries
 * in cands are skipped. */
const char *bs_suggest(const char *word, const char *const *cands, size_t n);

#endif
