/* The CUDA forward (see backend.h). One forward runs on a workspace — a
 * stream, cuBLASLt state and activation buffers — taken from a free list,
 * so a long-lane forward paused between layers (04 §10 L4) keeps its
 * tensors while an urgent forward runs on another workspace. Weights, the
 * RoPE table and cached lm_head rows are shared and read-only once made. */
#include "cuda/backend.h"

#include <cuda_runtime_api.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/log.h"
#include "base/util.h"
#include "cuda/convert.h"
#include "cuda/kernels.h"
#include "cuda/lt_gemm.h"
#include "model/forward.h"

/* Rows of the MLP per GEMM: bounds the [rows, 2I] intermediate; with an
 * invariant table the split changes no bit (every row is independent). */
enum { MLP_CHUNK = 2048, LM_CHUNK_ROWS = 32, ALIGN = 256 };

typedef struct cu_layer {
    void *wqkv, *wo, *wgu, *wd;   /* T, row-major [N][K]; qkv and gate|up fused */
    float *ln1, *ln2;
    float *bq, *bk, *bv, *bo, *bg, *bu, *bd; /* NULL without biases */
} cu_layer;

typedef struct cu_ws {
    struct cu_ws *next;
    cudaStream_t stream;
    bs_lt_ws lt;
    void *arena;         /* activations, carved per forward */
    size_t arena_bytes;
    char *meta_h;        /* pinned staging of the per-forward tables */
    void *meta_d;
    size_t meta_bytes;
    float *prefix;       /* uploaded cached prefixes */
    size_t prefix_floats;
    cudaEvent_t *ev;     /* profile: pairs around GEMMs and attention */
    int *ev_kind, n_ev, cap_ev;
} cu_ws;

typedef struct cu_impl {
    bs_backend base;
    char name[256];
    int device;
    bs_dtype dt;
    size_t es;           /* bytes per element of T */
    int H, I, L, nh, nkv, hd, qd, kvd, V, pmax;
    float eps, scale;
    void *weights;       /* one arena for everything uploaded at load */
    cu_layer *layers;
    void *emb;
    float *final_norm, *rope_cos, *rope_sin;
    bs_gemm_table table;
    int has_table, use_cublas;
    const bs_wmat *lm;   /* host lm_head of the model, rows widened on demand */
    pthread_mutex_t mu;  /* guards the lm_head row cache and the free list */
    int32_t *slot_of;    /* [V] cache slot of each vocabulary row, -1 when absent */
    float **lm_chunks;   /* LM_CHUNK_ROWS rows each; never moved or freed before destroy */
    int n_chunks, n_rows;
    cu_ws *free_ws;
    int n_ws;
} cu_impl;

static size_t align_up(size_t n) { return (n + ALIGN - 1) / ALIGN * ALIGN; }

static int cuda_fail(bs_err *e, cudaError_t ce, const char *what) {
    return bs_fail(e, ce == cudaErrorMemoryAllocation ? BS_ENOMEM : BS_EINTERNAL, "CUDA %s: %s", what,
                   cudaGetErrorString(ce));
}

int bs_cuda_cublas_version(long *version, bs_err *e) {
    int rc = bs_cublas_load(e);
    if (rc < 0) return rc;
    *version = (long)cublasLtGetVersion();
    return BS_OK;
}

const char *bs_cuda_arch_list(void) { return "sm_80, sm_89, sm_90 (+ PTX compute_90)"; }

int bs_cuda_device_count(void) {
    int n = 0, usable = 0;
    if (cudaGetDeviceCount(&n) != cudaSuccess) {
        cudaGetLastError(); /* no driver or no device: not sticky, but clear it */
        return 0;
    }
    for (int i = 0; i < n; i++) {
        int major = 0;
        if (cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, i) == cudaSuccess && major >= 8)
            usable++;
    }
    cudaGetLastError();
    return usable;
}

/* ---- workspaces ---- */

static void ws_free(cu_ws *w) {
    if (!w) return;
    if (w->stream) cudaStreamSynchronize(w->stream);
    for (int i = 0; i < w->cap_ev; i++)
        if (w->ev[i]) cudaEventDestroy(w->ev[i]);
    free(w->ev);
    free(w->ev_kind);
    bs_lt_ws_free(&w->lt);
    if (w->arena) cudaFree(w->arena);
    if (w->meta_d) cudaFree(w->meta_d);
    if (w->meta_h) cudaFreeHost(w->meta_h);
    if (w->prefix) cudaFree(w->prefix);
    if (w->stream) cudaStreamDestroy(w->stream);
    free(w);
}

static int ws_get(cu_impl *c, cu_ws **out, bs_err *e) {
    pthread_mutex_lock(&c->mu);
    cu_ws *w = c->free_ws;
    if (w) c->free_ws = w->next;
    pthread_mutex_unlock(&c->mu);
    if (w) {
        *out = w;
        return BS_OK;
    }
    if (!(w = calloc(1, sizeof *w))) return bs_fail(e, BS_ENOMEM, "out of memory");
    cudaError_t ce = cudaStreamCreateWithFlags(&w->stream, cudaStreamNonBlocking);
    if (ce != cudaSuccess) {
        w->stream = NULL;
        ws_free(w);
        return cuda_fail(e, ce, "stream");
    }
    int rc = bs_lt_ws_init(&w->lt, c->dt, c->has_table ? &c->table : NULL, c->use_cublas, e);
    if (rc < 0) {
        ws_free(w);
        return rc;
    }
    pthread_mutex_lock(&c->mu);
    c->n_ws++;
    pthread_mutex_unlock(&c->mu);
    *out = w;
    return BS_OK;
}

