#include "model/evidence.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>


/* ---- the head file (03 §4.2) ---- */

static const char *const PROJ[4] = {"ws.weight", "us.weight", "we.weight", "ue.weight"};
static const char *const BIAS[2] = {"bs.weight", "be.weight"};

static void shape_text(const bs_pt_tensor *t, char *buf, size_t n) {
    size_t at = 0;
    buf[0] = 0;
    for (int i = 0; i < t->ndim && at < n; i++)
        at += (size_t)snprintf(buf + at, n - at, "%s%lld", i ? ", " : "", (long long)t->shape[i]);
}

static int take(const bs_pt_tensor *t, float **dst, bs_err *e) {
    size_t n = (size_t)t->numel;
    if (!(*dst = malloc((n ? n : 1) * sizeof **dst))) return bs_fail(e, BS_ENOMEM, "%s: out of memory", BS_EVIDENCE_FILE);
    memcpy(*dst, t->data, n * sizeof **dst);
    return BS_OK;
}

int bs_evidence_head_from_pt(bs_evidence_head *h, const bs_pt_file *f, int hidden, bs_err *e) {
    const char *fn = BS_EVIDENCE_FILE;
    memset(h, 0, sizeof *h);
    int64_t d = 0, k = 0;
    char got[128];
    if (!f->has_state_dict) return bs_fail(e, BS_EFORMAT, "%s: state_dict missing", fn);
    if (!bs_pt_int(f, "d", &d)) return bs_fail(e, BS_EFORMAT, "%s: d missing", fn);
    if (!bs_pt_int(f, "k", &k)) return bs_fail(e, BS_EFORMAT, "%s: k missing", fn);
    if (d != hidden)
        return bs_fail(e, BS_EFORMAT, "%s: d is %lld, the model's hidden size is %d", fn, (long long)d, hidden);
    const bs_pt_tensor *ts[6];
    for (int i = 0; i < 6; i++) {
        const char *name = i < 4 ? PROJ[i] : BIAS[i - 4];
        if (!(ts[i] = bs_pt_tensor_get(f, name))) return bs_fail(e, BS_EFORMAT, "%s: %s missing", fn, name);
    }
    int64_t rank = ts[0]->ndim == 2 ? ts[0]->shape[0] : -1;
    for (int i = 0; i < 6; i++) {
        const bs_pt_tensor *t = ts[i];
        int64_t rows = i < 4 ? rank : 1;
        if (t->ndim != 2 || t->shape[0] != rows || t->shape[1] != hidden || rows < 1) {
            shape_text(t, got, sizeof got);
            if (i < 4)
                return bs_fail(e, BS_EFORMAT, "%s: projection shape [%s], expected [%lld, %d]", fn, got,
                               (long long)(rank > 0 ? rank : 0), hidden);
            return bs_fail(e, BS_EFORMAT, "%s: projection shape [%s], expected [1, %d]", fn, got, hidden);
        }
    }
    if (k != rank) return bs_fail(e, BS_EFORMAT, "%s: k is %lld, ws.weight has %lld rows", fn, (long long)k, (long long)rank);
    for (size_t i = 0; i < f->n_tensors; i++) {
        int known = 0;
        for (int j = 0; j < 6; j++) known |= &f->tensors[i] == ts[j];
        if (!known) return bs_fail(e, BS_EFORMAT, "%s: unexpected tensor %s in state_dict", fn, f->tensors[i].name);
    }
    h->d = hidden;
    h->k = (int)rank;
    float **dst[6] = {&h->ws, &h->us, &h->we, &h->ue, &h->bs, &h->be};
    for (int i = 0; i < 6; i++) {
        int rc = take(ts[i], dst[i], e);
        if (rc < 0) { bs_evidence_head_free(h); return rc; }
    }
    return BS_OK;
}

int bs_evidence_head_load(bs_evidence_head *h, const char *path, int hidden, bs_err *e) {
    bs_pt_file f;
    memset(h, 0, sizeof *h);
    int rc = bs_pt_read_file(path, BS_EVIDENCE_FILE, &f, e);
    if (rc < 0) return rc;
    rc = bs_evidence_head_from_pt(h, &f, hidden, e);
    bs_pt_free(&f);
    return rc;
}

void bs_evidence_head_free(bs_evidence_head *h) {
    free(h->ws); free(h->us); free(h->we); free(h->ue); free(h->bs); free(h->be);
    memset(h, 0, sizeof *h);
}

/* ---- head input (03 §4.3) ---- */

