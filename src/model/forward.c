#include "model/forward.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "base/util.h"
#include "cpu/attention.h"
#include "cpu/attention_bf16.h"
#include "cpu/elementwise.h"
#include "cpu/hadamard.h"
#include "model/smooth.h"

/* Rows processed at once by everything except attention (norms, q/k/v,
 * o_proj, MLP): bounds the [rows, H] and [rows, I] intermediates (a 16k-token
 * state would otherwise need gigabytes) without changing any output, since
 * every GEMM row and every norm is independent of the others. 512 holds one
 * typical decision (300-470 packed tokens) in one chunk: every chunk streams
 * all the weights once, which at 256 rows was a third of an AMX decision's
 * GEMM time (~40 MB of intermediates for the 1.5B shape). */
enum { CHUNK = 512 };

/* Fixed-order f32 dot product: eight interleaved partial sums, combined in a
 * fixed tree; the order depends only on n. */
static float dot_f32(const float *a, const float *b, int n) {
    float s[8] = {0};
    int i = 0;
    for (; i + 8 <= n; i += 8)
        for (int l = 0; l < 8; l++) s[l] = s[l] + a[i + l] * b[i + l];
    for (; i < n; i++) s[i & 7] = s[i & 7] + a[i] * b[i];
    return ((s[0] + s[1]) + (s[2] + s[3])) + ((s[4] + s[5]) + (s[6] + s[7]));
}

/* RMSNorm(x; w)_i = w_i * (x_i * r), r = 1/sqrt(mean(x^2) + eps), as Hugging
 * Face's LlamaRMSNorm in f32 (x*r first, then the weight). */
static void rmsnorm(const float *x, const float *w, int h, float eps, float *out) {
    float ss = dot_f32(x, x, h);
    float r = 1.0f / sqrtf(ss / (float)h + eps);
    for (int i = 0; i < h; i++) out[i] = w[i] * (x[i] * r);
}

static void add_bias(float *y, int rows, int n, const float *b) {
    if (!b) return;
    for (int r = 0; r < rows; r++)
        for (int i = 0; i < n; i++) y[(size_t)r * n + i] = y[(size_t)r * n + i] + b[i];
}

/* Rotate-half RoPE on every head of one token row. */
static void rope(float *v, int n_heads, int hd, const float *cs, const float *sn) {
    int d = hd / 2;
    for (int h = 0; h < n_heads; h++) {
        float *u = v + (size_t)h * hd;
        for (int i = 0; i < d; i++) {
            float a = u[i], b = u[i + d];
            u[i] = a * cs[i] - b * sn[i];
            u[i + d] = b * cs[i] + a * sn[i];
        }
    }
}

/* One attention task: a block of consecutive queries of one unit (entries
 * q0..q0+nq-1 of the query list) for the query heads of kv head g. */
typedef struct {
    int q0, nq, g;
    double cost;
} attn_task_t;

typedef struct {
    const bs_model *m;
    const bs_fwd_input *in;
    const int32_t *unit_of;
    const int32_t *queries;     /* compact indices whose attention is computed */
    const attn_task_t *tasks;
    const bs_attn_keys *keys;   /* per unit, this layer */
    const float *q;             /* [M][Nh*hd] */
    float *out;                 /* [n queries][Nh*hd] */
    char *scratch;              /* per thread */
    size_t scratch_bytes;
} attn_job;

static void attn_task(void *arg, int task, int thread) {
    attn_job *j = arg;
    const bs_config *c = &j->m->cfg;
    const attn_task_t *tk = &j->tasks[task];
    int qd = c->n_heads * c->head_dim, t = j->queries[tk->q0];
    bs_attn_block b = {.keys = &j->keys[j->unit_of[t]], .g = tk->g, .rep = c->n_heads / c->n_kv_heads,
                       .hd = c->head_dim, .q = j->q + (size_t)t * qd, .q_stride = (size_t)qd,
                       .out = j->out + (size_t)tk->q0 * qd, .out_stride = (size_t)qd, .nq = tk->nq,
                       .pos0 = j->in->pos[t]};
    void *scratch = j->scratch + (size_t)thread * j->scratch_bytes;
    if (j->m->compute == BS_COMPUTE_BF16) bs_attn_bf16_run(&b, scratch);
    else bs_attn_run(&b, scratch);
}

