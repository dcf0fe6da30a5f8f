/* `basal check-prompts` (spec 06 §6): this runtime's preparation (prompts,
 * token ids, letter ids, permutations, packing) against a reference export,
 * without loading weights. */
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
#include "cli/parity/items.h"
#include "engine/plan.h"
#include "protocol/pyjson.h"
#include "protocol/respjson.h"

/* ---------------------------------------------------------------- basal check-prompts */

const cli_doc cli_doc_check_prompts = {
    "check-prompts", "--model REF --reference DIR [--out FILE]",
    "compare prompts, token ids and packing with a reference export (no weights)",
    "Reads the manifests and the tokenizer only. For every bench item and System One item\n"
    "of the reference export, compares prompt, input_ids, letter_ids and perm of each order\n"
    "and pack.prefix_len/packed_len/readout_cols with this runtime's preparation. Items with\n"
    "an intended deviation from upstream (spec 01 §11) are counted apart. Summary on stderr:\n"
    "`orders compared: N, mismatches: N, known deviations: N`; JSON report on stdout or --out.\n"
    "Exit status: 0 no mismatches, 1 mismatches or a runtime failure, 2 usage error.\n",
};

/* Intended differences from upstream's item building (01 §11; the cases of
 * basal-rs tools/reference inputs): reported apart, never as mismatches. */
static const char *known_deviation(const char *id, const char *item) {
    if (!strcmp(id, "so-null-and-missing-instructions") && !strcmp(item, "explicit_null"))
        return "instructions=null is treated as missing (empty) on /v1/systemone; upstream renders the text \"null\"";
    /* basal-rs's list predates 02 §4.3 Q7: the request is refused for both items */
    if (!strcmp(id, "so-null-and-missing-instructions") && !strcmp(item, "missing"))
        return "a noul question without instructions and criteria is refused on /v1/systemone (02 §4.3 Q7); "
               "upstream asks it with an empty question";
    if (!strcmp(id, "so-empty-structures") && !strcmp(item, "empty_true"))
        return "noul description \"\"/{} is kept on /v1/systemone; upstream replaces falsy descriptions with Tak/Nie";
    if (!strcmp(id, "so-unknown-type")) return "unknown type is a validation error; upstream treats it as choice";
    if (!strcmp(id, "so-missing-type")) return "missing type is a validation error; upstream defaults to choice";
    return NULL;
}

typedef struct {
    size_t orders, n_mis, n_dev;
    bs_buf mis, dev; /* JSON array bodies */
} token_check;

static void put_reason(bs_buf *b, const char *dev) {
    if (dev) bs_resp_cstr(b, dev);
    else bs_buf_puts(b, "null");
    bs_buf_putc(b, '}');
}

/* Compares reference record ref with our prepared record ours ({orders, pack}). */
static int tc_compare(token_check *tc, const char *tag, const bj_value *ref, const bj_value *ours, const char *dev) {
    bs_buf d;
    bs_buf_init(&d);
    int nd = 0;
    const bj_value *ro = bj_get(ref, "orders"), *oo = bj_get(ours, "orders");
    size_t nr = ro && ro->type == BJ_ARRAY ? ro->n : 0, no = oo && oo->type == BJ_ARRAY ? oo->n : 0;
    if (nr != no) {
        bs_buf_printf(&d, "%s\"orders %zu vs %zu\"", nd++ ? "," : "", nr, no);
    }
    static const char *const of[] = {"prompt", "input_ids", "letter_ids", "perm"};
    for (size_t k = 0; k < nr && k < no; k++) {
        tc->orders++;
        for (size_t f = 0; f < 4; f++)
            if (!par_jeq(bj_get(ro->items[k], of[f]), bj_get(oo->items[k], of[f])))
                bs_buf_printf(&d, "%s\"order %zu: %s\"", nd++ ? "," : "", k, of[f]);
    }
    static const char *const pf[] = {"prefix_len", "packed_len", "readout_cols"};
    for (size_t f = 0; f < 3; f++)
        if (!par_jeq(bj_get(bj_get(ref, "pack"), pf[f]), bj_get(bj_get(ours, "pack"), pf[f])))
            bs_buf_printf(&d, "%s\"pack.%s\"", nd++ ? "," : "", pf[f]);
    if (nd) {
        bs_buf *to = dev ? &tc->dev : &tc->mis;
        size_t *cnt = dev ? &tc->n_dev : &tc->n_mis;
        bs_buf_puts(to, (*cnt)++ ? ",{\"item\":" : "{\"item\":");
        bs_resp_cstr(to, tag);
        bs_buf_puts(to, ",\"differences\":[");
        bs_buf_put(to, d.data ? d.data : "", d.len);
        bs_buf_puts(to, "],\"reason\":");
        put_reason(to, dev);
    }
    bs_buf_free(&d);
    return nd == 0;
}

