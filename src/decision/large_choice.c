/* Choice with 11–255 options (spec 03 §5): groups, the two rounds' bookkeeping
 * and the Luce maximum-likelihood fit.
 *
 * The arithmetic of the fit follows the spec step by step and keeps basal-rs's
 * operation order (sums in group list order and member order, the per-group
 * objective summed before it is added to the total, the Cholesky recurrences
 * column by column), so that the final doubles — which are printed as
 * shortest round-trip numbers in the answer — agree with the reference server,
 * not just its decisions. */
#include "decision/large_choice.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "decision/decide.h"

#define LC_MAX_ITERATIONS 100
#define LC_GRAD_TOL 1e-10
#define LC_RIDGE 1e-9
#define LC_TARGET_FLOOR 1e-12  /* start: ln(max(t, 1e-12)) */
#define LC_PROB_FLOOR 1e-300   /* objective: ln(max(s, 1e-300)) */
#define LC_ARMIJO_SLACK 1e-12  /* accept when F(new) >= F - 1e-12 */
#define LC_MIN_STEP 1e-6       /* ... or when t < 1e-6 */

int bs_lc_prompt_count(int n) {
    if (n < BS_LC_MIN_OPTIONS || n > BS_LC_MAX_OPTIONS) return BS_EINVAL;
    int g = (n + BS_LC_GROUP_MAX - 1) / BS_LC_GROUP_MAX;
    return 2 * g + BS_LC_ROUND2_PROMPTS;
}

int bs_lc_make_groups(int n, bs_lc_group *groups, int cap, bs_err *e) {
    if (n < BS_LC_MIN_OPTIONS || n > BS_LC_MAX_OPTIONS)
        return bs_fail(e, BS_EINVAL, "large choice: %d options (the group strategy takes %d..%d)", n,
                       BS_LC_MIN_OPTIONS, BS_LC_MAX_OPTIONS);
    int g = (n + BS_LC_GROUP_MAX - 1) / BS_LC_GROUP_MAX;
    if (cap < 2 * g) return bs_fail(e, BS_EINVAL, "large choice: room for %d groups, %d needed", cap, 2 * g);
    memset(groups, 0, (size_t)(2 * g) * sizeof *groups);
    /* Partition 1: contiguous blocks, the first n mod g one larger. Since
     * n > 10(g-1), every block and every round-robin group holds 5..10. */
    int base = n / g, extra = n % g, start = 0;
    for (int k = 0; k < g; k++) {
        bs_lc_group *gr = &groups[k];
        gr->size = base + (k < extra);
        for (int a = 0; a < gr->size; a++) gr->member[a] = start + a;
        start += gr->size;
    }
    /* Partition 2: round-robin, group k = {k, k+g, k+2g, ...}. */
    for (int k = 0; k < g; k++) {
        bs_lc_group *gr = &groups[g + k];
        for (int i = k; i < n; i += g) gr->member[gr->size++] = i;
    }
    return 2 * g;
}

void bs_lc_group_perm(const bs_lc_group *g, int order, size_t *perm) {
    for (int p = 0; p < g->size; p++) perm[p] = (size_t)g->member[order ? g->size - 1 - p : p];
}

int bs_lc_plan_round1(bs_large_choice *lc, int n, bs_err *e) {
    memset(lc, 0, sizeof *lc);
    int count = bs_lc_make_groups(n, lc->group, BS_LC_MAX_ROUND1_GROUPS, e);
    if (count < 0) return count;
    lc->n = n;
    lc->g = count / 2;
    lc->n_round1 = count;
    lc->stage = BS_LC_AWAIT_ROUND1;
    return BS_OK;
}

/* ---- the fit (03 §5.3) ---- */

/* s = softmax of θ restricted to the group, in member order: max subtracted,
 * exp, summed in order, divided (the same steps as 01 §6). */
static void group_softmax(const double *theta, const bs_lc_group *g, double *s) {
    double mx = theta[g->member[0]];
    for (int a = 1; a < g->size; a++)
        if (theta[g->member[a]] > mx) mx = theta[g->member[a]];
    double sum = 0.0;
    for (int a = 0; a < g->size; a++) {
        s[a] = exp(theta[g->member[a]] - mx);
        sum += s[a];
    }
    for (int a = 0; a < g->size; a++) s[a] /= sum;
}

/* F(θ) = Σ_G Σ_a t_G[a] ln(max(s_G[a], 1e-300)); each group's sum is formed
 * first and then added to the total, groups in list order. */
