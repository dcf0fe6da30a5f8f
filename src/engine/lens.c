#include "engine/lens.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "decision/decide.h"
#include "engine/plan_int.h"
#include "protocol/respjson.h"

int bs_lens_plan(bs_plan *p, const bs_basal_model *m, bs_reply *rep, bs_err *e) {
    if (m->model.backend) {
        char msg[300];
        snprintf(msg, sizeof msg,
                 "the logit lens reads the residual stream of the CPU forward; this model runs on %s "
                 "(serve it with --backend cpu to use the lens)",
                 m->model.backend->name);
        bs_unsupported u;
        bs_unsupported_init(&u, p->req ? p->req->dialect : BS_DIALECT_SYSTEMONE);
        bs_unsupported_add(&u, "lens_unavailable", NULL, 0, msg);
        bs_unsupported_reply(&u, rep);
        bs_unsupported_free(&u);
        return rep->body.oom ? bs_fail(e, BS_ENOMEM, "out of memory") : BS_EINVAL;
    }
    p->lens = 1;
    return BS_OK;
}

/* ---- in a forward ---- */

void bs_lens_rows_init(bs_lens_rows *lr, const bs_model *m, int readout_bf16) {
    memset(lr, 0, sizeof *lr);
    lr->m = m;
    lr->readout_bf16 = readout_bf16;
}

void bs_lens_rows_free(bs_lens_rows *lr) {
    free(lr->rows);
    free(lr->dst);
    free(lr->h);
    memset(lr, 0, sizeof *lr);
}

int bs_lens_rows_add(bs_lens_rows *lr, bs_item *it, int o, int32_t readout, bs_err *e) {
    bs_order *od = &it->orders[o];
    int L = lr->m->cfg.n_layers;
    if (!od->lens && !(od->lens = calloc((size_t)L * it->k, sizeof *od->lens)))
        return bs_fail(e, BS_ENOMEM, "out of memory");
    int32_t slot = 0;
    while (slot < lr->n_rows && lr->rows[slot] != readout) slot++;
    if (slot == lr->n_rows) {
        if (lr->n_rows == lr->cap_rows) {
            int32_t nc = lr->cap_rows ? 2 * lr->cap_rows : 16;
            int32_t *nr = realloc(lr->rows, (size_t)nc * sizeof *nr);
            if (!nr) return bs_fail(e, BS_ENOMEM, "out of memory");
            lr->rows = nr;
            lr->cap_rows = nc;
        }
        lr->rows[lr->n_rows++] = readout;
    }
    if (lr->n_dst == lr->cap_dst) {
        size_t nc = lr->cap_dst ? 2 * lr->cap_dst : 16;
        bs_lens_dst *nd = realloc(lr->dst, nc * sizeof *nd);
        if (!nd) return bs_fail(e, BS_ENOMEM, "out of memory");
        lr->dst = nd;
        lr->cap_dst = nc;
    }
    lr->dst[lr->n_dst++] = (bs_lens_dst){it, o, slot};
    return BS_OK;
}

/* bs_fwd_input.after_layer: each order's letters through the final norm and
 * the head, by the forward's own readout (bs_forward_letters). */
static void after_layer(void *ctx, int layer, const float *rows) {
    bs_lens_rows *lr = ctx;
    int H = lr->m->cfg.hidden;
    for (size_t d = 0; d < lr->n_dst; d++) {
        bs_item *it = lr->dst[d].it;
        float *lg = it->orders[lr->dst[d].order].lens + (size_t)layer * it->k;
        bs_forward_letters(lr->m, rows + (size_t)lr->dst[d].slot * H, it->letter_ids, (int)it->k, lr->h, lg);
        for (size_t l = 0; l < it->k; l++) lg[l] = bs_readout_logit(lr->readout_bf16, lg[l]);
    }
}

int bs_lens_rows_attach(bs_lens_rows *lr, bs_fwd_input *in, bs_err *e) {
    if (!lr->n_rows) return BS_OK;
    if (!lr->h && !(lr->h = malloc((size_t)lr->m->cfg.hidden * sizeof *lr->h)))
        return bs_fail(e, BS_ENOMEM, "out of memory");
    in->n_lens = lr->n_rows;
    in->lens_rows = lr->rows;
    in->after_layer = after_layer;
    in->after_ctx = lr;
    return BS_OK;
}

