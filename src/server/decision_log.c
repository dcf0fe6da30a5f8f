#include "server/decision_log.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "base/log.h"
#include "base/sha256.h"
#include "protocol/pyjson.h"
#include "protocol/respjson.h"

typedef struct item {
    struct item *next;
    bs_dlog_entry en;
} item;

struct bs_dlog {
    char *path;              /* NULL: standard output */
    int with_state;
    size_t queue_bytes;
    char **models;           /* per model: its JSON members */
    size_t n_models;
    pthread_mutex_t mu;      /* everything below but fd */
    pthread_cond_t cond;     /* new entries, a reopen request, the stop */
    item *head, *tail;
    size_t queued;           /* bytes of the queued entries */
    int stop;
    double give_up_ms;       /* after stop: lines not written by then are lost (bs_now_ms) */
    int reopen;              /* SIGHUP asked for the file to be reopened */
    int writer_done;
    pthread_cond_t done_cond;
    bs_dlog_counts counts;
    int fd;                  /* the writer's alone once it runs; -1: a FIFO without a reader yet */
    pthread_t writer;
    int writer_started;
};

/* A deliberately kept writer that outlived the shutdown (bs_dlog_close). */
static bs_dlog *g_abandoned;

static size_t entry_bytes(const bs_dlog_entry *en) { return sizeof(item) + en->reply.len + en->body.len; }

static void entry_free(bs_dlog_entry *en) {
    bs_buf_free(&en->reply);
    bs_buf_free(&en->body);
}

static int is_fifo(const char *path) {
    struct stat st;
    return stat(path, &st) == 0 && S_ISFIFO(st.st_mode);
}

/* Non-blocking, so that neither a FIFO without a reader (ENXIO, returned
 * as 1: try again later) nor one whose reader stopped reading can hold the
 * writer where a stop or a reopen cannot reach it. */
static int open_append(const char *path, int *fd, bs_err *e) {
    *fd = open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC | O_NONBLOCK, 0640);
    if (*fd >= 0) return 0;
    if (errno == ENXIO && is_fifo(path)) return 1;
    return bs_fail(e, BS_EIO, "decision log %s: %s (check the directory exists and is writable)", path,
                   strerror(errno));
}

/* "2026-12-03T17:01:02.123Z" */
static void put_time(bs_buf *b, double ms) {
    time_t sec = (time_t)(ms / 1e3);
    long milli = (long)(ms - (double)sec * 1e3);
    if (milli < 0) milli = 0;
    if (milli > 999) milli = 999;
    struct tm tm;
    char t[32];
    gmtime_r(&sec, &tm);
    strftime(t, sizeof t, "%Y-%m-%dT%H:%M:%S", &tm);
    bs_buf_printf(b, "\"%s.%03ldZ\"", t, milli);
}

static void put_member(bs_buf *b, const bj_value *obj, const char *key) {
    bs_buf_printf(b, ",\"%s\":", key);
    bs_resp_value(b, obj ? bj_get(obj, key) : NULL);
}

static void put_sha256(bs_buf *b, const char *data, size_t len) {
    uint8_t dg[32];
    char hex[65];
    bs_sha256(data ? data : "", len, dg);
    bs_sha256_hex(dg, hex);
    bs_buf_printf(b, "\"%s\"", hex);
}

/* Upstream's request_sha256 (basal-serve --log-decisions): the SHA-256 of
 * json.dumps([state, questions], sort_keys=True, ensure_ascii=False), so the
 * same request has the same hash in both servers' logs whatever its key
 * order or spacing. */
static void put_request_sha256(bs_buf *b, const bj_value *body) {
    if (!body) {
        bs_buf_puts(b, "null");
        return;
    }
    bs_buf canon;
    bs_buf_init(&canon);
    bs_buf_putc(&canon, '[');
    bj_pydumps_sorted(bj_get(body, "state"), &canon);
    bs_buf_put(&canon, ", ", 2);
    bj_pydumps_sorted(bj_get(body, "questions"), &canon);
    bs_buf_putc(&canon, ']');
    if (canon.oom) b->oom = 1;
    else put_sha256(b, canon.data, canon.len);
    bs_buf_free(&canon);
}

