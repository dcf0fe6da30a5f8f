/* What runs between the layers of one forward of an engine lane: the gate's
 * checkpoint on a preemptible lane (engine/gate.h), and the layer watch of a
 * long forward (the CLI's progress, the server's log). The logit lens reads
 * each layer's readout rows through bs_fwd_input.after_layer instead
 * (engine/lens.h): it needs the rows, and runs after the last layer too. */
#ifndef BS_ENGINE_FWD_HOOK_H
#define BS_ENGINE_FWD_HOOK_H

#include <stdint.h>

#include "engine/gate.h"
#include "model/forward.h"

/* Called with the layers done (0 when the forward starts, then
 * 1..n_layers) and the forward's token count. Only forwards of at least
 * BS_WATCH_MIN_TOKENS on the CPU backend are watched: on CUDA a call between
 * layers synchronises the stream, which costs a forward there more than its
 * progress is worth. */
typedef void (*bs_layer_watch)(void *ctx, int layers_done, int n_layers, int32_t tokens);
enum { BS_WATCH_MIN_TOKENS = 1024 };

typedef struct bs_fwd_hook {
    bs_gate *checkpoint;    /* NULL: no checkpoint */
    bs_layer_watch watch;   /* NULL, or not watched (short, or on CUDA) */
    void *watch_ctx;
    int layers_done, n_layers;
    int32_t tokens;
} bs_fwd_hook;

/* Sets in->between_layers (or leaves it NULL) for a forward of m; h must
 * live until the forward returns. checkpoint: the gate of a preemptible
 * lane, or NULL. */
void bs_fwd_hook_attach(bs_fwd_hook *h, const bs_model *m, bs_gate *checkpoint, bs_layer_watch watch, void *watch_ctx,
                        bs_fwd_input *in);
/* Reports the last layer once the forward has returned successfully. */
void bs_fwd_hook_done(const bs_fwd_hook *h);

#endif
