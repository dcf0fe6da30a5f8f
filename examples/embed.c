/* Embedding basal-c: load a model once, decide System One requests
 * in-process, one per line of stdin, and print each answer (or the error
 * body /v1/systemone would send) as one JSON line with its status.
 *
 *   cc embed.c $(pkg-config --cflags --libs basal) -o embed
 *   echo '{"state": "...", "questions": {...}}' | ./embed /models/basal-1.5-mini
 *
 * The model may also be a reference (mini, owner/name[@revision]): it is
 * then taken from, or downloaded into, the Hugging Face cache. With --batch
 * every line is read first and all are decided in one basal_decide_batch
 * call (their forwards packed together; the same answers). */
#define _POSIX_C_SOURCE 200809L /* getline */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <basal.h>

/* The non-empty lines of f, their ends cut; *n of them. NULL when out of memory. */
static char **read_lines(FILE *f, size_t *n) {
    char **v = calloc(16, sizeof *v), *line = NULL;
    size_t cap = 16, nv = 0, lcap = 0;
    ssize_t len;
    while (v && (len = getline(&line, &lcap, f)) > 0) {
        while (len && (line[len - 1] == '\n' || line[len - 1] == '\r')) line[--len] = 0;
        if (!len) continue;
        char **nvv = nv < cap ? v : realloc(v, (cap *= 2) * sizeof *v);
        if (!nvv || !(nvv[nv] = strdup(line))) {
            for (size_t i = 0; i < nv; i++) free((nvv ? nvv : v)[i]);
            free(nvv ? nvv : v);
            v = NULL;
            break;
        }
        v = nvv;
        nv++;
    }
    free(line);
    *n = v ? nv : 0;
    return v;
}

static void print_result(const basal_result *r) { printf("%d %s\n", r->status, r->json); }

int main(int argc, char **argv) {
    int batch = argc == 3 && !strcmp(argv[2], "--batch");
    if ((argc != 2 && !batch) || !strcmp(argv[1], "-h") || !strcmp(argv[1], "--help")) {
        printf("usage: embed MODEL [--batch] < requests.jsonl\n"
               "MODEL: a model directory or a reference (mini, owner/name[@revision]).\n"
               "Prints one line per request: <status> <JSON answer or error body>.\n"
               "--batch: decide every line in one call (default: one call per line).\n");
        return argc == 2 ? 0 : 2;
    }
    basal_options o;
    basal_options_init(&o);
    basal_session *s = NULL;
    bs_err e;
    if (basal_open(&s, argv[1], &o, &e) < 0) {
        fprintf(stderr, "embed: %s\n", e.msg);
        return 1;
    }
    fprintf(stderr, "embed: %s loaded (libbasal %s, header %s)\n", basal_model_name(s), basal_version(), BASAL_VERSION);
    size_t n = 0;
    char **lines = read_lines(stdin, &n);
    basal_result *res = calloc(n ? n : 1, sizeof *res);
    size_t *lens = calloc(n ? n : 1, sizeof *lens);
    int status = lines && res && lens ? 0 : 1;
    if (status) fprintf(stderr, "embed: out of memory\n");
    for (size_t i = 0; !status && i < n; i++) lens[i] = strlen(lines[i]);
    if (!status && batch) {
        if (basal_decide_batch(s, n, (const char *const *)lines, lens, res, &e) < 0) {
            fprintf(stderr, "embed: %s\n", e.msg);
            status = 1;
        }
        for (size_t i = 0; !status && i < n; i++) print_result(&res[i]);
    }
    for (size_t i = 0; !status && !batch && i < n; i++) {
        if (basal_decide(s, lines[i], lens[i], &res[i], &e) < 0) {
            fprintf(stderr, "embed: %s\n", e.msg);
            status = 1;
        } else {
            print_result(&res[i]);
        }
    }
    for (size_t i = 0; i < n; i++) {
        if (res) basal_result_free(&res[i]);
        if (lines) free(lines[i]);
    }
    free(res);
    free(lens);
    free(lines);
    basal_close(s);
    return status;
}
