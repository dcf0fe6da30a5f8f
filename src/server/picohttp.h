/* The request parser: picohttpparser (Kazuho Oku et al., MIT), as exported by
 * Debian's libh2o0.13 (`-lh2o`). Debian ships the library but not this
 * header, so the declarations of its stable C interface are written here.
 * The chunked decoder's struct has grown fields in newer picohttpparser
 * releases; http.c keeps it in a zeroed union with room to spare, so a
 * library whose struct is larger than this declaration stays safe. */
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

struct phr_chunked_decoder {
    size_t bytes_left_in_chunk;
    char consume_trailer;
    char _hex_count;
    char _state;
};

/* Decodes (buf, *bufsz) in place; *bufsz becomes the decoded length. Returns
 * -2 when more is needed, -1 on error, else the count of bytes after the end
 * of the chunked body left at the tail of the input. */
ssize_t phr_decode_chunked(struct phr_chunked_decoder *decoder, char *buf, size_t *bufsz);

#endif
