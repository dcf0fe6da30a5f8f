/* The int8 mode at load (model/smooth.h): the plan, the calibration forward,
 * the smoothing factors, the quantization and packing of every layer, and
 * the quantized-weights cache of this mode (model/quant_cache.h). */
#include "model/smooth.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/log.h"
#include "base/progress.h"
#include "base/sha256.h"
#include "base/util.h"
#include "cpu/hadamard.h"
#include "model/forward.h"
#include "model/quant_cache.h"

/* ---- the plan ----------------------------------------------------------------------- */

static const char *const group_names[BS_SMOOTH_GROUPS] = {"qkv", "gate_up", "o", "down"};
static const char *const mat_short[BS_LAYER_MATS] = {"q", "k", "v", "o", "gate", "up", "down"};
/* the projections that read each input (bits of bs_layer_mat order) */
static const unsigned group_targets[BS_SMOOTH_GROUPS] = {0x7u, 0x30u, 0x8u, 0x40u};

/* Defaults (smooth.h; measured in bench/README.md). */
static const unsigned DEFAULT_SMOOTH = (1u << BS_G_QKV) | (1u << BS_G_GATE_UP);
static const unsigned DEFAULT_WEIGHT_ONLY = 1u << 6; /* down_proj */
static const unsigned DEFAULT_ROTATE = 1u << BS_G_DOWN;

const char *bs_smooth_group_name(int g) { return g >= 0 && g < BS_SMOOTH_GROUPS ? group_names[g] : NULL; }

int bs_smooth_amax_len(const bs_config *c, int g) {
    switch (g) {
    case BS_G_O: return c->n_heads * c->head_dim;
    case BS_G_DOWN: return c->inter;
    default: return c->hidden;
    }
}

int bs_smooth_factor_len(const bs_config *c, int g) {
    return g == BS_G_O ? c->n_kv_heads * c->head_dim : bs_smooth_amax_len(c, g);
}

/* A comma list of names (or "none") as bits; -1 for an unknown name. */
static long parse_names(const char *v, const char *const *names, int n) {
    if (!strcmp(v, "none") || !*v) return 0;
    long bits = 0;
    for (const char *p = v; *p;) {
        size_t len = strcspn(p, ",");
        int found = -1;
        for (int i = 0; i < n; i++)
            if (strlen(names[i]) == len && !strncmp(p, names[i], len)) found = i;
        if (found < 0) return -1;
        bits |= 1L << found;
        p += len + (p[len] == ',');
    }
    return bits;
}

int bs_int8_plan_get(const bs_model *m, bs_int8_plan *p, bs_err *e) {
    p->alpha = m->int8_alpha == 0.0 ? BS_INT8_ALPHA_DEFAULT : m->int8_alpha < 0.0 ? 0.0 : m->int8_alpha;
    if (!(p->alpha <= 1.0)) return bs_fail(e, BS_EINVAL, "int8 smoothing alpha %g is not in [0, 1]", p->alpha);
    p->smooth = DEFAULT_SMOOTH;
    p->weight_only = DEFAULT_WEIGHT_ONLY;
    const char *v = getenv("BASAL_INT8_SMOOTH");
    if (v) {
        long b = parse_names(v, group_names, BS_SMOOTH_GROUPS);
        if (b < 0) return bs_fail(e, BS_EINVAL, "BASAL_INT8_SMOOTH=%s: a comma list of qkv, gate_up, o, down, or none", v);
        p->smooth = (unsigned)b;
    }
    p->rotate = DEFAULT_ROTATE;
    if ((v = getenv("BASAL_INT8_ROTATE"))) {
        long b = parse_names(v, group_names, BS_SMOOTH_GROUPS);
        if (b < 0 || (b & ~(1L << BS_G_DOWN)))
            return bs_fail(e, BS_EINVAL, "BASAL_INT8_ROTATE=%s: down or none", v);
        p->rotate = (unsigned)b;
    }
    if ((v = getenv("BASAL_INT8_WEIGHT_ONLY"))) {
        long b = parse_names(v, mat_short, BS_LAYER_MATS);
        if (b < 0)
            return bs_fail(e, BS_EINVAL, "BASAL_INT8_WEIGHT_ONLY=%s: a comma list of q, k, v, o, gate, up, down, or none", v);
        p->weight_only = (unsigned)b;
    }
    /* an input is rotated or smoothed only when a product quantizes it; rotated, not smoothed */
    for (int g = 0; g < BS_SMOOTH_GROUPS; g++) {
        if ((p->weight_only & group_targets[g]) == group_targets[g] ||
            (g == BS_G_DOWN && !bs_hadamard_block(m->cfg.inter)))
            p->rotate &= ~(1u << g);
        if (p->alpha <= 0.0 || (p->weight_only & group_targets[g]) == group_targets[g] || (p->rotate & (1u << g)))
            p->smooth &= ~(1u << g);
    }
    if (!p->smooth) p->alpha = 0.0;
    return BS_OK;
}

