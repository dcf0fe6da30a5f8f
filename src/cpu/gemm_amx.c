/* AMX-BF16 kernels for the bf16 compute mode (opt-in: BASAL_BF16=amx).
 *
 * TDPBF16PS does not compute the VDPBF16PS pair steps of gemm_bf16.c:
 * measured on this Sapphire Rapids (tests/test_gemm_bf16.c prints it), its
 * result for one k pair already differs from both pair orders in about 10%
 * of random cases, and for 16 pairs per instruction in about 40%; it is
 * closest to (but not) one rounding of the whole exact dot product. Its
 * internal arithmetic is undocumented, so no other CPU can reproduce its bits:
 * this is a separate mode, never chosen by dtype bf16 alone. Within it, each
 * output is still computed by a fixed sequence that depends only on K: 16-pair
 * (32-element) tile steps in k order, K blocks of KC = 1536 through y (one
 * block for the mini shapes' K = 1536: a tile's C stays in the tile
 * registers over the whole block; measured, KC = 512 was 15-28% slower for
 * its extra C stores and reloads), zero pairs padding the last step of a
 * block; each C row depends only on its own x row, so results are
 * batch-invariant (tested) and thread-count independent.
 *
 * Tiles: C is 32 x 32 (four 16 x 16 f32 tiles; two when a tile has <= 16
 * rows), A two 16-row tiles of 16 pairs, B two 16-pair tiles of 16 columns.
 * The weight strips are those of the AVX512-BF16 kernels ([pair][32]); x is
 * packed in tile order (pack_a). C is read from and written to y directly
 * (c_in_place): no staging copy. */
#include "cpu/gemm_impl.h"

#if defined(__x86_64__)
#include <cpuid.h>
#include <immintrin.h>
#include <stdatomic.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "cpu/bf16_round_avx512.h" /* round16_bf16 */

/* LDA: packed x is stored panel by panel (32 rows, MR * KC / 2 words each,
 * see pack_a), so row i0 of a panel start is at i0 * LDA words. */
enum { MR = 32, NR = 32, KC = 1536, MC = 256, NC = 1024, LDA = KC / 2, STEP_PAIRS = 16 };
_Static_assert(KC % (2 * STEP_PAIRS) == 0 && (int)MR <= (int)BS_GEMM_MAX_MR && (int)NR <= (int)BS_GEMM_MAX_NR &&
                   MR * LDA + (KC / 2) * NR + 16 <= BS_GEMM_SMALL_FLOATS && MC % MR == 0,
               "AMX blocking exceeds the driver's limits");

#define AMX_FN __attribute__((target("amx-tile,amx-bf16,avx512f")))

/* 0: not asked yet, 1: usable, -1: absent or refused by the kernel. */
static atomic_int amx_state;

int bs_gemm_amx_available(void) {
    int s = atomic_load(&amx_state);
    if (s) return s > 0;
    unsigned a, b, c, d;
    int ok = __get_cpuid_count(7, 0, &a, &b, &c, &d) && (d & (1u << 22)) && (d & (1u << 24));
    /* Linux keeps the tile data state off until a process asks once:
     * arch_prctl(ARCH_REQ_XCOMP_PERM = 0x1023, XFEATURE_XTILEDATA = 18). */
    if (ok) ok = syscall(SYS_arch_prctl, 0x1023, 18) == 0;
    atomic_store(&amx_state, ok ? 1 : -1);
    return ok;
}

typedef struct __attribute__((packed)) {
    uint8_t palette, start_row, reserved[14];
    uint16_t colsb[16];
    uint8_t rows[16];
} tile_config;

/* Every tile 16 rows x 64 bytes; loaded once per thread (nothing else in the
 * process configures tiles). */
static _Thread_local int thread_configured;

static AMX_FN void configure(void) {
    if (thread_configured) return;
    tile_config tc;
    memset(&tc, 0, sizeof tc);
    tc.palette = 1;
    for (int t = 0; t < 8; t++) {
        tc.colsb[t] = 64;
        tc.rows[t] = 16;
    }
    _tile_loadconfig(&tc);
    thread_configured = 1;
}

static int round_pairs(int kc) { return ((kc + 1) / 2 + STEP_PAIRS - 1) / STEP_PAIRS * STEP_PAIRS; }

/* x rows in tile order: within each 32-row panel, step s (16 pairs) of rows
 * 0..15 is one contiguous 1 KiB block (row r at word s * 512 + r * 16), rows
 * 16..31 the next, so a tile is 16 consecutive cache lines and a panel is
 * read front to back (the row-major layout of the AVX512-BF16 kernels ran as
 * fast in a noisy A/B run; this one needs no row stride sized for KC). The
 * rounding is the AVX512-BF16 packing's (bs_f32_to_bf16); zero pairs pad the
 * last step; rows past `rows` in the last panel are not written and their
 * outputs never stored. */
static __attribute__((target("avx512f"))) void pack_a(const float *x, int ldx, int rows, int k0, int kc,
                                                       float *ap) {
    const int steps = round_pairs(kc) / STEP_PAIRS;
    for (int i = 0; i < rows; i++) {
        const float *src = x + (size_t)i * ldx + k0;
        float *dst = ap + (size_t)(i / MR) * MR * LDA + (i % MR) * STEP_PAIRS;
        for (int s = 0; s < steps; s++) {
            /* 32 elements = 16 pairs, element 2p in the low half of word p;
             * past kc, zeros (the zero pairs padding the step) */
            int k = s * 2 * STEP_PAIRS, left = kc - k;
            __mmask16 m0 = left >= 16 ? 0xffff : left > 0 ? (__mmask16)((1u << left) - 1) : 0;
            __mmask16 m1 = left >= 32 ? 0xffff : left > 16 ? (__mmask16)((1u << (left - 16)) - 1) : 0;
            __m256i lo = round16_bf16(_mm512_maskz_loadu_ps(m0, src + k));
            __m256i hi = round16_bf16(_mm512_maskz_loadu_ps(m1, src + k + 16));
            _mm512_storeu_si512((void *)(dst + (size_t)s * MR * STEP_PAIRS),
                                _mm512_inserti64x4(_mm512_castsi256_si512(lo), hi, 1));
        }
    }
}

