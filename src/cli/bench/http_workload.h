/* The workload files of `basal benchmark` (spec 06 §7.5, basal-rs's v2
 * format): reading the JSONL lines, checking them against the manifest.json
 * beside them, and planning each unique payload with the model's tokenizer
 * (no weights) so that requests over the context limit are skipped whole. */
#ifndef BS_CLI_BENCH_WORKLOAD_H
#define BS_CLI_BENCH_WORKLOAD_H

#include <stddef.h>
#include <stdint.h>

#include "cli/bench/http_report.h"
#include "engine/plan.h"
#include "model/basal_model.h"

/* A line of a workload file, as read (before planning). */
typedef struct {
    char *id, *cls; /* cls NULL: by payload size */
    char *body;     /* the request with the model inserted */
    size_t len;
    int questions;
    uint8_t free_key[32]; /* SHA-256 of the request as in the file (model-free) */
} bm_raw_req;

typedef struct {
    bm_raw_req *r;
    size_t n;
    uint8_t file_sha[32];
} bm_raw_file;

typedef struct {
    const char *id; /* owned by the bm_raw_file */
    const char *body;
    size_t len;
    int cls, questions;
    long input_tokens;    /* -1: not planned here */
    uint8_t key[32];      /* SHA-256 of the body sent */
    char **first_answer;  /* the slot shared by every request with the same payload */
    char *answer;         /* this request's slot, when it is the first of its payload */
    int skipped;          /* over the context limit (found at run time with --url) */
} bm_request;

typedef struct {
    bm_request *r;
    size_t n;
} bm_requests;

void bm_raw_free(bm_raw_file *f);
/* Reads a workload file in the v2 line format: {"id"?, "class"?, "request"}; blank lines are
 * skipped; the model goes in place where "model" is null, or at the end when it is missing.
 * Returns 0, or -1 after a message on stderr. */
int bm_read_workload(const char *path, const char *model, bm_raw_file *f);
/* Checks FILE (read into f) against DIR/manifest.json: sha256, counts, classes, unique and
 * ordered payload hashes, unique ids. No manifest: *checked = 0 and 0 returned. */
int bm_check_manifest(const char *dir, const char *file, const bm_raw_file *f, int *checked);
/* Fills w (the report's description) and rq (the requests to send, in run order); m NULL: no
 * planning (--url). shuffle: the mixed workload's SHA-256 order. */
int bm_prepare_workload(const bm_raw_file *f, const char *name, int shuffle, const bs_basal_model *m,
                        bs_letter_cache *lc, bm_workload *w, bm_requests *rq);
/* Points every request's answer slot at the first request with the same payload. */
int bm_link_answers(bm_requests *rqs, int nw);

#endif