/* The line of one entry (see the header), newline-terminated. */
static void compose(const bs_dlog *d, const bs_dlog_entry *en, bs_buf *b) {
    bj_value *reply = NULL, *body = NULL;
    bs_err e;
    if (bj_parse(en->reply.data ? en->reply.data : "", en->reply.len, NULL, &reply, &e) < 0) reply = NULL;
    if (bj_parse(en->body.data ? en->body.data : "", en->body.len, NULL, &body, &e) < 0) body = NULL;
    bs_buf_printf(b, "{\"ts\":%.6f,\"time\":", en->ts_ms / 1e3);
    put_time(b, en->ts_ms);
    bs_buf_puts(b, ",\"request_id\":");
    bj_put_string(b, en->request_id, strlen(en->request_id));
    bs_buf_printf(b, ",\"endpoint\":\"%s\"", en->basal_dialect ? "/v1/basal" : "/v1/systemone");
    if (en->model < d->n_models && d->models[en->model]) bs_buf_printf(b, ",%s", d->models[en->model]);
    bs_buf_puts(b, ",\"request_sha256\":");
    put_request_sha256(b, body);
    bs_buf_puts(b, ",\"body_sha256\":");
    put_sha256(b, en->body.data, en->body.len);
    bs_buf_puts(b, ",\"latency_ms\":");
    bs_resp_double(b, en->latency_ms);
    bs_buf_puts(b, ",\"queue_ms\":");
    bs_resp_double(b, en->queue_ms);
    bs_buf_puts(b, ",\"compute_ms\":");
    bs_resp_double(b, en->compute_ms);
    put_member(b, reply, "answers");
    put_member(b, reply, "usage");
    if (d->with_state) put_member(b, body, "state");
    bs_buf_puts(b, ",\"reviewed\":null}\n");
    bj_free(reply);
    bj_free(body);
}

typedef struct writer_state {
    int failing;             /* the last write failed (logged once until one succeeds) */
    int torn;                /* a failed write left part of a line: end it before the next */
    uint64_t lost;           /* lines lost during the current failure */
    int gave_up;             /* the shutdown's time ran out: the rest is lost */
    uint64_t abandoned;      /* lines lost that way */
} writer_state;

static int same_file(int a, int b) {
    struct stat sa, sb;
    return a >= 0 && b >= 0 && fstat(a, &sa) == 0 && fstat(b, &sb) == 0 && sa.st_dev == sb.st_dev &&
           sa.st_ino == sb.st_ino;
}

/* The writer's own: switches to the file now at the path (SIGHUP). 1: it
 * is another file (a line under way starts again there), 0: the same one
 * (a FIFO, or nothing was moved) or the open failed (the old one stays). */
static int do_reopen(bs_dlog *d, writer_state *ws) {
    bs_err e = { 0 };
    int fd;
    int rc = open_append(d->path, &fd, &e);
    if (rc < 0) {
        bs_log(BS_LOG_ERROR, "decision-log", "SIGHUP: %s; still writing to the old file", e.msg);
        return 0;
    }
    int other = !same_file(d->fd, fd);
    if (d->fd >= 0) close(d->fd);
    d->fd = rc ? -1 : fd;
    if (other) ws->torn = 0; /* a torn line stays with the old file */
    if (rc) bs_log(BS_LOG_INFO, "decision-log", "SIGHUP: decision log reopened (%s: a FIFO no one reads yet)", d->path);
    else bs_log(BS_LOG_INFO, "decision-log", "SIGHUP: decision log reopened (%s)", d->path);
    return other && !rc;
}

/* Between two tries of a write or an open: waits up to ms for the file
 * (pfd >= 0) or for a stop or reopen request. 1: reopened on another file
 * (start the line again), -1: give up (the shutdown's time is over), 0: try
 * again. */
static int writer_wait(bs_dlog *d, writer_state *ws, int pfd, int ms) {
    if (pfd >= 0) {
        struct pollfd p = { .fd = pfd, .events = POLLOUT };
        (void)poll(&p, 1, ms);
    }
    pthread_mutex_lock(&d->mu);
    if (pfd < 0 && !d->reopen && !(d->stop && bs_now_ms() >= d->give_up_ms)) {
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        ts.tv_nsec += (long)ms * 1000000L;
        ts.tv_sec += ts.tv_nsec / 1000000000L;
        ts.tv_nsec %= 1000000000L;
        pthread_cond_timedwait(&d->cond, &d->mu, &ts);
    }
    int reopen = d->reopen, give_up = d->stop && bs_now_ms() >= d->give_up_ms;
    d->reopen = 0;
    pthread_mutex_unlock(&d->mu);
    if (give_up) {
        ws->gave_up = 1;
        return -1;
    }
    return reopen && d->path ? do_reopen(d, ws) : 0;
}

