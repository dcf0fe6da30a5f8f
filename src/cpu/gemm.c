#include "cpu/gemm.h"

#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "core/util.h"

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define BS_X86 1
#endif

/* Register tile: MR rows x NR columns; KC = depth of one packed weight panel
 * (NR x KC f32 = 16 KiB stays in L1). */
enum { MR = 6, NR = 16, KC = 256 };

static atomic_int chosen_kernel = -1;

static bs_kernel detect_kernel(void) {
    const char *env = getenv("BASAL_CPU");
    if (env && !strcmp(env, "generic")) return BS_KERNEL_GENERIC;
#ifdef BS_X86
    __builtin_cpu_init();
    if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) return BS_KERNEL_AVX2;
#endif
    return BS_KERNEL_GENERIC;
}

bs_kernel bs_gemm_kernel(void) {
    int k = atomic_load(&chosen_kernel);
    if (k < 0) {
        int expected = -1;
        atomic_compare_exchange_strong(&chosen_kernel, &expected, (int)detect_kernel());
        k = atomic_load(&chosen_kernel);
    }
    return (bs_kernel)k;
}

bs_kernel bs_gemm_force_kernel(bs_kernel k) {
    int old = atomic_exchange(&chosen_kernel, (int)k);
    return old < 0 ? detect_kernel() : (bs_kernel)old;
}

const char *bs_gemm_kernel_name(bs_kernel k) {
    return k == BS_KERNEL_AVX2 ? "avx2-fma" : "generic";
}

/* Packs columns n0..n0+NR-1 (rows of w), depth k0..k0+kc-1, into panel[kc][NR],
 * widened to f32; columns past N are zero (their outputs are never stored). */
static void pack_panel(const bs_wmat *w, int n0, int k0, int kc, float *panel) {
    int nv = w->n - n0 < NR ? w->n - n0 : NR;
    for (int j = 0; j < NR; j++) {
        if (j >= nv) {
            for (int kk = 0; kk < kc; kk++) panel[kk * NR + j] = 0.0f;
            continue;
        }
        size_t base = (size_t)(n0 + j) * (size_t)w->k + (size_t)k0;
        switch (w->dtype) {
        case BS_F32: {
            const float *src = (const float *)w->data + base;
            for (int kk = 0; kk < kc; kk++) panel[kk * NR + j] = src[kk];
            break;
        }
        case BS_BF16: {
            const uint16_t *src = (const uint16_t *)w->data + base;
            for (int kk = 0; kk < kc; kk++) panel[kk * NR + j] = bs_bf16_to_f32(src[kk]);
            break;
        }
        case BS_F16: {
            const uint16_t *src = (const uint16_t *)w->data + base;
            for (int kk = 0; kk < kc; kk++) panel[kk * NR + j] = bs_f16_to_f32(src[kk]);
            break;
        }
        }
    }
}

/* Portable micro-kernel: acc = acc + x*w (two roundings, no contraction). The
 * accumulator of each output continues across panels through y, so every
 * output is one in-order chain over k. */
static void kernel_generic(const float *x, int ldx, int mr, const float *panel, int kc,
                           float *y, int ldy, int nv, int first) {
    float acc[MR][NR];
    for (int i = 0; i < mr; i++)
        for (int j = 0; j < NR; j++) acc[i][j] = (first || j >= nv) ? 0.0f : y[(size_t)i * ldy + j];
    for (int kk = 0; kk < kc; kk++) {
        const float *b = panel + (size_t)kk * NR;
        for (int i = 0; i < mr; i++) {
            float a = x[(size_t)i * ldx + kk];
            for (int j = 0; j < NR; j++) acc[i][j] = acc[i][j] + a * b[j];
        }
    }
    for (int i = 0; i < mr; i++)
        for (int j = 0; j < nv; j++) y[(size_t)i * ldy + j] = acc[i][j];
}

#ifdef BS_X86
/* AVX2 micro-kernel: 6x16 tile in 12 ymm accumulators, one FMA per (k, output).
 * Rows beyond mr are computed on a copy of row 0 and discarded, so a row's
 * arithmetic never depends on how many rows share its tile. */
