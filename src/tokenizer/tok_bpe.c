/* The BPE model of tokenizer.json (spec 01 §4.5): hash maps for the vocabulary
 * and the merges, and the merge loop over one pre-token ("word").
 *
 * With a Metaspace pre-tokenizer and split false a whole Basal state is one
 * word, so the loop is a heap of candidate pairs ordered by (rank, position):
 * O(n log n), never the naive rescan. When the vocabulary allows it (chunk_ms)
 * the word is first cut at boundaries no token can cross, which gives the same
 * ids with small, cache-resident heaps. */
#include "tokenizer/tok_internal.h"

#include <stdlib.h>
#include <string.h>

#include "base/utf8.h"

/* ---------------- string -> id map ---------------- */

/* The encode output grows here: BPE words are its main producer. */
void tk_out_push(tk_out *o, int32_t id, int32_t s, int32_t e) {
    if (o->oom) return;
    if (o->n == o->cap) {
        size_t nc = o->cap ? o->cap * 2 : 256;
        int32_t *ids = realloc(o->ids, nc * sizeof *ids);
        if (ids) o->ids = ids;
        int32_t *offs = realloc(o->offs, 2 * nc * sizeof *offs);
        if (offs) o->offs = offs;
        if (!ids || !offs) { o->oom = 1; return; }
        o->cap = nc;
    }
    o->ids[o->n] = id;
    o->offs[2 * o->n] = s;
    o->offs[2 * o->n + 1] = e;
    o->n++;
}

static uint32_t tk_hash(const char *s, size_t len) {
    uint32_t h = 2166136261u; /* FNV-1a: short keys, no adversarial input at load */
    for (size_t i = 0; i < len; i++) h = (h ^ (uint8_t)s[i]) * 16777619u;
    return h;
}

int tk_strmap_init(tk_strmap *m, size_t expected) {
    memset(m, 0, sizeof *m);
    size_t cap = 16;
    while (cap < expected * 2) cap *= 2;
    m->slots = malloc(cap * sizeof *m->slots);
    if (!m->slots) return BS_ENOMEM;
    for (size_t i = 0; i < cap; i++) m->slots[i].len = UINT32_MAX;
    m->mask = cap - 1;
    return BS_OK;
}

void tk_strmap_free(tk_strmap *m) {
    free(m->slots);
    free(m->pool);
    memset(m, 0, sizeof *m);
}

static const tk_sent *strmap_find(const tk_strmap *m, const char *s, size_t len, uint32_t h) {
    if (!m->slots) return NULL;
    for (size_t i = h & m->mask;; i = (i + 1) & m->mask) {
        const tk_sent *en = &m->slots[i];
        if (en->len == UINT32_MAX) return NULL;
        if (en->hash == h && en->len == len && memcmp(m->pool + en->off, s, len) == 0) return en;
    }
}

static int strmap_grow(tk_strmap *m) {
    size_t cap = (m->mask + 1) * 2;
    tk_sent *ns = malloc(cap * sizeof *ns);
    if (!ns) return BS_ENOMEM;
    for (size_t i = 0; i < cap; i++) ns[i].len = UINT32_MAX;
    for (size_t i = 0; i <= m->mask; i++) {
        if (m->slots[i].len == UINT32_MAX) continue;
        size_t j = m->slots[i].hash & (cap - 1);
        while (ns[j].len != UINT32_MAX) j = (j + 1) & (cap - 1);
        ns[j] = m->slots[i];
    }
    free(m->slots);
    m->slots = ns;
    m->mask = cap - 1;
    return BS_OK;
}

int tk_strmap_put(tk_strmap *m, const char *s, size_t len, int32_t id, int *dup) {
    if (dup) *dup = 0;
    if (len >= UINT32_MAX || m->pool_len + len + 1 >= UINT32_MAX) return BS_ERANGE;
    uint32_t h = tk_hash(s, len);
    if (strmap_find(m, s, len, h)) {
        if (dup) *dup = 1;
        return BS_OK;
    }
    if ((m->count + 1) * 2 > m->mask + 1 && strmap_grow(m) != BS_OK) return BS_ENOMEM;
    if (m->pool_cap - m->pool_len < len + 1) {
        size_t nc = m->pool_cap ? m->pool_cap : 4096;
        while (nc - m->pool_len < len + 1) nc *= 2;
        char *np = realloc(m->pool, nc);
        if (!np) return BS_ENOMEM;
        m->pool = np;
        m->pool_cap = nc;
    }
    memcpy(m->pool + m->pool_len, s, len);
    m->pool[m->pool_len + len] = 0; /* pool entries are NUL-terminated for id_to_token */
    size_t i = h & m->mask;
    while (m->slots[i].len != UINT32_MAX) i = (i + 1) & m->mask;
    m->slots[i] = (tk_sent){ (uint32_t)m->pool_len, (uint32_t)len, h, id };
    m->pool_len += len + 1;
    m->count++;
    return BS_OK;
}

