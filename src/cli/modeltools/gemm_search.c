/* `basal gemm-search --model REF --out FILE [--dtype f16|bf16|f32]
 * [--invariant] [--max-m N] [--m-classes a,b,...] [--reps N]
 * [--max-candidates N]` (spec 06 §9): measures cuBLASLt algorithms for the
 * model's four projection shapes and writes a GEMM table (format:
 * src/cuda/README.md). Needs only config.json: operands are random. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "base/util.h"
#include "model/config.h"

#ifdef BS_HAVE_CUDA
#include "cuda/convert.h"
#include "cuda/gemm_search.h"
#endif

static int parse_classes(const char *s, int *out, int max) {
    int n = 0;
    while (*s) {
        char *end;
        long v = strtol(s, &end, 10);
        if (end == s || v < 1 || v > 1 << 20 || n == max) return -1;
        out[n++] = (int)v;
        s = end;
        if (*s == ',') s++;
        else if (*s) return -1;
    }
    return n;
}

static int classes_opt(void *dst, const char *flag, const char *v) {
    int *c = dst; /* c[0] = count, then the classes */
    if ((c[0] = parse_classes(v, c + 1, 64)) < 1) {
        cli_error("gemm-search", "%s takes up to 64 positive integers a,b,...", flag);
        return 2;
    }
    return 0;
}

const cli_doc cli_doc_gemm_search = {
    "gemm-search", "--model REF --out FILE [options]",
    "measure cuBLASLt algorithms and write a GEMM table (CUDA builds)",
    "Needs only the model's config.json: the operands are random. The table format is in\n"
    "src/cuda/README.md; serve and decide read it with --gemm-table. The output must not exist.\n",
};

int cmd_gemm_search(int argc, char **argv) {
    const char *model_ref = NULL, *out_path = NULL, *dtype = "f16";
    int invariant = 0, max_m = 3072, reps = 5, max_cand = 0, cls[65] = {0};
    int *classes = cls + 1;
    const cli_opt opts[] = {
        CLI_STR("--model", "REF", "", NULL, "model directory or reference (config.json is enough; required)", &model_ref),
        CLI_STR("--out", "FILE", "", NULL, "the table to write (required; must not exist)", &out_path),
        CLI_CHOICE("--dtype", NULL, NULL, "GEMM precision", &dtype, "f16|bf16|f32"),
        CLI_SW("--invariant", "only batch-invariant algorithms (the same bits at every M)", &invariant),
        CLI_INT("--max-m", "N", NULL, NULL, "largest M (rows) measured", &max_m, 16, 1 << 20),
        CLI_CALL("--m-classes", "a,b,...", "derived from --max-m", NULL, "the M classes to measure", cls, classes_opt),
        CLI_INT("--reps", "N", NULL, NULL, "timed repetitions per algorithm", &reps, 1, 1 << 20),
        CLI_INT("--max-candidates", "N", "0 = all", NULL, "algorithms tried per shape", &max_cand, 0, 1 << 20),
    };
    int rc = cli_parse(&cli_doc_gemm_search, opts, CLI_N(opts), NULL, argc, argv);
    if (rc) return rc < 0 ? 0 : rc;
    int n_classes = cls[0];
    if (!model_ref || !out_path) {
        cli_error("gemm-search", "--model REF and --out FILE are required (see basal gemm-search --help)");
        return 2;
    }
#ifndef BS_HAVE_CUDA
    (void)invariant, (void)n_classes, (void)classes, (void)dtype;
    cli_error("gemm-search", "this build has no CUDA backend (built without nvcc or with CUDA=0)");
    return 1;
#else
    if (bs_file_exists(out_path)) {
        cli_error("gemm-search", "%s exists; choose a new output path", out_path);
        return 1;
    }
    bs_err e = {0};
    bs_config cfg;
    char *model_dir = NULL;
    if (cli_hub_resolve("gemm-search", model_ref, NULL, &model_dir, &e) < 0 || bs_config_load(&cfg, model_dir, &e) < 0) {
        cli_error("gemm-search", "%s", e.msg);
        free(model_dir);
        return 1;
    }
    free(model_dir);
    /* the table is named after the reference as given (a cache snapshot's
     * directory name is a commit) */
    char name[256];
    snprintf(name, sizeof name, "%.*s", (int)strcspn(model_ref, "@"), model_ref);
    while (strlen(name) > 1 && name[strlen(name) - 1] == '/') name[strlen(name) - 1] = 0;
    const char *base = strrchr(name, '/');
    base = base && base[1] ? base + 1 : name;
    bs_gemm_search_opts o = {0};
    bs_cuda_dtype_parse(dtype, &o.dtype);
    o.invariant = invariant;
    o.classes = n_classes ? classes : NULL;
    o.n_classes = n_classes;
    o.max_m = max_m;
    o.reps = reps;
    o.max_candidates = max_cand;
    o.model = base;
    o.source = "basal-c " BASAL_VERSION " gemm-search";
    bs_gemm_table t;
    if (bs_cuda_gemm_search(&cfg, &o, &t, &e) < 0) {
        cli_error("gemm-search", "%s", e.msg);
        return 1;
    }
    char *js = bs_gemm_table_dump(&t);
    int status = 1;
    if (!js) cli_error("gemm-search", "out of memory");
    else if (bs_write_file(out_path, js, strlen(js), &e) < 0) cli_error("gemm-search", "%s", e.msg);
    else status = 0;
    free(js);
    bs_gemm_table_free(&t);
    return status;
#endif
}