static void pack_b(const bs_wmat *w, int n0, int k0, int kc, float *dst) {
    bs_gemm_impl_avx512bf16.pack_b(w, n0, k0, kc, dst);
    int p0 = (kc + 1) / 2, p1 = round_pairs(kc);
    memset(dst + (size_t)p0 * NR, 0, (size_t)(p1 - p0) * NR * 4);
}

static AMX_FN void ukr_body(const float *a, const float *b, int kc, float *c, int ldc, int first, int R) {
    configure();
    /* R <= 16: the lower half of the tile (tiles 2, 3 and A tile 5) is not
     * computed; each output's own sequence of tile steps is the same. */
    const int two = R > 16;
    float t[MR * NR] __attribute__((aligned(64)));
    float *cc = c;
    int ldcc = ldc;
    if (R != MR) { /* a partial tile goes through t: rows R.. are never read from or written to c */
        cc = t;
        ldcc = NR;
        if (!first) {
            for (int i = 0; i < R; i++) memcpy(t + i * NR, c + (size_t)i * ldc, NR * sizeof(float));
            memset(t + R * NR, 0, (size_t)(MR - R) * NR * sizeof(float));
        }
    }
    if (first) {
        _tile_zero(0); _tile_zero(1); _tile_zero(2); _tile_zero(3);
    } else {
        _tile_loadd(0, cc, ldcc * 4);
        _tile_loadd(1, cc + 16, ldcc * 4);
        if (two) {
            _tile_loadd(2, cc + (size_t)16 * ldcc, ldcc * 4);
            _tile_loadd(3, cc + (size_t)16 * ldcc + 16, ldcc * 4);
        }
    }
    int steps = round_pairs(kc) / STEP_PAIRS;
    if (two) {
        for (int s = 0; s < steps; s++) {
            const float *as = a + (size_t)s * MR * STEP_PAIRS, *bs = b + (size_t)s * STEP_PAIRS * NR;
            _tile_loadd(6, bs, NR * 4);
            _tile_loadd(4, as, STEP_PAIRS * 4);
            _tile_loadd(7, bs + 16, NR * 4);
            _tile_dpbf16ps(0, 4, 6);
            _tile_loadd(5, as + 16 * STEP_PAIRS, STEP_PAIRS * 4);
            _tile_dpbf16ps(1, 4, 7);
            _tile_dpbf16ps(2, 5, 6);
            _tile_dpbf16ps(3, 5, 7);
        }
    } else {
        for (int s = 0; s < steps; s++) {
            const float *as = a + (size_t)s * MR * STEP_PAIRS, *bs = b + (size_t)s * STEP_PAIRS * NR;
            _tile_loadd(4, as, STEP_PAIRS * 4);
            _tile_loadd(6, bs, NR * 4);
            _tile_loadd(7, bs + 16, NR * 4);
            _tile_dpbf16ps(0, 4, 6);
            _tile_dpbf16ps(1, 4, 7);
        }
    }
    _tile_stored(0, cc, ldcc * 4);
    _tile_stored(1, cc + 16, ldcc * 4);
    if (two) {
        _tile_stored(2, cc + (size_t)16 * ldcc, ldcc * 4);
        _tile_stored(3, cc + (size_t)16 * ldcc + 16, ldcc * 4);
    }
    if (R != MR)
        for (int i = 0; i < R; i++) memcpy(c + (size_t)i * ldc, t + i * NR, NR * sizeof(float));
}

#define UKR(R)                                                                                      \
    static void ukr_##R(const float *a, const float *b, int kc, float *c, int ldc, int first, float *stage, \
                        const float *next, int next_rows, const float *pf) {                        \
        (void)stage; (void)next; (void)next_rows; (void)pf;                                         \
        ukr_body(a, b, kc, c, ldc, first, R);                                                       \
    }
UKR(1) UKR(2) UKR(3) UKR(4) UKR(5) UKR(6) UKR(7) UKR(8) UKR(9) UKR(10) UKR(11) UKR(12) UKR(13) UKR(14) UKR(15)
UKR(16) UKR(17) UKR(18) UKR(19) UKR(20) UKR(21) UKR(22) UKR(23) UKR(24) UKR(25) UKR(26) UKR(27) UKR(28) UKR(29)
UKR(30) UKR(31) UKR(32)

const bs_gemm_impl bs_gemm_impl_amx = {
    MR, NR, KC, MC, NC, LDA, (KC / 2) * NR, pack_a, pack_b,
    {NULL, ukr_1, ukr_2, ukr_3, ukr_4, ukr_5, ukr_6, ukr_7, ukr_8, ukr_9, ukr_10, ukr_11, ukr_12, ukr_13, ukr_14,
     ukr_15, ukr_16, ukr_17, ukr_18, ukr_19, ukr_20, ukr_21, ukr_22, ukr_23, ukr_24, ukr_25, ukr_26, ukr_27, ukr_28,
     ukr_29, ukr_30, ukr_31, ukr_32},
    "amx-bf16",
    /* a tile takes ~0.6 us: spreading prefetches over the tiles costs more
     * than it saves (measured) */
    1,
    /* C tiles load their start values from y directly (no staging copy) */
    1};
#else
int bs_gemm_amx_available(void) { return 0; }
#endif
