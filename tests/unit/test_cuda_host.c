/* Host side of the CUDA backend, without a GPU (runs in every build):
 * the weight conversion against an independent nearest-value search over all
 * representable values (every bf16 input exhaustively for bf16 -> f16), the
 * GEMM table format (parse, validation, M classes, round trip), and device
 * selection: `auto` falls back to the CPU, `cuda` fails with a clear message
 * when there is no GPU (or no CUDA in the build), f16 is refused on the CPU. */
#include <stdint.h>

#include "check.h"
#include "base/util.h"
#include "cuda/convert.h"
#include "cuda/gemm_table.h"
#include "engine/pack.h"
#include "device/device.h"
#include "model/forward.h"

/* ---- conversion ---- */

static double f16_value(uint16_t p) { /* p in 0..0x7c00; 0x7c00 stands for 2^16 */
    if (p == 0x7c00) return 65536.0;
    int ex = p >> 10, man = p & 0x3ff;
    return ex ? ldexp(1024 + man, ex - 25) : ldexp(man, -24);
}

static double bf16_value(uint16_t p) { /* p in 0..0x7f80; 0x7f80 stands for 2^128 */
    if (p == 0x7f80) return ldexp(1.0, 128);
    int ex = p >> 7, man = p & 0x7f;
    return ex ? ldexp(128 + man, ex - 134) : ldexp(man, -133);
}

/* Round to nearest, ties to even, by searching the ladder of magnitudes
 * (the pattern after the largest finite one is infinity: values at or past
 * the midpoint overflow, as IEEE rounding with an unbounded exponent does). */
static uint16_t nearest(double x, double (*val)(uint16_t), uint16_t top) {
    uint16_t sign = 0;
    if (signbit(x)) { sign = 0x8000; x = -x; }
    if (x >= val(top)) return sign | top;
    uint16_t lo = 0, hi = top; /* val(lo) <= x < val(hi) */
    while (hi - lo > 1) {
        uint16_t mid = (uint16_t)((lo + hi) / 2);
        if (val(mid) <= x) lo = mid;
        else hi = mid;
    }
    double dl = x - val(lo), dh = val(hi) - x;
    return sign | (dl < dh ? lo : dh < dl ? hi : (lo & 1) ? hi : lo);
}

static float from_bits(uint32_t u) { float f; memcpy(&f, &u, 4); return f; }

