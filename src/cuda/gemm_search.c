/* gemm-search (see gemm_search.h). Per shape:
 *  1. candidates: the cuBLASLt heuristic's configurations at every class
 *     (without split-K in invariant mode; on Hopper they carry cluster shapes
 *     the enumeration misses), then every algorithm id x tile x stages x CTA
 *     swizzle with split-K off; duplicates removed;
 *  2. each candidate runs at every class it passes AlgoCheck for, on the
 *     same operands (x = the first m rows of one random matrix, weights
 *     rotated over > 256 MiB of identical copies so they are cold, as in a
 *     forward); its output rows are hashed on the GPU and timed;
 *  3. invariant mode (search version 2): a candidate whose rows at class m
 *     differ from the first m rows of its largest class is dropped; the rest
 *     form groups of bitwise-equal outputs wherever both run; the group with
 *     the smallest geometric-mean slowdown against the best candidate of each
 *     class wins, and its fastest member per class goes into the table.
 *     Otherwise the fastest candidate per class is kept. */
#include "cuda/gemm_search.h"

#include <cuda_runtime_api.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "base/progress.h"
#include "base/util.h"

#include "cuda/backend.h"
#include "cuda/convert.h"
#include "cuda/kernels.h"
#include "cuda/lt_gemm.h"

typedef struct cand {
    cublasLtMatmulAlgo_t algo;
    int from_heuristic;
} cand;

typedef struct sctx {
    const bs_gemm_search_opts *o;
    bs_lt_ws lt;
    cudaStream_t s;
    cudaEvent_t e0, e1;
    size_t es;
} sctx;

static double now_s(void) { return bs_now_ms() / 1e3; }

static uint64_t fnv_words(const uint64_t *w, int n) {
    uint64_t h = 0xcbf29ce484222325ull;
    for (int i = 0; i < n; i++) h = (h ^ w[i]) * 0x100000001b3ull;
    return h;
}

/* Appends a unless one of the first `dedup` candidates equals it (the
 * enumeration yields distinct configurations by construction; only the
 * heuristic's, found at several classes, repeat). */
static int add_cand(cand **v, int *n, int *cap, const cublasLtMatmulAlgo_t *a, int heur, int dedup) {
    for (int i = 0; i < dedup && i < *n; i++)
        if (!memcmp((*v)[i].algo.data, a->data, sizeof a->data)) return 0;
    if (*n == *cap) {
        int nc = *cap ? *cap * 2 : 256;
        cand *nv = realloc(*v, (size_t)nc * sizeof *nv);
        if (!nv) return -1;
        *v = nv;
        *cap = nc;
    }
    (*v)[*n].algo = *a;
    (*v)[*n].from_heuristic = heur;
    ++*n;
    return 0;
}

static int32_t cfg_i32(const cublasLtMatmulAlgo_t *a, cublasLtMatmulAlgoConfigAttributes_t attr, int32_t dflt) {
    int32_t v = dflt;
    size_t w = 0;
    if (cublasLtMatmulAlgoConfigGetAttribute(a, attr, &v, sizeof v, &w) != CUBLAS_STATUS_SUCCESS) return dflt;
    return v;
}

static void describe(const cublasLtMatmulAlgo_t *a, char *buf, size_t n) {
    snprintf(buf, n, "algo %d tile %d stages %d swizzle %d", cfg_i32(a, CUBLASLT_ALGO_CONFIG_ID, -1),
             cfg_i32(a, CUBLASLT_ALGO_CONFIG_TILE_ID, 0), cfg_i32(a, CUBLASLT_ALGO_CONFIG_STAGES_ID, 0),
             cfg_i32(a, CUBLASLT_ALGO_CONFIG_CTA_SWIZZLING, 0));
}

/* A uint32 array capability (tile or stage ids); {0} (undefined) when the
 * algorithm lists none. */
