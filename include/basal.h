/* basal-c public definitions: error codes and the error record every API fills.
 * Library functions return 0 (BS_OK) or a negative BS_E* code and, when given a
 * bs_err, a human-readable message naming the file and the problem. */
#ifndef BASAL_H
#define BASAL_H

#include <stddef.h>

#define BASAL_VERSION "0.1.0"

enum {
    BS_OK = 0,
    BS_EINVAL = -1,    /* bad argument or bad input data */
    BS_EIO = -2,       /* file missing, unreadable, short read */
    BS_ENOMEM = -3,    /* allocation failed */
    BS_EFORMAT = -4,   /* a file exists but its content violates the format */
    BS_EUNSUP = -5,    /* valid but not implemented by this runtime (refused, never ignored) */
    BS_EINTERNAL = -6, /* broken invariant; a bug, reported instead of crashing */
    BS_ERANGE = -7     /* value outside a limit (positions, sizes) */
};

typedef struct bs_err {
    int code;
    char msg[1024];
} bs_err;

/* Records code and a printf-style message in e (if e is not NULL); returns code. */
int bs_fail(bs_err *e, int code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

const char *bs_strerror(int code);

#endif