/* ---- the document ---- */

/* Code points of s[0..n) (valid UTF-8: the lead bytes). */
static size_t code_points(const char *s, size_t n) {
    size_t c = 0;
    for (size_t i = 0; i < n; i++) c += ((unsigned char)s[i] & 0xC0) != 0x80;
    return c;
}

/* The prompt split into template and its parts, in prompt order, each with
 * the tokens that start in it (a token is counted where its first character
 * lies, so the counts add up to the prompt's tokens). */
static int put_parts(bs_buf *b, const bs_basal_model *m, const bs_order *od, bs_err *e) {
    int32_t *ids = NULL, *off = NULL;
    size_t n = 0;
    int rc = bs_tokenizer_encode(m->tok, od->prompt.data, od->prompt.len, &ids, &n, &off, e);
    if (rc < 0) return rc;
    if (n != (size_t)od->n_ids || memcmp(ids, od->ids, n * sizeof *ids)) {
        rc = bs_fail(e, BS_EINTERNAL, "lens: the prompt's tokens changed");
        goto done;
    }
    /* segment bounds: template before each part, the part; template after the last */
    size_t bound[2 * BS_N_PARTS + 2], cp[2 * BS_N_PARTS + 2];
    int kind[2 * BS_N_PARTS + 1], ns = 0;
    size_t at = 0;
    for (int p = 0; p < BS_N_PARTS; p++) { /* the user format has state, question, options in this order */
        bound[ns] = at;
        kind[ns++] = -1;
        bound[ns] = od->parts.start[p];
        kind[ns++] = p;
        at = od->parts.end[p];
    }
    bound[ns] = at;
    kind[ns++] = -1;
    bound[ns] = od->prompt.len;
    for (int s = 0; s <= ns; s++) cp[s] = code_points(od->prompt.data, bound[s]);
    bs_buf_puts(b, ",\"parts\":[");
    int first = 1;
    for (int s = 0; s < ns; s++) {
        if (kind[s] < 0 && bound[s + 1] == bound[s]) continue; /* no template text between two parts */
        size_t tokens = 0;
        for (size_t t = 0; t < n; t++) {
            size_t c = (size_t)off[2 * t];
            int last = s == ns - 1;
            tokens += c >= cp[s] && (c < cp[s + 1] || last);
        }
        if (!first) bs_buf_putc(b, ',');
        first = 0;
        bs_buf_printf(b, "{\"part\":\"%s\",\"text\":", bs_prompt_part_name((bs_prompt_part)kind[s]));
        bs_resp_string(b, od->prompt.data + bound[s], bound[s + 1] - bound[s]);
        bs_buf_printf(b, ",\"tokens\":%zu}", tokens);
    }
    bs_buf_putc(b, ']');
done:
    free(ids);
    free(off);
    return rc;
}

static void put_doubles(bs_buf *b, const double *v, size_t n) {
    bs_buf_putc(b, '[');
    for (size_t i = 0; i < n; i++) {
        if (i) bs_buf_putc(b, ',');
        bs_resp_double(b, v[i]);
    }
    bs_buf_putc(b, ']');
}

/* q[l][p] = softmax of order o's letter logits after layer l; ok[l] = 0 when
 * a logit is not finite (the layer is then null). */
static void order_probs(const bs_item *it, int o, int L, double *q, unsigned char *ok) {
    for (int l = 0; l < L; l++)
        ok[l] = bs_softmax_logits(it->orders[o].lens + (size_t)l * it->k, (int)it->k, q + (size_t)l * it->k, NULL) == 0;
}

