/* AMX-BF16 kernels for the bf16 compute mode (dtype bf16 on a CPU with AMX;
 * BASAL_BF16 picks another bf16 kernel).
 *
 * TDPBF16PS does not compute the VDPBF16PS pair steps of gemm_bf16.c:
 * measured on this Sapphire Rapids (tests/unit/test_gemm_bf16.c prints it), its
 * result for one k pair already differs from both pair orders in about 10%
 * of random cases, and for 16 pairs per instruction in about 40%; it is
 * closest to (but not) one rounding of the whole exact dot product. Its
 * internal arithmetic is undocumented, so no other CPU can reproduce its bits.
 * Within the mode each output is still a fixed sequence that depends only on
 * K: one TDPBF16PS per 32-element tile step, steps in k order, zero pairs
 * padding the last step. Between K blocks the f32 C tile passes through y
 * (a tile store and reload, exact), so the blocking constants below never
 * change a bit; each C row depends only on its own x row, so results are
 * batch-invariant (tested) and thread-count independent.
 *
 * This family has its own driver (bs_gemm_amx_run), not gemm.c's: measured,
 * the shared driver's shape (x repacked per K block and per column group,
 * weights packed per call into a strip buffer larger than L2) left the tile
 * loop waiting on L2 and memory at about 1/4 of its in-cache speed. Here:
 *  - x is packed once per call, in parallel, over the whole K (tile order:
 *    a panel of 32 rows is one 2 KiB block per tile step);
 *  - the weights are packed once at model load (bs_gemm_amx_prepack; the
 *    same layout packed per call when they are not), one 32-column strip
 *    being one 2 KiB block per step, so a strip's K block is contiguous
 *    memory read once from RAM, then from L2 by every panel of the row block;
 *  - a task walks row blocks of up to MB panels, column blocks of CB strips and K
 *    blocks of KB steps, so that the C block and the x block of one K block
 *    stay in L2 across the K blocks.
 * Tiles: C is 32 x 32 (four 16 x 16 f32 tiles; two when a panel has <= 16
 * rows, whose lower half is never computed), A two 16-row tiles of 16 pairs,
 * B two 16-pair tiles of 16 columns. */
#include "cpu/gemm_impl.h"

#if defined(__x86_64__)
#include <cpuid.h>
#include <immintrin.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "cpu/bf16_round_avx512.h" /* round16_bf16 */

/* STEP: pairs per tile step; WORDS: 32-bit words of one panel's (or one
 * strip's) tile step; KB: steps per K block (1536 elements: a strip's block
 * is 96 KiB, in L2; measured on Sapphire Rapids, 16 steps (32 KiB, in L1)
 * were 5-15% slower for the extra C round trips through y, 32 and 64 within
 * the noise); MB: panels per row block at most (row blocks of equal size:
 * each streams all the weights; at most 16 x CB x 4 KiB of C, 512 KiB, and
 * 16 x KB x 2 KiB of x, 1.5 MiB; measured on weights streaming from RAM,
 * M = 465 and 2048, one block of 15 or blocks of 16 were 5-30% faster than
 * blocks of 10); CB: strips per column block (4 or 16 measured within the
 * noise); X_CHUNK: bytes of packed x per pass at most (longer inputs are
 * done in row chunks). */
enum { MR = 32, NR = 32, STEP = 16, WORDS = 512, KB = 48, MB = 16, CB = 8 };
static const size_t X_CHUNK = (size_t)16 << 20;

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

/* Every tile 16 rows x 64 bytes; loaded once per thread (the AMX attention
 * uses this configuration too; nothing else configures tiles). */
static _Thread_local int thread_configured;

AMX_FN void bs_amx_configure(void) {
    if (thread_configured) return;
    tile_config tc;
    memset(&tc, 0, sizeof tc);
    tc.palette = 1;
    for (int t = 0; t < 8; t++) {
        tc.colsb[t] = 64;
        tc.rows[t] = 16;
    }
    /* gcc 12 does not see _tile_loadconfig read its operand: out of line it
     * dropped the stores above as dead, so the operand is an explicit input */
    __asm__ volatile("ldtilecfg %0" : : "m"(tc));
    thread_configured = 1;
}

