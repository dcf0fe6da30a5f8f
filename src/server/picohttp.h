/* The request parser: picohttpparser (Kazuho Oku et al., MIT), as exported by
 * Debian's libh2o0.13 (`-lh2o`). Debian ships the library but not this
 * header, so the declarations of its stable C interface are written here.
 * Its chunked decoder is not used: it takes framing that RFC 9112 refuses
 * (routes.c, bs_chunked_decode). */
#ifndef BS_PICOHTTP_H
#define BS_PICOHTTP_H

#include <sys/types.h>

struct phr_header {
    const char *name;
    size_t name_len;
    const char *value;
    size_t value_len;
};

/* Returns the bytes of the request line and headers, -2 when incomplete,
 * -1 on a parse error (also more than *num_headers headers). */
int phr_parse_request(const char *buf, size_t len, const char **method, size_t *method_len, const char **path,
                      size_t *path_len, int *minor_version, struct phr_header *headers, size_t *num_headers,
                      size_t last_len);

#endif