static double objective(const double *theta, const bs_lc_group *groups, int n_groups) {
    double f = 0.0;
    for (int k = 0; k < n_groups; k++) {
        const bs_lc_group *g = &groups[k];
        double s[BS_LC_GROUP_MAX], part = 0.0;
        group_softmax(theta, g, s);
        for (int a = 0; a < g->size; a++) part += g->target[a] * log(s[a] > LC_PROB_FLOOR ? s[a] : LC_PROB_FLOOR);
        f += part;
    }
    return f;
}

/* Solves A x = b in place for a symmetric positive definite A (n x n,
 * row-major, exactly symmetric) by A = L Lᵀ; lj is scratch of n doubles.
 * Returns 0, or -1 when a pivot is <= 0 (b is then untouched).
 *
 * The arithmetic is the textbook (and basal-rs) recurrence, every sum over k
 * in increasing order:
 *   L[j][j] = sqrt(A[j][j] - sum_k L[j][k]^2)
 *   L[i][j] = (A[i][j] - sum_k L[i][k] L[j][k]) / L[j][j]        (i > j)
 * but Lᵀ is stored in the upper triangle (a[k][i] = L[i][k], i >= k), so the
 * sums of eight adjacent rows i read adjacent doubles of row k. Each sum still
 * receives the same products in the same k order, so the factor is bitwise
 * the one of the row-by-row loops, only faster (see the commit message for
 * the measurement). A[i][j] is read as a[j][i]:
 * H is built with the same products in the same order on both sides of the
 * diagonal, so it is bitwise symmetric. */
static int cholesky_solve(double *a, double *b, double *lj, int n) {
    for (int j = 0; j < n; j++) {
        double *uj = a + (size_t)j * n; /* row j: A[j][j..n-1], then L[j..n-1][j] */
        for (int k = 0; k < j; k++) lj[k] = a[(size_t)k * n + j]; /* L[j][k] */
        double d = uj[j];
        for (int k = 0; k < j; k++) d -= lj[k] * lj[k];
        if (!(d > 0.0)) return -1; /* also refuses NaN */
        d = sqrt(d);
        /* eight rows i at a time: eight independent sums held in registers,
         * each walking k in order over adjacent a[k][i..i+7] */
        int i = j + 1;
        for (; i + 8 <= n; i += 8) {
            double s0 = uj[i], s1 = uj[i + 1], s2 = uj[i + 2], s3 = uj[i + 3];
            double s4 = uj[i + 4], s5 = uj[i + 5], s6 = uj[i + 6], s7 = uj[i + 7];
            for (int k = 0; k < j; k++) {
                const double *u = a + (size_t)k * n + i;
                double l = lj[k];
                s0 -= u[0] * l;
                s1 -= u[1] * l;
                s2 -= u[2] * l;
                s3 -= u[3] * l;
                s4 -= u[4] * l;
                s5 -= u[5] * l;
                s6 -= u[6] * l;
                s7 -= u[7] * l;
            }
            uj[i] = s0 / d;
            uj[i + 1] = s1 / d;
            uj[i + 2] = s2 / d;
            uj[i + 3] = s3 / d;
            uj[i + 4] = s4 / d;
            uj[i + 5] = s5 / d;
            uj[i + 6] = s6 / d;
            uj[i + 7] = s7 / d;
        }
        for (; i < n; i++) {
            double sum = uj[i];
            for (int k = 0; k < j; k++) sum -= a[(size_t)k * n + i] * lj[k];
            uj[i] = sum / d;
        }
        uj[j] = d;
    }
    for (int i = 0; i < n; i++) { /* L y = b */
        double s = b[i];
        for (int k = 0; k < i; k++) s -= a[(size_t)k * n + i] * b[k];
        b[i] = s / a[(size_t)i * n + i];
    }
    for (int i = n - 1; i >= 0; i--) { /* Lᵀ x = y */
        const double *ui = a + (size_t)i * n;
        double s = b[i];
        for (int k = i + 1; k < n; k++) s -= ui[k] * b[k];
        b[i] = s / ui[i];
    }
    return 0;
}

static int check_groups(int n, const bs_lc_group *groups, int n_groups, bs_err *e) {
    if (n < 1 || n > BS_LC_MAX_OPTIONS) return bs_fail(e, BS_EINVAL, "large choice fit: %d options", n);
    if (n_groups < 1) return bs_fail(e, BS_EINVAL, "large choice fit: no groups");
    for (int k = 0; k < n_groups; k++) {
        const bs_lc_group *g = &groups[k];
        if (g->size < 1 || g->size > BS_LC_GROUP_MAX)
            return bs_fail(e, BS_EINVAL, "large choice fit: group %d has %d members", k, g->size);
        for (int a = 0; a < g->size; a++) {
            if (g->member[a] < 0 || g->member[a] >= n)
                return bs_fail(e, BS_EINVAL, "large choice fit: group %d names option %d of %d", k, g->member[a], n);
            for (int b = 0; b < a; b++)
                if (g->member[b] == g->member[a])
                    return bs_fail(e, BS_EINVAL, "large choice fit: group %d names option %d twice", k, g->member[a]);
            if (!isfinite(g->target[a]) || g->target[a] < 0.0)
                return bs_fail(e, BS_EINVAL, "large choice fit: group %d has a target that is not a probability", k);
        }
    }
    return BS_OK;
}

