/* `basal lens` (issue 33): the logit lens of one /v1/systemone request —
 * every question's letter distribution of every option order after every
 * layer — through basal_lens of the public session API (include/basal.h), as
 * the lens document (JSON) or a table per readout and order (text). */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api/session.h"
#include "basal.h"
#include "cli/cli.h"

typedef struct {
    const char *model_dir, *request, *format, *dtype, *readout;
    const char *pos[1];
    int threads;
    cli_decision knobs;
} opts_t;

const cli_doc cli_doc_lens = {
    "lens", "--model REF [FILE|-] [--format json|text] [options]",
    "logit lens: every question's letter probabilities after every layer",
    "FILE (or --request FILE) is a /v1/systemone request body; - or none reads stdin.\n"
    "After every layer the hidden state at each prompt's readout token goes through the final\n"
    "RMSNorm and the option letters' rows of the output head, in the request's own forward:\n"
    "the last layer is the served uncalibrated distribution bit for bit. json prints the lens\n"
    "document (README \"Logit lens\"; its \"answer\" is what `basal decide` prints); text prints,\n"
    "per question readout and option order, the prompt's parts with their token counts and a\n"
    "table of layer x letter probability, then the order average by option.\n"
    "Runs on the CPU backend. Exit status: 0; 2 for a usage error or a request the endpoint\n"
    "refuses (its error body on stdout); 1 for a runtime failure (model load, I/O).\n",
};

static int parse_opts(int argc, char **argv, opts_t *o) {
    memset(o, 0, sizeof *o);
    o->format = "json";
    o->dtype = "auto";
    o->readout = "f32";
    const cli_opt opts[] = {
        CLI_MODEL("model directory or reference (owner/name[@revision], mini, 4.5B, max; required)", &o->model_dir),
        CLI_STR("--request", "FILE|-", "-", NULL, "the request JSON (the same as the FILE argument)", &o->request),
        CLI_CHOICE("--format", NULL, NULL, "json: the lens document; text: a table per question and order",
                   &o->format, "json|text"),
        CLI_CHOICE("--dtype", NULL, NULL, "CPU compute mode (auto = f32)", &o->dtype, "auto|f32|bf16|int8w|int8"),
        CLI_INT("--threads", "N", "0 = online CPUs", NULL, "CPU compute threads", &o->threads, 0, 1 << 16),
        CLI_CHOICE("--readout", NULL, NULL, "bf16 rounds each letter logit to bf16 (diagnostic, as decide's)",
                   &o->readout, "f32|bf16"),
        CLI_DECISION_ROWS(&o->knobs),
    };
    cli_pos pos = {o->pos, 0, 1};
    int rc = cli_parse(&cli_doc_lens, opts, CLI_N(opts), &pos, argc, argv);
    if (rc) return rc;
    if (!o->model_dir) {
        cli_error("lens", "--model REF is required (see basal lens --help)");
        return 2;
    }
    if (pos.n && o->request) {
        cli_error("lens", "give the request once: FILE or --request FILE, not both");
        return 2;
    }
    if (pos.n) o->request = o->pos[0];
    if (!o->request) o->request = "-";
    return 0;
}

/* ---- text ---- */

static const char *str_or(json_t *v) {
    const char *s = json_string_value(v);
    return s ? s : "?";
}

static const char *str_at(json_t *a, size_t i) { return str_or(json_array_get(a, i)); }

static const char *str_of(json_t *o, const char *key) { return str_or(json_object_get(o, key)); }

static int col_width(json_t *heads) {
    int w = 9;
    for (size_t i = 0; i < json_array_size(heads); i++) {
        int n = (int)strlen(str_at(heads, i));
        if (n > w) w = n;
    }
    return w;
}

/* rows: [layers][k] numbers (or null rows); heads: the k column heads. */
static void put_table(FILE *f, json_t *rows, json_t *heads) {
    int w = col_width(heads);
    fprintf(f, "    %5s", "layer");
    for (size_t i = 0; i < json_array_size(heads); i++) fprintf(f, "  %*s", w, str_at(heads, i));
    fputc('\n', f);
    for (size_t l = 0; l < json_array_size(rows); l++) {
        json_t *r = json_array_get(rows, l);
        fprintf(f, "    %5zu", l + 1);
        for (size_t i = 0; i < json_array_size(heads); i++) {
            json_t *v = json_array_get(r, i);
            if (json_is_number(v)) fprintf(f, "  %*.6f", w, json_number_value(v));
            else fprintf(f, "  %*s", w, "-");
        }
        fputc('\n', f);
    }
}