/* Our {orders, pack} of one item as a parsed value. */
static int prepared_value(const bs_plan *p, const bs_item *it, const bs_basal_model *m, bj_value **out, bs_err *e) {
    bs_buf b;
    bs_buf_init(&b);
    bs_buf_putc(&b, '{');
    int rc = par_put_item_core(&b, p, it, m, NULL, 0, e);
    bs_buf_putc(&b, '}');
    if (rc == 0) rc = b.oom ? bs_fail(e, BS_ENOMEM, "out of memory") : bj_parse(b.data, b.len, NULL, out, e);
    bs_buf_free(&b);
    return rc;
}

static const bj_value *ref_item_named(const bj_value *c, const char *name, size_t len) {
    const bj_value *items = bj_get(c, "items");
    for (size_t i = 0; items && items->type == BJ_ARRAY && i < items->n; i++) {
        const bj_value *n = bj_get(items->items[i], "name");
        if (n && n->type == BJ_STRING && n->len == len && !memcmp(n->str, name, len)) return items->items[i];
    }
    return NULL;
}

/* Items of this runtime that an upstream reference cannot have (03 §1, §5):
 * a large choice's groups and finalists (upstream refuses more than 10
 * options), and the per-label readouts of a multi question that the
 * reference records as one item without orders (export_reference.py's
 * "branches" record). NULL for any other item. */
static const char *item_deviation(const bj_value *c, const bs_question *q) {
    if (q->n_options > BS_MAX_LETTER_OPTIONS)
        return "choice with 11..255 options: grouped readouts (03 §5); upstream refuses more than 10 options";
    const bj_value *whole = q->multi ? ref_item_named(c, q->id.s, q->id.len) : NULL;
    if (whole && !bj_get(whole, "orders"))
        return "multi: one yes/no readout per label (03 §1); the reference records the question without orders";
    return NULL;
}

