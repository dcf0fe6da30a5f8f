/* serve.yml (src/server/config.c, libyaml): parsed or refused with a message
 * naming the file; nothing leaks either way. */
#include <stdint.h>
#include <string.h>

#include "server/config.h"
#include "fuzz_common.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    bs_serve_config c;
    bs_err e = {0};
    if (bs_serve_config_init(&c, &e) < 0) return 0;
    if (bs_serve_config_parse_yaml(&c, (const char *)data, size, "serve.yml", &e) < 0)
        FUZZ_ASSERT(strstr(e.msg, "serve.yml") != NULL, "message does not name the file: %s", e.msg);
    bs_serve_config_free(&c);
    return 0;
}