static int cost_desc(const void *a, const void *b) {
    const attn_task_t *x = a, *y = b;
    if (x->cost != y->cost) return x->cost > y->cost ? -1 : 1;
    return x->q0 != y->q0 ? (x->q0 < y->q0 ? -1 : 1) : x->g - y->g;
}

/* Splits the query list into blocks of consecutive tokens of one unit (at
 * most bq each) times the kv heads, most expensive first so the pool's
 * dynamic scheduling balances the causal triangle. Returns the task count. */
static int attn_plan(const bs_fwd_input *in, const int32_t *unit_of, const int32_t *queries, int nq, int bq,
                     int nkv, attn_task_t *tasks) {
    int n = 0;
    for (int i = 0; i < nq;) {
        int len = 1;
        while (i + len < nq && len < bq && queries[i + len] == queries[i + len - 1] + 1 &&
               unit_of[queries[i + len]] == unit_of[queries[i]])
            len++;
        double keys = (double)in->pos[queries[i]] + len; /* keys of the block's last query */
        for (int g = 0; g < nkv; g++) tasks[n++] = (attn_task_t){i, len, g, keys * len};
        i += len;
    }
    qsort(tasks, (size_t)n, sizeof *tasks, cost_desc);
    return n;
}

/* The key sequence of every unit at layer l (spec 05 §9 V4): cached prefix,
 * ancestor ranges root-down, own block. */
static void attn_keys(const bs_fwd_input *in, int l, int kvd, const float *k, const float *v, bs_attn_keys *keys) {
    for (int ui = 0; ui < in->n_units; ui++) {
        const bs_unit *u = &in->units[ui];
        bs_attn_keys *ks = &keys[ui];
        ks->n_seg = 0;
        ks->stride = (size_t)kvd;
        const bs_kv *px = u->prefix;
        if (px && px->n_tokens) {
            ks->k[0] = px->k + (size_t)l * px->n_tokens * kvd;
            ks->v[0] = px->v + (size_t)l * px->n_tokens * kvd;
            ks->len[0] = px->n_tokens;
            ks->n_seg = 1;
        }
        for (int r = 0; r < u->n_ranges; r++) {
            ks->k[ks->n_seg] = k + (size_t)u->r_start[r] * kvd;
            ks->v[ks->n_seg] = v + (size_t)u->r_start[r] * kvd;
            ks->len[ks->n_seg++] = u->r_len[r];
        }
    }
}

/* Checks the compact list against the model and the tree invariants; fills
 * unit_of. Every token must see exactly pos + 1 keys (spec 05 §6 I5). */
