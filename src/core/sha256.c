/* SHA-256 (sha256.h) by OpenSSL: its one-shot EVP digest cannot fail for an
 * in-memory buffer short of an allocation failure inside libcrypto, which
 * leaves the digest zeroed (a manifest check then fails, as it should). */
#include "core/sha256.h"

#include <openssl/evp.h>
#include <string.h>

void bs_sha256(const void *data, size_t n, uint8_t out[32]) {
    unsigned int len = 0;
    if (!EVP_Digest(data, n, out, &len, EVP_sha256(), NULL) || len != 32) memset(out, 0, 32);
}

void bs_sha256_hex(const uint8_t d[32], char out[65]) {
    static const char hex[] = "0123456789abcdef";
    for (int i = 0; i < 32; i++) {
        out[2 * i] = hex[d[i] >> 4];
        out[2 * i + 1] = hex[d[i] & 15];
    }
    out[64] = 0;
}