static void conversion(void) {
    /* every bf16 value through the default path bf16 -> f32 -> f16 */
    int bad = 0, nan_ok = 1;
    for (uint32_t p = 0; p < 0x10000; p++) {
        uint16_t b = (uint16_t)p, got;
        bs_cvt_one(&b, BS_BF16, 0, BS_F16, &got);
        float f = bs_bf16_to_f32(b);
        if (isnan(f)) {
            nan_ok &= (got & 0x7c00) == 0x7c00 && (got & 0x3ff) != 0;
            continue;
        }
        uint16_t want = nearest((double)f, f16_value, 0x7c00);
        if (got != want && bad++ < 5) fprintf(stderr, "bf16 %04x (%g): f16 %04x, expected %04x\n", p, f, got, want);
    }
    CHECK_INT(bad, 0);
    CHECK(nan_ok);

    /* f32 edge values into f16 and bf16 */
    const uint32_t edges[] = {0x00000000, 0x80000000, 0x00000001, 0x33000000, 0x33000001, 0x337fffff, 0x33800000,
                              0x387fc000, 0x387fe000, 0x387ff000, 0x38800000, 0x477fe000, 0x477fefff, 0x477ff000,
                              0x477ff001, 0x47800000, 0x7f7fffff, 0x7f800000, 0xff800000, 0x3f800000, 0x3f801000,
                              0x3f802000, 0x3f803000, 0x3f808000, 0x3f818000, 0xc2f6e979, 0x7f7f8000, 0x7f7f7fff,
                              0x3f800001, 0x3f808001, 0x3f7fffff};
    bad = 0;
    uint64_t rng = 88172645463325252ull;
    for (int i = 0; i < (int)(sizeof edges / sizeof *edges) + 200000; i++) {
        uint32_t u;
        if (i < (int)(sizeof edges / sizeof *edges)) u = edges[i];
        else {
            rng ^= rng << 13; rng ^= rng >> 7; rng ^= rng << 17;
            u = (uint32_t)rng;
            if ((u & 0x7f800000) == 0x7f800000) continue; /* NaN and inf: checked above and below */
            if (i & 1) u = (u & 0x807fffff) | ((uint32_t)(100 + (rng >> 40) % 60) << 23); /* near the f16 range */
        }
        float f = from_bits(u);
        uint16_t h, b;
        bs_cvt_one(&f, BS_F32, 0, BS_F16, &h);
        bs_cvt_one(&f, BS_F32, 0, BS_BF16, &b);
        uint16_t wh = nearest((double)f, f16_value, 0x7c00), wb = nearest((double)f, bf16_value, 0x7f80);
        if (h != wh && bad++ < 5) fprintf(stderr, "f32 %08x: f16 %04x, expected %04x\n", u, h, wh);
        if (b != wb && bad++ < 5) fprintf(stderr, "f32 %08x: bf16 %04x, expected %04x\n", u, b, wb);
    }
    CHECK_INT(bad, 0);
    float qnan = from_bits(0x7fc12345), out;
    uint16_t h;
    bs_cvt_one(&qnan, BS_F32, 0, BS_F16, &h);
    CHECK((h & 0x7c00) == 0x7c00 && (h & 0x3ff));
    bs_cvt_one(&qnan, BS_F32, 0, BS_F32, &out); /* same format: bits kept */
    CHECK(!memcmp(&out, &qnan, 4));

    /* the bulk conversion writes the same bytes on any number of threads */
    enum { N = 300001 };
    uint16_t *src = malloc(N * 2), *a = malloc(N * 2), *b = malloc(N * 2);
    for (int i = 0; i < N; i++) src[i] = (uint16_t)(i * 40503u);
    bs_pool *pool = bs_pool_create(2);
    bs_cvt(NULL, src, BS_BF16, N, BS_F16, a);
    bs_cvt(pool, src, BS_BF16, N, BS_F16, b);
    CHECK(!memcmp(a, b, N * 2));
    bad = 0;
    for (int i = 0; i < N; i++) {
        uint16_t one;
        bs_cvt_one(src, BS_BF16, i, BS_F16, &one);
        bad += one != a[i];
    }
    CHECK_INT(bad, 0);
    bs_cvt(pool, src, BS_F16, N, BS_BF16, b);
    bad = 0;
    for (int i = 0; i < N; i++) {
        float f = bs_f16_to_f32(src[i]);
        if (!isnan(f)) bad += b[i] != nearest((double)f, bf16_value, 0x7f80);
    }
    CHECK_INT(bad, 0);
    bs_pool_destroy(pool);
    free(src); free(a); free(b);

    bs_dtype d;
    CHECK_INT(bs_cuda_dtype_parse(NULL, &d), 0); CHECK_INT(d, BS_F16);
    CHECK_INT(bs_cuda_dtype_parse("auto", &d), 0); CHECK_INT(d, BS_F16);
    CHECK_INT(bs_cuda_dtype_parse("bf16", &d), 0); CHECK_INT(d, BS_BF16);
    CHECK_INT(bs_cuda_dtype_parse("f32", &d), 0); CHECK_INT(d, BS_F32);
    CHECK_INT(bs_cuda_dtype_parse("fp16", &d), BS_EINVAL);
}

/* ---- GEMM tables ---- */

