/* SHA-256 (FIPS 180-4), for the benchmark's workload checks (spec 06 §7.5:
 * file hashes against manifest.json, the payload order hash, the mixed order). */
#ifndef BS_SHA256_H
#define BS_SHA256_H

#include <stddef.h>
#include <stdint.h>

typedef struct bs_sha256_ctx {
    uint32_t h[8];
    uint64_t bytes;
    uint8_t block[64];
    size_t fill;
} bs_sha256_ctx;

void bs_sha256_init(bs_sha256_ctx *s);
void bs_sha256_update(bs_sha256_ctx *s, const void *data, size_t n);
void bs_sha256_final(bs_sha256_ctx *s, uint8_t out[32]);
/* One call: digest of n bytes. */
void bs_sha256(const void *data, size_t n, uint8_t out[32]);
/* 64 lowercase hex digits and a NUL. */
void bs_sha256_hex(const uint8_t d[32], char out[65]);

#endif