static uint32_t *cap_list(const cublasLtMatmulAlgo_t *a, cublasLtMatmulAlgoCapAttributes_t attr, int *n) {
    size_t bytes = 0;
    uint32_t *v = NULL;
    *n = 0;
    if (cublasLtMatmulAlgoCapGetAttribute(a, attr, NULL, 0, &bytes) == CUBLAS_STATUS_SUCCESS && bytes >= 4) {
        v = calloc(bytes / 4, 4);
        if (v && cublasLtMatmulAlgoCapGetAttribute(a, attr, v, bytes, &bytes) == CUBLAS_STATUS_SUCCESS) {
            *n = (int)(bytes / 4);
            return v;
        }
        free(v);
    }
    v = calloc(1, 4);
    if (v) *n = 1;
    return v;
}

static int enumerate(sctx *x, int n, int k, const int *classes, int nc, bs_lt_layouts *lay, cand **out, int *n_out,
                     int *heur_first, bs_err *e) {
    int cap = 0, rc = BS_OK;
    *out = NULL;
    *n_out = 0;
    uint64_t ws = BS_LT_WORKSPACE;
    cublasLtMatmulPreference_t pref = NULL;
    if (cublasLtMatmulPreferenceCreate(&pref) != CUBLAS_STATUS_SUCCESS)
        return bs_fail(e, BS_EINTERNAL, "cuBLASLt preference");
    cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws, sizeof ws);
    cublasLtMatmulHeuristicResult_t res[64];
    for (int ci = 0; ci < nc; ci++) {
        heur_first[ci] = -1;
        const bs_lt_layouts *l = &lay[ci];
        int got = 0;
        if (cublasLtMatmulAlgoGetHeuristic(x->lt.lt, x->lt.desc, l->a, l->b, l->c, l->c, pref, 64, res, &got) ==
            CUBLAS_STATUS_SUCCESS) {
            for (int r = 0; r < got; r++) {
                if (res[r].state != CUBLAS_STATUS_SUCCESS) continue;
                if (x->o->invariant && cfg_i32(&res[r].algo, CUBLASLT_ALGO_CONFIG_SPLITK_NUM, 1) > 1) continue;
                if (add_cand(out, n_out, &cap, &res[r].algo, 1, *n_out) < 0) { rc = bs_fail(e, BS_ENOMEM, "out of memory"); break; }
                if (r == 0)
                    for (int i = 0; i < *n_out; i++)
                        if (!memcmp((*out)[i].algo.data, res[r].algo.data, sizeof res[r].algo.data)) heur_first[ci] = i;
            }
        }
        if (rc < 0) break;
    }
    cublasLtMatmulPreferenceDestroy(pref);
    if (rc < 0) return rc;
    /* the enumeration: only configurations that run at the smallest or the
     * largest class, and with a cap, a bounded number of them */
    int n_heur = *n_out, limit = x->o->max_candidates > 0 ? n_heur + 4 * x->o->max_candidates : 0;
    int ids[256], nids = 0;
    if (cublasLtMatmulAlgoGetIds(x->lt.lt, CUBLAS_COMPUTE_32F, CUDA_R_32F, x->lt.type, x->lt.type, x->lt.type,
                                 x->lt.type, 256, ids, &nids) != CUBLAS_STATUS_SUCCESS)
        nids = 0;
    for (int i = 0; i < nids && rc == BS_OK && !(limit && *n_out >= limit); i++) {
        cublasLtMatmulAlgo_t base;
        if (cublasLtMatmulAlgoInit(x->lt.lt, CUBLAS_COMPUTE_32F, CUDA_R_32F, x->lt.type, x->lt.type, x->lt.type,
                                   x->lt.type, ids[i], &base) != CUBLAS_STATUS_SUCCESS)
            continue;
        int nt = 0, ns = 0;
        uint32_t *tiles = cap_list(&base, CUBLASLT_ALGO_CAP_TILE_IDS, &nt);
        uint32_t *stages = cap_list(&base, CUBLASLT_ALGO_CAP_STAGES_IDS, &ns);
        uint32_t swz = 0;
        size_t w = 0;
        if (cublasLtMatmulAlgoCapGetAttribute(&base, CUBLASLT_ALGO_CAP_CTA_SWIZZLING_SUPPORT, &swz, sizeof swz, &w) !=
            CUBLAS_STATUS_SUCCESS)
            swz = 0;
        for (int t = 0; t < nt && rc == BS_OK && !(limit && *n_out >= limit); t++)
            for (int s = 0; s < ns && rc == BS_OK; s++)
                for (uint32_t sw = 0; sw <= (swz ? 1u : 0u) && rc == BS_OK; sw++) {
                    cublasLtMatmulAlgo_t a = base;
                    int32_t one = 1;
                    uint32_t none = CUBLASLT_REDUCTION_SCHEME_NONE;
                    cublasLtMatmulAlgoConfigSetAttribute(&a, CUBLASLT_ALGO_CONFIG_TILE_ID, &tiles[t], 4);
                    cublasLtMatmulAlgoConfigSetAttribute(&a, CUBLASLT_ALGO_CONFIG_STAGES_ID, &stages[s], 4);
                    cublasLtMatmulAlgoConfigSetAttribute(&a, CUBLASLT_ALGO_CONFIG_SPLITK_NUM, &one, sizeof one);
                    cublasLtMatmulAlgoConfigSetAttribute(&a, CUBLASLT_ALGO_CONFIG_REDUCTION_SCHEME, &none, 4);
                    cublasLtMatmulAlgoConfigSetAttribute(&a, CUBLASLT_ALGO_CONFIG_CTA_SWIZZLING, &sw, 4);
                    if (!bs_lt_algo_fits(&x->lt, &lay[0], &a) && !bs_lt_algo_fits(&x->lt, &lay[nc - 1], &a)) continue;
                    if (add_cand(out, n_out, &cap, &a, 0, n_heur) < 0) rc = bs_fail(e, BS_ENOMEM, "out of memory");
                }
        free(tiles);
        free(stages);
    }
    return rc;
}

