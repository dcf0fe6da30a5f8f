/* The HTML report of `basal eval` (cli/eval/eval.h): one self-contained page
 * (inline CSS and SVG, no script, no external resource) with the metric table
 * of every setting, per setting a reliability diagram (accuracy against
 * confidence over the 15 bins: one bar per bin, one point per non-empty bin
 * at its mean confidence) and a confidence histogram, the confusion matrix of
 * every question and the refused items. The numbers are those of the JSON
 * report, rounded to 4 decimals; the elements carry data- attributes with
 * what they show, for tests (tools/check-eval-html.mjs). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "basal.h"
#include "cli/eval/eval.h"

static void html_num(bs_buf *b, double v) {
    if (isnan(v)) bs_buf_puts(b, "-");
    else bs_buf_printf(b, "%.4f", v);
}

#define CW 440
#define CH 330
#define ML 56
#define MR 16
#define MT 30
#define MB 50
#define PW (CW - ML - MR)
#define PH (CH - MT - MB)

static double px(double x) { return ML + PW * x; }
static double py(double y, double ymax) { return CH - MB - PH * y / ymax; }

static void chart_open(bs_buf *b, const char *kind, size_t k, const char *title, const char *label) {
    bs_buf_printf(b, "<figure><svg id=\"%s-%zu\" class=\"chart %s\" data-setting=\"%zu\" viewBox=\"0 0 %d %d\" "
                     "width=\"%d\" height=\"%d\" xmlns=\"http://www.w3.org/2000/svg\" role=\"img\"><title>",
                  kind, k, kind, k, CW, CH, CW, CH);
    bs_buf_put_html(b, title);
    bs_buf_put_html(b, label);
    bs_buf_printf(b, "</title><text x=\"%d\" y=\"18\" class=\"ct\">", ML);
    bs_buf_put_html(b, title);
    bs_buf_puts(b, "</text>");
}

/* Gridlines and tick labels: x in [0, 1] by 0.2, y in [0, ymax] in 5 steps. */
static void axes(bs_buf *b, double ymax, const char *xlabel, const char *ylabel, int int_ticks) {
    for (int t = 0; t <= 5; t++) {
        double y = py(ymax * t / 5, ymax), x = px(t / 5.0);
        bs_buf_printf(b, "<line x1=\"%d\" x2=\"%d\" y1=\"%.1f\" y2=\"%.1f\" class=\"grid\"/>", ML, CW - MR, y, y);
        if (int_ticks) bs_buf_printf(b, "<text x=\"%d\" y=\"%.1f\" class=\"yt\">%.0f</text>", ML - 6, y + 4, ymax * t / 5);
        else bs_buf_printf(b, "<text x=\"%d\" y=\"%.1f\" class=\"yt\">%.1f</text>", ML - 6, y + 4, ymax * t / 5);
        bs_buf_printf(b, "<text x=\"%.1f\" y=\"%d\" class=\"xt\">%.1f</text>", x, CH - MB + 16, t / 5.0);
    }
    bs_buf_printf(b, "<text x=\"%d\" y=\"%d\" class=\"al\">%s</text>", ML + PW / 2, CH - 12, xlabel);
    bs_buf_printf(b, "<text transform=\"translate(14 %d) rotate(-90)\" class=\"al\">%s</text>", MT + PH / 2, ylabel);
}