static int check_case(token_check *tc, const bj_value *c, const bs_basal_model *m, bs_letter_cache *lc, bs_buf *cases,
                      bs_err *e) {
    const bj_value *idv = bj_get(c, "id");
    const char *id = idv && idv->type == BJ_STRING ? idv->str : "";
    bs_buf body, err, name, tag;
    bs_buf_init(&body);
    bs_buf_init(&err);
    bs_buf_init(&name);
    bs_buf_init(&tag);
    bs_plan plan;
    par_case_body(bj_get(c, "request"), m->name, &body);
    int rc = par_plan_body(&plan, &body, BS_DIALECT_SYSTEMONE, m, lc, &err, e);
    bs_buf_puts(cases, "{\"id\":");
    bs_resp_cstr(cases, id);
    bs_buf_puts(cases, ",\"ours_error\":");
    if (rc == 1) bs_buf_put(cases, err.data, err.len);
    else bs_buf_puts(cases, "null");
    bs_buf_puts(cases, ",\"reference_error\":");
    const bj_value *re = bj_get(c, "upstream_error");
    if (!re || re->type == BJ_NULL) re = bj_get(c, "error");
    if (re) bs_resp_value(cases, re);
    else bs_buf_puts(cases, "null");
    bs_buf_puts(cases, ",\"deviation\":");
    const char *cd = known_deviation(id, "");
    if (cd) bs_resp_cstr(cases, cd);
    else bs_buf_puts(cases, "null");
    bs_buf_puts(cases, ",\"items\":[");
    for (size_t i = 0; rc == 0 && i < par_plan_n_items(&plan); i++) {
        const bs_item *it = par_plan_item(&plan, i);
        name.len = 0;
        par_item_name(&name, &plan, it);
        bs_buf_putc(&name, 0);
        tag.len = 0;
        bs_buf_printf(&tag, "systemone/%s/%s", id, name.data);
        const bj_value *r = ref_item_named(c, name.data, name.len - 1);
        int same = 0;
        if (r) {
            bj_value *ours = NULL;
            if ((rc = prepared_value(&plan, it, m, &ours, e)) < 0) break;
            same = tc_compare(tc, tag.data, r, ours, known_deviation(id, name.data));
            bj_free(ours);
        }
        if (!r) { /* an item the reference lacks: its tokens cannot agree */
            const bs_question *q = &plan.req->questions[it->question];
            const char *dev = known_deviation(id, name.data);
            if (!dev) dev = item_deviation(c, q);
            bs_buf *to = dev ? &tc->dev : &tc->mis;
            size_t *cnt = to == &tc->dev ? &tc->n_dev : &tc->n_mis;
            bs_buf_puts(to, (*cnt)++ ? ",{\"item\":" : "{\"item\":");
            bs_resp_cstr(to, tag.data);
            bs_buf_puts(to, ",\"differences\":[\"not in the reference\"],\"reason\":");
            put_reason(to, dev);
        }
        bs_buf_puts(cases, i ? ",{\"item\":" : "{\"item\":");
        bs_resp_cstr(cases, name.data);
        bs_buf_printf(cases, ",\"tokens_identical\":%s%s}", same ? "true" : "false",
                      r ? "" : ",\"note\":\"not in the reference\"");
    }
    bs_buf_puts(cases, "]}");
    const bj_value *ritems = bj_get(c, "items");
    for (size_t i = 0; rc == 1 && ritems && ritems->type == BJ_ARRAY && i < ritems->n; i++) {
        /* we refuse a request whose items the reference prepared */
        const bj_value *n = bj_get(ritems->items[i], "name");
        const char *nm = n && n->type == BJ_STRING ? n->str : "";
        const char *dev = known_deviation(id, nm);
        bs_buf *to = dev ? &tc->dev : &tc->mis;
        size_t *cnt = dev ? &tc->n_dev : &tc->n_mis;
        tag.len = 0;
        bs_buf_printf(&tag, "systemone/%s/%s", id, nm);
        bs_buf_puts(to, (*cnt)++ ? ",{\"item\":" : "{\"item\":");
        bs_resp_string(to, tag.data, tag.len);
        bs_buf_puts(to, ",\"differences\":[\"request refused by this runtime\"],\"reason\":");
        put_reason(to, dev);
    }
    if (rc == 1) rc = 0;
    bs_plan_free(&plan);
    bs_buf_free(&body);
    bs_buf_free(&err);
    bs_buf_free(&name);
    bs_buf_free(&tag);
    return rc;
}

