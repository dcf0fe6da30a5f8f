/* The one log format of the program (issue 18): every diagnostic line on
 * stderr, and the access log of `basal serve`, carries a UTC timestamp with
 * milliseconds, a level and a component, in one of two forms:
 *
 *   text: 2026-12-01T12:41:55.123Z INFO  serve: serving on http://127.0.0.1:8000
 *   json: {"ts":"2026-12-01T12:41:55.123Z","level":"info","component":"serve","msg":"serving on ..."}
 *
 * Structured fields (the access log's request id, status, timings) follow the
 * message as key=value pairs in text form and as JSON members in json form.
 * The format comes from bs_log_set_format (serve's --log-format / serve.yml
 * log_format), else from BASAL_LOG_FORMAT; lines below BASAL_LOG_LEVEL
 * (debug, info, warn, error; default info) are dropped.
 *
 * Each line is written with one write(2), so lines of concurrent threads do
 * not interleave. Core code: depends on nothing but libc. */
#ifndef BS_LOG_H
#define BS_LOG_H

#include <stddef.h>

#include "basal.h"

typedef enum { BS_LOG_DEBUG = 0, BS_LOG_INFO = 1, BS_LOG_WARN = 2, BS_LOG_ERROR = 3 } bs_log_level;
typedef enum { BS_LOG_TEXT = 0, BS_LOG_JSON = 1 } bs_log_format;

/* "text" or "json"; -1 otherwise. */
int bs_log_format_parse(const char *s, bs_log_format *out);
void bs_log_set_format(bs_log_format f);
bs_log_format bs_log_get_format(void);
/* The format BASAL_LOG_FORMAT asks for: 1 and *out set when it is set and
 * valid, 0 when unset or empty, -1 when it holds another value. */
int bs_log_format_from_env(bs_log_format *out);

void bs_log(bs_log_level lv, const char *component, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

/* A structured field: a string (NULL is written as - / null), an integer, or
 * a number of milliseconds (negative = not known: - / null). */
typedef enum { BS_LF_STR, BS_LF_INT, BS_LF_MS } bs_log_kind;
typedef struct {
    const char *key;
    bs_log_kind kind;
    const char *s;
    long long i;
    double ms;
    int json_only;   /* left out of the text form (its message already says it) */
} bs_log_field;

/* Where lines go: stderr, or a file opened for appending. */
typedef struct bs_log_sink bs_log_sink;

/* path NULL or "-": stderr. A file is created (0644) if missing. */
int bs_log_sink_open(bs_log_sink **out, const char *path, bs_err *e);
/* Reopens the file by its path (after the file was rotated away; SIGHUP);
 * a no-op returning 0 for stderr. Lines written meanwhile go to the old or
 * the new file, none is lost or torn. */
int bs_log_sink_reopen(bs_log_sink *s, bs_err *e);
/* 1 when the sink is a file (something for SIGHUP to reopen). */
int bs_log_sink_is_file(const bs_log_sink *s);
void bs_log_sink_close(bs_log_sink *s);

/* Called around each line written to stderr, with 0 before and 1 after (a
 * progress bar on the terminal erases and redraws itself). One at a time;
 * fn NULL removes the guard registered with ud. */
typedef void (*bs_log_stderr_guard)(void *ud, int after);
void bs_log_set_stderr_guard(bs_log_stderr_guard fn, void *ud);

/* One line with fields to sink (NULL: stderr). */
void bs_log_fields(bs_log_sink *sink, bs_log_level lv, const char *component, const char *msg,
                   const bs_log_field *f, size_t n);

#endif