int bs_lc_fit(int n, const bs_lc_group *groups, int n_groups, double *p, bs_lc_fit_info *info, bs_err *e) {
    int rc = check_groups(n, groups, n_groups, e);
    if (rc < 0) return rc;
    bs_lc_fit_info inf = {0};
    size_t nn = (size_t)n * (size_t)n;
    /* one block: H (n x n), then θ, the gradient, the step, a candidate θ,
     * the solver's scratch */
    double *h = malloc((nn + 5 * (size_t)n) * sizeof *h);
    if (!h) return bs_fail(e, BS_ENOMEM, "large choice fit: out of memory");
    double *theta = h + nn, *grad = theta + n, *step = grad + n, *cand = step + n, *scratch = cand + n;

    /* 1. start: θ_i = mean over i's groups of ln(max(t_G[i], 1e-12)); an
     * option in no group starts (and stays) at 0. */
    double *count = cand; /* free until the line search */
    for (int i = 0; i < n; i++) theta[i] = count[i] = 0.0;
    for (int k = 0; k < n_groups; k++) {
        const bs_lc_group *g = &groups[k];
        for (int a = 0; a < g->size; a++) {
            double t = g->target[a];
            theta[g->member[a]] += log(t > LC_TARGET_FLOOR ? t : LC_TARGET_FLOOR);
            count[g->member[a]] += 1.0;
        }
    }
    for (int i = 0; i < n; i++) theta[i] /= (count[i] > 1.0 ? count[i] : 1.0);

    double f = objective(theta, groups, n_groups);
    for (int it = 0; it < LC_MAX_ITERATIONS; it++) {
        /* gradient of F and H = -(its Hessian): per group, diag(s) - s sᵀ */
        memset(h, 0, nn * sizeof *h);
        for (int i = 0; i < n; i++) grad[i] = 0.0;
        for (int k = 0; k < n_groups; k++) {
            const bs_lc_group *g = &groups[k];
            double s[BS_LC_GROUP_MAX];
            group_softmax(theta, g, s);
            for (int a = 0; a < g->size; a++) {
                int i = g->member[a];
                double *hi = h + (size_t)i * n;
                grad[i] += g->target[a] - s[a];
                hi[i] += s[a];
                for (int b = 0; b < g->size; b++) hi[g->member[b]] -= s[a] * s[b];
            }
        }
        double gmax = 0.0;
        for (int i = 0; i < n; i++)
            if (fabs(grad[i]) > gmax) gmax = fabs(grad[i]);
        inf.max_grad = gmax;
        if (gmax < LC_GRAD_TOL) {
            inf.converged = 1;
            break;
        }
        /* θ matters only up to a constant (H ones = 0): the ridge makes H
         * positive definite without moving the optimum. */
        for (int i = 0; i < n; i++) h[(size_t)i * n + i] += LC_RIDGE;
        memcpy(step, grad, (size_t)n * sizeof *step);
        if (cholesky_solve(h, step, scratch, n) < 0) {
            memcpy(step, grad, (size_t)n * sizeof *step); /* gradient ascent step */
            inf.cholesky_fallbacks++;
        }
        /* backtracking: t = 1, halved until F does not drop (or t < 1e-6) */
        double t = 1.0;
        for (;;) {
            for (int i = 0; i < n; i++) cand[i] = theta[i] + t * step[i];
            double fc = objective(cand, groups, n_groups);
            if (fc >= f - LC_ARMIJO_SLACK || t < LC_MIN_STEP) {
                if (fc < f - LC_ARMIJO_SLACK) inf.forced_steps++;
                memcpy(theta, cand, (size_t)n * sizeof *theta);
                f = fc;
                break;
            }
            t *= 0.5;
        }
        inf.iterations++;
    }

    /* 4. p = softmax(θ), max subtracted */
    double mx = theta[0], sum = 0.0;
    for (int i = 1; i < n; i++)
        if (theta[i] > mx) mx = theta[i];
    for (int i = 0; i < n; i++) {
        p[i] = exp(theta[i] - mx);
        sum += p[i];
    }
    for (int i = 0; i < n; i++) p[i] /= sum;
    free(h);
    if (info) *info = inf;
    return BS_OK;
}

