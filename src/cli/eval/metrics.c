/* The metrics of `basal eval` (cli/eval/eval.h). For a decision with the
 * distribution p over its n options (an answer's probabilities; a noul's
 * (noul, 1 - noul); a multi label's (P, 1 - P)), expected option g and
 * prediction k = the first option of maximal p:
 *
 *   accuracy        mean of [k = g]
 *   macro-F1        mean over the classes of F1 = 2·TP / (2·TP + FP + FN), a class
 *                   being a (question, answer key) pair that is expected or
 *                   predicted at least once in the scope (scikit-learn's
 *                   f1_score(average="macro") over those labels)
 *   log-loss        mean of -ln(max(p[g], 1e-15))
 *   Brier score     mean of Σ_i (p[i] - [i = g])², summed over the options (the
 *                   multi-class form, 0..2; twice the binary Brier score for yes/no)
 *   ECE             top-label: confidence c = p[k]; 15 bins b/15 < c <= (b+1)/15
 *                   (bin 0 also takes 0); Σ_b (n_b / n)·|accuracy_b - mean c_b|
 *
 * Sums run in item order, then question order, in float64. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cli/eval/eval.h"

int ev_bin_of(double c) {
    int b = (int)ceil(c * EV_BINS) - 1;
    if (b < 0) b = 0;
    if (b > EV_BINS - 1) b = EV_BINS - 1;
    /* the product can round across an edge: the edges decide */
    while (b > 0 && c <= (double)b / EV_BINS) b--;
    while (b < EV_BINS - 1 && c > (double)(b + 1) / EV_BINS) b++;
    return b;
}

static int in_scope(const ev_set *s, const ev_result *r, size_t t, int type, size_t group) {
    const ev_target *x = &s->targets[t];
    return r->ok[t] && (type < 0 || (int)s->groups[x->group].type == type) && (group == EV_ANY || x->group == group);
}

/* Macro-F1 over the (group, class) pairs of the scope. */
static double macro_f1(const ev_set *s, const ev_result *r, int type, size_t group, size_t *n_classes, bs_err *e) {
    size_t *c = calloc(3 * (s->n_classes ? s->n_classes : 1), sizeof *c); /* tp, fp, fn per class */
    if (!c) return bs_fail(e, BS_ENOMEM, "out of memory"), NAN;
    for (size_t t = 0; t < s->n_targets; t++) {
        if (!in_scope(s, r, t, type, group)) continue;
        const ev_target *x = &s->targets[t];
        size_t base = s->groups[x->group].class_base, g = base + x->cls[x->gold], k = base + x->cls[r->pred[t]];
        if (g == k) {
            c[3 * g]++;
        } else {
            c[3 * k + 1]++;
            c[3 * g + 2]++;
        }
    }
    double sum = 0;
    size_t n = 0;
    for (size_t i = 0; i < s->n_classes; i++) {
        size_t tp = c[3 * i], fp = c[3 * i + 1], fn = c[3 * i + 2];
        if (tp + fp + fn == 0) continue;
        sum += 2.0 * (double)tp / (double)(2 * tp + fp + fn);
        n++;
    }
    free(c);
    *n_classes = n;
    return n ? sum / (double)n : NAN;
}

int ev_metrics_compute(const ev_set *s, const ev_result *r, int type, size_t group, ev_metrics *m, bs_err *e) {
    memset(m, 0, sizeof *m);
    double correct = 0, conf = 0, ll = 0, brier = 0, bin_c[EV_BINS] = {0}, bin_ok[EV_BINS] = {0};
    for (size_t t = 0; t < s->n_targets; t++) {
        if (!in_scope(s, r, t, type, group)) continue;
        const ev_target *x = &s->targets[t];
        const double *p = r->p + x->p_off;
        size_t k = r->pred[t];
        int ok = k == x->gold;
        double b = 0;
        for (size_t i = 0; i < x->n_opts; i++) {
            double d = p[i] - (i == x->gold ? 1.0 : 0.0);
            b += d * d;
        }
        m->n++;
        correct += ok;
        conf += p[k];
        ll += -log(p[x->gold] > EV_LOG_CLIP ? p[x->gold] : EV_LOG_CLIP);
        brier += b;
        int bin = ev_bin_of(p[k]);
        m->bin_n[bin]++;
        bin_c[bin] += p[k];
        bin_ok[bin] += ok;
    }
    double n = (double)m->n;
    m->accuracy = m->n ? correct / n : NAN;
    m->mean_confidence = m->n ? conf / n : NAN;
    m->log_loss = m->n ? ll / n : NAN;
    m->brier = m->n ? brier / n : NAN;
    double ece = 0;
    for (int b = 0; b < EV_BINS; b++) {
        if (!m->bin_n[b]) {
            m->bin_conf[b] = m->bin_acc[b] = NAN;
            continue;
        }
        m->bin_conf[b] = bin_c[b] / (double)m->bin_n[b];
        m->bin_acc[b] = bin_ok[b] / (double)m->bin_n[b];
        ece += (double)m->bin_n[b] / n * fabs(m->bin_acc[b] - m->bin_conf[b]);
    }
    m->ece = m->n ? ece : NAN;
    m->macro_f1 = macro_f1(s, r, type, group, &m->f1_classes, e);
    return m->n && isnan(m->macro_f1) ? BS_ENOMEM : BS_OK;
}

void ev_confusion(const ev_set *s, const ev_result *r, size_t group, size_t *counts) {
    size_t n = s->groups[group].n_classes;
    memset(counts, 0, n * n * sizeof *counts);
    for (size_t t = 0; t < s->n_targets; t++) {
        if (!in_scope(s, r, t, -1, group)) continue;
        const ev_target *x = &s->targets[t];
        counts[x->cls[x->gold] * n + x->cls[r->pred[t]]]++;
    }
}

double ev_agreement(const ev_set *s, const ev_result *a, const ev_result *b) {
    size_t both = 0, same = 0;
    for (size_t t = 0; t < s->n_targets; t++) {
        if (!a->ok[t] || !b->ok[t]) continue;
        both++;
        same += a->pred[t] == b->pred[t];
    }
    return both ? (double)same / (double)both : NAN;
}
