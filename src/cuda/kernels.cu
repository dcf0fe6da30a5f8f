// Kernels of the CUDA forward pass (spec 05 §7, §9, §11, §17); see kernels.h.
//
// Arithmetic is spelled with the _rn intrinsics wherever the CPU forward does
// a separate multiply and add, so that nvcc cannot contract them into an FMA
// whose rounding would differ from the CPU reference (f32 mode is checked
// against it to 1e-4); explicit fmaf() is used only in reductions, where the
// order is fixed by this file alone.
#include "cuda/kernels.h"

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <math.h>

namespace {

const unsigned FULL = 0xffffffffu;

template <typename T> __device__ __forceinline__ float ld(const T *p, size_t i);
template <> __device__ __forceinline__ float ld<float>(const float *p, size_t i) { return p[i]; }
template <> __device__ __forceinline__ float ld<__half>(const __half *p, size_t i) { return __half2float(p[i]); }
template <> __device__ __forceinline__ float ld<__nv_bfloat16>(const __nv_bfloat16 *p, size_t i) {
    return __bfloat162float(p[i]);
}

template <typename T> __device__ __forceinline__ T cvt(float v);
template <> __device__ __forceinline__ float cvt<float>(float v) { return v; }
template <> __device__ __forceinline__ __half cvt<__half>(float v) { return __float2half_rn(v); }
template <> __device__ __forceinline__ __nv_bfloat16 cvt<__nv_bfloat16>(float v) { return __float2bfloat16_rn(v); }

// T(v) of 05 §7: rounded to the activation type and widened back.
template <typename T> __device__ __forceinline__ float rnd(float v) {
    T t = cvt<T>(v);
    return ld<T>(&t, 0);
}

// The attention kernel stores through a run-time dtype so that it is
// compiled once per head-size class rather than once per dtype as well.
__device__ __forceinline__ void st_dt(int dt, void *out, size_t i, float v) {
    if (dt == 1) static_cast<__half *>(out)[i] = __float2half_rn(v);
    else if (dt == 2) static_cast<__nv_bfloat16 *>(out)[i] = __float2bfloat16_rn(v);
    else static_cast<float *>(out)[i] = v;
}

unsigned grid_for(size_t n) {
    size_t b = (n + 255) / 256;
    if (b < 1) b = 1;
    return b > (1u << 20) ? (1u << 20) : (unsigned)b; // grid-stride loops cover the rest
}

#define GRID_STRIDE(i, n) \
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < (n); i += (size_t)gridDim.x * blockDim.x)

#define DISPATCH(dt, ...)                                  \
    switch (dt) {                                          \
    case 0: { typedef float T; __VA_ARGS__; break; }        \
    case 1: { typedef __half T; __VA_ARGS__; break; }       \
    case 2: { typedef __nv_bfloat16 T; __VA_ARGS__; break; } \
    default: return cudaErrorInvalidValue;                 \
    }

template <typename T> __global__ void k_embed(const int32_t *ids, int m, const T *emb, int h, T *x) {
    GRID_STRIDE(i, (size_t)m * h) {
        size_t t = i / h, j = i % h;
        x[i] = emb[(size_t)ids[t] * h + j];
    }
}

// 05 §7.2 and §13.1: the block size depends only on h, each thread sums a
// fixed strided subset, then a fixed xor butterfly and warp order.
template <typename T>
__global__ void k_rmsnorm(const T *x, const int32_t *rows, int h, const float *w, float eps, T *out) {
    __shared__ float part[32];
    __shared__ float rs;
    int r = blockIdx.x;
    const T *xr = x + (size_t)(rows ? rows[r] : r) * h;
    T *o = out + (size_t)r * h;
    float ss = 0.0f;
    for (int i = threadIdx.x; i < h; i += blockDim.x) {
        float v = ld(xr, i);
        ss = fmaf(v, v, ss);
    }
    for (int off = 16; off > 0; off >>= 1) ss += __shfl_xor_sync(FULL, ss, off);
    if ((threadIdx.x & 31) == 0) part[threadIdx.x >> 5] = ss;
    __syncthreads();
    if (threadIdx.x == 0) {
        float t = 0.0f;
        for (int i = 0; i < (int)(blockDim.x >> 5); i++) t = __fadd_rn(t, part[i]);
        rs = __fdiv_rn(1.0f, __fsqrt_rn(__fadd_rn(__fdiv_rn(t, (float)h), eps)));
    }
    __syncthreads();
    float rr = rs;
    for (int i = threadIdx.x; i < h; i += blockDim.x) o[i] = cvt<T>(__fmul_rn(w[i], __fmul_rn(ld(xr, i), rr)));
}

