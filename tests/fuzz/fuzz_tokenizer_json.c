/* Loading tokenizer.json text (src/tokenizer/tokenizer.c): a tokenizer or an error
 * naming the file; what loads also encodes a fixed text without crashing. */
#include <stdint.h>
#include <string.h>

#include "tokenizer/tokenizer.h"
#include "fuzz_common.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    bs_tokenizer *t = NULL;
    bs_err e = {0};
    if (bs_tokenizer_load_mem(&t, (const char *)data, size, "tokenizer.json", &e) < 0) {
        FUZZ_ASSERT(e.msg[0], "an error without a message");
        return 0;
    }
    static const char text[] = "Zażółć gęślą jaźń? Hello world <s> [INST] 12 345\n\t end";
    int32_t *ids = NULL, *offs = NULL;
    size_t n = 0;
    bs_tokenizer_encode(t, text, sizeof text - 1, &ids, &n, &offs, &e);
    free(ids);
    free(offs);
    bs_tokenizer_check_basal(t, &e);
    bs_tokenizer_free(t);
    return 0;
}
