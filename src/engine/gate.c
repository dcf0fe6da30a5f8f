#include "engine/gate.h"

#include <pthread.h>
#include <stdlib.h>

#include "base/util.h"

struct bs_gate {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int busy, urgent_waiting, parked, handoff;
    double since, min_slice;
    double (*now)(void *);
    void *clock_ctx;
};

static double mono_ms(void *ctx) {
    (void)ctx;
    return bs_now_ms();
}

bs_gate *bs_gate_create(double long_slice_ms, double (*now_ms)(void *), void *clock_ctx) {
    bs_gate *g = calloc(1, sizeof *g);
    if (!g) return NULL;
    pthread_mutex_init(&g->mu, NULL);
    pthread_cond_init(&g->cv, NULL);
    g->min_slice = long_slice_ms;
    g->now = now_ms ? now_ms : mono_ms;
    g->clock_ctx = clock_ctx;
    return g;
}

void bs_gate_destroy(bs_gate *g) {
    if (!g) return;
    pthread_mutex_destroy(&g->mu);
    pthread_cond_destroy(&g->cv);
    free(g);
}

/* G1 */
void bs_gate_enter_urgent(bs_gate *g) {
    pthread_mutex_lock(&g->mu);
    g->urgent_waiting++;
    while (g->busy || g->handoff) pthread_cond_wait(&g->cv, &g->mu);
    g->urgent_waiting--;
    g->busy = 1;
    g->since = g->now(g->clock_ctx);
    pthread_mutex_unlock(&g->mu);
}

/* G2: a preemptible lane never starts a call while an urgent one waits. */
void bs_gate_enter_preemptible(bs_gate *g) {
    pthread_mutex_lock(&g->mu);
    while (g->busy || g->handoff || g->urgent_waiting > 0) pthread_cond_wait(&g->cv, &g->mu);
    g->busy = 1;
    g->since = g->now(g->clock_ctx);
    pthread_mutex_unlock(&g->mu);
}

/* G3: a parked lane gets the device back before anyone else. */
void bs_gate_leave(bs_gate *g) {
    pthread_mutex_lock(&g->mu);
    g->busy = 0;
    g->since = 0;
    if (g->parked) {
        g->parked = 0;
        g->handoff = 1;
    }
    pthread_cond_broadcast(&g->cv);
    pthread_mutex_unlock(&g->mu);
}

/* G4 */
int bs_gate_checkpoint(bs_gate *g) {
    pthread_mutex_lock(&g->mu);
    if (g->urgent_waiting == 0 || g->now(g->clock_ctx) - g->since < g->min_slice) {
        pthread_mutex_unlock(&g->mu);
        return 0;
    }
    g->busy = 0;
    g->parked = 1;
    pthread_cond_broadcast(&g->cv);
    while (!g->handoff) pthread_cond_wait(&g->cv, &g->mu);
    g->handoff = 0;
    g->busy = 1;
    g->since = g->now(g->clock_ctx);
    pthread_mutex_unlock(&g->mu);
    return 1;
}
