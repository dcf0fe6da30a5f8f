/* Table-driven command-line options: one table per command gives both the
 * parser and the --help text, so the two cannot drift apart.
 *
 * A table row names the flag, its value (NULL for a switch), the default as
 * shown in --help, the environment variable it falls back to, one line of
 * description, and where the value goes. Adding a flag is one row, e.g.
 *
 *   CLI_STR("--log-format", "FMT", "text", NULL, "log lines as text or json", &o.log_format),
 *
 * The parser accepts `--flag value` and `--flag=value`, `--` before
 * positional arguments that start with '-', `-h`/`--help` (help on stdout,
 * exit 0) and the global `--color auto|always|never`. An unknown flag is a
 * usage error (exit 2) with "did you mean --X?".
 *
 * The environment column is documentation: each command applies its own
 * precedence (spec 06 §4.1) after parsing. */
#ifndef BS_CLI_OPTS_H
#define BS_CLI_OPTS_H

#include <stddef.h>
#include <stdio.h>

typedef enum {
    CLI_SWITCH, /* no value: *(int *)dst = (int)min */
    CLI_STR,    /* const char **dst */
    CLI_INT,    /* int *dst, decimal in [min, max] */
    CLI_LLONG,  /* long long *dst, decimal in [min, max] */
    CLI_DOUBLE, /* double *dst, in [min, max] */
    CLI_CHOICE, /* const char **dst, one of the '|'-separated words of choices */
    CLI_CALL,   /* fn(dst, flag, value): 0, or the exit status after printing a message */
    CLI_OPTIONAL_CHOICE, /* const char **dst: alone = bare; or followed by one of the words of
                            choices (`--access-log off`, `--access-log=off`) */
} cli_kind;

typedef struct cli_opt {
    const char *name; /* "--model" */
    const char *meta; /* value name in the help ("DIR"); NULL for a switch */
    const char *def;  /* default shown in the help; NULL = the initial value of *dst; "" = none */
    const char *env;  /* environment variable the command reads when the flag is absent, or NULL */
    const char *help; /* one line */
    cli_kind kind;
    void *dst;
    double min, max;
    const char *choices;
    int (*fn)(void *dst, const char *flag, const char *value);
    int *seen; /* optional: set to 1 when the flag is given */
    const char *bare; /* CLI_OPTIONAL_CHOICE: the value of the flag alone */
} cli_opt;

#define CLI_ROW(n, m, d, en, h, k, ...) \
    { .name = (n), .meta = (m), .def = (d), .env = (en), .help = (h), .kind = (k), __VA_ARGS__ }
/* *dst = 1 (CLI_SWITCH_TO: *dst = value) */
#define CLI_SW(n, h, dst_) CLI_ROW(n, NULL, "", NULL, h, CLI_SWITCH, .dst = (dst_), .min = 1)
#define CLI_SWITCH_TO(n, h, dst_, v) CLI_ROW(n, NULL, "", NULL, h, CLI_SWITCH, .dst = (dst_), .min = (v))
#define CLI_STR(n, m, d, en, h, dst_) CLI_ROW(n, m, d, en, h, CLI_STR, .dst = (dst_))
#define CLI_INT(n, m, d, en, h, dst_, lo, hi) CLI_ROW(n, m, d, en, h, CLI_INT, .dst = (dst_), .min = (lo), .max = (hi))
#define CLI_LLONG(n, m, d, en, h, dst_, lo, hi) \
    CLI_ROW(n, m, d, en, h, CLI_LLONG, .dst = (dst_), .min = (lo), .max = (hi))
#define CLI_DOUBLE(n, m, d, en, h, dst_, lo, hi) \
    CLI_ROW(n, m, d, en, h, CLI_DOUBLE, .dst = (dst_), .min = (lo), .max = (hi))
#define CLI_CHOICE(n, d, en, h, dst_, words) \
    CLI_ROW(n, words, d, en, h, CLI_CHOICE, .dst = (dst_), .choices = (words))
/* e.g. CLI_OPTIONAL("--access-log", "on", "on", NULL, "one line per request", &f->access_log, "on|off") */
#define CLI_OPTIONAL(n, bare_, d, en, h, dst_, words) \
    CLI_ROW(n, "[" words "]", d, en, h, CLI_OPTIONAL_CHOICE, .dst = (dst_), .choices = (words), .bare = (bare_))
#define CLI_CALL(n, m, d, en, h, dst_, f) CLI_ROW(n, m, d, en, h, CLI_CALL, .dst = (dst_), .fn = (f))

/* A repeatable option: each value is appended to v, which the caller sizes
 * for argc entries (no option can be given more often). */
typedef struct cli_list {
    const char **v;
    size_t n;
} cli_list;
int cli_append(void *list, const char *flag, const char *value);
#define CLI_LIST(n, m, d, en, h, list) CLI_CALL(n, m, d, en, h, list, cli_append)

/* What a command says about itself: the usage line after "basal NAME ", one
 * line of summary (also listed by `basal` without arguments), and optional
 * text printed after the options (environment, exit status, notes). */
typedef struct cli_doc {
    const char *name, *usage, *summary, *details;
} cli_doc;

/* Positional arguments: at most max of them go to v (NULL: none accepted). */
typedef struct cli_pos {
    const char **v;
    int n, max;
} cli_pos;

/* 0: parsed; -1: --help was printed (exit 0); 2: usage error (printed). */
int cli_parse(const cli_doc *d, const cli_opt *opts, size_t n_opts, cli_pos *pos, int argc, char **argv);
void cli_help(FILE *f, const cli_doc *d, const cli_opt *opts, size_t n_opts);
#define CLI_N(a) (sizeof(a) / sizeof *(a))

/* ---- colour (spec 06 §2) ---- */
/* "auto", "always" or "never" → -1, 1, 0; anything else → -2. */
int cli_color_mode(const char *v);
void cli_color_set(int mode);
/* Whether stderr gets colour: always; never; auto = CLICOLOR_FORCE (non-empty,
 * not 0) forces it, else none with NO_COLOR non-empty, else when stderr is a
 * terminal. */
int cli_color_on(void);
/* "basal CMD: message" on stderr, the prefix in red (errors) or yellow
 * (warnings) when colour is on; cmd NULL gives "basal: ". */
void cli_error(const char *cmd, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void cli_warn(const char *cmd, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* ---- version (spec 06 §2) ---- */
/* "<version> (<git commit>, <backends>)", e.g.
 * "0.1.0 (546c4a1, CPU(avx2,avx512,avx512-bf16,amx)+CUDA(sm_80,sm_89,sm_90))". */
void cli_print_version(FILE *f);
/* `git rev-parse --short HEAD` at build time (-dirty: tracked files differed), or "unknown". */
const char *cli_git_commit(void);

#endif
