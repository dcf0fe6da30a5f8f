/* The files served as they are (issue 18): the playground page of GET / and
 * the API description of GET /openapi.json, built into the binary so that a
 * copied `basal` needs no data directory and the page needs no network. The
 * bytes are the files under web/, taken by the assembler's .incbin at compile
 * time (the Makefile compiles from the repository root and makes this object
 * depend on them); each gets a NUL after it and an end label for its size. */
#include "server/web_assets.h"

#define BS_EMBED(sym, file)                                                    \
    __asm__(".pushsection .rodata\n"                                           \
            ".balign 16\n"                                                     \
            ".globl " #sym "\n"                                                \
            ".type " #sym ", @object\n" #sym ":\n"                             \
            ".incbin \"" file "\"\n"                                           \
            ".globl " #sym "_end\n" #sym "_end:\n"                             \
            ".byte 0\n"                                                        \
            ".popsection\n")

BS_EMBED(bs_web_playground, "web/playground.html");
BS_EMBED(bs_web_openapi, "web/openapi.json");

extern const char bs_web_playground[], bs_web_playground_end[];
extern const char bs_web_openapi[], bs_web_openapi_end[];

const char *bs_web_asset(int which, size_t *len, const char **ctype) {
    switch (which) {
    case BS_WEB_PLAYGROUND:
        *len = (size_t)(bs_web_playground_end - bs_web_playground);
        *ctype = "text/html; charset=utf-8";
        return bs_web_playground;
    case BS_WEB_OPENAPI:
        *len = (size_t)(bs_web_openapi_end - bs_web_openapi);
        *ctype = "application/json";
        return bs_web_openapi;
    default:
        *len = 0;
        *ctype = "application/json";
        return "";
    }
}