int bs_forward_validate(const bs_model *m, const bs_fwd_input *in, int32_t *unit_of, bs_err *e) {
    const bs_config *c = &m->cfg;
    int M = in->n_tokens;
    if (M <= 0) return bs_fail(e, BS_EINVAL, "forward: no tokens");
    if (in->capture) {
        const bs_kv *px = in->n_units == 1 ? in->units[0].prefix : NULL;
        if (in->n_units != 1 || in->units[0].q_start != 0 || in->units[0].q_len != M || in->units[0].n_ranges != 1)
            return bs_fail(e, BS_EINTERNAL, "forward: a capture needs one unit over all tokens");
        if (in->capture->n_tokens != M + (px ? px->n_tokens : 0) || in->capture->n_layers != c->n_layers ||
            in->capture->kvd != c->n_kv_heads * c->head_dim)
            return bs_fail(e, BS_EINTERNAL, "forward: capture buffer does not fit");
    } else if (in->n_readouts <= 0 || in->n_out_ids < 0 || (in->n_out_ids == 0 && !in->hidden)) {
        return bs_fail(e, BS_EINVAL, "forward: nothing to read out");
    }
    for (int i = 0; i < M; i++) {
        if (in->ids[i] < 0 || in->ids[i] >= c->vocab)
            return bs_fail(e, BS_EINVAL, "forward: token id %d outside the vocabulary (%d)", in->ids[i], c->vocab);
        if (in->pos[i] < 0) return bs_fail(e, BS_EINVAL, "forward: negative position");
        if (in->pos[i] >= c->max_pos)
            return bs_fail(e, BS_ERANGE, "forward: position %d exceeds max_position_embeddings %d",
                           in->pos[i], c->max_pos);
        unit_of[i] = -1;
    }
    for (int ui = 0; ui < in->n_units; ui++) {
        const bs_unit *u = &in->units[ui];
        if (u->n_ranges < 1 || u->n_ranges > BS_MAX_TREE_DEPTH || u->q_len <= 0 || u->q_start < 0 ||
            u->q_start > M - u->q_len)
            return bs_fail(e, BS_EINTERNAL, "forward: unit %d is malformed", ui);
        int last = u->n_ranges - 1;
        if (u->r_start[last] != u->q_start || u->r_len[last] != u->q_len)
            return bs_fail(e, BS_EINTERNAL, "forward: unit %d: own block is not its last key range", ui);
        int before = 0;
        if (u->prefix) {
            if (u->prefix->n_layers != c->n_layers || u->prefix->kvd != c->n_kv_heads * c->head_dim ||
                u->prefix->n_tokens < 0)
                return bs_fail(e, BS_EINTERNAL, "forward: unit %d: cached prefix does not fit the model", ui);
            before = u->prefix->n_tokens;
        }
        for (int r = 0; r < last; r++) {
            if (u->r_len[r] < 0 || u->r_start[r] < 0 || u->r_start[r] > M - u->r_len[r] ||
                u->r_start[r] + u->r_len[r] > u->q_start)
                return bs_fail(e, BS_EINTERNAL, "forward: unit %d: key range %d is invalid", ui, r);
            before += u->r_len[r];
        }
        for (int t = u->q_start; t < u->q_start + u->q_len; t++) {
            if (unit_of[t] != -1) return bs_fail(e, BS_EINTERNAL, "forward: token %d is in two units", t);
            unit_of[t] = ui;
            if (in->pos[t] != before + (t - u->q_start))
                return bs_fail(e, BS_EINTERNAL, "forward: token %d sees %d keys but has position %d", t,
                               before + (t - u->q_start) + 1, in->pos[t]);
        }
    }
    for (int i = 0; i < M; i++)
        if (unit_of[i] < 0) return bs_fail(e, BS_EINTERNAL, "forward: token %d is in no unit", i);
    for (int r = 0; r < (in->capture ? 0 : in->n_readouts); r++)
        if (in->readouts[r] < 0 || in->readouts[r] >= M)
            return bs_fail(e, BS_EINVAL, "forward: readout row %d outside the token list", in->readouts[r]);
    if (in->n_lens < 0 || (in->n_lens > 0 && (in->capture || !in->lens_rows || !in->after_layer)))
        return bs_fail(e, BS_EINTERNAL, "forward: malformed lens rows");
    for (int j = 0; j < in->n_lens; j++)
        if (in->lens_rows[j] < 0 || in->lens_rows[j] >= in->n_readouts)
            return bs_fail(e, BS_EINTERNAL, "forward: lens row %d outside the readouts", in->lens_rows[j]);
    for (int u = 0; u < (in->capture ? 0 : in->n_out_ids); u++)
        if (in->out_ids[u] < 0 || in->out_ids[u] >= c->vocab)
            return bs_fail(e, BS_EINVAL, "forward: output id %d outside the vocabulary", in->out_ids[u]);
    return BS_OK;
}

