/* What the forward-pass tests (test_forward, test_cuda_forward) share:
 * Basal-shaped prompt sets (a shared template, 3 states, 2 questions per
 * state, 2 option orders per question, and NIDS random readout ids; one seeded
 * generator per test binary, include once) and the input-error checks. */
#ifndef BS_FWD_PROMPTS_H
#define BS_FWD_PROMPTS_H

#include <stdint.h>

#include "check.h"
#include "model/forward.h"

enum { NP = 12, MAXLEN = 200, NIDS = 10, FWD_MAX_STATE = 150 };

static uint64_t rng;
static uint32_t rnd(uint32_t n) {
    rng = rng * 6364136223846793005ull + 1442695040888963407ull;
    return (uint32_t)(rng >> 33) % n;
}

static int32_t prompts[NP][MAXLEN], lens[NP];
static int32_t out_ids[NIDS];

/* The second state has long_state (<= FWD_MAX_STATE) tokens; the others 17 and 5. */
static void make_prompts(int vocab, int long_state) {
    int32_t tmpl[24], state[3][FWD_MAX_STATE], q[6][8];
    int state_len[3] = {17, long_state, 5};
    for (int i = 0; i < 24; i++) tmpl[i] = (int32_t)rnd((uint32_t)vocab);
    for (int s = 0; s < 3; s++)
        for (int i = 0; i < long_state; i++) state[s][i] = (int32_t)rnd((uint32_t)vocab);
    for (int s = 0; s < 6; s++)
        for (int i = 0; i < 8; i++) q[s][i] = (int32_t)rnd((uint32_t)vocab);
    int32_t optA = (int32_t)rnd((uint32_t)vocab), optB = (int32_t)rnd((uint32_t)vocab);
    int p = 0;
    for (int s = 0; s < 3; s++)
        for (int qi = 0; qi < 2; qi++)
            for (int o = 0; o < 2; o++, p++) {
                int n = 0;
                for (int i = 0; i < 24; i++) prompts[p][n++] = tmpl[i];
                for (int i = 0; i < state_len[s]; i++) prompts[p][n++] = state[s][i];
                for (int i = 0; i < 8; i++) prompts[p][n++] = q[s * 2 + qi][i];
                prompts[p][n++] = o ? optB : optA;
                prompts[p][n++] = o ? optA : optB;
                lens[p] = n;
            }
    for (int i = 0; i < NIDS; i++) out_ids[i] = (int32_t)rnd((uint32_t)vocab);
}

/* Malformed forward inputs on a loaded model m (any backend: they share the
 * CPU forward's validation): each is refused with its code and message, and
 * the model still answers a good input afterwards. */
static void check_input_errors(bs_model *m) {
    bs_err e = {0};
    int32_t ids[3] = {1, 2, 3}, pos[3] = {0, 1, 2}, ro = 2, oid = 5;
    float lg[1];
    bs_unit u = {.q_start = 0, .q_len = 3, .n_ranges = 1, .r_start = {0}, .r_len = {3}};
    bs_fwd_input in = {.n_tokens = 3, .ids = ids, .pos = pos, .n_units = 1, .units = &u,
                       .n_readouts = 1, .readouts = &ro, .n_out_ids = 1, .out_ids = &oid};
    CHECK_INT(bs_forward(m, &in, lg, &e), 0);
    int32_t far[3] = {m->cfg.max_pos - 2, m->cfg.max_pos - 1, m->cfg.max_pos};
    in.pos = far;
    CHECK_INT(bs_forward(m, &in, lg, &e), BS_ERANGE);
    CHECK_CONTAINS(e.msg, "max_position_embeddings");
    in.pos = pos;
    int32_t bad_ids[3] = {1, m->cfg.vocab, 3};
    in.ids = bad_ids;
    CHECK(bs_forward(m, &in, lg, &e) < 0);
    CHECK_CONTAINS(e.msg, "vocabulary");
    in.ids = ids;
    int32_t wrong_pos[3] = {0, 2, 3};
    in.pos = wrong_pos;
    CHECK_INT(bs_forward(m, &in, lg, &e), BS_EINTERNAL);
    in.pos = pos;
    bs_unit bad = u;
    bad.r_len[0] = 2;
    in.units = &bad;
    CHECK_INT(bs_forward(m, &in, lg, &e), BS_EINTERNAL);
    in.units = &u;
    int32_t bad_ro = 3;
    in.readouts = &bad_ro;
    CHECK(bs_forward(m, &in, lg, &e) < 0);
    in.readouts = &ro;
    CHECK_INT(bs_forward(m, &in, lg, &e), 0);
}

#endif