template <typename T> __global__ void k_gather(const T *src, const int32_t *rows, int n, int width, T *dst) {
    GRID_STRIDE(i, (size_t)n * width) {
        size_t r = i / width, j = i % width;
        dst[i] = src[(size_t)rows[r] * width + j];
    }
}

template <typename T>
__global__ void k_qkv_rope(const T *qkv, int m, int qd, int kvd, int hd, const float *bq, const float *bk,
                           const float *bv, const int32_t *pos, const float *cs, const float *sn, float *q, float *k,
                           float *v) {
    int d = hd / 2, nq = qd / 2, nk = kvd / 2, w = nq + nk + kvd, ldr = qd + 2 * kvd;
    GRID_STRIDE(i, (size_t)m * w) {
        size_t t = i / w;
        int j = (int)(i % w);
        const T *row = qkv + t * ldr;
        if (j < nq + nk) {
            int isk = j >= nq, jj = isk ? j - nq : j, c = jj % d;
            int base = (jj / d) * hd + c;
            const T *src = row + (isk ? qd : 0);
            const float *b = isk ? bk : bq;
            float a = ld(src, base), bb = ld(src, base + d);
            if (b) {
                a = rnd<T>(__fadd_rn(a, b[base]));
                bb = rnd<T>(__fadd_rn(bb, b[base + d]));
            }
            size_t p = (size_t)pos[t] * d + c;
            float co = cs[p], si = sn[p];
            float *dst = isk ? k + t * kvd : q + t * qd;
            dst[base] = __fsub_rn(__fmul_rn(a, co), __fmul_rn(bb, si));
            dst[base + d] = __fadd_rn(__fmul_rn(bb, co), __fmul_rn(a, si));
        } else {
            int jj = j - nq - nk;
            float val = ld(row + qd + kvd, jj);
            if (bv) val = rnd<T>(__fadd_rn(val, bv[jj]));
            v[t * kvd + jj] = val;
        }
    }
}

