/* The option-table parser of src/cli/cli_opts.c (compiled in here: the CLI
 * is not part of libbasal) and the edit distance behind "did you mean"
 * (base/suggest.c). Distances are the textbook values of the optimal string
 * alignment distance (e.g. kitten/sitting 3; ca/abc 3, where unrestricted
 * Damerau-Levenshtein gives 2). */
#include <fcntl.h>
#include <unistd.h>

#include "check.h"
#include "cli/cli_opts.c"
#include "base/suggest.h"

/* stderr of one parse, read back from a temporary file */
static char captured[4096];
static int saved_fd = -1;
static FILE *cap;
static void capture_begin(void) {
    fflush(stderr);
    cap = tmpfile();
    saved_fd = dup(2);
    dup2(fileno(cap), 2);
}
static const char *capture_end(void) {
    fflush(stderr);
    dup2(saved_fd, 2);
    close(saved_fd);
    rewind(cap);
    size_t n = fread(captured, 1, sizeof captured - 1, cap);
    captured[n] = 0;
    fclose(cap);
    return captured;
}

typedef struct {
    const char *name, *mode, *level;
    int n, verbose;
    long long big;
    double x;
    const char *list_v[8];
    cli_list list;
} opts;

static const cli_doc doc = {"demo", "[options] FILE", "a demo command", "notes\n"};

static int parse(opts *o, cli_pos *pos, const char *const *args, int n_args, const char **err) {
    const cli_opt t[] = {
        CLI_STR("--name", "NAME", NULL, "DEMO_NAME", "a name", &o->name),
        CLI_INT("--count", "N", NULL, NULL, "a count", &o->n, 1, 10),
        CLI_LLONG("--big", "N", NULL, NULL, "a large number", &o->big, 0, 9223372036854775807.0),
        CLI_DOUBLE("--ratio", "X", NULL, NULL, "a ratio", &o->x, 0, 1),
        CLI_CHOICE("--mode", NULL, NULL, "a mode", &o->mode, "fast|slow|exact"),
        CLI_OPTIONAL("--log", "on", "off", NULL, "logging", &o->level, "on|off"),
        CLI_SW("--verbose", "more output", &o->verbose),
        CLI_LIST("--item", "S", "", NULL, "an item (repeatable)", &o->list),
    };
    char *argv[16];
    argv[0] = "demo";
    for (int i = 0; i < n_args; i++) argv[i + 1] = (char *)args[i];
    capture_begin();
    int rc = cli_parse(&doc, t, CLI_N(t), pos, n_args + 1, argv);
    *err = capture_end();
    return rc;
}

static void reset(opts *o) {
    memset(o, 0, sizeof *o);
    o->mode = "fast";
    o->level = "off";
    o->n = 3;
    o->list.v = o->list_v;
}

#define ARGS(...) (const char *const[]){__VA_ARGS__}, (int)(sizeof((const char *const[]){__VA_ARGS__}) / sizeof(char *))