/* ---- rounds (03 §5.2, §5.4) ---- */

void bs_lc_top(const double *p, int n, bs_lc_group *out) {
    memset(out, 0, sizeof *out);
    int k = n < BS_LC_GROUP_MAX ? n : BS_LC_GROUP_MAX;
    /* Selection by insertion into a ranking of at most k: an option enters
     * ahead of a ranked one only with a strictly larger p, so among equal p
     * the lower index ranks first (indices are visited in increasing order). */
    int rank[BS_LC_GROUP_MAX], len = 0;
    for (int i = 0; i < n; i++) {
        int pos = len;
        while (pos > 0 && p[i] > p[rank[pos - 1]]) pos--;
        if (pos >= k) continue;
        int last = len < k ? len : k - 1;
        for (int j = last; j > pos; j--) rank[j] = rank[j - 1];
        rank[pos] = i;
        if (len < k) len++;
    }
    /* the group's canonical order is index order */
    for (int a = 1; a < len; a++) {
        int v = rank[a], b = a;
        for (; b > 0 && rank[b - 1] > v; b--) rank[b] = rank[b - 1];
        rank[b] = v;
    }
    out->size = len;
    memcpy(out->member, rank, (size_t)len * sizeof *rank);
}

const bs_lc_group *bs_lc_finalists(const bs_large_choice *lc) { return &lc->group[lc->n_round1]; }

int bs_lc_finish_round1(bs_large_choice *lc, const float *const *logits, bs_err *e) {
    if (lc->stage != BS_LC_AWAIT_ROUND1)
        return bs_fail(e, BS_EINVAL, "large choice: round 1 results at stage %d", (int)lc->stage);
    bs_lc_group groups[BS_LC_MAX_ROUND1_GROUPS];
    memcpy(groups, lc->group, (size_t)lc->n_round1 * sizeof *groups);
    int rc;
    for (int k = 0; k < lc->n_round1; k++) /* one order: p_avg = q_0 exactly */
        if ((rc = bs_softmax_logits(logits[k], groups[k].size, groups[k].target, e)) < 0) return rc;
    double first[BS_LC_MAX_OPTIONS];
    bs_lc_fit_info info;
    if ((rc = bs_lc_fit(lc->n, groups, lc->n_round1, first, &info, e)) < 0) return rc;
    lc->fit_info[0] = info;
    memcpy(lc->group, groups, (size_t)lc->n_round1 * sizeof *groups);
    memcpy(lc->first_fit, first, (size_t)lc->n * sizeof *first);
    bs_lc_top(first, lc->n, &lc->group[lc->n_round1]);
    lc->stage = BS_LC_AWAIT_ROUND2;
    return BS_OK;
}

int bs_lc_finish_round2(bs_large_choice *lc, const float *logits_o0, const float *logits_o1, double temp,
                        double *p, bs_err *e) {
    if (lc->stage != BS_LC_AWAIT_ROUND2)
        return bs_fail(e, BS_EINVAL, "large choice: round 2 results at stage %d", (int)lc->stage);
    if (!isfinite(temp) || temp <= 0.0) return bs_fail(e, BS_EINVAL, "large choice: temperature %g", temp);
    bs_lc_group fin = lc->group[lc->n_round1];
    int k = fin.size, rc;
    double q0[BS_LC_GROUP_MAX], q1[BS_LC_GROUP_MAX];
    if ((rc = bs_softmax_logits(logits_o0, k, q0, e)) < 0) return rc;
    if (logits_o1 && (rc = bs_softmax_logits(logits_o1, k, q1, e)) < 0) return rc;
    /* positions -> the group's canonical order (order 1 shows it reversed) */
    int perm0[BS_LC_GROUP_MAX], perm1[BS_LC_GROUP_MAX];
    for (int a = 0; a < k; a++) {
        perm0[a] = a;
        perm1[a] = k - 1 - a;
    }
    const double *qs[2] = {q0, q1};
    const int *perms[2] = {perm0, perm1};
    bs_average_orders(qs, perms, logits_o1 ? 2 : 1, k, fin.target);

    bs_lc_group groups[BS_LC_MAX_GROUPS];
    memcpy(groups, lc->group, (size_t)lc->n_round1 * sizeof *groups);
    groups[lc->n_round1] = fin;
    double joint[BS_LC_MAX_OPTIONS];
    bs_lc_fit_info info;
    if ((rc = bs_lc_fit(lc->n, groups, lc->n_round1 + 1, joint, &info, e)) < 0) return rc;
    lc->fit_info[1] = info;
    bs_calibrate(joint, lc->n, temp, p);
    lc->group[lc->n_round1] = fin;
    lc->stage = BS_LC_DONE;
    return BS_OK;
}
