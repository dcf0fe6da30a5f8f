/* Int8 weights (gemm.h): symmetric per-row quantization, for the int8w
 * mode's copy (the bf16 kernels read it in place of the stored weights) and
 * the int8 mode's (smoothed columns, then packed for the W8A8 kernels). */
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

/* Element i of the row, times its column factor when there is one. */
static inline float value(const void *src, bs_dtype dt, const float *colmul, int i) {
    return colmul ? stored(src, dt, i) * colmul[i] : stored(src, dt, i);
}

void bs_quantize_row_i8_cols(const void *src, bs_dtype dt, int n, const float *colmul, int8_t *q, float *scale) {
    float amax = 0.0f;
    for (int i = 0; i < n; i++) {
        float a = fabsf(value(src, dt, colmul, i));
        if (a > amax) amax = a; /* a NaN never wins: it stays out of the scale */
    }
    float s = amax / 127.0f;
    *scale = s;
    for (int i = 0; i < n; i++) {
        float v = s > 0.0f ? rintf(value(src, dt, colmul, i) / s) : 0.0f;
        /* v / s can round past 127 by an ulp; NaN (a broken file) maps to 0 */
        q[i] = (int8_t)(v > 127.0f ? 127 : v < -127.0f ? -127 : v == v ? (int)v : 0);
    }
}

void bs_quantize_row_i8(const void *src, bs_dtype dt, int n, int8_t *q, float *scale) {
    bs_quantize_row_i8_cols(src, dt, n, NULL, q, scale);
}

typedef struct {
    const bs_wmat *w;
    const float *colmul, *rowdiv;
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
    for (int r = r0; r < r1; r++) {
        bs_quantize_row_i8_cols((const char *)w->data + (size_t)r * (size_t)w->k * es, w->dtype, w->k, j->colmul,
                                j->q + (size_t)r * (size_t)w->k, j->scale + r);
        if (j->rowdiv) j->scale[r] = j->scale[r] / j->rowdiv[r];
    }
}

void bs_gemm_quantize_rows(bs_pool *pool, const bs_wmat *w, const float *colmul, const float *rowdiv, int8_t *q,
                           float *scale) {
    quant_job j = { w, colmul, rowdiv, q, scale, 64 };
    bs_pool_run(pool, (w->n + j.rows_per_task - 1) / j.rows_per_task, quant_task, &j);
}

int bs_gemm_quantize(bs_pool *pool, bs_wmat *w, size_t *bytes) { return bs_gemm_quantize_ex(pool, w, NULL, NULL, bytes); }

int bs_gemm_quantize_ex(bs_pool *pool, bs_wmat *w, const float *colmul, const float *rowdiv, size_t *bytes) {
    if (bytes) *bytes = 0;
    if (w->n <= 0 || w->k <= 0) return 0;
    size_t qbytes = ((size_t)w->n * (size_t)w->k + 63) & ~(size_t)63, n = qbytes + (size_t)w->n * sizeof(float);
    void *p = NULL;
    if (posix_memalign(&p, 64, n)) return BS_ENOMEM;
    float *scale = (float *)(void *)((char *)p + qbytes);
    bs_gemm_quantize_rows(pool, w, colmul, rowdiv, p, scale);
    bs_gemm_unpack(w);
    w->packed = p;
    w->packed_kind = BS_WPACK_I8;
    w->scale = scale;
    if (bytes) *bytes = n;
    return 1;
}