/* One order: its prompt, letters and every layer's logits and probabilities. */
static int put_order(bs_buf *b, const bs_basal_model *m, const bs_question *q, const bs_item *it,
                     const size_t *members, const bs_item *loc, int o, const double *qv, const unsigned char *ok,
                     bs_err *e) {
    const bs_order *od = &it->orders[o];
    int L = m->model.cfg.n_layers;
    size_t k = it->k;
    bs_buf_printf(b, "{\"order\":%d,\"tokens\":%d,\"letters\":[", o, od->n_ids);
    for (size_t p = 0; p < k; p++) bs_buf_printf(b, "%s\"%c\"", p ? "," : "", BS_LETTERS[p]);
    bs_buf_puts(b, "],\"options\":[");
    for (size_t p = 0; p < k; p++) {
        if (p) bs_buf_putc(b, ',');
        const bs_text *key = &q->keys[members[loc->orders[o].perm[p]]];
        bs_resp_string(b, key->s, key->len);
    }
    bs_buf_puts(b, "],\"letter_ids\":");
    bs_resp_ids(b, it->letter_ids, k);
    int rc = put_parts(b, m, od, e);
    if (rc < 0) return rc;
    bs_buf_puts(b, ",\"logits\":[");
    for (int l = 0; l < L; l++) {
        if (l) bs_buf_putc(b, ',');
        bs_buf_putc(b, '[');
        for (size_t p = 0; p < k; p++) {
            if (p) bs_buf_putc(b, ',');
            bs_resp_double(b, (double)od->lens[(size_t)l * k + p]);
        }
        bs_buf_putc(b, ']');
    }
    bs_buf_puts(b, "],\"probabilities\":[");
    for (int l = 0; l < L; l++) {
        if (l) bs_buf_putc(b, ',');
        if (ok[l]) put_doubles(b, qv + (size_t)l * k, k);
        else bs_buf_puts(b, "null");
    }
    bs_buf_puts(b, "]}");
    return BS_OK;
}

/* Where an item stands in its question: an ordinary readout, a multi label,
 * a large choice's round-1 group or its finalists (03 §5). */
static void put_kind(bs_buf *b, const bs_question *q, const bs_item *it, int final) {
    if (final) {
        bs_buf_puts(b, "\"kind\":\"final\"");
    } else if (bs_plan_is_large_choice(q)) {
        bs_buf_printf(b, "\"kind\":\"group\",\"group\":%zu", it->branch);
    } else if (q->multi) {
        bs_buf_puts(b, "\"kind\":\"label\",\"label\":");
        bs_resp_string(b, q->multi->label_keys[it->branch].s, q->multi->label_keys[it->branch].len);
    } else {
        bs_buf_puts(b, "\"kind\":\"question\"");
    }
}