/* The model's GEMM mode (f32, or bf16 inputs for dtype bf16), timed and
 * counted when a profile is asked for. */
static void gemm(const bs_model *m, bs_fwd_profile *pf, const float *x, int ldx, int rows, const bs_wmat *w,
                 float *y, int ldy) {
    double t0 = pf ? bs_now_ms() : 0;
    bs_gemm_mode(m->pool, m->compute, x, ldx, rows, w, y, ldy);
    if (pf) {
        pf->gemm_ms += bs_now_ms() - t0;
        pf->gemm_flop += 2.0 * rows * (double)w->n * (double)w->k;
    }
}

/* Element-wise work split over the pool by blocks of rows. Each element's
 * arithmetic is the same whichever thread runs it, so the split never
 * changes a result. */
typedef struct {
    void (*fn)(void *ctx, int r0, int r1);
    void *ctx;
    int rows;
} rows_job;

enum { ROW_BLOCK = 16 };

static void rows_task(void *arg, int task, int thread) {
    (void)thread;
    rows_job *j = arg;
    int r0 = task * ROW_BLOCK, r1 = r0 + ROW_BLOCK < j->rows ? r0 + ROW_BLOCK : j->rows;
    j->fn(j->ctx, r0, r1);
}

static void par_rows(const bs_model *m, int rows, void (*fn)(void *, int, int), void *ctx) {
    rows_job j = {fn, ctx, rows};
    bs_pool_run(m->pool, (rows + ROW_BLOCK - 1) / ROW_BLOCK, rows_task, &j);
}

typedef struct {
    float *x, *xn;            /* residual stream and its normed copy, [rows][H] */
    const float *y, *b;       /* a projection output (and its bias or NULL) to add to x first */
    const float *w;           /* RMSNorm weight, or NULL for no norm */
    float *g;                 /* SiLU·up: g [rows][I] becomes T(SiLU(g + bg)) * (u + bu) */
    const float *u, *bg, *bu;
    int H, I;
    float eps;
} ew_ctx;

/* x = x + (y + b) when y is set, then xn = RMSNorm(x; w) when w is set. */
static void residual_norm_rows(void *arg, int r0, int r1) {
    ew_ctx *c = arg;
    for (int r = r0; r < r1; r++) {
        float *xr = c->x + (size_t)r * c->H;
        if (c->y) {
            const float *yr = c->y + (size_t)r * c->H;
            if (c->b)
                for (int i = 0; i < c->H; i++) xr[i] = xr[i] + (yr[i] + c->b[i]);
            else
                for (int i = 0; i < c->H; i++) xr[i] = xr[i] + yr[i];
        }
        if (c->w) rmsnorm(xr, c->w, c->H, c->eps, c->xn + (size_t)r * c->H);
    }
}

static void silu_mul_rows(void *arg, int r0, int r1) {
    ew_ctx *c = arg;
    for (int r = r0; r < r1; r++) {
        bs_silu_mul(c->g + (size_t)r * c->I, c->u + (size_t)r * c->I, c->bg, c->bu, c->I);
    }
}

/* The int8 mode's rotation of down_proj's input (c->H: the block size). */
static void hadamard_rows(void *arg, int r0, int r1) {
    ew_ctx *c = arg;
    bs_hadamard_rows(c->g + (size_t)r0 * c->I, r1 - r0, c->I, c->I, c->H);
}

/* act_stats: amax[j] = max(amax[j], |x[r][j]|) over rows (NaN never wins). */
static void note_max(const bs_act_stats *st, int g, int l, int n, const float *x, int rows) {
    if (!st) return;
    float *amax = st->amax[g] + (size_t)l * n;
    for (int r = 0; r < rows; r++)
        for (int j = 0; j < n; j++) {
            float a = fabsf(x[(size_t)r * n + j]);
            if (a > amax[j]) amax[j] = a;
        }
}

