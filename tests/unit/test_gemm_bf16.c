/* The bf16 compute mode of the GEMM (src/cpu/gemm_bf16.c).
 *
 * 1. The pair step, emulated in portable C, against the VDPBF16PS instruction
 *    of this CPU (when it has AVX512-BF16), bit for bit, on random bit
 *    patterns (NaN, inf, subnormal, huge), realistic magnitudes with
 *    cancellation, and near-ties; the other orders of the two adds (even
 *    element first, or both products summed first) must differ from the
 *    instruction, which shows the comparison can tell them apart.
 * 2. bs_gemm_mode(BF16): against float64 dot products of the bf16-rounded
 *    inputs (f32 accumulation error bound); against chains of the
 *    instruction itself, one lane step at a time, for sampled outputs; the
 *    hardware kernel and the emulation bitwise equal on the same inputs;
 *    batch invariance (every M, row offsets, 1/2/3 threads) and f32, bf16 and
 *    f16 storage of the same values equal, within the mode; weights
 *    prepacked as a model load does (the avx512-bf16 kernels' layout) give
 *    the same bits as packed per call.
 * 3. The AMX kernels (the bf16 default where the CPU and OS allow AMX):
 *    the float64 bound; sampled outputs against the mode's definition run
 *    here one output at a time (a TDPBF16PS per 32-element step, C carried
 *    through memory), bit for bit; batch invariance within themselves; the
 *    weights prepacked as a model load does (bs_gemm_prepack) give the same
 *    bits as packed per call, for every storage, M, offset and thread count;
 *    how many outputs differ from the pair-step kernels is printed
 *    (TDPBF16PS is not the VDPBF16PS step sequence: gemm_amx.c).
 * 2 and 3 run every bf16 kernel the CPU has: the emulation, bf16-avx2
 * (AVX2 + FMA), avx512-bf16 and amx-bf16; 4 and 5 are below. */
#include <stdint.h>

#include "check.h"
#include "base/util.h"
#include "cpu/gemm.h"
#include "cpu/gemm_impl.h"

#if defined(__SANITIZE_ADDRESS__)
#define SANITIZED 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define SANITIZED 1
#endif
#endif
#ifndef SANITIZED
#define SANITIZED 0
#endif

static uint64_t rng = 0x9E3779B97F4A7C15ull;
static uint64_t xr(void) {
    rng ^= rng << 13; rng ^= rng >> 7; rng ^= rng << 17;
    return rng;
}
static float frand(void) { return (float)((double)(xr() >> 11) / 9007199254740992.0 * 2.0 - 1.0); }
static float fbits(uint32_t u) { float f; memcpy(&f, &u, 4); return f; }
static uint32_t ubits(float f) { uint32_t u; memcpy(&u, &f, 4); return u; }
static int same(float a, float b) { return (isnan(a) && isnan(b)) || ubits(a) == ubits(b); }

/* Alternative orders, written here from the definitions, to show the test
 * distinguishes them: even element first; the two products added exactly
 * then rounded once (float64 is exact for these products and sums of
 * normal-range values). No DAZ/FTZ: the random cases below are normal. */
static float even_first(float acc, uint32_t x, uint32_t w) {
    float t = fmaf(bs_bf16_to_f32((uint16_t)x), bs_bf16_to_f32((uint16_t)w), acc);
    return fmaf(bs_bf16_to_f32((uint16_t)(x >> 16)), bs_bf16_to_f32((uint16_t)(w >> 16)), t);
}
static float one_rounding(float acc, uint32_t x, uint32_t w) {
    double s = (double)bs_bf16_to_f32((uint16_t)x) * bs_bf16_to_f32((uint16_t)w) +
               (double)bs_bf16_to_f32((uint16_t)(x >> 16)) * bs_bf16_to_f32((uint16_t)(w >> 16));
    return (float)((double)acc + s);
}

static uint32_t bf16_of(float f) { return bs_f32_to_bf16(f); }