int cmd_check_prompts(int argc, char **argv) {
    const char *ref = NULL, *refdir = NULL, *out_path = NULL;
    const cli_opt opts[] = {
        CLI_STR("--model", "REF", "", NULL, "model directory or reference (spec 06 §3; required)", &ref),
        CLI_STR("--reference", "DIR", "", NULL, "reference export with bench.jsonl and systemone.jsonl (required)",
                &refdir),
        CLI_STR("--out", "FILE", "stdout", NULL, "JSON report (must not exist)", &out_path),
    };
    int status = cli_parse(&cli_doc_check_prompts, opts, CLI_N(opts), NULL, argc, argv);
    if (status) return status < 0 ? 0 : status;
    if (!ref || !refdir) {
        cli_error("check-prompts", "--model REF and --reference DIR are required (see basal check-prompts --help)");
        return 2;
    }
    if (out_path && bs_file_exists(out_path)) {
        cli_error("check-prompts", "%s exists; choose a new output path", out_path);
        return 1;
    }
    status = 1;
    bs_err e = {0};
    char *dir = NULL, *bench_path = par_path_in(refdir, "bench.jsonl"), *so_path = par_path_in(refdir, "systemone.jsonl");
    cli_jsonl bench = {0}, cases = {0};
    bs_basal_model m;
    int loaded = 0;
    bs_letter_cache lc;
    bs_letter_cache_init(&lc);
    token_check tc = {0};
    bs_buf_init(&tc.mis);
    bs_buf_init(&tc.dev);
    bs_buf rep, body, err, tag;
    bs_buf_init(&rep);
    bs_buf_init(&body);
    bs_buf_init(&err);
    bs_buf_init(&tag);
    if (!bench_path || !so_path) goto done;
    if (cli_hub_resolve("check-prompts", ref, NULL, &dir, &e) < 0) goto fail;
    if (cli_jsonl_read(bench_path, &bench, &e) < 0 || cli_jsonl_read(so_path, &cases, &e) < 0) goto fail;
    if (bs_basal_load(&m, dir, NULL, 0, &e) < 0) goto fail;
    loaded = 1;
    for (size_t i = 0; i < bench.n; i++) {
        const bj_value *r = bench.v[i];
        tag.len = 0;
        bs_buf_puts(&tag, "bench/");
        par_put_field(&tag, r, "index");
        bs_buf_putc(&tag, 0);
        body.len = 0;
        err.len = 0;
        bs_plan plan;
        memset(&plan, 0, sizeof plan);
        int rc = cli_bench_item_body(r, m.name, &body, &e);
        if (rc == 0) rc = par_plan_body(&plan, &body, BS_DIALECT_SYSTEMONE, &m, &lc, &err, &e);
        if (rc == 1 || rc == BS_EINVAL) { /* we refuse an item the reference asked: a mismatch */
            bs_buf_puts(&tc.mis, tc.n_mis++ ? ",{\"item\":" : "{\"item\":");
            bs_resp_cstr(&tc.mis, tag.data);
            bs_buf_puts(&tc.mis, ",\"differences\":[");
            if (rc == 1) bs_resp_string(&tc.mis, err.data, err.len);
            else bs_resp_cstr(&tc.mis, e.msg);
            bs_buf_puts(&tc.mis, "],\"reason\":null}");
            bs_plan_free(&plan);
            continue;
        }
        bj_value *ours = NULL;
        if (rc == 0 && plan.n_items != 1) rc = bs_fail(&e, BS_EINTERNAL, "%s: not one readout", tag.data);
        if (rc == 0) rc = prepared_value(&plan, &plan.items[0], &m, &ours, &e);
        if (rc == 0) tc_compare(&tc, tag.data, r, ours, NULL);
        bj_free(ours);
        bs_plan_free(&plan);
        if (rc < 0) goto fail;
    }
    bs_buf cs;
    bs_buf_init(&cs);
    for (size_t i = 0; i < cases.n; i++) {
        if (i) bs_buf_putc(&cs, ',');
        if (check_case(&tc, cases.v[i], &m, &lc, &cs, &e) < 0) {
            bs_buf_free(&cs);
            goto fail;
        }
    }
    bs_buf_printf(&rep, "{\"tokens\":{\"orders_compared\":%zu,\"mismatches\":[", tc.orders);
    bs_buf_put(&rep, tc.mis.data ? tc.mis.data : "", tc.mis.len);
    bs_buf_puts(&rep, "],\"known_deviations\":[");
    bs_buf_put(&rep, tc.dev.data ? tc.dev.data : "", tc.dev.len);
    bs_buf_puts(&rep, "]},\"systemone_cases\":[");
    bs_buf_put(&rep, cs.data ? cs.data : "", cs.len);
    bs_buf_puts(&rep, "]}");
    bs_buf_free(&cs);
    if (rep.oom) goto done;
    fprintf(stderr, "orders compared: %zu, mismatches: %zu, known deviations: %zu\n", tc.orders, tc.n_mis, tc.n_dev);
    if (out_path) {
        FILE *f = fopen(out_path, "w");
        if (!f) { cli_error("check-prompts", "%s: %s", out_path, strerror(errno)); goto done; }
        cli_print_pretty(f, rep.data, rep.len);
        if (fclose(f) != 0) { cli_error("check-prompts", "writing %s failed", out_path); goto done; }
    } else {
        cli_print_pretty(stdout, rep.data, rep.len);
    }
    status = tc.n_mis ? 1 : 0;
    goto done;
fail:
    cli_error("check-prompts", "%s", e.msg);
done:
    if (loaded) bs_basal_free(&m);
    bs_letter_cache_free(&lc);
    cli_jsonl_free(&bench);
    cli_jsonl_free(&cases);
    bs_buf_free(&tc.mis);
    bs_buf_free(&tc.dev);
    bs_buf_free(&rep);
    bs_buf_free(&body);
    bs_buf_free(&err);
    bs_buf_free(&tag);
    free(dir);
    free(bench_path);
    free(so_path);
    return status;
}