/* The weights the int8 mode's smoothing replaces (model/smooth.h). */
static const float *norm1(const bs_layer *ly) { return ly->ln1_i8 ? ly->ln1_i8 : ly->ln1; }
static const float *norm2(const bs_layer *ly) { return ly->ln2_i8 ? ly->ln2_i8 : ly->ln2; }

static void layer_tail(const bs_model *m, const bs_fwd_input *in, int l, const bs_layer *ly, float *x,
                       const float *att, int rows, float *tmp, float *xn, float *g, float *u) {
    const bs_config *c = &m->cfg;
    bs_fwd_profile *pf = in->profile;
    int H = c->hidden, I = c->inter, qd = c->n_heads * c->head_dim;
    for (int r0 = 0; r0 < rows; r0 += CHUNK) {
        int cr = rows - r0 < CHUNK ? rows - r0 : CHUNK;
        float *xc = x + (size_t)r0 * H;
        note_max(in->act_stats, BS_G_O, l, qd, att + (size_t)r0 * qd, cr);
        gemm(m, pf, att + (size_t)r0 * qd, qd, cr, &ly->wo, tmp, H);
        ew_ctx rn = {.x = xc, .xn = xn, .y = tmp, .b = ly->bo, .w = norm2(ly), .H = H, .eps = (float)c->rms_eps};
        par_rows(m, cr, residual_norm_rows, &rn);
        note_max(in->act_stats, BS_G_GATE_UP, l, H, xn, cr);
        gemm(m, pf, xn, H, cr, &ly->wg, g, I);
        gemm(m, pf, xn, H, cr, &ly->wu, u, I);
        ew_ctx sm = {.g = g, .u = u, .bg = ly->bg, .bu = ly->bu_i8 ? ly->bu_i8 : ly->bu, .I = I};
        par_rows(m, cr, silu_mul_rows, &sm);
        note_max(in->act_stats, BS_G_DOWN, l, I, g, cr);
        if (ly->down_hadamard) {
            ew_ctx hr = {.g = g, .I = I, .H = ly->down_hadamard};
            par_rows(m, cr, hadamard_rows, &hr);
        }
        gemm(m, pf, g, I, cr, &ly->wd, tmp, H);
        ew_ctx rd = {.x = xc, .y = tmp, .b = ly->bd, .H = H};
        par_rows(m, cr, residual_norm_rows, &rd);
    }
}

void bs_forward_letters(const bs_model *m, const float *x, const int32_t *out_ids, int n, float *h, float *logits) {
    rmsnorm(x, m->final_norm, m->cfg.hidden, (float)m->cfg.rms_eps, h);
    for (int o = 0; o < n; o++) logits[o] = bs_dot_row(h, &m->lm_head, out_ids[o]);
}

/* The logit lens (bs_fwd_input.after_layer): the readout rows lens_rows of
 * the residual stream src (row r of src is readout r when by_readout, else
 * token readouts[r]) gathered into buf, then handed over. */
static void lens_rows(const bs_fwd_input *in, int l, const float *src, int by_readout, int H, float *buf) {
    for (int j = 0; j < in->n_lens; j++) {
        int32_t r = in->lens_rows[j], row = by_readout ? r : in->readouts[r];
        memcpy(buf + (size_t)j * H, src + (size_t)row * H, (size_t)H * sizeof *buf);
    }
    in->after_layer(in->after_ctx, l, buf);
}

/* Long on purpose: the forward pass reads best as one sequence in the
 * llama2.c style (buffers, embedding, each layer's steps in order, readout),
 * every step on the same buffers; the layer tail is already layer_tail. */
