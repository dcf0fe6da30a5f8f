/* The response JSON writer (spec 02 §1.2): compact output, the response string
 * escapes, computed floats in basal-rs's shortest round-trip layout, and echoed
 * request values re-serialised with their number literals exactly as written.
 * (Prompts use the other writer, bj_pydumps in protocol/pyjson.h.) */
#ifndef BS_RESPJSON_H
#define BS_RESPJSON_H

#include <stddef.h>
#include <stdint.h>

#include "protocol/prompt.h"
#include "protocol/pyjson.h"
#include "base/util.h"

/* A quoted JSON string of n UTF-8 bytes (may contain NUL). */
void bs_resp_string(bs_buf *b, const char *s, size_t n);
void bs_resp_cstr(bs_buf *b, const char *s);
/* A computed float: "0.5", "1.0", "0.00001", "1e-6", "1e16", "-0.0"; null if not finite. */
void bs_resp_double(bs_buf *b, double x);
/* An integer count or offset. */
void bs_resp_size(bs_buf *b, size_t v);
/* A request value echoed back compactly; numbers keep their literal ("2.50", "1e5", "-0"). */
void bs_resp_value(bs_buf *b, const bj_value *v);
/* A JSON array of token ids, and of texts. */
void bs_resp_ids(bs_buf *b, const int32_t *v, size_t n);
void bs_resp_texts(bs_buf *b, const bs_text *t, size_t n);

#endif
