/* Pieces of `basal client` (spec 06 §5.3) that do not talk HTTP: input
 * framing, compact JSON writing of parsed values, JSON pointers, the request
 * body a record becomes. cmd_client.c drives them. */
#ifndef BS_CLI_CLIENT_H
#define BS_CLI_CLIENT_H

#include <stddef.h>
#include <stdint.h>

#include "protocol/pyjson.h"
#include "base/util.h"

typedef enum { CL_TEXT, CL_JSON, CL_LINES, CL_JSONL } cl_format;

/* A stream of input records read from one file descriptor without blocking
 * the caller: cl_input_next answers "here is a record", "nothing yet" or
 * "end of input". text/json make one record of the whole input; lines/jsonl
 * one record per line, blank lines (only ASCII whitespace) skipped. */
typedef struct cl_input {
    int fd, own_fd, eof, format;
    size_t limit;    /* --max-input-bytes: longest record */
    bs_buf buf;      /* bytes read and not yet consumed */
    size_t scan;     /* bytes of buf already searched for a newline */
    int oversized;   /* discarding the rest of a record longer than limit */
    uint64_t bytes_read;
} cl_input;

/* One decoded record: value set (owned) or err_msg (malloc'd) for a record
 * that could not be decoded (invalid UTF-8 or JSON, too long). */
typedef struct cl_record {
    bj_value *value;
    char *err_msg;
} cl_record;

/* source "-" is stdin; returns -1 with a message in e when the file cannot
 * be opened. */
int cl_input_open(cl_input *in, const char *source, cl_format format, size_t limit, bs_err *e);
void cl_input_close(cl_input *in);
/* 1: *rec filled; 0: no complete record without blocking (poll in->fd);
 * -1: end of input; -2: read error (message in e). */
int cl_input_next(cl_input *in, cl_record *rec, bs_err *e);
/* Non-blank lines of a regular file (for the progress line's total), or -1. */
long long cl_count_records(const char *source, cl_format format);

/* RFC 6901 pointer syntax check (each ~ followed by 0 or 1). */
int cl_pointer_valid(const char *pointer);
/* The value a JSON pointer names, or NULL. */
const bj_value *cl_pointer_get(const bj_value *root, const char *pointer);
/* The names a model may be given by: mini, 4.5B, max and the Remek/ repository
 * names become the served names basal-1.5-*; anything else is kept. */
const char *cl_model_name(const char *name);

#endif
