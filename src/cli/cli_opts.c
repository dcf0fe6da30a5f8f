/* The option-table parser and help printer of cli_opts.h, and the colour of
 * the CLI's error and warning prefixes. */
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli/cli_opts.h"
#include "base/suggest.h"

/* ---- colour ---- */

static int g_color = -1; /* -1 auto, 0 never, 1 always */

int cli_color_mode(const char *v) {
    if (!strcmp(v, "auto")) return -1;
    if (!strcmp(v, "always")) return 1;
    if (!strcmp(v, "never")) return 0;
    return -2;
}

void cli_color_set(int mode) { g_color = mode; }

int cli_color_on(void) {
    if (g_color >= 0) return g_color;
    const char *force = getenv("CLICOLOR_FORCE"), *no = getenv("NO_COLOR");
    if (force && *force && strcmp(force, "0")) return 1;
    if (no && *no) return 0;
    return isatty(STDERR_FILENO);
}

static void vmessage(const char *sgr, const char *cmd, const char *fmt, va_list ap) {
    int on = cli_color_on();
    fprintf(stderr, "%sbasal%s%s:%s ", on ? sgr : "", cmd ? " " : "", cmd ? cmd : "", on ? "\033[0m" : "");
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
}

void cli_error(const char *cmd, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vmessage("\033[1;31m", cmd, fmt, ap);
    va_end(ap);
}

void cli_warn(const char *cmd, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vmessage("\033[1;33m", cmd, fmt, ap);
    va_end(ap);
}

/* ---- help ---- */

/* The default as shown: the row's text, else the initial value of *dst. */
static const char *default_text(const cli_opt *o, char *buf, size_t n) {
    if (o->def) return o->def;
    switch (o->kind) {
    case CLI_STR:
    case CLI_CHOICE: return o->dst && *(const char **)o->dst ? *(const char **)o->dst : "";
    case CLI_INT: snprintf(buf, n, "%d", *(const int *)o->dst); return buf;
    case CLI_LLONG: snprintf(buf, n, "%lld", *(const long long *)o->dst); return buf;
    case CLI_DOUBLE: snprintf(buf, n, "%g", *(const double *)o->dst); return buf;
    default: return "";
    }
}

static void left_column(char *buf, size_t n, const cli_opt *o) {
    snprintf(buf, n, "%s%s%s", o->name, o->meta ? " " : "", o->meta ? o->meta : "");
}

void cli_help(FILE *f, const cli_doc *d, const cli_opt *opts, size_t n_opts) {
    static const cli_opt builtin[] = {
        CLI_ROW("--color", "WHEN", "auto", "NO_COLOR, CLICOLOR_FORCE",
                "colour of error/warning prefixes: auto (on a terminal), always, never", CLI_SWITCH),
        CLI_ROW("-h, --help", NULL, "", NULL, "print this help and exit", CLI_SWITCH),
    };
    char col[128], def[64];
    size_t width = 0;
    for (size_t i = 0; i < n_opts + CLI_N(builtin); i++) {
        left_column(col, sizeof col, i < n_opts ? &opts[i] : &builtin[i - n_opts]);
        if (strlen(col) > width) width = strlen(col);
    }
    if (width > 30) width = 30;
    fprintf(f, "usage: basal %s%s%s\n", d->name, d->usage && *d->usage ? " " : "", d->usage ? d->usage : "");
    if (d->summary) fprintf(f, "%s\n", d->summary);
    fprintf(f, "\noptions:\n");
    for (size_t i = 0; i < n_opts + CLI_N(builtin); i++) {
        const cli_opt *o = i < n_opts ? &opts[i] : &builtin[i - n_opts];
        left_column(col, sizeof col, o);
        const char *dt = default_text(o, def, sizeof def);
        fprintf(f, "  %-*s  %s", (int)width, col, o->help);
        if (*dt && o->env) fprintf(f, " (default %s; env %s)", dt, o->env);
        else if (*dt) fprintf(f, " (default %s)", dt);
        else if (o->env) fprintf(f, " (env %s)", o->env);
        fputc('\n', f);
    }
    if (d->details) fprintf(f, "\n%s", d->details);
}

/* ---- parsing ---- */

int cli_append(void *list, const char *flag, const char *value) {
    cli_list *l = list;
    l->v[l->n++] = value;
    return 0;
}