// Tree-block attention (05 §9, §13.1 "Attention tiled by key position").
// A block holds BS_CU_ATT_ROWS query rows (token x head) of one unit and one
// kv head; 4 warps own 4 rows each. Keys are visited in tiles of 32
// ordinals (ordinal = position in the query's own prompt): lane j scores the
// key of ordinal tile + j with a sequential FMA chain over hd, the online
// softmax is updated once per tile with butterfly reductions over the lanes,
// and values are accumulated key by key in ordinal order. A tile's contents
// and every operation on a row depend only on that row's own prompt; rows
// that cannot see a tile skip it, which leaves their state untouched.
// Long on purpose: one kernel body keeps each row's online-softmax state in
// registers across the whole tile loop, and its order of operations is the
// bitwise contract above; device-function pieces would only hide that flow.
template <int NC>
__global__ void __launch_bounds__(128)
    k_attn(int dt, const float *q, const float *k, const float *v, const int32_t *pos, const int32_t *qtok,
           const int32_t *qout, const bs_cu_unit *units, int n_units, int layer, int nh, int nkv, int hd,
           float scale, void *out) {
    const int ROWS = BS_CU_ATT_ROWS, RPW = BS_CU_ATT_ROWS / 4;
    extern __shared__ float sm[];
    __shared__ const float *kp[32];
    __shared__ const float *vp[32];
    __shared__ int lim[BS_CU_ATT_ROWS];
    __shared__ int maxlim_s;
    int rep = nh / nkv, g = blockIdx.y, qd = nh * hd, kvd = nkv * hd;
    int lo = 0, hi = n_units - 1;
    while (lo < hi) {
        int mid = (lo + hi + 1) >> 1;
        if (units[mid].block0 <= (int)blockIdx.x) lo = mid;
        else hi = mid - 1;
    }
    const bs_cu_unit *u = units + lo;
    int row0 = ((int)blockIdx.x - u->block0) * ROWS;
    int nrows = min(ROWS, u->qn * rep - row0);
    float *qs = sm, *ks = qs + ROWS * hd, *vs = ks + 32 * (hd + 1);
    for (int idx = threadIdx.x; idx < ROWS * hd; idx += blockDim.x) {
        int r = idx / hd, dd = idx - r * hd;
        float val = 0.0f;
        if (r < nrows) {
            int ur = row0 + r;
            int t = qtok[u->qoff + ur / rep], head = g * rep + ur % rep;
            val = q[(size_t)t * qd + (size_t)head * hd + dd];
        }
        qs[idx] = val;
    }
    if (threadIdx.x < ROWS) {
        int r = threadIdx.x;
        lim[r] = r < nrows ? pos[qtok[u->qoff + (row0 + r) / rep]] : -1;
    }
    __syncthreads();
    if (threadIdx.x == 0) {
        int mx = -1;
        for (int r = 0; r < ROWS; r++) mx = max(mx, lim[r]);
        maxlim_s = mx;
    }
    __syncthreads();
    const int maxlim = maxlim_s, warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    const int np = u->np, nr = u->n_ranges;
    float mrow[RPW], lrow[RPW], acc[RPW][NC];
#pragma unroll
    for (int rr = 0; rr < RPW; rr++) {
        mrow[rr] = -INFINITY;
        lrow[rr] = 0.0f;
#pragma unroll
        for (int c = 0; c < NC; c++) acc[rr][c] = 0.0f;
    }
    for (int o0 = 0; o0 <= maxlim; o0 += 32) {
        __syncthreads(); // the previous tile is consumed
        if (threadIdx.x < 32) {
            int ord = o0 + threadIdx.x;
            const float *kk = nullptr, *vv = nullptr;
            if (ord <= maxlim) {
                if (ord < np) {
                    size_t off = ((size_t)layer * np + ord) * kvd + (size_t)g * hd;
                    kk = u->pk + off;
                    vv = u->pv + off;
                } else {
                    int o = ord - np, tok = -1;
                    for (int r = 0; r < nr; r++) {
                        if (o < u->r_len[r]) {
                            tok = u->r_start[r] + o;
                            break;
                        }
                        o -= u->r_len[r];
                    }
                    if (tok >= 0) {
                        size_t off = (size_t)tok * kvd + (size_t)g * hd;
                        kk = k + off;
                        vv = v + off;
                    }
                }
            }
            kp[threadIdx.x] = kk;
            vp[threadIdx.x] = vv;
        }
        __syncthreads();
        for (int idx = threadIdx.x; idx < 32 * hd; idx += blockDim.x) {
            int j = idx / hd, dd = idx - j * hd;
            const float *kk = kp[j];
            ks[j * (hd + 1) + dd] = kk ? kk[dd] : 0.0f;
            vs[j * hd + dd] = kk ? vp[j][dd] : 0.0f;
        }
        __syncthreads();
        float sc[RPW];
#pragma unroll
        for (int rr = 0; rr < RPW; rr++) sc[rr] = 0.0f;
        const float *kr = ks + lane * (hd + 1);
        for (int dd = 0; dd < hd; dd++) {
            float kv = kr[dd];
#pragma unroll
            for (int rr = 0; rr < RPW; rr++) sc[rr] = fmaf(qs[(warp * RPW + rr) * hd + dd], kv, sc[rr]);
        }
#pragma unroll
        for (int rr = 0; rr < RPW; rr++) {
            int lm = lim[warp * RPW + rr];
            if (lm < o0) continue; // the whole warp: this row sees nothing of the tile
            bool vis = o0 + lane <= lm;
            float s = vis ? __fmul_rn(sc[rr], scale) : -INFINITY;
            float tmax = s;
            for (int off = 16; off > 0; off >>= 1) tmax = fmaxf(tmax, __shfl_xor_sync(FULL, tmax, off));
            float mnew = fmaxf(mrow[rr], tmax);
            float corr = expf(mrow[rr] - mnew); // 0 on the first tile (m = -inf)
            float p = vis ? expf(s - mnew) : 0.0f;
            float ps = p;
            for (int off = 16; off > 0; off >>= 1) ps += __shfl_xor_sync(FULL, ps, off);
            lrow[rr] = __fadd_rn(__fmul_rn(lrow[rr], corr), ps);
#pragma unroll
            for (int c = 0; c < NC; c++) acc[rr][c] = __fmul_rn(acc[rr][c], corr);
            int nvis = min(32, lm - o0 + 1);
            for (int j = 0; j < nvis; j++) {
                float pj = __shfl_sync(FULL, p, j);
                const float *vr = vs + j * hd;
#pragma unroll
                for (int c = 0; c < NC; c++) {
                    int dd = lane + 32 * c;
                    if (dd < hd) acc[rr][c] = fmaf(pj, vr[dd], acc[rr][c]);
                }
            }
            mrow[rr] = mnew;
        }
    }
#pragma unroll
    for (int rr = 0; rr < RPW; rr++) {
        int r = warp * RPW + rr;
        if (lim[r] < 0) continue;
        int ur = row0 + r;
        int orow = qout[u->qoff + ur / rep], head = g * rep + ur % rep;
        float inv = __fdiv_rn(1.0f, lrow[rr]);
#pragma unroll
        for (int c = 0; c < NC; c++) {
            int dd = lane + 32 * c;
            if (dd < hd) st_dt(dt, out, (size_t)orow * qd + (size_t)head * hd + dd, __fmul_rn(acc[rr][c], inv));
        }
    }
}

