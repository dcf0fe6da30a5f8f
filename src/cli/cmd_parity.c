/* Parity tools (spec 06 §6): `basal export` runs the bench items and System
 * One requests of an inputs directory and writes a reference-format export
 * (bench.jsonl, systemone.jsonl, manifest.json); `basal check-prompts`
 * compares this runtime's preparation (prompts, token ids, letter ids,
 * permutations, packing) with a reference export without loading weights.
 * A bench item is asked as a /v1/systemone request (cli/bench_item.h), so it
 * goes through the one planning path of the server. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli/bench_item.h"
#include "api/session.h"
#include "cli/cli.h"
#include "protocol/pyjson.h"
#include "protocol/respjson.h"
#include "base/sha256.h"
#include "base/util.h"
#include "engine/engine.h"
#include "engine/pack.h"
#include "engine/plan.h"
#include "engine/runner.h"

/* ---------------------------------------------------------------- JSONL and JSON helpers */


/* A field of a record echoed compactly (null when absent). */
static void put_field(bs_buf *b, const bj_value *rec, const char *key) {
    const bj_value *v = bj_get(rec, key);
    if (v) bs_resp_value(b, v);
    else bs_buf_puts(b, "null");
}

static double num_of(const bj_value *v, int *ok) {
    *ok = v && v->type == BJ_NUMBER;
    return *ok ? strtod(v->str, NULL) : 0.0;
}

/* Structural equality: numbers by value, strings by bytes, objects by key. */
static int jeq(const bj_value *a, const bj_value *b) {
    if (!a || !b) return a == b;
    if (a->type != b->type) return 0;
    switch (a->type) {
    case BJ_NUMBER: return strtod(a->str, NULL) == strtod(b->str, NULL);
    case BJ_STRING: return a->len == b->len && !memcmp(a->str, b->str, a->len);
    case BJ_ARRAY:
        if (a->n != b->n) return 0;
        for (size_t i = 0; i < a->n; i++)
            if (!jeq(a->items[i], b->items[i])) return 0;
        return 1;
    case BJ_OBJECT:
        if (a->n != b->n) return 0;
        for (size_t i = 0; i < a->n; i++) {
            const bj_value *o = NULL;
            for (size_t j = 0; j < b->n && !o; j++)
                if (b->key_lens[j] == a->key_lens[i] && !memcmp(b->keys[j], a->keys[i], a->key_lens[i])) o = b->items[j];
            if (!jeq(a->items[i], o)) return 0;
        }
        return 1;
    default: return 1;
    }
}

static void put_doubles(bs_buf *b, const double *v, size_t n) {
    bs_buf_putc(b, '[');
    for (size_t i = 0; i < n; i++) {
        if (i) bs_buf_putc(b, ',');
        bj_fmt_pyfloat(v[i], b); /* Python repr: round-trips, as json.dumps writes it */
    }
    bs_buf_putc(b, ']');
}

/* ---------------------------------------------------------------- bench items and requests */