static void put_order(FILE *f, json_t *od, int n_orders) {
    int o = (int)json_integer_value(json_object_get(od, "order"));
    fprintf(f, "  order %d of %d (%s), %lld tokens:", o + 1, n_orders, o ? "reversed" : "original",
            (long long)json_integer_value(json_object_get(od, "tokens")));
    /* tokens per kind of part, in the order template, state, question, options */
    static const char *const kinds[] = {"template", "state", "question", "options"};
    for (int k = 0; k < 4; k++) {
        long long t = 0;
        json_t *parts = json_object_get(od, "parts");
        for (size_t i = 0; i < json_array_size(parts); i++) {
            json_t *p = json_array_get(parts, i);
            if (!strcmp(str_of(p, "part"), kinds[k]))
                t += json_integer_value(json_object_get(p, "tokens"));
        }
        fprintf(f, "%s %s %lld", k ? "," : "", kinds[k], t);
    }
    fputc('\n', f);
    json_t *letters = json_object_get(od, "letters"), *options = json_object_get(od, "options");
    json_t *heads = json_array();
    for (size_t i = 0; i < json_array_size(letters); i++) {
        char h[512];
        snprintf(h, sizeof h, "%s=%s", str_at(letters, i), str_at(options, i));
        json_array_append_new(heads, json_string(h));
    }
    put_table(f, json_object_get(od, "probabilities"), heads);
    json_decref(heads);
}

static void put_readout(FILE *f, json_t *q, json_t *ro, size_t i, size_t n) {
    const char *kind = str_of(ro, "kind");
    fprintf(f, "question %s (%s, %s)", str_of(q, "id"),
            str_of(q, "type"), str_of(q, "lang"));
    if (!strcmp(kind, "label")) fprintf(f, ", label %s", str_of(ro, "label"));
    else if (!strcmp(kind, "group"))
        fprintf(f, ", round-1 group %lld", (long long)json_integer_value(json_object_get(ro, "group")));
    else if (!strcmp(kind, "final")) fputs(", finalists (round 2)", f);
    if (n > 1) fprintf(f, " [readout %zu of %zu]", i + 1, n);
    fputc('\n', f);
    json_t *orders = json_object_get(ro, "orders");
    for (size_t o = 0; o < json_array_size(orders); o++) put_order(f, json_array_get(orders, o), (int)json_array_size(orders));
    json_t *keys = json_object_get(ro, "keys");
    fprintf(f, "  %s, by option:\n", json_array_size(orders) > 1 ? "mean of the orders" : "the order");
    put_table(f, json_object_get(ro, "mean"), keys);
    json_t *cal = json_object_get(ro, "calibrated");
    if (json_is_array(cal)) {
        fprintf(f, "  served (calibrated, T = %g):", json_number_value(json_object_get(ro, "temperature")));
        for (size_t k = 0; k < json_array_size(cal); k++)
            fprintf(f, " %s %.6f", str_at(keys, k), json_number_value(json_array_get(cal, k)));
        fputc('\n', f);
    }
    fputc('\n', f);
}

static int put_text(FILE *f, const char *doc, size_t len) {
    json_error_t je;
    json_t *d = json_loadb(doc, len, 0, &je);
    if (!d) {
        cli_error("lens", "the lens document is not valid JSON (%s); this is a bug", je.text);
        return 1;
    }
    fprintf(f, "%s · %s · %lld layers · %lld option order(s)\n\n", str_of(d, "model"),
            str_of(d, "dtype"), (long long)json_integer_value(json_object_get(d, "layers")),
            (long long)json_integer_value(json_object_get(d, "orders")));
    json_t *qs = json_object_get(d, "questions");
    for (size_t qi = 0; qi < json_array_size(qs); qi++) {
        json_t *q = json_array_get(qs, qi), *ros = json_object_get(q, "readouts");
        if (!json_array_size(ros))
            fprintf(f, "question %s: answered without the model (one option)\n\n",
                    str_of(q, "id"));
        for (size_t i = 0; i < json_array_size(ros); i++) put_readout(f, q, json_array_get(ros, i), i, json_array_size(ros));
    }
    json_decref(d);
    return 0;
}

int cmd_lens(int argc, char **argv) {
    opts_t o;
    int status = parse_opts(argc, argv, &o);
    if (status) return status < 0 ? 0 : status;
    status = 1;
    bs_err e = {0};
    basal_session *s = NULL;
    basal_result r = {0};
    char *data = NULL;
    size_t len = 0;
    if (cli_read_request(o.request, &data, &len) < 0) goto done;
    basal_options bo;
    basal_options_init(&bo);
    bo.threads = o.threads;
    bo.backend = "cpu"; /* the lens reads the CPU forward's residual stream */
    bo.dtype = o.dtype;
    bo.readout_bf16 = !strcmp(o.readout, "bf16");
    cli_decision_apply(&o.knobs, &bo);
    if (basal_open(&s, o.model_dir, &bo, &e) < 0) {
        cli_error("lens", "%s", e.msg);
        goto done;
    }
    if ((status = cli_session_request("lens", s, 1, data, len, &r)) != 0) goto done;
    if (!strcmp(o.format, "text")) {
        status = put_text(stdout, r.json, r.len);
    } else {
        cli_print_pretty(stdout, r.json, r.len);
        status = 0;
    }
done:
    basal_result_free(&r);
    basal_close(s);
    free(data);
    return status;
}