int bs_forward(const bs_model *m, const bs_fwd_input *in, float *logits, bs_err *e) {
    if (m->backend && in->n_lens > 0)
        return bs_fail(e, BS_EUNSUP, "the logit lens needs the CPU backend (this model runs on %s)", m->backend->name);
    if (m->backend) return m->backend->forward(m->backend, m, in, logits, e);
    const bs_config *c = &m->cfg;
    int M = in->n_tokens, R = in->capture ? 0 : in->n_readouts, H = c->hidden, I = c->inter;
    int hd = c->head_dim, qd = c->n_heads * hd, kvd = c->n_kv_heads * hd;
    int rc = BS_OK, n_tasks = 0;
    int nthreads = bs_pool_size(m->pool);
    bs_fwd_profile *pf = in->profile;
    double t_start = pf ? bs_now_ms() : 0;
    int32_t *unit_of = NULL, *all_rows = NULL;
    float *x = NULL, *xn = NULL, *q = NULL, *k = NULL, *v = NULL, *att = NULL, *tmp = NULL;
    float *g = NULL, *u = NULL, *xr = NULL, *attr = NULL, *lensbuf = NULL;
    char *scratch = NULL;
    attn_task_t *tasks = NULL;
    bs_attn_keys *keys = NULL;
    int rep = c->n_heads / c->n_kv_heads, bf16 = m->compute == BS_COMPUTE_BF16;
    int bq = bf16 ? bs_attn_bf16_block_queries(rep) : bs_attn_block_queries(rep);
    size_t scratch_bytes = bf16 ? bs_attn_bf16_scratch_bytes(hd, rep) : bs_attn_scratch_bytes(hd, rep);

    if (M <= 0) return bs_fail(e, BS_EINVAL, "forward: no tokens");
    unit_of = malloc((size_t)M * sizeof *unit_of);
    if (!unit_of) { rc = bs_fail(e, BS_ENOMEM, "forward: out of memory"); goto done; }
    if ((rc = bs_forward_validate(m, in, unit_of, e)) < 0) goto done;

    size_t rows_max = (size_t)(M > R ? M : R);
    int chunk = CHUNK < (int)rows_max ? CHUNK : (int)rows_max;
    /* the GEMMs' inputs and outputs on huge pages where the OS gives them */
    x = bs_malloc_big((size_t)M * H * sizeof *x);
    xn = bs_malloc_big((size_t)chunk * H * sizeof *xn);
    q = bs_malloc_big((size_t)M * qd * sizeof *q);
    k = bs_malloc_big((size_t)M * kvd * sizeof *k);
    v = bs_malloc_big((size_t)M * kvd * sizeof *v);
    /* layers before the last write their attention output over q (each
     * block copies its queries first); the last layer's readout rows need
     * their own rows */
    att = bs_malloc_big((size_t)(R ? R : 1) * qd * sizeof *att);
    tmp = bs_malloc_big((size_t)chunk * H * sizeof *tmp);
    g = bs_malloc_big((size_t)chunk * I * sizeof *g);
    u = bs_malloc_big((size_t)chunk * I * sizeof *u);
    scratch = aligned_alloc(64, (size_t)nthreads * scratch_bytes);
    tasks = malloc(rows_max * c->n_kv_heads * sizeof *tasks);
    keys = malloc((size_t)in->n_units * sizeof *keys);
    xr = malloc((size_t)(R ? R : 1) * H * sizeof *xr);
    attr = malloc((size_t)(R ? (R < chunk ? R : chunk) : 1) * qd * sizeof *attr);
    all_rows = malloc((size_t)M * sizeof *all_rows);
    if (in->n_lens > 0) lensbuf = malloc((size_t)in->n_lens * H * sizeof *lensbuf);
    if (!x || !xn || !q || !k || !v || !att || !tmp || !g || !u || !scratch || !tasks || !keys || !xr || !attr ||
        !all_rows || (in->n_lens > 0 && !lensbuf)) {
        rc = bs_fail(e, BS_ENOMEM, "forward: out of memory for %d tokens", M);
        goto done;
    }
    for (int i = 0; i < M; i++) all_rows[i] = i;

    for (int i = 0; i < M; i++) bs_tensor_read_f32(m->embed, (int64_t)in->ids[i] * H, H, x + (size_t)i * H);

    for (int l = 0; l < c->n_layers; l++) {
        const bs_layer *ly = &m->layers[l];
        int last = l == c->n_layers - 1;
        for (int r0 = 0; r0 < M; r0 += chunk) {
            int cr = M - r0 < chunk ? M - r0 : chunk;
            ew_ctx in_norm = {.x = x + (size_t)r0 * H, .xn = xn, .w = norm1(ly), .H = H, .eps = (float)c->rms_eps};
            par_rows(m, cr, residual_norm_rows, &in_norm);
            note_max(in->act_stats, BS_G_QKV, l, H, xn, cr);
            if (!last) {
                gemm(m, pf, xn, H, cr, &ly->wq, q + (size_t)r0 * qd, qd);
                add_bias(q + (size_t)r0 * qd, cr, qd, ly->bq);
            }
            gemm(m, pf, xn, H, cr, &ly->wk, k + (size_t)r0 * kvd, kvd);
            add_bias(k + (size_t)r0 * kvd, cr, kvd, ly->bk);
            gemm(m, pf, xn, H, cr, &ly->wv, v + (size_t)r0 * kvd, kvd);
            add_bias(v + (size_t)r0 * kvd, cr, kvd, ly->bv_i8 ? ly->bv_i8 : ly->bv);
        }
        /* The last layer needs keys and values of every token but queries only
         * at the readout rows (spec 05 §10 Z2). */
        for (int r0 = 0; last && r0 < R; r0 += chunk) {
            int cr = R - r0 < chunk ? R - r0 : chunk;
            for (int r = 0; r < cr; r++)
                rmsnorm(x + (size_t)in->readouts[r0 + r] * H, norm1(ly), H, (float)c->rms_eps, xn + (size_t)r * H);
            gemm(m, pf, xn, H, cr, &ly->wq, attr, qd);
            add_bias(attr, cr, qd, ly->bq);
            for (int r = 0; r < cr; r++)
                memcpy(q + (size_t)in->readouts[r0 + r] * qd, attr + (size_t)r * qd, (size_t)qd * sizeof *q);
        }
        for (int i = 0; i < M; i++) {
            const float *cs = m->rope_cos + (size_t)in->pos[i] * (hd / 2);
            const float *sn = m->rope_sin + (size_t)in->pos[i] * (hd / 2);
            rope(k + (size_t)i * kvd, c->n_kv_heads, hd, cs, sn);
        }
        if (bf16) { /* attention's inputs in the bf16 mode, cached prefixes included */
            bs_attn_round_bf16(k, (size_t)M * kvd);
            bs_attn_round_bf16(v, (size_t)M * kvd);
        }
        if (in->capture) {
            bs_kv *cap = in->capture;
            const bs_kv *px = in->units[0].prefix;
            int np = px ? px->n_tokens : 0;
            float *ck = cap->k + (size_t)l * cap->n_tokens * kvd, *cv = cap->v + (size_t)l * cap->n_tokens * kvd;
            if (np) {
                memcpy(ck, px->k + (size_t)l * np * kvd, (size_t)np * kvd * sizeof *ck);
                memcpy(cv, px->v + (size_t)l * np * kvd, (size_t)np * kvd * sizeof *cv);
            }
            memcpy(ck + (size_t)np * kvd, k, (size_t)M * kvd * sizeof *k);
            memcpy(cv + (size_t)np * kvd, v, (size_t)M * kvd * sizeof *v);
            if (last) break; /* 05 §10 Z3: a capture stops after the last layer's K/V */
        }
        const int32_t *qrows = last ? in->readouts : all_rows;
        int nq = last ? R : M;
        for (int r = 0; r < nq; r++) {
            int t = qrows[r];
            if (last && r > 0) { /* identical readout rows share one query row: rotate once */
                int dup = 0;
                for (int p = 0; p < r; p++) dup |= qrows[p] == t;
                if (dup) continue;
            }
            rope(q + (size_t)t * qd, c->n_heads, hd, m->rope_cos + (size_t)in->pos[t] * (hd / 2),
                 m->rope_sin + (size_t)in->pos[t] * (hd / 2));
        }
        double ta = pf ? bs_now_ms() : 0;
        if (l == 0 || last) n_tasks = attn_plan(in, unit_of, qrows, nq, bq, c->n_kv_heads, tasks);
        attn_keys(in, l, kvd, k, v, keys);
        float *out = last ? att : q;
        attn_job job = {m, in, unit_of, qrows, tasks, keys, q, out, scratch, scratch_bytes};
        bs_pool_run(m->pool, n_tasks, attn_task, &job);
        if (pf) {
            pf->attn_ms += bs_now_ms() - ta;
            double keys = 0; /* each query sees pos + 1 keys: QK and PV cost 4*hd flops per key and head */
            for (int r = 0; r < nq; r++) keys += (double)in->pos[qrows[r]] + 1;
            pf->attn_flop += 4.0 * hd * c->n_heads * keys;
        }
        if (last) {
            for (int r = 0; r < R; r++) memcpy(xr + (size_t)r * H, x + (size_t)in->readouts[r] * H, (size_t)H * sizeof *xr);
            layer_tail(m, in, l, ly, xr, att, R, tmp, xn, g, u);
            if (lensbuf) lens_rows(in, l, xr, 1, H, lensbuf);
        } else {
            layer_tail(m, in, l, ly, x, out, M, tmp, xn, g, u);
            if (lensbuf) lens_rows(in, l, x, 0, H, lensbuf);
            if (in->between_layers) in->between_layers(in->between_ctx);
        }
    }

    for (int r = 0; r < R; r++) { /* R is 0 for a capture */
        float *h = xn, *lg = logits ? logits + (size_t)r * in->n_out_ids : NULL;
        bs_forward_letters(m, xr + (size_t)r * H, in->out_ids, lg ? in->n_out_ids : 0, h, lg);
        if (in->hidden) memcpy(in->hidden + (size_t)r * H, h, (size_t)H * sizeof *h);
        for (int o = 0; lg && o < in->n_out_ids; o++)
            if (!isfinite(lg[o])) {
                rc = bs_fail(e, BS_EINTERNAL, "non-finite letter logits");
                goto done;
            }
    }
done:
    if (pf && rc == BS_OK) {
        pf->total_ms += bs_now_ms() - t_start;
        pf->tokens += M;
    }
    free(unit_of); free(all_rows);
    free(x); free(xn); free(q); free(k); free(v); free(att); free(tmp);
    free(g); free(u); free(scratch); free(tasks); free(keys); free(xr); free(attr); free(lensbuf);
    return rc;
}

size_t bs_kv_bytes(const bs_model *m, int32_t n_tokens) {
    return (size_t)n_tokens * (size_t)m->cfg.n_layers * 2u * (size_t)m->cfg.n_kv_heads * (size_t)m->cfg.head_dim *
           sizeof(float);
}

int bs_kv_alloc(bs_kv *kv, const bs_model *m, int32_t n_tokens, bs_err *e) {
    memset(kv, 0, sizeof *kv);
    kv->n_tokens = n_tokens;
    kv->n_layers = m->cfg.n_layers;
    kv->kvd = m->cfg.n_kv_heads * m->cfg.head_dim;
    size_t n = (size_t)n_tokens * kv->n_layers * kv->kvd;
    kv->k = calloc(n ? n : 1, sizeof *kv->k);
    kv->v = calloc(n ? n : 1, sizeof *kv->v);
    if (!kv->k || !kv->v) {
        bs_kv_free(kv);
        return bs_fail(e, BS_ENOMEM, "out of memory for the K/V of %d tokens", n_tokens);
    }
    return BS_OK;
}

void bs_kv_free(bs_kv *kv) {
    free(kv->k);
    free(kv->v);
    memset(kv, 0, sizeof *kv);
}
