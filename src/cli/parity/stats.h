/* Small statistics of the parity report (`basal compare`, spec 06 §6), as
 * basal-rs computes them (crates/basal-cli/src/stats.rs): summaries of
 * absolute differences, total variation and quality against gold labels.
 * Results are jansson values; a non-finite number becomes JSON null. */
#ifndef BS_PARITY_STATS_H
#define BS_PARITY_STATS_H

#include <jansson.h>
#include <stddef.h>

/* A growable vector of doubles; zero-initialised is empty. */
typedef struct ps_vec {
    double *v;
    size_t n, cap;
} ps_vec;
/* 0, or -1 when out of memory. */
int ps_vec_push(ps_vec *a, double x);
void ps_vec_free(ps_vec *a);

/* A number, or null when x is NaN or infinite. */
json_t *ps_num(double x);
/* First index of the largest value (strictly greater wins); 0 when n == 0. */
size_t ps_argmax(const double *p, size_t n);
/* 0.5 * sum |p - q| over the shorter of the two. */
double ps_tv(const double *p, size_t np, const double *q, size_t nq);
/* The numbers of ps_summary (NaN when n == 0); -1 when out of memory. */
typedef struct ps_stats {
    size_t n;
    double max, p50, p95, p99, mean;
} ps_stats;
int ps_summary_stats(const double *x, size_t n, ps_stats *out);
/* Of n ascending values: the median (mean of the two middle ones when n is
 * even) and the element at floor(q * n), at most n - 1; NaN when n == 0. */
double ps_median_sorted(const double *s, size_t n);
double ps_quantile_sorted(const double *s, size_t n, double q);
/* {"n", "max", "p50", "p95", "p99", "mean"} of |x|: p50 the median, pq the
 * element at floor(q * n) (at most n - 1) of the sorted values, mean the sum
 * in ascending order over n; NaN (null) when n == 0. NULL when out of memory. */
json_t *ps_summary(const double *x, size_t n);
/* {"n", "correct", "accuracy", "nll", "brier", "ece_10bin"} of n
 * distributions against gold indices: NLL of max(p[g], 1e-12), multi-class
 * Brier, top-label ECE over 10 equal bins (bin = floor(10 p_top), at most 9).
 * A gold index past the end of its distribution counts as probability 0. */
json_t *ps_quality(const ps_vec *dists, const size_t *gold, size_t n);

#endif
