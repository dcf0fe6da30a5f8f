/* UTF-8 as this project reads and writes it: strict RFC 3629 (no overlong
 * forms, no encoded surrogates, nothing above U+10FFFF), which is what CPython's
 * json and a Rust &str accept, so the tokenizer and the JSON parser agree on
 * what is valid text. */
#ifndef BS_UTF8_H
#define BS_UTF8_H

#include <stddef.h>
#include <stdint.h>

/* Writes one code point (at most 4 bytes) to buf; returns the bytes written. */
size_t bs_utf8_put(uint32_t cp, char *buf);

/* Offset of the first byte that does not start a well-formed sequence, or len
 * when all of s is valid. */
size_t bs_utf8_first_invalid(const void *s, size_t len);

/* Decodes valid UTF-8 into a malloc'd code point array. BS_EINVAL (with the
 * offending byte offset in *bad_at when not NULL) or BS_ENOMEM on failure. */
int bs_utf8_decode(const char *s, size_t len, uint32_t **out, size_t *n, size_t *bad_at);

#endif
