/* Shared by the libFuzzer targets (make fuzz): reading fixture files once per
 * process and a hard failure that libFuzzer reports as a finding. */
#ifndef BS_FUZZ_COMMON_H
#define BS_FUZZ_COMMON_H

#include <stdio.h>
#include <stdlib.h>

#include "base/util.h"

/* The fixture directory: $FUZZ_FIXTURES, else build/fixtures. */
static inline const char *fuzz_fixtures(void) {
    const char *d = getenv("FUZZ_FIXTURES");
    return d && *d ? d : "build/fixtures";
}

/* An invariant broke: print it and abort (a finding, with the input saved). */
#define FUZZ_ASSERT(cond, ...) \
    do { \
        if (!(cond)) { \
            fprintf(stderr, "fuzz invariant failed: %s: ", #cond); \
            fprintf(stderr, __VA_ARGS__); \
            fputc('\n', stderr); \
            abort(); \
        } \
    } while (0)

#endif
