/* `basal generate`: greedy decoding through the engine's own forward pass, for
 * debugging and the stories260K golden test. Each step recomputes the whole
 * sequence (one unit, positions 0..n-1) and takes the argmax over the full
 * vocabulary (lowest id on ties); it stops early when BOS comes out again, as
 * llama2.c does. */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "tokenizer/tokenizer.h"
#include "base/util.h"
#include "model/forward.h"

/* BOS from tokenizer_config.json's bos_token (string or {"content": ...}) when
 * present, else id 1 (llama2.c's BOS). */
static int32_t find_bos(const char *dir, const bs_tokenizer *tok) {
    char *path = bs_path_join(dir, "tokenizer_config.json");
    int32_t id = 1;
    json_t *root = path ? json_load_file(path, 0, NULL) : NULL;
    json_t *b = json_object_get(root, "bos_token");
    if (json_is_object(b)) b = json_object_get(b, "content");
    if (json_is_string(b)) {
        int32_t t = bs_tokenizer_token_to_id(tok, json_string_value(b));
        if (t >= 0) id = t;
    }
    json_decref(root);
    free(path);
    return id;
}

const cli_doc cli_doc_generate = {
    "generate", "--model REF --steps N [--prompt TEXT] [--threads N]",
    "greedy decoding from a prompt (debugging, the stories260K golden test)",
    "Each step recomputes the whole sequence and takes the argmax over the vocabulary; it\n"
    "stops early when BOS comes out again. The text goes to stdout.\n",
};

int cmd_generate(int argc, char **argv) {
    const char *model_dir = NULL, *prompt = NULL;
    int steps = -1, threads = 0;
    const cli_opt opts[] = {
        CLI_MODEL("model directory or reference (owner/name[@revision], mini, 4.5B, max; required)", &model_dir),
        CLI_INT("--steps", "N", "", NULL, "tokens to generate at most (required)", &steps, 0, 1 << 30),
        CLI_STR("--prompt", "TEXT", "", NULL, "text after BOS (default: none)", &prompt),
        CLI_INT("--threads", "N", "0 = online CPUs", NULL, "CPU compute threads", &threads, 0, 1 << 16),
    };
    int rc = cli_parse(&cli_doc_generate, opts, CLI_N(opts), NULL, argc, argv);
    if (rc) return rc < 0 ? 0 : rc;
    if (!model_dir || steps < 0) {
        cli_error("generate", "--model REF and --steps N are required (see basal generate --help)");
        return 2;
    }
    int status = 1;
    bs_err err = {0};
    bs_pool *pool = bs_pool_create(threads);
    bs_tokenizer *tok = NULL;
    bs_model m;
    int loaded = 0;
    char *tok_path = bs_path_join(model_dir, "tokenizer.json"), *text = NULL;
    int32_t *seq = NULL, *pos = NULL, *pids = NULL, *all = NULL;
    float *lg = NULL;
    size_t np = 0;
    if (!pool || !tok_path) goto done;
    if (bs_tokenizer_load(&tok, tok_path, &err) < 0) { cli_error("generate", "%s", err.msg); goto done; }
    if (bs_model_load(&m, model_dir, pool, &err) < 0) { cli_error("generate", "%s", err.msg); goto done; }
    loaded = 1;
    if (prompt && bs_tokenizer_encode(tok, prompt, strlen(prompt), &pids, &np, NULL, &err) < 0) {
        cli_error("generate", "%s", err.msg);
        goto done;
    }
    int32_t V = m.cfg.vocab, bos = find_bos(model_dir, tok);
    size_t cap = 1 + np + (size_t)steps;
    seq = malloc(cap * sizeof *seq);
    pos = malloc(cap * sizeof *pos);
    all = malloc((size_t)V * sizeof *all);
    lg = malloc((size_t)V * sizeof *lg);
    if (!seq || !pos || !all || !lg) goto done;
    for (int32_t i = 0; i < V; i++) all[i] = i;
    size_t n = 0;
    seq[n++] = bos;
    for (size_t i = 0; i < np; i++) seq[n++] = pids[i];
    for (int s = 0; s < steps; s++) {
        if ((int64_t)n >= m.cfg.max_pos) break;
        for (size_t i = 0; i < n; i++) pos[i] = (int32_t)i;
        bs_unit u = {.q_start = 0, .q_len = (int32_t)n, .n_ranges = 1, .r_start = {0}, .r_len = {(int32_t)n}};
        int32_t ro = (int32_t)n - 1;
        bs_fwd_input in = {.n_tokens = (int32_t)n, .ids = seq, .pos = pos, .n_units = 1, .units = &u,
                           .n_readouts = 1, .readouts = &ro, .n_out_ids = V, .out_ids = all};
        if (bs_forward(&m, &in, lg, &err) < 0) { cli_error("generate", "%s", err.msg); goto done; }
        int32_t best = 0;
        for (int32_t i = 1; i < V; i++)
            if (lg[i] > lg[best]) best = i;
        if (best == bos) break;
        seq[n++] = best;
    }
    /* Decode prompt and continuation together so the decoder's leading-space
     * rule applies once, to the first piece after BOS. */
    size_t tl = 0;
    if (bs_tokenizer_decode(tok, seq + 1, n - 1, 1, &text, &tl, &err) < 0) {
        cli_error("generate", "%s", err.msg);
        goto done;
    }
    fwrite(text, 1, tl, stdout);
    status = 0;
done:
    free(text); free(seq); free(pos); free(pids); free(all); free(lg); free(tok_path);
    if (loaded) bs_model_free(&m);
    bs_tokenizer_free(tok);
    bs_pool_destroy(pool);
    return status;
}
