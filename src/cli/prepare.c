/* `basal prepare` (spec 06 §5.2): a /v1/systemone request up to its prompts —
 * items, prompts, token ids, letter ids and packed rows — from the manifests
 * and the tokenizer only (no weights). A request the endpoint refuses prints
 * its error body on stdout and exits 2. */
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/util.h"
#include "cli/cli.h"
#include "engine/pack.h"
#include "engine/plan.h"
#include "protocol/respjson.h"

typedef struct {
    const char *model_dir, *request;
} opts_t;

const cli_doc cli_doc_prepare = {
    "prepare", "--model REF [--request FILE|-] [options]",
    "print items, prompts, token ids, letter ids and packed rows of a request (no weights)",
    "Reads the manifests and the tokenizer only. Prints a JSON array, one element per\n"
    "prepared item in plan order (spec 06 §5.2); a request the endpoint would refuse prints\n"
    "its error body on stdout and exits 2.\n",
};

static int parse_opts(int argc, char **argv, opts_t *o) {
    memset(o, 0, sizeof *o);
    o->request = "-";
    const cli_opt opts[] = {
        CLI_MODEL("model directory or reference (owner/name[@revision], mini, 4.5B, max; required)", &o->model_dir),
        CLI_STR("--request", "FILE|-", NULL, NULL, "the request JSON; - reads stdin", &o->request),
    };
    int rc = cli_parse(&cli_doc_prepare, opts, CLI_N(opts), NULL, argc, argv);
    if (rc) return rc;
    if (!o->model_dir) {
        cli_error("prepare", "--model REF is required (see basal prepare --help)");
        return 2;
    }
    return 0;
}

/* Steps 4–10 of 02 §3 for one /v1/systemone request against m. Returns 0 with
 * a plan, 2 with the error body printed, 1 on a runtime error. */
static int plan_or_print(const bs_basal_model *m, bs_letter_cache *lc, const char *data, size_t len, bs_plan *plan) {
    bs_reply rep;
    bs_reply_init(&rep);
    bs_err e = {0};
    int status = 0, rc = bs_plan_text(plan, data, len, BS_DIALECT_SYSTEMONE, m, lc, &rep, &e);
    if (rc == BS_EINVAL && rep.body.len) {
        fwrite(rep.body.data, 1, rep.body.len, stdout);
        fputc('\n', stdout);
        status = 2;
    } else if (rc < 0) {
        cli_error(NULL, "%s", e.msg[0] ? e.msg : bs_strerror(rc));
        status = 1;
    }
    bs_reply_free(&rep);
    return status;
}

/* One element of the prepare output (06 §5.2). */
static int put_item(bs_buf *b, const bs_request *r, const bs_item *it, const bs_plan_lc *lc, bs_err *e) {
    const bs_question *q = &r->questions[it->question];
    bs_buf_puts(b, "{\"item\":{\"question\":");
    if (q->multi) { /* a multi branch is the item "<question>#<label index>" (04 §3 P2) */
        bs_buf qn;
        bs_buf_init(&qn);
        bs_buf_put(&qn, q->id.s, q->id.len);
        bs_buf_printf(&qn, "#%zu", it->branch);
        bs_resp_string(b, qn.data ? qn.data : "", qn.len);
        if (qn.oom) b->oom = 1;
        bs_buf_free(&qn);
    } else {
        bs_resp_string(b, q->id.s, q->id.len);
    }
    bs_buf_printf(b, ",\"type\":\"%s\",\"lang\":\"%s\",\"keys\":", bs_qtype_name(q->type), bs_lang_name(q->lang));
    bs_resp_texts(b, q->keys, q->n_options);
    bs_buf_puts(b, ",\"options\":");
    bs_resp_texts(b, q->options, q->n_options);
    if (lc) { /* a round-1 group of a choice with 11..255 options (03 §5.1–§5.2): perm indexes all n options */
        const bs_lc_group *g = &lc->lc.group[it->branch];
        bs_buf_printf(b, ",\"large_choice\":{\"round\":1,\"group\":%zu,\"groups\":%d,\"members\":[", it->branch,
                      lc->lc.n_round1);
        for (int i = 0; i < g->size; i++) bs_buf_printf(b, i ? ",%d" : "%d", g->member[i]);
        bs_buf_puts(b, "],\"round2\":\"the 10 finalists of the fit over round 1, asked in both orders: depends on "
                       "the answers of round 1\"}");
    }
    bs_buf_puts(b, "},\"orders\":[");
    const int32_t *prompts[BS_N_ORDERS];
    int32_t lens[BS_N_ORDERS];
    for (int o = 0; o < it->n_orders; o++) {
        const bs_order *od = &it->orders[o];
        if (o) bs_buf_putc(b, ',');
        cli_put_order(b, it, od);
        bs_buf_putc(b, '}');
        prompts[o] = od->ids;
        lens[o] = od->n_ids;
    }
    bs_row row;
    int rc = bs_pack_row(&row, prompts, lens, it->n_orders, e);
    if (rc < 0) return rc;
    bs_buf_puts(b, "],\"packed\":{\"ids\":");
    bs_resp_ids(b, row.ids, (size_t)row.len);
    bs_buf_puts(b, ",\"pos\":");
    bs_resp_ids(b, row.pos, (size_t)row.len);
    bs_buf_puts(b, ",\"node\":");
    bs_resp_ids(b, row.node, (size_t)row.len);
    bs_buf_puts(b, ",\"parent\":");
    bs_resp_ids(b, row.parent, (size_t)row.n_blocks);
    bs_buf_puts(b, ",\"last\":");
    bs_resp_ids(b, row.last, (size_t)row.n_prompts);
    bs_buf_printf(b, ",\"prefix_len\":%d,\"state_len\":0},\"state_len\":0}", row.prefix_len);
    bs_row_free(&row);
    return BS_OK;
}

int cmd_prepare(int argc, char **argv) {
    opts_t o;
    int status = parse_opts(argc, argv, &o);
    if (status) return status < 0 ? 0 : status;
    status = 1;
    bs_err e = {0};
    bs_basal_model m;
    bs_letter_cache lc;
    bs_letter_cache_init(&lc);
    bs_plan plan = {0};
    bs_buf out;
    bs_buf_init(&out);
    char *data = NULL;
    size_t len = 0;
    int loaded = 0;
    if (cli_read_request(o.request, &data, &len) < 0) goto done;
    if (bs_basal_load(&m, o.model_dir, NULL, 0, &e) < 0) { cli_error("prepare", "%s", e.msg); goto done; }
    loaded = 1;
    if ((status = plan_or_print(&m, &lc, data, len, &plan)) != 0) goto done;
    status = 1;
    bs_buf_putc(&out, '[');
    for (size_t i = 0; i < plan.n_items; i++) {
        if (i) bs_buf_putc(&out, ',');
        const bs_plan_lc *plc = NULL; /* the large choice the item is a group of */
        for (size_t k = 0; k < plan.n_lc && !plc; k++)
            if (plan.lcs[k].question == plan.items[i].question) plc = &plan.lcs[k];
        if (put_item(&out, plan.req, &plan.items[i], plc, &e) < 0) { cli_error("prepare", "%s", e.msg); goto done; }
    }
    bs_buf_putc(&out, ']');
    if (out.oom) goto done;
    cli_print_pretty(stdout, out.data, out.len);
    status = 0;
done:
    bs_plan_free(&plan);
    if (loaded) bs_basal_free(&m);
    bs_letter_cache_free(&lc);
    bs_buf_free(&out);
    free(data);
    return status;
}
