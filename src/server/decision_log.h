/* The decision log of `basal serve` (issue 33; upstream's --log-decisions):
 * one JSON line per answered request, an audit trail of every decision.
 *
 * Off the request path: the HTTP loop hands over the request and reply bytes
 * it already holds (bs_dlog_submit never waits for a disk or a lock held
 * across I/O); one writer thread composes and appends the lines. The file is
 * opened non-blocking, so a FIFO without a reader (its lines wait) or whose
 * reader stopped reading holds only the writer, and even it not past a stop
 * or a reopen. When the queue is full (the disk or reader is slower than the
 * decisions) an entry is dropped and counted; when a write fails (disk full)
 * the failure is logged once, its lines are counted as failed, and the
 * server keeps answering. SIGHUP reopens the file (bs_dlog_reopen), like the
 * access log.
 *
 * A line (keys in this order; upstream's ts, model, request_sha256, answers
 * and reviewed are among them, with the same meaning):
 *   {"ts":1796317262.123456,"time":"2026-12-03T17:01:02.123Z",
 *    "request_id":"<x-typesafe-request-id>","endpoint":"/v1/systemone",
 *    <the model's members, bs_dlog_set_model>,
 *    "request_sha256":"<hex>","body_sha256":"<hex>","latency_ms":…,
 *    "queue_ms":…,"compute_ms":…,"answers":{…},"usage":{…},"reviewed":null}
 * ts: seconds since the epoch (Python's time.time()), time: the same in UTC;
 * request_sha256: SHA-256 of json.dumps([state, questions], sort_keys=True,
 * ensure_ascii=False) as upstream computes it; body_sha256: of the body
 * bytes as received; "answers" and "usage" exactly as the client received
 * them (number literals verbatim: full precision), and "state" (the
 * request's state value as sent) before "reviewed" only when the log was
 * opened with_state. No header is ever logged (the API key stays out). */
#ifndef BS_DECISION_LOG_H
#define BS_DECISION_LOG_H

#include <stddef.h>
#include <stdint.h>

#include "base/util.h"

typedef struct bs_dlog bs_dlog;

/* One answered request. bs_dlog_submit takes reply and body over. */
typedef struct bs_dlog_entry {
    double ts_ms;            /* wall clock, ms since the epoch, when the answer was sent */
    char request_id[33];
    size_t model;            /* index, as in bs_dlog_set_model */
    int basal_dialect;       /* 1: POST /v1/basal, 0: POST /v1/systemone */
    double latency_ms, queue_ms, compute_ms;
    bs_buf reply;            /* the 200 body as sent */
    bs_buf body;             /* the request body as received */
} bs_dlog_entry;

/* Default bound of the queue: what the writer may lag behind. */
#define BS_DLOG_QUEUE_BYTES (64u << 20)
/* At the shutdown, the time the writer has to write what is queued. */
#define BS_DLOG_CLOSE_GRACE_MS 5000

/* Opens path for appending ("-": standard output) and starts the writer.
 * n_models: the models of bs_dlog_set_model. queue_bytes 0 = the default. */
int bs_dlog_open(bs_dlog **out, const char *path, size_t n_models, int with_state, size_t queue_bytes, bs_err *e);
/* The JSON members of model i in every line of it, e.g.
 * "\"model\":\"basal-1.5-mini\",\"revision\":null,\"dtype\":\"f32\",\"orders\":2"
 * (copied). Call before the first bs_dlog_submit of that model. */
int bs_dlog_set_model(bs_dlog *d, size_t i, const char *json_members, bs_err *e);
/* Queues the entry (never blocks on I/O); takes en->reply and en->body (the
 * caller's buffers are left empty). Dropped and counted when the queue is full. */
void bs_dlog_submit(bs_dlog *d, bs_dlog_entry *en);
/* Asks the writer to reopen the file by its path (SIGHUP; it logs the
 * outcome and keeps the old file if the open fails); a no-op for standard
 * output. Any thread; never blocks on I/O. */
void bs_dlog_reopen(bs_dlog *d);
int bs_dlog_is_file(const bs_dlog *d);

typedef struct bs_dlog_counts {
    uint64_t lines;          /* written whole */
    uint64_t dropped;        /* not queued: the queue was full */
    uint64_t failed;         /* lost to a failed write (disk full, I/O error) */
} bs_dlog_counts;
void bs_dlog_get_counts(bs_dlog *d, bs_dlog_counts *c);

/* Writes every queued entry (within BS_DLOG_CLOSE_GRACE_MS: what a reader
 * that does not read keeps back is lost, logged and counted), stops the
 * writer and frees d; NULL is fine. */
void bs_dlog_close(bs_dlog *d);

#endif
