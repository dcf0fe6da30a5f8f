/* `basal gemm-search --model DIR --out FILE [--dtype f16|bf16|f32]
 * [--invariant] [--max-m N] [--m-classes a,b,...] [--reps N]
 * [--max-candidates N]` (spec 06 §9): measures cuBLASLt algorithms for the
 * model's four projection shapes and writes a GEMM table (format:
 * src/cuda/README.md). Needs only config.json: operands are random. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "core/util.h"
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

int cmd_gemm_search(int argc, char **argv) {
    const char *model_dir = NULL, *out_path = NULL, *dtype = "f16", *v;
    int invariant = 0, max_m = 3072, reps = 5, max_cand = 0, n_classes = 0, classes[64];
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--model")) { if (!(model_dir = cli_value(argc, argv, &i))) return 2; }
        else if (!strcmp(argv[i], "--out")) { if (!(out_path = cli_value(argc, argv, &i))) return 2; }
        else if (!strcmp(argv[i], "--dtype")) { if (!(dtype = cli_value(argc, argv, &i))) return 2; }
        else if (!strcmp(argv[i], "--invariant")) invariant = 1;
        else if (!strcmp(argv[i], "--max-m")) { if (!(v = cli_value(argc, argv, &i))) return 2; max_m = atoi(v); }
        else if (!strcmp(argv[i], "--reps")) { if (!(v = cli_value(argc, argv, &i))) return 2; reps = atoi(v); }
        else if (!strcmp(argv[i], "--max-candidates")) { if (!(v = cli_value(argc, argv, &i))) return 2; max_cand = atoi(v); }
        else if (!strcmp(argv[i], "--m-classes")) {
            if (!(v = cli_value(argc, argv, &i))) return 2;
            if ((n_classes = parse_classes(v, classes, 64)) < 1) {
                fprintf(stderr, "basal gemm-search: --m-classes takes up to 64 positive integers a,b,...\n");
                return 2;
            }
        } else {
            fprintf(stderr, "basal gemm-search: unknown option %s\n", argv[i]);
            return 2;
        }
    }
    if (!model_dir || !out_path || max_m < 16 || reps < 1 || max_cand < 0 ||
        (strcmp(dtype, "f16") && strcmp(dtype, "bf16") && strcmp(dtype, "f32"))) {
        fprintf(stderr, "usage: basal gemm-search --model DIR --out FILE [--dtype f16|bf16|f32] [--invariant] "
                        "[--max-m 3072] [--m-classes a,b,...] [--reps 5] [--max-candidates N]\n");
        return 2;
    }
#ifndef BS_HAVE_CUDA
    (void)invariant;
    fprintf(stderr, "basal gemm-search: this build has no CUDA backend (built without nvcc or with CUDA=0)\n");
    return 1;
#else
    if (bs_file_exists(out_path)) {
        fprintf(stderr, "%s exists; choose a new output path\n", out_path);
        return 1;
    }
    bs_err e = {0};
    bs_config cfg;
    if (bs_config_load(&cfg, model_dir, &e) < 0) {
        fprintf(stderr, "basal gemm-search: %s\n", e.msg);
        return 1;
    }
    const char *base = strrchr(model_dir, '/');
    base = base && base[1] ? base + 1 : model_dir;
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
        fprintf(stderr, "basal gemm-search: %s\n", e.msg);
        return 1;
    }
    char *js = bs_gemm_table_dump(&t);
    int status = 1;
    if (!js) fprintf(stderr, "basal gemm-search: out of memory\n");
    else if (bs_write_file(out_path, js, strlen(js), &e) < 0) fprintf(stderr, "basal gemm-search: %s\n", e.msg);
    else status = 0;
    free(js);
    bs_gemm_table_free(&t);
    return status;
#endif
}
