/* `basal logits`: logits of chosen vocabulary ids at the last token of each
 * given prompt (debugging and the PyTorch comparison tests). Input JSON:
 *   {"prompts": [[ids...], ...], "ids": [vocab ids] (absent = all),
 *    "mode": "tree" (default: all prompts packed into one trie row, one
 *             forward) | "separate" (one forward per prompt)}
 * Output: {"logits": [[...], ...]} in prompt order, f32 values printed so they
 * round-trip. */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "base/util.h"
#include "engine/pack.h"
#include "model/forward.h"

static int read_input(const char *path, json_t **out) {
    json_error_t je;
    json_t *root = !strcmp(path, "-") ? json_loadf(stdin, 0, &je) : json_load_file(path, 0, &je);
    if (!root) {
        cli_error("logits", "%s: %s (line %d)", path, je.text, je.line);
        return -1;
    }
    *out = root;
    return 0;
}

static int32_t *int_array(json_t *a, int32_t *n) {
    *n = (int32_t)json_array_size(a);
    int32_t *v = malloc(((size_t)*n + 1) * sizeof *v);
    if (!v) return NULL;
    for (int32_t i = 0; i < *n; i++) {
        json_t *x = json_array_get(a, (size_t)i);
        if (!json_is_integer(x)) { free(v); return NULL; }
        v[i] = (int32_t)json_integer_value(x);
    }
    return v;
}

/* Runs one forward over `np` prompts packed into one row; writes logits of
 * prompt i at out + i * nids. */
static int run_packed(const bs_model *m, int32_t **prompts, const int32_t *lens, int32_t np,
                      const int32_t *ids, int32_t nids, float *out, bs_err *e) {
    bs_row row;
    bs_packed pk;
    int rc = bs_pack_row(&row, (const int32_t *const *)prompts, lens, np, e);
    if (rc < 0) return rc;
    rc = bs_packed_build(&pk, &row, 1, NULL, ids, nids, e);
    bs_row_free(&row);
    if (rc < 0) return rc;
    float *lg = malloc((size_t)pk.in.n_readouts * nids * sizeof *lg);
    if (!lg) rc = bs_fail(e, BS_ENOMEM, "out of memory");
    else rc = bs_forward(m, &pk.in, lg, e);
    if (rc == 0)
        for (int32_t p = 0; p < np; p++)
            memcpy(out + (size_t)p * nids, lg + (size_t)pk.readout_of[p] * nids, (size_t)nids * sizeof *lg);
    free(lg);
    bs_packed_free(&pk);
    return rc;
}

const cli_doc cli_doc_logits = {
    "logits", "--model REF --input FILE|- [options]",
    "logits of chosen vocabulary ids at the last token of each prompt (debugging)",
    "Input JSON: {\"prompts\": [[ids...], ...], \"ids\": [vocab ids] (absent = all),\n"
    "\"mode\": \"tree\" (one packed forward, the default) | \"separate\" (one forward per prompt)}.\n"
    "Output: {\"logits\": [[...], ...]} in prompt order, f32 values that round-trip.\n",
};

int cmd_logits(int argc, char **argv) {
    const char *model_dir = NULL, *input = NULL;
    int threads = 0;
    cli_device dev = {0};
    const cli_opt opts[] = {
        CLI_MODEL("model directory or reference (owner/name[@revision], mini, 4.5B, max; required)", &model_dir),
        CLI_STR("--input", "FILE|-", "", NULL, "the input JSON; - reads stdin (required)", &input),
        CLI_INT("--threads", "N", "0 = online CPUs", NULL, "CPU compute threads", &threads, 0, 1 << 16),
        CLI_DEVICE_ROWS(&dev),
    };
    int prc = cli_parse(&cli_doc_logits, opts, CLI_N(opts), NULL, argc, argv);
    if (prc) return prc < 0 ? 0 : prc;
    if (!model_dir || !input) {
        cli_error("logits", "--model REF and --input FILE|- are required (see basal logits --help)");
        return 2;
    }
    int status = 1;
    json_t *root = NULL;
    bs_pool *pool = NULL;
    bs_model m;
    int model_loaded = 0;
    int32_t np = 0, nids = 0, *ids = NULL, **prompts = NULL, *lens = NULL;
    float *out = NULL;
    bs_err err = {0};

    if (read_input(input, &root) < 0) goto done;
    json_t *jp = json_object_get(root, "prompts"), *ji = json_object_get(root, "ids");
    const char *mode = json_string_value(json_object_get(root, "mode"));
    if (!mode) mode = "tree";
    if (!json_is_array(jp) || json_array_size(jp) == 0 || (strcmp(mode, "tree") && strcmp(mode, "separate"))) {
        cli_error("logits", "input needs a non-empty \"prompts\" array and mode tree|separate");
        status = 2;
        goto done;
    }
    pool = bs_pool_create(threads);
    if (!pool) { cli_error("logits", "cannot start threads"); goto done; }
    if (bs_model_load(&m, model_dir, pool, &err) < 0) {
        cli_error("logits", "%s", err.msg);
        goto done;
    }
    model_loaded = 1;
    if (cli_device_attach("logits", &m, &dev) < 0) goto done;
    if (ji && !json_is_null(ji)) {
        if (!json_is_array(ji) || !(ids = int_array(ji, &nids)) || nids == 0) {
            cli_error("logits", "\"ids\" must be a non-empty array of integers");
            status = 2;
            goto done;
        }
    } else {
        nids = m.cfg.vocab;
        if (!(ids = malloc((size_t)nids * sizeof *ids))) goto done;
        for (int32_t i = 0; i < nids; i++) ids[i] = i;
    }
    np = (int32_t)json_array_size(jp);
    prompts = calloc((size_t)np, sizeof *prompts);
    lens = calloc((size_t)np, sizeof *lens);
    out = malloc((size_t)np * nids * sizeof *out);
    if (!prompts || !lens || !out) goto done;
    for (int32_t p = 0; p < np; p++) {
        json_t *a = json_array_get(jp, (size_t)p);
        if (!json_is_array(a) || !(prompts[p] = int_array(a, &lens[p])) || lens[p] == 0) {
            cli_error("logits", "prompt %d must be a non-empty array of integers", p);
            status = 2;
            goto done;
        }
    }
    if (!strcmp(mode, "tree")) {
        if (run_packed(&m, prompts, lens, np, ids, nids, out, &err) < 0) {
            cli_error("logits", "%s", err.msg);
            goto done;
        }
    } else {
        for (int32_t p = 0; p < np; p++)
            if (run_packed(&m, &prompts[p], &lens[p], 1, ids, nids, out + (size_t)p * nids, &err) < 0) {
                cli_error("logits", "%s", err.msg);
                goto done;
            }
    }
    printf("{\"logits\": [");
    for (int32_t p = 0; p < np; p++) {
        printf(p ? ", [" : "[");
        for (int32_t i = 0; i < nids; i++) printf(i ? ", %.9g" : "%.9g", (double)out[(size_t)p * nids + i]);
        printf("]");
    }
    printf("]}\n");
    status = 0;
done:
    if (prompts)
        for (int32_t p = 0; p < np; p++) free(prompts[p]);
    free(prompts); free(lens); free(ids); free(out);
    if (model_loaded) bs_model_free(&m);
    bs_pool_destroy(pool);
    json_decref(root);
    return status;
}