static size_t count_chars(const char *s, size_t n) {
    size_t c = 0;
    for (size_t i = 0; i < n; i++) c += ((unsigned char)s[i] & 0xC0) != 0x80;
    return c;
}

int bs_evidence_locate(const char *prompt, size_t prompt_len, const char *state, size_t state_len,
                       const int32_t *offsets, size_t n_tokens, int32_t *t0, int32_t *t1, int32_t **rel, bs_err *e) {
    *rel = NULL;
    *t0 = *t1 = 0;
    const char *hit = NULL;
    /* the first LF + state (an LF is ASCII, so a byte match starts on a character) */
    for (const char *p = prompt; p && (size_t)(p - prompt) + 1 + state_len <= prompt_len;) {
        p = memchr(p, '\n', prompt_len - (size_t)(p - prompt));
        if (!p || (size_t)(p - prompt) + 1 + state_len > prompt_len) break;
        if (!memcmp(p + 1, state, state_len)) { hit = p; break; }
        p++;
    }
    if (!hit) return 0;
    int64_t s0 = (int64_t)count_chars(prompt, (size_t)(hit - prompt)) + 1;
    int64_t s1 = s0 + (int64_t)count_chars(state, state_len);
    int64_t first = -1, last = -1;
    for (size_t i = 0; i < n_tokens; i++) {
        int64_t a = offsets[2 * i], b = offsets[2 * i + 1];
        if (a >= s0 && b <= s1 && b > a) {
            if (first < 0) first = (int64_t)i;
            last = (int64_t)i;
        }
    }
    if (first < 0) return 0;
    int32_t m = (int32_t)(last + 1 - first);
    if (!(*rel = malloc((size_t)m * 2 * sizeof **rel))) return bs_fail(e, BS_ENOMEM, "evidence: out of memory");
    for (int32_t i = 0; i < m; i++) {
        int64_t a = offsets[2 * (first + i)] - s0, b = offsets[2 * (first + i) + 1] - s0;
        (*rel)[2 * i] = (int32_t)(a > 0 ? a : 0);
        (*rel)[2 * i + 1] = (int32_t)(b > 0 ? b : 0);
    }
    *t0 = (int32_t)first;
    *t1 = (int32_t)(last + 1);
    return 1;
}

/* ---- head math (03 §4.4) ---- */

/* Non-affine LayerNorm statistics of one row: mean and 1/sqrt(var + 1e-5). */
static void ln_stats(const float *x, int d, double *mean, double *inv) {
    double s = 0, v = 0;
    for (int i = 0; i < d; i++) s += x[i];
    *mean = s / d;
    for (int i = 0; i < d; i++) v += (x[i] - *mean) * (x[i] - *mean);
    *inv = 1.0 / sqrt(v / d + 1e-5);
}

/* w = Wᵀ(U·LN(q)) / sqrt(k) + b: the row that turns LN(h_i) into its score. */
static int score_row(const bs_evidence_head *h, const float *W, const float *U, const float *b, const float *q,
                     double *w) {
    int d = h->d, k = h->k;
    double mean, inv;
    ln_stats(q, d, &mean, &inv);
    double *u = malloc((size_t)k * sizeof *u);
    if (!u) return -1;
    for (int r = 0; r < k; r++) {
        double s = 0;
        const float *row = U + (size_t)r * d;
        for (int i = 0; i < d; i++) s += row[i] * ((q[i] - mean) * inv);
        u[r] = s;
    }
    double sk = sqrt((double)k);
    for (int i = 0; i < d; i++) w[i] = 0;
    for (int r = 0; r < k; r++) {
        const float *row = W + (size_t)r * d;
        for (int i = 0; i < d; i++) w[i] += row[i] * u[r];
    }
    for (int i = 0; i < d; i++) w[i] = w[i] / sk + b[i];
    free(u);
    return 0;
}

static void log_softmax(const double *x, int32_t m, float *out) {
    double mx = x[0], s = 0;
    for (int32_t i = 1; i < m; i++) mx = x[i] > mx ? x[i] : mx;
    for (int32_t i = 0; i < m; i++) s += exp(x[i] - mx);
    double l = log(s);
    for (int32_t i = 0; i < m; i++) out[i] = (float)(x[i] - mx - l);
}