static const char *table_text(char *buf, size_t n, const char *gpu, const char *dtype, int version, const char *extra_entry) {
    snprintf(buf, n,
             "{\"cublaslt_version\": 130100, \"gpu\": \"%s\", \"dtype\": \"%s\", \"invariant\": true,"
             " \"gemm_search_version\": %d, \"shapes\": [[128, 64], [64, 64]],"
             " \"entries\": ["
             "{\"m_class\": 512, \"n\": 128, \"k\": 64, \"dtype\": \"%s\", \"algo\": [\"1\",\"2\",\"3\",\"4\",\"5\",\"6\",\"7\",\"18446744073709551615\"], \"ms\": 0.5},"
             "{\"m_class\": 16, \"n\": 128, \"k\": 64, \"algo\": [16,0,0,0,0,0,0,0], \"ms\": 0.1, \"best_candidate_ms\": 0.1},"
             "{\"m_class\": 128, \"n\": 128, \"k\": 64, \"algo\": [\"0x80\",0,0,0,0,0,0,0]},"
             "{\"m_class\": 1024, \"n\": 128, \"k\": 64, \"algo\": [1024,0,0,0,0,0,0,0]},"
             "{\"m_class\": 64, \"n\": 64, \"k\": 64, \"algo\": [64,0,0,0,0,0,0,0]}%s],"
             " \"timing\": {\"total_s\": 12.5}, \"note\": \"test\", \"model\": \"tiny\", \"source\": \"hand\"}",
             gpu, dtype, version, dtype, extra_entry);
    return buf;
}

static int parse_fails(const char *text, const char *msg) {
    bs_gemm_table t;
    bs_err e = {0};
    int rc = bs_gemm_table_parse(&t, text, strlen(text), "t.json", &e);
    if (rc == 0) {
        bs_gemm_table_free(&t);
        fprintf(stderr, "accepted: %s\n", text);
        return 0;
    }
    if (!strstr(e.msg, msg)) fprintf(stderr, "message \"%s\" lacks \"%s\"\n", e.msg, msg);
    return rc == BS_EFORMAT && strstr(e.msg, msg) != NULL;
}