/* Writes the whole line; 0, or the errno of a failure (EAGAIN: given up). */
static int write_all(bs_dlog *d, writer_state *ws, const bs_buf *line) {
    size_t off = 0;
    while (off < line->len) {
        if (d->fd < 0) { /* a FIFO without a reader: try its open again */
            bs_err e;
            int fd, rc = open_append(d->path, &fd, &e);
            if (rc < 0) return EIO;
            if (rc == 0) d->fd = fd;
            else if (writer_wait(d, ws, -1, 100) < 0) return EAGAIN;
            continue;
        }
        if (ws->torn) {
            ssize_t w = write(d->fd, "\n", 1);
            if (w == 1) ws->torn = 0;
            else if (w < 0 && errno != EAGAIN && errno != EINTR) return errno;
            else if (writer_wait(d, ws, d->fd, 100) < 0) return EAGAIN;
            continue;
        }
        ssize_t w = write(d->fd, line->data + off, line->len - off);
        if (w > 0) {
            off += (size_t)w;
            continue;
        }
        if (w < 0 && errno == EINTR) continue;
        if (w == 0 || errno != EAGAIN) {
            int err = w == 0 ? EIO : errno;
            if (off) ws->torn = 1;
            if (err == EPIPE && d->path) { /* the FIFO's reader went away: wait for the next one */
                close(d->fd);
                d->fd = -1;
                ws->torn = 0;
            }
            return err;
        }
        int rc = writer_wait(d, ws, d->fd, 100); /* full: its reader is slow or stopped reading */
        if (rc < 0) {
            if (off) ws->torn = 1;
            return EAGAIN;
        }
        if (rc > 0) off = 0; /* another file: the whole line goes there */
    }
    return 0;
}

static void write_line(bs_dlog *d, writer_state *ws, const bs_buf *line) {
    int err = ws->gave_up ? EAGAIN : write_all(d, ws, line);
    pthread_mutex_lock(&d->mu);
    if (err) d->counts.failed++;
    else d->counts.lines++;
    pthread_mutex_unlock(&d->mu);
    if (err == EAGAIN) { /* the shutdown's time ran out; logged once at the end */
        ws->abandoned++;
        return;
    }
    if (err) {
        ws->lost++;
        if (!ws->failing)
            bs_log(BS_LOG_ERROR, "decision-log",
                   "%s: %s; decisions are still answered, their log lines are lost (counted in "
                   "basal_decision_log_failed_total) until a write succeeds",
                   d->path ? d->path : "stdout", strerror(err));
        ws->failing = 1;
    } else if (ws->failing) {
        bs_log(BS_LOG_INFO, "decision-log", "%s: writing again (%llu lines lost)", d->path ? d->path : "stdout",
               (unsigned long long)ws->lost);
        ws->failing = 0;
        ws->lost = 0;
    }
}

static void *writer_main(void *arg) {
    bs_dlog *d = arg;
    writer_state ws = { 0 };
    bs_buf line;
    bs_buf_init(&line);
    for (;;) {
        pthread_mutex_lock(&d->mu);
        while (!d->head && !d->stop && !d->reopen) pthread_cond_wait(&d->cond, &d->mu);
        item *batch = d->head;
        d->head = d->tail = NULL;
        int stop = d->stop, reopen = d->reopen;
        d->reopen = 0;
        pthread_mutex_unlock(&d->mu);
        if (reopen && d->path) do_reopen(d, &ws);
        while (batch) {
            item *it = batch;
            batch = it->next;
            line.len = 0;
            line.oom = 0;
            compose(d, &it->en, &line);
            if (line.oom) {
                pthread_mutex_lock(&d->mu);
                d->counts.failed++;
                pthread_mutex_unlock(&d->mu);
            } else {
                write_line(d, &ws, &line);
            }
            /* the bound of the queue holds until a line is written, so a
             * writer stuck on its first line keeps no more than it */
            size_t bytes = entry_bytes(&it->en);
            entry_free(&it->en);
            free(it);
            pthread_mutex_lock(&d->mu);
            d->queued -= bytes;
            pthread_mutex_unlock(&d->mu);
        }
        if (stop) break;
    }
    if (ws.gave_up)
        bs_log(BS_LOG_WARN, "decision-log",
               "%s could not be written at the shutdown (a FIFO or pipe no one reads?): %llu lines lost",
               d->path ? d->path : "stdout", (unsigned long long)ws.abandoned);
    bs_buf_free(&line);
    pthread_mutex_lock(&d->mu);
    d->writer_done = 1;
    pthread_cond_broadcast(&d->done_cond);
    pthread_mutex_unlock(&d->mu);
    return NULL;
}

static void dlog_free(bs_dlog *d) {
    if (d->path && d->fd >= 0) close(d->fd);
    for (size_t i = 0; i < d->n_models; i++) free(d->models[i]);
    free(d->models);
    free(d->path);
    pthread_mutex_destroy(&d->mu);
    pthread_cond_destroy(&d->cond);
    pthread_cond_destroy(&d->done_cond);
    free(d);
}

