/* Bench items as System One requests (cli/bench/item.h). */
#include "cli/bench/item.h"

#include <stdlib.h>
#include <string.h>

#include "protocol/respjson.h"

static void put_field(bs_buf *b, const bj_value *rec, const char *key) {
    const bj_value *v = bj_get(rec, key);
    if (v) bs_resp_value(b, v);
    else bs_buf_puts(b, "null");
}

int cli_bench_item_body(const bj_value *rec, const char *model, bs_buf *b, bs_err *e) {
    const bj_value *opts = bj_get(rec, "options"), *type = bj_get(rec, "type");
    if (!opts || opts->type != BJ_ARRAY) return bs_fail(e, BS_EINVAL, "bench item without an options array");
    if (opts->n < 2 || opts->n > BS_MAX_LETTER_OPTIONS)
        return bs_fail(e, BS_EINVAL, "bench item with %zu options (2..%d)", opts->n, BS_MAX_LETTER_OPTIONS);
    const char *t = type && type->type == BJ_STRING ? type->str : "choice";
    if (strcmp(t, "choice") && strcmp(t, "score") && strcmp(t, "noul"))
        return bs_fail(e, BS_EINVAL, "bench item of type %s (choice, score or noul)", t);
    bs_buf_puts(b, "{\"model\":");
    bs_resp_cstr(b, model);
    bs_buf_puts(b, ",\"state\":");
    put_field(b, rec, "state");
    bs_buf_printf(b, ",\"questions\":{\"q\":{\"type\":\"%s\",\"instructions\":", t);
    put_field(b, rec, "question");
    bs_buf_puts(b, ",\"criteria\":");
    if (!strcmp(t, "score")) {
        bs_resp_value(b, opts);
    } else if (!strcmp(t, "noul")) {
        if (opts->n != 2) return bs_fail(e, BS_EINVAL, "a noul bench item has 2 options");
        bs_buf_puts(b, "{\"true\":");
        bs_resp_value(b, opts->items[0]);
        bs_buf_puts(b, ",\"false\":");
        bs_resp_value(b, opts->items[1]);
        bs_buf_putc(b, '}');
    } else {
        bs_buf_putc(b, '{');
        for (size_t i = 0; i < opts->n; i++) {
            bs_buf_printf(b, i ? ",\"%zu\":" : "\"%zu\":", i);
            bs_resp_value(b, opts->items[i]);
        }
        bs_buf_puts(b, "},\"option_keys\":\"hide\"");
    }
    bs_buf_puts(b, "}}}");
    return b->oom ? bs_fail(e, BS_ENOMEM, "out of memory") : BS_OK;
}


void cli_jsonl_free(cli_jsonl *j) {
    for (size_t i = 0; i < j->n; i++) bj_free(j->v[i]);
    free(j->v);
    free(j->line);
    j->v = NULL;
    j->line = NULL;
    j->n = 0;
}

int cli_jsonl_read(const char *path, cli_jsonl *out, bs_err *e) {
    char *text = NULL;
    size_t len = 0;
    memset(out, 0, sizeof *out);
    int rc = bs_read_file(path, &text, &len, e);
    if (rc < 0) return rc;
    size_t cap = 0, lineno = 0;
    for (size_t at = 0; at < len && rc == 0;) {
        const char *nl = memchr(text + at, '\n', len - at);
        size_t ll = nl ? (size_t)(nl - (text + at)) : len - at;
        lineno++;
        size_t sp = 0;
        while (sp < ll && strchr(" \t\r", text[at + sp])) sp++;
        if (sp < ll) {
            if (out->n == cap) {
                size_t nc = cap ? 2 * cap : 16;
                bj_value **nv = realloc(out->v, nc * sizeof *nv);
                if (nv) out->v = nv;
                size_t *nl2 = nv ? realloc(out->line, nc * sizeof *nl2) : NULL;
                if (nl2) out->line = nl2;
                if (!nv || !nl2) { rc = bs_fail(e, BS_ENOMEM, "out of memory"); break; }
                cap = nc;
            }
            bs_err pe = {0};
            if (bj_parse(text + at, ll, NULL, &out->v[out->n], &pe) < 0) {
                rc = bs_fail(e, BS_EINVAL, "%s: line %zu: %s", path, lineno, pe.msg);
                break;
            }
            out->line[out->n++] = lineno;
        }
        at += ll + 1;
    }
    free(text);
    if (rc < 0) cli_jsonl_free(out);
    return rc;
}
