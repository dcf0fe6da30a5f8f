/* Internal to request.c: the validation error list and the reply bodies built
 * from it (spec 02 §4.3, §4.4, §5.2). Not a public interface. */
#ifndef BS_REQUEST_ERR_H
#define BS_REQUEST_ERR_H

#include <stddef.h>
#include "protocol/pyjson.h"
#include "protocol/request.h"
#include "base/util.h"

#define VLOC_MAX 8

/* One loc segment: a string (borrowed: a static name or a key of the body) or
 * an array index (a JSON integer). */
typedef struct vseg {
    const char *s;
    size_t len;
    size_t idx;
    int is_idx;   /* 1: idx as a JSON integer; 2: idx as a JSON string ("0", multi labels) */
} vseg;

/* A loc under construction, passed by value. typeseg is the question type
 * name, inserted at index 3 when the final loc is longer than 3 (02 §4.3
 * "Type segment"); NULL for errors that never get it. */
typedef struct vloc {
    vseg s[VLOC_MAX];
    int n;
    const char *typeseg;
} vloc;

vloc vloc_body(void);
vloc vloc_str(vloc l, const char *s, size_t n);
vloc vloc_cstr(vloc l, const char *s);
vloc vloc_idx(vloc l, size_t i);
/* An array index written as a string segment (multi label locations, 02 §4.3). */
vloc vloc_idx_str(vloc l, size_t i);

typedef enum {
    VE_SCHEMA,    /* 422 list entry */
    VE_USAGE_STR, /* 400 {"detail":"<msg>"} */
    VE_USAGE_OBJ  /* 400 {"detail":{"error_type":"api_usage_error","message":"<msg>"}} */
} ve_kind;

typedef struct verr {
    ve_kind kind;
    const char *type; /* static */
    vloc loc;
    char *msg;        /* owned; may contain NUL (a question id can) */
    size_t msg_len;
    const bj_value *input; /* borrowed from the body */
    int has_input;
    const char *ctx;  /* static raw JSON of ctx, or NULL */
} verr;

typedef struct verrs {
    verr *v;
    size_t n, cap;
    int oom;
} verrs;

void verrs_free(verrs *l);
/* Drops the errors from index n on (a usage error that replaces them). */
void verrs_truncate(verrs *l, size_t n);
/* Appends an error; msg is copied. input is recorded only when has_input. */
verr *verrs_add(verrs *l, ve_kind kind, const char *type, vloc loc, const char *msg, size_t msg_len,
                const bj_value *input, int has_input, const char *ctx);
verr *verrs_addc(verrs *l, ve_kind kind, const char *type, vloc loc, const char *msg,
                 const bj_value *input, int has_input, const char *ctx);
/* The three union errors (str / dict[any,any] / list[any]) at loc. */
void verrs_union(verrs *l, vloc loc, const bj_value *input);
/* missing (input = the enclosing object) and too_short (List / Dictionary). */
void verrs_missing(verrs *l, vloc loc, const bj_value *enclosing);
void verrs_too_short(verrs *l, vloc loc, const bj_value *value);
int verrs_has_schema(const verrs *l);

/* Validation reply: systemone 422 list of schema errors, else 400 with the
 * first usage error; basal 422 {"error":"<msgs joined with '; '>"}. */
void verrs_reply(const verrs *l, bs_dialect d, bs_reply *rep);
/* Capability reply: 422 {"error":"unsupported","detail":[{type,loc,msg}…]}
 * (no input, no type segment) or the basal form. */
void verrs_reply_unsupported(const verrs *l, bs_dialect d, bs_reply *rep);

/* A string as Rust's {:?} prints it (02 §4.3 Q3): double quotes, \\ \" \t \n
 * \r \0, other control and invisible characters and combining marks as
 * \u{hex}. */
void bs_quote_debug(bs_buf *b, const char *s, size_t n);

#endif