int bs_dlog_open(bs_dlog **out, const char *path, size_t n_models, int with_state, size_t queue_bytes, bs_err *e) {
    *out = NULL;
    bs_dlog *d = calloc(1, sizeof *d);
    if (!d) return bs_fail(e, BS_ENOMEM, "out of memory");
    pthread_mutex_init(&d->mu, NULL);
    pthread_cond_init(&d->cond, NULL);
    pthread_cond_init(&d->done_cond, NULL);
    d->fd = 1;
    d->with_state = with_state;
    d->queue_bytes = queue_bytes ? queue_bytes : BS_DLOG_QUEUE_BYTES;
    int rc = BS_OK;
    if (n_models && !(d->models = calloc(n_models, sizeof *d->models))) {
        rc = bs_fail(e, BS_ENOMEM, "out of memory");
        goto fail;
    }
    d->n_models = n_models;
    if (path && strcmp(path, "-")) {
        if (!(d->path = strdup(path))) {
            rc = bs_fail(e, BS_ENOMEM, "out of memory");
            goto fail;
        }
        d->fd = -1;
        int fd;
        if ((rc = open_append(path, &fd, e)) < 0) goto fail;
        if (rc == 1)
            bs_log(BS_LOG_WARN, "decision-log",
                   "%s is a FIFO no one reads yet: its lines wait (up to %zu MiB, then they are dropped and counted) "
                   "until a reader opens it", path, d->queue_bytes >> 20);
        else d->fd = fd;
        rc = BS_OK;
    }
    if (pthread_create(&d->writer, NULL, writer_main, d) != 0) {
        rc = bs_fail(e, BS_ENOMEM, "cannot start the decision log's writer thread");
        goto fail;
    }
    d->writer_started = 1;
    *out = d;
    return BS_OK;
fail:
    dlog_free(d);
    return rc;
}

int bs_dlog_set_model(bs_dlog *d, size_t i, const char *json_members, bs_err *e) {
    if (i >= d->n_models) return bs_fail(e, BS_EINTERNAL, "decision log: model %zu of %zu", i, d->n_models);
    char *m = strdup(json_members);
    if (!m) return bs_fail(e, BS_ENOMEM, "out of memory");
    pthread_mutex_lock(&d->mu);
    free(d->models[i]);
    d->models[i] = m;
    pthread_mutex_unlock(&d->mu);
    return BS_OK;
}

void bs_dlog_submit(bs_dlog *d, bs_dlog_entry *en) {
    item *it = malloc(sizeof *it);
    size_t bytes = entry_bytes(en);
    pthread_mutex_lock(&d->mu);
    if (!it || d->stop || d->queued + bytes > d->queue_bytes) {
        d->counts.dropped++;
        pthread_mutex_unlock(&d->mu);
        free(it);
        entry_free(en);
        return;
    }
    it->next = NULL;
    it->en = *en;
    bs_buf_init(&en->reply);
    bs_buf_init(&en->body);
    if (d->tail) d->tail->next = it;
    else d->head = it;
    d->tail = it;
    d->queued += bytes;
    pthread_cond_signal(&d->cond);
    pthread_mutex_unlock(&d->mu);
}

void bs_dlog_reopen(bs_dlog *d) {
    if (!d || !d->path) return;
    pthread_mutex_lock(&d->mu);
    d->reopen = 1;
    pthread_cond_signal(&d->cond);
    pthread_mutex_unlock(&d->mu);
}

int bs_dlog_is_file(const bs_dlog *d) { return d && d->path; }

void bs_dlog_get_counts(bs_dlog *d, bs_dlog_counts *c) {
    pthread_mutex_lock(&d->mu);
    *c = d->counts;
    pthread_mutex_unlock(&d->mu);
}

void bs_dlog_close(bs_dlog *d) {
    if (!d) return;
    pthread_mutex_lock(&d->mu);
    d->stop = 1;
    d->give_up_ms = bs_now_ms() + BS_DLOG_CLOSE_GRACE_MS;
    pthread_cond_signal(&d->cond);
    int done = !d->writer_started;
    /* the writer gives up by itself at give_up_ms, unless a blocking
     * write holds it (standard output is not ours to make non-blocking) */
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    ts.tv_sec += BS_DLOG_CLOSE_GRACE_MS / 1000 + 5;
    while (!done && !d->writer_done)
        if (pthread_cond_timedwait(&d->done_cond, &d->mu, &ts) == ETIMEDOUT) break;
    done = done || d->writer_done;
    pthread_mutex_unlock(&d->mu);
    if (!done) {
        bs_log(BS_LOG_WARN, "decision-log", "%s: the writer is blocked in a write (no one reads it?); exiting without it",
               d->path ? d->path : "stdout");
        g_abandoned = d; /* it still uses d */
        return;
    }
    if (d->writer_started) pthread_join(d->writer, NULL);
    dlog_free(d);
}