static void reliability(bs_buf *b, size_t k, const ev_result *r, const ev_metrics *m) {
    chart_open(b, "reliability", k, "Reliability diagram", "");
    axes(b, 1.0, "confidence (probability of the prediction)", "accuracy", 0);
    bs_buf_printf(b, "<line class=\"ideal\" x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\"/>", px(0), py(0, 1), px(1),
                  py(1, 1));
    for (int i = 0; i < EV_BINS; i++) {
        double lo = (double)i / EV_BINS, hi = (double)(i + 1) / EV_BINS;
        double acc = m->bin_n[i] ? m->bin_acc[i] : 0;
        bs_buf_printf(b, "<rect class=\"bar\" data-bin=\"%d\" data-count=\"%zu\" data-accuracy=\"", i, m->bin_n[i]);
        html_num(b, m->bin_n[i] ? m->bin_acc[i] : NAN);
        bs_buf_printf(b, "\" x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%.1f\"><title>confidence %.3f-%.3f: %zu "
                         "decisions, accuracy ", px(lo) + 1, py(acc, 1), px(hi) - px(lo) - 2, py(0, 1) - py(acc, 1), lo,
                      hi, m->bin_n[i]);
        html_num(b, m->bin_n[i] ? m->bin_acc[i] : NAN);
        bs_buf_puts(b, "</title></rect>");
    }
    for (int i = 0; i < EV_BINS; i++) {
        if (!m->bin_n[i]) continue;
        bs_buf_printf(b, "<circle class=\"pt\" data-bin=\"%d\" data-count=\"%zu\" data-x=\"%.4f\" data-y=\"%.4f\" "
                         "cx=\"%.1f\" cy=\"%.1f\" r=\"4\"><title>bin %d: mean confidence %.4f, accuracy %.4f, %zu "
                         "decisions</title></circle>",
                      i, m->bin_n[i], m->bin_conf[i], m->bin_acc[i], px(m->bin_conf[i]), py(m->bin_acc[i], 1), i,
                      m->bin_conf[i], m->bin_acc[i], m->bin_n[i]);
    }
    bs_buf_printf(b, "<text x=\"%d\" y=\"%d\" class=\"lg\">ECE ", ML + 8, MT + 14);
    html_num(b, m->ece);
    bs_buf_printf(b, " (%zu decisions)</text></svg><figcaption>", m->n);
    bs_buf_put_html(b, r->label);
    bs_buf_puts(b, ": bars = accuracy per confidence bin, dots = (mean confidence, accuracy), line = perfect "
                   "calibration</figcaption></figure>\n");
}

static void histogram(bs_buf *b, size_t k, const ev_result *r, const ev_metrics *m) {
    size_t cmax = 1;
    for (int i = 0; i < EV_BINS; i++)
        if (m->bin_n[i] > cmax) cmax = m->bin_n[i];
    double ymax = (double)((cmax + 4) / 5 * 5);
    chart_open(b, "histogram", k, "Confidence histogram", "");
    axes(b, ymax, "confidence (probability of the prediction)", "decisions", 1);
    for (int i = 0; i < EV_BINS; i++) {
        double lo = (double)i / EV_BINS, hi = (double)(i + 1) / EV_BINS, c = (double)m->bin_n[i];
        bs_buf_printf(b, "<rect class=\"bar\" data-bin=\"%d\" data-count=\"%zu\" x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" "
                         "height=\"%.1f\"><title>confidence %.3f-%.3f: %zu decisions</title></rect>",
                      i, m->bin_n[i], px(lo) + 1, py(c, ymax), px(hi) - px(lo) - 2, py(0, ymax) - py(c, ymax), lo, hi,
                      m->bin_n[i]);
    }
    bs_buf_puts(b, "</svg><figcaption>");
    bs_buf_put_html(b, r->label);
    bs_buf_puts(b, ": decisions per confidence bin</figcaption></figure>\n");
}

static void metric_row(bs_buf *b, size_t k, const ev_result *r, const char *scope, const ev_metrics *m, double agree) {
    bs_buf_printf(b, "<tr class=\"metric-row\" data-setting=\"%zu\" data-scope=\"%s\"><td>", k, scope);
    bs_buf_put_html(b, r->label);
    bs_buf_printf(b, "</td><td>%s</td><td data-metric=\"n\">%zu</td>", scope, m->n);
    const char *names[] = {"accuracy", "macro_f1", "log_loss", "brier", "ece", "mean_confidence"};
    const double vals[] = {m->accuracy, m->macro_f1, m->log_loss, m->brier, m->ece, m->mean_confidence};
    for (int i = 0; i < 6; i++) {
        bs_buf_printf(b, "<td data-metric=\"%s\">", names[i]);
        html_num(b, vals[i]);
        bs_buf_puts(b, "</td>");
    }
    bs_buf_puts(b, "<td data-metric=\"agreement_with_first\">");
    html_num(b, agree);
    bs_buf_puts(b, "</td></tr>\n");
}

static int metric_table(bs_buf *b, const ev_report *rp, bs_err *e) {
    const ev_set *s = rp->set;
    bs_buf_puts(b, "<h2>Metrics</h2><table class=\"metrics\"><tr><th>setting</th><th>scope</th><th>n</th>"
                   "<th>accuracy</th><th>macro-F1</th><th>log-loss</th><th>Brier</th><th>ECE</th>"
                   "<th>mean confidence</th><th>agreement with the first</th></tr>\n");
    for (size_t k = 0; k < rp->n_results; k++) {
        const ev_result *r = &rp->results[k];
        ev_metrics m;
        if (ev_metrics_compute(s, r, -1, EV_ANY, &m, e) < 0) return BS_ENOMEM;
        metric_row(b, k, r, "all", &m, k ? ev_agreement(s, &rp->results[0], r) : NAN);
        for (int t = 0; t < EV_N_TYPES; t++) {
            int present = 0;
            for (size_t g = 0; g < s->n_groups; g++) present |= (int)s->groups[g].type == t;
            if (!present) continue;
            if (ev_metrics_compute(s, r, t, EV_ANY, &m, e) < 0) return BS_ENOMEM;
            metric_row(b, k, r, ev_type_name((bs_qtype)t), &m, NAN);
        }
    }
    bs_buf_puts(b, "</table>\n");
    return BS_OK;
}

