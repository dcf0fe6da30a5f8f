/* config.json (src/model/config.c): parsed or refused with a message naming
 * the file. */
#include <stdint.h>
#include <string.h>

#include "model/config.h"
#include "fuzz_common.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    bs_config c;
    bs_err e = {0};
    if (bs_config_parse(&c, (const char *)data, size, "config.json", &e) < 0)
        FUZZ_ASSERT(strstr(e.msg, "config.json") != NULL, "message does not name the file: %s", e.msg);
    return 0;
}
