/* The hang-up watcher: libmicrohttpd does not poll a suspended connection, so
 * a client that leaves while its request waits for the engine would go
 * unnoticed until the answer is ready. This thread polls those sockets for
 * the peer's FIN (EPOLLRDHUP) and reports them once.
 *
 * Entries are addressed by slot and generation, never by pointer: an event
 * collected by epoll_wait may be handled after its entry was removed (and the
 * context freed), and the generation check under the mutex makes that safe. */
#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "server/server_int.h"

typedef struct {
    void *ctx;
    int fd;
    uint32_t gen;
    int used;
} entry;

struct bs_watch {
    pthread_mutex_t mu;
    pthread_t thread;
    int ep, stop_fd, started;
    bs_watch_fn gone;
    entry *e;
    size_t n, cap;
    size_t *free_slots;
    size_t n_free;
};

#define STOP_TAG UINT64_MAX

static void *run(void *arg) {
    bs_watch *w = arg;
    struct epoll_event evs[64];
    for (;;) {
        int n = epoll_wait(w->ep, evs, 64, -1);
        if (n < 0) {
            if (errno == EINTR) continue;
            break;
        }
        for (int i = 0; i < n; i++) {
            if (evs[i].data.u64 == STOP_TAG) return NULL;
            size_t slot = (size_t)(evs[i].data.u64 & 0xffffffffu);
            uint32_t gen = (uint32_t)(evs[i].data.u64 >> 32);
            pthread_mutex_lock(&w->mu);
            if (slot < w->n && w->e[slot].used && w->e[slot].gen == gen) {
                entry *en = &w->e[slot];
                epoll_ctl(w->ep, EPOLL_CTL_DEL, en->fd, NULL);
                en->used = 0;
                w->free_slots[w->n_free++] = slot;
                w->gone(en->ctx);
            }
            pthread_mutex_unlock(&w->mu);
        }
    }
    return NULL;
}

bs_watch *bs_watch_create(bs_watch_fn gone, bs_err *e) {
    bs_watch *w = calloc(1, sizeof *w);
    if (!w) {
        bs_fail(e, BS_ENOMEM, "out of memory");
        return NULL;
    }
    pthread_mutex_init(&w->mu, NULL);
    w->gone = gone;
    w->ep = epoll_create1(EPOLL_CLOEXEC);
    w->stop_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    if (w->ep < 0 || w->stop_fd < 0) {
        bs_fail(e, BS_EIO, "hang-up watcher: %s", strerror(errno));
        goto fail;
    }
    struct epoll_event ev = { .events = EPOLLIN, .data.u64 = STOP_TAG };
    if (epoll_ctl(w->ep, EPOLL_CTL_ADD, w->stop_fd, &ev) < 0) {
        bs_fail(e, BS_EIO, "hang-up watcher: %s", strerror(errno));
        goto fail;
    }
    if (pthread_create(&w->thread, NULL, run, w)) {
        bs_fail(e, BS_EIO, "hang-up watcher: cannot start its thread");
        goto fail;
    }
    w->started = 1;
    return w;
fail:
    bs_watch_destroy(w);
    return NULL;
}

void bs_watch_destroy(bs_watch *w) {
    if (!w) return;
    if (w->started) {
        uint64_t one = 1;
        if (write(w->stop_fd, &one, sizeof one) != (ssize_t)sizeof one) { /* the thread then ends with the epoll fd */ }
        pthread_join(w->thread, NULL);
    }
    if (w->ep >= 0) close(w->ep);
    if (w->stop_fd >= 0) close(w->stop_fd);
    free(w->e);
    free(w->free_slots);
    pthread_mutex_destroy(&w->mu);
    free(w);
}

long bs_watch_add(bs_watch *w, int fd, void *ctx) {
    long rc;
    pthread_mutex_lock(&w->mu);
    size_t slot;
    if (w->n_free) {
        slot = w->free_slots[--w->n_free];
    } else {
        if (w->n == w->cap) {
            size_t nc = w->cap ? w->cap * 2 : 64;
            entry *ne = realloc(w->e, nc * sizeof *ne);
            if (!ne) { rc = BS_ENOMEM; goto out; }
            w->e = ne;
            size_t *nf = realloc(w->free_slots, nc * sizeof *nf);
            if (!nf) { rc = BS_ENOMEM; goto out; }
            w->free_slots = nf;
            w->cap = nc;
        }
        slot = w->n++;
        w->e[slot].gen = 0;
    }
    entry *en = &w->e[slot];
    en->gen = (en->gen + 1) & 0x7fffffffu; /* the id stays a non-negative long */
    struct epoll_event ev = { .events = EPOLLRDHUP, .data.u64 = ((uint64_t)en->gen << 32) | slot };
    if (epoll_ctl(w->ep, EPOLL_CTL_ADD, fd, &ev) < 0) {
        w->free_slots[w->n_free++] = slot;
        rc = BS_EIO;
        goto out;
    }
    en->ctx = ctx;
    en->fd = fd;
    en->used = 1;
    rc = (long)((uint64_t)en->gen << 32 | slot);
out:
    pthread_mutex_unlock(&w->mu);
    return rc;
}

void bs_watch_remove(bs_watch *w, long id) {
    if (id < 0) return;
    size_t slot = (size_t)((uint64_t)id & 0xffffffffu);
    uint32_t gen = (uint32_t)((uint64_t)id >> 32);
    pthread_mutex_lock(&w->mu);
    if (slot < w->n && w->e[slot].used && w->e[slot].gen == gen) {
        epoll_ctl(w->ep, EPOLL_CTL_DEL, w->e[slot].fd, NULL);
        w->e[slot].used = 0;
        w->free_slots[w->n_free++] = slot;
    }
    pthread_mutex_unlock(&w->mu);
}