static void ws_put(cu_impl *c, cu_ws *w) {
    pthread_mutex_lock(&c->mu);
    w->next = c->free_ws;
    c->free_ws = w;
    pthread_mutex_unlock(&c->mu);
}

/* Grows a device buffer to at least n bytes (contents are not kept). */
static int grow_dev(void **p, size_t *cap, size_t n, const char *what, bs_err *e) {
    if (n <= *cap && *p) return BS_OK;
    size_t want = align_up(n + n / 4);
    if (*p) cudaFree(*p);
    *p = NULL;
    *cap = 0;
    cudaError_t ce = cudaMalloc(p, want);
    if (ce != cudaSuccess) {
        *p = NULL;
        cudaGetLastError();
        return bs_fail(e, BS_ENOMEM, "CUDA: out of GPU memory for the %s (%zu MiB)", what, want >> 20);
    }
    *cap = want;
    return BS_OK;
}

/* ---- profile events ---- */

static int prof_mark(cu_ws *w, int kind) {
    if (w->n_ev == w->cap_ev) {
        int nc = w->cap_ev ? w->cap_ev * 2 : 256;
        cudaEvent_t *ev = realloc(w->ev, (size_t)nc * sizeof *ev);
        if (!ev) return -1;
        w->ev = ev;
        int *kd = realloc(w->ev_kind, (size_t)nc * sizeof *kd);
        if (!kd) return -1;
        w->ev_kind = kd;
        for (int i = w->cap_ev; i < nc; i++) w->ev[i] = NULL;
        w->cap_ev = nc;
    }
    if (!w->ev[w->n_ev] && cudaEventCreate(&w->ev[w->n_ev]) != cudaSuccess) {
        w->ev[w->n_ev] = NULL;
        return -1;
    }
    w->ev_kind[w->n_ev] = kind;
    cudaEventRecord(w->ev[w->n_ev], w->stream);
    return w->n_ev++;
}

/* ---- one forward ---- */

typedef struct fwd {
    cu_impl *c;
    cu_ws *w;
    const bs_fwd_input *in;
    bs_fwd_profile *pf;
    int M, R, U, rows_max, chunk;
    /* activations (device) */
    void *x, *xn, *qkv, *att, *tmp, *gu, *mm, *xr, *h;
    float *q, *k, *v, *logits;
    /* per-forward tables (device) */
    int32_t *ids, *pos, *ident, *qtok_last, *qout_last, *readouts;
    bs_cu_unit *units, *units_last;
    const float **lmrows;
    int n_units, n_last, blocks_all, blocks_last;
} fwd;

static void *elt(const fwd *f, void *base, size_t i) { return (char *)base + i * f->c->es; }

static int gemm(fwd *f, const void *wt, int n, int k, const void *x, int m, void *y, bs_err *e) {
    int mark = f->pf ? prof_mark(f->w, 0) : -1;
    int rc = bs_lt_matmul(&f->w->lt, wt, n, k, x, m, y, f->w->stream, e);
    if (mark >= 0 && prof_mark(f->w, 1) >= 0) f->pf->gemm_flop += 2.0 * m * (double)n * k;
    return rc;
}

#define CK(call, what) do { cudaError_t ce_ = (call); if (ce_ != cudaSuccess) return cuda_fail(e, ce_, what); } while (0)

/* o_proj + residual, norm, MLP + residual on `rows` rows of xb. */
static int layer_tail(fwd *f, const cu_layer *ly, void *xb, int rows, bs_err *e) {
    cu_impl *c = f->c;
    cudaStream_t s = f->w->stream;
    int rc;
    if ((rc = gemm(f, ly->wo, c->H, c->qd, f->att, rows, f->tmp, e)) < 0) return rc;
    CK(bs_cu_bias_residual(c->dt, xb, f->tmp, ly->bo, rows, c->H, s), "bias_residual");
    CK(bs_cu_rmsnorm(c->dt, xb, NULL, rows, c->H, ly->ln2, c->eps, f->xn, s), "rmsnorm");
    for (int r0 = 0; r0 < rows; r0 += f->chunk) {
        int cr = rows - r0 < f->chunk ? rows - r0 : f->chunk;
        if ((rc = gemm(f, ly->wgu, 2 * c->I, c->H, elt(f, f->xn, (size_t)r0 * c->H), cr, f->gu, e)) < 0) return rc;
        CK(bs_cu_silu_mul(c->dt, f->gu, ly->bg, ly->bu, cr, c->I, f->mm, s), "silu_mul");
        if ((rc = gemm(f, ly->wd, c->H, c->I, f->mm, cr, f->tmp, e)) < 0) return rc;
        CK(bs_cu_bias_residual(c->dt, elt(f, xb, (size_t)r0 * c->H), f->tmp, ly->bd, cr, c->H, s), "bias_residual");
    }
    return BS_OK;
}

static int attention(fwd *f, int layer, int last, bs_err *e) {
    cu_impl *c = f->c;
    int mark = f->pf ? prof_mark(f->w, 2) : -1;
    cudaError_t ce = last ? bs_cu_attention(c->dt, f->q, f->k, f->v, f->pos, f->qtok_last, f->qout_last, f->units_last,
                                            f->n_last, f->blocks_last, layer, c->nh, c->nkv, c->hd, c->scale, f->att,
                                            f->w->stream)
                          : bs_cu_attention(c->dt, f->q, f->k, f->v, f->pos, f->ident, f->ident, f->units,
                                            f->n_units, f->blocks_all, layer, c->nh, c->nkv, c->hd, c->scale, f->att,
                                            f->w->stream);
    if (ce != cudaSuccess) return cuda_fail(e, ce, "attention");
    if (mark >= 0 && prof_mark(f->w, 3) >= 0) {
        const bs_fwd_input *in = f->in;
        double keys = 0; /* as the CPU profile: 4*hd flops per visible key and head */
        if (last)
            for (int r = 0; r < f->R; r++) keys += (double)in->pos[in->readouts[r]] + 1;
        else
            for (int t = 0; t < f->M; t++) keys += (double)in->pos[t] + 1;
        f->pf->attn_flop += 4.0 * c->hd * c->nh * keys;
    }
    return BS_OK;
}

