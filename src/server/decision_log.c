#include "server/decision_log.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
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
    pthread_mutex_t mu;      /* the queue and the counts */
    pthread_cond_t cond;
    item *head, *tail;
    size_t queued;           /* bytes of the queued entries */
    int stop;
    bs_dlog_counts counts;
    pthread_mutex_t fd_mu;   /* the file: the writer's write, bs_dlog_reopen's swap */
    int fd;
    pthread_t writer;
    int writer_started;
};

static size_t entry_bytes(const bs_dlog_entry *en) { return sizeof(item) + en->reply.len + en->body.len; }

static void entry_free(bs_dlog_entry *en) {
    bs_buf_free(&en->reply);
    bs_buf_free(&en->body);
}

static int open_append(const char *path, bs_err *e) {
    int fd = open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0640);
    if (fd < 0)
        return bs_fail(e, BS_EIO, "decision log %s: %s (check the directory exists and is writable)", path,
                       strerror(errno));
    return fd;
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

/* The line of one entry (see the header), newline-terminated. */
static void compose(const bs_dlog *d, const bs_dlog_entry *en, bs_buf *b) {
    bj_value *reply = NULL, *body = NULL;
    bs_err e;
    if (bj_parse(en->reply.data ? en->reply.data : "", en->reply.len, NULL, &reply, &e) < 0) reply = NULL;
    if (d->with_state && bj_parse(en->body.data ? en->body.data : "", en->body.len, NULL, &body, &e) < 0) body = NULL;
    uint8_t dg[32];
    char hex[65];
    bs_sha256(en->body.data ? en->body.data : "", en->body.len, dg);
    bs_sha256_hex(dg, hex);
    bs_buf_puts(b, "{\"ts\":");
    put_time(b, en->ts_ms);
    bs_buf_puts(b, ",\"request_id\":");
    bj_put_string(b, en->request_id, strlen(en->request_id));
    bs_buf_printf(b, ",\"endpoint\":\"%s\"", en->basal_dialect ? "/v1/basal" : "/v1/systemone");
    if (en->model < d->n_models && d->models[en->model]) bs_buf_printf(b, ",%s", d->models[en->model]);
    bs_buf_printf(b, ",\"request_sha256\":\"%s\",\"latency_ms\":", hex);
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

/* Writes all n bytes; 0, or the errno of the failure (*partial: some were written). */
static int write_all(int fd, const char *p, size_t n, int *partial) {
    *partial = 0;
    while (n) {
        ssize_t w = write(fd, p, n);
        if (w < 0 && errno == EINTR) continue;
        if (w <= 0) return w < 0 ? errno : EIO;
        *partial = 1;
        p += w;
        n -= (size_t)w;
    }
    *partial = 0;
    return 0;
}

typedef struct writer_state {
    int failing;             /* the last write failed (logged once until one succeeds) */
    int torn;                /* a failed write left part of a line: end it before the next */
    uint64_t lost;           /* lines lost during the current failure */
} writer_state;

static void write_line(bs_dlog *d, writer_state *ws, const bs_buf *line) {
    pthread_mutex_lock(&d->fd_mu);
    int partial = 0, err = 0;
    if (ws->torn) err = write_all(d->fd, "\n", 1, &partial);
    if (!err) ws->torn = 0;
    if (!err) err = write_all(d->fd, line->data, line->len, &partial);
    pthread_mutex_unlock(&d->fd_mu);
    pthread_mutex_lock(&d->mu);
    if (err) d->counts.failed++;
    else d->counts.lines++;
    pthread_mutex_unlock(&d->mu);
    if (err) {
        if (partial) ws->torn = 1;
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
        while (!d->head && !d->stop) pthread_cond_wait(&d->cond, &d->mu);
        item *batch = d->head;
        d->head = d->tail = NULL;
        d->queued = 0;
        int stop = d->stop;
        pthread_mutex_unlock(&d->mu);
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
            entry_free(&it->en);
            free(it);
        }
        if (stop) break;
    }
    bs_buf_free(&line);
    return NULL;
}

static void dlog_free(bs_dlog *d) {
    if (d->path && d->fd >= 0) close(d->fd);
    for (size_t i = 0; i < d->n_models; i++) free(d->models[i]);
    free(d->models);
    free(d->path);
    pthread_mutex_destroy(&d->mu);
    pthread_mutex_destroy(&d->fd_mu);
    pthread_cond_destroy(&d->cond);
    free(d);
}

int bs_dlog_open(bs_dlog **out, const char *path, size_t n_models, int with_state, size_t queue_bytes, bs_err *e) {
    *out = NULL;
    bs_dlog *d = calloc(1, sizeof *d);
    if (!d) return bs_fail(e, BS_ENOMEM, "out of memory");
    pthread_mutex_init(&d->mu, NULL);
    pthread_mutex_init(&d->fd_mu, NULL);
    pthread_cond_init(&d->cond, NULL);
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
        if ((d->fd = open_append(path, e)) < 0) {
            rc = d->fd;
            goto fail;
        }
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

int bs_dlog_reopen(bs_dlog *d, bs_err *e) {
    if (!d || !d->path) return BS_OK;
    int fd = open_append(d->path, e);
    if (fd < 0) return fd; /* keep writing to the old file */
    pthread_mutex_lock(&d->fd_mu);
    int old = d->fd;
    d->fd = fd;
    pthread_mutex_unlock(&d->fd_mu);
    close(old);
    return BS_OK;
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
    pthread_cond_signal(&d->cond);
    pthread_mutex_unlock(&d->mu);
    if (d->writer_started) pthread_join(d->writer, NULL);
    dlog_free(d);
}
