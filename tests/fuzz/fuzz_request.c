/* Request decoding and validation of both dialects (src/protocol/request.c), the
 * capability check and the error replies: every input is a request or a
 * reply with a status and a JSON body; nothing leaks. The first byte picks
 * the dialect. */
#include <stdint.h>

#include "protocol/pyjson.h"
#include "protocol/request.h"
#include "fuzz_common.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 1) return 0;
    bs_dialect d = data[0] & 1 ? BS_DIALECT_BASAL : BS_DIALECT_SYSTEMONE;
    bs_reply rep;
    bs_reply_init(&rep);
    bs_err e = {0};
    bs_request *r = NULL;
    int rc = bs_request_parse((const char *)data + 1, size - 1, d, NULL, &r, &rep, &e);
    if (rc == 0) rc = bs_request_check_capability(r, NULL, &rep, &e);
    if (rc == BS_EINVAL) {
        FUZZ_ASSERT(rep.status >= 400 && rep.status < 500, "status %d", rep.status);
        bj_value *v = NULL;
        FUZZ_ASSERT(!rep.body.oom && bj_parse(rep.body.data, rep.body.len, NULL, &v, &e) == 0,
                    "error body is not JSON: %.200s", rep.body.data ? rep.body.data : "");
        bj_free(v);
    } else {
        FUZZ_ASSERT(rc == 0 || rc == BS_ENOMEM, "unexpected code %d (%s)", rc, e.msg);
    }
    bs_request_free(r);
    bs_reply_free(&rep);
    return 0;
}