/* Device rows of lm_head for the ids (05 §11: letter rows only, widened to
 * f32), uploaded on first use. A row is published only once its copy has
 * completed: other workspaces' streams may read it at once. */
static int lm_rows(cu_impl *c, cudaStream_t st, const int32_t *ids, int n, const float **out, bs_err *e) {
    int rc = BS_OK;
    float *row = NULL;
    pthread_mutex_lock(&c->mu);
    for (int u = 0; u < n; u++) {
        int id = ids[u];
        if (c->slot_of[id] < 0) {
            if (c->n_rows == c->n_chunks * LM_CHUNK_ROWS) {
                float **nc = realloc(c->lm_chunks, (size_t)(c->n_chunks + 1) * sizeof *nc);
                if (!nc) { rc = bs_fail(e, BS_ENOMEM, "out of memory"); goto done; }
                c->lm_chunks = nc;
                cudaError_t ce = cudaMalloc((void **)&nc[c->n_chunks], (size_t)LM_CHUNK_ROWS * c->H * sizeof(float));
                if (ce != cudaSuccess) { rc = cuda_fail(e, ce, "lm_head rows"); goto done; }
                c->n_chunks++;
            }
            if (!row && !(row = malloc((size_t)c->H * sizeof *row))) { rc = bs_fail(e, BS_ENOMEM, "out of memory"); goto done; }
            const char *src = (const char *)c->lm->data + (size_t)id * c->H * bs_dtype_size(c->lm->dtype);
            for (int i = 0; i < c->H; i++) bs_cvt_one(src, c->lm->dtype, i, BS_F32, &row[i]);
            int s = c->n_rows;
            float *dst = c->lm_chunks[s / LM_CHUNK_ROWS] + (size_t)(s % LM_CHUNK_ROWS) * c->H;
            cudaError_t ce = cudaMemcpyAsync(dst, row, (size_t)c->H * sizeof *row, cudaMemcpyHostToDevice, st);
            if (ce == cudaSuccess) ce = cudaStreamSynchronize(st);
            if (ce != cudaSuccess) { rc = cuda_fail(e, ce, "lm_head upload"); goto done; }
            c->slot_of[id] = s;
            c->n_rows++;
        }
        int s = c->slot_of[id];
        out[u] = c->lm_chunks[s / LM_CHUNK_ROWS] + (size_t)(s % LM_CHUNK_ROWS) * c->H;
    }
done:
    pthread_mutex_unlock(&c->mu);
    free(row);
    return rc;
}

static int blocks_of(const cu_impl *c, int qn) {
    int rows = qn * (c->nh / c->nkv);
    return (rows + BS_CU_ATT_ROWS - 1) / BS_CU_ATT_ROWS;
}

static void unit_desc(const bs_unit *u, bs_cu_unit *d) {
    memset(d, 0, sizeof *d);
    d->n_ranges = u->n_ranges;
    for (int r = 0; r < u->n_ranges; r++) {
        d->r_start[r] = u->r_start[r];
        d->r_len[r] = u->r_len[r];
    }
    d->np = u->prefix ? u->prefix->n_tokens : 0;
}

/* Builds the per-forward tables in pinned memory, uploads them and the
 * cached prefixes, and carves the activation arena. Long on purpose: the
 * offsets carved first are used by every later step up to the one upload at
 * the end, and the code runs only on a GPU, so it stays as it was measured
 * there. */
