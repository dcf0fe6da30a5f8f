/* Basal-shaped prompt sets for the forward-pass tests (test_forward,
 * test_cuda_forward): a shared template, 3 states, 2 questions per state, 2
 * option orders per question, and NIDS random readout ids. One seeded
 * generator per test binary (include once). */
#ifndef BS_FWD_PROMPTS_H
#define BS_FWD_PROMPTS_H

#include <stdint.h>

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

#endif
