/* See parity/items.h. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/sha256.h"
#include "base/util.h"
#include "cli/bench/item.h"
#include "cli/cli.h"
#include "engine/pack.h"
#include "engine/plan.h"
#include "protocol/pyjson.h"
#include "protocol/respjson.h"
#include "cli/parity/items.h"

static void put_doubles(bs_buf *b, const double *v, size_t n) {
    bs_buf_putc(b, '[');
    for (size_t i = 0; i < n; i++) {
        if (i) bs_buf_putc(b, ',');
        bj_fmt_pyfloat(v[i], b); /* Python repr: round-trips, as json.dumps writes it */
    }
    bs_buf_putc(b, ']');
}

/* A field of a record echoed compactly (null when absent). */
void par_put_field(bs_buf *b, const bj_value *rec, const char *key) {
    const bj_value *v = bj_get(rec, key);
    if (v) bs_resp_value(b, v);
    else bs_buf_puts(b, "null");
}

/* Structural equality: numbers by value, strings by bytes, objects by key. */
int par_jeq(const bj_value *a, const bj_value *b) {
    if (!a || !b) return a == b;
    if (a->type != b->type) return 0;
    switch (a->type) {
    case BJ_NUMBER: return strtod(a->str, NULL) == strtod(b->str, NULL);
    case BJ_STRING: return a->len == b->len && !memcmp(a->str, b->str, a->len);
    case BJ_ARRAY:
        if (a->n != b->n) return 0;
        for (size_t i = 0; i < a->n; i++)
            if (!par_jeq(a->items[i], b->items[i])) return 0;
        return 1;
    case BJ_OBJECT:
        if (a->n != b->n) return 0;
        for (size_t i = 0; i < a->n; i++) {
            const bj_value *o = NULL;
            for (size_t j = 0; j < b->n && !o; j++)
                if (b->key_lens[j] == a->key_lens[i] && !memcmp(b->keys[j], a->keys[i], a->key_lens[i])) o = b->items[j];
            if (!par_jeq(a->items[i], o)) return 0;
        }
        return 1;
    default: return 1;
    }
}

/* A System One case's request with a null or missing model set to ours. */
void par_case_body(const bj_value *rq, const char *model, bs_buf *b) {
    const bj_value *mv = rq ? bj_get(rq, "model") : NULL;
    if (!rq || rq->type != BJ_OBJECT || (mv && mv->type != BJ_NULL)) {
        if (rq) bs_resp_value(b, rq);
        else bs_buf_puts(b, "null");
        return;
    }
    bs_buf_puts(b, "{\"model\":");
    bs_resp_cstr(b, model);
    for (size_t i = 0; i < rq->n; i++) {
        if (rq->key_lens[i] == 5 && !memcmp(rq->keys[i], "model", 5)) continue;
        bs_buf_putc(b, ',');
        bs_resp_string(b, rq->keys[i], rq->key_lens[i]);
        bs_buf_putc(b, ':');
        bs_resp_value(b, rq->items[i]);
    }
    bs_buf_putc(b, '}');
}

/* Plans body; 0 with a plan, 1 with the error body in err (a request the
 * endpoint refuses), or a negative code. */
int par_plan_body(bs_plan *p, const bs_buf *body, bs_dialect d, const bs_basal_model *m, bs_letter_cache *lc,
                     bs_buf *err, bs_err *e) {
    bs_reply rep;
    bs_reply_init(&rep);
    memset(p, 0, sizeof *p);
    int rc = bs_plan_text(p, body->data ? body->data : "", body->len, d, m, lc, &rep, e);
    if (rc == BS_EINVAL && rep.body.len) {
        bs_buf_put(err, rep.body.data, rep.body.len);
        rc = 1;
    }
    bs_reply_free(&rep);
    return rc;
}

/* The item's name: the question id, "<question>#<branch>" for a multi label
 * or a large-choice group (04 §3 P2), "<question>#final" for a finalist item. */