int main(void) {
    cli_color_set(0);
    CHECK_INT(bs_edit_distance("kitten", "sitting"), 3);
    CHECK_INT(bs_edit_distance("ca", "abc"), 3);
    CHECK_INT(bs_edit_distance("abcd", "acbd"), 1);
    CHECK_INT(bs_edit_distance("", "abc"), 3);
    CHECK_INT(bs_edit_distance("model", "model"), 0);
    const char *cands[] = {"model", "request", "threads", NULL, "timing"};
    CHECK_STR(bs_suggest("modle", cands, 5), "model");
    CHECK_STR(bs_suggest("treads", cands, 5), "threads");
    CHECK_STR(bs_suggest("req", cands, 5), "request"); /* prefix of exactly one */
    CHECK(bs_suggest("ti", cands, 5) == NULL);          /* prefix too short, too far */
    CHECK(bs_suggest("colour", cands, 5) == NULL);
    CHECK(bs_suggest("model", cands, 5) == NULL); /* a known word is not misspelt */

    opts o;
    const char *err, *pv[2];
    cli_pos pos = {pv, 0, 2};

    reset(&o);
    CHECK_INT(parse(&o, &pos, ARGS("--name", "a", "--count=7", "--mode", "exact", "--verbose", "--ratio=0.25",
                                   "--item", "x", "--item=y", "--big", "9223372036854775807", "f1", "--", "-f2"),
                    &err),
              0);
    CHECK_STR(o.name, "a");
    CHECK_INT(o.n, 7);
    CHECK_STR(o.mode, "exact");
    CHECK_INT(o.verbose, 1);
    CHECK(o.x == 0.25);
    CHECK_INT(o.list.n, 2);
    CHECK_STR(o.list_v[1], "y");
    CHECK(o.big == 9223372036854775807LL);
    CHECK_INT(pos.n, 2);
    CHECK_STR(pv[0], "f1");
    CHECK_STR(pv[1], "-f2");
    CHECK_STR(err, "");

    /* the optional value: alone, followed by a word of its choices, or =word */
    reset(&o);
    pos.n = 0;
    CHECK_INT(parse(&o, &pos, ARGS("--log", "file"), &err), 0);
    CHECK_STR(o.level, "on");
    CHECK_STR(pv[0], "file");
    reset(&o);
    pos.n = 0;
    CHECK_INT(parse(&o, &pos, ARGS("--log", "off"), &err), 0);
    CHECK_STR(o.level, "off");
    CHECK_INT(pos.n, 0);
    reset(&o);
    CHECK_INT(parse(&o, NULL, ARGS("--log=on"), &err), 0);
    CHECK_STR(o.level, "on");
    CHECK_INT(parse(&o, NULL, ARGS("--log=maybe"), &err), 2);
    CHECK_CONTAINS(err, "--log must be on or off");

    /* usage errors: exit 2, one message naming the problem */
    reset(&o);
    CHECK_INT(parse(&o, NULL, ARGS("--count", "11"), &err), 2);
    CHECK_CONTAINS(err, "basal demo: --count: expected an integer in 1..10, got '11'");
    CHECK_INT(parse(&o, NULL, ARGS("--count", "3x"), &err), 2);
    CHECK_INT(parse(&o, NULL, ARGS("--big", "9223372036854775808"), &err), 2);
    CHECK_INT(parse(&o, NULL, ARGS("--ratio", "1.5"), &err), 2);
    CHECK_INT(parse(&o, NULL, ARGS("--ratio", "nan"), &err), 2);
    CHECK_INT(parse(&o, NULL, ARGS("--mode", "quick"), &err), 2);
    CHECK_CONTAINS(err, "--mode must be fast, slow or exact");
    CHECK_INT(parse(&o, NULL, ARGS("--verbose=1"), &err), 2);
    CHECK_CONTAINS(err, "option --verbose takes no value");
    CHECK_INT(parse(&o, NULL, ARGS("--name"), &err), 2);
    CHECK_CONTAINS(err, "option --name needs a value");
    CHECK_INT(parse(&o, NULL, ARGS("--nmae", "x"), &err), 2);
    CHECK_CONTAINS(err, "unknown option --nmae (did you mean --name?) (see basal demo --help)");
    CHECK_INT(parse(&o, NULL, ARGS("--verbos=3"), &err), 2);
    CHECK_CONTAINS(err, "unknown option --verbos (did you mean --verbose?)");
    CHECK_INT(parse(&o, NULL, ARGS("--zzzzzz"), &err), 2);
    CHECK(strstr(err, "did you mean") == NULL);
    CHECK_INT(parse(&o, NULL, ARGS("stray"), &err), 2);
    CHECK_CONTAINS(err, "unexpected argument 'stray'");
    pos.n = 0;
    CHECK_INT(parse(&o, &pos, ARGS("a", "b", "c"), &err), 2);
    CHECK_INT(parse(&o, NULL, ARGS("--color", "pink"), &err), 2);

    /* help: from the same table, with the defaults as initialised and the environment */
    reset(&o);
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    const cli_opt t[] = {
        CLI_STR("--name", "NAME", NULL, "DEMO_NAME", "a name", &o.name),
        CLI_INT("--count", "N", NULL, NULL, "a count", &o.n, 1, 10),
        CLI_CHOICE("--mode", NULL, NULL, "a mode", &o.mode, "fast|slow|exact"),
        CLI_SW("--verbose", "more output", &o.verbose),
    };
    cli_help(f, &doc, t, CLI_N(t));
    fclose(f);
    CHECK_CONTAINS(buf, "usage: basal demo [options] FILE\na demo command\n\noptions:\n");
    CHECK_CONTAINS(buf, "  --name NAME             a name (env DEMO_NAME)\n");
    CHECK_CONTAINS(buf, "  --count N               a count (default 3)\n");
    CHECK_CONTAINS(buf, "  --mode fast|slow|exact  a mode (default fast)\n");
    CHECK_CONTAINS(buf, "  --verbose               more output\n");
    CHECK_CONTAINS(buf, "  -h, --help              print this help and exit\n\nnotes\n");
    free(buf);

    /* colour: only the prefix, only when on */
    cli_color_set(1);
    capture_begin();
    cli_error("demo", "bad %d", 1);
    CHECK_STR(capture_end(), "\033[1;31mbasal demo:\033[0m bad 1\n");
    cli_color_set(0);
    capture_begin();
    cli_warn(NULL, "careful");
    CHECK_STR(capture_end(), "basal: careful\n");
    CHECK_INT(cli_color_mode("auto"), -1);
    CHECK_INT(cli_color_mode("always"), 1);
    CHECK_INT(cli_color_mode("never"), 0);
    CHECK_INT(cli_color_mode("yes"), -2);
    return check_report("test_cli_opts");
}
