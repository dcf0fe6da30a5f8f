/* The regular expressions of facts "auto" (spec 03 §3.3–§3.4) with Python
 * `re` semantics on str patterns: a backtracking matcher over code points,
 * alternatives left to right, greedy quantifiers, the leftmost match; `\d`,
 * `\w`, `\s` and `\b` are Python's Unicode classes.
 *
 * Only the syntax the facts patterns use is accepted: literals, `\.`-style
 * escapes, `\uXXXX`, `\d \w \s \b`, classes `[...]` with ranges (no negation),
 * groups `(...)`, `(?:...)`, lookahead `(?=...)`, fixed-width negative
 * lookbehind `(?<!...)`, `|`, and the quantifiers `? * + {m} {m,n}`. */
#ifndef BS_FACTS_RE_H
#define BS_FACTS_RE_H

#include <stddef.h>
#include <stdint.h>

#define FX_NOPOS ((size_t)-1)

/* Python's str classes (CPython `re`): \d = str.isdecimal(), \w = str.isalnum()
 * or '_', \s = str.isspace(). */
int fx_is_digit(uint32_t c);
int fx_is_word(uint32_t c);
int fx_is_space(uint32_t c);
/* The value 0..9 of a \d character (Unicode decimal digits come in runs 0..9). */
int fx_digit_value(uint32_t c);

typedef struct fx_re fx_re;

/* Compiles a UTF-8 pattern; NULL on a syntax outside the subset above or when
 * out of memory. */
fx_re *fx_re_compile(const char *pattern);
void fx_re_free(fx_re *re);
/* Number of capturing groups (group 0, the whole match, not counted). */
size_t fx_re_groups(const fx_re *re);

/* caps: 2 * (groups + 1) slots; a group that did not take part is FX_NOPOS.
 * The text is t[0..n) as a whole string: lookbehinds and \b see nothing
 * outside it. Both return 1 on a match, 0 on none, -1 when out of memory. */
int fx_re_search(const fx_re *re, const uint32_t *t, size_t n, size_t from, size_t *caps);
int fx_re_match(const fx_re *re, const uint32_t *t, size_t n, size_t at, size_t *caps);

/* Steps per searched position a search runs before it switches to its
 * visited-state bitmap (default 64); 0 uses the bitmap from the first step.
 * Process-wide, for tests that check both paths give the same matches. */
void fx_re_set_step_budget(size_t per_position);

#endif
