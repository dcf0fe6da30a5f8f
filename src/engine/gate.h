/* The device gate (spec 04 §11): engines of every model take turns on the
 * compute device (the CPU thread pool). Main lanes are urgent; long lanes are
 * preemptible and, between layers, hand the device to one waiting urgent call
 * once they have held it for long_slice_ms. */
#ifndef BS_GATE_H
#define BS_GATE_H

typedef struct bs_gate bs_gate;

/* now_ms: the clock (NULL = monotonic); tests inject a fake one. */
bs_gate *bs_gate_create(double long_slice_ms, double (*now_ms)(void *), void *clock_ctx);
void bs_gate_destroy(bs_gate *g);

void bs_gate_enter_urgent(bs_gate *g);
void bs_gate_enter_preemptible(bs_gate *g);
void bs_gate_leave(bs_gate *g);
/* Called by a preemptible holder between layers: parks and resumes if an
 * urgent caller waits and the holder has had the device for >= the slice.
 * Returns 1 if it yielded. */
int bs_gate_checkpoint(bs_gate *g);

#endif