template <typename T> __global__ void k_bias_residual(T *x, const T *y, const float *b, int rows, int n) {
    GRID_STRIDE(i, (size_t)rows * n) {
        float yv = ld(y, i);
        if (b) yv = rnd<T>(__fadd_rn(yv, b[i % n]));
        x[i] = cvt<T>(__fadd_rn(ld(x, i), yv));
    }
}

template <typename T>
__global__ void k_silu_mul(const T *gu, const float *bg, const float *bu, int rows, int inter, T *out) {
    GRID_STRIDE(i, (size_t)rows * inter) {
        size_t r = i / inter;
        int c = (int)(i % inter);
        float g = ld(gu, r * 2 * inter + c), u = ld(gu, r * 2 * inter + inter + c);
        if (bg) g = rnd<T>(__fadd_rn(g, bg[c]));
        if (bu) u = rnd<T>(__fadd_rn(u, bu[c]));
        float s = rnd<T>(__fdiv_rn(g, __fadd_rn(1.0f, expf(-g))));
        out[i] = cvt<T>(__fmul_rn(s, u));
    }
}

template <typename T>
__global__ void k_letters(const T *h, int r_n, int hdim, const float *const *rows, int u_n, float *logits) {
    int wid = (int)((blockIdx.x * (size_t)blockDim.x + threadIdx.x) >> 5), lane = threadIdx.x & 31;
    if (wid >= r_n * u_n) return; // whole warps only: blockDim is a multiple of 32
    int r = wid / u_n, u = wid % u_n;
    const T *hr = h + (size_t)r * hdim;
    const float *w = rows[u];
    float acc = 0.0f;
    for (int i = lane; i < hdim; i += 32) acc = fmaf(ld(hr, i), w[i], acc);
    for (int off = 16; off > 0; off >>= 1) acc += __shfl_xor_sync(FULL, acc, off);
    if (lane == 0) logits[(size_t)r * u_n + u] = acc;
}