/* Tile steps over depth k (pairs rounded up to whole steps). */
static int steps_of(int k) { return ((k + 1) / 2 + STEP - 1) / STEP; }

/* ---- packing ----------------------------------------------------------------- */

/* One panel of x (rows < 32 rows; the rest zero) over steps [s0, s0 + ns)
 * into dst, one step per WORDS words: rows 0..15 (16 words each) then rows
 * 16..31, element 2p in the low half of word p, rounded as the AVX512-BF16
 * packing (bs_f32_to_bf16); zeros past k. */
static __attribute__((target("avx512f"))) void pack_panel(const float *x, int ldx, int rows, int k, int s0, int ns,
                                                           uint32_t *dst) {
    for (int i = 0; i < MR; i++) {
        uint32_t *d = dst + (i / 16) * 256 + (i % 16) * 16;
        if (i >= rows) {
            for (int s = 0; s < ns; s++) memset(d + (size_t)s * WORDS, 0, 64);
            continue;
        }
        const float *src = x + (size_t)i * ldx;
        for (int s = 0; s < ns; s++) {
            int e = (s0 + s) * 2 * STEP, left = k - e;
            __mmask16 m0 = left >= 16 ? 0xffff : left > 0 ? (__mmask16)((1u << left) - 1) : 0;
            __mmask16 m1 = left >= 32 ? 0xffff : left > 16 ? (__mmask16)((1u << (left - 16)) - 1) : 0;
            __m256i lo = round16_bf16(_mm512_maskz_loadu_ps(m0, src + e));
            __m256i hi = round16_bf16(_mm512_maskz_loadu_ps(m1, src + e + 16));
            _mm512_storeu_si512((void *)(d + (size_t)s * WORDS),
                                _mm512_inserti64x4(_mm512_castsi256_si512(lo), hi, 1));
        }
    }
}

/* Strip j of w (columns 32j.., zero past N) over steps [s0, s0 + ns) into
 * dst: [pair][32 columns] words, the AVX512-BF16 weight packing, zero pairs
 * past K. */
static void pack_strip(const bs_wmat *w, int j, int s0, int ns, uint32_t *dst) {
    int k0 = s0 * 2 * STEP, kc = w->k - k0 < ns * 2 * STEP ? w->k - k0 : ns * 2 * STEP;
    int pairs = kc > 0 ? (kc + 1) / 2 : 0;
    if (kc > 0) bs_gemm_impl_avx512bf16.pack_b(w, j * NR, k0, kc, (float *)(void *)dst);
    memset(dst + (size_t)pairs * NR, 0, (size_t)(ns * STEP - pairs) * NR * 4);
}

size_t bs_gemm_amx_packed_bytes(const bs_wmat *w) {
    return (size_t)((w->n + NR - 1) / NR) * (size_t)steps_of(w->k) * WORDS * 4;
}

typedef struct {
    const bs_wmat *w;
    uint32_t *dst;
    int strips, per_task;
} prepack_job;

static void prepack_task(void *arg, int task, int thread) {
    (void)thread;
    const prepack_job *p = arg;
    int S = steps_of(p->w->k);
    for (int j = task * p->per_task; j < p->strips && j < (task + 1) * p->per_task; j++)
        pack_strip(p->w, j, 0, S, p->dst + (size_t)j * S * WORDS);
}

void bs_gemm_amx_prepack(bs_pool *pool, const bs_wmat *w, void *dst) {
    prepack_job p = {w, dst, (w->n + NR - 1) / NR, 8};
    bs_pool_run(pool, (p.strips + p.per_task - 1) / p.per_task, prepack_task, &p);
}

/* ---- the tile kernel ----------------------------------------------------------- */

/* What to bring into cache while a tile computes (see compute_task): a
 * range of lines of the weight block the task uses next (into L2), and the
 * 32 rows of y the next tile writes (into L1; y_next 0: none). */
typedef struct {
    uintptr_t at; /* integers: never formed into a pointer past the block */
    int lines;
    uintptr_t y_next;
    int ldy;
} pf_lines;

/* The share of pf's weight lines for one tile step, and two lines of the
 * next tile's rows of y (row i/2, half i%2). Measured (gate|up, M = 448,
 * one thread, 330 MiB of weights in turn): a tile's stores of y to lines
 * that are in no cache held the tile loads behind them, at 0.65 of the
 * speed with y in cache; prefetching them here gave +12-13%, +40% with y
 * on huge pages (forward.c), in both AMX phases of the machine. */
