/* Decision math (spec 01 §6–§9): per-order softmax of the letter logits in
 * float64, un-permuting and averaging the two orders, calibration with the
 * per-type temperature of CALIBRATION.json, and the answer quantities. */
#ifndef BS_DECIDE_H
#define BS_DECIDE_H

#include <stddef.h>
#include "basal.h"

typedef enum { BS_TYPE_CHOICE = 0, BS_TYPE_NOUL, BS_TYPE_SCORE, BS_TYPE_MULTI, BS_TYPE_ACT, BS_N_TYPES } bs_type_key;

typedef struct bs_threshold {
    char *key;          /* str(max_error) as written in the file, e.g. "0.05" */
    double confidence;
} bs_threshold;

typedef struct bs_calibration {
    int calibrated;                 /* temperature_per_prim exists and has an entry */
    int has_temp[BS_N_TYPES];
    double temp[BS_N_TYPES];
    bs_threshold *thresholds;
    int n_thresholds;
} bs_calibration;

/* Reads <dir>/CALIBRATION.json; an absent file gives no temperatures (T = 1). */
int bs_calibration_load(bs_calibration *c, const char *model_dir, bs_err *e);
int bs_calibration_parse(bs_calibration *c, const char *text, size_t len, bs_err *e);
void bs_calibration_free(bs_calibration *c);
/* Temperature for a type key (1.0 when missing). */
double bs_calibration_temp(const bs_calibration *c, bs_type_key t);

/* q = softmax(logits) in float64: max subtracted, exp, summed in position order.
 * BS_EINTERNAL ("non-finite letter logits") for a non-finite logit. */
int bs_softmax_logits(const float *logits, int k, double *q, bs_err *e);
/* p_avg[j] = (sum over orders o of q[o][p] where perm[o][p] == j) / n_orders. */
void bs_average_orders(const double *const *q, const int *const *perm, int n_orders, int k, double *p_avg);
/* p_cal = p_avg if T == 1 exactly, else softmax(ln(max(p, 1e-12)) / T). */
void bs_calibrate(const double *p_avg, int k, double temp, double *p_cal);

int bs_argmax(const double *p, int k);                 /* first maximum */
double bs_choice_confidence(const double *p, int k);   /* (p[m] - 1/k) / (1 - 1/k) */
double bs_score_value(const double *p, int k);         /* sum i * p[i] */
double bs_score_confidence(const double *p, int k);    /* max(0, 1 - D/U) */
/* max(p) for /v1/basal and act confidence: the largest non-NaN value, -inf
 * when every value is NaN (basal-rs's f64::max fold). */
double bs_max_p(const double *p, int k);

/* multi (03 §1.4): order = label indices by P descending, stable, a NaN P
 * keeping its place (n entries);
 * sel[0..*n_sel) = the selected labels in that order (threshold, then the
 * first max(0, max) when has_max, then the first max(0, min) of order when
 * fewer than min are selected); mark[i] = 1 for a selected label. Returns
 * set_confidence, the product in label order of P or 1 - P, from 1.0.
 * BS_ENOMEM is reported through *rc (0 on success). */
double bs_multi_select(const double *p, size_t n, double threshold, int has_max, long long max, int has_min,
                       long long min, size_t *order, size_t *sel, size_t *n_sel, unsigned char *mark, int *rc);

/* act (03 §2.4): expected[a] = sum over outcomes z (in order) of p[z] * costs[a*k + z],
 * float64; returns the first action with the minimal expected cost. */
size_t bs_act_expected(const double *costs, size_t n_actions, const double *p, size_t k, double *expected);
/* round(x * 1e6) / 1e6, halves away from zero (C round). */
double bs_round6(double x);
/* The certified confidence of CALIBRATION.json thresholds[key] (03 §2.5);
 * 0 when there is none. */
int bs_calibration_threshold(const bs_calibration *c, const char *key, double *confidence);

#endif