__device__ __forceinline__ uint64_t mix64(uint64_t z) {
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

template <typename T> __global__ void k_fill_random(T *p, size_t n, uint64_t seed) {
    GRID_STRIDE(i, n) {
        uint64_t z = mix64(seed + 0x9e3779b97f4a7c15ull * (i + 1));
        p[i] = cvt<T>((float)(z >> 40) * (1.0f / 8388608.0f) - 1.0f);
    }
}

// One warp per row: lane l folds the 8-byte words l, l+32, ... with FNV-1a,
// then the 32 lane digests are folded in lane order.
__global__ void k_row_hash(const unsigned char *y, int m, size_t row_bytes, uint64_t *out) {
    int row = (int)((blockIdx.x * (size_t)blockDim.x + threadIdx.x) >> 5), lane = threadIdx.x & 31;
    if (row >= m) return;
    const unsigned char *p = y + (size_t)row * row_bytes;
    size_t words = (row_bytes + 7) / 8;
    bool aligned = ((uintptr_t)p & 7) == 0 && row_bytes % 8 == 0;
    uint64_t h = 0xcbf29ce484222325ull;
    for (size_t w = lane; w < words; w += 32) {
        uint64_t x = 0;
        if (aligned) {
            x = reinterpret_cast<const uint64_t *>(p)[w];
        } else {
            for (int b = 0; b < 8 && w * 8 + b < row_bytes; b++) x |= (uint64_t)p[w * 8 + b] << (8 * b);
        }
        h = (h ^ x) * 0x100000001b3ull;
    }
    uint64_t acc = 0xcbf29ce484222325ull;
    for (int l = 0; l < 32; l++) acc = (acc ^ __shfl_sync(FULL, h, l)) * 0x100000001b3ull;
    if (lane == 0) out[row] = acc;
}

int nc_for(int hd) { return hd <= 32 ? 1 : hd <= 64 ? 2 : hd <= 128 ? 4 : 8; }

} // namespace

extern "C" {

size_t bs_cu_attn_smem(int hd) {
    return ((size_t)BS_CU_ATT_ROWS * hd + 32 * (size_t)(hd + 1) + 32 * (size_t)hd) * sizeof(float);
}

cudaError_t bs_cu_attn_prepare(int hd) {
    if (hd < 2 || hd > BS_CU_MAX_HD || hd % 2) return cudaErrorInvalidValue;
    int smem = (int)bs_cu_attn_smem(hd);
    if (smem <= 48 * 1024) return cudaSuccess;
    switch (nc_for(hd)) {
    case 1: return cudaFuncSetAttribute(k_attn<1>, cudaFuncAttributeMaxDynamicSharedMemorySize, smem);
    case 2: return cudaFuncSetAttribute(k_attn<2>, cudaFuncAttributeMaxDynamicSharedMemorySize, smem);
    case 4: return cudaFuncSetAttribute(k_attn<4>, cudaFuncAttributeMaxDynamicSharedMemorySize, smem);
    default: return cudaFuncSetAttribute(k_attn<8>, cudaFuncAttributeMaxDynamicSharedMemorySize, smem);
    }
}

cudaError_t bs_cu_probe(void) {
    cudaFuncAttributes a;
    return cudaFuncGetAttributes(&a, k_attn<4>);
}

cudaError_t bs_cu_embed(int dt, const int32_t *ids, int m, const void *emb, int h, void *x, cudaStream_t s) {
    DISPATCH(dt, k_embed<T><<<grid_for((size_t)m * h), 256, 0, s>>>(ids, m, (const T *)emb, h, (T *)x));
    return cudaGetLastError();
}

cudaError_t bs_cu_rmsnorm(int dt, const void *x, const int32_t *rows, int n, int h, const float *w, float eps,
                          void *out, cudaStream_t s) {
    if (n <= 0) return cudaSuccess;
    int bs = h < 1024 ? 32 : 256; // a function of h alone (05 §13.1)
    DISPATCH(dt, k_rmsnorm<T><<<n, bs, 0, s>>>((const T *)x, rows, h, w, eps, (T *)out));
    return cudaGetLastError();
}

cudaError_t bs_cu_gather(int dt, const void *src, const int32_t *rows, int n, int width, void *dst, cudaStream_t s) {
    if (n <= 0) return cudaSuccess;
    DISPATCH(dt, k_gather<T><<<grid_for((size_t)n * width), 256, 0, s>>>((const T *)src, rows, n, width, (T *)dst));
    return cudaGetLastError();
}

cudaError_t bs_cu_qkv_rope(int dt, const void *qkv, int m, int qd, int kvd, int hd, const float *bq, const float *bk,
                           const float *bv, const int32_t *pos, const float *cs, const float *sn, float *q, float *k,
                           float *v, cudaStream_t s) {
    size_t n = (size_t)m * (qd / 2 + kvd / 2 + kvd);
    DISPATCH(dt, k_qkv_rope<T><<<grid_for(n), 256, 0, s>>>((const T *)qkv, m, qd, kvd, hd, bq, bk, bv, pos, cs, sn,
                                                            q, k, v));
    return cudaGetLastError();
}

cudaError_t bs_cu_attention(int dt, const float *q, const float *k, const float *v, const int32_t *pos,
                            const int32_t *qtok, const int32_t *qout, const bs_cu_unit *units, int n_units,
                            int n_blocks, int layer, int nh, int nkv, int hd, float scale, void *out, cudaStream_t s) {
    if (n_blocks <= 0 || n_units <= 0) return cudaSuccess;
    dim3 grid((unsigned)n_blocks, (unsigned)nkv);
    size_t smem = bs_cu_attn_smem(hd);
#define ATT(NC) k_attn<NC><<<grid, 128, smem, s>>>(dt, q, k, v, pos, qtok, qout, units, n_units, layer, nh, nkv, hd, \
                                                    scale, out)
    switch (nc_for(hd)) {
    case 1: ATT(1); break;
    case 2: ATT(2); break;
    case 4: ATT(4); break;
    default: ATT(8); break;
    }
#undef ATT
    return cudaGetLastError();
}