typedef struct shape_buf {
    void *x, *w, *y;
    uint64_t *hash_d, *hash_h, *top;
    size_t w_bytes;
    int copies, next;
} shape_buf;

static void shape_buf_free(shape_buf *b) {
    if (b->x) cudaFree(b->x);
    if (b->w) cudaFree(b->w);
    if (b->y) cudaFree(b->y);
    if (b->hash_d) cudaFree(b->hash_d);
    free(b->hash_h);
    free(b->top);
    memset(b, 0, sizeof *b);
}

static int shape_buf_make(sctx *x, shape_buf *b, int n, int k, int mmax, bs_err *e) {
    memset(b, 0, sizeof *b);
    b->w_bytes = (size_t)n * k * x->es;
    size_t rot = (size_t)256 << 20, freeb = 0, total = 0;
    size_t copies = rot / b->w_bytes + 2;
    cudaMemGetInfo(&freeb, &total);
    size_t fixed = ((size_t)mmax * k + (size_t)mmax * n) * x->es + (size_t)mmax * 8 + ((size_t)512 << 20);
    if (fixed + b->w_bytes > freeb)
        return bs_fail(e, BS_ENOMEM, "gemm-search: shape [%d, %d] at M = %d needs %.1f GiB on the GPU", n, k, mmax,
                       (fixed + b->w_bytes) / 1073741824.0);
    while (copies > 1 && fixed + copies * b->w_bytes > freeb) copies--;
    b->copies = (int)copies;
    cudaError_t ce = cudaMalloc(&b->x, (size_t)mmax * k * x->es);
    if (ce == cudaSuccess) ce = cudaMalloc(&b->w, copies * b->w_bytes);
    if (ce == cudaSuccess) ce = cudaMalloc(&b->y, (size_t)mmax * n * x->es);
    if (ce == cudaSuccess) ce = cudaMalloc((void **)&b->hash_d, (size_t)mmax * 8);
    if (ce != cudaSuccess) {
        shape_buf_free(b);
        return bs_fail(e, BS_ENOMEM, "gemm-search: GPU memory: %s", cudaGetErrorString(ce));
    }
    b->hash_h = malloc((size_t)mmax * 8);
    b->top = malloc((size_t)mmax * 8);
    if (!b->hash_h || !b->top) {
        shape_buf_free(b);
        return bs_fail(e, BS_ENOMEM, "out of memory");
    }
    ce = bs_cu_fill_random(x->o->dtype, b->x, (size_t)mmax * k, 0x5eed0001ull, x->s);
    if (ce == cudaSuccess) ce = bs_cu_fill_random(x->o->dtype, b->w, (size_t)n * k, 0x5eed0002ull, x->s);
    for (size_t have = 1; ce == cudaSuccess && have < copies;) { /* identical copies, doubling */
        size_t c = have < copies - have ? have : copies - have;
        ce = cudaMemcpyAsync((char *)b->w + have * b->w_bytes, b->w, c * b->w_bytes, cudaMemcpyDeviceToDevice, x->s);
        have += c;
    }
    if (ce == cudaSuccess) ce = cudaStreamSynchronize(x->s);
    if (ce != cudaSuccess) {
        shape_buf_free(b);
        return bs_fail(e, BS_EINTERNAL, "gemm-search: operands: %s", cudaGetErrorString(ce));
    }
    return BS_OK;
}