static void confusion(bs_buf *b, const ev_set *s, size_t k, size_t g, const size_t *cm, const ev_metrics *m) {
    const ev_group *gr = &s->groups[g];
    size_t n = gr->n_classes;
    bs_buf_printf(b, "<div class=\"cm\"><h3>");
    bs_buf_put_html(b, gr->question);
    if (gr->label) {
        bs_buf_puts(b, " [");
        bs_buf_put_html(b, gr->label);
        bs_buf_puts(b, "]");
    }
    bs_buf_printf(b, " <span class=\"ty\">%s, %zu decisions, accuracy ", ev_type_name(gr->type), m->n);
    html_num(b, m->accuracy);
    bs_buf_printf(b, "</span></h3><table class=\"confusion\" data-setting=\"%zu\" data-group=\"%zu\" data-question=\"",
                  k, g);
    bs_buf_put_html(b, gr->question);
    bs_buf_puts(b, "\" data-label=\"");
    bs_buf_put_html(b, gr->label ? gr->label : "");
    bs_buf_puts(b, "\"><tr><th>expected \\ predicted</th>");
    for (size_t c = 0; c < n; c++) {
        bs_buf_puts(b, "<th>");
        bs_buf_put_html(b, gr->classes[c]);
        bs_buf_puts(b, "</th>");
    }
    bs_buf_puts(b, "</tr>");
    size_t cmax = 1;
    for (size_t i = 0; i < n * n; i++) cmax = cm[i] > cmax ? cm[i] : cmax;
    for (size_t i = 0; i < n; i++) {
        bs_buf_puts(b, "<tr><th>");
        bs_buf_put_html(b, gr->classes[i]);
        bs_buf_puts(b, "</th>");
        for (size_t c = 0; c < n; c++) {
            size_t v = cm[i * n + c];
            double a = 0.08 + 0.6 * (double)v / (double)cmax;
            bs_buf_printf(b, "<td class=\"cell%s\" data-row=\"%zu\" data-col=\"%zu\" style=\"background:rgba(%s,%.2f)\">%zu</td>",
                          i == c ? " diag" : "", i, c, i == c ? "42,157,98" : "209,73,91", v ? a : 0.0, v);
        }
        bs_buf_puts(b, "</tr>");
    }
    bs_buf_puts(b, "</table></div>\n");
}

static int setting_section(bs_buf *b, const ev_report *rp, size_t k, bs_err *e) {
    const ev_set *s = rp->set;
    const ev_result *r = &rp->results[k];
    ev_metrics m;
    if (ev_metrics_compute(s, r, -1, EV_ANY, &m, e) < 0) return BS_ENOMEM;
    bs_buf_printf(b, "<section class=\"setting\" data-setting=\"%zu\"><h2>", k);
    bs_buf_put_html(b, r->label);
    bs_buf_puts(b, "</h2><div class=\"meta\">model ");
    bs_buf_put_html(b, r->model);
    if (r->orders) bs_buf_printf(b, " &middot; orders %d%s", r->orders, r->orders_mixed ? " and others" : "");
    if (r->dtype) {
        bs_buf_puts(b, " &middot; dtype ");
        bs_buf_put_html(b, r->dtype);
    }
    if (r->calibration) {
        bs_buf_puts(b, " &middot; calibration ");
        bs_buf_put_html(b, r->calibration);
    }
    bs_buf_printf(b, " &middot; %.2f s &middot; %zu errors</div><div class=\"charts\">\n", r->seconds, r->n_errors);
    reliability(b, k, r, &m);
    histogram(b, k, r, &m);
    bs_buf_puts(b, "</div><div class=\"cms\">\n");
    for (size_t g = 0; g < s->n_groups; g++) {
        size_t n = s->groups[g].n_classes;
        size_t *cm = calloc(n * n, sizeof *cm);
        if (!cm || ev_metrics_compute(s, r, -1, g, &m, e) < 0) {
            free(cm);
            return BS_ENOMEM;
        }
        ev_confusion(s, r, g, cm);
        confusion(b, s, k, g, cm, &m);
        free(cm);
    }
    bs_buf_puts(b, "</div>");
    if (r->n_errors) bs_buf_puts(b, "<h3>Errors</h3><ul class=\"errors\">");
    for (size_t i = 0; i < r->n_errors; i++) {
        bs_buf_puts(b, "<li>");
        bs_buf_put_html(b, s->items[r->errors[i].item].where);
        bs_buf_puts(b, ": ");
        bs_buf_put_html(b, r->errors[i].message);
        bs_buf_puts(b, "</li>");
    }
    bs_buf_puts(b, r->n_errors ? "</ul></section>\n" : "</section>\n");
    return BS_OK;
}

