/* Subcommands of the `basal` program. Each returns the process exit status:
 * 0 success, 1 runtime failure, 2 usage error (spec 06 §2). */
#ifndef BS_CLI_H
#define BS_CLI_H

#include <stdint.h>
#include <stdio.h>

#include "cli/cli_opts.h"
#include "base/util.h"

int cmd_init(int argc, char **argv);
int cmd_convert_llama2c(int argc, char **argv);
int cmd_make_model(int argc, char **argv);
int cmd_generate(int argc, char **argv);
int cmd_logits(int argc, char **argv);
int cmd_prepare(int argc, char **argv);
int cmd_decide(int argc, char **argv);
int cmd_lens(int argc, char **argv);
int cmd_serve(int argc, char **argv);
int cmd_bench_requests(int argc, char **argv);
int cmd_bench(int argc, char **argv);
int cmd_doctor(int argc, char **argv);
int cmd_client(int argc, char **argv);
int cmd_benchmark(int argc, char **argv);
int cmd_export(int argc, char **argv);
int cmd_check_prompts(int argc, char **argv);
int cmd_pull(int argc, char **argv);
int cmd_models(int argc, char **argv);

int cmd_gemm_search(int argc, char **argv);
int cmd_compare(int argc, char **argv);
int cmd_eval(int argc, char **argv);

/* What each command says about itself (usage line, summary, notes); the
 * top-level help lists the summaries. */
extern const cli_doc cli_doc_init, cli_doc_convert_llama2c, cli_doc_make_model, cli_doc_generate, cli_doc_logits,
    cli_doc_prepare, cli_doc_decide, cli_doc_serve, cli_doc_bench_requests, cli_doc_bench, cli_doc_doctor,
    cli_doc_client, cli_doc_benchmark, cli_doc_gemm_search, cli_doc_compare, cli_doc_export,
    cli_doc_check_prompts, cli_doc_pull, cli_doc_models, cli_doc_eval;
extern const cli_doc cli_doc_lens;

/* --backend auto|cpu|cuda (--device: its older name), --dtype
 * auto|f16|bf16|f32|int8w, --gemm-table FILE (device/device.h); NULL = not given
 * (the backend then is auto, as for serve: 06 §4.3). */
typedef struct cli_device {
    const char *device, *dtype, *gemm_table;
    double int8_alpha; /* as basal_options.int8_smooth_alpha: 0 not given, negative no smoothing */
} cli_device;
/* --int8-smooth-alpha A: A in (0, 1], or 0 for no smoothing (stored as -1). */
int cli_int8_alpha_opt(void *dst, const char *flag, const char *value);
/* The option-table rows of a cli_device. */
#define CLI_DEVICE_ROWS(d)                                                                                        \
    CLI_CHOICE("--backend", "auto", NULL, "compute backend (auto: CUDA when built in and a GPU is present)",    \
               &(d)->device, "auto|cpu|cuda"),                                                                   \
    CLI_CHOICE("--device", "auto", NULL, "the same as --backend (its older name)", &(d)->device, "auto|cpu|cuda"), \
    CLI_CHOICE("--dtype", "auto", NULL,                                                                        \
               "precision (auto: f16 on CUDA, f32 on the CPU; f16 needs CUDA; int8w: int8 weights, int8: int8 "    \
               "weights and activations, CPU)", &(d)->dtype, "auto|f16|bf16|f32|int8w|int8"),                        \
    CLI_CALL("--int8-smooth-alpha", "A", "0.5", NULL,                                                          \
             "dtype int8: SmoothQuant's alpha in (0, 1]; 0 turns the smoothing off", &(d)->int8_alpha,           \
             cli_int8_alpha_opt),                                                                                \
    CLI_STR("--gemm-table", "FILE", "", NULL, "cuBLASLt GEMM table from gemm-search (CUDA only)", &(d)->gemm_table)
/* The decision knobs of an in-process model (upstream's --orders,
 * --calibration, --no-calibration; serve has them per model in YAML). */
typedef struct cli_decision {
    int orders;              /* 1 or 2 */
    const char *calibration; /* NULL = the model's CALIBRATION.json */
    int no_calibration;
} cli_decision;
#define CLI_DECISION_ROWS(k)                                                                                     \
    CLI_INT("--orders", "1|2", "2", NULL,                                                                        \
            "option orders per question: 2 = original and reversed, averaged; 1 = original only (faster)",     \
            &(k)->orders, 1, 2),                                                                                 \
    CLI_STR("--calibration", "FILE", "the model's CALIBRATION.json", NULL,                                       \
            "per-type temperatures (and max_error thresholds) from this file", &(k)->calibration),              \
    CLI_SW("--no-calibration", "no calibration: temperature 1 for every question type", &(k)->no_calibration)