static int setup(fwd *f, const int32_t *unit_of, bs_err *e) {
    cu_impl *c = f->c;
    cu_ws *w = f->w;
    const bs_fwd_input *in = f->in;
    int M = f->M, R = f->R, U = f->U, rc;
    cudaStream_t s = w->stream;

    /* activations */
    size_t es = c->es, H = (size_t)c->H, rm = (size_t)f->rows_max, R1 = (size_t)(R ? R : 1);
    size_t off = 0, o_x, o_xn, o_qkv, o_att, o_tmp, o_gu, o_mm, o_xr, o_h, o_q, o_k, o_v, o_lg;
#define CARVE(o, bytes) do { o = off; off = align_up(off + (bytes)); } while (0)
    CARVE(o_x, (size_t)M * H * es);
    CARVE(o_xn, rm * H * es);
    CARVE(o_qkv, (size_t)M * (c->qd + 2 * c->kvd) * es);
    CARVE(o_att, rm * c->qd * es);
    CARVE(o_tmp, rm * H * es);
    CARVE(o_gu, (size_t)f->chunk * 2 * c->I * es);
    CARVE(o_mm, (size_t)f->chunk * c->I * es);
    CARVE(o_xr, R1 * H * es);
    CARVE(o_h, R1 * H * es);
    CARVE(o_q, (size_t)M * c->qd * sizeof(float));
    CARVE(o_k, (size_t)M * c->kvd * sizeof(float));
    CARVE(o_v, (size_t)M * c->kvd * sizeof(float));
    CARVE(o_lg, R1 * (size_t)(U ? U : 1) * sizeof(float));
    if ((rc = grow_dev(&w->arena, &w->arena_bytes, off, "activations", e)) < 0) return rc;
    char *a = w->arena;
    f->x = a + o_x; f->xn = a + o_xn; f->qkv = a + o_qkv; f->att = a + o_att; f->tmp = a + o_tmp;
    f->gu = a + o_gu; f->mm = a + o_mm; f->xr = a + o_xr; f->h = a + o_h;
    f->q = (float *)(a + o_q); f->k = (float *)(a + o_k); f->v = (float *)(a + o_v);
    f->logits = (float *)(a + o_lg);

    /* last-layer units: each unit's readout queries, grouped per unit */
    int *cnt = calloc((size_t)in->n_units + 1, sizeof *cnt);
    if (!cnt) return bs_fail(e, BS_ENOMEM, "out of memory");
    for (int r = 0; r < R; r++) cnt[unit_of[in->readouts[r]]]++;
    f->n_last = 0;
    for (int u = 0; u < in->n_units; u++) f->n_last += cnt[u] > 0;

    size_t m_ids, m_pos, m_ident, m_qtl, m_qol, m_ro, m_units, m_last, m_lm;
    size_t ident_n = (size_t)(M > R ? M : R);
    off = 0;
    CARVE(m_ids, (size_t)M * 4);
    CARVE(m_pos, (size_t)M * 4);
    CARVE(m_ident, ident_n * 4);
    CARVE(m_qtl, R1 * 4);
    CARVE(m_qol, R1 * 4);
    CARVE(m_ro, R1 * 4);
    CARVE(m_units, (size_t)in->n_units * sizeof(bs_cu_unit));
    CARVE(m_last, (size_t)(f->n_last ? f->n_last : 1) * sizeof(bs_cu_unit));
    CARVE(m_lm, (size_t)(U ? U : 1) * sizeof(float *));
#undef CARVE
    if (off > w->meta_bytes) {
        if (w->meta_h) cudaFreeHost(w->meta_h);
        if (w->meta_d) cudaFree(w->meta_d);
        w->meta_h = NULL;
        w->meta_d = NULL;
        w->meta_bytes = 0;
        size_t want = align_up(off + off / 2);
        cudaError_t ce = cudaMallocHost((void **)&w->meta_h, want);
        if (ce == cudaSuccess) ce = cudaMalloc(&w->meta_d, want);
        if (ce != cudaSuccess) {
            free(cnt);
            return cuda_fail(e, ce, "forward tables");
        }
        w->meta_bytes = want;
    }
    char *mh = w->meta_h, *md = w->meta_d;
    memcpy(mh + m_ids, in->ids, (size_t)M * 4);
    memcpy(mh + m_pos, in->pos, (size_t)M * 4);
    int32_t *ident = (int32_t *)(mh + m_ident);
    for (size_t i = 0; i < ident_n; i++) ident[i] = (int32_t)i;
    if (R) memcpy(mh + m_ro, in->readouts, (size_t)R * 4);

    /* cached prefixes: each distinct one uploaded once per forward */
    const bs_kv **seen = calloc((size_t)in->n_units + 1, sizeof *seen);
    size_t *at = calloc((size_t)in->n_units + 1, sizeof *at);
    int n_seen = 0;
    size_t floats = 0;
    if (!seen || !at) { rc = bs_fail(e, BS_ENOMEM, "out of memory"); goto done; }
    for (int u = 0; u < in->n_units; u++) {
        const bs_kv *px = in->units[u].prefix;
        if (!px || !px->n_tokens) continue;
        int j = 0;
        while (j < n_seen && seen[j] != px) j++;
        if (j < n_seen) continue;
        seen[n_seen] = px;
        at[n_seen++] = floats;
        floats += 2 * (size_t)c->L * px->n_tokens * c->kvd;
    }
    if (floats > w->prefix_floats) {
        size_t bytes = w->prefix_floats * sizeof(float);
        void *p = w->prefix;
        if ((rc = grow_dev(&p, &bytes, floats * sizeof(float), "cached prefixes", e)) < 0) {
            w->prefix = NULL;
            w->prefix_floats = 0;
            goto done;
        }
        w->prefix = p;
        w->prefix_floats = bytes / sizeof(float);
    }
    for (int j = 0; j < n_seen; j++) {
        size_t n = (size_t)c->L * seen[j]->n_tokens * c->kvd;
        cudaError_t ce = cudaMemcpyAsync(w->prefix + at[j], seen[j]->k, n * sizeof(float), cudaMemcpyHostToDevice, s);
        if (ce == cudaSuccess)
            ce = cudaMemcpyAsync(w->prefix + at[j] + n, seen[j]->v, n * sizeof(float), cudaMemcpyHostToDevice, s);
        if (ce != cudaSuccess) { rc = cuda_fail(e, ce, "prefix upload"); goto done; }
    }

    /* units of the layers before the last, and of the last (readouts only) */
    bs_cu_unit *ua = (bs_cu_unit *)(mh + m_units), *ul = (bs_cu_unit *)(mh + m_last);
    int32_t *qtl = (int32_t *)(mh + m_qtl), *qol = (int32_t *)(mh + m_qol);
    int *first = calloc((size_t)in->n_units + 1, sizeof *first);
    if (!first) { rc = bs_fail(e, BS_ENOMEM, "out of memory"); goto done; }
    f->blocks_all = 0;
    f->blocks_last = 0;
    int li = 0, qo = 0;
    for (int u = 0; u < in->n_units; u++) {
        const bs_unit *bu = &in->units[u];
        bs_cu_unit d;
        unit_desc(bu, &d);
        if (d.np) {
            int j = 0;
            while (seen[j] != bu->prefix) j++;
            d.pk = (const float *)((float *)w->prefix + at[j]);
            d.pv = d.pk + (size_t)c->L * d.np * c->kvd;
        }
        d.qoff = bu->q_start;
        d.qn = bu->q_len;
        d.block0 = f->blocks_all;
        f->blocks_all += blocks_of(c, d.qn);
        ua[u] = d;
        first[u] = qo;
        qo += cnt[u];
        if (cnt[u]) {
            d.qoff = first[u];
            d.qn = cnt[u];
            d.block0 = f->blocks_last;
            f->blocks_last += blocks_of(c, d.qn);
            ul[li++] = d;
        }
    }
    f->n_units = in->n_units;
    for (int u = 0; u < in->n_units; u++) cnt[u] = 0;
    for (int r = 0; r < R; r++) { /* readouts in their order within each unit */
        int u = unit_of[in->readouts[r]];
        qtl[first[u] + cnt[u]] = in->readouts[r];
        qol[first[u] + cnt[u]] = r;
        cnt[u]++;
    }
    free(first);
    if (U && (rc = lm_rows(c, s, in->out_ids, U, (const float **)(mh + m_lm), e)) < 0) goto done;

    cudaError_t ce = cudaMemcpyAsync(md, mh, off, cudaMemcpyHostToDevice, s);
    if (ce != cudaSuccess) { rc = cuda_fail(e, ce, "forward tables upload"); goto done; }
    f->ids = (int32_t *)(md + m_ids);
    f->pos = (int32_t *)(md + m_pos);
    f->ident = (int32_t *)(md + m_ident);
    f->qtok_last = (int32_t *)(md + m_qtl);
    f->qout_last = (int32_t *)(md + m_qol);
    f->readouts = (int32_t *)(md + m_ro);
    f->units = (bs_cu_unit *)(md + m_units);
    f->units_last = (bs_cu_unit *)(md + m_last);
    f->lmrows = (const float **)(md + m_lm);
    rc = BS_OK;
done:
    free(cnt);
    free(seen);
    free(at);
    return rc;
}

