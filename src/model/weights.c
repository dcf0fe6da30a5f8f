/* The model's per-layer matrices (model/weights.h). */
#include "model/weights.h"

#include <stdlib.h>

bs_wmat *bs_layer_mat(bs_layer *ly, int i) {
    bs_wmat *all[BS_LAYER_MATS] = {&ly->wq, &ly->wk, &ly->wv, &ly->wo, &ly->wg, &ly->wu, &ly->wd};
    return i >= 0 && i < BS_LAYER_MATS ? all[i] : NULL;
}

const char *bs_layer_mat_name(int i) {
    static const char *const names[BS_LAYER_MATS] = {"self_attn.q_proj", "self_attn.k_proj", "self_attn.v_proj",
                                                     "self_attn.o_proj", "mlp.gate_proj",    "mlp.up_proj",
                                                     "mlp.down_proj"};
    return i >= 0 && i < BS_LAYER_MATS ? names[i] : NULL;
}

void bs_model_drop_copies(bs_model *m) {
    for (int l = 0; m->layers && l < m->cfg.n_layers; l++) {
        bs_layer *ly = &m->layers[l];
        for (int i = 0; i < BS_LAYER_MATS; i++) bs_gemm_unpack(bs_layer_mat(ly, i));
        free(ly->ln1_i8); free(ly->ln2_i8); free(ly->bv_i8); free(ly->bu_i8);
        ly->ln1_i8 = ly->ln2_i8 = ly->bv_i8 = ly->bu_i8 = NULL;
        ly->down_hadamard = 0;
    }
    m->quant = BS_QUANT_NONE;
}