static const char style[] =
    "body{font-family:system-ui,-apple-system,'Segoe UI',sans-serif;margin:24px;color:#222;max-width:1240px}\n"
    "h1{font-size:22px;margin:0 0 4px}h2{font-size:17px;margin:26px 0 8px}h3{font-size:14px;margin:10px 0 4px}\n"
    ".meta{color:#555;font-size:13px;line-height:1.5}.ty{color:#666;font-weight:400}\n"
    ".charts{display:flex;flex-wrap:wrap;gap:12px;margin-top:8px}figure{margin:0;border:1px solid #ddd;"
    "border-radius:6px;background:#fff}figcaption{font-size:12px;color:#555;padding:2px 8px 6px;max-width:424px}\n"
    ".grid{stroke:#e6e6e6}.yt{font-size:11px;text-anchor:end;fill:#555}.xt{font-size:11px;text-anchor:middle;fill:#555}\n"
    ".al{font-size:12px;text-anchor:middle;fill:#333}.ct{font-size:14px;font-weight:600;fill:#222}.lg{font-size:12px;fill:#333}\n"
    ".reliability .bar{fill:#9cc3ec}.histogram .bar{fill:#2a9d62}.pt{fill:#d1495b}.ideal{stroke:#888;stroke-dasharray:4 3}\n"
    "table{border-collapse:collapse;font-size:12.5px}td,th{border-bottom:1px solid #e3e3e3;padding:4px 8px;text-align:right}\n"
    "th{background:#f4f6f8}td:first-child,th:first-child{text-align:left}\n"
    ".cms{display:flex;flex-wrap:wrap;gap:18px}.confusion td{min-width:28px}.confusion .diag{font-weight:600}\n"
    ".errors{font-size:12.5px;color:#b00020}\n";

int ev_write_html(const ev_report *rp, bs_buf *b, bs_err *e) {
    const ev_set *s = rp->set;
    bs_buf_puts(b, "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
                   "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\"><title>basal eval</title><style>\n");
    bs_buf_puts(b, style);
    bs_buf_puts(b, "</style></head><body>\n<h1>basal eval</h1><div class=\"meta\">");
    if (rp->url) {
        bs_buf_puts(b, "server ");
        bs_buf_put_html(b, rp->url);
    } else {
        bs_buf_puts(b, "model ");
        bs_buf_put_html(b, rp->model_dir);
    }
    bs_buf_printf(b, " &middot; %zu graded items, %zu decisions", s->n_items, s->n_targets);
    if (s->n_ungraded) bs_buf_printf(b, ", %zu items without an expected answer not evaluated", s->n_ungraded);
    bs_buf_puts(b, " &middot; items from ");
    for (size_t i = 0; i < s->n_inputs; i++) {
        bs_buf_puts(b, i ? ", " : "");
        bs_buf_put_html(b, s->inputs[i].path);
    }
    bs_buf_puts(b, "<br>basal-c " BASAL_VERSION " &middot; ");
    bs_buf_put_html(b, rp->created);
    bs_buf_printf(b, "<br>prediction = the most probable option; confidence = its probability (top-label); Brier = "
                     "the multi-class sum of squared errors over the options (0..2); log-loss clipped at 1e-15; ECE "
                     "over %d equal-width confidence bins; macro-F1 over (question, answer) classes</div>\n",
                  EV_BINS);
    if (metric_table(b, rp, e) < 0) return bs_fail(e, BS_ENOMEM, "out of memory");
    for (size_t k = 0; k < rp->n_results; k++)
        if (setting_section(b, rp, k, e) < 0) return bs_fail(e, BS_ENOMEM, "out of memory");
    bs_buf_puts(b, "</body></html>\n");
    return b->oom ? bs_fail(e, BS_ENOMEM, "out of memory") : BS_OK;
}
