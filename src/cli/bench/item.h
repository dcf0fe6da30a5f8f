/* A basal-bench item of a reference export's bench.jsonl (spec 06 §6:
 * {state, question, options, type?, gold?}, one question with raw option
 * texts) as the /v1/systemone request that asks it, for `basal export`,
 * `check-prompts` and `bench --reference`. The question "q" has the option
 * indices "0".."n-1" as keys and the raw options as shown texts: choice, an
 * object of criteria with option_keys "hide"; score, the list of levels (also
 * its legend); noul, {"true": options[0], "false": options[1]}. A choice whose
 * raw options repeat a text shows "k: text" for the repeats (01 §2.8) where
 * basal-rs shows the bare text. */
#ifndef BS_CLI_BENCH_ITEM_H
#define BS_CLI_BENCH_ITEM_H

#include "protocol/pyjson.h"
#include "base/util.h"

/* The non-blank lines of a JSONL file (a reference export's bench.jsonl or
 * systemone.jsonl) as parsed values, with their line numbers. */
typedef struct {
    bj_value **v;
    size_t n;
    size_t *line; /* the file line of each value */
} cli_jsonl;

int cli_jsonl_read(const char *path, cli_jsonl *out, bs_err *e);
void cli_jsonl_free(cli_jsonl *j);

/* Appends the request body for rec, asked of model, to b; BS_EINVAL (with
 * the reason) for an item of another type or of fewer than 2 or more than 10
 * options. */
int cli_bench_item_body(const bj_value *rec, const char *model, bs_buf *b, bs_err *e);

#endif
