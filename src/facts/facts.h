/* facts: "auto" (spec 03 §3): calendar and money facts computed from a Polish
 * state and appended to it, byte-identical to upstream basal `facts.py`. */
#ifndef BS_FACTS_H
#define BS_FACTS_H

#include <stddef.h>

#include "base/util.h"

#define BS_FACTS_HEADER "Fakty pomocnicze (wyliczone automatycznie, bez oceny prawnej):"

/* The facts lines of a state (valid UTF-8), each line followed by '\n' in
 * lines (empty when there is nothing to compute). Returns 0, 1 when upstream
 * raises (the Python exception text in msg), or a negative BS_E* code. */
int bs_facts_lines(const char *state, size_t len, bs_buf *lines, bs_buf *msg);

/* The request hook (bs_facts_fn of protocol/request.h): the injected state of
 * 03 §3.2 in out (the state itself when there are no lines); 1 with msg when
 * upstream raises; negative on failure. ctx is unused. */
int bs_facts_inject(void *ctx, const char *state, size_t len, bs_buf *out, bs_buf *msg);

#endif