static void check_step(void) {
    if (!bs_gemm_bf16_hw_supported()) {
        printf("no AVX512-BF16 on this CPU: the step is checked against the instruction elsewhere\n");
        return;
    }
    long n = SANITIZED ? 200000 : 4000000, bad = 0, alt_even = 0, alt_one = 0, realistic = 0;
    for (long it = 0; it < n; it++) {
        uint32_t x, w;
        float acc;
        int kind = (int)(it % 4);
        if (kind == 0) { /* any bit patterns: NaN, inf, subnormals, huge */
            x = (uint32_t)xr(); w = (uint32_t)xr(); acc = fbits((uint32_t)xr());
        } else if (kind == 3) { /* near ties: acc around 1, products of a few ulps */
            x = bf16_of(ldexpf(1.0f, -24 + (int)(xr() % 3))) << 16 | bf16_of(ldexpf(1.0f, -25 + (int)(xr() % 3)));
            w = 0x3f80u << 16 | ((xr() & 1) ? 0x3f80u : 0xbf80u);
            acc = 1.0f + ldexpf((float)(xr() % 4), -23);
        } else { /* realistic: magnitudes 2^-20..2^20, cancellation */
            float e = ldexpf(1.0f, (int)(xr() % 40) - 20);
            x = bf16_of(frand() * e) | bf16_of(frand() * e) << 16;
            w = bf16_of(frand()) | bf16_of(frand()) << 16;
            acc = frand() * e * (kind == 2 ? 1e-3f : 1.0f);
        }
        float hw = bs_bf16_pair_step_hw(acc, x, w), em = bs_bf16_pair_step(acc, x, w);
        if (!same(hw, em)) {
            if (bad++ < 5)
                fprintf(stderr, "step differs: acc %a x %08x w %08x: instruction %a, emulation %a\n", acc, x, w, hw, em);
        }
        if (kind == 1 || kind == 2) {
            realistic++;
            alt_even += !same(hw, even_first(acc, x, w));
            alt_one += !same(hw, one_rounding(acc, x, w));
        }
    }
    printf("pair step: %ld cases, %ld differ from VDPBF16PS; on %ld realistic cases the even-first order "
           "differs %ld times, one rounding %ld times\n", n, bad, realistic, alt_even, alt_one);
    CHECK_INT(bad, 0);
    CHECK(alt_even > realistic / 100);
    CHECK(alt_one > realistic / 100);
}

typedef struct {
    int n, k;
} shape;

/* The chain of one output computed with the instruction, one step at a time
 * (a zero pair pads an odd K). */
static float chain_hw(const float *x, const uint16_t *wb, int k) {
    float acc = 0.0f;
    for (int t = 0; t < k; t += 2) {
        uint32_t xp = bf16_of(x[t]) | (t + 1 < k ? bf16_of(x[t + 1]) << 16 : 0u);
        uint32_t wp = wb[t] | (t + 1 < k ? (uint32_t)wb[t + 1] << 16 : 0u);
        acc = bs_bf16_pair_step_hw(acc, xp, wp);
    }
    return acc;
}

#if defined(__x86_64__)
#include <immintrin.h>
/* One output of the AMX mode from its definition: for each 32-element step
 * of k, one TDPBF16PS whose A tile holds only x's 16 pairs (row 0) and whose
 * B tile only w's 16 pairs (column 0), C[0][0] carrying the sum, zero pairs
 * past k. Tiles configured as the library does (16 rows x 64 bytes each),
 * so the library's per-thread configuration stays valid. */
typedef struct __attribute__((packed)) {
    uint8_t palette, start_row, reserved[14];
    uint16_t colsb[16];
    uint8_t rows[16];
} amx_cfg;

static __attribute__((target("amx-tile,amx-bf16"))) float chain_amx(const float *x, const uint16_t *wb, int k) {
    amx_cfg tc;
    memset(&tc, 0, sizeof tc);
    tc.palette = 1;
    for (int t = 0; t < 8; t++) { tc.colsb[t] = 64; tc.rows[t] = 16; }
    _tile_loadconfig(&tc);
    uint32_t a[16 * 16], b[16 * 16];
    float c[16 * 16];
    memset(c, 0, sizeof c);
    for (int e = 0; e < k; e += 32) {
        memset(a, 0, sizeof a);
        memset(b, 0, sizeof b);
        for (int p = 0; p < 16; p++) {
            int t = e + 2 * p;
            if (t >= k) break;
            a[p] = bf16_of(x[t]) | (t + 1 < k ? bf16_of(x[t + 1]) << 16 : 0u);
            b[p * 16] = wb[t] | (t + 1 < k ? (uint32_t)wb[t + 1] << 16 : 0u);
        }
        _tile_loadd(0, c, 64);
        _tile_loadd(4, a, 64);
        _tile_loadd(6, b, 64);
        _tile_dpbf16ps(0, 4, 6);
        _tile_stored(0, c, 64);
    }
    return c[0];
}
#endif