static inline void pf_step(pf_lines pf, int per_step, int *issued, int *y_issued) {
    for (int e = *issued + per_step < pf.lines ? *issued + per_step : pf.lines; *issued < e; ++*issued)
        _mm_prefetch((const char *)(pf.at + (uintptr_t)*issued * 64), _MM_HINT_T1);
    if (pf.y_next && *y_issued < 2 * MR) {
        for (int q = 0; q < 2; q++, ++*y_issued)
            _mm_prefetch((const char *)(pf.y_next + ((uintptr_t)(*y_issued >> 1) * (uintptr_t)pf.ldy +
                                                     (uintptr_t)(*y_issued & 1) * 16) * sizeof(float)),
                         _MM_HINT_T0);
    }
}

/* C (32 x 32 at c, row stride ldc floats) += panel a times strip b over
 * steps tile steps (a and b at their first step); from zero when first. two:
 * the panel has rows 16..31. pf: lines prefetched into L2, spread over the
 * steps. */
static AMX_FN void tile_32x32(const uint32_t *a, const uint32_t *b, int steps, float *c, int ldc, int first,
                              int two, pf_lines pf) {
    bs_amx_configure();
    const size_t ld = (size_t)ldc * 4;
    if (first) {
        _tile_zero(0); _tile_zero(1); _tile_zero(2); _tile_zero(3);
    } else {
        _tile_loadd(0, c, ld);
        _tile_loadd(1, c + 16, ld);
        if (two) {
            _tile_loadd(2, c + (size_t)16 * ldc, ld);
            _tile_loadd(3, c + (size_t)16 * ldc + 16, ld);
        }
    }
    const int per_step = (pf.lines + steps - 1) / steps;
    int issued = 0, y_issued = 0;
    if (two) {
        for (int s = 0; s < steps; s++, a += WORDS, b += WORDS) {
            pf_step(pf, per_step, &issued, &y_issued);
            _tile_loadd(6, b, NR * 4);
            _tile_loadd(4, a, STEP * 4);
            _tile_loadd(7, b + 16, NR * 4);
            _tile_dpbf16ps(0, 4, 6);
            _tile_loadd(5, a + 256, STEP * 4);
            _tile_dpbf16ps(1, 4, 7);
            _tile_dpbf16ps(2, 5, 6);
            _tile_dpbf16ps(3, 5, 7);
        }
    } else {
        for (int s = 0; s < steps; s++, a += WORDS, b += WORDS) {
            pf_step(pf, per_step, &issued, &y_issued);
            _tile_loadd(4, a, STEP * 4);
            _tile_loadd(6, b, NR * 4);
            _tile_loadd(7, b + 16, NR * 4);
            _tile_dpbf16ps(0, 4, 6);
            _tile_dpbf16ps(1, 4, 7);
        }
    }
    _tile_stored(0, c, ld);
    _tile_stored(1, c + 16, ld);
    if (two) {
        _tile_stored(2, c + (size_t)16 * ldc, ld);
        _tile_stored(3, c + (size_t)16 * ldc + 16, ld);
    }
}

/* One 32 x 32 output tile of y with r valid rows and nv valid columns: in
 * place when whole, else through a copy, so that rows and columns past the
 * ends are neither read nor written. */
static void tile(const uint32_t *a, const uint32_t *b, int steps, float *y, int ldy, int r, int nv, int first,
                 pf_lines pf) {
    if (r == MR && nv == NR) {
        tile_32x32(a, b, steps, y, ldy, first, 1, pf);
        return;
    }
    float t[MR * NR] __attribute__((aligned(64)));
    if (!first) {
        memset(t, 0, sizeof t);
        for (int i = 0; i < r; i++) memcpy(t + i * NR, y + (size_t)i * ldy, (size_t)nv * sizeof(float));
    }
    tile_32x32(a, b, steps, t, NR, first, r > 16, pf);
    for (int i = 0; i < r; i++) memcpy(y + (size_t)i * ldy, t + i * NR, (size_t)nv * sizeof(float));
}

/* ---- driver -------------------------------------------------------------------- */