void bs_int8_plan_text(const bs_int8_plan *p, char *buf, size_t len) {
    char a[32]; /* the shortest text that reads back as alpha (the key depends on it) */
    snprintf(a, sizeof a, "%.15g", p->alpha);
    if (strtod(a, NULL) != p->alpha) snprintf(a, sizeof a, "%.17g", p->alpha);
    size_t at = (size_t)snprintf(buf, len, "alpha %s, smooth", a);
    int any = 0;
    for (int g = 0; g < BS_SMOOTH_GROUPS && at < len; g++)
        if (p->smooth & (1u << g)) at += (size_t)snprintf(buf + at, len - at, "%s%s", any++ ? "+" : " ", group_names[g]);
    if (!any && at < len) at += (size_t)snprintf(buf + at, len - at, " none");
    if (p->rotate && at < len) at += (size_t)snprintf(buf + at, len - at, ", rotate down");
    any = 0;
    for (int i = 0; i < BS_LAYER_MATS && at < len; i++)
        if (p->weight_only & (1u << i))
            at += (size_t)snprintf(buf + at, len - at, "%s%s", any++ ? "+" : ", int8w ", mat_short[i]);
}

float bs_smooth_factor(float amax, float wmax, double alpha) {
    if (!(alpha > 0.0) || !(amax > 0.0f) || !(wmax > 0.0f) || !isfinite(amax) || !isfinite(wmax)) return 1.0f;
    double s = pow((double)amax, alpha) / pow((double)wmax, 1.0 - alpha);
    if (!isfinite(s)) return 1.0f;
    if (s < 0x1p-16) s = 0x1p-16;
    if (s > 0x1p16) s = 0x1p16;
    return (float)s;
}

/* ---- state and calibration ------------------------------------------------------------- */

int bs_act_stats_alloc(bs_act_stats *st, const bs_model *m, bs_err *e) {
    memset(st, 0, sizeof *st);
    st->n_layers = m->cfg.n_layers;
    for (int g = 0; g < BS_SMOOTH_GROUPS; g++)
        if (!(st->amax[g] = calloc((size_t)m->cfg.n_layers * bs_smooth_amax_len(&m->cfg, g), sizeof(float)))) {
            bs_act_stats_free(st);
            return bs_fail(e, BS_ENOMEM, "out of memory");
        }
    return BS_OK;
}

void bs_act_stats_free(bs_act_stats *st) {
    for (int g = 0; g < BS_SMOOTH_GROUPS; g++) free(st->amax[g]);
    memset(st, 0, sizeof *st);
}

void bs_int8_state_free(bs_int8_state *st) {
    if (!st) return;
    bs_act_stats_free(&st->stats);
    for (int g = 0; g < BS_SMOOTH_GROUPS; g++) free(st->s[g]);
    free(st->ids);
    free(st);
}

static size_t mat_bytes(const bs_wmat *w) { return (size_t)w->n * (size_t)w->k * bs_dtype_size(w->dtype); }

static void drop_layer(const bs_model *m, int l) {
    for (int i = 0; i < BS_LAYER_MATS; i++) {
        const bs_wmat *w = bs_layer_mat(&m->layers[l], i);
        bs_weights_drop_pages(w->data, mat_bytes(w));
    }
}

typedef struct {
    const bs_model *m;
    int next;
    bs_progress *p;
} calib_ctx;

/* After each layer of the calibration forward: its stored pages leave this
 * process's memory (they come back from the page cache for quantization). */
static void calib_layer_done(void *arg) {
    calib_ctx *c = arg;
    drop_layer(c->m, c->next++);
    bs_progress_add(c->p, 1);
}

