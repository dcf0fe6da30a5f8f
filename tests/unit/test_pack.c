/* Prefix-trie packing against the worked examples E1–E7 of spec 04 §5
 * (upstream's tests/unit/test_engine.py vectors), plus the compact-input units. */
#include "check.h"
#include "engine/pack.h"

static void check_arr(const char *what, const int32_t *got, const int32_t *exp, int n) {
    int ok = 1;
    for (int i = 0; i < n; i++) ok &= got[i] == exp[i];
    if (ok) { check_pass_++; return; }
    check_fail_++;
    fprintf(stderr, "%s differs:\n  got:     ", what);
    for (int i = 0; i < n; i++) fprintf(stderr, " %d", got[i]);
    fprintf(stderr, "\n  expected:");
    for (int i = 0; i < n; i++) fprintf(stderr, " %d", exp[i]);
    fprintf(stderr, "\n");
}

#define ARR(...) ((const int32_t[]){__VA_ARGS__})
#define N(...) ((int)(sizeof((int32_t[]){__VA_ARGS__}) / sizeof(int32_t)))

typedef struct {
    const char *name;
    int np;
    const int32_t *prompts[16];
    int32_t lens[16];
} example;

static void expect(const example *ex, const int32_t *ids, int len, const int32_t *pos, const int32_t *node,
                   const int32_t *parent, int nb, const int32_t *last, int prefix_len) {
    bs_row row;
    bs_err e = {0};
    int rc = bs_pack_row(&row, ex->prompts, ex->lens, ex->np, &e);
    CHECK_INT(rc, 0);
    if (rc < 0) return;
    fprintf(stderr, "%s\n", ex->name);
    CHECK_INT(row.len, len);
    if (row.len == len) {
        check_arr("ids", row.ids, ids, len);
        if (pos) check_arr("pos", row.pos, pos, len);
        if (node) check_arr("node", row.node, node, len);
    }
    CHECK_INT(row.n_blocks, nb);
    if (row.n_blocks == nb && parent) check_arr("parent", row.parent, parent, nb);
    check_arr("last", row.last, last, ex->np);
    CHECK_INT(row.prefix_len, prefix_len);
    /* R6 consequence: each readout's visible tokens are exactly its prompt. */
    bs_packed pk;
    int32_t out_id = 0;
    CHECK_INT(bs_packed_build(&pk, &row, 1, NULL, &out_id, 1, &e), 0);
    for (int p = 0; p < ex->np; p++) {
        int col = row.last[p], ui = -1;
        for (int u = 0; u < pk.in.n_units; u++)
            if (col >= pk.units[u].q_start && col < pk.units[u].q_start + pk.units[u].q_len) ui = u;
        CHECK(ui >= 0);
        if (ui < 0) continue;
        const bs_unit *u = &pk.units[ui];
        int32_t vis[256], nv = 0;
        for (int r = 0; r < u->n_ranges; r++) {
            int end = r == u->n_ranges - 1 ? col + 1 : u->r_start[r] + u->r_len[r];
            for (int t = u->r_start[r]; t < end && nv < 256; t++) vis[nv++] = pk.ids[t];
        }
        CHECK_INT(nv, ex->lens[p]);
        if (nv == ex->lens[p]) check_arr("visible tokens", vis, ex->prompts[p], nv);
        CHECK_INT(pk.pos[col], ex->lens[p] - 1);
    }
    bs_packed_free(&pk);
    bs_row_free(&row);
}

int main(void) {
    {
        example ex = {"E1", 2, {ARR(1, 2, 3, 4, 5), ARR(1, 2, 3, 7, 8, 9)}, {5, 6}};
        expect(&ex, ARR(1, 2, 3, 4, 5, 7, 8, 9), 8, ARR(0, 1, 2, 3, 4, 3, 4, 5), ARR(0, 0, 0, 1, 1, 2, 2, 2),
               ARR(-1, 0, 0), 3, ARR(4, 7), 3);
    }
    {
        example ex = {"E2", 4,
                      {ARR(1, 2, 3, 10, 11, 4, 5), ARR(1, 2, 3, 10, 11, 5, 4), ARR(1, 2, 3, 20, 21, 4, 5),
                       ARR(1, 2, 3, 20, 21, 5, 4)},
                      {7, 7, 7, 7}};
        expect(&ex, ARR(1, 2, 3, 10, 11, 4, 5, 5, 4, 20, 21, 4, 5, 5, 4), 15,
               ARR(0, 1, 2, 3, 4, 5, 6, 5, 6, 3, 4, 5, 6, 5, 6), ARR(0, 0, 0, 1, 1, 2, 2, 3, 3, 4, 4, 5, 5, 6, 6),
               ARR(-1, 0, 1, 1, 0, 4, 4), 7, ARR(6, 8, 12, 14), 3);
    }
    {
        example ex = {"E3", 1, {ARR(5, 6, 7)}, {3}};
        expect(&ex, ARR(5, 6, 7), 3, ARR(0, 1, 2), ARR(1, 1, 1), ARR(-1, 0), 2, ARR(2), 0);
    }
    {
        example ex = {"E4", 2, {ARR(1, 2, 3), ARR(1, 2, 3)}, {3, 3}};
        expect(&ex, ARR(1, 2, 3), 3, ARR(0, 1, 2), ARR(0, 0, 0), ARR(-1), 1, ARR(2, 2), 3);
    }
    {
        example ex = {"E5", 2, {ARR(1, 2), ARR(1, 2, 3)}, {2, 3}};
        expect(&ex, ARR(1, 2, 3), 3, ARR(0, 1, 2), ARR(0, 0, 1), ARR(-1, 0), 2, ARR(1, 2), 2);
    }
    {
        example ex = {"E6", 2, {ARR(1, 2), ARR(3, 4)}, {2, 2}};
        expect(&ex, ARR(1, 2, 3, 4), 4, ARR(0, 1, 0, 1), ARR(1, 1, 2, 2), ARR(-1, 0, 0), 3, ARR(1, 3), 0);
    }
    {
        /* E7: P_k = [1..k] + [100+k], k = 1..9; chain blocks 0,2,...,12 hold 1..7,
         * leaves 1,3,...,13; at depth 7 two prompts get blocks 14 [8,108] and
         * 15 [8,9,109]. Row length 19. */
        static int32_t p[9][10];
        example ex = {"E7", 9, {0}, {0}};
        for (int k = 1; k <= 9; k++) {
            for (int i = 0; i < k; i++) p[k - 1][i] = i + 1;
            p[k - 1][k] = 100 + k;
            ex.prompts[k - 1] = p[k - 1];
            ex.lens[k - 1] = k + 1;
        }
        expect(&ex, ARR(1, 101, 2, 102, 3, 103, 4, 104, 5, 105, 6, 106, 7, 107, 8, 108, 8, 9, 109), 19, NULL, NULL,
               NULL, 16, ARR(1, 3, 5, 7, 9, 11, 13, 15, 18), 1);
    }
    return check_report("test_pack");
}
