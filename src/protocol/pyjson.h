/* JSON values as the Basal protocol needs them (spec 01 §3): a strict parser
 * that keeps object key order and number literals exactly as written, and a
 * writer byte-identical to CPython's json.dumps(value, ensure_ascii=False). */
#ifndef BS_PYJSON_H
#define BS_PYJSON_H

#include <stddef.h>
#include "basal.h"
#include "base/util.h"

typedef enum { BJ_NULL, BJ_FALSE, BJ_TRUE, BJ_NUMBER, BJ_STRING, BJ_ARRAY, BJ_OBJECT } bj_type;

typedef struct bj_value bj_value;
struct bj_value {
    bj_type type;
    char *str;        /* BJ_STRING: UTF-8 bytes (may contain NUL); BJ_NUMBER: the literal */
    size_t len;       /* byte length of str */
    size_t n;         /* BJ_ARRAY / BJ_OBJECT: number of items */
    bj_value **items; /* the values */
    char **keys;      /* BJ_OBJECT: keys (UTF-8, may contain NUL) */
    size_t *key_lens;
};

typedef struct bj_parse_opts {
    int max_depth; /* nesting limit (arrays + objects); 0 means 128 */
} bj_parse_opts;

/* Parses RFC 8259 JSON (rejects NaN/Infinity literals, lone surrogate escapes,
 * invalid UTF-8, trailing data, nesting beyond max_depth). A duplicate key keeps
 * the position of its first occurrence with the value of its last (CPython dict
 * semantics). On error, e->msg gives the reason and the byte offset. */
int bj_parse(const char *text, size_t len, const bj_parse_opts *opts, bj_value **out, bs_err *e);
void bj_free(bj_value *v);

/* Appends json.dumps(v, ensure_ascii=False) of the value CPython's json.loads
 * would produce from the same text (floats via repr, integers verbatim). */
void bj_pydumps(const bj_value *v, bs_buf *out);
/* The same with sort_keys=True (every object's members by key, as Python
 * orders str keys). */
void bj_pydumps_sorted(const bj_value *v, bs_buf *out);
/* A JSON string of n UTF-8 bytes (may hold NUL) as both json.dumps(ensure_ascii=
 * False) and the response writer spell it: the quote, the backslash and the C0
 * controls escaped (b t n f r by letter, the rest as u00xx), everything else
 * as is. The one string escaper of the project. */
void bj_put_string(bs_buf *b, const char *s, size_t n);
/* text(v) of the protocol: a string's own bytes, otherwise bj_pydumps. */
void bj_pytext(const bj_value *v, bs_buf *out);

/* Object lookup by key (NULL if absent or v is not an object). */
const bj_value *bj_get(const bj_value *v, const char *key);

/* Where and why a parse failed, in CPython json terms (spec 02 §3): msg is one
 * of CPython's messages (or this project's "Invalid UTF-8" / "Maximum nesting
 * depth exceeded"), pos the character index CPython's JSONDecodeError.pos would
 * give, lineno/colno as CPython computes them from pos. msg is NULL when the
 * parse failed for lack of memory. */
typedef struct bj_error {
    const char *msg;  /* static string */
    size_t byte_off;  /* byte offset into text */
    size_t pos;       /* character (code point) index */
    size_t lineno, colno;
} bj_error;

/* bj_parse, also filling *err (if not NULL) on failure. */
int bj_parse_ex(const char *text, size_t len, const bj_parse_opts *opts, bj_value **out,
                bj_error *err, bs_err *e);

/* Python repr(float): shortest round-trip digits, "1e-05", "100.0", "-0.0",
 * "Infinity", "NaN". */
void bj_fmt_pyfloat(double x, bs_buf *out);
/* The response writer's float layout (spec 02 §1.2, basal-rs): shortest
 * round-trip digits, "0.00001", "1e-6", "1e16", "1.5e300"; non-finite -> null. */
void bs_fmt_double_shortest(double x, bs_buf *out);

#endif