int bs_int8_calibrate(bs_model *m, const int32_t *ids, int n, bs_act_stats *st, bs_err *e) {
    if (n > m->cfg.max_pos) n = m->cfg.max_pos;
    if (n <= 0) return bs_fail(e, BS_EINVAL, "no calibration tokens");
    int32_t *pos = malloc((size_t)n * sizeof *pos), *rows = malloc((size_t)n * sizeof *rows), out_id = 0;
    float *logits = malloc((size_t)n * sizeof *logits);
    int rc = BS_OK;
    if (!pos || !rows || !logits) {
        rc = bs_fail(e, BS_ENOMEM, "out of memory");
        goto done;
    }
    for (int i = 0; i < n; i++) pos[i] = rows[i] = i;
    bs_unit u = {.q_start = 0, .q_len = n, .n_ranges = 1, .r_start = {0}, .r_len = {n}};
    char what[512];
    snprintf(what, sizeof what, "calibrating %s for int8 (%d tokens)", m->dir ? m->dir : "the model", n);
    calib_ctx cc = {m, 0, bs_progress_start(what, (uint64_t)m->cfg.n_layers, "layers")};
    bs_fwd_input in = {.n_tokens = n, .ids = ids, .pos = pos, .n_units = 1, .units = &u, .n_readouts = n,
                       .readouts = rows, .n_out_ids = 1, .out_ids = &out_id, .between_layers = calib_layer_done,
                       .between_ctx = &cc, .act_stats = st};
    rc = bs_forward(m, &in, logits, e);
    bs_progress_end(cc.p);
    for (int l = cc.next; l < m->cfg.n_layers; l++) drop_layer(m, l);
done:
    free(pos);
    free(rows);
    free(logits);
    return rc;
}

/* ---- one layer ---------------------------------------------------------------------------- */

typedef struct {
    const bs_wmat *w;
    float *part; /* [tasks][k] */
    int tasks;
} colmax_job;

static void widen_row(const void *data, bs_dtype dt, size_t off, int n, float *out) {
    for (int i = 0; i < n; i++) {
        size_t at = off + (size_t)i;
        switch (dt) {
        case BS_BF16: out[i] = bs_bf16_to_f32(((const uint16_t *)data)[at]); break;
        case BS_F16: out[i] = bs_f16_to_f32(((const uint16_t *)data)[at]); break;
        default: out[i] = ((const float *)data)[at]; break;
        }
    }
}

static void colmax_task(void *arg, int t, int thread) {
    (void)thread;
    const colmax_job *j = arg;
    const bs_wmat *w = j->w;
    float *mx = j->part + (size_t)t * w->k, *row = malloc((size_t)w->k * sizeof *row);
    if (!row) return; /* its maxima stay -1: the caller sees it */
    for (int i = 0; i < w->k; i++) mx[i] = 0.0f;
    int r0 = (int)((long long)w->n * t / j->tasks), r1 = (int)((long long)w->n * (t + 1) / j->tasks);
    for (int r = r0; r < r1; r++) {
        widen_row(w->data, w->dtype, (size_t)r * w->k, w->k, row);
        for (int i = 0; i < w->k; i++) {
            float a = fabsf(row[i]);
            if (a > mx[i]) mx[i] = a; /* NaN never wins */
        }
    }
    free(row);
}

/* mx[j] = max(mx[j], max over the rows of w of |w[n][j]|). */
static int column_max(const bs_model *m, const bs_wmat *w, float *mx) {
    int tasks = bs_pool_size(m->pool);
    colmax_job j = {w, malloc((size_t)tasks * w->k * sizeof(float)), tasks};
    if (!j.part) return BS_ENOMEM;
    for (size_t i = 0; i < (size_t)tasks * w->k; i++) j.part[i] = -1.0f; /* a task without memory leaves -1 */
    bs_pool_run(m->pool, tasks, colmax_task, &j);
    int rc = BS_OK;
    for (int t = 0; t < tasks; t++)
        for (int i = 0; i < w->k; i++) {
            float a = j.part[(size_t)t * w->k + i];
            if (a < 0.0f) rc = BS_ENOMEM;
            if (a > mx[i]) mx[i] = a;
        }
    free(j.part);
    return rc;
}