/* Sets the knobs' fields of o (orders 2 when k->orders is 0). */
struct basal_options;
void cli_decision_apply(const cli_decision *k, struct basal_options *o);
/* --model REF (06 §3): a directory, a short name (mini, 4.5B, max) or
 * owner/name[@revision] from the Hugging Face cache, downloaded first when
 * it is not there (cli_hub_resolve); *(const char **)dst becomes the model
 * directory (kept until the process exits). A reference that cannot be
 * resolved is reported here (exit 1). */
int cli_model_ref(void *dst, const char *flag, const char *value);
#define CLI_MODEL(help, dst_) CLI_CALL("--model", "REF", "", NULL, help, dst_, cli_model_ref)

/* ---- models from the Hub (cli_hub.c) ---- */
struct bs_progress;
struct bs_hub_opts;
/* The progress of a download on stderr: a bar (bytes, rate, time left) on
 * a terminal, timestamped lines otherwise. */
typedef struct cli_hub_bar {
    const char *cmd;
    struct bs_progress *p;
    const char *file;
} cli_hub_bar;
/* Sets o (zeroed first) to report into b. */
void cli_hub_bar_opts(cli_hub_bar *b, const char *cmd, struct bs_hub_opts *o);
void cli_hub_bar_end(cli_hub_bar *b);
/* bs_hub_resolve(ref, revision, BS_HUB_DOWNLOAD) with the progress of cmd. */
int cli_hub_resolve(const char *cmd, const char *ref, const char *revision, char **dir, bs_err *e);

/* The SHA-256 of every weight file of a model directory (model.safetensors,
 * or the shards its index lists), as a JSON object {"file name": "hex", ...}
 * appended to out, with a progress line "hashing weights" on stderr. Every
 * benchmark report records it (spec 06 §7.6). Returns BS_OK or an error in e. */
int cli_weights_sha256(const char *model_dir, bs_buf *out, bs_err *e);

struct bs_model;
/* Attaches the chosen backend to a loaded model; prints "basal CMD: ..." and
 * returns -1 on failure. */
int cli_device_attach(const char *cmd, struct bs_model *m, const cli_device *d);
/* The backend, dtype, GEMM table and int8 alpha of d into o. */
void cli_device_apply(const cli_device *d, struct basal_options *o);

/* Progress of the long forwards of a command (a runner's layer watch,
 * engine/runner.h): with outer NULL, one progress line per forward
 * ("decide: forward of 16862 tokens [###...] 44% (14 of 32 layers)"); with
 * an outer progress (a command's own line, e.g. requests done), a note on
 * that line instead. cli_fwd_progress_end closes a line a failed forward
 * left open. */
struct bs_progress;
typedef struct cli_fwd_progress {
    const char *cmd;
    struct bs_progress *outer, *line;
} cli_fwd_progress;
void cli_fwd_progress_watch(void *ctx, int layers_done, int n_layers, int32_t tokens);
void cli_fwd_progress_end(cli_fwd_progress *fp);

/* One request of `decide` or `lens` on an open session: basal_decide (or
 * basal_lens with lens set) with a progress line per long forward. 0: *r is
 * the answer (status 200); 2: the endpoint refused it and its error body is
 * printed on stdout; 1: a runtime failure, printed through cli_error. r is
 * the caller's to free either way. */
struct basal_session;
struct basal_result;
int cli_session_request(const char *cmd, struct basal_session *s, int lens, const char *data, size_t len,
                        struct basal_result *r);

/* A request body from path, or from stdin when path is "-" (malloc'd,
 * NUL-terminated); -1 after printing why. */
int cli_read_request(const char *path, char **data, size_t *len);

/* Prints compact JSON re-indented with 2 spaces and a final newline. */
void cli_print_pretty(FILE *f, const char *s, size_t n);

struct bs_buf;
struct bs_item;
struct bs_order;
/* One prompt order of an item as prepare and the parity exports write it:
 * `{"perm":[..],"prompt":..,"input_ids":[..],"letter_ids":[..]` (left open
 * for fields of the caller, then '}'). */
void cli_put_order(struct bs_buf *b, const struct bs_item *it, const struct bs_order *od);

#endif
