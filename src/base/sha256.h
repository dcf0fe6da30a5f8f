/* SHA-256 through OpenSSL's libcrypto: the benchmark's workload checks (spec
 * 06 §7.5: file hashes against manifest.json, the payload order hash, the
 * mixed order) and the weights' digests every benchmark report records
 * (§7.6). */
#ifndef BS_SHA256_H
#define BS_SHA256_H

#include <stddef.h>
#include <stdint.h>

#include "base/progress.h"
#include "base/util.h"

/* Digest of n bytes. */
void bs_sha256(const void *data, size_t n, uint8_t out[32]);
/* 64 lowercase hex digits and a NUL. */
void bs_sha256_hex(const uint8_t d[32], char out[65]);
/* Digest of a file's bytes, read in blocks (no mapping: the pages do not
 * count in the caller's RSS); each block is added to p (which may be NULL). */
int bs_sha256_file(const char *path, uint8_t out[32], bs_progress *p, bs_err *e);

#endif
