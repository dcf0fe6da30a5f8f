/* `basal export` (spec 06 §6): runs the bench items and System One requests
 * of an inputs directory through a basal_session and writes a
 * reference-format export (bench.jsonl, systemone.jsonl, manifest.json). A
 * bench item is asked as a /v1/systemone request (cli/bench_item.h), so it
 * goes through the one planning path of the server. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "api/session.h"
#include "base/sha256.h"
#include "base/util.h"
#include "cli/bench/item.h"
#include "cli/cli.h"
#include "cli/parity/items.h"
#include "engine/plan.h"
#include "engine/runner.h"
#include "protocol/pyjson.h"
#include "protocol/respjson.h"

/* ---------------------------------------------------------------- JSONL and JSON helpers */

static double num_of(const bj_value *v, int *ok) {
    *ok = v && v->type == BJ_NUMBER;
    return *ok ? strtod(v->str, NULL) : 0.0;
}

/* ---------------------------------------------------------------- bench items and requests */

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

/* One whole decision as the endpoint of dialect d gives it, through the
 * session: the 200 body (without usage.latency_ms) or the error body, in out.
 * Negative: a runtime failure. */
static int decide_body(basal_session *ses, const bs_buf *body, bs_dialect d, bs_buf *out, bs_err *e) {
    const char *req = body->data ? body->data : "";
    basal_result r;
    int rc = bs_session_decide_batch(ses, d, 1, &req, &body->len, &r, e);
    if (rc == 0) bs_buf_put(out, r.json, r.len);
    basal_result_free(&r);
    return rc;
}

/* max |served - items| over the items the served answer names (basal-rs
 * answer_vs_items_max_abs_prob_diff): noul as [v, 1 - v], else by key. */
