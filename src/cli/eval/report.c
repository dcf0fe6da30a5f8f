/* The JSON report of `basal eval` (schema: docs/eval-report.schema.json),
 * the text summary, upstream basal-run's summary line and the per-decision
 * lines (cli/eval/eval.h). Numbers are float64 printed with the shortest
 * digits that read back to the same value; a metric without decisions is
 * null. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "basal.h"
#include "cli/cli.h"
#include "cli/eval/eval.h"
#include "protocol/respjson.h"

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

double ev_latency_p50(const ev_set *s, const ev_result *r) {
    double *v = malloc((s->n_items ? s->n_items : 1) * sizeof *v);
    size_t n = 0;
    for (size_t i = 0; v && i < s->n_items; i++)
        if (!isnan(r->latency_ms[i])) v[n++] = r->latency_ms[i];
    double med = NAN;
    if (n) { /* Python's statistics.median: the mean of the two middle values of an even count */
        qsort(v, n, sizeof *v, cmp_double);
        med = n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
    }
    free(v);
    return med;
}

static size_t answered_items(const ev_set *s, const ev_result *r) {
    size_t n = 0;
    for (size_t i = 0; i < s->n_items; i++) n += s->items[i].n_targets && r->ok[s->items[i].first_target];
    return n;
}

/* Which types the set has decisions of, in bs_qtype order. */
static int type_present(const ev_set *s, int type) {
    for (size_t g = 0; g < s->n_groups; g++)
        if ((int)s->groups[g].type == type) return 1;
    return 0;
}

static void put_key(bs_buf *b, const char *k) {
    bs_resp_cstr(b, k);
    bs_buf_putc(b, ':');
}

static void put_num(bs_buf *b, const char *k, double v) {
    put_key(b, k);
    bs_resp_double(b, v);
    bs_buf_putc(b, ',');
}

static void put_opt_str(bs_buf *b, const char *s) {
    if (s) bs_resp_cstr(b, s);
    else bs_buf_puts(b, "null");
}

static void put_metrics(bs_buf *b, const ev_metrics *m) {
    bs_buf_printf(b, "{\"n\":%zu,", m->n);
    put_num(b, "accuracy", m->accuracy);
    put_num(b, "macro_f1", m->macro_f1);
    bs_buf_printf(b, "\"f1_classes\":%zu,", m->f1_classes);
    put_num(b, "log_loss", m->log_loss);
    put_num(b, "brier", m->brier);
    put_num(b, "ece", m->ece);
    put_num(b, "mean_confidence", m->mean_confidence);
    bs_buf_puts(b, "\"bins\":[");
    for (int i = 0; i < EV_BINS; i++) {
        bs_buf_puts(b, i ? ",{" : "{");
        put_num(b, "lo", (double)i / EV_BINS);
        put_num(b, "hi", (double)(i + 1) / EV_BINS);
        bs_buf_printf(b, "\"count\":%zu,", m->bin_n[i]);
        put_num(b, "mean_confidence", m->bin_conf[i]);
        put_key(b, "accuracy");
        bs_resp_double(b, m->bin_acc[i]);
        bs_buf_putc(b, '}');
    }
    bs_buf_puts(b, "]}");
}

static void put_group_id(bs_buf *b, const ev_group *g) {
    put_key(b, "question");
    bs_resp_cstr(b, g->question);
    bs_buf_puts(b, ",\"label\":");
    put_opt_str(b, g->label);
    bs_buf_puts(b, ",\"type\":");
    bs_resp_cstr(b, ev_type_name(g->type));
    bs_buf_puts(b, ",\"classes\":[");
    for (size_t c = 0; c < g->n_classes; c++) {
        bs_buf_puts(b, c ? "," : "");
        bs_resp_cstr(b, g->classes[c]);
    }
    bs_buf_putc(b, ']');
}

static int put_questions(bs_buf *b, const ev_set *s, const ev_result *r, bs_err *e) {
    bs_buf_puts(b, "\"questions\":[");
    for (size_t g = 0; g < s->n_groups; g++) {
        const ev_group *gr = &s->groups[g];
        ev_metrics m;
        size_t *cm = calloc(gr->n_classes * gr->n_classes, sizeof *cm);
        if (!cm || ev_metrics_compute(s, r, -1, g, &m, e) < 0) {
            free(cm);
            return bs_fail(e, BS_ENOMEM, "out of memory");
        }
        ev_confusion(s, r, g, cm);
        bs_buf_puts(b, g ? ",{" : "{");
        put_group_id(b, gr);
        bs_buf_puts(b, ",\"confusion\":[");
        for (size_t i = 0; i < gr->n_classes; i++) {
            bs_buf_puts(b, i ? ",[" : "[");
            for (size_t k = 0; k < gr->n_classes; k++) bs_buf_printf(b, k ? ",%zu" : "%zu", cm[i * gr->n_classes + k]);
            bs_buf_putc(b, ']');
        }
        bs_buf_puts(b, "],\"metrics\":");
        put_metrics(b, &m);
        bs_buf_putc(b, '}');
        free(cm);
    }
    bs_buf_putc(b, ']');
    return BS_OK;
}

