#include "engine/fwd_hook.h"

static void between_layers(void *ctx) {
    bs_fwd_hook *h = ctx;
    if (h->checkpoint) bs_gate_checkpoint(h->checkpoint);
    h->layers_done++;
    if (h->watch) h->watch(h->watch_ctx, h->layers_done, h->n_layers, h->tokens);
}

void bs_fwd_hook_attach(bs_fwd_hook *h, const bs_model *m, bs_gate *checkpoint, bs_layer_watch watch, void *watch_ctx,
                        bs_fwd_input *in) {
    int watched = watch && in->n_tokens >= BS_WATCH_MIN_TOKENS && !m->backend;
    *h = (bs_fwd_hook){checkpoint, watched ? watch : NULL, watch_ctx, 0, m->cfg.n_layers, in->n_tokens};
    if (checkpoint || watched) {
        in->between_layers = between_layers;
        in->between_ctx = h;
    }
    if (watched) watch(watch_ctx, 0, h->n_layers, h->tokens);
}

void bs_fwd_hook_done(const bs_fwd_hook *h) {
    if (h->watch) h->watch(h->watch_ctx, h->n_layers, h->n_layers, h->tokens);
}
