/* Subcommands of the `basal` program. Each returns the process exit status:
 * 0 success, 1 runtime failure, 2 usage error (spec 06 §2). */
#ifndef BS_CLI_H
#define BS_CLI_H

#include <stdio.h>

int cmd_convert_llama2c(int argc, char **argv);
int cmd_make_model(int argc, char **argv);
int cmd_generate(int argc, char **argv);
int cmd_logits(int argc, char **argv);
int cmd_prepare(int argc, char **argv);
int cmd_decide(int argc, char **argv);
int cmd_serve(int argc, char **argv);
int cmd_bench_requests(int argc, char **argv);
int cmd_bench(int argc, char **argv);
int cmd_doctor(int argc, char **argv);

int cmd_gemm_search(int argc, char **argv);

/* --device cpu|cuda|auto, --dtype auto|f16|bf16|f32, --gemm-table FILE
 * (device/device.h); NULL = not given. */
typedef struct cli_device {
    const char *device, *dtype, *gemm_table;
} cli_device;
#define CLI_DEVICE_USAGE "[--device cpu|cuda|auto] [--dtype auto|f16|bf16|f32] [--gemm-table FILE]"
struct bs_model;
/* Consumes argv[*i] and its value when it is one of the options above: 1;
 * a missing value: -1 (message printed); another option: 0. */
int cli_device_flag(int argc, char **argv, int *i, cli_device *d);
/* Attaches the chosen backend to a loaded model; prints "basal CMD: ..." and
 * returns -1 on failure. */
int cli_device_attach(const char *cmd, struct bs_model *m, const cli_device *d);

/* Shared option helpers: returns the value after a flag or NULL (and prints usage error). */
const char *cli_value(int argc, char **argv, int *i);
/* Prints compact JSON re-indented with 2 spaces and a final newline. */
void cli_print_pretty(FILE *f, const char *s, size_t n);

#endif