static int run_layers(fwd *f, bs_err *e) {
    cu_impl *c = f->c;
    const bs_fwd_input *in = f->in;
    cudaStream_t s = f->w->stream;
    int M = f->M, R = f->R, rc, nqkv = c->qd + 2 * c->kvd;
    CK(bs_cu_embed(c->dt, f->ids, M, c->emb, c->H, f->x, s), "embedding");
    for (int l = 0; l < c->L; l++) {
        const cu_layer *ly = &c->layers[l];
        int last = l == c->L - 1;
        CK(bs_cu_rmsnorm(c->dt, f->x, NULL, M, c->H, ly->ln1, c->eps, f->xn, s), "rmsnorm");
        /* basal-rs computes every query of the last layer too; attention then
         * runs only for the readout rows (05 §10 Z2) */
        if ((rc = gemm(f, ly->wqkv, nqkv, c->H, f->xn, M, f->qkv, e)) < 0) return rc;
        CK(bs_cu_qkv_rope(c->dt, f->qkv, M, c->qd, c->kvd, c->hd, ly->bq, ly->bk, ly->bv, f->pos, c->rope_cos,
                          c->rope_sin, f->q, f->k, f->v, s),
           "qkv_rope");
        if (in->capture) {
            bs_kv *cap = in->capture;
            const bs_kv *px = in->units[0].prefix;
            int np = px ? px->n_tokens : 0;
            float *ck = cap->k + (size_t)l * cap->n_tokens * c->kvd, *cv = cap->v + (size_t)l * cap->n_tokens * c->kvd;
            if (np) {
                memcpy(ck, px->k + (size_t)l * np * c->kvd, (size_t)np * c->kvd * sizeof *ck);
                memcpy(cv, px->v + (size_t)l * np * c->kvd, (size_t)np * c->kvd * sizeof *cv);
            }
            size_t bytes = (size_t)M * c->kvd * sizeof(float);
            CK(cudaMemcpyAsync(ck + (size_t)np * c->kvd, f->k, bytes, cudaMemcpyDeviceToHost, s), "capture");
            CK(cudaMemcpyAsync(cv + (size_t)np * c->kvd, f->v, bytes, cudaMemcpyDeviceToHost, s), "capture");
            if (last) break; /* 05 §10 Z3 */
        }
        if ((rc = attention(f, l, last, e)) < 0) return rc;
        if (last) {
            CK(bs_cu_gather(c->dt, f->x, f->readouts, R, c->H, f->xr, s), "gather");
            if ((rc = layer_tail(f, ly, f->xr, R, e)) < 0) return rc;
        } else {
            if ((rc = layer_tail(f, ly, f->x, M, e)) < 0) return rc;
            if (in->between_layers) {
                /* 04 §10 L4: the layer is complete before the lane may pause */
                CK(cudaStreamSynchronize(s), "layer");
                in->between_layers(in->between_ctx);
            }
        }
    }
    if (!in->capture) {
        CK(bs_cu_rmsnorm(c->dt, f->xr, NULL, R, c->H, c->final_norm, c->eps, f->h, s), "final norm");
        if (f->U) CK(bs_cu_letters(c->dt, f->h, R, c->H, f->lmrows, f->U, f->logits, s), "letter readout");
    }
    return BS_OK;
}

