/* core/sha256.c: digests of the FIPS 180-4 examples and of lengths around the
 * 55/56/64-byte padding boundaries; expected values from CPython's hashlib.
 * Also: feeding the same bytes in odd pieces gives the same digest. */
#include <string.h>

#include "check.h"
#include "core/sha256.h"

static void hex_of(const void *d, size_t n, char out[65]) {
    uint8_t h[32];
    bs_sha256(d, n, h);
    bs_sha256_hex(h, out);
}

int main(void) {
    static uint8_t data[1280];
    for (size_t i = 0; i < sizeof data; i++) data[i] = (uint8_t)i;
    static char as[64];
    memset(as, 'a', sizeof as);
    char hex[65];
    hex_of("", 0, hex);
    CHECK_STR(hex, "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
    hex_of("abc", 3, hex);
    CHECK_STR(hex, "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
    hex_of(as, 55, hex);
    CHECK_STR(hex, "9f4390f8d30c2dd92ec9f095b65e2b9ae9b0a925a5258e241c9f1e910f734318");
    hex_of(as, 56, hex);
    CHECK_STR(hex, "b35439a4ac6f0948b6d6f9e3c6af0f5f590ce20f1bde7090ef7970686ec6738a");
    hex_of(as, 64, hex);
    CHECK_STR(hex, "ffe054fe7ae0cb6dc65c3af9b61d5209f439851db43d0ba5997337df154668eb");
    hex_of(data, sizeof data, hex);
    CHECK_STR(hex, "d414b085826eb06778483ba35564dc849e643359f69ed9747878ba6e54985bed");
    bs_sha256_ctx s;
    bs_sha256_init(&s);
    for (size_t off = 0, step = 1; off < sizeof data; off += step, step = step * 3 % 97 + 1)
        bs_sha256_update(&s, data + off, off + step <= sizeof data ? step : sizeof data - off);
    uint8_t d[32];
    bs_sha256_final(&s, d);
    bs_sha256_hex(d, hex);
    CHECK_STR(hex, "d414b085826eb06778483ba35564dc849e643359f69ed9747878ba6e54985bed");
    return check_report("test_sha256");
}
