/* Encoding arbitrary text (src/tokenizer/tok_*.c) with the fixture tokenizers (the
 * Mistral tokenizer.json of tiny-bias and the converted stories260K one; the
 * first byte picks): valid UTF-8 encodes, invalid is refused, every id is in
 * the vocabulary and the offsets are ordered spans of the text's characters. */
#include <stdint.h>

#include "tokenizer/tokenizer.h"
#include "base/utf8.h"
#include "fuzz_common.h"

static bs_tokenizer *tok[2];

static bs_tokenizer *load(const char *name) {
    char path[1024];
    bs_err e = {0};
    bs_tokenizer *t = NULL;
    snprintf(path, sizeof path, "%s/%s/tokenizer.json", fuzz_fixtures(), name);
    if (bs_tokenizer_load(&t, path, &e) < 0) {
        fprintf(stderr, "fuzz_tokenize: %s (build the fixtures: make fixtures)\n", e.msg);
        abort();
    }
    return t;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (!tok[0]) {
        tok[0] = load("tiny-bias");
        tok[1] = load("stories260K");
    }
    if (size < 1) return 0;
    const bs_tokenizer *t = tok[data[0] & 1];
    const char *text = (const char *)data + 1;
    size_t len = size - 1;
    int32_t *ids = NULL, *offs = NULL;
    size_t n = 0;
    bs_err e = {0};
    int rc = bs_tokenizer_encode(t, text, len, &ids, &n, &offs, &e);
    int valid = bs_utf8_first_invalid(text, len) == len;
    FUZZ_ASSERT(valid ? rc == 0 || rc == BS_ENOMEM : rc < 0, "valid=%d rc=%d", valid, rc);
    if (rc == 0) {
        size_t chars = 0;
        for (size_t i = 0; i < len; i++) chars += ((unsigned char)text[i] & 0xC0) != 0x80;
        int32_t max = bs_tokenizer_max_id(t);
        for (size_t i = 0; i < n; i++) {
            FUZZ_ASSERT(ids[i] >= 0 && ids[i] <= max, "id %d", ids[i]);
            FUZZ_ASSERT(offs[2 * i] >= 0 && offs[2 * i] <= offs[2 * i + 1] && (size_t)offs[2 * i + 1] <= chars,
                        "offsets [%d, %d) of %zu characters", offs[2 * i], offs[2 * i + 1], chars);
        }
    }
    free(ids);
    free(offs);
    return 0;
}
