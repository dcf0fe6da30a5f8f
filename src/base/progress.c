#include "base/progress.h"

#include <errno.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "base/log.h"

#define TTY_PERIOD_MS 100
#define DEFAULT_INTERVAL_MS 5000
#define BAR_WIDTH 24

struct bs_progress {
    char what[160];
    char unit[24];
    atomic_uint_fast64_t done, total;
    atomic_uint_fast64_t base;  /* of done: there before the work started (a resumed download) */
    int tty;
    long period_ms;          /* between two writes */
    struct timespec t0;
    pthread_t thread;
    pthread_mutex_t mu;
    pthread_cond_t cond;
    int stop;
    int written;             /* lines (or redraws) written so far */
    char note[128];          /* bs_progress_note, under mu */
};

static double since(const struct timespec *t0) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)(t.tv_sec - t0->tv_sec) + (double)(t.tv_nsec - t0->tv_nsec) / 1e9;
}

void bs_progress_timestamp(char *out, unsigned long cap) {
    struct timespec ts;
    struct tm tm;
    clock_gettime(CLOCK_REALTIME, &ts);
    gmtime_r(&ts.tv_sec, &tm);
    char base[24];
    strftime(base, sizeof base, "%Y-%m-%dT%H:%M:%S", &tm);
    snprintf(out, cap, "%s.%03ldZ", base, ts.tv_nsec / 1000000);
}

/* An amount in the unit: bytes as decimal kB/MB/GB, other units as integers. */
static void amount(const bs_progress *p, uint64_t v, char *out, size_t cap) {
    if (strcmp(p->unit, "B")) {
        snprintf(out, cap, "%llu", (unsigned long long)v);
        return;
    }
    static const char *const u[] = { "B", "kB", "MB", "GB", "TB" };
    double x = (double)v;
    int i = 0;
    while (x >= 1000 && i < 4) x /= 1000, i++;
    if (i == 0) snprintf(out, cap, "%llu B", (unsigned long long)v);
    else snprintf(out, cap, "%.1f %s", x, u[i]);
}

static void duration(double s, char *out, size_t cap) {
    if (s < 10) snprintf(out, cap, "%.1f s", s);
    else if (s < 60) snprintf(out, cap, "%.0f s", s);
    else if (s < 3600) snprintf(out, cap, "%d min %02d s", (int)s / 60, (int)s % 60);
    else snprintf(out, cap, "%d h %02d min", (int)s / 3600, (int)s % 3600 / 60);
}

/* "45% (1.4 GB of 3.2 GB), 12 s elapsed, about 15 s left" and the bar's
 * fraction; final: "done: 3.2 GB in 27 s". */
static double describe(const bs_progress *p, int final, char *out, size_t cap) {
    uint64_t done = atomic_load(&p->done), total = atomic_load(&p->total);
    if (total && done > total) done = total;
    double el = since(&p->t0), frac = total ? (double)done / (double)total : 0;
    char a[32], b[32], t[32], left[64];
    amount(p, done, a, sizeof a);
    amount(p, total, b, sizeof b);
    duration(el, t, sizeof t);
    const char *unit = strcmp(p->unit, "B") ? p->unit : "";
    uint64_t base = atomic_load(&p->base), fresh = done > base ? done - base : 0;
    if (final) {
        snprintf(out, cap, "done: %s%s%s in %s", a, *unit ? " " : "", unit, t);
    } else if (total) {
        char rate[40] = "";
        left[0] = 0;
        if (fresh > 0 && done < total) {
            char d[32];
            duration(el * (double)(total - done) / (double)fresh, d, sizeof d);
            snprintf(left, sizeof left, ", about %s left", d);
        }
        if (!*unit && fresh > 0 && el >= 0.5) { /* bytes: the rate of this run */
            char r[32];
            amount(p, (uint64_t)((double)fresh / el), r, sizeof r);
            snprintf(rate, sizeof rate, ", %s/s", r);
        }
        snprintf(out, cap, "%.0f%% (%s of %s%s%s%s), %s elapsed%s", frac * 100, a, b, *unit ? " " : "", unit, rate, t,
                 left);
    } else {
        snprintf(out, cap, "%s%s%s, %s elapsed", a, *unit ? " " : "", unit, t);
    }
    return frac;
}

static void draw(bs_progress *p, int final) {
    char text[256];
    double frac = describe(p, final, text, sizeof text);
    if (!final && p->note[0]) {
        size_t n = strlen(text);
        snprintf(text + n, sizeof text - n, "; %s", p->note);
    }
    if (p->tty) {
        char bar[BAR_WIDTH + 1];
        int fill = final ? BAR_WIDTH : (int)(frac * BAR_WIDTH);
        for (int i = 0; i < BAR_WIDTH; i++) bar[i] = i < fill ? '#' : '.';
        bar[BAR_WIDTH] = 0;
        if (atomic_load(&p->total) || final)
            fprintf(stderr, "\r\033[K%s [%s] %s%s", p->what, bar, text, final ? "\n" : "");
        else
            fprintf(stderr, "\r\033[K%s: %s%s", p->what, text, final ? "\n" : "");
    } else {
        char ts[32];
        bs_progress_timestamp(ts, sizeof ts);
        fprintf(stderr, "%s basal: %s: %s\n", ts, p->what, text);
    }
    fflush(stderr);
    p->written++;
}