static void check_gemm(bs_pool *pool2, bs_pool *pool3) {
    /* K = 1600 and 3101 (odd) pass over the AMX kernels' K block (1536):
     * the accumulation goes through y between blocks */
    const shape shapes[] = {{37, 53}, {64, 512}, {5, 300}, {130, 517}, {48, 1040}, {200, 64}, {45, 1600}, {33, 3101}};
    enum { NS = sizeof shapes / sizeof *shapes };
    /* the bf16 kernels run where the f32 family is avx512 (BASAL_CPU may cap it) */
    int hw = bs_gemm_bf16_hw_supported() && bs_gemm_kernel() == BS_KERNEL_AVX512;
    int amx = hw && bs_gemm_amx_available(), m_max = SANITIZED ? 70 : 300;
    int chosen = bs_gemm_force_bf16_hw(0); /* the process's own choice, restored at the end */
    /* the kernels this CPU runs: the emulation first (the reference of the
     * others), then bf16-avx2, avx512-bf16 and amx-bf16 */
    int fams[4], nfam = 0;
    fams[nfam++] = 0;
    bs_gemm_force_bf16_hw(3);
    if (bs_gemm_bf16_kernel() == 3) fams[nfam++] = 3;
    if (hw) fams[nfam++] = 1;
    if (amx) fams[nfam++] = 2;
    bs_gemm_force_bf16_hw(0);
    long amx_differ = 0, amx_total = 0;
    for (size_t s = 0; s < NS; s++) {
        int n = shapes[s].n, k = shapes[s].k, mm = m_max;
        rng = 0x1234567ull + s;
        float *w = malloc((size_t)n * k * 4), *x = malloc((size_t)mm * k * 4);
        uint16_t *wb = malloc((size_t)n * k * 2), *wh = malloc((size_t)n * k * 2);
        float *solo = malloc((size_t)mm * n * 4), *y = malloc((size_t)mm * n * 4), *ref_em = malloc((size_t)mm * n * 4);
        /* weights exactly representable in bf16 and in f16 (|w| < 1 with 8
         * significant bits, not too small), so all three storages hold the same values */
        for (int i = 0; i < n * k; i++) {
            float v = (float)((int)(xr() % 255) - 127) / 128.0f;
            wb[i] = bs_f32_to_bf16(v); w[i] = bs_bf16_to_f32(wb[i]); wh[i] = bs_f32_to_f16(w[i]);
        }
        for (int i = 0; i < mm * k; i++) x[i] = frand() * (i % 7 == 0 ? 30.0f : 1.0f);
        bs_wmat wf = {BS_F32, w, n, k, NULL, BS_WPACK_NONE, NULL}, wbf = {BS_BF16, wb, n, k, NULL, BS_WPACK_NONE, NULL},
               whf = {BS_F16, wh, n, k, NULL, BS_WPACK_NONE, NULL};
        for (int fi = 0; fi < nfam; fi++) {
            int fam = fams[fi];
            bs_gemm_force_bf16_hw(fam);
            CHECK_STR(bs_gemm_bf16_kernel_name(),
                      fam == 0 ? "bf16-portable" : fam == 1 ? "avx512-bf16" : fam == 3 ? "bf16-avx2" : "amx-bf16");
            for (int i = 0; i < mm; i++)
                bs_gemm_mode(NULL, BS_COMPUTE_BF16, x + (size_t)i * k, k, 1, &wf, solo + (size_t)i * n, n);
            if (fam == 0 || fam == 2) {
                if (fam == 0) memcpy(ref_em, solo, (size_t)mm * n * 4);
                /* float64 of the rounded inputs: within the f32 accumulation error */
                int badref = 0;
                for (int i = 0; i < (mm < 40 ? mm : 40); i++)
                    for (int j = 0; j < n; j++) {
                        double r = 0, mag = 0;
                        for (int t = 0; t < k; t++) {
                            double p = (double)bs_bf16_to_f32(bs_f32_to_bf16(x[(size_t)i * k + t])) * w[(size_t)j * k + t];
                            r += p; mag += fabs(p);
                        }
                        badref += fabs(solo[(size_t)i * n + j] - r) > mag * k * 1.2e-7 + 1e-30;
                    }
                CHECK_INT(badref, 0);
                if (fam == 2) {
                    for (int i = 0; i < mm * n; i++) amx_differ += ubits(solo[i]) != ubits(ref_em[i]);
                    amx_total += (long)mm * n;
#if defined(__x86_64__)
                    int badamx = 0;
                    for (int t = 0; t < 200; t++) {
                        int i = (int)(xr() % (uint64_t)mm), j = (int)(xr() % (uint64_t)n);
                        float want = chain_amx(x + (size_t)i * k, wb + (size_t)j * k, k);
                        if (!same(want, solo[(size_t)i * n + j]) && badamx++ < 3)
                            fprintf(stderr, "amx N=%d K=%d y[%d][%d]: kernel %a, definition %a\n", n, k, i, j,
                                    solo[(size_t)i * n + j], want);
                    }
                    CHECK_INT(badamx, 0);
#endif
                }
            } else {
                CHECK(memcmp(solo, ref_em, (size_t)mm * n * 4) == 0); /* instruction kernel == emulation */
            }
            if (hw && fam < 2) { /* sampled outputs against the instruction's own chain */
                int badhw = 0;
                for (int t = 0; t < 50; t++) {
                    int i = (int)(xr() % (uint64_t)mm), j = (int)(xr() % (uint64_t)n);
                    badhw += !same(chain_hw(x + (size_t)i * k, wb + (size_t)j * k, k), solo[(size_t)i * n + j]);
                }
                CHECK_INT(badhw, 0);
            }
            /* batch invariance within the mode; storages equal */
            int mism = 0;
            const int ms[] = {2, 5, 6, 13, 14, 15, 16, 17, 29, 31, 32, 33, 64, 141, 300};
            for (size_t q = 0; q < sizeof ms / sizeof *ms; q++) {
                int m = ms[q];
                if (m > mm) continue;
                for (int off = 0; off < 3; off++) {
                    int o = off == 2 ? mm - m : off;
                    if (o + m > mm) continue;
                    bs_pool *pl = off == 0 ? NULL : off == 1 ? pool2 : pool3;
                    const bs_wmat *wm = off == 0 ? &wf : off == 1 ? &wbf : &whf;
                    bs_gemm_mode(pl, BS_COMPUTE_BF16, x + (size_t)o * k, k, m, wm, y, n);
                    int d = memcmp(y, solo + (size_t)o * n, (size_t)m * n * 4) != 0;
                    if (d) fprintf(stderr, "  M=%d offset %d storage %d differs\n", m, o, off);
                    mism += d;
                }
            }
            if (mism) fprintf(stderr, "%s N=%d K=%d: %d batched cases differ from M=1\n", bs_gemm_bf16_kernel_name(), n, k, mism);
            CHECK_INT(mism, 0);
            /* weights prepacked as a model load does: the AMX and the
             * avx512-bf16 kernels take them (each its own layout), with the
             * same bits as packed per call; the emulation packs per call */
            bs_wmat pk[3] = {wf, wbf, whf};
            int packed = 0, pmism = 0;
            for (int q = 0; q < 3; q++) packed += bs_gemm_prepack(pool2, &pk[q], BS_COMPUTE_BF16, NULL) == 1;
            CHECK_INT(packed, fam != 0 ? 3 : 0);
            const int pms[] = {1, 7, 16, 17, 33, 64, 141, 300};
            for (size_t q = 0; q < sizeof pms / sizeof *pms; q++) {
                int m = pms[q];
                if (m > mm) continue;
                for (int st = 0; st < 3; st++) {
                    int o = st == 2 ? mm - m : st * 3;
                    if (o + m > mm) continue;
                    bs_gemm_mode(st == 0 ? NULL : st == 1 ? pool2 : pool3, BS_COMPUTE_BF16, x + (size_t)o * k, k, m,
                                 &pk[st], y, n);
                    int d = memcmp(y, solo + (size_t)o * n, (size_t)m * n * 4) != 0;
                    if (d) fprintf(stderr, "  prepacked: M=%d offset %d storage %d differs\n", m, o, st);
                    pmism += d;
                }
            }
            CHECK_INT(pmism, 0);
            for (int q = 0; q < 3; q++) {
                bs_gemm_unpack(&pk[q]);
                CHECK(pk[q].packed == NULL);
            }
        }
        free(w); free(x); free(wb); free(wh); free(solo); free(y); free(ref_em);
    }
    printf("bf16 GEMM checked (emulation%s%s%s)\n", nfam > 1 && fams[1] == 3 ? ", bf16-avx2" : "", hw ? ", avx512-bf16" : "",
           amx ? ", amx-bf16" : "");
    if (amx)
        printf("amx-bf16: %ld of %ld outputs (%.1f%%) differ from the VDPBF16PS pair steps (a separate mode)\n",
               amx_differ, amx_total, 100.0 * (double)amx_differ / (double)amx_total);
    bs_gemm_force_bf16_hw(chosen);
}