/* Layer l's factors for every smoothed input, into st->s[g] + l * len. */
static int layer_factors(const bs_model *m, int l, bs_int8_state *st) {
    const bs_config *c = &m->cfg;
    int hd = c->head_dim, rep = c->n_heads / c->n_kv_heads;
    for (int g = 0; g < BS_SMOOTH_GROUPS; g++) {
        if (!(st->plan.smooth & (1u << g))) continue;
        int na = bs_smooth_amax_len(c, g), nf = bs_smooth_factor_len(c, g);
        const float *a = st->stats.amax[g] + (size_t)l * na;
        float *s = st->s[g] + (size_t)l * nf, *wmax = calloc((size_t)na, sizeof *wmax);
        if (!wmax) return BS_ENOMEM;
        int rc = BS_OK;
        for (int i = 0; i < BS_LAYER_MATS && rc == BS_OK; i++)
            if (group_targets[g] & (1u << i)) rc = column_max(m, bs_layer_mat(&m->layers[l], i), wmax);
        if (rc == BS_OK && g == BS_G_O) { /* one factor per kv head and dimension: its query heads' maxima */
            for (int kv = 0; kv < c->n_kv_heads; kv++)
                for (int d = 0; d < hd; d++) {
                    float am = 0.0f, wm = 0.0f;
                    for (int h = kv * rep; h < (kv + 1) * rep; h++) {
                        if (a[h * hd + d] > am) am = a[h * hd + d];
                        if (wmax[h * hd + d] > wm) wm = wmax[h * hd + d];
                    }
                    s[kv * hd + d] = bs_smooth_factor(am, wm, st->plan.alpha);
                }
        } else if (rc == BS_OK) {
            for (int j = 0; j < nf; j++) s[j] = bs_smooth_factor(a[j], wmax[j], st->plan.alpha);
        }
        free(wmax);
        if (rc < 0) return rc;
    }
    return BS_OK;
}

/* The factors of projection i of layer l: its columns' (col, k long; for
 * o_proj expanded from the kv heads into cols) and its rows' divisors. */
static void mat_factors(const bs_model *m, const bs_int8_state *st, int l, int i, float *cols, const float **col,
                        const float **rowdiv) {
    const bs_config *c = &m->cfg;
    const float *f[BS_SMOOTH_GROUPS];
    for (int g = 0; g < BS_SMOOTH_GROUPS; g++)
        f[g] = st->s[g] ? st->s[g] + (size_t)l * bs_smooth_factor_len(c, g) : NULL;
    *col = *rowdiv = NULL;
    switch (i) {
    case 0: case 1: *col = f[BS_G_QKV]; break;
    case 2: *col = f[BS_G_QKV], *rowdiv = f[BS_G_O]; break;
    case 3:
        if (f[BS_G_O]) {
            int hd = c->head_dim, rep = c->n_heads / c->n_kv_heads;
            for (int h = 0; h < c->n_heads; h++)
                for (int d = 0; d < hd; d++) cols[h * hd + d] = f[BS_G_O][(h / rep) * hd + d];
            *col = cols;
        }
        break;
    case 4: *col = f[BS_G_GATE_UP]; break;
    case 5: *col = f[BS_G_GATE_UP], *rowdiv = f[BS_G_DOWN]; break;
    default: *col = f[BS_G_DOWN]; break;
    }
}

/* v / d element by element into a fresh copy (NULL when v or d is NULL). */
static int divided(const float *v, const float *d, int n, float **out) {
    *out = NULL;
    if (!v || !d) return BS_OK;
    if (!(*out = malloc((size_t)n * sizeof **out))) return BS_ENOMEM;
    for (int i = 0; i < n; i++) (*out)[i] = v[i] / d[i];
    return BS_OK;
}

/* The norms and biases that absorb layer l's divisions (smooth.h). */
static int fold_layer(bs_model *m, int l, const bs_int8_state *st) {
    const bs_config *c = &m->cfg;
    bs_layer *ly = &m->layers[l];
    const float *f[BS_SMOOTH_GROUPS];
    for (int g = 0; g < BS_SMOOTH_GROUPS; g++)
        f[g] = st->s[g] ? st->s[g] + (size_t)l * bs_smooth_factor_len(c, g) : NULL;
    if (divided(ly->ln1, f[BS_G_QKV], c->hidden, &ly->ln1_i8) < 0 ||
        divided(ly->ln2, f[BS_G_GATE_UP], c->hidden, &ly->ln2_i8) < 0 ||
        divided(ly->bv, f[BS_G_O], c->n_kv_heads * c->head_dim, &ly->bv_i8) < 0 ||
        divided(ly->bu, f[BS_G_DOWN], c->inter, &ly->bu_i8) < 0)
        return BS_ENOMEM;
    ly->down_hadamard = st->plan.rotate & (1u << BS_G_DOWN) ? bs_hadamard_block(c->inter) : 0;
    return BS_OK;
}

typedef struct {
    const bs_wmat *w;
    int b;
    int8_t *q;
    float *scale;
    int bad; /* a task without memory */
} rot_job;