int32_t tk_strmap_get(const tk_strmap *m, const char *s, size_t len) {
    const tk_sent *en = strmap_find(m, s, len, tk_hash(s, len));
    return en ? en->id : -1;
}

int64_t tk_strmap_off(const tk_strmap *m, const char *s, size_t len) {
    const tk_sent *en = strmap_find(m, s, len, tk_hash(s, len));
    return en ? (int64_t)en->off : -1;
}

/* ---------------- merge map ---------------- */

static uint64_t mix64(uint64_t x) {
    x ^= x >> 33;
    x *= 0xff51afd7ed558ccdULL;
    x ^= x >> 33;
    return x;
}

int tk_mergemap_init(tk_mergemap *m, size_t expected) {
    memset(m, 0, sizeof *m);
    size_t cap = 16;
    while (cap < expected * 2) cap *= 2;
    m->slots = malloc(cap * sizeof *m->slots);
    if (!m->slots) return BS_ENOMEM;
    for (size_t i = 0; i < cap; i++) m->slots[i].rank = -1;
    m->mask = cap - 1;
    return BS_OK;
}

void tk_mergemap_free(tk_mergemap *m) {
    free(m->slots);
    memset(m, 0, sizeof *m);
}

/* The caller sized the map for every merge, so it never fills up. */
void tk_mergemap_put(tk_mergemap *m, int32_t a, int32_t b, int32_t rank, int32_t id) {
    uint64_t key = ((uint64_t)(uint32_t)a << 32) | (uint32_t)b;
    for (size_t i = mix64(key) & m->mask;; i = (i + 1) & m->mask) {
        tk_ment *en = &m->slots[i];
        if (en->rank < 0) {
            *en = (tk_ment){ key, rank, id };
            m->count++;
            return;
        }
        if (en->key == key) {
            en->rank = rank;
            en->id = id;
            return;
        }
    }
}

const tk_ment *tk_mergemap_get(const tk_mergemap *m, int32_t a, int32_t b) {
    uint64_t key = ((uint64_t)(uint32_t)a << 32) | (uint32_t)b;
    for (size_t i = mix64(key) & m->mask;; i = (i + 1) & m->mask) {
        const tk_ment *en = &m->slots[i];
        if (en->rank < 0) return NULL;
        if (en->key == key) return en;
    }
}

/* ---------------- the merge loop ---------------- */

/* A symbol covers normalized characters [cs, ce). Every byte-fallback piece
 * covers its whole character, as Hugging Face reports it: its byte range is
 * widened to the character's alignment before the conversion to characters
 * (tokenizers 0.23.2, the version basal-rs links; spec 01 §4.6 says otherwise). */
typedef struct {
    int32_t id;
    int32_t prev, next; /* -1 at the ends */
    int32_t cs, ce;
    int alive;
} tk_sym;

/* A candidate pair is one integer, rank in the high half and the position of
 * its left symbol in the low half: the smallest key is the lowest rank, then
 * the leftmost pair. The merged id is looked up again when the pair is taken. */
typedef uint64_t tk_cand;

struct tk_bpe_scratch {
    tk_sym *sym;
    size_t nsym, capsym;
    tk_cand *heap;
    size_t nheap, capheap;
    char *buf;
    size_t capbuf;
};

tk_bpe_scratch *tk_bpe_scratch_new(void) { return calloc(1, sizeof(tk_bpe_scratch)); }

void tk_bpe_scratch_free(tk_bpe_scratch *s) {
    if (!s) return;
    free(s->sym);
    free(s->heap);
    free(s->buf);
    free(s);
}

static int sym_push(tk_bpe_scratch *s, int32_t id, int32_t cs, int32_t ce) {
    if (s->nsym == s->capsym) {
        size_t nc = s->capsym ? s->capsym * 2 : 256;
        tk_sym *n = realloc(s->sym, nc * sizeof *n);
        if (!n) return BS_ENOMEM;
        s->sym = n;
        s->capsym = nc;
    }
    int32_t i = (int32_t)s->nsym++;
    s->sym[i] = (tk_sym){ id, i - 1, -1, cs, ce, 1 };
    if (i > 0) s->sym[i - 1].next = i;
    return BS_OK;
}