static int cu_forward(bs_backend *b, const bs_model *m, const bs_fwd_input *in, float *logits, bs_err *e) {
    cu_impl *c = b->impl;
    bs_fwd_profile *pf = in->profile;
    double t0 = pf ? bs_now_ms() : 0;
    int M = in->n_tokens, rc;
    if (M <= 0) return bs_fail(e, BS_EINVAL, "forward: no tokens");
    int32_t *unit_of = malloc((size_t)M * sizeof *unit_of);
    if (!unit_of) return bs_fail(e, BS_ENOMEM, "forward: out of memory");
    /* the CPU forward's checks: every device index the kernels derive from the input is then in range */
    if ((rc = bs_forward_validate(m, in, unit_of, e)) < 0) {
        free(unit_of);
        return rc;
    }
    cudaError_t ce = cudaSetDevice(c->device);
    if (ce != cudaSuccess) {
        free(unit_of);
        return cuda_fail(e, ce, "set device");
    }
    fwd f;
    memset(&f, 0, sizeof f);
    f.c = c;
    f.in = in;
    f.pf = pf;
    f.M = M;
    f.R = in->capture ? 0 : in->n_readouts;
    f.U = in->capture ? 0 : in->n_out_ids;
    f.rows_max = M > f.R ? M : f.R;
    f.chunk = f.rows_max < MLP_CHUNK ? f.rows_max : MLP_CHUNK;
    if ((rc = ws_get(c, &f.w, e)) < 0) {
        free(unit_of);
        return rc;
    }
    f.w->n_ev = 0;
    rc = setup(&f, unit_of, e);
    if (rc == BS_OK) rc = run_layers(&f, e);
    /* always drain the stream: its buffers go back to the free list */
    ce = cudaStreamSynchronize(f.w->stream);
    if (rc == BS_OK && ce != cudaSuccess) rc = cuda_fail(e, ce, "forward");
    if (rc == BS_OK && f.R && f.U) {
        ce = cudaMemcpy(logits, f.logits, (size_t)f.R * f.U * sizeof *logits, cudaMemcpyDeviceToHost);
        if (ce != cudaSuccess) rc = cuda_fail(e, ce, "logits");
        for (size_t i = 0; rc == BS_OK && i < (size_t)f.R * f.U; i++)
            if (!isfinite(logits[i])) rc = bs_fail(e, BS_EINTERNAL, "non-finite letter logits");
    }
    if (rc == BS_OK && f.R && in->hidden) { /* evidence (05 §14 E1): final-normed rows, widened to f32 */
        size_t n = (size_t)f.R * c->H;
        void *tmp = malloc(n * c->es);
        if (!tmp) rc = bs_fail(e, BS_ENOMEM, "forward: out of memory");
        else if ((ce = cudaMemcpy(tmp, f.h, n * c->es, cudaMemcpyDeviceToHost)) != cudaSuccess)
            rc = cuda_fail(e, ce, "hidden states");
        else
            for (size_t i = 0; i < n; i++)
                in->hidden[i] = c->dt == BS_F32 ? ((const float *)tmp)[i]
                                : c->dt == BS_F16 ? bs_f16_to_f32(((const uint16_t *)tmp)[i])
                                                  : bs_bf16_to_f32(((const uint16_t *)tmp)[i]);
        free(tmp);
    }
    if (rc == BS_OK && pf) {
        for (int i = 0; i + 1 < f.w->n_ev; i++) {
            int k0 = f.w->ev_kind[i];
            float ms = 0;
            if ((k0 != 0 && k0 != 2) || f.w->ev_kind[i + 1] != k0 + 1) continue; /* a mark that failed */
            if (cudaEventElapsedTime(&ms, f.w->ev[i], f.w->ev[i + 1]) == cudaSuccess) {
                if (k0 == 0) pf->gemm_ms += ms;
                else pf->attn_ms += ms;
            }
            i++;
        }
        pf->total_ms += bs_now_ms() - t0;
        pf->tokens += M;
    }
    cudaGetLastError();
    ws_put(c, f.w);
    free(unit_of);
    return rc;
}

/* ---- load ---- */

static void cu_destroy(bs_backend *b) {
    cu_impl *c = b->impl;
    cudaSetDevice(c->device);
    while (c->free_ws) {
        cu_ws *w = c->free_ws;
        c->free_ws = w->next;
        ws_free(w);
    }
    for (int i = 0; i < c->n_chunks; i++) cudaFree(c->lm_chunks[i]);
    free(c->lm_chunks);
    free(c->slot_of);
    free(c->layers);
    if (c->weights) cudaFree(c->weights);
    if (c->has_table) bs_gemm_table_free(&c->table);
    pthread_mutex_destroy(&c->mu);
    free(c);
    cudaGetLastError(); /* e.g. cudaSetDevice above when creation failed for want of a device */
}

typedef struct upload {
    cu_impl *c;
    bs_pool *pool;
    char *arena;       /* NULL while sizing */
    size_t off;
    void *stage;       /* pinned, STAGE_ELEMS elements of the widest type */
} upload;

enum { STAGE_ELEMS = 1 << 24 };

static void *place(upload *u, size_t bytes) {
    void *p = u->arena ? u->arena + u->off : NULL;
    u->off = align_up(u->off + bytes);
    return p;
}

/* rows [row0, row0 + w->n) of dst ([*][w->k], T) from a checkpoint matrix. */
static int put_mat(upload *u, const bs_wmat *w, void *dst, size_t row0, bs_err *e) {
    cu_impl *c = u->c;
    size_t n = (size_t)w->n * w->k, ses = bs_dtype_size(w->dtype);
    char *d = (char *)dst + row0 * w->k * c->es;
    for (size_t i = 0; i < n; i += STAGE_ELEMS) {
        size_t cnt = n - i < STAGE_ELEMS ? n - i : STAGE_ELEMS;
        bs_cvt(u->pool, (const char *)w->data + i * ses, w->dtype, (int64_t)cnt, c->dt, u->stage);
        cudaError_t ce = cudaMemcpy(d + i * c->es, u->stage, cnt * c->es, cudaMemcpyHostToDevice);
        if (ce != cudaSuccess) return cuda_fail(e, ce, "weight upload");
    }
    return BS_OK;
}