/* Rows of the rotated weights (smooth.h): W[n] H / b, then the per-row rule. */
static void rot_task(void *arg, int t, int thread) {
    (void)thread;
    rot_job *j = arg;
    const bs_wmat *w = j->w;
    float *row = malloc((size_t)w->k * sizeof *row);
    if (!row) {
        j->bad = 1;
        return;
    }
    const float inv = 1.0f / (float)j->b; /* a power of two: exact */
    for (int r = t * 16; r < w->n && r < (t + 1) * 16; r++) {
        widen_row(w->data, w->dtype, (size_t)r * w->k, w->k, row);
        bs_hadamard_rows(row, 1, w->k, w->k, j->b);
        for (int i = 0; i < w->k; i++) row[i] = row[i] * inv;
        bs_quantize_row_i8(row, BS_F32, w->k, j->q + (size_t)r * w->k, j->scale + r);
    }
    free(row);
}

/* Projection i of layer l quantized with its factors: int8w (an I8 block)
 * or W8A8 (packed; down_proj's rows rotated when the plan rotates its
 * input); bytes made in *bytes. */
static int quantize_mat(bs_model *m, const bs_int8_state *st, int l, int i, float *cols, size_t *bytes) {
    bs_wmat *w = bs_layer_mat(&m->layers[l], i);
    const float *col, *rowdiv;
    mat_factors(m, st, l, i, cols, &col, &rowdiv);
    if (st->plan.weight_only & (1u << i)) {
        int rc = bs_gemm_quantize_ex(m->pool, w, col, rowdiv, bytes);
        return rc < 0 ? rc : BS_OK;
    }
    int8_t *q = malloc((size_t)w->n * w->k);
    float *sc = malloc((size_t)w->n * sizeof *sc);
    int rc = q && sc ? BS_OK : BS_ENOMEM;
    int b = i == 6 && (st->plan.rotate & (1u << BS_G_DOWN)) ? bs_hadamard_block(w->k) : 0;
    if (rc == BS_OK && b) {
        rot_job j = {w, b, q, sc, 0};
        bs_pool_run(m->pool, (w->n + 15) / 16, rot_task, &j);
        if (j.bad) rc = BS_ENOMEM;
    } else if (rc == BS_OK) {
        bs_gemm_quantize_rows(m->pool, w, col, rowdiv, q, sc);
    }
    if (rc == BS_OK) rc = bs_gemm_pack_w8a8(m->pool, w, q, sc, bytes);
    free(q);
    free(sc);
    return rc < 0 ? rc : BS_OK;
}

static int alloc_factors(const bs_model *m, bs_int8_state *st) {
    for (int g = 0; g < BS_SMOOTH_GROUPS; g++)
        if ((st->plan.smooth & (1u << g)) &&
            !(st->s[g] = calloc((size_t)m->cfg.n_layers * bs_smooth_factor_len(&m->cfg, g), sizeof(float))))
            return BS_ENOMEM;
    return BS_OK;
}

static uint64_t proj_bytes(const bs_model *m) {
    uint64_t total = 0;
    for (int l = 0; l < m->cfg.n_layers; l++)
        for (int i = 0; i < BS_LAYER_MATS; i++) total += mat_bytes(bs_layer_mat(&m->layers[l], i));
    return total;
}

/* Every layer: factors, quantization, folding; the stored pages dropped as
 * each layer is done. */
static int quantize_layers(bs_model *m, bs_int8_state *st, bs_err *e) {
    uint64_t total = proj_bytes(m), made = 0;
    const bs_config *c = &m->cfg;
    float *cols = malloc((size_t)c->n_heads * c->head_dim * sizeof *cols);
    char what[512];
    snprintf(what, sizeof what, "quantizing the weights of %s to int8 (W8A8)", m->dir ? m->dir : "the model");
    bs_progress *p = bs_progress_start(what, total, "B");
    int rc = cols && alloc_factors(m, st) == BS_OK ? BS_OK : BS_ENOMEM;
    for (int l = 0; l < c->n_layers && rc == BS_OK; l++) {
        rc = layer_factors(m, l, st);
        for (int i = 0; i < BS_LAYER_MATS && rc == BS_OK; i++) {
            size_t bytes = 0;
            rc = quantize_mat(m, st, l, i, cols, &bytes);
            made += bytes;
            bs_progress_add(p, mat_bytes(bs_layer_mat(&m->layers[l], i)));
        }
        if (rc == BS_OK) rc = fold_layer(m, l, st);
        drop_layer(m, l);
    }
    bs_progress_end(p);
    free(cols);
    if (rc == BS_ERANGE)
        return bs_fail(e, BS_ERANGE, "dtype int8: a projection of %s is deeper than %d (the int32 sums' bound); use "
                       "--dtype int8w or bf16", m->dir, BS_I8_MAX_K);
    if (rc < 0)
        return bs_fail(e, BS_ENOMEM, "out of memory quantizing the weights of %s to int8 (%.1f GB); free memory or use "
                       "another dtype (--dtype bf16)", m->dir, (double)total / 2e9);
    bs_log(BS_LOG_INFO, "model", "%s: weights quantized to int8 (%.1f MB, from %.1f MB)", m->dir, (double)made / 1e6,
           (double)total / 1e6);
    return BS_OK;
}