static void tables(void) {
    CHECK_INT(bs_gemm_m_class(1), 16);
    CHECK_INT(bs_gemm_m_class(16), 16);
    CHECK_INT(bs_gemm_m_class(17), 32);
    CHECK_INT(bs_gemm_m_class(500), 512);
    CHECK_INT(bs_gemm_m_class(512), 512);
    CHECK_INT(bs_gemm_m_class(513), 640);
    CHECK_INT(bs_gemm_m_class(641), 768);
    CHECK_INT(bs_gemm_m_class(8192), 8192);
    CHECK_INT(bs_gemm_invariant_classes[24], 16384);

    char buf[4096];
    bs_gemm_table t;
    bs_err e = {0};
    const char *txt = table_text(buf, sizeof buf, "NVIDIA H200", "f16", 2, "");
    CHECK_INT(bs_gemm_table_parse(&t, txt, strlen(txt), "t.json", &e), 0);
    CHECK_INT(t.n_entries, 5);
    CHECK_INT(t.cublaslt_version, 130100);
    CHECK_STR(t.gpu, "NVIDIA H200");
    CHECK_INT(t.dtype, BS_F16);
    CHECK_INT(t.invariant, 1);
    CHECK_NEAR(t.timing_s, 12.5, 0);
    /* sorted by shape, then class */
    CHECK_INT(t.entries[0].n, 64);
    CHECK_INT(t.entries[1].m_class, 16);
    CHECK_INT(t.entries[4].m_class, 1024);
    const bs_gemm_entry *p;
    CHECK((p = bs_gemm_table_pick(&t, 128, 64, 1)) && p->m_class == 16);
    CHECK((p = bs_gemm_table_pick(&t, 128, 64, 16)) && p->m_class == 16);
    CHECK((p = bs_gemm_table_pick(&t, 128, 64, 17)) && p->m_class == 128);  /* class 32 -> next listed */
    CHECK((p = bs_gemm_table_pick(&t, 128, 64, 129)) && p->m_class == 512);
    CHECK((p = bs_gemm_table_pick(&t, 128, 64, 512)) && p->m_class == 512);
    CHECK((p = bs_gemm_table_pick(&t, 128, 64, 513)) && p->m_class == 1024); /* class 640 */
    CHECK((p = bs_gemm_table_pick(&t, 128, 64, 9000)) && p->m_class == 1024); /* beyond: the largest */
    CHECK((p = bs_gemm_table_pick(&t, 64, 64, 3)) && p->m_class == 64);
    CHECK(bs_gemm_table_pick(&t, 64, 128, 3) == NULL);
    p = bs_gemm_table_pick(&t, 128, 64, 300);
    CHECK(p && p->algo[0] == 1 && p->algo[7] == UINT64_MAX);
    CHECK((p = bs_gemm_table_pick(&t, 128, 64, 100)) && p->algo[0] == 0x80);

    const int shapes[2][2] = {{128, 64}, {64, 64}}, more[3][2] = {{128, 64}, {64, 64}, {64, 256}};
    CHECK_INT(bs_gemm_table_check(&t, "NVIDIA H200", 130100, BS_F16, shapes, 2, &e), 0);
    CHECK_INT(bs_gemm_table_check(&t, "NVIDIA H100 PCIe", 130100, BS_F16, shapes, 2, &e), BS_EINVAL);
    CHECK_CONTAINS(e.msg, "NVIDIA H100 PCIe");
    CHECK_INT(bs_gemm_table_check(&t, "NVIDIA H200", 120901, BS_F16, shapes, 2, &e), BS_EINVAL);
    CHECK_CONTAINS(e.msg, "cuBLASLt");
    CHECK_INT(bs_gemm_table_check(&t, "NVIDIA H200", 130100, BS_BF16, shapes, 2, &e), BS_EINVAL);
    CHECK_CONTAINS(e.msg, "dtype");
    CHECK_INT(bs_gemm_table_check(&t, "NVIDIA H200", 130100, BS_F16, more, 3, &e), BS_EINVAL);
    CHECK_CONTAINS(e.msg, "[64, 256]");

    /* dump and parse again: the same table */
    char *js = bs_gemm_table_dump(&t);
    bs_gemm_table u;
    CHECK(js != NULL);
    CHECK_INT(bs_gemm_table_parse(&u, js, strlen(js), "dump", &e), 0);
    CHECK_INT(u.n_entries, t.n_entries);
    int same = u.n_entries == t.n_entries && u.n_shapes == t.n_shapes && u.invariant == t.invariant;
    for (int i = 0; same && i < t.n_entries; i++)
        same = t.entries[i].m_class == u.entries[i].m_class && t.entries[i].n == u.entries[i].n &&
               !memcmp(t.entries[i].algo, u.entries[i].algo, sizeof t.entries[i].algo);
    CHECK(same);
    CHECK_CONTAINS(js, "\"18446744073709551615\"");
    free(js);
    bs_gemm_table_free(&u);
    bs_gemm_table_free(&t);

    txt = table_text(buf, sizeof buf, "G", "f16", 1, "");
    CHECK_INT(bs_gemm_table_parse(&t, txt, strlen(txt), "t.json", &e), 0);
    const int one[1][2] = {{128, 64}};
    CHECK_INT(bs_gemm_table_check(&t, "G", 130100, BS_F16, one, 1, &e), BS_EINVAL);
    CHECK_CONTAINS(e.msg, "search version 1");
    bs_gemm_table_free(&t);

    /* malformed tables */
    CHECK(parse_fails("[1]", "not a JSON object"));
    CHECK(parse_fails("{\"gpu\": \"G\"", "t.json:1"));
    CHECK(parse_fails(table_text(buf, sizeof buf, "G", "fp8", 2, ""), "dtype"));
    CHECK(parse_fails(table_text(buf, sizeof buf, "", "f16", 2, ""), "gpu"));
    CHECK(parse_fails(table_text(buf, sizeof buf, "G", "f16", 2,
                                 ",{\"m_class\": 64, \"n\": 64, \"k\": 64, \"algo\": [1,0,0,0,0,0,0,0]}"),
                      "two entries"));
    CHECK(parse_fails(table_text(buf, sizeof buf, "G", "f16", 2,
                                 ",{\"m_class\": 32, \"n\": 64, \"k\": 32, \"algo\": [1,0,0,0,0,0,0,0]}"),
                      "does not list"));
    CHECK(parse_fails(table_text(buf, sizeof buf, "G", "f16", 2,
                                 ",{\"m_class\": 32, \"n\": 64, \"k\": 64, \"algo\": [1,0,0,0,0,0,0]}"),
                      "8 words"));
    CHECK(parse_fails(table_text(buf, sizeof buf, "G", "f16", 2,
                                 ",{\"m_class\": 32, \"n\": 64, \"k\": 64, \"algo\": [-1,0,0,0,0,0,0,0]}"),
                      "algo[0]"));
    CHECK(parse_fails(table_text(buf, sizeof buf, "G", "f16", 2,
                                 ",{\"m_class\": 32, \"n\": 64, \"k\": 64, \"algo\": [\"-1\",0,0,0,0,0,0,0]}"),
                      "algo[0]"));
    CHECK(parse_fails(table_text(buf, sizeof buf, "G", "f16", 2,
                                 ",{\"m_class\": 32, \"n\": 64, \"k\": 64, \"algo\": [\"18446744073709551616\",0,0,0,0,0,0,0]}"),
                      "algo[0]"));
    CHECK(parse_fails(table_text(buf, sizeof buf, "G", "f16", 2,
                                 ",{\"m_class\": 0, \"n\": 64, \"k\": 64, \"algo\": [0,0,0,0,0,0,0,0]}"),
                      "m_class"));
    CHECK(parse_fails(table_text(buf, sizeof buf, "G", "f16", 2,
                                 ",{\"m_class\": 32, \"n\": 64, \"k\": 64, \"dtype\": \"bf16\", \"algo\": [0,0,0,0,0,0,0,0]}"),
                      "dtype \"bf16\""));
    CHECK(parse_fails("{\"cublaslt_version\": 1, \"gpu\": \"G\", \"dtype\": \"f16\", \"invariant\": true,"
                      " \"gemm_search_version\": 2, \"shapes\": [[1, 2]], \"entries\": []}", "entries"));
    CHECK(parse_fails("{\"cublaslt_version\": 1, \"gpu\": \"G\", \"dtype\": \"f16\", \"invariant\": 1,"
                      " \"gemm_search_version\": 2, \"shapes\": [[1, 2]], \"entries\": []}", "invariant"));
    CHECK(parse_fails("{\"cublaslt_version\": 1, \"gpu\": \"G\", \"dtype\": \"f16\", \"invariant\": true,"
                      " \"gemm_search_version\": 2, \"shapes\": [[1]], \"entries\": []}", "shapes[0]"));
    bs_err le = {0};
    CHECK(bs_gemm_table_load(&t, "/nonexistent/table.json", &le) < 0);
    CHECK_CONTAINS(le.msg, "/nonexistent/table.json");
}

