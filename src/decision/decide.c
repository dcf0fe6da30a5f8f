#include "decision/decide.h"

#include <jansson.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "base/util.h"

static const char *const type_names[BS_N_TYPES] = {"choice", "noul", "score", "multi", "act"};

void bs_calibration_free(bs_calibration *c) {
    for (int i = 0; i < c->n_thresholds; i++) free(c->thresholds[i].key);
    free(c->thresholds);
    memset(c, 0, sizeof *c);
}

int bs_calibration_parse(bs_calibration *c, const char *text, size_t len, bs_err *e) {
    memset(c, 0, sizeof *c);
    json_error_t je;
    /* as basal-rs (serde_json) and upstream (json.loads) read it: a repeated key
     * takes its last value, and an integer of any size is a number (jansson
     * would refuse one beyond 64 bits) */
    json_t *root = json_loadb(text, len, JSON_DECODE_INT_AS_REAL, &je);
    int rc = BS_OK;
    if (!root) return bs_fail(e, BS_EFORMAT, "CALIBRATION.json: not valid JSON: %s (line %d)", je.text, je.line);
    if (!json_is_object(root)) { rc = bs_fail(e, BS_EFORMAT, "CALIBRATION.json: not a JSON object"); goto done; }
    json_t *tp = json_object_get(root, "temperature_per_prim");
    if (json_is_object(tp)) {
        const char *k;
        json_t *v;
        json_object_foreach(tp, k, v) {
            int t = -1;
            for (int i = 0; i < BS_N_TYPES; i++)
                if (!strcmp(k, type_names[i])) t = i;
            if (t < 0) { rc = bs_fail(e, BS_EFORMAT, "CALIBRATION.json: unknown type %s", k); goto done; }
            if (!json_is_number(v)) { rc = bs_fail(e, BS_EFORMAT, "CALIBRATION.json: temperature"); goto done; }
            double x = json_number_value(v);
            if (!isfinite(x) || x <= 0) {
                rc = bs_fail(e, BS_EFORMAT, "CALIBRATION.json: temperature of %s must be a positive number", k);
                goto done;
            }
            c->has_temp[t] = 1;
            c->temp[t] = x;
            c->calibrated = 1;
        }
    }
    json_t *th = json_object_get(root, "thresholds");
    if (json_is_object(th) && json_object_size(th) > 0) {
        c->thresholds = calloc(json_object_size(th), sizeof *c->thresholds);
        if (!c->thresholds) { rc = bs_fail(e, BS_ENOMEM, "CALIBRATION.json: out of memory"); goto done; }
        const char *k;
        json_t *v;
        json_object_foreach(th, k, v) {
            json_t *conf = json_object_get(v, "confidence");
            if (!json_is_number(conf)) continue; /* only entries with a confidence certify anything */
            bs_threshold *t = &c->thresholds[c->n_thresholds];
            if (!(t->key = strdup(k))) { rc = bs_fail(e, BS_ENOMEM, "CALIBRATION.json: out of memory"); goto done; }
            t->confidence = json_number_value(conf);
            c->n_thresholds++;
        }
    }
done:
    json_decref(root);
    if (rc < 0) bs_calibration_free(c);
    return rc;
}

int bs_calibration_load(bs_calibration *c, const char *model_dir, bs_err *e) {
    memset(c, 0, sizeof *c);
    char *path = bs_path_join(model_dir, "CALIBRATION.json"), *text = NULL;
    size_t len = 0;
    if (!path) return bs_fail(e, BS_ENOMEM, "out of memory");
    int rc = BS_OK;
    if (bs_file_exists(path)) {
        rc = bs_read_regular_file(path, &text, &len, BS_MODEL_FILE_MAX, e);
        if (rc == 0) rc = bs_calibration_parse(c, text, len, e);
    }
    free(text);
    free(path);
    return rc;
}

double bs_calibration_temp(const bs_calibration *c, bs_type_key t) {
    return c && c->has_temp[t] ? c->temp[t] : 1.0;
}

static void softmax_f64(const double *x, int k, double *q) {
    double mx = x[0];
    for (int i = 1; i < k; i++)
        if (x[i] > mx) mx = x[i];
    double sum = 0.0;
    for (int i = 0; i < k; i++) {
        q[i] = exp(x[i] - mx);
        sum += q[i];
    }
    for (int i = 0; i < k; i++) q[i] /= sum;
}

int bs_softmax_logits(const float *logits, int k, double *q, bs_err *e) {
    double x[256];
    if (k <= 0 || k > 256) return bs_fail(e, BS_EINTERNAL, "softmax over %d letters", k);
    for (int i = 0; i < k; i++) {
        if (!isfinite(logits[i])) return bs_fail(e, BS_EINTERNAL, "non-finite letter logits");
        x[i] = (double)logits[i];
    }
    softmax_f64(x, k, q);
    return BS_OK;
}

void bs_average_orders(const double *const *q, const int *const *perm, int n_orders, int k, double *p_avg) {
    for (int j = 0; j < k; j++) p_avg[j] = 0.0;
    for (int o = 0; o < n_orders; o++)
        for (int p = 0; p < k; p++) p_avg[perm[o][p]] += q[o][p];
    for (int j = 0; j < k; j++) p_avg[j] /= (double)n_orders;
}

