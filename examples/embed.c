/* Embedding basal-c: load a model once, decide System One requests
 * in-process, one per line of stdin, and print each answer (or the error
 * body /v1/systemone would send) as one JSON line with its status.
 *
 *   cc embed.c $(pkg-config --cflags --libs basal) -o embed
 *   echo '{"state": "...", "questions": {...}}' | ./embed /models/basal-1.5-mini
 *
 * The model may also be a reference (mini, owner/name[@revision]): it is
 * then taken from, or downloaded into, the Hugging Face cache. */
#define _POSIX_C_SOURCE 200809L /* getline */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <basal.h>

int main(int argc, char **argv) {
    if (argc != 2 || !strcmp(argv[1], "-h") || !strcmp(argv[1], "--help")) {
        printf("usage: embed MODEL < requests.jsonl\n"
               "MODEL: a model directory or a reference (mini, owner/name[@revision]).\n"
               "Prints one line per request: <status> <JSON answer or error body>.\n");
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
    fprintf(stderr, "embed: %s loaded (basal %s)\n", basal_model_name(s), BASAL_VERSION);
    char *line = NULL;
    size_t cap = 0;
    ssize_t n;
    int status = 0;
    while ((n = getline(&line, &cap, stdin)) > 0) {
        while (n && (line[n - 1] == '\n' || line[n - 1] == '\r')) line[--n] = 0;
        if (!n) continue;
        basal_result r;
        if (basal_decide(s, line, (size_t)n, &r, &e) < 0) {
            fprintf(stderr, "embed: %s\n", e.msg);
            status = 1;
        } else {
            printf("%d %s\n", r.status, r.json);
        }
        basal_result_free(&r);
    }
    free(line);
    basal_close(s);
    return status;
}