__attribute__((target("avx2,fma")))
static void kernel_avx2(const float *x, int ldx, int mr, const float *panel, int kc,
                        float *y, int ldy, int nv, int first) {
    __m256 c[MR][2];
    const float *xr[MR];
    for (int i = 0; i < MR; i++) xr[i] = x + (size_t)(i < mr ? i : 0) * ldx;
    for (int i = 0; i < MR; i++) {
        if (first || i >= mr) {
            c[i][0] = _mm256_setzero_ps();
            c[i][1] = _mm256_setzero_ps();
        } else if (nv == NR) {
            c[i][0] = _mm256_loadu_ps(y + (size_t)i * ldy);
            c[i][1] = _mm256_loadu_ps(y + (size_t)i * ldy + 8);
        } else {
            float tmp[NR] = {0};
            memcpy(tmp, y + (size_t)i * ldy, (size_t)nv * sizeof(float));
            c[i][0] = _mm256_loadu_ps(tmp);
            c[i][1] = _mm256_loadu_ps(tmp + 8);
        }
    }
    for (int kk = 0; kk < kc; kk++) {
        __m256 b0 = _mm256_loadu_ps(panel + (size_t)kk * NR);
        __m256 b1 = _mm256_loadu_ps(panel + (size_t)kk * NR + 8);
        for (int i = 0; i < MR; i++) {
            __m256 a = _mm256_broadcast_ss(xr[i] + kk);
            c[i][0] = _mm256_fmadd_ps(a, b0, c[i][0]);
            c[i][1] = _mm256_fmadd_ps(a, b1, c[i][1]);
        }
    }
    for (int i = 0; i < mr; i++) {
        if (nv == NR) {
            _mm256_storeu_ps(y + (size_t)i * ldy, c[i][0]);
            _mm256_storeu_ps(y + (size_t)i * ldy + 8, c[i][1]);
        } else {
            float tmp[NR];
            _mm256_storeu_ps(tmp, c[i][0]);
            _mm256_storeu_ps(tmp + 8, c[i][1]);
            memcpy(y + (size_t)i * ldy, tmp, (size_t)nv * sizeof(float));
        }
    }
}
#endif

typedef struct {
    const float *x;
    int ldx, m;
    const bs_wmat *w;
    float *y;
    int ldy;
    bs_kernel kernel;
    float *panels; /* one KC x NR panel per thread */
} gemm_job;

/* One task = one NR-wide column strip over all rows and all of K. */
static void gemm_task(void *arg, int task, int thread) {
    gemm_job *j = arg;
    float *panel = j->panels + (size_t)thread * KC * NR;
    int n0 = task * NR;
    int nv = j->w->n - n0 < NR ? j->w->n - n0 : NR;
    for (int k0 = 0; k0 < j->w->k; k0 += KC) {
        int kc = j->w->k - k0 < KC ? j->w->k - k0 : KC;
        pack_panel(j->w, n0, k0, kc, panel);
        for (int m0 = 0; m0 < j->m; m0 += MR) {
            int mr = j->m - m0 < MR ? j->m - m0 : MR;
            const float *xa = j->x + (size_t)m0 * j->ldx + k0;
            float *ya = j->y + (size_t)m0 * j->ldy + n0;
#ifdef BS_X86
            if (j->kernel == BS_KERNEL_AVX2) {
                kernel_avx2(xa, j->ldx, mr, panel, kc, ya, j->ldy, nv, k0 == 0);
                continue;
            }
#endif
            kernel_generic(xa, j->ldx, mr, panel, kc, ya, j->ldy, nv, k0 == 0);
        }
    }
}

void bs_gemm(bs_pool *pool, const float *x, int ldx, int m, const bs_wmat *w, float *y, int ldy) {
    if (m <= 0 || w->n <= 0) return;
    if (w->k == 0) {
        for (int i = 0; i < m; i++) memset(y + (size_t)i * ldy, 0, (size_t)w->n * sizeof(float));
        return;
    }
    int nthreads = bs_pool_size(pool);
    /* Per-call panels keep bs_gemm reentrant for several engines; 16 KiB each. */
    float stack_panels[2 * KC * NR];
    float *panels = nthreads <= 2 ? stack_panels : malloc((size_t)nthreads * KC * NR * sizeof(float));
    if (!panels) { /* cannot fail the product: fall back to a serial run */
        panels = stack_panels;
        pool = NULL;
    }
    gemm_job job = {x, ldx, m, w, y, ldy, bs_gemm_kernel(), panels};
    bs_pool_run(pool, (w->n + NR - 1) / NR, gemm_task, &job);
    if (panels != stack_panels) free(panels);
}

float bs_dot_row(const float *a, const bs_wmat *w, int row) {
    /* Eight interleaved partial sums combined in a fixed tree: the order depends
     * only on k. */
    float s[8] = {0};
    size_t base = (size_t)row * (size_t)w->k;
    int k = w->k, i = 0;
    for (; i + 8 <= k; i += 8)
        for (int l = 0; l < 8; l++) {
            float wv;
            switch (w->dtype) {
            case BS_F32: wv = ((const float *)w->data)[base + i + l]; break;
            case BS_BF16: wv = bs_bf16_to_f32(((const uint16_t *)w->data)[base + i + l]); break;
            default: wv = bs_f16_to_f32(((const uint16_t *)w->data)[base + i + l]); break;
            }
            s[l] = s[l] + a[i + l] * wv;
        }
    for (; i < k; i++) {
        float wv;
        switch (w->dtype) {
        case BS_F32: wv = ((const float *)w->data)[base + i]; break;
        case BS_BF16: wv = bs_bf16_to_f32(((const uint16_t *)w->data)[base + i]); break;
        default: wv = bs_f16_to_f32(((const uint16_t *)w->data)[base + i]); break;
        }
        s[i & 7] = s[i & 7] + a[i] * wv;
    }
    return ((s[0] + s[1]) + (s[2] + s[3])) + ((s[4] + s[5]) + (s[6] + s[7]));
}
