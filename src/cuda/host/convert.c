#include "cuda/convert.h"

#include <string.h>

#include "base/util.h"

int bs_cuda_dtype_parse(const char *s, bs_dtype *out) {
    if (!s || !strcmp(s, "auto") || !strcmp(s, "f16")) *out = BS_F16;
    else if (!strcmp(s, "bf16")) *out = BS_BF16;
    else if (!strcmp(s, "f32")) *out = BS_F32;
    else return BS_EINVAL;
    return BS_OK;
}

const char *bs_cuda_dtype_name(bs_dtype d) {
    return d == BS_F16 ? "f16" : d == BS_BF16 ? "bf16" : "f32";
}

static float widen(const void *src, bs_dtype sdt, int64_t i) {
    uint16_t h;
    switch (sdt) {
    case BS_F32: {
        float f;
        memcpy(&f, (const char *)src + i * 4, 4);
        return f;
    }
    case BS_F16:
        memcpy(&h, (const char *)src + i * 2, 2);
        return bs_f16_to_f32(h);
    case BS_BF16:
        memcpy(&h, (const char *)src + i * 2, 2);
        return bs_bf16_to_f32(h);
    case BS_I8: return (float)((const int8_t *)src)[i]; /* never a model tensor: the int8w mode is CPU-only */
    }
    return 0.0f;
}

void bs_cvt_one(const void *src, bs_dtype sdt, int64_t i, bs_dtype ddt, void *out) {
    /* same-format copies keep NaN payloads and need no arithmetic */
    if (sdt == ddt) {
        memcpy(out, (const char *)src + i * (int64_t)bs_dtype_size(sdt), bs_dtype_size(sdt));
        return;
    }
    float f = widen(src, sdt, i);
    uint16_t h;
    switch (ddt) {
    case BS_F32: memcpy(out, &f, 4); return;
    case BS_F16: h = bs_f32_to_f16(f); memcpy(out, &h, 2); return;
    case BS_BF16: h = bs_f32_to_bf16(f); memcpy(out, &h, 2); return;
    case BS_I8: return; /* not a device format */
    }
}

/* Fixed-size chunks so that any number of threads writes the same bytes. */
enum { CVT_CHUNK = 1 << 16 };

typedef struct {
    const void *src;
    bs_dtype sdt, ddt;
    int64_t n;
    void *out;
} cvt_job;

static void cvt_task(void *arg, int task, int thread) {
    (void)thread;
    const cvt_job *j = arg;
    int64_t i0 = (int64_t)task * CVT_CHUNK, i1 = i0 + CVT_CHUNK < j->n ? i0 + CVT_CHUNK : j->n;
    size_t ds = bs_dtype_size(j->ddt);
    char *o = (char *)j->out;
    if (j->sdt == j->ddt) {
        memcpy(o + i0 * (int64_t)ds, (const char *)j->src + i0 * (int64_t)ds, (size_t)(i1 - i0) * ds);
        return;
    }
    if (j->sdt == BS_BF16 && j->ddt == BS_F16) { /* the hot path of the default mode */
        const uint16_t *s = (const uint16_t *)j->src;
        uint16_t *d = (uint16_t *)j->out;
        for (int64_t i = i0; i < i1; i++) {
            uint16_t v;
            memcpy(&v, s + i, 2);
            v = bs_f32_to_f16(bs_bf16_to_f32(v));
            memcpy(d + i, &v, 2);
        }
        return;
    }
    for (int64_t i = i0; i < i1; i++) bs_cvt_one(j->src, j->sdt, i, j->ddt, o + i * (int64_t)ds);
}

void bs_cvt(bs_pool *pool, const void *src, bs_dtype sdt, int64_t n, bs_dtype ddt, void *out) {
    if (n <= 0) return;
    cvt_job j = {src, sdt, ddt, n, out};
    int64_t tasks = (n + CVT_CHUNK - 1) / CVT_CHUNK;
    /* a pool run per tensor; tensors beyond 2^31 chunks do not exist */
    bs_pool_run(tasks > 1 ? pool : NULL, (int)tasks, cvt_task, &j);
}
