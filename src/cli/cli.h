/* Subcommands of the `basal` program. Each returns the process exit status:
 * 0 success, 1 runtime failure, 2 usage error (spec 06 §2). */
#ifndef BS_CLI_H
#define BS_CLI_H

int cmd_convert_llama2c(int argc, char **argv);
int cmd_make_model(int argc, char **argv);
int cmd_generate(int argc, char **argv);
int cmd_logits(int argc, char **argv);

/* Shared option helpers: returns the value after a flag or NULL (and prints usage error). */
const char *cli_value(int argc, char **argv, int *i);

#endif
