/* Statistics of `basal compare` (parity_stats.h). */
#include "cli/parity/stats.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

int ps_vec_push(ps_vec *a, double x) {
    if (a->n == a->cap) {
        size_t cap = a->cap ? 2 * a->cap : 16;
        double *v = realloc(a->v, cap * sizeof *v);
        if (!v) return -1;
        a->v = v;
        a->cap = cap;
    }
    a->v[a->n++] = x;
    return 0;
}

void ps_vec_free(ps_vec *a) {
    free(a->v);
    a->v = NULL;
    a->n = a->cap = 0;
}

json_t *ps_num(double x) { return isfinite(x) ? json_real(x) : json_null(); }

size_t ps_argmax(const double *p, size_t n) {
    size_t best = 0;
    for (size_t i = 1; i < n; i++)
        if (p[i] > p[best]) best = i;
    return best;
}

double ps_tv(const double *p, size_t np, const double *q, size_t nq) {
    size_t n = np < nq ? np : nq;
    double s = 0;
    for (size_t i = 0; i < n; i++) s += fabs(p[i] - q[i]);
    return 0.5 * s;
}

/* Ascending; NaN after every number (basal-rs would stop on one). */
static int cmp_double(const void *x, const void *y) {
    double a = *(const double *)x, b = *(const double *)y;
    if (isnan(a) || isnan(b)) return isnan(a) - isnan(b);
    return (a > b) - (a < b);
}

double ps_quantile_sorted(const double *s, size_t n, double q) {
    if (n == 0) return NAN;
    size_t i = (size_t)(q * (double)n);
    return s[i < n - 1 ? i : n - 1];
}

double ps_median_sorted(const double *s, size_t n) {
    return n == 0 ? NAN : n % 2 ? s[n / 2] : (s[n / 2 - 1] + s[n / 2]) / 2.0;
}

int ps_summary_stats(const double *x, size_t n, ps_stats *out) {
    double *s = malloc((n ? n : 1) * sizeof *s);
    if (!s) return -1;
    for (size_t i = 0; i < n; i++) s[i] = fabs(x[i]);
    qsort(s, n, sizeof *s, cmp_double);
    double sum = 0;
    for (size_t i = 0; i < n; i++) sum += s[i];
    *out = (ps_stats){.n = n, .max = n ? s[n - 1] : NAN, .p50 = ps_median_sorted(s, n),
                      .p95 = ps_quantile_sorted(s, n, 0.95), .p99 = ps_quantile_sorted(s, n, 0.99),
                      .mean = n ? sum / (double)n : NAN};
    free(s);
    return 0;
}

json_t *ps_summary(const double *x, size_t n) {
    ps_stats t;
    if (ps_summary_stats(x, n, &t) < 0) return NULL;
    return json_pack("{s:I, s:o, s:o, s:o, s:o, s:o}", "n", (json_int_t)n, "max", ps_num(t.max), "p50", ps_num(t.p50),
                     "p95", ps_num(t.p95), "p99", ps_num(t.p99), "mean", ps_num(t.mean));
}

json_t *ps_quality(const ps_vec *dists, const size_t *gold, size_t n) {
    double acc = 0, nll = 0, brier = 0, nd = (double)n;
    double conf[10] = {0}, hits[10] = {0};
    size_t count[10] = {0};
    for (size_t k = 0; k < n; k++) {
        const double *p = dists[k].v;
        size_t m = dists[k].n, g = gold[k], top = ps_argmax(p, m);
        double hit = top == g ? 1.0 : 0.0, pg = g < m ? p[g] : 0.0, ptop = m ? p[top] : NAN;
        acc += hit;
        nll -= log(fmax(pg, 1e-12));
        double b = 0;
        for (size_t i = 0; i < m; i++) {
            double d = p[i] - (i == g ? 1.0 : 0.0);
            b += d * d;
        }
        brier += b;
        double t = ptop * 10.0;
        size_t bin = !(t > 0) ? 0 : t >= 9 ? 9 : (size_t)t; /* Rust `as usize` saturates, NaN -> 0 */
        conf[bin] += ptop;
        hits[bin] += hit;
        count[bin]++;
    }
    double ece = 0;
    for (int b = 0; b < 10; b++)
        if (count[b]) ece += fabs(conf[b] - hits[b]) / nd;
    return json_pack("{s:I, s:I, s:o, s:o, s:o, s:o}", "n", (json_int_t)n, "correct", (json_int_t)acc, "accuracy",
                     ps_num(acc / nd), "nll", ps_num(nll / nd), "brier", ps_num(brier / nd), "ece_10bin",
                     ps_num(n ? ece : 0.0));
}