/* ---- device selection ---- */

static int forward_one(const bs_model *m, float *lg) {
    int32_t ids[5] = {1, 7, 300, 4000, 12}, pos[5] = {0, 1, 2, 3, 4}, ro = 4, oid[3] = {5, 600, 31999};
    bs_unit u = {.q_start = 0, .q_len = 5, .n_ranges = 1, .r_start = {0}, .r_len = {5}};
    bs_fwd_input in = {.n_tokens = 5, .ids = ids, .pos = pos, .n_units = 1, .units = &u,
                       .n_readouts = 1, .readouts = &ro, .n_out_ids = 3, .out_ids = oid};
    bs_err e = {0};
    int rc = bs_forward(m, &in, lg, &e);
    if (rc) fprintf(stderr, "forward: %s\n", e.msg);
    return rc;
}

static void devices(void) {
    char dir[1024];
    snprintf(dir, sizeof dir, "%s/tiny-bias", check_env("FIXTURES", "build/fixtures"));
    bs_model m;
    bs_err e = {0};
    if (bs_model_load(&m, dir, NULL, &e) < 0) {
        fprintf(stderr, "cannot load %s: %s\n", dir, e.msg);
        CHECK(0);
        return;
    }
    float ref[3], got[3];
    CHECK_INT(forward_one(&m, ref), 0);
    int gpus = bs_device_cuda_count();
    printf("CUDA in this build: %s; usable GPUs: %d\n", bs_device_has_cuda() ? "yes" : "no", gpus);

    CHECK_INT(bs_device_attach(&m, "cpu", NULL, &e), 0);
    CHECK_INT(bs_device_attach(&m, "cpu", "bf16", &e), 0);
    CHECK_INT(bs_device_attach(&m, "cpu", "f32", &e), 0);
    CHECK_INT(bs_device_attach(&m, "cpu", "f16", &e), BS_EUNSUP);
    CHECK_CONTAINS(e.msg, "dtype f16 needs the CUDA backend; use bf16 or f32");
    CHECK_INT(bs_device_attach(&m, "gpu", NULL, &e), BS_EINVAL);
    CHECK_CONTAINS(e.msg, "unknown device 'gpu'");
    CHECK_INT(bs_device_attach(&m, "cuda", "half", &e), BS_EINVAL);
    CHECK_CONTAINS(e.msg, "unknown dtype 'half'");
    CHECK(m.backend == NULL);

    if (gpus == 0) {
        /* auto: the CPU, the same logits as before */
        CHECK_INT(bs_device_attach(&m, "auto", NULL, &e), 0);
        CHECK(m.backend == NULL);
        CHECK_INT(bs_device_attach(&m, "auto", "f16", &e), BS_EUNSUP);
        /* cuda: a clear error, and the model keeps working on the CPU */
        memset(&e, 0, sizeof e);
        int rc = bs_device_attach(&m, "cuda", NULL, &e);
        CHECK(rc < 0);
        CHECK(m.backend == NULL);
        if (bs_device_has_cuda()) CHECK_CONTAINS(e.msg, "no CUDA GPU is available");
        else CHECK_CONTAINS(e.msg, "this build has no CUDA backend");
        printf("--device cuda here: %s\n", e.msg);
        CHECK_INT(bs_device_attach_ex(&m, "cuda", "f32", "/nonexistent.json", &e) < 0, 1);
        CHECK(m.backend == NULL);
    } else {
        /* a GPU machine: auto picks CUDA (deeper checks: test_cuda_forward) */
        CHECK_INT(bs_device_attach(&m, "auto", "f32", &e), 0);
        CHECK(m.backend != NULL);
        CHECK_INT(bs_device_attach(&m, "cuda", NULL, &e), BS_EINVAL); /* already attached */
        CHECK_CONTAINS(e.msg, "already has");
        CHECK_INT(bs_device_attach_ex(&m, "cuda", "f32", "/nonexistent.json", &e), BS_EINVAL);
    }
    CHECK_INT(forward_one(&m, got), 0);
    if (!m.backend)
        for (int i = 0; i < 3; i++) CHECK_BITS(got[i], ref[i]);
    else
        for (int i = 0; i < 3; i++) CHECK_NEAR(got[i], ref[i], 1e-4);
    bs_model_free(&m);
}

int main(void) {
    conversion();
    tables();
    devices();
    return check_report("test_cuda_host");
}