/* A System One case's request with a null or missing model set to ours. */
static void case_body(const bj_value *rq, const char *model, bs_buf *b) {
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
static int plan_body(bs_plan *p, const bs_buf *body, bs_dialect d, const bs_basal_model *m, bs_letter_cache *lc,
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
static void item_name(bs_buf *b, const bs_plan *p, const bs_item *it) {
    const bs_question *q = &p->req->questions[it->question];
    bs_buf_put(b, q->id.s, q->id.len);
    if (it >= p->finals && it < p->finals + p->n_finals) bs_buf_puts(b, "#final");
    else if (q->multi || q->n_options > BS_MAX_LETTER_OPTIONS) bs_buf_printf(b, "#%zu", it->branch);
}

/* Per-item results after the forward (01 §6–§8). */
typedef struct {
    double p_avg[BS_MAX_LETTER_OPTIONS], p_cal[BS_MAX_LETTER_OPTIONS], temp;
} item_res;

/* "orders":[...],"pack":{...} of one item, and with res its numbers
 * (letter_logits and probs per order; ,"p_avg",…,"p_cal" after the pack,
 * with_argmax: a bench line's argmax_avg and argmax_cal in basal-rs's order,
 * p_avg, argmax_avg, temperature, p_cal, argmax_cal). */
static int put_item_core(bs_buf *b, const bs_plan *p, const bs_item *item, const bs_basal_model *m, item_res *res,
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

/* The texts of an item's own options (bs_plan_item_local's members) as a
 * JSON array: a large choice's item lists its group, as the reference does. */
static int put_item_texts(bs_buf *b, const bs_text *t, size_t n_t, const bs_item *it, bs_err *e) {
    bs_item loc;
    size_t members[BS_MAX_LETTER_OPTIONS];
    int rc = bs_plan_item_local(it, &loc, members, e);
    if (rc < 0) return rc;
    bs_buf_putc(b, '[');
    for (size_t i = 0; i < it->k; i++) {
        if (members[i] >= n_t) return bs_fail(e, BS_EINTERNAL, "item option %zu of %zu", members[i], n_t);
        if (i) bs_buf_putc(b, ',');
        bs_resp_string(b, t[members[i]].s ? t[members[i]].s : "", t[members[i]].len);
    }
    bs_buf_putc(b, ']');
    return BS_OK;
}

/* The items a plan computed: round 1, then the finalists of round 2. */
static size_t plan_n_items(const bs_plan *p) { return p->n_items + p->n_finals; }
static const bs_item *plan_item(const bs_plan *p, size_t i) {
    return i < p->n_items ? &p->items[i] : &p->finals[i - p->n_items];
}

/* ---------------------------------------------------------------- basal export */

typedef struct {
    const char *ref, *inputs, *out, *batching;
    int threads, no_prefix_cache;
    cli_device dev;
} export_opts;

const cli_doc cli_doc_export = {
    "export", "--model REF --inputs DIR --out DIR [options]",
    "run a parity inputs directory and write a reference-format export (spec 06 §6)",
    "DIR holds bench.jsonl ({index, source, line, id, type, state, question, options, gold})\n"
    "and systemone.jsonl ({id, source, request}). --out is created and gets bench.jsonl,\n"
    "systemone.jsonl and manifest.json in the format of basal-rs `basal export`; compare\n"
    "two exports with `basal compare`. --batching single asks every bench question in its\n"
    "own forward (both orders packed); budget and tree run all bench items through the\n"
    "batched paths (their letter logits must be bit-identical). System One items run one\n"
    "per forward; their served answer uses the server's tree batching.\n"
    "Exit status: 0 written, 1 runtime failure or existing --out, 2 usage error.\n",
};

/* One whole decision as an endpoint gives it: the 200 body (without
 * usage.latency_ms) or the error body, in out. Negative: internal failure. */
static int decide_body(const bs_basal_model *m, bs_letter_cache *lc, bs_runner *run, const bs_buf *body,
                       bs_dialect d, bs_buf *out, bs_err *e) {
    bs_plan plan;
    int rc = plan_body(&plan, body, d, m, lc, out, e);
    if (rc != 0) {
        bs_plan_free(&plan);
        return rc < 0 ? rc : 0;
    }
    bs_reply rep;
    bs_reply_init(&rep);
    bs_plan *pp = &plan;
    rc = bs_runner_run_all(run, &pp, 1, lc, &rep, e);
    if (rc == BS_EINVAL && rep.body.len) {
        bs_buf_put(out, rep.body.data, rep.body.len);
        rc = 0;
    } else if (rc == 0) {
        int rf = bs_plan_refusal(&plan, m, &rep, e);
        if (rf > 0) bs_buf_put(out, rep.body.data, rep.body.len);
        else if (rf < 0) rc = rf;
        else rc = bs_plan_answer(&plan, m, -1, out, e);
    }
    bs_reply_free(&rep);
    bs_plan_free(&plan);
    return rc;
}

/* max |served - items| over the items the served answer names (basal-rs
 * answer_vs_items_max_abs_prob_diff): noul as [v, 1 - v], else by key. */
static double served_diff(const bs_buf *answer, const bs_plan *p, const item_res *res) {
    bj_value *root = NULL;
    bs_err pe = {0};
    double d = 0;
    if (!answer->data || bj_parse(answer->data, answer->len, NULL, &root, &pe) < 0) return d;
    const bj_value *as = bj_get(root, "answers");
    bs_buf name;
    bs_buf_init(&name);
    for (size_t i = 0; as && i < plan_n_items(p); i++) {
        const bs_item *it = plan_item(p, i);
        const bs_question *q = &p->req->questions[it->question];
        name.len = 0;
        item_name(&name, p, it);
        bs_buf_putc(&name, 0);
        const bj_value *a = name.data ? bj_get(as, name.data) : NULL;
        if (!a) continue;
        int ok;
        double v = num_of(bj_get(a, "noul"), &ok), served[BS_MAX_LETTER_OPTIONS];
        const bj_value *probs = bj_get(a, "probabilities");
        for (size_t k = 0; k < it->k; k++) {
            if (ok) {
                served[k] = k == 0 ? v : 1.0 - v;
            } else {
                bs_buf key;
                bs_buf_init(&key);
                bs_buf_put(&key, q->keys[k].s, q->keys[k].len);
                bs_buf_putc(&key, 0);
                int ok2;
                served[k] = num_of(key.data ? bj_get(probs, key.data) : NULL, &ok2);
                bs_buf_free(&key);
                if (!ok2) continue;
            }
            double x = served[k] - res[i].p_cal[k];
            if (x < 0) x = -x;
            if (x > d) d = x;
        }
    }
    bs_buf_free(&name);
    bj_free(root);
    return d;
}

/* One line of systemone.jsonl. */
static int export_case(const bj_value *c, const bs_basal_model *m, bs_letter_cache *lc, bs_runner *run, bs_buf *line,
                       bs_err *e) {
    bs_buf body, err, answer;
    bs_buf_init(&body);
    bs_buf_init(&err);
    bs_buf_init(&answer);
    bs_plan plan;
    item_res *res = NULL;
    case_body(bj_get(c, "request"), m->name, &body);
    bs_buf_puts(line, "{\"id\":");
    put_field(line, c, "id");
    bs_buf_puts(line, ",\"source\":");
    put_field(line, c, "source");
    bs_buf_puts(line, ",\"request\":");
    put_field(line, c, "request");
    int rc = plan_body(&plan, &body, BS_DIALECT_SYSTEMONE, m, lc, &err, e);
    if (rc == 1) {
        bs_buf_puts(line, ",\"items\":[],\"error\":");
        bs_buf_put(line, err.data, err.len);
        rc = 0;
    } else if (rc == 0) {
        /* the items one per forward, both orders packed (basal-rs Batching::Single) */
        bs_plan *pp = &plan;
        bs_reply rep;
        bs_reply_init(&rep);
        run->batching = BS_BATCH_SINGLE;
        rc = bs_runner_run_all(run, &pp, 1, lc, &rep, e);
        if (rc == BS_EINVAL && rep.body.len) bs_fail(e, rc, "a finalist prompt was refused: %s", rep.body.data);
        bs_reply_free(&rep);
        size_t n = plan_n_items(&plan);
        if (rc == 0 && !(res = calloc(n ? n : 1, sizeof *res))) rc = bs_fail(e, BS_ENOMEM, "out of memory");
        bs_buf_puts(line, ",\"items\":[");
        bs_buf tmp;
        bs_buf_init(&tmp);
        for (size_t i = 0; rc == 0 && i < n; i++) {
            const bs_item *it = plan_item(&plan, i);
            const bs_question *q = &plan.req->questions[it->question];
            if (i) bs_buf_putc(line, ',');
            bs_buf_puts(line, "{\"name\":");
            tmp.len = 0;
            item_name(&tmp, &plan, it);
            bs_resp_string(line, tmp.data ? tmp.data : "", tmp.len);
            bs_buf_printf(line, ",\"type\":\"%s\",\"keys\":", bs_qtype_name(q->type));
            if ((rc = put_item_texts(line, q->keys, q->n_options, it, e)) < 0) break;
            bs_buf_puts(line, ",\"options\":");
            if ((rc = put_item_texts(line, q->options, q->n_options, it, e)) < 0) break;
            bs_buf_printf(line, ",\"lang\":\"%s\",\"state_text\":", bs_lang_name(q->lang));
            bs_resp_string(line, plan.req->state.s, plan.req->state.len);
            bs_buf_puts(line, ",\"question_text\":");
            tmp.len = 0;
            bs_text qt = bs_plan_item_question(q, it->branch, &tmp);
            bs_resp_string(line, qt.s ? qt.s : "", qt.len);
            bs_buf_putc(line, ',');
            rc = put_item_core(line, &plan, it, m, &res[i], 0, e);
            bs_buf_putc(line, '}');
        }
        bs_buf_free(&tmp);
        bs_buf_putc(line, ']');
        /* the served answer: the request as the server batches it */
        run->batching = BS_BATCH_TREE;
        if (rc == 0) rc = decide_body(m, lc, run, &body, BS_DIALECT_SYSTEMONE, &answer, e);
        if (rc == 0) {
            bs_buf_puts(line, ",\"answer\":");
            bs_buf_put(line, answer.data, answer.len);
            bs_buf_puts(line, ",\"answer_vs_items_max_abs_prob_diff\":");
            bj_fmt_pyfloat(served_diff(&answer, &plan, res), line);
        }
    }
    bs_plan_free(&plan);
    if (rc == 0) { /* the upstream-compatible endpoint (/v1/basal) on the same request */
        answer.len = 0;
        run->batching = BS_BATCH_TREE;
        rc = decide_body(m, lc, run, &body, BS_DIALECT_BASAL, &answer, e);
        bs_buf_puts(line, ",\"answer_upstream\":");
        bs_buf_put(line, answer.data, answer.len);
    }
    bs_buf_puts(line, "}\n");
    if (rc == 0 && line->oom) rc = bs_fail(e, BS_ENOMEM, "out of memory");
    free(res);
    bs_buf_free(&body);
    bs_buf_free(&err);
    bs_buf_free(&answer);
    return rc;
}

/* bench.jsonl of the export: all items prepared, then run together. */
static int export_bench(const cli_jsonl *recs, const bs_basal_model *m, bs_letter_cache *lc, bs_runner *run, bs_buf *out,
                        bs_err *e) {
    size_t n = recs->n;
    bs_plan *plans = calloc(n ? n : 1, sizeof *plans);
    bs_plan **pp = calloc(n ? n : 1, sizeof *pp);
    bs_buf body, err;
    bs_buf_init(&body);
    bs_buf_init(&err);
    int rc = plans && pp ? 0 : bs_fail(e, BS_ENOMEM, "out of memory");
    for (size_t i = 0; rc == 0 && i < n; i++) { /* plans[] starts zeroed: every entry can be freed */
        body.len = 0;
        err.len = 0;
        pp[i] = &plans[i];
        if ((rc = cli_bench_item_body(recs->v[i], m->name, &body, e)) < 0) {
            char why[sizeof e->msg];
            snprintf(why, sizeof why, "%s", e->msg);
            bs_fail(e, rc, "bench item %zu: %s", i + 1, why);
            break;
        }
        rc = plan_body(&plans[i], &body, BS_DIALECT_SYSTEMONE, m, lc, &err, e);
        if (rc == 1) rc = bs_fail(e, BS_EINVAL, "bench item %zu rejected: %.*s", i + 1, (int)err.len, err.data);
        else if (rc == 0 && plans[i].n_items != 1) rc = bs_fail(e, BS_EINVAL, "bench item %zu: not one readout", i + 1);
    }
    if (rc == 0) rc = bs_runner_run_all(run, pp, n, lc, NULL, e);
    for (size_t i = 0; rc == 0 && i < n; i++) {
        const bj_value *r = recs->v[i];
        const bs_item *it = &plans[i].items[0];
        static const char *const fields[] = {"index", "source", "line", "id", "type", "state", "question", "options",
                                             "gold"};
        for (size_t f = 0; f < sizeof fields / sizeof *fields; f++) {
            bs_buf_printf(out, "%s\"%s\":", f ? "," : "{", fields[f]);
            put_field(out, r, fields[f]);
        }
        bs_buf_printf(out, ",\"lang\":\"%s\",", bs_lang_name(plans[i].req->questions[0].lang));
        item_res res;
        if ((rc = put_item_core(out, &plans[i], it, m, &res, 1, e)) < 0) break;
        bs_buf_puts(out, "}\n");
    }
    for (size_t i = 0; plans && i < n; i++) bs_plan_free(&plans[i]);
    free(plans);
    free(pp);
    bs_buf_free(&body);
    bs_buf_free(&err);
    return rc;
}

static int write_in(const char *dir, const char *name, const bs_buf *b, bs_err *e) {
    char *path = bs_strfmt("%s/%s", dir, name);
    if (!path) return bs_fail(e, BS_ENOMEM, "out of memory");
    int rc = bs_write_file(path, b->data ? b->data : "", b->len, e);
    free(path);
    return rc;
}

static char *path_in(const char *dir, const char *name) { return bs_strfmt("%s/%s", dir, name); }

/* "name":"sha256",… of the model directory's small files that define its
 * answers (those present), for the manifest (06 §6: SHA-256 of the model's
 * files; the weights follow as weights_sha256). */
static int put_files_sha256(bs_buf *b, const char *dir, bs_err *e) {
    static const char *const names[] = {"config.json", "tokenizer.json", "tokenizer_config.json", "basal.json",
                                        "CALIBRATION.json"};
    int first = 1;
    for (size_t i = 0; i < sizeof names / sizeof *names; i++) {
        char *fp = path_in(dir, names[i]);
        if (!fp) return bs_fail(e, BS_ENOMEM, "out of memory");
        uint8_t d[32];
        char hex[65];
        int rc = bs_file_exists(fp) ? bs_sha256_file(fp, d, NULL, e) : 1;
        free(fp);
        if (rc < 0) return rc;
        if (rc > 0) continue;
        bs_sha256_hex(d, hex);
        bs_buf_printf(b, "%s\"%s\":\"%s\"", first ? "" : ",", names[i], hex);
        first = 0;
    }
    return BS_OK;
}

int cmd_export(int argc, char **argv) {
    export_opts o = {0};
    o.batching = "single";
    const cli_opt opts[] = {
        CLI_STR("--model", "REF", "", NULL, "model directory or reference (spec 06 §3; required)", &o.ref),
        CLI_STR("--inputs", "DIR", "", NULL, "inputs directory with bench.jsonl and systemone.jsonl (required)",
                &o.inputs),
        CLI_STR("--out", "DIR", "", NULL, "export directory to create (must not exist; required)", &o.out),
        CLI_CHOICE("--batching", NULL, NULL, "forwards of the bench items", &o.batching, "single|budget|tree"),
        CLI_INT("--threads", "N", "0 = online CPUs", NULL, "CPU compute threads", &o.threads, 0, 1 << 16),
        CLI_SW("--no-prefix-cache", "do not precompute the template prefixes", &o.no_prefix_cache),
        CLI_DEVICE_ROWS(&o.dev),
    };
    int status = cli_parse(&cli_doc_export, opts, CLI_N(opts), NULL, argc, argv);
    if (status) return status < 0 ? 0 : status;
    if (!o.ref || !o.inputs || !o.out) {
        cli_error("export", "--model REF, --inputs DIR and --out DIR are required (see basal export --help)");
        return 2;
    }
    if (bs_file_exists(o.out)) {
        fprintf(stderr, "%s exists; choose a new output path\n", o.out);
        return 1;
    }
    status = 1;
    bs_err e = {0};
    char *dir = NULL, *bench_path = path_in(o.inputs, "bench.jsonl"), *so_path = path_in(o.inputs, "systemone.jsonl");
    cli_jsonl bench = {0}, cases = {0};
    basal_session *ses = NULL;
    int created = 0;
    bs_buf bout, sout, man;
    bs_buf_init(&bout);
    bs_buf_init(&sout);
    bs_buf_init(&man);
    double t0 = bs_now_ms();
    if (!bench_path || !so_path) goto done;
    if (cli_hub_resolve("export", o.ref, NULL, &dir, &e) < 0) goto fail;
    if (cli_jsonl_read(bench_path, &bench, &e) < 0 || cli_jsonl_read(so_path, &cases, &e) < 0) goto fail;
    basal_options bo;
    basal_options_init(&bo);
    bo.threads = o.threads;
    bo.backend = o.dev.device;
    bo.dtype = o.dev.dtype;
    bo.gemm_table = o.dev.gemm_table;
    bo.no_prefix_cache = o.no_prefix_cache;
    if (basal_open(&ses, dir, &bo, &e) < 0) goto fail;
    const bs_basal_model *md = bs_session_model(ses);
    bs_letter_cache *lcp = bs_session_letters(ses);
    bs_runner *runp = bs_session_runner(ses);
    if (mkdir(o.out, 0777) < 0) {
        if (errno == EEXIST) fprintf(stderr, "%s exists; choose a new output path\n", o.out);
        else cli_error("export", "creating %s: %s", o.out, strerror(errno));
        goto done;
    }
    created = 1;
    bs_session_set_batching(ses, !strcmp(o.batching, "tree")     ? BS_BATCH_TREE
                                 : !strcmp(o.batching, "budget") ? BS_BATCH_BUDGET
                                                                 : BS_BATCH_SINGLE);
    if (export_bench(&bench, md, lcp, runp, &bout, &e) < 0 || write_in(o.out, "bench.jsonl", &bout, &e) < 0) goto fail;
    double bench_s = (bs_now_ms() - t0) / 1000.0;
    fprintf(stderr, "bench: %zu items (%s batching)\n", bench.n, o.batching);
    for (size_t i = 0; i < cases.n; i++) {
        if (export_case(cases.v[i], md, lcp, runp, &sout, &e) < 0) goto fail;
        const bj_value *id = bj_get(cases.v[i], "id");
        fprintf(stderr, "systemone %s\n", id && id->type == BJ_STRING ? id->str : "?");
    }
    if (write_in(o.out, "systemone.jsonl", &sout, &e) < 0) goto fail;
    static const char *const tnames[BS_N_TYPES] = {"choice", "noul", "score", "multi", "act"};
    const bs_backend *be = md->model.backend;
    bs_buf_puts(&man, "{\"tool\":\"basal export\",\"inputs\":");
    bs_resp_cstr(&man, o.inputs);
    bs_buf_puts(&man, ",\"model\":");
    bs_resp_cstr(&man, md->name);
    bs_buf_puts(&man, ",\"model_dir\":");
    bs_resp_cstr(&man, dir);
    bs_buf_puts(&man, ",\"backend\":");
    if (be) {
        bs_resp_cstr(&man, be->name);
    } else {
        char desc[160];
        snprintf(desc, sizeof desc, "cpu %s (%d threads, kernel %s)",
                 md->model.compute == BS_COMPUTE_BF16 ? "bf16" : "f32", bs_session_threads(ses),
                 bs_gemm_kernel_name(bs_gemm_kernel()));
        bs_resp_cstr(&man, desc);
    }
    bs_buf_puts(&man, ",\"bench_batching\":");
    bs_resp_cstr(&man, o.batching);
    bs_buf_printf(&man, ",\"request_batching\":\"tree\",\"items_batching\":\"single\",\"prefix_cache\":%s,"
                        "\"host_math\":\"softmax, order average and calibration in f64\","
                        "\"calibration\":{\"temperatures\":{",
                  o.no_prefix_cache ? "false" : "true");
    for (int t = 0, first = 1; t < BS_N_TYPES; t++) {
        if (!md->calib.has_temp[t]) continue;
        bs_buf_printf(&man, "%s\"%s\":", first ? "" : ",", tnames[t]);
        bj_fmt_pyfloat(md->calib.temp[t], &man);
        first = 0;
    }
    bs_buf_puts(&man, "}},\"files_sha256\":{");
    if (put_files_sha256(&man, dir, &e) < 0) goto fail;
    bs_buf_puts(&man, "},\"weights_sha256\":");
    if (cli_weights_sha256(dir, &man, &e) != BS_OK) goto fail;
    bs_buf_printf(&man, ",\"bench_items\":%zu,\"systemone_cases\":%zu,\"bench_s\":", bench.n, cases.n);
    bj_fmt_pyfloat(bench_s, &man);
    bs_buf_puts(&man, ",\"total_s\":");
    bj_fmt_pyfloat((bs_now_ms() - t0) / 1000.0, &man);
    bs_buf_printf(&man, ",\"version\":\"%s\",\"git_commit\":\"%s\"}", BASAL_VERSION, cli_git_commit());
    if (man.oom) goto done;
    FILE *mf = NULL;
    char *mp = path_in(o.out, "manifest.json");
    if (mp && (mf = fopen(mp, "w"))) {
        cli_print_pretty(mf, man.data, man.len);
        if (fclose(mf) == 0) status = 0;
    }
    if (status) cli_error("export", "writing %s failed", mp ? mp : "manifest.json");
    free(mp);
    goto done;
fail:
    cli_error("export", "%s", e.msg);
done:
    if (status && created) { /* a failed export leaves no half-written directory behind */
        static const char *const files[] = {"bench.jsonl", "systemone.jsonl", "manifest.json"};
        for (size_t i = 0; i < 3; i++) {
            char *fp = path_in(o.out, files[i]);
            if (fp) unlink(fp);
            free(fp);
        }
        rmdir(o.out);
    }
    basal_close(ses);
    cli_jsonl_free(&bench);
    cli_jsonl_free(&cases);
    bs_buf_free(&bout);
    bs_buf_free(&sout);
    bs_buf_free(&man);
    free(dir);
    free(bench_path);
    free(so_path);
    return status;
}

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
            if (!jeq(bj_get(ro->items[k], of[f]), bj_get(oo->items[k], of[f])))
                bs_buf_printf(&d, "%s\"order %zu: %s\"", nd++ ? "," : "", k, of[f]);
    }
    static const char *const pf[] = {"prefix_len", "packed_len", "readout_cols"};
    for (size_t f = 0; f < 3; f++)
        if (!jeq(bj_get(bj_get(ref, "pack"), pf[f]), bj_get(bj_get(ours, "pack"), pf[f])))
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
    int rc = put_item_core(&b, p, it, m, NULL, 0, e);
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
    case_body(bj_get(c, "request"), m->name, &body);
    int rc = plan_body(&plan, &body, BS_DIALECT_SYSTEMONE, m, lc, &err, e);
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
    for (size_t i = 0; rc == 0 && i < plan_n_items(&plan); i++) {
        const bs_item *it = plan_item(&plan, i);
        name.len = 0;
        item_name(&name, &plan, it);
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
        fprintf(stderr, "%s exists; choose a new output path\n", out_path);
        return 1;
    }
    status = 1;
    bs_err e = {0};
    char *dir = NULL, *bench_path = path_in(refdir, "bench.jsonl"), *so_path = path_in(refdir, "systemone.jsonl");
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
        put_field(&tag, r, "index");
        bs_buf_putc(&tag, 0);
        body.len = 0;
        err.len = 0;
        bs_plan plan;
        memset(&plan, 0, sizeof plan);
        int rc = cli_bench_item_body(r, m.name, &body, &e);
        if (rc == 0) rc = plan_body(&plan, &body, BS_DIALECT_SYSTEMONE, &m, &lc, &err, &e);
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