static int put_f32(upload *u, const float *h, size_t n, float **out, bs_err *e) {
    *out = NULL;
    if (!h) {
        return BS_OK;
    }
    float *d = place(u, n * sizeof(float));
    if (!u->arena) return BS_OK;
    cudaError_t ce = cudaMemcpy(d, h, n * sizeof(float), cudaMemcpyHostToDevice);
    if (ce != cudaSuccess) return cuda_fail(e, ce, "upload");
    *out = d;
    return BS_OK;
}

/* Two passes over the same walk: sizing (arena NULL), then placing. */
static int walk(upload *u, const bs_model *m, bs_err *e) {
    cu_impl *c = u->c;
    int rc;
    size_t es = c->es, H = (size_t)c->H;
    bs_wmat emb = {m->embed->dtype, m->embed->data, c->V, c->H, NULL, BS_WPACK_NONE, NULL};
    c->emb = place(u, (size_t)c->V * H * es);
    if (u->arena && (rc = put_mat(u, &emb, c->emb, 0, e)) < 0) return rc;
    if ((rc = put_f32(u, m->final_norm, H, &c->final_norm, e)) < 0) return rc;
    size_t rope = (size_t)c->pmax * (c->hd / 2);
    if ((rc = put_f32(u, m->rope_cos, rope, &c->rope_cos, e)) < 0) return rc;
    if ((rc = put_f32(u, m->rope_sin, rope, &c->rope_sin, e)) < 0) return rc;
    for (int l = 0; l < c->L; l++) {
        const bs_layer *hl = &m->layers[l];
        cu_layer *d = &c->layers[l];
        d->wqkv = place(u, (size_t)(c->qd + 2 * c->kvd) * H * es);
        d->wo = place(u, H * c->qd * es);
        d->wgu = place(u, 2 * (size_t)c->I * H * es);
        d->wd = place(u, H * c->I * es);
        if (u->arena) {
            if ((rc = put_mat(u, &hl->wq, d->wqkv, 0, e)) < 0 || (rc = put_mat(u, &hl->wk, d->wqkv, c->qd, e)) < 0 ||
                (rc = put_mat(u, &hl->wv, d->wqkv, (size_t)c->qd + c->kvd, e)) < 0 ||
                (rc = put_mat(u, &hl->wo, d->wo, 0, e)) < 0 || (rc = put_mat(u, &hl->wg, d->wgu, 0, e)) < 0 ||
                (rc = put_mat(u, &hl->wu, d->wgu, c->I, e)) < 0 || (rc = put_mat(u, &hl->wd, d->wd, 0, e)) < 0)
                return rc;
        }
        if ((rc = put_f32(u, hl->ln1, H, &d->ln1, e)) < 0 || (rc = put_f32(u, hl->ln2, H, &d->ln2, e)) < 0 ||
            (rc = put_f32(u, hl->bq, c->qd, &d->bq, e)) < 0 || (rc = put_f32(u, hl->bk, c->kvd, &d->bk, e)) < 0 ||
            (rc = put_f32(u, hl->bv, c->kvd, &d->bv, e)) < 0 || (rc = put_f32(u, hl->bo, H, &d->bo, e)) < 0 ||
            (rc = put_f32(u, hl->bg, c->I, &d->bg, e)) < 0 || (rc = put_f32(u, hl->bu, c->I, &d->bu, e)) < 0 ||
            (rc = put_f32(u, hl->bd, H, &d->bd, e)) < 0)
            return rc;
    }
    return BS_OK;
}

static int device_setup(cu_impl *c, char *gpu, size_t gpu_len, int *cc, bs_err *e) {
    const char *env = getenv("BASAL_CUDA_DEVICE");
    c->device = env && *env ? atoi(env) : 0;
    int n = 0;
    cudaError_t ce = cudaGetDeviceCount(&n);
    if (ce != cudaSuccess || n == 0) {
        cudaGetLastError();
        return bs_fail(e, BS_EUNSUP, "no CUDA GPU is available (%s)",
                       ce != cudaSuccess ? cudaGetErrorString(ce) : "no device");
    }
    if (c->device < 0 || c->device >= n)
        return bs_fail(e, BS_EINVAL, "BASAL_CUDA_DEVICE=%d, but there are %d CUDA devices", c->device, n);
    struct cudaDeviceProp p;
    if ((ce = cudaGetDeviceProperties(&p, c->device)) != cudaSuccess) return cuda_fail(e, ce, "device properties");
    snprintf(gpu, gpu_len, "%s", p.name);
    *cc = p.major * 10 + p.minor;
    if (p.major < 8)
        return bs_fail(e, BS_EUNSUP, "%s has compute capability %d.%d; this build runs on 8.0 and newer (%s)", p.name,
                       p.major, p.minor, bs_cuda_arch_list());
    if ((ce = cudaSetDevice(c->device)) != cudaSuccess) return cuda_fail(e, ce, "set device");
    if ((ce = bs_cu_probe()) != cudaSuccess)
        return bs_fail(e, BS_EUNSUP, "%s (compute capability %d.%d) cannot run this build's kernels (%s): %s",
                       p.name, p.major, p.minor, bs_cuda_arch_list(), cudaGetErrorString(ce));
    if ((ce = bs_cu_attn_prepare(c->hd)) != cudaSuccess)
        return bs_fail(e, BS_EUNSUP, "%s cannot give the attention kernel %zu bytes of shared memory (hd %d): %s",
                       p.name, bs_cu_attn_smem(c->hd), c->hd, cudaGetErrorString(ce));
    return BS_OK;
}