typedef struct {
    const float *x;
    int ldx, m; /* rows of this chunk */
    const bs_wmat *w;
    const uint32_t *wp; /* prepacked weights, or NULL: each strip block packed into sbuf */
    float *y;
    int ldy;
    int S, panels, strips, rgs, cgs;
    uint32_t *xp;   /* panels x S steps */
    uint32_t *sbuf; /* per thread: one strip block (KB steps) */
} amx_job;

static void pack_task(void *arg, int p, int thread) {
    (void)thread;
    const amx_job *j = arg;
    int rows = j->m - p * MR < MR ? j->m - p * MR : MR;
    pack_panel(j->x + (size_t)p * MR * j->ldx, j->ldx, rows, j->w->k, 0, j->S, j->xp + (size_t)p * j->S * WORDS);
}

static void compute_task(void *arg, int task, int thread) {
    const amx_job *j = arg;
    int rg = task / j->cgs, cg = task % j->cgs;
    int p0 = (int)((long long)j->panels * rg / j->rgs), p1 = (int)((long long)j->panels * (rg + 1) / j->rgs);
    int s0 = (int)((long long)j->strips * cg / j->cgs), s1 = (int)((long long)j->strips * (cg + 1) / j->cgs);
    uint32_t *sbuf = j->sbuf + (size_t)thread * KB * WORDS;
    /* row blocks of equal size, at most MB panels: every row block streams
     * all the task's weights once, so a small last block would cost as much
     * weight traffic as a full one */
    int nblk = (p1 - p0 + MB - 1) / MB, mb = nblk ? (p1 - p0 + nblk - 1) / nblk : 1;
    for (int pb = p0; pb < p1; pb += mb) {
        int pe = pb + mb < p1 ? pb + mb : p1;
        for (int cb = s0; cb < s1; cb += CB) {
            int ce = cb + CB < s1 ? cb + CB : s1;
            for (int k = 0; k < j->S; k += KB) {
                int ns = j->S - k < KB ? j->S - k : KB;
                for (int s = cb; s < ce; s++) {
                    const uint32_t *b;
                    if (j->wp) {
                        b = j->wp + ((size_t)s * j->S + k) * WORDS;
                    } else {
                        pack_strip(j->w, s, k, ns, sbuf);
                        b = sbuf;
                    }
                    int nv = j->w->n - s * NR < NR ? j->w->n - s * NR : NR;
                    /* The weight block used next, brought into L2 while
                     * this one computes: the tiles' own loads of a block
                     * streaming from RAM wait on memory (measured on 12
                     * layers of weights, M = 465, 2 threads, interleaved:
                     * 17% faster with it, as fast as on weights in cache). */
                    int nxs = -1, nxk = 0;
                    if (j->wp) {
                        if (s + 1 < ce) nxs = s + 1, nxk = k;
                        else if (k + KB < j->S) nxs = cb, nxk = k + KB;
                        else if (ce < s1) nxs = ce, nxk = 0;
                        else if (pb + mb < p1) nxs = s0, nxk = 0;
                    }
                    uintptr_t nb = nxs < 0 ? 0 : (uintptr_t)(j->wp + ((size_t)nxs * j->S + nxk) * WORDS);
                    int lines = nxs < 0 ? 0 : (j->S - nxk < KB ? j->S - nxk : KB) * (WORDS * 4 / 64);
                    int share = (lines + (pe - pb) - 1) / (pe - pb);
                    for (int p = pb; p < pe; p++) {
                        int r = j->m - p * MR < MR ? j->m - p * MR : MR;
                        int from = (p - pb) * share, n = lines - from < share ? lines - from : share;
                        pf_lines pf = {nb + (uintptr_t)from * 64, n > 0 ? n : 0, 0, j->ldy};
                        /* the next tile of y, when whole (a partial one goes through a copy) */
                        int yp = p + 1, ys = s;
                        if (yp == pe) yp = pb, ys = s + 1;
                        if (ys < ce && (yp + 1) * MR <= j->m && (ys + 1) * NR <= j->w->n)
                            pf.y_next = (uintptr_t)(j->y + (size_t)yp * MR * j->ldy + (size_t)ys * NR);
                        tile(j->xp + ((size_t)p * j->S + k) * WORDS, b, ns, j->y + (size_t)p * MR * j->ldy + s * NR,
                             j->ldy, r, nv, k == 0, pf);
                    }
                }
            }
        }
    }
}