/* ---- the cache -------------------------------------------------------------------------------- */

static void cache_rule(const bs_int8_state *st, char *buf, size_t len) {
    char plan[200], hex[65] = "-";
    bs_int8_plan_text(&st->plan, plan, sizeof plan);
    if (st->n_ids > 0) {
        uint8_t d[32];
        bs_sha256(st->ids, (size_t)st->n_ids * sizeof *st->ids, d);
        bs_sha256_hex(d, hex);
    }
    snprintf(buf, len,
             "%s\nW8A8: x per row s = amax/127, q = rint(x/s); weights %s after the smoothing; "
             "y = (float)sum * (sx * sw)\n%s\ncalibration %s, %d tokens, sha256 %s",
             BS_QUANT_CACHE_FORMAT_INT8, bs_quant_rule_int8w, plan, BS_INT8_CALIB_VERSION, st->n_ids, hex);
}

/* Checks what no quantization gives: -128 in q, a scale that is negative or
 * not finite. 1 fine, 0 with e set. */
static int check_q(const char *name, const int8_t *q, size_t qn, const float *scale, int rows, bs_err *e) {
    if (memchr(q, 0x80, qn)) return bs_fail(e, BS_EFORMAT, "%s: a .q holds -128", name), 0;
    for (int r = 0; r < rows; r++)
        if (!isfinite(scale[r]) || scale[r] < 0.0f) return bs_fail(e, BS_EFORMAT, "%s[%d] is %g", name, r, scale[r]), 0;
    return 1;
}

/* Projection i of layer l from the file: an int8w block read in place, or
 * W8A8 packed strip by strip from 32 rows at a time (never a second copy of
 * the matrix). */
static int read_mat(bs_model *m, bs_qc_file *f, const bs_int8_state *st, int l, int i, bs_err *e) {
    bs_wmat *w = bs_layer_mat(&m->layers[l], i);
    size_t qn = (size_t)w->n * w->k, qbytes = (qn + 63) & ~(size_t)63;
    char qname[192], sname[192];
    snprintf(qname, sizeof qname, "model.layers.%d.%s.weight.q", l, bs_layer_mat_name(i));
    snprintf(sname, sizeof sname, "model.layers.%d.%s.weight.scale", l, bs_layer_mat_name(i));
    if (st->plan.weight_only & (1u << i)) {
        void *p = NULL;
        if (posix_memalign(&p, 64, qbytes + (size_t)w->n * sizeof(float))) return BS_ENOMEM;
        float *scale = (float *)(void *)((char *)p + qbytes);
        int rc = bs_qc_read(f, qname, "I8", w->n, w->k, p, e);
        if (rc == 1) rc = bs_qc_read(f, sname, "F32", w->n, 0, scale, e);
        if (rc == 1) rc = check_q(sname, p, qn, scale, w->n, e);
        if (rc != 1) {
            free(p);
            return rc;
        }
        bs_gemm_unpack(w);
        w->packed = p;
        w->packed_kind = BS_WPACK_I8;
        w->scale = scale;
        return 1;
    }
    if (w->k > BS_I8_MAX_K) return bs_fail(e, BS_EFORMAT, "%s: deeper than %d", qname, BS_I8_MAX_K), 0;
    float *scale = malloc((size_t)w->n * sizeof *scale);
    int8_t *rows = malloc((size_t)BS_Q8_STRIP_ROWS * w->k);
    void *block = bs_gemm_w8a8_alloc(w);
    int rc = scale && rows && block ? bs_qc_read(f, sname, "F32", w->n, 0, scale, e) : BS_ENOMEM;
    for (int s = 0; rc == 1 && s * BS_Q8_STRIP_ROWS < w->n; s++) {
        int r0 = s * BS_Q8_STRIP_ROWS, nr = w->n - r0 < BS_Q8_STRIP_ROWS ? w->n - r0 : BS_Q8_STRIP_ROWS;
        rc = bs_qc_read_rows(f, qname, "I8", w->n, w->k, r0, nr, rows, e);
        if (rc == 1) rc = check_q(sname, rows, (size_t)nr * w->k, scale + r0, nr, e);
        if (rc == 1) bs_gemm_w8a8_fill(w, block, s, rows, scale + r0);
    }
    if (rc == 1) bs_gemm_w8a8_attach(w, block);
    else free(block);
    free(scale);
    free(rows);
    return rc;
}