static void put_errors(bs_buf *b, const ev_set *s, const ev_result *r) {
    bs_buf_puts(b, "\"errors\":[");
    for (size_t i = 0; i < r->n_errors; i++) {
        const ev_error *x = &r->errors[i];
        bs_buf_puts(b, i ? ",{\"item\":" : "{\"item\":");
        bs_resp_cstr(b, s->items[x->item].where);
        bs_buf_printf(b, ",\"id\":%s,\"status\":", s->items[x->item].id);
        if (x->status) bs_buf_printf(b, "%ld", x->status);
        else bs_buf_puts(b, "null");
        bs_buf_puts(b, ",\"message\":");
        bs_resp_cstr(b, x->message);
        bs_buf_putc(b, '}');
    }
    bs_buf_putc(b, ']');
}

static int put_setting(bs_buf *b, const ev_report *rp, size_t k, bs_err *e) {
    const ev_set *s = rp->set;
    const ev_result *r = &rp->results[k];
    bs_buf_puts(b, "{\"label\":");
    bs_resp_cstr(b, r->label);
    bs_buf_puts(b, ",\"model\":");
    bs_resp_cstr(b, r->model);
    bs_buf_puts(b, ",\"orders\":");
    if (r->orders && !r->orders_mixed) bs_buf_printf(b, "%d", r->orders);
    else bs_buf_puts(b, "null");
    bs_buf_puts(b, ",\"dtype\":");
    put_opt_str(b, r->dtype);
    bs_buf_puts(b, ",\"calibration\":");
    put_opt_str(b, r->calibration);
    bs_buf_putc(b, ',');
    put_num(b, "seconds", r->seconds);
    put_num(b, "load_seconds", rp->url ? NAN : r->load_seconds);
    put_num(b, "items_per_s", r->seconds > 0 ? (double)s->n_items / r->seconds : NAN);
    put_num(b, "latency_p50_ms", ev_latency_p50(s, r));
    bs_buf_printf(b, "\"answered_items\":%zu,", answered_items(s, r));
    put_errors(b, s, r);
    bs_buf_putc(b, ',');
    put_num(b, "agreement_with_first", k ? ev_agreement(s, &rp->results[0], r) : NAN);
    ev_metrics m;
    if (ev_metrics_compute(s, r, -1, EV_ANY, &m, e) < 0) return BS_ENOMEM;
    bs_buf_puts(b, "\"overall\":");
    put_metrics(b, &m);
    bs_buf_puts(b, ",\"by_type\":{");
    int first = 1;
    for (int t = 0; t < EV_N_TYPES; t++) {
        if (!type_present(s, t)) continue;
        if (ev_metrics_compute(s, r, t, EV_ANY, &m, e) < 0) return BS_ENOMEM;
        bs_buf_puts(b, first ? "" : ",");
        first = 0;
        put_key(b, ev_type_name((bs_qtype)t));
        put_metrics(b, &m);
    }
    bs_buf_puts(b, "},");
    int rc = put_questions(b, s, r, e);
    bs_buf_putc(b, '}');
    return rc;
}

static void put_definitions(bs_buf *b) {
    bs_buf_puts(b, "\"definitions\":{"
                   "\"prediction\":\"the first option of maximal probability\","
                   "\"distribution\":\"choice, score and act: the answer's probabilities; noul: (noul, 1 - noul); "
                   "multi: (P, 1 - P) per label\","
                   "\"confidence\":\"top-label: the probability of the prediction (not the answer's confidence field)\","
                   "\"accuracy\":\"share of decisions whose prediction is the expected option\","
                   "\"macro_f1\":\"mean over classes of 2TP/(2TP+FP+FN); a class is a (question, answer key) pair "
                   "expected or predicted at least once in the scope\","
                   "\"log_loss\":\"mean of -ln(max(p[expected], log_loss_clip))\",");
    put_num(b, "log_loss_clip", EV_LOG_CLIP);
    bs_buf_puts(b, "\"brier\":\"mean over decisions of the sum over the options of (p[i] - [i = expected])^2 "
                   "(multi-class, 0..2; twice the binary Brier score for two options)\","
                   "\"ece\":\"top-label expected calibration error: sum over bins of (n_bin / n) * "
                   "|accuracy_bin - mean confidence_bin|, bins b/ece_bins < confidence <= (b+1)/ece_bins "
                   "(bin 0 also takes 0)\",");
    bs_buf_printf(b, "\"ece_bins\":%d}", EV_BINS);
}