int bs_cuda_backend_create(bs_model *m, const char *dtype, const char *gemm_table_path, bs_err *e) {
    const bs_config *cfg = &m->cfg;
    bs_dtype dt;
    if (bs_cuda_dtype_parse(dtype, &dt) < 0)
        return bs_fail(e, BS_EINVAL, "unknown dtype '%s' (f16, bf16, f32, auto)", dtype);
    if (m->backend) return bs_fail(e, BS_EINVAL, "the model already has a %s backend", m->backend->name);
    if (cfg->head_dim > BS_CU_MAX_HD || cfg->head_dim % 2)
        return bs_fail(e, BS_EUNSUP, "head_dim %d: the CUDA attention kernel supports even head sizes up to %d",
                       cfg->head_dim, BS_CU_MAX_HD);
    cu_impl *c = calloc(1, sizeof *c);
    if (!c) return bs_fail(e, BS_ENOMEM, "out of memory");
    pthread_mutex_init(&c->mu, NULL);
    c->base.impl = c;
    c->base.forward = cu_forward;
    c->base.destroy = cu_destroy;
    c->base.name = c->name;
    c->dt = dt;
    c->es = bs_dtype_size(dt);
    c->H = cfg->hidden; c->I = cfg->inter; c->L = cfg->n_layers; c->nh = cfg->n_heads; c->nkv = cfg->n_kv_heads;
    c->hd = cfg->head_dim; c->qd = c->nh * c->hd; c->kvd = c->nkv * c->hd; c->V = cfg->vocab; c->pmax = cfg->max_pos;
    c->eps = (float)cfg->rms_eps;
    c->scale = (float)(1.0 / sqrt((double)c->hd));
    c->lm = &m->lm_head;
    int rc = BS_OK, cc = 0;
    char gpu[256] = "";
    upload up = {c, m->pool, NULL, 0, NULL};
    double t0 = bs_now_ms();
    if ((rc = device_setup(c, gpu, sizeof gpu, &cc, e)) < 0) goto fail;
    const char *g = getenv("BASAL_GEMM");
    c->use_cublas = g && !strcmp(g, "cublas");
    if ((rc = bs_cublas_load(e)) < 0) goto fail;
    if (gemm_table_path && !c->use_cublas) {
        if ((rc = bs_gemm_table_load(&c->table, gemm_table_path, e)) < 0) goto fail;
        c->has_table = 1;
        int shapes[4][2] = {{c->qd + 2 * c->kvd, c->H}, {c->H, c->qd}, {2 * c->I, c->H}, {c->H, c->I}};
        if ((rc = bs_gemm_table_check(&c->table, gpu, (long)cublasLtGetVersion(), dt, (const int(*)[2])shapes, 4, e)) < 0) {
            char msg[sizeof e->msg];
            snprintf(msg, sizeof msg, "%s", e->msg);
            rc = bs_fail(e, rc, "%s: %s", gemm_table_path, msg);
            goto fail;
        }
        if (!c->table.invariant)
            bs_log(BS_LOG_WARN, "cuda", "%s is not an invariant GEMM table; results may depend on the batch",
                   gemm_table_path);
    } else {
        bs_log(BS_LOG_WARN, "cuda", "CUDA %s without an invariant GEMM table: %s picks algorithms by batch size, "
               "so results may depend on the batch (run basal gemm-search --invariant)",
               bs_cuda_dtype_name(dt), c->use_cublas ? "cuBLAS (BASAL_GEMM=cublas)" : "the cuBLASLt heuristic");
    }
    if (!(c->slot_of = malloc((size_t)c->V * sizeof *c->slot_of)) ||
        !(c->layers = calloc((size_t)c->L, sizeof *c->layers))) {
        rc = bs_fail(e, BS_ENOMEM, "out of memory");
        goto fail;
    }
    for (int i = 0; i < c->V; i++) c->slot_of[i] = -1;
    if ((rc = walk(&up, m, e)) < 0) goto fail;
    size_t need = up.off, free_b = 0, total_b = 0;
    cudaMemGetInfo(&free_b, &total_b);
    /* activations, cuBLASLt workspace and the CUDA context need room too */
    if (need + ((size_t)1 << 30) > free_b) {
        rc = bs_fail(e, BS_ENOMEM, "%s: the weights need %.1f GiB in %s, %.1f GiB of %.1f GiB are free", gpu,
                     need / 1073741824.0, bs_cuda_dtype_name(dt), free_b / 1073741824.0, total_b / 1073741824.0);
        goto fail;
    }
    cudaError_t ce = cudaMalloc(&c->weights, need);
    if (ce != cudaSuccess) { c->weights = NULL; rc = cuda_fail(e, ce, "weights"); goto fail; }
    if ((ce = cudaMallocHost(&up.stage, (size_t)STAGE_ELEMS * 4)) != cudaSuccess) {
        up.stage = NULL;
        rc = cuda_fail(e, ce, "staging buffer");
        goto fail;
    }
    up.arena = c->weights;
    up.off = 0;
    if ((rc = walk(&up, m, e)) < 0) goto fail;
    /* pageable uploads may still be in flight; forwards run on other streams */
    if ((ce = cudaDeviceSynchronize()) != cudaSuccess) { rc = cuda_fail(e, ce, "weight upload"); goto fail; }
    cudaFreeHost(up.stage);
    up.stage = NULL;
    snprintf(c->name, sizeof c->name, "cuda %s (%.160s, sm_%d, %s)", bs_cuda_dtype_name(dt), gpu, cc,
             c->use_cublas           ? "cuBLAS GEMM"
             : !c->has_table         ? "heuristic GEMM"
             : c->table.invariant    ? "invariant GEMM table"
                                     : "GEMM table, not invariant");
    bs_log(BS_LOG_INFO, "cuda", "%s: %.1f GiB of weights uploaded in %.1f s", c->name, need / 1073741824.0,
           (bs_now_ms() - t0) / 1000.0);
    m->backend = &c->base;
    return BS_OK;
fail:
    if (up.stage) cudaFreeHost(up.stage);
    cu_destroy(&c->base);
    return rc;
}