/* A bf16 value for the edge cases: subnormals, values whose products fall
 * below 2^-126 or underflow, zeros of both signs, ordinary values. */
static uint16_t edge_bf16(void) {
    uint32_t r = (uint32_t)xr();
    uint16_t sign = (uint16_t)(r & 0x8000u), man = (uint16_t)((r >> 1) & 0x7fu);
    switch ((r >> 8) % 8) {
    case 0: return (uint16_t)(sign | man);                               /* subnormal (or zero) */
    case 1: case 2: return (uint16_t)(sign | (uint16_t)((r >> 12) % 3 + 1) << 7 | man); /* just above 2^-126 */
    case 3: return (uint16_t)(sign | (uint16_t)(0x1e + (r >> 12) % 6) << 7 | man); /* near 2^-97: products near 2^-195 */
    case 4: case 5: return (uint16_t)(sign | (uint16_t)(0x3c + (r >> 12) % 6) << 7 | man); /* near 2^-63: products near 2^-126 */
    case 6: return sign;                                                  /* +-0 */
    default: return bs_f32_to_bf16(frand()); /* ordinary: sums that cancel */
    }
}

/* 4. bf16-avx2 runs the steps as plain FMAs and redoes a tile with the
 *    emulation when the FMAs met a subnormal or an underflow (gemm_bf16_avx2.c):
 *    on operands full of such values it must still give the emulation's
 *    bits, over K blocks (K > 256: the start values pass through y) and
 *    ragged tiles. A chain of FMAs without DAZ/FTZ, computed here, must
 *    differ from the emulation on some of these outputs (or the test could
 *    not tell). */