int ev_write_json(const ev_report *rp, bs_buf *b, bs_err *e) {
    const ev_set *s = rp->set;
    bs_buf_puts(b, "{\"kind\":\"basal-eval-report\",\"schema_version\":1,\"basal_version\":\"" BASAL_VERSION
                   "\",\"git_commit\":");
    bs_resp_cstr(b, cli_git_commit());
    bs_buf_puts(b, ",\"created\":");
    bs_resp_cstr(b, rp->created);
    bs_buf_puts(b, ",\"source\":{\"kind\":");
    bs_resp_cstr(b, rp->source);
    bs_buf_puts(b, ",\"model\":");
    put_opt_str(b, rp->model_dir);
    bs_buf_puts(b, ",\"url\":");
    put_opt_str(b, rp->url);
    bs_buf_puts(b, "},");
    put_definitions(b);
    bs_buf_puts(b, ",\"inputs\":[");
    for (size_t i = 0; i < s->n_inputs; i++) {
        const ev_input *in = &s->inputs[i];
        bs_buf_puts(b, i ? ",{\"path\":" : "{\"path\":");
        bs_resp_cstr(b, in->path);
        bs_buf_printf(b, ",\"sha256\":\"%s\",\"lines\":%zu,\"items\":%zu,\"graded\":%zu,\"ungraded\":%zu}", in->sha256,
                      in->lines, in->items, in->graded, in->ungraded);
    }
    bs_buf_printf(b, "],\"items\":%zu,\"ungraded\":%zu,\"decisions\":%zu,\"settings\":[", s->n_items, s->n_ungraded,
                  s->n_targets);
    for (size_t k = 0; k < rp->n_results; k++) {
        bs_buf_puts(b, k ? "," : "");
        if (put_setting(b, rp, k, e) < 0) return bs_fail(e, BS_ENOMEM, "out of memory");
    }
    bs_buf_puts(b, "]}\n");
    return b->oom ? bs_fail(e, BS_ENOMEM, "out of memory") : BS_OK;
}

/* ---- text ---- */

static void text_num(bs_buf *b, double v) {
    if (isnan(v)) bs_buf_printf(b, " %9s", "-");
    else bs_buf_printf(b, " %9.4f", v);
}

static void text_row(bs_buf *b, const char *name, const ev_metrics *m, double agree) {
    bs_buf_printf(b, "  %-18s %7zu", name, m->n);
    text_num(b, m->accuracy);
    text_num(b, m->macro_f1);
    text_num(b, m->log_loss);
    text_num(b, m->brier);
    text_num(b, m->ece);
    text_num(b, agree);
    bs_buf_putc(b, '\n');
}

int ev_write_text(const ev_report *rp, bs_buf *b, bs_err *e) {
    const ev_set *s = rp->set;
    bs_buf_printf(b, "%zu graded items, %zu decisions", s->n_items, s->n_targets);
    if (s->n_ungraded) bs_buf_printf(b, " (%zu items without an expected answer not evaluated)", s->n_ungraded);
    bs_buf_printf(b, "\n  %-18s %7s %9s %9s %9s %9s %9s %9s\n", "", "n", "accuracy", "macro-F1", "log-loss", "Brier",
                  "ECE", "agree");
    for (size_t k = 0; k < rp->n_results; k++) {
        const ev_result *r = &rp->results[k];
        ev_metrics m;
        bs_buf_printf(b, "%s (%s", r->label, r->model);
        if (rp->url && r->orders) bs_buf_printf(b, ", orders %d%s", r->orders, r->orders_mixed ? " and others" : "");
        if (rp->url && r->dtype) bs_buf_printf(b, ", dtype %s", r->dtype);
        bs_buf_printf(b, "; %.2f s, %zu errors)\n", r->seconds, r->n_errors);
        if (ev_metrics_compute(s, r, -1, EV_ANY, &m, e) < 0) return BS_ENOMEM;
        double agree = k ? ev_agreement(s, &rp->results[0], r) : NAN;
        text_row(b, "all", &m, agree);
        for (int t = 0; t < EV_N_TYPES; t++) {
            if (!type_present(s, t)) continue;
            if (ev_metrics_compute(s, r, t, EV_ANY, &m, e) < 0) return BS_ENOMEM;
            text_row(b, ev_type_name((bs_qtype)t), &m, NAN);
        }
        for (size_t i = 0; i < r->n_errors && i < 5; i++)
            bs_buf_printf(b, "  error: %s: %s\n", s->items[r->errors[i].item].where, r->errors[i].message);
        if (r->n_errors > 5) bs_buf_printf(b, "  ... and %zu more errors (in the JSON report)\n", r->n_errors - 5);
    }
    bs_buf_printf(b, "agree: share of the decisions predicted as in the first setting; confidence bins: %d\n", EV_BINS);
    return b->oom ? bs_fail(e, BS_ENOMEM, "out of memory") : BS_OK;
}

