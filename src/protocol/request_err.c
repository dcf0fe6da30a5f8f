/* Validation errors and their reply bodies (spec 02 §4.3–§4.4, §5.2). */
#include "protocol/request_err.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <utf8proc.h>

#include "protocol/respjson.h"

vloc vloc_body(void) {
    vloc l;
    memset(&l, 0, sizeof l);
    return vloc_cstr(l, "body");
}

vloc vloc_str(vloc l, const char *s, size_t n) {
    /* Locations are at most 7 deep by construction; the cap only guards. */
    if (l.n < VLOC_MAX) {
        l.s[l.n].s = s;
        l.s[l.n].len = n;
        l.s[l.n].is_idx = 0;
        l.n++;
    }
    return l;
}

vloc vloc_cstr(vloc l, const char *s) { return vloc_str(l, s, strlen(s)); }

vloc vloc_idx(vloc l, size_t i) {
    if (l.n < VLOC_MAX) {
        l.s[l.n].idx = i;
        l.s[l.n].is_idx = 1;
        l.n++;
    }
    return l;
}

vloc vloc_idx_str(vloc l, size_t i) {
    l = vloc_idx(l, i);
    if (l.n > 0 && l.s[l.n - 1].is_idx) l.s[l.n - 1].is_idx = 2;
    return l;
}

void verrs_free(verrs *l) {
    for (size_t i = 0; i < l->n; i++) free(l->v[i].msg);
    free(l->v);
    memset(l, 0, sizeof *l);
}

void verrs_truncate(verrs *l, size_t n) {
    while (l->n > n) free(l->v[--l->n].msg);
}

verr *verrs_add(verrs *l, ve_kind kind, const char *type, vloc loc, const char *msg, size_t msg_len,
                const bj_value *input, int has_input, const char *ctx) {
    if (l->oom) return NULL;
    if (l->n == l->cap) {
        size_t nc = l->cap ? l->cap * 2 : 8;
        verr *nv = realloc(l->v, nc * sizeof *nv);
        if (!nv) {
            l->oom = 1;
            return NULL;
        }
        l->v = nv;
        l->cap = nc;
    }
    char *m = malloc(msg_len + 1);
    if (!m) {
        l->oom = 1;
        return NULL;
    }
    memcpy(m, msg, msg_len);
    m[msg_len] = 0;
    verr *e = &l->v[l->n++];
    e->kind = kind;
    e->type = type;
    e->loc = loc;
    e->msg = m;
    e->msg_len = msg_len;
    e->input = input;
    e->has_input = has_input;
    e->ctx = ctx;
    return e;
}

verr *verrs_addc(verrs *l, ve_kind kind, const char *type, vloc loc, const char *msg,
                 const bj_value *input, int has_input, const char *ctx) {
    return verrs_add(l, kind, type, loc, msg, strlen(msg), input, has_input, ctx);
}

void verrs_union(verrs *l, vloc loc, const bj_value *input) {
    verrs_addc(l, VE_SCHEMA, "string_type", vloc_cstr(loc, "str"), "Input should be a valid string", input, 1,
               NULL);
    verrs_addc(l, VE_SCHEMA, "dict_type", vloc_cstr(loc, "dict[any,any]"), "Input should be a valid dictionary",
               input, 1, NULL);
    verrs_addc(l, VE_SCHEMA, "list_type", vloc_cstr(loc, "list[any]"), "Input should be a valid list", input, 1,
               NULL);
}

void verrs_missing(verrs *l, vloc loc, const bj_value *enclosing) {
    verrs_addc(l, VE_SCHEMA, "missing", loc, "Field required", enclosing, 1, NULL);
}

void verrs_too_short(verrs *l, vloc loc, const bj_value *value) {
    if (value->type == BJ_ARRAY)
        verrs_addc(l, VE_SCHEMA, "too_short", loc, "List should have at least 1 item after validation, not 0",
                   value, 1, "{\"field_type\":\"List\",\"min_length\":1,\"actual_length\":0}");
    else
        verrs_addc(l, VE_SCHEMA, "too_short", loc,
                   "Dictionary should have at least 1 item after validation, not 0", value, 1,
                   "{\"field_type\":\"Dictionary\",\"min_length\":1,\"actual_length\":0}");
}

int verrs_has_schema(const verrs *l) {
    for (size_t i = 0; i < l->n; i++)
        if (l->v[i].kind == VE_SCHEMA) return 1;
    return 0;
}

static void put_seg(bs_buf *b, const vseg *s) {
    if (s->is_idx == 2) {
        char d[24];
        int n = snprintf(d, sizeof d, "%zu", s->idx);
        bs_resp_string(b, d, (size_t)n);
    } else if (s->is_idx) bs_resp_size(b, s->idx);
    else bs_resp_string(b, s->s, s->len);
}

static void put_loc(bs_buf *b, const vloc *l, int with_type) {
    bs_buf_putc(b, '[');
    for (int i = 0; i < l->n; i++) {
        if (i) bs_buf_putc(b, ',');
        if (i == 3 && with_type && l->typeseg && l->n > 3) {
            bs_resp_cstr(b, l->typeseg);
            bs_buf_putc(b, ',');
        }
        put_seg(b, &l->s[i]);
    }
    bs_buf_putc(b, ']');
}