/* The int8 copies, factors and folded norms from path: 1 when read (m
 * changed), 0 when not usable (m as it was, e says why), BS_ENOMEM. */
static int read_cache(bs_model *m, bs_int8_state *st, const char *path, const char *key, bs_err *e) {
    bs_qc_file *f = NULL;
    int rc = bs_qc_open(&f, path, BS_QUANT_CACHE_FORMAT_INT8, key, e);
    if (rc == 1 && alloc_factors(m, st) < 0) rc = BS_ENOMEM;
    for (int l = 0; rc == 1 && l < m->cfg.n_layers; l++) {
        for (int i = 0; rc == 1 && i < BS_LAYER_MATS; i++) rc = read_mat(m, f, st, l, i, e);
        for (int g = 0; rc == 1 && g < BS_SMOOTH_GROUPS; g++) {
            if (!st->s[g]) continue;
            int nf = bs_smooth_factor_len(&m->cfg, g);
            float *s = st->s[g] + (size_t)l * nf;
            char name[96];
            snprintf(name, sizeof name, "model.layers.%d.smooth.%s", l, group_names[g]);
            rc = bs_qc_read(f, name, "F32", nf, 0, s, e);
            for (int j = 0; rc == 1 && j < nf; j++)
                if (!isfinite(s[j]) || !(s[j] > 0.0f)) rc = (bs_fail(e, BS_EFORMAT, "%s[%d] is %g", name, j, s[j]), 0);
        }
        if (rc == 1 && fold_layer(m, l, st) < 0) rc = BS_ENOMEM;
    }
    bs_qc_close(f);
    if (rc != 1) { /* all or nothing */
        bs_model_drop_copies(m);
        for (int g = 0; g < BS_SMOOTH_GROUPS; g++) free(st->s[g]), st->s[g] = NULL;
    }
    return rc;
}

static int write_cache(const bs_model *m, const bs_int8_state *st, const char *path, const char *key, bs_err *e) {
    const bs_config *c = &m->cfg;
    int count = 0, max = c->n_layers * (2 * BS_LAYER_MATS + 2 * BS_SMOOTH_GROUPS) + 1;
    bs_qc_tensor *t = calloc((size_t)max, sizeof *t);
    char rule[1024];
    if (!t) return bs_fail(e, BS_ENOMEM, "out of memory");
    for (int l = 0; l < c->n_layers; l++) {
        for (int i = 0; i < BS_LAYER_MATS; i++) {
            const bs_wmat *w = bs_layer_mat(&m->layers[l], i);
            t[count] = (bs_qc_tensor){.dtype = "I8", .n = w->n, .k = w->k};
            if (w->packed_kind == BS_WPACK_Q8) t[count].q8 = w;
            else t[count].src = w->packed;
            snprintf(t[count++].name, sizeof t->name, "model.layers.%d.%s.weight.q", l, bs_layer_mat_name(i));
            t[count] = (bs_qc_tensor){.dtype = "F32", .n = w->n, .src = w->scale};
            snprintf(t[count++].name, sizeof t->name, "model.layers.%d.%s.weight.scale", l, bs_layer_mat_name(i));
        }
        for (int g = 0; g < BS_SMOOTH_GROUPS; g++) {
            if (!st->s[g]) continue;
            int nf = bs_smooth_factor_len(c, g), na = bs_smooth_amax_len(c, g);
            t[count] = (bs_qc_tensor){.dtype = "F32", .n = nf, .src = st->s[g] + (size_t)l * nf};
            snprintf(t[count++].name, sizeof t->name, "model.layers.%d.smooth.%s", l, group_names[g]);
            t[count] = (bs_qc_tensor){.dtype = "F32", .n = na, .src = st->stats.amax[g] + (size_t)l * na};
            snprintf(t[count++].name, sizeof t->name, "model.layers.%d.act_max.%s", l, group_names[g]);
        }
    }
    if (st->n_ids > 0) {
        t[count] = (bs_qc_tensor){.dtype = "I32", .n = st->n_ids, .src = st->ids};
        snprintf(t[count++].name, sizeof t->name, "calibration.ids");
    }
    cache_rule(st, rule, sizeof rule);
    int rc = bs_qc_write(path, BS_QUANT_CACHE_FORMAT_INT8, key, rule, t, count, e);
    free(t);
    return rc;
}