/* Long on purpose: filter, time, group and pick are stages over the same
 * per-candidate arrays with one cleanup, and the code runs only on a GPU, so
 * it stays as it was measured there. */
static int search_shape(sctx *x, int n, int k, const int *classes, int nc, bs_gemm_entry *out, bs_err *e) {
    const bs_gemm_search_opts *o = x->o;
    int mmax = classes[nc - 1], n_c = 0, rc = BS_OK;
    cand *cs = NULL;
    int *heur_first = calloc((size_t)nc, sizeof *heur_first);
    shape_buf b;
    memset(&b, 0, sizeof b);
    unsigned char *valid = NULL, *consistent = NULL;
    double *ms = NULL;
    uint64_t *digest = NULL;
    int *group = NULL;
    bs_progress *pg = NULL;
    bs_lt_layouts *lay = calloc((size_t)nc, sizeof *lay);
    if (!heur_first || !lay) { rc = bs_fail(e, BS_ENOMEM, "out of memory"); goto done; }
    for (int ci = 0; ci < nc; ci++)
        if (bs_lt_layouts_make(&lay[ci], x->lt.type, n, k, classes[ci]) != CUBLAS_STATUS_SUCCESS) {
            rc = bs_fail(e, BS_EINTERNAL, "cuBLASLt layouts");
            goto done;
        }
    if ((rc = enumerate(x, n, k, classes, nc, lay, &cs, &n_c, heur_first, e)) < 0) goto done;
    int enumerated = n_c;
    valid = calloc((size_t)n_c * nc + 1, 1);
    if (!valid) { rc = bs_fail(e, BS_ENOMEM, "out of memory"); goto done; }
    /* keep candidates that run at some class, heuristic ones first, up to the cap */
    int kept = 0;
    for (int c = 0; c < n_c; c++) {
        int any = 0;
        for (int ci = 0; ci < nc; ci++) { /* row `kept` is this candidate's, whether or not it stays */
            valid[(size_t)kept * nc + ci] = (unsigned char)bs_lt_algo_fits(&x->lt, &lay[ci], &cs[c].algo);
            any |= valid[(size_t)kept * nc + ci];
        }
        if (!any) continue;
        for (int ci = 0; ci < nc; ci++)
            if (heur_first[ci] == c) heur_first[ci] = -2 - kept; /* remapped below */
        cs[kept++] = cs[c];
        if (o->max_candidates > 0 && kept >= o->max_candidates) break;
    }
    for (int ci = 0; ci < nc; ci++) heur_first[ci] = heur_first[ci] <= -2 ? -2 - heur_first[ci] : -1;
    n_c = kept;
    if (!n_c) { rc = bs_fail(e, BS_EUNSUP, "gemm-search: cuBLASLt offers no algorithm for shape [%d, %d]", n, k); goto done; }
    if ((rc = shape_buf_make(x, &b, n, k, mmax, e)) < 0) goto done;
    ms = calloc((size_t)n_c * nc, sizeof *ms);
    digest = calloc((size_t)n_c * nc, sizeof *digest);
    consistent = calloc((size_t)n_c, 1);
    group = calloc((size_t)n_c, sizeof *group);
    if (!ms || !digest || !consistent || !group) { rc = bs_fail(e, BS_ENOMEM, "out of memory"); goto done; }
    fprintf(stderr, "gemm-search: [%d, %d] %s: %d configurations, %d run here; timing %d classes up to M = %d\n", n, k,
            bs_cuda_dtype_name(o->dtype), enumerated, n_c, nc, mmax);
    char what[96];
    snprintf(what, sizeof what, "gemm-search: [%d, %d] timing", n, k);
    pg = bs_progress_start(what, (uint64_t)n_c, "candidates");
    for (int c = 0; c < n_c; c++) {
        bs_progress_set(pg, (uint64_t)c);
        int have_top = 0;
        consistent[c] = 1;
        for (int ci = nc - 1; ci >= 0; ci--) {
            size_t vi = (size_t)c * nc + ci;
            if (!valid[vi]) continue;
            int m = classes[ci];
            if (bs_lt_run(&x->lt, &lay[ci], &cs[c].algo, b.w, b.x, b.y, x->s) != CUBLAS_STATUS_SUCCESS) {
                valid[vi] = 0;
                continue;
            }
            cudaError_t ce = bs_cu_row_hash(b.y, m, (size_t)n * x->es, b.hash_d, x->s);
            if (ce == cudaSuccess) ce = cudaMemcpyAsync(b.hash_h, b.hash_d, (size_t)m * 8, cudaMemcpyDeviceToHost, x->s);
            if (ce == cudaSuccess) ce = cudaStreamSynchronize(x->s);
            if (ce != cudaSuccess) { rc = bs_fail(e, BS_EINTERNAL, "gemm-search: %s", cudaGetErrorString(ce)); goto done; }
            digest[vi] = fnv_words(b.hash_h, m);
            if (!have_top) {
                memcpy(b.top, b.hash_h, (size_t)m * 8);
                have_top = 1;
            } else if (memcmp(b.top, b.hash_h, (size_t)m * 8)) {
                consistent[c] = 0; /* version 2: rows depend on M */
            }
            cudaEventRecord(x->e0, x->s);
            for (int r = 0; r < o->reps; r++) {
                const char *wp = (const char *)b.w + (size_t)(b.next++ % b.copies) * b.w_bytes;
                bs_lt_run(&x->lt, &lay[ci], &cs[c].algo, wp, b.x, b.y, x->s);
            }
            cudaEventRecord(x->e1, x->s);
            if ((ce = cudaEventSynchronize(x->e1)) != cudaSuccess) {
                rc = bs_fail(e, BS_EINTERNAL, "gemm-search: %s", cudaGetErrorString(ce));
                goto done;
            }
            float t = 0;
            cudaEventElapsedTime(&t, x->e0, x->e1);
            ms[vi] = t / o->reps;
        }
        if (!have_top) consistent[c] = 0;
    }
    bs_progress_set(pg, (uint64_t)n_c);
    bs_progress_end(pg);
    pg = NULL;
    double *best = calloc((size_t)nc, sizeof *best);
    if (!best) { rc = bs_fail(e, BS_ENOMEM, "out of memory"); goto done; }
    for (int ci = 0; ci < nc; ci++) {
        best[ci] = INFINITY;
        for (int c = 0; c < n_c; c++)
            if (valid[(size_t)c * nc + ci] && (consistent[c] || !o->invariant) && ms[(size_t)c * nc + ci] < best[ci])
                best[ci] = ms[(size_t)c * nc + ci];
    }
    int root = -1, n_groups = 0, n_cons = 0;
    double score = INFINITY;
    if (o->invariant) {
        for (int i = 0; i < n_c; i++) {
            group[i] = -1;
            if (!consistent[i]) continue;
            n_cons++;
            group[i] = i;
            for (int j = 0; j < i; j++) {
                if (group[j] != j) continue;
                int common = 0, same = 1;
                for (int ci = 0; ci < nc; ci++) {
                    size_t a = (size_t)i * nc + ci, bb = (size_t)j * nc + ci;
                    if (!valid[a] || !valid[bb]) continue;
                    common = 1;
                    same &= digest[a] == digest[bb];
                }
                if (common && same) {
                    group[i] = j;
                    break;
                }
            }
            n_groups += group[i] == i;
        }
        for (int r = 0; r < n_c; r++) {
            if (group[r] != r) continue;
            double sum = 0;
            for (int ci = 0; ci < nc && isfinite(sum); ci++) {
                double f = INFINITY;
                for (int c = 0; c < n_c; c++)
                    if (group[c] == r && valid[(size_t)c * nc + ci] && ms[(size_t)c * nc + ci] < f) f = ms[(size_t)c * nc + ci];
                sum += isfinite(f) ? log(f / best[ci]) : INFINITY;
            }
            double sc = exp(sum / nc);
            if (sc < score) {
                score = sc;
                root = r;
            }
        }
        if (root < 0) {
            free(best);
            rc = bs_fail(e, BS_EUNSUP, "gemm-search: no batch-invariant group of algorithms runs every M class of "
                                       "shape [%d, %d] (%d consistent of %d)", n, k, n_cons, n_c);
            goto done;
        }
    }
    for (int ci = 0; ci < nc; ci++) {
        int pick = -1, members = 0;
        for (int c = 0; c < n_c; c++) {
            size_t vi = (size_t)c * nc + ci;
            if (!valid[vi] || (o->invariant && group[c] != root)) continue;
            members++;
            if (pick < 0 || ms[vi] < ms[(size_t)pick * nc + ci]) pick = c;
        }
        if (pick < 0) {
            free(best);
            rc = bs_fail(e, BS_EUNSUP, "gemm-search: no algorithm runs shape [%d, %d] at M = %d", n, k, classes[ci]);
            goto done;
        }
        bs_gemm_entry *en = &out[ci];
        memset(en, 0, sizeof *en);
        en->m_class = classes[ci];
        en->n = n;
        en->k = k;
        memcpy(en->algo, cs[pick].algo.data, sizeof en->algo);
        en->ms = ms[(size_t)pick * nc + ci];
        int hf = heur_first[ci];
        en->best_ms = o->invariant ? best[ci] : hf >= 0 && valid[(size_t)hf * nc + ci] ? ms[(size_t)hf * nc + ci] : 0;
        en->configurations = n_c;
        en->tflops = en->ms > 0 ? 2.0 * classes[ci] * (double)n * k / (en->ms * 1e-3) / 1e12 : 0;
        char d[128];
        describe(&cs[pick].algo, d, sizeof d);
        fprintf(stderr, "gemm-search: [%d, %d] m=%d: %s: %.4f ms, %.1f TFLOP/s (best candidate %.4f ms, %d %s)\n",
                n, k, classes[ci], d, en->ms, en->tflops, best[ci], members,
                o->invariant ? "in the chosen group" : "candidates");
    }
    if (o->invariant)
        fprintf(stderr, "gemm-search: [%d, %d]: %d of %d candidates row-consistent, %d groups, chosen group's "
                        "geometric-mean slowdown %.4f\n", n, k, n_cons, n_c, n_groups, score);
    free(best);
done:
    bs_progress_end(pg);
    if (lay)
        for (int ci = 0; ci < nc; ci++) bs_lt_layouts_free(&lay[ci]);
    free(lay);
    shape_buf_free(&b);
    free(cs);
    free(heur_first);
    free(valid);
    free(consistent);
    free(ms);
    free(digest);
    free(group);
    return rc;
}

