/* The AMX-INT8 block of the int8 mode (gemm_i8.c's driver calls it per 32 x
 * 32 outputs): TDPBSSD, signed activations times signed weights, int32 sums.
 *
 * Tiles (all 16 rows x 64 bytes, the configuration of bs_amx_configure):
 * C0..C3 the four 16 x 16 int32 quarters of the block, A0/A1 rows 0..15 and
 * 16..31 of x over 64 k, B0/B1 columns 0..15 and 16..31 of the strip over
 * the same 16 quads (gemm_i8_impl.h: a quad row is 128 bytes, so a B tile is
 * read with row stride 128 at offset 0 or 64). One step adds 64 k; the sums
 * are exact, so the step order does not matter for the bits, which equal the
 * other int8 kernels'.
 *
 * The block is written once, as a body over five tile operations, and
 * compiled twice: with the AMX instructions (target amx-tile, amx-int8) and
 * with a C emulation of them on an array of eight tiles. The emulated twin
 * runs on every CPU (tests/unit/test_gemm_i8.c), so the addressing, strides
 * and row counts of the AMX kernel are checked where AMX is absent; only the
 * instructions themselves need an AMX CPU. */
#include <stdatomic.h>
#include <string.h>

#include "cpu/gemm_i8_impl.h"
#include "cpu/gemm_impl.h"

#define AMX_I8_BODY                                                                                \
    do {                                                                                           \
        TZERO(0);                                                                                  \
        TZERO(1);                                                                                  \
        if (two) {                                                                                 \
            TZERO(2);                                                                              \
            TZERO(3);                                                                              \
        }                                                                                          \
        for (int k0 = 0; k0 < kp; k0 += 64) {                                                      \
            const int8_t *bq = strip + (size_t)(k0 / 4) * 128;                                     \
            TLOAD(4, x + k0, ldx);                                                                 \
            TLOAD(6, bq, 128);                                                                     \
            TLOAD(7, bq + 64, 128);                                                                \
            TDP(0, 4, 6);                                                                          \
            TDP(1, 4, 7);                                                                          \
            if (two) {                                                                             \
                TLOAD(5, x + 16 * ldx + k0, ldx);                                                  \
                TDP(2, 5, 6);                                                                      \
                TDP(3, 5, 7);                                                                      \
            }                                                                                      \
        }                                                                                          \
        TSTORE(0, c, 128);                                                                         \
        TSTORE(1, c + 16, 128);                                                                    \
        if (two) {                                                                                 \
            TSTORE(2, c + 16 * 32, 128);                                                           \
            TSTORE(3, c + 16 * 32 + 16, 128);                                                      \
        } else {                                                                                   \
            memset(c + 16 * 32, 0, 16 * 32 * sizeof(int32_t));                                     \
        }                                                                                          \
    } while (0)

/* ---- the emulation ----------------------------------------------------------------- */

typedef struct {
    uint8_t tile[8][16][64];
} tiles;

static void emu_load(tiles *T, int t, const void *p, size_t stride) {
    for (int r = 0; r < 16; r++) memcpy(T->tile[t][r], (const char *)p + (size_t)r * stride, 64);
}

static void emu_store(const tiles *T, int t, void *p, size_t stride) {
    for (int r = 0; r < 16; r++) memcpy((char *)p + (size_t)r * stride, T->tile[t][r], 64);
}

/* TDPBSSD: C[m][n] += sum over the 16 quads q and i < 4 of
 * A[m][4q + i] * B[q][4n + i], bytes signed, sums in int32. */
static void emu_dpbssd(tiles *T, int c, int a, int b) {
    for (int m = 0; m < 16; m++)
        for (int n = 0; n < 16; n++) {
            int32_t acc;
            memcpy(&acc, &T->tile[c][m][4 * n], 4);
            for (int q = 0; q < 16; q++)
                for (int i = 0; i < 4; i++)
                    acc += (int32_t)(int8_t)T->tile[a][m][4 * q + i] * (int32_t)(int8_t)T->tile[b][q][4 * n + i];
            memcpy(&T->tile[c][m][4 * n], &acc, 4);
        }
}

void bs_amx_i8_block_emulated(const int8_t *x, size_t ldx, int two, const int8_t *strip, int kp, int32_t *c) {
    tiles T;
#define TZERO(t) memset(T.tile[t], 0, sizeof T.tile[t])
#define TLOAD(t, p, s) emu_load(&T, t, p, s)
#define TDP(cc, a, b) emu_dpbssd(&T, cc, a, b)
#define TSTORE(t, p, s) emu_store(&T, t, p, s)
    AMX_I8_BODY;
#undef TZERO
#undef TLOAD
#undef TDP
#undef TSTORE
}

/* ---- the instructions ----------------------------------------------------------------- */

#if defined(__x86_64__)
#include <cpuid.h>
#include <immintrin.h>
#include <sys/syscall.h>
#include <unistd.h>

/* 0 not asked, 1 usable, -1 absent or refused */
static atomic_int amx_i8_state;

int bs_gemm_amx_i8_available(void) {
    int s = atomic_load(&amx_i8_state);
    if (s) return s > 0;
    unsigned a, b, c, d;
    /* CPUID.(7,0):EDX bit 24 AMX-TILE, bit 25 AMX-INT8 */
    int ok = __get_cpuid_count(7, 0, &a, &b, &c, &d) && (d & (1u << 24)) && (d & (1u << 25));
    /* the tile data state must be granted once per process:
     * arch_prctl(ARCH_REQ_XCOMP_PERM = 0x1023, XFEATURE_XTILEDATA = 18) */
    if (ok) ok = syscall(SYS_arch_prctl, 0x1023, 18) == 0;
    atomic_store(&amx_i8_state, ok ? 1 : -1);
    return ok;
}

__attribute__((target("amx-tile,amx-int8,avx512f"))) void bs_amx_i8_block(const int8_t *x, size_t ldx, int two,
                                                                          const int8_t *strip, int kp, int32_t *c) {
    bs_amx_configure();
#define TZERO(t) _tile_zero(t)
#define TLOAD(t, p, s) _tile_loadd(t, p, s)
#define TDP(cc, a, b) _tile_dpbssd(cc, a, b)
#define TSTORE(t, p, s) _tile_stored(t, p, s)
    AMX_I8_BODY;
#undef TZERO
#undef TLOAD
#undef TDP
#undef TSTORE
}
#else
int bs_gemm_amx_i8_available(void) { return 0; }
void bs_amx_i8_block(const int8_t *x, size_t ldx, int two, const int8_t *strip, int kp, int32_t *c) {
    bs_amx_i8_block_emulated(x, ldx, two, strip, kp, c);
}
#endif
