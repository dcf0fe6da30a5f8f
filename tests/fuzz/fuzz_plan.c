/* The whole way from bytes to a plan (src/engine/plan.c: decode, validation,
 * capability, prompts, tokenization, letter ids, trie cost, limits) against
 * the tiny-bias fixture's manifests and tokenizer (no weights): a plan or a
 * JSON error reply, never a crash or a leak. */
#include <stdint.h>

#include "protocol/pyjson.h"
#include "engine/plan.h"
#include "fuzz_common.h"

static bs_basal_model model;
static bs_letter_cache lc;
static int ready;

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (!ready) {
        char dir[1024];
        bs_err e = {0};
        snprintf(dir, sizeof dir, "%s/tiny-bias", fuzz_fixtures());
        if (bs_basal_load(&model, dir, NULL, 0, &e) < 0) {
            fprintf(stderr, "fuzz_plan: %s (build the fixtures: make fixtures)\n", e.msg);
            abort();
        }
        bs_letter_cache_init(&lc);
        ready = 1;
    }
    if (size < 1) return 0;
    bs_dialect d = data[0] & 1 ? BS_DIALECT_BASAL : BS_DIALECT_SYSTEMONE;
    bs_plan_limits lim = {64, 4096};
    bs_reply rep;
    bs_reply_init(&rep);
    bs_err e = {0};
    bj_value *body = NULL;
    bs_plan p;
    int rc = bs_body_parse((const char *)data + 1, size - 1, d, &body, &rep, &e);
    if (rc == 0) rc = bs_plan_request(&p, body, d, &model, &lc, data[0] & 2 ? &lim : NULL, 0, &rep, &e);
    if (rc == 0) {
        FUZZ_ASSERT(bs_plan_cost(&p) >= 1, "cost");
        bs_plan_free(&p);
    } else if (rc == BS_EINVAL) {
        bj_value *v = NULL;
        FUZZ_ASSERT(!rep.body.oom && bj_parse(rep.body.data, rep.body.len, NULL, &v, &e) == 0,
                    "error body is not JSON: %.200s", rep.body.data ? rep.body.data : "");
        bj_free(v);
    }
    bs_reply_free(&rep);
    return 0;
}