static int put_readout(bs_buf *b, const bs_plan *p, const bs_basal_model *m, const bs_item *it, int final,
                       bs_err *e) {
    const bs_question *q = &p->req->questions[it->question];
    int L = m->model.cfg.n_layers;
    size_t k = it->k, members[BS_MAX_LETTER_OPTIONS];
    bs_item loc;
    int rc = bs_plan_item_local(it, &loc, members, e);
    if (rc < 0) return rc;
    for (int o = 0; o < it->n_orders; o++) {
        if (!it->orders[o].lens) return bs_fail(e, BS_EINTERNAL, "lens: an order was not recorded");
        /* the lens reads the served logits after the last layer (tested bitwise, checked here too) */
        if (memcmp(it->orders[o].lens + (size_t)(L - 1) * k, it->orders[o].logits, k * sizeof(float)))
            return bs_fail(e, BS_EINTERNAL, "lens: the last layer differs from the served logits");
    }
    double *qv = malloc((size_t)BS_N_ORDERS * L * k * sizeof *qv), *mean = malloc(k * sizeof *mean);
    unsigned char *ok = malloc((size_t)BS_N_ORDERS * L);
    if (!qv || !mean || !ok) {
        rc = bs_fail(e, BS_ENOMEM, "out of memory");
        goto done;
    }
    bs_buf_putc(b, '{');
    put_kind(b, q, it, final);
    bs_buf_puts(b, ",\"keys\":[");
    for (size_t i = 0; i < k; i++) {
        if (i) bs_buf_putc(b, ',');
        bs_resp_string(b, q->keys[members[i]].s, q->keys[members[i]].len);
    }
    bs_buf_puts(b, "],\"orders\":[");
    for (int o = 0; o < it->n_orders && rc == BS_OK; o++) {
        order_probs(it, o, L, qv + (size_t)o * L * k, ok + (size_t)o * L);
        if (o) bs_buf_putc(b, ',');
        rc = put_order(b, m, q, it, members, &loc, o, qv + (size_t)o * L * k, ok + (size_t)o * L, e);
    }
    if (rc < 0) goto done;
    /* the order average of 01 §7 after each layer, by the readout's keys */
    bs_buf_puts(b, "],\"mean\":[");
    for (int l = 0; l < L; l++) {
        const double *qs[BS_N_ORDERS];
        int perm[BS_N_ORDERS][BS_MAX_LETTER_OPTIONS];
        const int *perms[BS_N_ORDERS];
        int good = 1;
        for (int o = 0; o < it->n_orders; o++) {
            good &= ok[(size_t)o * L + l];
            qs[o] = qv + ((size_t)o * L + l) * k;
            for (size_t i = 0; i < k; i++) perm[o][i] = (int)loc.orders[o].perm[i];
            perms[o] = perm[o];
        }
        if (l) bs_buf_putc(b, ',');
        if (!good) {
            bs_buf_puts(b, "null");
            continue;
        }
        bs_average_orders(qs, perms, it->n_orders, (int)k, mean);
        put_doubles(b, mean, k);
    }
    bs_buf_putc(b, ']');
    /* a large choice's groups and finalists are not its answer (the Luce fit is) */
    if (!bs_plan_is_large_choice(q)) {
        double avg[BS_MAX_LETTER_OPTIONS], cal[BS_MAX_LETTER_OPTIONS], temp;
        if ((rc = bs_plan_item_dist(p, it, m, avg, &temp, cal, e)) < 0) goto done;
        bs_buf_puts(b, ",\"temperature\":");
        bs_resp_double(b, temp);
        bs_buf_puts(b, ",\"calibrated\":");
        put_doubles(b, cal, k);
    }
    bs_buf_putc(b, '}');
done:
    free(qv);
    free(mean);
    free(ok);
    return rc;
}

int bs_lens_document(const bs_plan *p, const bs_basal_model *m, const char *answer, size_t answer_len, bs_buf *out,
                     bs_err *e) {
    const bs_request *r = p->req;
    const char *dtype = bs_model_dtype_name(&m->model);
    int rc = BS_OK;
    if (!p->lens || p->round != 3) return bs_fail(e, BS_EINTERNAL, "lens: the plan was not run with the lens");
    bs_buf_puts(out, "{\"model\":");
    bs_resp_cstr(out, m->name);
    bs_buf_puts(out, ",\"dtype\":");
    bs_resp_cstr(out, dtype ? dtype : "f32");
    bs_buf_printf(out, ",\"layers\":%d,\"orders\":%d,\"questions\":[", m->model.cfg.n_layers, m->orders);
    for (size_t qi = 0; qi < r->n_questions && rc == BS_OK; qi++) {
        const bs_question *q = &r->questions[qi];
        if (qi) bs_buf_putc(out, ',');
        bs_buf_puts(out, "{\"id\":");
        bs_resp_string(out, q->id.s, q->id.len);
        bs_buf_printf(out, ",\"type\":\"%s\",\"lang\":\"%s\",\"readouts\":[", bs_qtype_name(q->type),
                      bs_lang_name(q->lang));
        int first = 1;
        for (int pass = 0; pass < 2 && rc == BS_OK; pass++) { /* the items, then the large choices' finals */
            const bs_item *items = pass ? p->finals : p->items;
            size_t n = pass ? p->n_finals : p->n_items;
            for (size_t i = 0; i < n && rc == BS_OK; i++) {
                if (items[i].question != qi) continue;
                if (!first) bs_buf_putc(out, ',');
                first = 0;
                rc = put_readout(out, p, m, &items[i], pass, e);
            }
        }
        bs_buf_puts(out, "]}");
    }
    if (rc < 0) return rc;
    bs_buf_puts(out, "],\"answer\":");
    bs_buf_put(out, answer, answer_len);
    bs_buf_putc(out, '}');
    return out->oom ? bs_fail(e, BS_ENOMEM, "out of memory") : BS_OK;
}