/* 4-ary min-heap: half the depth of a binary heap, and the four children of a
 * node share a cache line, which matters for a whole 64 KB state. */
static void heap_sift_down(tk_cand *h, size_t n, size_t i) {
    tk_cand x = h[i];
    for (;;) {
        size_t c = 4 * i + 1;
        if (c >= n) break;
        size_t m = c;
        size_t end = c + 4 < n ? c + 4 : n;
        for (size_t k = c + 1; k < end; k++)
            if (h[k] < h[m]) m = k;
        if (h[m] >= x) break;
        h[i] = h[m];
        i = m;
    }
    h[i] = x;
}

static int heap_push(tk_bpe_scratch *s, tk_cand c) {
    if (s->nheap == s->capheap) {
        size_t nc = s->capheap ? s->capheap * 2 : 256;
        tk_cand *n = realloc(s->heap, nc * sizeof *n);
        if (!n) return BS_ENOMEM;
        s->heap = n;
        s->capheap = nc;
    }
    size_t i = s->nheap++;
    while (i > 0) {
        size_t p = (i - 1) / 4;
        if (s->heap[p] <= c) break;
        s->heap[i] = s->heap[p];
        i = p;
    }
    s->heap[i] = c;
    return BS_OK;
}

static tk_cand heap_pop(tk_bpe_scratch *s) {
    tk_cand top = s->heap[0];
    s->heap[0] = s->heap[--s->nheap];
    if (s->nheap) heap_sift_down(s->heap, s->nheap, 0);
    return top;
}

static inline tk_cand cand(int32_t rank, int32_t pos) { return ((uint64_t)(uint32_t)rank << 32) | (uint32_t)pos; }

static int push_pair(const bs_tokenizer *t, tk_bpe_scratch *s, int32_t pos) {
    if (pos < 0) return BS_OK;
    int32_t nx = s->sym[pos].next;
    if (nx < 0) return BS_OK;
    const tk_ment *m = tk_mergemap_get(&t->merges, s->sym[pos].id, s->sym[nx].id);
    if (!m) return BS_OK;
    return heap_push(s, cand(m->rank, pos));
}

static int buf_need(tk_bpe_scratch *s, size_t n) {
    if (s->capbuf >= n) return BS_OK;
    size_t nc = s->capbuf ? s->capbuf : 64;
    while (nc < n) nc *= 2;
    char *b = realloc(s->buf, nc);
    if (!b) return BS_ENOMEM;
    s->buf = b;
    s->capbuf = nc;
    return BS_OK;
}

static void emit(const tk_nstr *w, tk_out *out, int32_t id, int32_t cs, int32_t ce) {
    int32_t os = w->os[cs];
    int32_t oe = ce > cs ? w->oe[ce - 1] : os;
    tk_out_push(out, id, os, oe);
}