static void *ticker(void *arg) {
    bs_progress *p = arg;
    pthread_mutex_lock(&p->mu);
    for (;;) {
        struct timespec until;
        clock_gettime(CLOCK_REALTIME, &until);
        until.tv_sec += p->period_ms / 1000;
        until.tv_nsec += (p->period_ms % 1000) * 1000000L;
        if (until.tv_nsec >= 1000000000L) until.tv_sec++, until.tv_nsec -= 1000000000L;
        int rc = 0;
        while (!p->stop && rc != ETIMEDOUT) rc = pthread_cond_timedwait(&p->cond, &p->mu, &until);
        if (p->stop) break;
        draw(p, 0);
    }
    pthread_mutex_unlock(&p->mu);
    return NULL;
}

/* Around a log line on stderr (base/log): the bar is erased before it and
 * drawn again after it. */
static void guard(void *ud, int after) {
    bs_progress *p = ud;
    if (!after) {
        pthread_mutex_lock(&p->mu);
        if (p->written) {
            fputs("\r\033[K", stderr);
            fflush(stderr);
        }
        return;
    }
    if (p->written && !p->stop) draw(p, 0);
    pthread_mutex_unlock(&p->mu);
}

bs_progress *bs_progress_start(const char *what, uint64_t total, const char *unit) {
    const char *mode = getenv("BASAL_PROGRESS");
    if (mode && !strcmp(mode, "off")) return NULL;
    bs_progress *p = calloc(1, sizeof *p);
    if (!p) return NULL;
    snprintf(p->what, sizeof p->what, "%s", what);
    snprintf(p->unit, sizeof p->unit, "%s", unit ? unit : "");
    atomic_init(&p->done, 0);
    atomic_init(&p->total, total);
    atomic_init(&p->base, 0);
    p->tty = isatty(STDERR_FILENO) && !(mode && !strcmp(mode, "lines"));
    p->period_ms = TTY_PERIOD_MS;
    if (!p->tty) {
        p->period_ms = bs_progress_interval_ms(DEFAULT_INTERVAL_MS);
    }
    clock_gettime(CLOCK_MONOTONIC, &p->t0);
    pthread_mutex_init(&p->mu, NULL);
    pthread_cond_init(&p->cond, NULL);
    if (pthread_create(&p->thread, NULL, ticker, p) != 0) {
        /* no ticker, no progress: the work itself goes on */
        pthread_cond_destroy(&p->cond);
        pthread_mutex_destroy(&p->mu);
        free(p);
        return NULL;
    }
    if (p->tty) bs_log_set_stderr_guard(guard, p);
    return p;
}

long bs_progress_interval_ms(long fallback) {
    const char *iv = getenv("BASAL_PROGRESS_INTERVAL_MS");
    long v = iv && *iv ? strtol(iv, NULL, 10) : 0;
    return v >= 10 ? v : fallback;
}

void bs_progress_set(bs_progress *p, uint64_t done) {
    if (p) atomic_store(&p->done, done);
}

void bs_progress_base(bs_progress *p, uint64_t base) {
    if (p) atomic_store(&p->base, base);
}

void bs_progress_add(bs_progress *p, uint64_t n) {
    if (p) atomic_fetch_add(&p->done, n);
}

void bs_progress_total(bs_progress *p, uint64_t total) {
    if (p) atomic_store(&p->total, total);
}

void bs_progress_printf(bs_progress *p, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    if (!p) {
        vfprintf(stderr, fmt, ap);
        fputc('\n', stderr);
        va_end(ap);
        return;
    }
    pthread_mutex_lock(&p->mu); /* the ticker draws under it */
    if (p->tty && p->written) fputs("\r\033[K", stderr);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    if (p->tty && p->written) draw(p, 0);
    else fflush(stderr);
    pthread_mutex_unlock(&p->mu);
    va_end(ap);
}

void bs_progress_note(bs_progress *p, const char *fmt, ...) {
    if (!p) return;
    va_list ap;
    va_start(ap, fmt);
    pthread_mutex_lock(&p->mu);
    vsnprintf(p->note, sizeof p->note, fmt, ap);
    pthread_mutex_unlock(&p->mu);
    va_end(ap);
}

void bs_progress_end(bs_progress *p) {
    if (!p) return;
    pthread_mutex_lock(&p->mu);
    p->stop = 1;
    pthread_cond_signal(&p->cond);
    pthread_mutex_unlock(&p->mu);
    pthread_join(p->thread, NULL);
    if (p->tty) bs_log_set_stderr_guard(NULL, p);
    /* short work that never showed anything leaves nothing behind */
    if (p->written) draw(p, 1);
    pthread_cond_destroy(&p->cond);
    pthread_mutex_destroy(&p->mu);
    free(p);
}