static double served_diff(const bs_buf *answer, const bs_plan *p, const par_item_res *res) {
    bj_value *root = NULL;
    bs_err pe = {0};
    double d = 0;
    if (!answer->data || bj_parse(answer->data, answer->len, NULL, &root, &pe) < 0) return d;
    const bj_value *as = bj_get(root, "answers");
    bs_buf name;
    bs_buf_init(&name);
    for (size_t i = 0; as && i < par_plan_n_items(p); i++) {
        const bs_item *it = par_plan_item(p, i);
        const bs_question *q = &p->req->questions[it->question];
        name.len = 0;
        par_item_name(&name, p, it);
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
static int export_case(const bj_value *c, basal_session *ses, bs_buf *line, bs_err *e) {
    const bs_basal_model *m = bs_session_model(ses);
    bs_letter_cache *lc = bs_session_letters(ses);
    bs_buf body, err, answer;
    bs_buf_init(&body);
    bs_buf_init(&err);
    bs_buf_init(&answer);
    bs_plan plan;
    par_item_res *res = NULL;
    par_case_body(bj_get(c, "request"), m->name, &body);
    bs_buf_puts(line, "{\"id\":");
    par_put_field(line, c, "id");
    bs_buf_puts(line, ",\"source\":");
    par_put_field(line, c, "source");
    bs_buf_puts(line, ",\"request\":");
    par_put_field(line, c, "request");
    int rc = par_plan_body(&plan, &body, BS_DIALECT_SYSTEMONE, m, lc, &err, e);
    if (rc == 1) {
        bs_buf_puts(line, ",\"items\":[],\"error\":");
        bs_buf_put(line, err.data, err.len);
        rc = 0;
    } else if (rc == 0) {
        /* the items one per forward, both orders packed (basal-rs Batching::Single) */
        bs_plan *pp = &plan;
        bs_reply rep, *rp = &rep;
        bs_reply_init(&rep);
        bs_session_set_batching(ses, BS_BATCH_SINGLE);
        rc = bs_runner_run_all(bs_session_runner(ses), &pp, 1, lc, &rp, e);
        if (rc == 0 && rep.body.len) rc = bs_fail(e, BS_EINVAL, "a finalist prompt was refused: %s", rep.body.data);
        bs_reply_free(&rep);
        size_t n = par_plan_n_items(&plan);
        if (rc == 0 && !(res = calloc(n ? n : 1, sizeof *res))) rc = bs_fail(e, BS_ENOMEM, "out of memory");
        bs_buf_puts(line, ",\"items\":[");
        bs_buf tmp;
        bs_buf_init(&tmp);
        for (size_t i = 0; rc == 0 && i < n; i++) {
            const bs_item *it = par_plan_item(&plan, i);
            const bs_question *q = &plan.req->questions[it->question];
            if (i) bs_buf_putc(line, ',');
            bs_buf_puts(line, "{\"name\":");
            tmp.len = 0;
            par_item_name(&tmp, &plan, it);
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
            rc = par_put_item_core(line, &plan, it, m, &res[i], 0, e);
            bs_buf_putc(line, '}');
        }
        bs_buf_free(&tmp);
        bs_buf_putc(line, ']');
        /* the served answer: the request as the server batches it */
        bs_session_set_batching(ses, BS_BATCH_TREE);
        if (rc == 0) rc = decide_body(ses, &body, BS_DIALECT_SYSTEMONE, &answer, e);
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
        bs_session_set_batching(ses, BS_BATCH_TREE);
        rc = decide_body(ses, &body, BS_DIALECT_BASAL, &answer, e);
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
static int export_bench(const cli_jsonl *recs, basal_session *ses, bs_buf *out, bs_err *e) {
    const bs_basal_model *m = bs_session_model(ses);
    bs_letter_cache *lc = bs_session_letters(ses);
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
        rc = par_plan_body(&plans[i], &body, BS_DIALECT_SYSTEMONE, m, lc, &err, e);
        if (rc == 1) rc = bs_fail(e, BS_EINVAL, "bench item %zu rejected: %.*s", i + 1, (int)err.len, err.data);
        else if (rc == 0 && plans[i].n_items != 1) rc = bs_fail(e, BS_EINVAL, "bench item %zu: not one readout", i + 1);
    }
    /* the items' own readouts (06 §6 records), not decisions: run as planned */
    if (rc == 0) rc = bs_runner_run_all(bs_session_runner(ses), pp, n, lc, NULL, e);
    for (size_t i = 0; rc == 0 && i < n; i++) {
        const bj_value *r = recs->v[i];
        const bs_item *it = &plans[i].items[0];
        static const char *const fields[] = {"index", "source", "line", "id", "type", "state", "question", "options",
                                             "gold"};
        for (size_t f = 0; f < sizeof fields / sizeof *fields; f++) {
            bs_buf_printf(out, "%s\"%s\":", f ? "," : "{", fields[f]);
            par_put_field(out, r, fields[f]);
        }
        bs_buf_printf(out, ",\"lang\":\"%s\",", bs_lang_name(plans[i].req->questions[0].lang));
        par_item_res res;
        if ((rc = par_put_item_core(out, &plans[i], it, m, &res, 1, e)) < 0) break;
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

/* "name":"sha256",… of the model directory's small files that define its
 * answers (those present), for the manifest (06 §6: SHA-256 of the model's
 * files; the weights follow as weights_sha256). */
static int put_files_sha256(bs_buf *b, const char *dir, bs_err *e) {
    static const char *const names[] = {"config.json", "tokenizer.json", "tokenizer_config.json", "basal.json",
                                        "CALIBRATION.json"};
    int first = 1;
    for (size_t i = 0; i < sizeof names / sizeof *names; i++) {
        char *fp = par_path_in(dir, names[i]);
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

/* manifest.json of the export: the tool, the model and its backend, the
 * batching, the calibration, the SHA-256 of the model's files and the times.
 * Negative: a failure in e (the caller reports it); an allocation failure
 * shows as man->oom. */
static int put_manifest(bs_buf *man, const export_opts *o, basal_session *ses, const char *dir, size_t n_bench,
                        size_t n_cases, double bench_s, double t0, bs_err *e) {
    const bs_basal_model *md = bs_session_model(ses);
    static const char *const tnames[BS_N_TYPES] = {"choice", "noul", "score", "multi", "act"};
    const bs_backend *be = md->model.backend;
    bs_buf_puts(man, "{\"tool\":\"basal export\",\"inputs\":");
    bs_resp_cstr(man, o->inputs);
    bs_buf_puts(man, ",\"model\":");
    bs_resp_cstr(man, md->name);
    bs_buf_puts(man, ",\"model_dir\":");
    bs_resp_cstr(man, dir);
    bs_buf_puts(man, ",\"backend\":");
    if (be) {
        bs_resp_cstr(man, be->name);
    } else {
        char desc[160];
        snprintf(desc, sizeof desc, "cpu %s (%d threads, kernel %s)",
                 bs_model_dtype_name(&md->model), bs_session_threads(ses),
                 bs_gemm_kernel_name(bs_gemm_kernel()));
        bs_resp_cstr(man, desc);
    }
    bs_buf_puts(man, ",\"bench_batching\":");
    bs_resp_cstr(man, o->batching);
    bs_buf_printf(man, ",\"request_batching\":\"tree\",\"items_batching\":\"single\",\"prefix_cache\":%s,"
                       "\"host_math\":\"softmax, order average and calibration in f64\","
                       "\"calibration\":{\"temperatures\":{",
                  o->no_prefix_cache ? "false" : "true");
    for (int t = 0, first = 1; t < BS_N_TYPES; t++) {
        if (!md->calib.has_temp[t]) continue;
        bs_buf_printf(man, "%s\"%s\":", first ? "" : ",", tnames[t]);
        bj_fmt_pyfloat(md->calib.temp[t], man);
        first = 0;
    }
    bs_buf_puts(man, "}},\"files_sha256\":{");
    if (put_files_sha256(man, dir, e) < 0) return -1;
    bs_buf_puts(man, "},\"weights_sha256\":");
    if (cli_weights_sha256(dir, man, e) != BS_OK) return -1;
    bs_buf_printf(man, ",\"bench_items\":%zu,\"systemone_cases\":%zu,\"bench_s\":", n_bench, n_cases);
    bj_fmt_pyfloat(bench_s, man);
    bs_buf_puts(man, ",\"total_s\":");
    bj_fmt_pyfloat((bs_now_ms() - t0) / 1000.0, man);
    bs_buf_printf(man, ",\"version\":\"%s\",\"git_commit\":\"%s\"}", BASAL_VERSION, cli_git_commit());
    return BS_OK;
}

/* manifest.json into the export directory, pretty-printed. 0 when written, else 1
 * (reported here). */
static int write_manifest(const char *out, const bs_buf *man) {
    int status = 1;
    FILE *mf = NULL;
    char *mp = par_path_in(out, "manifest.json");
    if (mp && (mf = fopen(mp, "w"))) {
        cli_print_pretty(mf, man->data, man->len);
        if (fclose(mf) == 0) status = 0;
    }
    if (status) cli_error("export", "writing %s failed", mp ? mp : "manifest.json");
    free(mp);
    return status;
}

/* Removes what a failed export wrote, and its directory. */
static void remove_export(const char *out) {
    static const char *const files[] = {"bench.jsonl", "systemone.jsonl", "manifest.json"};
    for (size_t i = 0; i < 3; i++) {
        char *fp = par_path_in(out, files[i]);
        if (fp) unlink(fp);
        free(fp);
    }
    rmdir(out);
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
        cli_error("export", "%s exists; choose a new output path", o.out);
        return 1;
    }
    status = 1;
    bs_err e = {0};
    char *dir = NULL, *bench_path = par_path_in(o.inputs, "bench.jsonl"), *so_path = par_path_in(o.inputs, "systemone.jsonl");
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
    cli_device_apply(&o.dev, &bo);
    bo.no_prefix_cache = o.no_prefix_cache;
    if (basal_open(&ses, dir, &bo, &e) < 0) goto fail;
    if (mkdir(o.out, 0777) < 0) {
        if (errno == EEXIST) cli_error("export", "%s exists; choose a new output path", o.out);
        else cli_error("export", "creating %s: %s", o.out, strerror(errno));
        goto done;
    }
    created = 1;
    bs_session_set_batching(ses, !strcmp(o.batching, "tree")     ? BS_BATCH_TREE
                                 : !strcmp(o.batching, "budget") ? BS_BATCH_BUDGET
                                                                 : BS_BATCH_SINGLE);
    if (export_bench(&bench, ses, &bout, &e) < 0 || write_in(o.out, "bench.jsonl", &bout, &e) < 0) goto fail;
    double bench_s = (bs_now_ms() - t0) / 1000.0;
    fprintf(stderr, "bench: %zu items (%s batching)\n", bench.n, o.batching);
    for (size_t i = 0; i < cases.n; i++) {
        if (export_case(cases.v[i], ses, &sout, &e) < 0) goto fail;
        const bj_value *id = bj_get(cases.v[i], "id");
        fprintf(stderr, "systemone %s\n", id && id->type == BJ_STRING ? id->str : "?");
    }
    if (write_in(o.out, "systemone.jsonl", &sout, &e) < 0) goto fail;
    if (put_manifest(&man, &o, ses, dir, bench.n, cases.n, bench_s, t0, &e) < 0) goto fail;
    if (man.oom) goto done;
    status = write_manifest(o.out, &man);
    goto done;
fail:
    cli_error("export", "%s", e.msg);
done:
    if (status && created) remove_export(o.out); /* a failed export leaves no half-written directory behind */
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