/* BPE of w[a, b) as one unit. */
static int bpe_chunk(const bs_tokenizer *t, const tk_nstr *w, size_t a, size_t b,
                     tk_out *out, tk_bpe_scratch *s) {
    int rc;
    /* 1. one symbol per character (or per byte, or an unknown run) */
    s->nsym = 0;
    s->nheap = 0;
    int32_t unk_s = -1, unk_e = -1; /* pending unknown run */
    if ((rc = buf_need(s, t->nprefix + t->nsuffix + 4)) != BS_OK) return rc;
    for (size_t i = a; i < b; i++) {
        size_t len = 0;
        int first = i == a, last = i + 1 == b;
        int32_t id;
        if (!first && t->nprefix) { memcpy(s->buf, t->prefix, t->nprefix); len = t->nprefix; }
        len += bs_utf8_put(w->cp[i], s->buf + len);
        if (last && t->nsuffix) { memcpy(s->buf + len, t->suffix, t->nsuffix); len += t->nsuffix; }
        if (len == 1 && t->ascii_id) id = t->ascii_id[(uint8_t)s->buf[0]];
        else id = tk_strmap_get(&t->vocab, s->buf, len);
        if (id >= 0) {
            if (unk_s >= 0) {
                if ((rc = sym_push(s, t->unk_id, unk_s, unk_e)) != BS_OK) return rc;
                unk_s = -1;
            }
            if ((rc = sym_push(s, id, (int32_t)i, (int32_t)i + 1)) != BS_OK) return rc;
            continue;
        }
        int all_bytes = t->byte_fallback;
        for (size_t k = 0; all_bytes && k < len; k++)
            if (t->byte_id[(uint8_t)s->buf[k]] < 0) all_bytes = 0;
        if (all_bytes) {
            if (unk_s >= 0) {
                if ((rc = sym_push(s, t->unk_id, unk_s, unk_e)) != BS_OK) return rc;
                unk_s = -1;
            }
            for (size_t k = 0; k < len; k++) {
                rc = sym_push(s, t->byte_id[(uint8_t)s->buf[k]], (int32_t)i, (int32_t)i + 1);
                if (rc != BS_OK) return rc;
            }
            continue;
        }
        if (t->unk_id < 0) continue; /* no unk_token: the character is dropped */
        if (unk_s >= 0 && t->fuse_unk) {
            unk_e = (int32_t)i + 1;
        } else {
            if (unk_s >= 0 && (rc = sym_push(s, t->unk_id, unk_s, unk_e)) != BS_OK) return rc;
            unk_s = (int32_t)i;
            unk_e = (int32_t)i + 1;
        }
    }
    if (unk_s >= 0 && (rc = sym_push(s, t->unk_id, unk_s, unk_e)) != BS_OK) return rc;

    /* 2. merge the lowest-ranked adjacent pair, leftmost first, until none */
    if (s->nsym > 1 && s->capheap < s->nsym) {
        tk_cand *h = realloc(s->heap, s->nsym * sizeof *h);
        if (!h) return BS_ENOMEM;
        s->heap = h;
        s->capheap = s->nsym;
    }
    for (size_t i = 0; i + 1 < s->nsym; i++) { /* collected, then heapified in O(n) */
        const tk_ment *m = tk_mergemap_get(&t->merges, s->sym[i].id, s->sym[i + 1].id);
        if (m) s->heap[s->nheap++] = cand(m->rank, (int32_t)i);
    }
    for (size_t i = s->nheap / 4 + 1; i-- > 0;)
        if (i < s->nheap) heap_sift_down(s->heap, s->nheap, i);
    while (s->nheap) {
        tk_cand c = heap_pop(s);
        int32_t pos = (int32_t)(uint32_t)c, rank = (int32_t)(c >> 32);
        tk_sym *l = &s->sym[pos];
        if (!l->alive || l->next < 0) continue;
        /* stale entries: the pair at pos changed since it was queued */
        const tk_ment *m = tk_mergemap_get(&t->merges, l->id, s->sym[l->next].id);
        if (!m || m->rank != rank) continue;
        tk_sym *r = &s->sym[l->next];
        l->id = m->id;
        l->ce = r->ce;
        l->next = r->next;
        if (r->next >= 0) s->sym[r->next].prev = pos;
        r->alive = 0;
        if ((rc = push_pair(t, s, l->prev)) != BS_OK) return rc;
        if ((rc = push_pair(t, s, pos)) != BS_OK) return rc;
    }

    /* 3. emit */
    for (int32_t i = s->nsym ? 0 : -1; i >= 0; i = s->sym[i].next)
        emit(w, out, s->sym[i].id, s->sym[i].cs, s->sym[i].ce);
    return out->oom ? BS_ENOMEM : BS_OK;
}

int tk_bpe_word(const bs_tokenizer *t, const tk_nstr *w, size_t a, size_t b,
                tk_out *out, tk_bpe_scratch *s) {
    if (a >= b) return BS_OK;
    int rc;
    if (t->ignore_merges) {
        if ((rc = buf_need(s, (b - a) * 4)) != BS_OK) return rc;
        size_t len = 0;
        for (size_t i = a; i < b; i++) len += bs_utf8_put(w->cp[i], s->buf + len);
        int32_t id = tk_strmap_get(&t->vocab, s->buf, len);
        if (id >= 0) {
            emit(w, out, id, (int32_t)a, (int32_t)b);
            return BS_OK;
        }
    }
    if (!t->chunk_ms) return bpe_chunk(t, w, a, b, out, s);
    /* Exact shortcut (see chunk_ms): no merge ever joins the two sides of
       "x|\u2581", so the pieces are independent and each gets a small heap. */
    size_t start = a;
    for (size_t i = a + 1; i <= b; i++) {
        if (i < b && !(w->cp[i] == TK_METASPACE_CP && w->cp[i - 1] != TK_METASPACE_CP)) continue;
        if ((rc = bpe_chunk(t, w, start, i, out, s)) != BS_OK) return rc;
        start = i;
    }
    return BS_OK;
}