static void check_avx2_edges(bs_pool *pool2) {
    int chosen = bs_gemm_force_bf16_hw(3);
    if (bs_gemm_bf16_kernel() != 3) {
        printf("no AVX2 + FMA: bf16-avx2 is not run here\n");
        bs_gemm_force_bf16_hw(chosen);
        return;
    }
    const shape shapes[] = {{17, 9}, {40, 300}, {33, 611}, {16, 1024}};
    long differ_plain = 0, bad = 0, total = 0;
    for (size_t si = 0; si < sizeof shapes / sizeof *shapes; si++) {
        int n = shapes[si].n, k = shapes[si].k, m = 13;
        uint16_t *wb = malloc((size_t)n * k * 2);
        float *x = malloc((size_t)m * k * 4), *ye = malloc((size_t)m * n * 4), *ya = malloc((size_t)m * n * 4);
        for (int i = 0; i < n * k; i++) wb[i] = edge_bf16();
        for (int i = 0; i < m * k; i++) x[i] = bs_bf16_to_f32(edge_bf16());
        /* one row in three ordinary, so that most tiles also run the fast path */
        for (int i = 0; i < m; i += 3)
            for (int t = 0; t < k; t++) x[(size_t)i * k + t] = frand();
        bs_wmat wm = {BS_BF16, wb, n, k, NULL, BS_WPACK_NONE, NULL};
        bs_gemm_force_bf16_hw(0);
        bs_gemm_mode(NULL, BS_COMPUTE_BF16, x, k, m, &wm, ye, n);
        bs_gemm_force_bf16_hw(3);
        for (int run = 0; run < 2; run++) { /* packed per call, then prepacked on two threads */
            bs_wmat wr = wm;
            if (run) CHECK_INT(bs_gemm_prepack(pool2, &wr, BS_COMPUTE_BF16, NULL), 1);
            bs_gemm_mode(run ? pool2 : NULL, BS_COMPUTE_BF16, x, k, m, &wr, ya, n);
            for (int i = 0; i < m * n; i++) {
                total++;
                if (!same(ya[i], ye[i]) && bad++ < 3)
                    fprintf(stderr, "bf16-avx2 N=%d K=%d y[%d]: %a, emulation %a\n", n, k, i, ya[i], ye[i]);
            }
            bs_gemm_unpack(&wr);
        }
        for (int i = 0; i < m; i++)
            for (int j = 0; j < n; j++) {
                float acc = 0.0f;
                for (int t = 0; t + 1 < k; t += 2) {
                    const float *xr2 = x + (size_t)i * k + t;
                    const uint16_t *wr2 = wb + (size_t)j * k + t;
                    float x0 = bs_bf16_to_f32(bs_f32_to_bf16(xr2[0])), x1 = bs_bf16_to_f32(bs_f32_to_bf16(xr2[1]));
                    acc = fmaf(x1, bs_bf16_to_f32(wr2[1]), acc);
                    acc = fmaf(x0, bs_bf16_to_f32(wr2[0]), acc);
                }
                if (k % 2) acc = fmaf(bs_bf16_to_f32(bs_f32_to_bf16(x[(size_t)i * k + k - 1])),
                                      bs_bf16_to_f32(wb[(size_t)j * k + k - 1]), acc);
                differ_plain += !same(acc, ye[(size_t)i * n + j]);
            }
        free(wb); free(x); free(ye); free(ya);
    }
    CHECK_INT(bad, 0);
    CHECK(differ_plain > 0);
    printf("bf16-avx2 on subnormal and underflowing operands: %ld outputs equal to the emulation "
           "(%ld of them differ from FMAs without DAZ/FTZ)\n", total, differ_plain);
    bs_gemm_force_bf16_hw(chosen);
}

