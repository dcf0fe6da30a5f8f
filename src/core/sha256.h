/* SHA-256 through OpenSSL's libcrypto, for the benchmark's workload checks
 * (spec 06 §7.5: file hashes against manifest.json, the payload order hash,
 * the mixed order). */
#ifndef BS_SHA256_H
#define BS_SHA256_H

#include <stddef.h>
#include <stdint.h>

/* Digest of n bytes. */
void bs_sha256(const void *data, size_t n, uint8_t out[32]);
/* 64 lowercase hex digits and a NUL. */
void bs_sha256_hex(const uint8_t d[32], char out[65]);

#endif