static int usage_error(const cli_doc *d, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int usage_error(const cli_doc *d, const char *fmt, ...) {
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    cli_error(d->name, "%s (see basal %s --help)", msg, d->name);
    return 2;
}

static int unknown_option(const cli_doc *d, const cli_opt *opts, size_t n_opts, const char *arg, size_t name_len) {
    char name[128];
    snprintf(name, sizeof name, "%.*s", (int)(name_len < sizeof name ? name_len : sizeof name - 1), arg);
    const char **cands = calloc(n_opts + 2, sizeof *cands);
    const char *s = NULL;
    if (cands) { /* compared without the leading dashes, which every flag shares */
        for (size_t i = 0; i < n_opts; i++) cands[i] = opts[i].name + strspn(opts[i].name, "-");
        cands[n_opts] = "help";
        cands[n_opts + 1] = "color";
        s = bs_suggest(name + strspn(name, "-"), cands, n_opts + 2);
    }
    int rc = s ? usage_error(d, "unknown option %s (did you mean --%s?)", name, s)
               : usage_error(d, "unknown option %s", name);
    free(cands);
    return rc;
}

/* Whether v is one of the '|'-separated words. */
static int is_choice(const char *choices, const char *v) {
    size_t n = strlen(v);
    for (const char *c = choices; *c;) {
        size_t w = strcspn(c, "|");
        if (w == n && !strncmp(c, v, n)) return 1;
        c += w + (c[w] == '|');
    }
    return 0;
}

static int set_value(const cli_doc *d, const cli_opt *o, const char *v) {
    char *end;
    switch (o->kind) {
    case CLI_STR: *(const char **)o->dst = v; return 0;
    case CLI_INT:
    case CLI_LLONG: {
        long long lo = (long long)o->min, hi = o->max >= 9.2e18 ? LLONG_MAX : (long long)o->max;
        errno = 0;
        long long x = strtoll(v, &end, 10);
        if (errno || end == v || *end || x < lo || x > hi)
            return usage_error(d, "%s: expected an integer in %lld..%lld, got '%s'", o->name, lo, hi, v);
        if (o->kind == CLI_INT) *(int *)o->dst = (int)x;
        else *(long long *)o->dst = x;
        return 0;
    }
    case CLI_DOUBLE: {
        double x = strtod(v, &end);
        if (end == v || *end || !isfinite(x) || x < o->min || x > o->max)
            return usage_error(d, "%s: expected a number in %g..%g, got '%s'", o->name, o->min, o->max, v);
        *(double *)o->dst = x;
        return 0;
    }
    case CLI_CHOICE:
    case CLI_OPTIONAL_CHOICE: {
        if (is_choice(o->choices, v)) {
            *(const char **)o->dst = v;
            return 0;
        }
        /* "a, b or c", as the messages of the YAML file say it */
        char list[256] = "";
        size_t words = 1, at = 0;
        for (const char *c = o->choices; *c; c++) words += *c == '|';
        for (const char *c = o->choices; *c && at + 8 < sizeof list;) {
            size_t w = strcspn(c, "|");
            at += (size_t)snprintf(list + at, sizeof list - at, "%.*s%s", (int)w, c,
                                   --words == 0 ? "" : words == 1 ? " or " : ", ");
            c += w + (c[w] == '|');
        }
        return usage_error(d, "%s must be %s", o->name, list);
    }
    case CLI_CALL: return o->fn(o->dst, o->name, v);
    default: return 2;
    }
}

int cli_parse(const cli_doc *d, const cli_opt *opts, size_t n_opts, cli_pos *pos, int argc, char **argv) {
    int only_pos = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (only_pos || a[0] != '-' || !a[1]) { /* "-" alone is a value (stdin) */
            if (!pos || pos->n >= pos->max) return usage_error(d, "unexpected argument '%s'", a);
            pos->v[pos->n++] = a;
            continue;
        }
        if (!strcmp(a, "--")) {
            only_pos = 1;
            continue;
        }
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            cli_help(stdout, d, opts, n_opts);
            return -1;
        }
        const char *eq = a[1] == '-' ? strchr(a, '=') : NULL;
        size_t name_len = eq ? (size_t)(eq - a) : strlen(a);
        if (name_len == 7 && !strncmp(a, "--color", 7)) {
            const char *v = eq ? eq + 1 : i + 1 < argc ? argv[++i] : NULL;
            if (!v) return usage_error(d, "option --color needs a value");
            int m = cli_color_mode(v);
            if (m == -2) return usage_error(d, "--color must be auto, always or never");
            cli_color_set(m);
            continue;
        }
        const cli_opt *o = NULL;
        for (size_t k = 0; k < n_opts && !o; k++)
            if (strlen(opts[k].name) == name_len && !strncmp(opts[k].name, a, name_len)) o = &opts[k];
        if (!o) return unknown_option(d, opts, n_opts, a, name_len);
        if (o->seen) *o->seen = 1;
        if (o->kind == CLI_SWITCH) {
            if (eq) return usage_error(d, "option %s takes no value", o->name);
            *(int *)o->dst = (int)o->min;
            continue;
        }
        if (o->kind == CLI_OPTIONAL_CHOICE && !eq) { /* the next word only when it is one of the choices */
            *(const char **)o->dst = i + 1 < argc && is_choice(o->choices, argv[i + 1]) ? argv[++i] : o->bare;
            continue;
        }
        const char *v = eq ? eq + 1 : i + 1 < argc ? argv[++i] : NULL;
        if (!v) return usage_error(d, "option %s needs a value", o->name);
        int rc = set_value(d, o, v);
        if (rc) return rc;
    }
    return 0;
}