int bs_evidence_scores(const bs_evidence_head *h, const float *hs, int32_t m, const float *q, float *ls, float *le,
                       bs_err *e) {
    int d = h->d;
    if (m <= 0) return bs_fail(e, BS_EINTERNAL, "evidence: no state rows");
    for (size_t i = 0; i < (size_t)m * d; i++)
        if (!isfinite(hs[i])) return bs_fail(e, BS_EINTERNAL, "evidence: non-finite hidden state");
    for (int i = 0; i < d; i++)
        if (!isfinite(q[i])) return bs_fail(e, BS_EINTERNAL, "evidence: non-finite hidden state");
    double *ws = malloc((size_t)d * sizeof *ws), *we = malloc((size_t)d * sizeof *we);
    double *xs = malloc((size_t)m * sizeof *xs), *xe = malloc((size_t)m * sizeof *xe);
    int rc = BS_OK;
    if (!ws || !we || !xs || !xe || score_row(h, h->ws, h->us, h->bs, q, ws) < 0 ||
        score_row(h, h->we, h->ue, h->be, q, we) < 0) {
        rc = bs_fail(e, BS_ENOMEM, "evidence: out of memory");
        goto done;
    }
    for (int32_t i = 0; i < m; i++) {
        const float *x = hs + (size_t)i * d;
        double mean, inv, a = 0, b = 0;
        ln_stats(x, d, &mean, &inv);
        for (int j = 0; j < d; j++) {
            double hn = (x[j] - mean) * inv;
            a += hn * ws[j];
            b += hn * we[j];
        }
        xs[i] = a;
        xe[i] = b;
    }
    log_softmax(xs, m, ls);
    log_softmax(xe, m, le);
    for (int32_t i = 0; i < m; i++)
        if (!isfinite(ls[i]) || !isfinite(le[i])) { rc = bs_fail(e, BS_EINTERNAL, "evidence: non-finite scores"); break; }
done:
    free(ws); free(we); free(xs); free(xe);
    return rc;
}

/* ---- span selection (03 §4.5) ---- */

typedef struct {
    float score;
    int64_t flat; /* i * m + j */
} cand;

/* Sorted before: higher score, then lower flat index. */
static int before(const cand *a, const cand *b) { return a->score > b->score || (a->score == b->score && a->flat < b->flat); }

int bs_best_spans(const float *ls, const float *le, int32_t m, const int32_t *rel, int top, bs_ev_span *out, bs_err *e) {
    if (m <= 0 || top <= 0) return 0;
    int64_t mm = (int64_t)m * m, want = 4 * (int64_t)top < mm ? 4 * (int64_t)top : mm;
    cand *best = malloc((size_t)want * sizeof *best);
    if (!best) return bs_fail(e, BS_ENOMEM, "evidence: out of memory");
    int64_t nb = 0, valid = 0;
    /* the `want` best valid pairs, kept sorted (insertion: want is at most 20) */
    for (int32_t i = 0; i < m; i++) {
        int32_t jmax = i + BS_EV_MAX_SPAN < m ? i + BS_EV_MAX_SPAN : m;
        for (int32_t j = i; j < jmax; j++) {
            cand c = {ls[i] + le[j], (int64_t)i * m + j};
            valid++;
            if (nb == want && !before(&c, &best[nb - 1])) continue;
            int64_t at = nb < want ? nb++ : nb - 1;
            while (at > 0 && before(&c, &best[at - 1])) {
                best[at] = best[at - 1];
                at--;
            }
            best[at] = c;
        }
    }
    /* fewer valid pairs than wanted: the masked ones follow in flat order (upstream's masked top-k) */
    for (int64_t f = 0; nb < want && f < mm; f++) {
        int64_t i = f / m, j = f % m;
        if (!(j >= i && j < i + BS_EV_MAX_SPAN)) best[nb++] = (cand){-1e9f, f};
    }
    (void)valid;
    int n = 0;
    for (int64_t c = 0; c < nb && n < top; c++) {
        int64_t i = best[c].flat / m, j = best[c].flat % m;
        int64_t a = rel[2 * i], b = rel[2 * j + 1];
        int overlap = 0;
        for (int s = 0; s < n; s++) overlap |= !(b <= out[s].start || a >= out[s].end);
        if (overlap) continue;
        out[n++] = (bs_ev_span){a, b, exp((double)best[c].score)};
    }
    free(best);
    return n;
}

int bs_evidence_limit(bs_ev_span *s, int n, int64_t facts_limit) {
    int w = 0;
    for (int i = 0; i < n; i++) {
        if (facts_limit >= 0) {
            if (s[i].start >= facts_limit) continue;
            if (s[i].end > facts_limit) s[i].end = facts_limit;
        }
        s[w++] = s[i];
    }
    return w < BS_EV_KEEP ? w : BS_EV_KEEP;
}
