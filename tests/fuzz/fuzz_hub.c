/* What the Hugging Face Hub sends (src/hub): answer header lines and pages
 * of a repository listing, the bytes a download trusts before any file is
 * checked. A header line never makes a size or range negative; an accepted
 * listing entry has an etag of 40 (git) or 64 (LFS sha256) lower-case hex
 * digits and no '/' in its path, since both become file names in the cache. */
#include <stdint.h>
#include <string.h>

#include "hub/hub_int.h"
#include "fuzz_common.h"

static int hex_only(const char *s) {
    for (; *s; s++)
        if (!((*s >= '0' && *s <= '9') || (*s >= 'a' && *s <= 'f'))) return 0;
    return 1;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size && data[0] & 1) { /* header lines, split at '\n' as curl hands them over */
        bs_hub_resp r = { 0 };
        bs_hub_resp_reset(&r);
        const char *p = (const char *)data + 1, *end = (const char *)data + size;
        while (p < end) {
            const char *nl = memchr(p, '\n', (size_t)(end - p));
            size_t n = nl ? (size_t)(nl - p) + 1 : (size_t)(end - p);
            bs_hub_header_line(&r, p, n);
            p += n;
        }
        FUZZ_ASSERT(r.status >= 0 && r.status <= 999, "status %ld", r.status);
        FUZZ_ASSERT(r.linked_size >= -1 && r.content_length >= -1 && r.retry_after >= -1 && r.retry_after <= 3600,
                    "sizes %lld %lld %ld", r.linked_size, r.content_length, r.retry_after);
        FUZZ_ASSERT(r.range_start == -1 || (r.range_start >= 0 && r.range_total > r.range_start), "range %lld/%lld",
                    r.range_start, r.range_total);
        return 0;
    }
    bs_hub_files f = { 0 };
    bs_err e = { 0 };
    if (bs_hub_listing_page(&f, size ? (const char *)data + 1 : "", size ? size - 1 : 0, "tree", &e) < 0)
        FUZZ_ASSERT(strstr(e.msg, "tree") != NULL, "message does not name the listing: %s", e.msg);
    for (size_t i = 0; i < f.n; i++) {
        size_t len = strlen(f.v[i].etag);
        FUZZ_ASSERT(!strchr(f.v[i].path, '/'), "path %s", f.v[i].path);
        FUZZ_ASSERT(hex_only(f.v[i].etag) && len == (f.v[i].lfs ? 64u : 40u), "etag %s", f.v[i].etag);
    }
    bs_hub_files_free(&f);
    return 0;
}
