/* SHA-256 (sha256.h) by OpenSSL's EVP interface. */
#include "base/sha256.h"

#include <errno.h>
#include <fcntl.h>
#include <openssl/evp.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* A one-shot digest of memory fails only if libcrypto cannot allocate; the
 * digest is then zeroed, which no manifest matches, so a check fails loudly. */
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

int bs_sha256_file(const char *path, uint8_t out[32], bs_progress *p, bs_err *e) {
    enum { BLOCK = 4 << 20 };
    int rc = BS_OK, fd = open(path, O_RDONLY | O_CLOEXEC);
    unsigned char *buf = malloc(BLOCK);
    EVP_MD_CTX *ctx = EVP_MD_CTX_new();
    unsigned int len = 0;
    if (fd < 0) {
        rc = bs_fail(e, BS_EIO, "%s: cannot open: %s", path, strerror(errno));
        goto done;
    }
    if (!buf || !ctx || !EVP_DigestInit_ex(ctx, EVP_sha256(), NULL)) {
        rc = bs_fail(e, BS_ENOMEM, "%s: out of memory for its SHA-256", path);
        goto done;
    }
    for (;;) {
        ssize_t r = read(fd, buf, BLOCK);
        if (r < 0 && errno == EINTR) continue;
        if (r < 0) {
            rc = bs_fail(e, BS_EIO, "%s: read error: %s", path, strerror(errno));
            goto done;
        }
        if (r == 0) break;
        if (!EVP_DigestUpdate(ctx, buf, (size_t)r)) {
            rc = bs_fail(e, BS_ENOMEM, "%s: SHA-256 failed", path);
            goto done;
        }
        bs_progress_add(p, (uint64_t)r);
    }
    if (!EVP_DigestFinal_ex(ctx, out, &len) || len != 32) rc = bs_fail(e, BS_ENOMEM, "%s: SHA-256 failed", path);
done:
    EVP_MD_CTX_free(ctx);
    free(buf);
    if (fd >= 0) close(fd);
    return rc;
}