/* 5. The AVX2 packing of weight pairs (gemm_bf16_avx2.c), which bf16-avx2
 *    (strips of 16) and avx512-bf16 (strips of 32) both use: the same words
 *    as the portable packing, for every storage, full and ragged strips,
 *    depths with and without a tail of 16. */
static void check_pack_pairs(void) {
    if (bs_gemm_kernel() < BS_KERNEL_AVX2) {
        printf("no AVX2: the AVX2 weight packing is not run here\n");
        return;
    }
    enum { N = 70, K = 300 };
    float *w = malloc(sizeof(float) * N * K);
    uint16_t *wb = malloc(2u * N * K), *wh = malloc(2u * N * K);
    int8_t *wq = malloc((size_t)N * K);
    float *got = malloc(sizeof(float) * 32 * K), *want = malloc(sizeof(float) * 32 * K);
    for (int i = 0; i < N * K; i++) {
        uint32_t r = (uint32_t)xr();
        w[i] = i % 97 == 0 ? fbits(r) : frand() * 3.0f; /* some NaN, inf, subnormal bit patterns */
        wb[i] = (uint16_t)r;
        wh[i] = bs_f32_to_f16(frand());
        wq[i] = (int8_t)((int)(r % 255) - 127);
    }
    const bs_wmat ws[4] = {{BS_F32, w, N, K, NULL, BS_WPACK_NONE, NULL}, {BS_BF16, wb, N, K, NULL, BS_WPACK_NONE, NULL},
                           {BS_F16, wh, N, K, NULL, BS_WPACK_NONE, NULL}, {BS_I8, wq, N, K, NULL, BS_WPACK_NONE, NULL}};
    int bad = 0, cases = 0;
    for (int d = 0; d < 4; d++)
        for (int nr = 16; nr <= 32; nr += 16)
            for (int n0 = 0; n0 < N; n0 += nr)
                for (int ki = 0; ki < 8; ki++) {
                    static const int kcs[8] = {16, 32, 96, 160, 256, 288, 63, 110}; /* the last two: a tail */
                    int kc = kcs[ki];
                    size_t words = (size_t)((kc + 1) / 2) * nr;
                    memset(got, 0xA5, words * 4);
                    memset(want, 0x5A, words * 4);
                    bs_gemm_pack_b_pairs_avx2(&ws[d], n0, K - kc, kc, got, nr);
                    bs_gemm_pack_b_pairs(&ws[d], n0, K - kc, kc, want, nr);
                    bad += memcmp(got, want, words * 4) != 0;
                    cases++;
                }
    CHECK_INT(bad, 0);
    printf("AVX2 weight pairs equal the portable packing in %d cases (strips of 16 and 32)\n", cases);
    free(w); free(wb); free(wh); free(wq); free(got); free(want);
}

int main(void) {
    bs_pool *pool2 = bs_pool_create(2), *pool3 = bs_pool_create(3);
    CHECK(pool2 && pool3);
    check_step();
    check_gemm(pool2, pool3);
    check_avx2_edges(pool2);
    check_pack_pairs();
    bs_pool_destroy(pool2);
    bs_pool_destroy(pool3);
    return check_report("test_gemm_bf16");
}
