/* The evidence_head.pt reader (src/model/torchfile.c, the zip container and
 * the pickle subset of 03 §4.2) and the head built from it: a hostile-input
 * surface. Any bytes load or are refused with a message naming the file; what
 * loads is read as a head for a hidden size of 64. */
#include <stdint.h>
#include <string.h>

#include "model/evidence.h"
#include "model/torchfile.h"
#include "fuzz_common.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    bs_pt_file f;
    bs_err e = {0};
    if (bs_pt_read_mem(data, size, "evidence_head.pt", &f, &e) < 0) {
        FUZZ_ASSERT(strstr(e.msg, "evidence_head.pt") != NULL, "message does not name the file: %s", e.msg);
        return 0;
    }
    bs_evidence_head h;
    if (bs_evidence_head_from_pt(&h, &f, 64, &e) == 0) bs_evidence_head_free(&h);
    bs_pt_free(&f);
    return 0;
}
