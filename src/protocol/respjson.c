/* Response JSON writer (spec 02 §1.2). */
#include "protocol/respjson.h"

#include <string.h>

void bs_resp_string(bs_buf *b, const char *s, size_t n) { bj_put_string(b, s, n); }

void bs_resp_cstr(bs_buf *b, const char *s) { bs_resp_string(b, s, strlen(s)); }

void bs_resp_double(bs_buf *b, double x) { bs_fmt_double_shortest(x, b); }

void bs_resp_size(bs_buf *b, size_t v) { bs_buf_printf(b, "%zu", v); }

void bs_resp_value(bs_buf *b, const bj_value *v) {
    if (!v) {
        bs_buf_put(b, "null", 4);
        return;
    }
    switch (v->type) {
    case BJ_NULL: bs_buf_put(b, "null", 4); break;
    case BJ_FALSE: bs_buf_put(b, "false", 5); break;
    case BJ_TRUE: bs_buf_put(b, "true", 4); break;
    /* The parser kept the literal; echoing it unchanged is what clients sent. */
    case BJ_NUMBER: bs_buf_put(b, v->str ? v->str : "0", v->str ? v->len : 1); break;
    case BJ_STRING: bs_resp_string(b, v->str ? v->str : "", v->len); break;
    case BJ_ARRAY:
        bs_buf_putc(b, '[');
        for (size_t i = 0; i < v->n; i++) {
            if (i) bs_buf_putc(b, ',');
            bs_resp_value(b, v->items[i]);
        }
        bs_buf_putc(b, ']');
        break;
    case BJ_OBJECT:
        bs_buf_putc(b, '{');
        for (size_t i = 0; i < v->n; i++) {
            if (i) bs_buf_putc(b, ',');
            bs_resp_string(b, v->keys[i], v->key_lens[i]);
            bs_buf_putc(b, ':');
            bs_resp_value(b, v->items[i]);
        }
        bs_buf_putc(b, '}');
        break;
    }
}

void bs_resp_ids(bs_buf *b, const int32_t *v, size_t n) {
    bs_buf_putc(b, '[');
    for (size_t i = 0; i < n; i++) bs_buf_printf(b, i ? ",%d" : "%d", v[i]);
    bs_buf_putc(b, ']');
}

void bs_resp_texts(bs_buf *b, const bs_text *t, size_t n) {
    bs_buf_putc(b, '[');
    for (size_t i = 0; i < n; i++) {
        if (i) bs_buf_putc(b, ',');
        bs_resp_string(b, t[i].s, t[i].len);
    }
    bs_buf_putc(b, ']');
}