int bs_cuda_gemm_search(const bs_config *cfg, const bs_gemm_search_opts *o, bs_gemm_table *out, bs_err *e) {
    memset(out, 0, sizeof *out);
    int qd = cfg->n_heads * cfg->head_dim, kvd = cfg->n_kv_heads * cfg->head_dim;
    int shapes[4][2] = {{qd + 2 * kvd, cfg->hidden}, {cfg->hidden, qd}, {2 * cfg->inter, cfg->hidden},
                        {cfg->hidden, cfg->inter}};
    int def[64], nc = 0, rc = BS_OK;
    const int *classes = o->classes;
    if (classes) {
        nc = o->n_classes;
    } else if (o->invariant) {
        classes = bs_gemm_invariant_classes;
        nc = 25;
    } else {
        for (int m = 16; m <= 512 && nc < 64; m += 16) def[nc++] = m;
        for (int m = 640; m <= o->max_m && nc < 64; m += 128) def[nc++] = m;
        classes = def;
    }
    for (int i = 0; i < nc; i++)
        if (classes[i] < 1 || (i && classes[i] <= classes[i - 1]))
            return bs_fail(e, BS_EINVAL, "gemm-search: M classes must be increasing positive integers");
    if (nc < 1 || o->reps < 1) return bs_fail(e, BS_EINVAL, "gemm-search: nothing to measure");
    const char *env = getenv("BASAL_CUDA_DEVICE");
    int dev = env && *env ? atoi(env) : 0, ndev = 0;
    cudaError_t ce = cudaGetDeviceCount(&ndev);
    if (ce != cudaSuccess || ndev == 0) {
        cudaGetLastError();
        return bs_fail(e, BS_EUNSUP, "no CUDA GPU is available (%s)", ce ? cudaGetErrorString(ce) : "no device");
    }
    if (dev < 0 || dev >= ndev) return bs_fail(e, BS_EINVAL, "BASAL_CUDA_DEVICE=%d, but there are %d devices", dev, ndev);
    struct cudaDeviceProp p;
    if ((ce = cudaGetDeviceProperties(&p, dev)) != cudaSuccess || (ce = cudaSetDevice(dev)) != cudaSuccess)
        return bs_fail(e, BS_EINTERNAL, "CUDA device %d: %s", dev, cudaGetErrorString(ce));
    if ((ce = bs_cu_probe()) != cudaSuccess)
        return bs_fail(e, BS_EUNSUP, "%s cannot run this build's kernels (%s): %s", p.name, bs_cuda_arch_list(),
                       cudaGetErrorString(ce));
    sctx x;
    memset(&x, 0, sizeof x);
    x.o = o;
    x.es = bs_dtype_size(o->dtype);
    double t0 = now_s();
    if ((rc = bs_lt_ws_init(&x.lt, o->dtype, NULL, 0, e)) < 0) return rc;
    if (cudaStreamCreateWithFlags(&x.s, cudaStreamNonBlocking) != cudaSuccess || cudaEventCreate(&x.e0) != cudaSuccess ||
        cudaEventCreate(&x.e1) != cudaSuccess) {
        rc = bs_fail(e, BS_EINTERNAL, "CUDA stream or events");
        goto done;
    }
    out->entries = calloc((size_t)4 * nc, sizeof *out->entries);
    out->gpu = strdup(p.name);
    out->model = o->model ? strdup(o->model) : NULL;
    out->source = strdup(o->source ? o->source : "basal-c gemm-search");
    out->note = strdup(o->invariant ? "invariant: one bitwise-equivalence group per shape (search version 2)"
                                    : "fastest algorithm per class; not batch-invariant");
    if (!out->entries || !out->gpu || !out->source || !out->note) { rc = bs_fail(e, BS_ENOMEM, "out of memory"); goto done; }
    out->cublaslt_version = (long)cublasLtGetVersion();
    out->dtype = o->dtype;
    out->invariant = o->invariant;
    out->search_version = BS_GEMM_SEARCH_VERSION;
    for (int s = 0; s < 4; s++) {
        int dup = 0;
        for (int t = 0; t < out->n_shapes; t++) dup |= out->shapes[t][0] == shapes[s][0] && out->shapes[t][1] == shapes[s][1];
        if (dup) continue; /* e.g. o_proj and down of equal shape */
        out->shapes[out->n_shapes][0] = shapes[s][0];
        out->shapes[out->n_shapes][1] = shapes[s][1];
        out->n_shapes++;
        if ((rc = search_shape(&x, shapes[s][0], shapes[s][1], classes, nc, out->entries + out->n_entries, e)) < 0)
            goto done;
        out->n_entries += nc;
    }
    out->timing_s = now_s() - t0;
    fprintf(stderr, "gemm-search: %d shapes x %d classes on %s in %.1f s\n", out->n_shapes, nc, p.name, out->timing_s);
done:
    if (x.e0) cudaEventDestroy(x.e0);
    if (x.e1) cudaEventDestroy(x.e1);
    if (x.s) cudaStreamDestroy(x.s);
    bs_lt_ws_free(&x.lt);
    if (rc < 0) bs_gemm_table_free(out);
    return rc;
}
