/* pyjson (src/protocol/pyjson.c): any bytes parse or fail cleanly; what parses
 * writes back (json.dumps form) to a text that parses to the same text again,
 * and the compact response writer's output parses too. (A number literal that
 * overflows a double is written as Infinity, as CPython does (01 §9); such a
 * text is not JSON, so the round trip is checked only without it.) */
#include <stdint.h>
#include <string.h>

#include "protocol/pyjson.h"
#include "protocol/respjson.h"
#include "fuzz_common.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    bj_value *v = NULL;
    bs_err e = {0};
    if (bj_parse((const char *)data, size, NULL, &v, &e) < 0) return 0;
    bs_buf a, b, r;
    bs_buf_init(&a);
    bs_buf_init(&b);
    bs_buf_init(&r);
    bj_pydumps(v, &a);
    bs_resp_value(&r, v);
    if (!a.oom && !r.oom && !strstr(a.data, "Infinity")) {
        bj_value *w = NULL, *x = NULL;
        FUZZ_ASSERT(bj_parse(a.data, a.len, NULL, &w, &e) == 0, "dumps output does not parse: %s", e.msg);
        bj_pydumps(w, &b);
        FUZZ_ASSERT(a.len == b.len && !memcmp(a.data, b.data, a.len), "dumps is not stable");
        FUZZ_ASSERT(bj_parse(r.data, r.len, NULL, &x, &e) == 0, "response writer output does not parse: %s", e.msg);
        bj_free(w);
        bj_free(x);
    }
    bj_pytext(v, &b);
    bj_free(v);
    bs_buf_free(&a);
    bs_buf_free(&b);
    bs_buf_free(&r);
    return 0;
}