/* ---- the mode -------------------------------------------------------------------------------- */

/* The plan, and the calibration tokens when it smooths anything. */
static int make_state(bs_model *m, bs_int8_state **out, bs_err *e) {
    bs_int8_state *st = calloc(1, sizeof *st);
    if (!st) return bs_fail(e, BS_ENOMEM, "out of memory");
    int rc = bs_int8_plan_get(m, &st->plan, e);
    if (rc < 0) {
        free(st);
        return rc;
    }
    if (st->plan.smooth && !m->calib_ids) {
        bs_log(BS_LOG_WARN, "model", "%s: no tokenizer to read the int8 calibration text with; no smoothing", m->dir);
        st->plan.smooth = 0;
        st->plan.alpha = 0.0;
    }
    if (st->plan.smooth) {
        st->n_ids = m->n_calib < m->cfg.max_pos ? m->n_calib : m->cfg.max_pos;
        if (!(st->ids = malloc((size_t)st->n_ids * sizeof *st->ids))) {
            free(st);
            return bs_fail(e, BS_ENOMEM, "out of memory");
        }
        memcpy(st->ids, m->calib_ids, (size_t)st->n_ids * sizeof *st->ids);
    }
    *out = st;
    return BS_OK;
}

/* Calibration (when smoothing) and quantization; m->compute stays bf16. */
static int quantize_fresh(bs_model *m, bs_int8_state *st, bs_err *e) {
    int rc = BS_OK;
    if (st->plan.smooth) {
        if ((rc = bs_act_stats_alloc(&st->stats, m, e)) < 0) return rc;
        m->compute = BS_COMPUTE_F32; /* the calibration forward: f32 on the stored weights */
        rc = bs_int8_calibrate(m, st->ids, st->n_ids, &st->stats, e);
        m->compute = BS_COMPUTE_BF16;
        if (rc < 0) return rc;
    }
    if ((rc = quantize_layers(m, st, e)) < 0) bs_model_drop_copies(m);
    return rc;
}

int bs_model_quantize_int8(bs_model *m, const char *cache_dir, bs_err *e) {
    bs_int8_state *st = NULL;
    int rc = make_state(m, &st, e);
    if (rc < 0) return rc;
    char key[65], rule[1024], plan[200], *path = NULL;
    cache_rule(st, rule, sizeof rule);
    bs_int8_plan_text(&st->plan, plan, sizeof plan);
    if (cache_dir) {
        bs_err ce = {0};
        if (bs_quant_cache_key(m, rule, key, &ce) < 0 || !(path = bs_quant_cache_path(cache_dir, "int8", key, &ce)))
            bs_log(BS_LOG_WARN, "model", "int8 weights cache: %s; quantizing without it", ce.msg);
    }
    if (path && bs_file_exists(path)) {
        bs_err ce = {0};
        int r = read_cache(m, st, path, key, &ce);
        if (r == 1) {
            for (int l = 0; l < m->cfg.n_layers; l++) drop_layer(m, l);
            m->int8 = st;
            m->quant = BS_QUANT_INT8;
            bs_log(BS_LOG_INFO, "model", "%s: int8 weights (%s) read from %s", m->dir, plan, path);
            free(path);
            return BS_OK;
        }
        if (r < 0) {
            rc = bs_fail(e, BS_ENOMEM, "out of memory reading %s", path);
            free(path);
            bs_int8_state_free(st);
            return rc;
        }
        bs_log(BS_LOG_WARN, "model", "%s; quantizing the weights again", ce.msg);
    }
    if ((rc = quantize_fresh(m, st, e)) < 0) {
        free(path);
        bs_int8_state_free(st);
        return rc;
    }
    m->int8 = st;
    m->quant = BS_QUANT_INT8;
    bs_log(BS_LOG_INFO, "model", "%s: dtype int8 (%s; kernel %s)", m->dir, plan, bs_gemm_i8_kernel_name());
    if (path) {
        bs_err we = {0};
        bs_quant_cache_log_write(m, path, write_cache(m, st, path, key, &we), &we);
    }
    free(path);
    return BS_OK;
}
