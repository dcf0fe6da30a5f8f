/* Int8 weights of the int8w mode (gemm.h): symmetric per-row quantization
 * into a copy the bf16 kernels read in place of the stored weights. */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "cpu/gemm.h"

static float stored(const void *src, bs_dtype dt, int i) {
    switch (dt) {
    case BS_BF16: return bs_bf16_to_f32(((const uint16_t *)src)[i]);
    case BS_F16: return bs_f16_to_f32(((const uint16_t *)src)[i]);
    case BS_I8: return (float)((const int8_t *)src)[i];
    default: return ((const float *)src)[i];
    }
}

void bs_quantize_row_i8(const void *src, bs_dtype dt, int n, int8_t *q, float *scale) {
    float amax = 0.0f;
    for (int i = 0; i < n; i++) {
        float a = fabsf(stored(src, dt, i));
        if (a > amax) amax = a; /* a NaN never wins: it stays out of the scale */
    }
    float s = amax / 127.0f;
    *scale = s;
    for (int i = 0; i < n; i++) {
        float v = s > 0.0f ? rintf(stored(src, dt, i) / s) : 0.0f;
        /* v / s can round past 127 by an ulp; NaN (a broken file) maps to 0 */
        q[i] = (int8_t)(v > 127.0f ? 127 : v < -127.0f ? -127 : v == v ? (int)v : 0);
    }
}

typedef struct {
    const bs_wmat *w;
    int8_t *q;
    float *scale;
    int rows_per_task;
} quant_job;

static void quant_task(void *arg, int task, int thread) {
    (void)thread;
    const quant_job *j = arg;
    const bs_wmat *w = j->w;
    size_t es = bs_dtype_size(w->dtype);
    int r0 = task * j->rows_per_task, r1 = r0 + j->rows_per_task < w->n ? r0 + j->rows_per_task : w->n;
    for (int r = r0; r < r1; r++)
        bs_quantize_row_i8((const char *)w->data + (size_t)r * (size_t)w->k * es, w->dtype, w->k,
                           j->q + (size_t)r * (size_t)w->k, j->scale + r);
}

int bs_gemm_quantize(bs_pool *pool, bs_wmat *w, size_t *bytes) {
    if (bytes) *bytes = 0;
    if (w->n <= 0 || w->k <= 0) return 0;
    size_t qbytes = ((size_t)w->n * (size_t)w->k + 63) & ~(size_t)63, n = qbytes + (size_t)w->n * sizeof(float);
    void *p = NULL;
    if (posix_memalign(&p, 64, n)) return BS_ENOMEM;
    quant_job j = { w, p, (float *)(void *)((char *)p + qbytes), 64 };
    bs_pool_run(pool, (w->n + j.rows_per_task - 1) / j.rows_per_task, quant_task, &j);
    bs_gemm_unpack(w);
    w->packed = p;
    w->packed_kind = BS_WPACK_I8;
    w->scale = j.scale;
    if (bytes) *bytes = n;
    return 1;
}