void bs_calibrate(const double *p_avg, int k, double temp, double *p_cal) {
    if (temp == 1.0) {
        if (p_cal != p_avg) memcpy(p_cal, p_avg, (size_t)k * sizeof *p_cal);
        return;
    }
    double x[256];
    for (int i = 0; i < k && i < 256; i++) x[i] = log(p_avg[i] > 1e-12 ? p_avg[i] : 1e-12) / temp;
    softmax_f64(x, k, p_cal);
}

int bs_argmax(const double *p, int k) {
    int m = 0;
    for (int i = 1; i < k; i++)
        if (p[i] > p[m]) m = i;
    return m;
}

double bs_choice_confidence(const double *p, int k) {
    double n = (double)k;
    return (p[bs_argmax(p, k)] - 1.0 / n) / (1.0 - 1.0 / n);
}

double bs_score_value(const double *p, int k) {
    double s = 0.0;
    for (int i = 0; i < k; i++) s += (double)i * p[i];
    return s;
}

double bs_score_confidence(const double *p, int k) {
    int m = bs_argmax(p, k);
    double mid = (double)(k - 1) / 2.0, u = 0.0, d = 0.0;
    for (int i = 0; i < k; i++) u += fabs((double)i - mid);
    u /= (double)k;
    for (int i = 0; i < k; i++) d += p[i] * fabs((double)(i - m));
    double c = 1.0 - d / u;
    return c > 0.0 ? c : 0.0;
}

/* basal-rs folds f64::max from -inf, which skips NaN: an all-NaN distribution
 * (a tiny temperature) gives -inf, so act's `confidence < threshold` refuses
 * (decision.rs act_answer); p[argmax] would give NaN and never refuse. */
double bs_max_p(const double *p, int k) {
    double m = -INFINITY;
    for (int i = 0; i < k; i++)
        if (p[i] > m) m = p[i];
    return m;
}

/* ---- multi and act (03 §1.4, §2.4–§2.5) ---- */

/* Label indices by P descending, stable, in the way basal-rs's
 * sort_by(partial_cmp, unwrap_or(Equal)) orders them: an element goes ahead
 * of another only when its P is strictly greater, so a NaN P (a tiny
 * temperature) compares equal to everything and keeps its place. Rust sorts up
 * to 20 elements by insertion, which this reproduces exactly even when NaN and
 * numbers mix; longer lists are merged (identical for any NaN-free input and
 * for all-NaN input). qsort cannot do this: its comparator must be a total
 * order, and with NaN it scrambled the labels. */
static void order_desc(const double *p, size_t *order, size_t n, size_t *tmp) {
    if (n <= 20) {
        for (size_t i = 1; i < n; i++) {
            size_t v = order[i], j = i;
            for (; j > 0 && p[v] > p[order[j - 1]]; j--) order[j] = order[j - 1];
            order[j] = v;
        }
        return;
    }
    size_t h = n / 2;
    order_desc(p, order, h, tmp);
    order_desc(p, order + h, n - h, tmp);
    size_t a = 0, b = h, o = 0;
    while (a < h && b < n) tmp[o++] = p[order[b]] > p[order[a]] ? order[b++] : order[a++];
    while (a < h) tmp[o++] = order[a++];
    while (b < n) tmp[o++] = order[b++];
    memcpy(order, tmp, n * sizeof *order);
}

double bs_multi_select(const double *p, size_t n, double threshold, int has_max, long long max, int has_min,
                       long long min, size_t *order, size_t *sel, size_t *n_sel, unsigned char *mark, int *rc) {
    *rc = 0;
    *n_sel = 0;
    size_t *tmp = malloc((n ? n : 1) * sizeof *tmp);
    if (!tmp) {
        *rc = BS_ENOMEM;
        return 0.0;
    }
    for (size_t i = 0; i < n; i++) order[i] = i;
    order_desc(p, order, n, tmp);
    free(tmp);
    size_t ns = 0;
    for (size_t i = 0; i < n; i++)
        if (p[order[i]] >= threshold) sel[ns++] = order[i];
    if (has_max) {
        size_t keep = max <= 0 ? 0 : (unsigned long long)max < ns ? (size_t)max : ns;
        ns = keep;
    }
    if (has_min && (long long)ns < min) {
        size_t take = min <= 0 ? 0 : (unsigned long long)min < n ? (size_t)min : n;
        for (size_t i = 0; i < take; i++) sel[i] = order[i];
        ns = take;
    }
    memset(mark, 0, n);
    for (size_t i = 0; i < ns; i++) mark[sel[i]] = 1;
    double c = 1.0;
    for (size_t i = 0; i < n; i++) c *= mark[i] ? p[i] : 1.0 - p[i];
    *n_sel = ns;
    return c;
}

size_t bs_act_expected(const double *costs, size_t n_actions, const double *p, size_t k, double *expected) {
    size_t best = 0;
    for (size_t a = 0; a < n_actions; a++) {
        double s = 0.0;
        for (size_t z = 0; z < k; z++) s += p[z] * costs[a * k + z];
        expected[a] = s;
        if (s < expected[best]) best = a;
    }
    return best;
}

double bs_round6(double x) { return round(x * 1e6) / 1e6; }

int bs_calibration_threshold(const bs_calibration *c, const char *key, double *confidence) {
    for (int i = 0; i < c->n_thresholds; i++)
        if (!strcmp(c->thresholds[i].key, key)) {
            *confidence = c->thresholds[i].confidence;
            return 1;
        }
    return 0;
}