static void put_error(bs_buf *b, const verr *e, int full) {
    bs_buf_puts(b, "{\"type\":");
    bs_resp_cstr(b, e->type);
    bs_buf_puts(b, ",\"loc\":");
    put_loc(b, &e->loc, full);
    bs_buf_puts(b, ",\"msg\":");
    bs_resp_string(b, e->msg, e->msg_len);
    if (full && e->has_input) {
        bs_buf_puts(b, ",\"input\":");
        bs_resp_value(b, e->input);
    }
    if (full && e->ctx) {
        bs_buf_puts(b, ",\"ctx\":");
        bs_buf_puts(b, e->ctx);
    }
    bs_buf_putc(b, '}');
}

/* The chosen errors (schema_only: the schema errors) as the comma-joined
 * error objects of a FastAPI list (full: with input, ctx and the type segment),
 * or for /v1/basal their msgs joined with "; ". */
static void put_items(bs_buf *b, const verrs *l, int schema_only, int full, bs_dialect d) {
    int first = 1;
    for (size_t i = 0; i < l->n; i++) {
        if (schema_only && l->v[i].kind != VE_SCHEMA) continue;
        if (!first) bs_buf_puts(b, d == BS_DIALECT_BASAL ? "; " : ",");
        if (d == BS_DIALECT_BASAL) bs_buf_put(b, l->v[i].msg, l->v[i].msg_len);
        else put_error(b, &l->v[i], full);
        first = 0;
    }
}

/* Sends the list through reply.c's envelope for its kind: unsupported (the
 * capability errors), validation (a schema error present: only those), or
 * usage (only usage errors: the first one; /v1/basal its msg). */
typedef enum { LIST_VALIDATION, LIST_UNSUPPORTED } list_kind;

static void reply_list(const verrs *l, bs_dialect d, list_kind kind, bs_reply *rep) {
    int schema = verrs_has_schema(l);
    if (kind == LIST_VALIDATION && !schema) {
        if (!l->n) {
            rep->status = 422;
            rep->body.len = 0;
            return;
        }
        const verr *e = &l->v[0];
        if (d == BS_DIALECT_BASAL) bs_reply_basal(rep, 422, e->msg, e->msg_len);
        else bs_reply_usage(rep, e->kind == VE_USAGE_OBJ, e->msg, e->msg_len);
        return;
    }
    bs_buf items;
    bs_buf_init(&items);
    put_items(&items, l, kind == LIST_VALIDATION, kind == LIST_VALIDATION, d);
    const char *s = items.data ? items.data : "";
    if (d == BS_DIALECT_BASAL) bs_reply_basal(rep, 422, s, items.len);
    else if (kind == LIST_VALIDATION) bs_reply_validation(rep, s, items.len);
    else bs_reply_unsupported_items(rep, s, items.len);
    if (items.oom) rep->body.oom = 1;
    bs_buf_free(&items);
}

void verrs_reply(const verrs *l, bs_dialect d, bs_reply *rep) { reply_list(l, d, LIST_VALIDATION, rep); }

void verrs_reply_unsupported(const verrs *l, bs_dialect d, bs_reply *rep) {
    reply_list(l, d, LIST_UNSUPPORTED, rep);
}

/* Whether Rust's {:?} writes the character as \u{hex}: grapheme extenders
 * (combining marks, U+200C) and the characters it does not print, which are
 * the categories Cc Cf Cs Co Cn Zl Zp and Zs but for the space. Unicode data
 * from utf8proc; Rust's own tables may be of a later Unicode version, which
 * matters only for characters assigned since (tests/unit/test_request.c). */
static int rust_escapes(int32_t cp) {
    const utf8proc_property_t *p = utf8proc_get_property(cp);
    /* grapheme-break class Extend = Grapheme_Extend + the emoji modifiers,
     * which Rust prints as they are */
    if (p->boundclass == UTF8PROC_BOUNDCLASS_EXTEND && !(cp >= 0x1F3FB && cp <= 0x1F3FF)) return 1;
    switch (p->category) {
    case UTF8PROC_CATEGORY_CC:
    case UTF8PROC_CATEGORY_CF:
    case UTF8PROC_CATEGORY_CS:
    case UTF8PROC_CATEGORY_CO:
    case UTF8PROC_CATEGORY_CN:
    case UTF8PROC_CATEGORY_ZL:
    case UTF8PROC_CATEGORY_ZP: return 1;
    case UTF8PROC_CATEGORY_ZS: return cp != ' ';
    default: return 0;
    }
}

void bs_quote_debug(bs_buf *b, const char *s, size_t n) {
    bs_buf_putc(b, '"');
    size_t i = 0;
    while (i < n) {
        utf8proc_int32_t cp;
        utf8proc_ssize_t w = utf8proc_iterate((const utf8proc_uint8_t *)s + i, (utf8proc_ssize_t)(n - i), &cp);
        if (w <= 0) { /* not reached: the text was decoded from valid JSON */
            bs_buf_printf(b, "\\x%02x", (unsigned char)s[i]);
            i++;
            continue;
        }
        switch (cp) {
        case '"': bs_buf_puts(b, "\\\""); break;
        case '\\': bs_buf_puts(b, "\\\\"); break;
        case '\t': bs_buf_puts(b, "\\t"); break;
        case '\n': bs_buf_puts(b, "\\n"); break;
        case '\r': bs_buf_puts(b, "\\r"); break;
        case 0: bs_buf_puts(b, "\\0"); break;
        default:
            if (rust_escapes(cp)) bs_buf_printf(b, "\\u{%x}", (unsigned)cp);
            else bs_buf_put(b, s + i, (size_t)w);
        }
        i += (size_t)w;
    }
    bs_buf_putc(b, '"');
}