/* Python's json.dumps(round(x, digits)) for the values basal-run rounds. */
static void put_rounded(bs_buf *b, double x, int digits) {
    if (!isfinite(x)) {
        bs_buf_puts(b, "null");
        return;
    }
    char t[64];
    snprintf(t, sizeof t, "%.*f", digits, x);
    bj_fmt_pyfloat(strtod(t, NULL), b);
}

int ev_write_summary_json(const ev_report *rp, bs_buf *b, bs_err *e) {
    const ev_set *s = rp->set;
    for (size_t k = 0; k < rp->n_results; k++) {
        const ev_result *r = &rp->results[k];
        ev_metrics m;
        if (ev_metrics_compute(s, r, -1, EV_ANY, &m, e) < 0) return BS_ENOMEM;
        bs_buf_puts(b, "{\"setting\": ");
        bs_resp_cstr(b, r->label);
        bs_buf_printf(b, ", \"items\": %zu, \"errors\": %zu, \"seconds\": ", s->n_items, s->n_items - answered_items(s, r));
        put_rounded(b, r->seconds, 2);
        bs_buf_puts(b, ", \"items_per_s\": ");
        put_rounded(b, r->seconds > 0 ? (double)s->n_items / r->seconds : NAN, 1);
        bs_buf_puts(b, ", \"server_latency_p50_ms\": ");
        put_rounded(b, ev_latency_p50(s, r), 2);
        if (m.n) {
            bs_buf_puts(b, ", \"accuracy\": ");
            put_rounded(b, m.accuracy, 4);
        }
        bs_buf_puts(b, "}\n");
    }
    return b->oom ? bs_fail(e, BS_ENOMEM, "out of memory") : BS_OK;
}

/* ---- per decision ---- */

static void put_decision(bs_buf *b, const ev_set *s, const ev_result *r, size_t t) {
    const ev_target *x = &s->targets[t];
    const ev_group *g = &s->groups[x->group];
    const ev_item *it = &s->items[x->item];
    bs_buf_puts(b, "{\"setting\":");
    bs_resp_cstr(b, r->label);
    bs_buf_puts(b, ",\"item\":");
    bs_resp_cstr(b, it->where);
    bs_buf_printf(b, ",\"id\":%s,", it->id);
    put_group_id(b, g);
    bs_buf_puts(b, ",\"expected\":");
    bs_resp_cstr(b, x->keys[x->gold]);
    if (!r->ok[t]) {
        bs_buf_puts(b, ",\"predicted\":null,\"correct\":null,\"confidence\":null,\"probabilities\":null}\n");
        return;
    }
    const double *p = r->p + x->p_off;
    bs_buf_puts(b, ",\"predicted\":");
    bs_resp_cstr(b, x->keys[r->pred[t]]);
    bs_buf_printf(b, ",\"correct\":%s,\"confidence\":", r->pred[t] == x->gold ? "true" : "false");
    bs_resp_double(b, p[r->pred[t]]);
    bs_buf_puts(b, ",\"probabilities\":{");
    for (size_t i = 0; i < x->n_opts; i++) {
        bs_buf_puts(b, i ? "," : "");
        put_key(b, x->keys[i]);
        bs_resp_double(b, p[i]);
    }
    bs_buf_puts(b, "}}\n");
}

void ev_write_decisions(const ev_report *rp, bs_buf *b) {
    for (size_t k = 0; k < rp->n_results; k++)
        for (size_t t = 0; t < rp->set->n_targets; t++) put_decision(b, rp->set, &rp->results[k], t);
}