/* Out of memory: the product cannot fail, so it runs serially with one
 * panel's K block of x and one strip block on the stack (192 KiB): the same
 * tile steps in the same order, so the same bits. */
static __attribute__((noinline)) void run_small(const float *x, int ldx, int m, const bs_wmat *w,
                                                 const uint32_t *wp, float *y, int ldy) {
    uint32_t xs[KB * WORDS] __attribute__((aligned(64))), bs[KB * WORDS] __attribute__((aligned(64)));
    int S = steps_of(w->k), strips = (w->n + NR - 1) / NR;
    for (int p = 0; p * MR < m; p++) {
        int r = m - p * MR < MR ? m - p * MR : MR;
        for (int k = 0; k < S; k += KB) {
            int ns = S - k < KB ? S - k : KB;
            pack_panel(x + (size_t)p * MR * ldx, ldx, r, w->k, k, ns, xs);
            for (int s = 0; s < strips; s++) {
                const uint32_t *b = bs;
                if (wp) b = wp + ((size_t)s * S + k) * WORDS;
                else pack_strip(w, s, k, ns, bs);
                int nv = w->n - s * NR < NR ? w->n - s * NR : NR;
                tile(xs, b, ns, y + (size_t)p * MR * ldy + s * NR, ldy, r, nv, k == 0, (pf_lines){0, 0, 0, 0});
            }
        }
    }
}

void bs_gemm_amx_run(bs_pool *pool, const float *x, int ldx, int m, const bs_wmat *w, float *y, int ldy) {
    const uint32_t *wp = w->packed_kind == BS_WPACK_AMX ? w->packed : NULL;
    int S = steps_of(w->k), strips = (w->n + NR - 1) / NR, nthreads = bs_pool_size(pool);
    size_t panel_words = (size_t)S * WORDS;
    int chunk_panels = (int)(X_CHUNK / (panel_words * 4));
    if (chunk_panels < 1) chunk_panels = 1;
    int all_panels = (m + MR - 1) / MR, cp = all_panels < chunk_panels ? all_panels : chunk_panels;
    size_t words = (size_t)cp * panel_words + (wp ? 0 : (size_t)nthreads * KB * WORDS);
    float *scratch = bs_gemm_scratch_take((words + 15) & ~(size_t)15);
    if (!scratch) {
        run_small(x, ldx, m, w, wp, y, ldy);
        return;
    }
    amx_job j = {0};
    j.ldx = ldx;
    j.w = w;
    j.wp = wp;
    j.ldy = ldy;
    j.S = S;
    j.strips = strips;
    j.xp = (uint32_t *)(void *)scratch;
    j.sbuf = j.xp + (size_t)cp * panel_words;
    for (int r0 = 0; r0 < m; r0 += cp * MR) {
        j.x = x + (size_t)r0 * ldx;
        j.y = y + (size_t)r0 * ldy;
        j.m = m - r0 < cp * MR ? m - r0 : cp * MR;
        j.panels = (j.m + MR - 1) / MR;
        /* columns split among the threads; rows as well when there are too
         * few strips for each thread to stream several */
        j.cgs = nthreads < strips ? nthreads : strips;
        j.rgs = 1;
        if (strips < 4 * nthreads && j.panels >= nthreads) {
            j.cgs = 1;
            j.rgs = nthreads;
        }
        bs_pool_run(pool, j.panels, pack_task, &j);
        bs_pool_run(pool, j.rgs * j.cgs, compute_task, &j);
    }
    bs_gemm_scratch_give_back(scratch);
}

const bs_gemm_impl bs_gemm_impl_amx = {
    MR, NR, KB * 2 * STEP, MR * MB, NR * CB, KB * STEP, KB * WORDS, NULL, NULL, {NULL}, "amx-bf16", BS_WPACK_AMX,
    bs_gemm_amx_run};
#else
int bs_gemm_amx_available(void) { return 0; }
size_t bs_gemm_amx_packed_bytes(const bs_wmat *w) { (void)w; return 0; }
void bs_gemm_amx_prepack(bs_pool *pool, const bs_wmat *w, void *dst) { (void)pool; (void)w; (void)dst; }
#endif
