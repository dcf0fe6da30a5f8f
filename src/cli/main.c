/* `basal` command-line entry: global options (--color, --version, --help),
 * `basal help CMD`, `basal version`, and the dispatch to the subcommands. */
#include <stdio.h>
#include <string.h>

#include "basal.h"
#include "cli/cli.h"
#include "cli/cli_opts.h"
#include "base/suggest.h"

typedef struct {
    const cli_doc *doc;
    int (*fn)(int, char **);
} command;

/* In the order a newcomer needs them. */
static const command commands[] = {
    {&cli_doc_serve, cmd_serve},
    {&cli_doc_pull, cmd_pull},
    {&cli_doc_models, cmd_models},
    {&cli_doc_init, cmd_init},
    {&cli_doc_doctor, cmd_doctor},
    {&cli_doc_decide, cmd_decide},
    {&cli_doc_lens, cmd_lens},
    {&cli_doc_prepare, cmd_prepare},
    {&cli_doc_client, cmd_client},
    {&cli_doc_eval, cmd_eval},
    {&cli_doc_benchmark, cmd_benchmark},
    {&cli_doc_bench, cmd_bench},
    {&cli_doc_bench_requests, cmd_bench_requests},
    {&cli_doc_compare, cmd_compare},
    {&cli_doc_export, cmd_export},
    {&cli_doc_check_prompts, cmd_check_prompts},
    {&cli_doc_make_model, cmd_make_model},
    {&cli_doc_convert_llama2c, cmd_convert_llama2c},
    {&cli_doc_gemm_search, cmd_gemm_search},
    {&cli_doc_generate, cmd_generate},
    {&cli_doc_logits, cmd_logits},
};
#define N_COMMANDS (sizeof commands / sizeof *commands)

static void usage(FILE *f) {
    fprintf(f,
            "basal %s: an exact, fast inference server for the Basal typed-decision models\n"
            "\n"
            "usage: basal [--color WHEN] <command> [options]\n"
            "       basal <command> --help     (or basal help <command>)\n"
            "\n"
            "commands:\n",
            BASAL_VERSION);
    for (size_t i = 0; i < N_COMMANDS; i++) fprintf(f, "  %-16s %s\n", commands[i].doc->name, commands[i].doc->summary);
    fprintf(f, "  %-16s %s\n  %-16s %s\n", "help", "help COMMAND prints the options of a command",
            "version", "print the version, git commit and backends (also --version, -V)");
    fprintf(f,
            "\n"
            "global options:\n"
            "  --color WHEN     colour of error and warning prefixes: auto (on a terminal; env NO_COLOR,\n"
            "                   CLICOLOR_FORCE), always or never (default auto)\n"
            "  -V, --version    print the version and exit\n"
            "  -h, --help       print this help and exit\n"
            "\n"
            "Start here: `basal init` writes a commented basal-serve.yml, `basal doctor` checks the machine\n"
            "and the configuration, `basal serve` serves it (README.md).\n");
}

static const command *find(const char *name) {
    for (size_t i = 0; i < N_COMMANDS; i++)
        if (!strcmp(name, commands[i].doc->name)) return &commands[i];
    return NULL;
}

static int unknown_command(const char *name) {
    const char *names[N_COMMANDS + 2];
    for (size_t i = 0; i < N_COMMANDS; i++) names[i] = commands[i].doc->name;
    names[N_COMMANDS] = "help";
    names[N_COMMANDS + 1] = "version";
    const char *s = bs_suggest(name, names, N_COMMANDS + 2);
    if (s) cli_error(NULL, "unknown command '%s' (did you mean %s?); basal --help lists the commands", name, s);
    else cli_error(NULL, "unknown command '%s'; basal --help lists the commands", name);
    return 2;
}

int main(int argc, char **argv) {
    int i = 1;
    /* global options before the command */
    for (; i < argc && argv[i][0] == '-'; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "--version") || !strcmp(a, "-V")) {
            cli_print_version(stdout);
            return 0;
        }
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            usage(stdout);
            return 0;
        }
        if (!strncmp(a, "--color", 7) && (a[7] == '=' || !a[7])) {
            const char *v = a[7] ? a + 8 : i + 1 < argc ? argv[++i] : NULL;
            int m = v ? cli_color_mode(v) : -2;
            if (m == -2) {
                cli_error(NULL, "--color must be auto, always or never");
                return 2;
            }
            cli_color_set(m);
            continue;
        }
        static const char *const globals[] = {"version", "help", "color"};
        const char *s = bs_suggest(a + strspn(a, "-"), globals, 3);
        if (s) cli_error(NULL, "unknown option %s (did you mean --%s?); options of a command follow it", a, s);
        else cli_error(NULL, "unknown option %s; options of a command follow it (basal <command> %s)", a, a);
        return 2;
    }
    if (i >= argc) { /* no command: the overview, as --help prints it */
        usage(stdout);
        return 0;
    }
    const char *name = argv[i];
    int asks_help = i + 1 < argc && (!strcmp(argv[i + 1], "--help") || !strcmp(argv[i + 1], "-h"));
    if (!strcmp(name, "version")) {
        if (asks_help) {
            printf("usage: basal version\nprint the version, git commit and backends (also --version, -V)\n");
            return 0;
        }
        if (i + 1 < argc) {
            cli_error("version", "unexpected argument '%s'", argv[i + 1]);
            return 2;
        }
        cli_print_version(stdout);
        return 0;
    }
    if (!strcmp(name, "help")) {
        if (i + 1 >= argc || asks_help) {
            usage(stdout);
            return 0;
        }
        const command *c = find(argv[i + 1]);
        if (!c) return unknown_command(argv[i + 1]);
        char *help_argv[] = {argv[i + 1], "--help", NULL};
        return c->fn(2, help_argv);
    }
    const command *c = find(name);
    if (!c) return unknown_command(name);
    return c->fn(argc - i, argv + i);
}
