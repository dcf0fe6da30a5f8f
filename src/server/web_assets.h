/* Files built into the binary (web_assets.c): the playground page (GET /)
 * and the OpenAPI description (GET /openapi.json). */
#ifndef BS_WEB_ASSETS_H
#define BS_WEB_ASSETS_H

#include <stddef.h>

enum { BS_WEB_PLAYGROUND, BS_WEB_OPENAPI };

/* The bytes of an asset (NUL-terminated; *len excludes the NUL) and its
 * content type. */
const char *bs_web_asset(int which, size_t *len, const char **ctype);

/* The playground's Content-Security-Policy: its own inline script and style,
 * requests to this server only, nothing loaded from anywhere else. */
#define BS_WEB_PLAYGROUND_CSP                                                                     \
    "default-src 'none'; script-src 'unsafe-inline'; style-src 'unsafe-inline'; connect-src 'self'; " \
    "img-src data:; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"

#endif
