/* `basal` command-line entry: dispatches to the subcommands. */
#include <stdio.h>
#include <string.h>

#include "basal.h"
#include "cli/cli.h"

typedef struct {
    const char *name;
    int (*fn)(int, char **);
    const char *help;
} command;

static const command commands[] = {
    {"convert-llama2c", cmd_convert_llama2c, "CHECKPOINT TOKENIZER OUTDIR  convert a llama2.c model to a HF directory"},
    {"make-model", cmd_make_model, "OUTDIR [--preset P] [--seed N] [--tokenizer FILE]  write a synthetic Basal model"},
    {"generate", cmd_generate, "--model DIR --steps N [--prompt TEXT]  greedy decoding (debugging)"},
    {"serve", cmd_serve, "--model DIR | --config serve.yml [--addr HOST:PORT] ...  HTTP server"},
    {"prepare", cmd_prepare, "--model DIR [--request FILE|-]  print prompts, token ids, letter ids (no weights)"},
    {"decide", cmd_decide, "--model DIR [--request FILE|-] [--timing]  answer one /v1/systemone request"},
    {"client", cmd_client, "(--ask TEXT ... | --template FILE | --request FILE|-) [--input F] [--jobs N]  System One client (see --help)"},
    {"benchmark", cmd_benchmark, "--model DIR | --url URL [--concurrency 1,4,8] [--out F] [--html F]  HTTP load, JSON/HTML report"},
    {"doctor", cmd_doctor, "[--config FILE | --model REF ...] [--addr IP:PORT] [--json]  check machine and configuration"},
    {"bench", cmd_bench, "--model DIR [--lat-n N] [--state-tokens N]  single-decision latency, dec/s, GFLOP/s"},
    {"bench-requests", cmd_bench_requests, "--model DIR --requests JSONL [--batching tree,single]  whole-request timings"},
    {"gemm-search", cmd_gemm_search, "--model DIR --out FILE [--dtype f16] [--invariant]  cuBLASLt GEMM table (CUDA)"},
    {"logits", cmd_logits, "--model DIR --input FILE|-  logits of chosen ids at chosen rows (debugging)"},
};

static void usage(FILE *f) {
    fprintf(f, "usage: basal <command> [options]\n\ncommands:\n");
    for (size_t i = 0; i < sizeof commands / sizeof *commands; i++)
        fprintf(f, "  %-16s %s\n", commands[i].name, commands[i].help);
}

int main(int argc, char **argv) {
    if (argc < 2) {
        usage(stderr);
        return 2;
    }
    if (!strcmp(argv[1], "--version")) {
#ifdef BS_HAVE_CUDA
        printf("%s (CPU, CUDA)\n", BASAL_VERSION);
#else
        printf("%s (CPU)\n", BASAL_VERSION);
#endif
        return 0;
    }
    if (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h") || !strcmp(argv[1], "help")) {
        usage(stdout);
        return 0;
    }
    for (size_t i = 0; i < sizeof commands / sizeof *commands; i++)
        if (!strcmp(argv[1], commands[i].name)) return commands[i].fn(argc - 1, argv + 1);
    fprintf(stderr, "basal: unknown command '%s'\n", argv[1]);
    usage(stderr);
    return 2;
}
