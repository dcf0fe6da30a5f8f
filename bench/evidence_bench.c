/* Cost of the evidence head and span selection (spec 03 §4.4–§4.5) alone, on
 * random hidden states, for m state tokens and a model of hidden size d with
 * rank k (the forward part is measured with `basal decide --timing`, see
 * bench/README.md):
 *   build/bench/evidence_bench [--m 16500] [--d 2048] [--k 256] [--reps 5]
 * Prints the median milliseconds of bs_evidence_scores and of bs_best_spans. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/util.h"
#include "model/evidence.h"

static int cmp_d(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

int main(int argc, char **argv) {
    int m = 16500, d = 2048, k = 256, reps = 5;
    for (int i = 1; i < argc; i += 2) {
        if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help")) {
            printf("usage: evidence_bench [--m 16500] [--d 2048] [--k 256] [--reps 5]\n"
                   "Median milliseconds of the evidence head (bs_evidence_scores) and of the span selection\n"
                   "(bs_best_spans) on random hidden states.\n"
                   "  --m 16500   state tokens (default 16500)\n"
                   "  --d 2048    hidden size (default 2048)\n"
                   "  --k 256     rank of the head (default 256)\n"
                   "  --reps 5    repetitions, 1..100 (default 5)\n"
                   "  -h, --help  this help\n");
            return 0;
        }
        if (i + 1 >= argc) { fprintf(stderr, "evidence_bench: %s needs a value (--help)\n", argv[i]); return 2; }
        if (!strcmp(argv[i], "--m")) m = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--d")) d = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--k")) k = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--reps")) reps = atoi(argv[i + 1]);
        else { fprintf(stderr, "unknown option %s\n", argv[i]); return 2; }
    }
    if (m < 1 || d < 1 || k < 1 || reps < 1 || reps > 100) return 2;
    bs_evidence_head h = {.d = d, .k = k};
    float **w[6] = {&h.ws, &h.us, &h.we, &h.ue, &h.bs, &h.be};
    uint32_t x = 1;
    for (int t = 0; t < 6; t++) {
        size_t n = (size_t)(t < 4 ? k : 1) * d;
        if (!(*w[t] = malloc(n * sizeof(float)))) return 1;
        for (size_t i = 0; i < n; i++) (*w[t])[i] = ((x = x * 1664525u + 1013904223u) >> 8) / 16777216.0f - 0.5f;
    }
    float *hs = malloc((size_t)(m + 1) * d * sizeof *hs), *ls = malloc((size_t)m * sizeof *ls),
          *le = malloc((size_t)m * sizeof *le);
    int32_t *rel = malloc((size_t)m * 2 * sizeof *rel);
    if (!hs || !ls || !le || !rel) return 1;
    for (size_t i = 0; i < (size_t)(m + 1) * d; i++) hs[i] = ((x = x * 1664525u + 1013904223u) >> 8) / 4194304.0f - 2.0f;
    for (int i = 0; i < m; i++) { rel[2 * i] = 4 * i; rel[2 * i + 1] = 4 * i + 4; }
    double *t_head = malloc(reps * sizeof *t_head), *t_sel = malloc(reps * sizeof *t_sel);
    bs_err e = {0};
    bs_ev_span s[BS_EV_SELECT_TOP];
    int n = 0;
    for (int r = 0; r < reps; r++) {
        double t0 = bs_now_ms();
        if (bs_evidence_scores(&h, hs, m, hs + (size_t)m * d, ls, le, &e) < 0) { fprintf(stderr, "%s\n", e.msg); return 1; }
        double t1 = bs_now_ms();
        n = bs_best_spans(ls, le, m, rel, BS_EV_SELECT_TOP, s, &e);
        double t2 = bs_now_ms();
        t_head[r] = t1 - t0;
        t_sel[r] = t2 - t1;
    }
    qsort(t_head, reps, sizeof *t_head, cmp_d);
    qsort(t_sel, reps, sizeof *t_sel, cmp_d);
    printf("m=%d d=%d k=%d: head %.3f ms, best_spans %.3f ms (median of %d), %d spans\n", m, d, k, t_head[reps / 2],
           t_sel[reps / 2], reps, n);
    for (int t = 0; t < 6; t++) free(*w[t]);
    free(hs); free(ls); free(le); free(rel); free(t_head); free(t_sel);
    return 0;
}