void par_item_name(bs_buf *b, const bs_plan *p, const bs_item *it) {
    const bs_question *q = &p->req->questions[it->question];
    bs_buf_put(b, q->id.s, q->id.len);
    if (it >= p->finals && it < p->finals + p->n_finals) bs_buf_puts(b, "#final");
    else if (q->multi || q->n_options > BS_MAX_LETTER_OPTIONS) bs_buf_printf(b, "#%zu", it->branch);
}

/* "orders":[...],"pack":{...} of one item, and with res its numbers
 * (letter_logits and probs per order; ,"p_avg",…,"p_cal" after the pack,
 * with_argmax: a bench line's argmax_avg and argmax_cal in basal-rs's order,
 * p_avg, argmax_avg, temperature, p_cal, argmax_cal). */
int par_put_item_core(bs_buf *b, const bs_plan *p, const bs_item *item, const bs_basal_model *m, par_item_res *res,
                         int with_argmax, bs_err *e) {
    const int32_t *prompts[BS_N_ORDERS];
    int32_t lens[BS_N_ORDERS];
    /* perms over the item's own options (a large choice's items name the question's) */
    bs_item loc;
    size_t members[BS_MAX_LETTER_OPTIONS];
    int rc = bs_plan_item_local(item, &loc, members, e);
    if (rc < 0) return rc;
    const bs_item *it = &loc;
    bs_buf_puts(b, "\"orders\":[");
    for (int o = 0; o < it->n_orders; o++) {
        const bs_order *od = &it->orders[o];
        if (o) bs_buf_putc(b, ',');
        cli_put_order(b, it, od);
        if (res) {
            double lg[BS_MAX_LETTER_OPTIONS], q[BS_MAX_LETTER_OPTIONS];
            for (size_t i = 0; i < it->k; i++) lg[i] = od->logits[i];
            bs_buf_puts(b, ",\"letter_logits\":");
            put_doubles(b, lg, it->k);
            if ((rc = bs_softmax_logits(od->logits, (int)it->k, q, e)) < 0) return rc;
            bs_buf_puts(b, ",\"probs\":");
            put_doubles(b, q, it->k);
        }
        bs_buf_putc(b, '}');
        prompts[o] = od->ids;
        lens[o] = od->n_ids;
    }
    bs_row row;
    rc = bs_pack_row(&row, prompts, lens, it->n_orders, e);
    if (rc < 0) return rc;
    bs_buf_printf(b, "],\"pack\":{\"prefix_len\":%d,\"packed_len\":%d,\"readout_cols\":", row.prefix_len, row.len);
    bs_resp_ids(b, row.last, (size_t)row.n_prompts);
    bs_buf_putc(b, '}');
    bs_row_free(&row);
    if (res) {
        if ((rc = bs_plan_item_dist(p, it, m, res->p_avg, &res->temp, res->p_cal, e)) < 0) return rc;
        bs_buf_puts(b, ",\"p_avg\":");
        put_doubles(b, res->p_avg, it->k);
        if (with_argmax) bs_buf_printf(b, ",\"argmax_avg\":%d", bs_argmax(res->p_avg, (int)it->k));
        bs_buf_puts(b, ",\"temperature\":");
        bj_fmt_pyfloat(res->temp, b);
        bs_buf_puts(b, ",\"p_cal\":");
        put_doubles(b, res->p_cal, it->k);
        if (with_argmax) bs_buf_printf(b, ",\"argmax_cal\":%d", bs_argmax(res->p_cal, (int)it->k));
    }
    return b->oom ? bs_fail(e, BS_ENOMEM, "out of memory") : BS_OK;
}

/* The items a plan computed: round 1, then the finalists of round 2. */
size_t par_plan_n_items(const bs_plan *p) { return p->n_items + p->n_finals; }

const bs_item *par_plan_item(const bs_plan *p, size_t i) {
    return i < p->n_items ? &p->items[i] : &p->finals[i - p->n_items];
}

char *par_path_in(const char *dir, const char *name) { return bs_strfmt("%s/%s", dir, name); }