cudaError_t bs_cu_bias_residual(int dt, void *x, const void *y, const float *b, int rows, int n, cudaStream_t s) {
    if (rows <= 0) return cudaSuccess;
    DISPATCH(dt, k_bias_residual<T><<<grid_for((size_t)rows * n), 256, 0, s>>>((T *)x, (const T *)y, b, rows, n));
    return cudaGetLastError();
}

cudaError_t bs_cu_silu_mul(int dt, const void *gu, const float *bg, const float *bu, int rows, int i, void *out,
                           cudaStream_t s) {
    if (rows <= 0) return cudaSuccess;
    DISPATCH(dt, k_silu_mul<T><<<grid_for((size_t)rows * i), 256, 0, s>>>((const T *)gu, bg, bu, rows, i, (T *)out));
    return cudaGetLastError();
}

cudaError_t bs_cu_letters(int dt, const void *h, int r, int hdim, const float *const *lm_rows, int u, float *logits,
                          cudaStream_t s) {
    if (r <= 0 || u <= 0) return cudaSuccess;
    size_t threads = (size_t)r * u * 32;
    unsigned blocks = (unsigned)((threads + 127) / 128);
    DISPATCH(dt, k_letters<T><<<blocks, 128, 0, s>>>((const T *)h, r, hdim, lm_rows, u, logits));
    return cudaGetLastError();
}

cudaError_t bs_cu_fill_random(int dt, void *p, size_t n, uint64_t seed, cudaStream_t s) {
    DISPATCH(dt, k_fill_random<T><<<grid_for(n), 256, 0, s>>>((T *)p, n, seed));
    return cudaGetLastError();
}

cudaError_t bs_cu_row_hash(const void *y, int m, size_t row_bytes, uint64_t *out, cudaStream_t s) {
    if (m <= 0) return cudaSuccess;
    unsigned blocks = (unsigned)(((size_t)m * 32 + 127) / 128);
    k_row_hash<<<blocks, 128, 0, s>>>(static_cast<const unsigned char *>(y), m, row_bytes, out);
    return cudaGetLastError();
}

} // extern "C"
