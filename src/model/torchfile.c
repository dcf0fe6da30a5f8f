#include "model/torchfile.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "base/util.h"

/* ---- little-endian reads (bounds are checked by the callers) ---- */

static uint16_t rd16(const unsigned char *p) { return (uint16_t)(p[0] | p[1] << 8); }
static uint32_t rd32(const unsigned char *p) {
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}
static uint64_t rd64(const unsigned char *p) { return (uint64_t)rd32(p) | (uint64_t)rd32(p + 4) << 32; }

static uint32_t crc_table[256];
static pthread_once_t crc_once = PTHREAD_ONCE_INIT;

static void crc_init(void) {
    for (uint32_t i = 0; i < 256; i++) {
        uint32_t c = i;
        for (int k = 0; k < 8; k++) c = c & 1 ? 0xEDB88320u ^ (c >> 1) : c >> 1;
        crc_table[i] = c;
    }
}

static uint32_t crc32_of(const unsigned char *p, size_t n) {
    pthread_once(&crc_once, crc_init);
    const uint32_t *table = crc_table;
    uint32_t c = 0xFFFFFFFFu;
    for (size_t i = 0; i < n; i++) c = table[(c ^ p[i]) & 0xFF] ^ (c >> 8);
    return c ^ 0xFFFFFFFFu;
}

/* ---- the ZIP archive ---- */

typedef struct {
    char name[BS_PT_MAX_NAME + 1];
    size_t data_off, size;      /* stored bytes */
    size_t begin, end;          /* local header .. end of data descriptor, for the overlap check */
} zentry;

typedef struct {
    const unsigned char *d;
    size_t len;
    const char *fname;
    zentry *ent;
    size_t n;
    char top[BS_PT_MAX_NAME + 1]; /* the shared top folder, with its '/' */
} zip;

enum { EOCD_LEN = 22, Z64_LOC_LEN = 20, Z64_EOCD_LEN = 56, CEN_LEN = 46, LOC_LEN = 30 };

static int name_ok(const char *s, size_t n) {
    if (n == 0 || s[0] == '/' || s[n - 1] == '/') return 0;
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c < 0x20 || c == '\\' || c == 0x7F) return 0;
        if (c == '.' && (i == 0 || s[i - 1] == '/') && i + 1 < n && s[i + 1] == '.' && (i + 2 == n || s[i + 2] == '/'))
            return 0;
    }
    return 1;
}

static int cmp_begin(const void *a, const void *b) {
    const zentry *x = *(const zentry *const *)a, *y = *(const zentry *const *)b;
    return (x->begin > y->begin) - (x->begin < y->begin);
}

/* The central directory as the end records describe it. */
typedef struct {
    uint64_t n_disk, n_cd_disk, n_here, n_total, cd_size, cd_off;
    size_t cd_limit; /* the central directory ends before the end records */
} zdir;

/* The offset of the end-of-central-directory record: the last one whose
 * comment reaches exactly the end of the file. */
static int find_end_record(const zip *z, size_t *out, bs_err *e) {
    const unsigned char *d = z->d;
    size_t len = z->len, eocd = (size_t)-1;
    const char *fn = z->fname;
    if (len >= 2 && d[0] == 0x80)
        return bs_fail(e, BS_EFORMAT, "%s: a pickle, not a zip archive (the legacy torch.save format is not supported)", fn);
    if (len < 4 || rd32(d) != 0x04034b50u) return bs_fail(e, BS_EFORMAT, "%s: not a zip archive", fn);
    if (len < EOCD_LEN) return bs_fail(e, BS_EFORMAT, "%s: truncated zip archive", fn);
    size_t lowest = len - EOCD_LEN > 65535 ? len - EOCD_LEN - 65535 : 0;
    for (size_t p = len - EOCD_LEN + 1; p-- > lowest;)
        if (rd32(d + p) == 0x06054b50u && p + EOCD_LEN + rd16(d + p + 20) == len) { eocd = p; break; }
    if (eocd == (size_t)-1)
        return bs_fail(e, BS_EFORMAT, "%s: no zip end-of-central-directory record (truncated archive?)", fn);
    *out = eocd;
    return BS_OK;
}

/* The ZIP64 end record (its locator right before the end record at eocd):
 * its values replace the end record's 0xFFFF.. sentinels and must agree
 * with the rest. */
static int read_zip64_end(const zip *z, size_t eocd, zdir *dir, bs_err *e) {
    const unsigned char *d = z->d;
    const char *fn = z->fname;
    const unsigned char *l = d + eocd - Z64_LOC_LEN;
    uint64_t off64 = rd64(l + 8);
    if (rd32(l + 4) != 0 || rd32(l + 16) != 1)
        return bs_fail(e, BS_EFORMAT, "%s: multi-disk zip archives are not supported", fn);
    if (off64 > eocd - Z64_LOC_LEN || eocd - Z64_LOC_LEN - off64 < Z64_EOCD_LEN)
        return bs_fail(e, BS_EFORMAT, "%s: ZIP64 end record outside the file", fn);
    const unsigned char *r = d + off64;
    if (rd32(r) != 0x06064b50u || rd64(r + 4) + 12 != eocd - Z64_LOC_LEN - off64)
        return bs_fail(e, BS_EFORMAT, "%s: bad ZIP64 end-of-central-directory record", fn);
    uint64_t v[6] = {rd32(r + 16), rd32(r + 20), rd64(r + 24), rd64(r + 32), rd64(r + 40), rd64(r + 48)};
    uint64_t *mine[6] = {&dir->n_disk, &dir->n_cd_disk, &dir->n_here, &dir->n_total, &dir->cd_size, &dir->cd_off};
    uint64_t sentinel[6] = {0xFFFF, 0xFFFF, 0xFFFF, 0xFFFF, 0xFFFFFFFF, 0xFFFFFFFF};
    for (int i = 0; i < 6; i++) {
        if (*mine[i] == sentinel[i]) *mine[i] = v[i];
        else if (*mine[i] != v[i])
            return bs_fail(e, BS_EFORMAT, "%s: the ZIP64 end record disagrees with the end record", fn);
    }
    dir->cd_limit = (size_t)off64;
    return BS_OK;
}

/* The end records: one disk, 1..BS_PT_MAX_ENTRIES entries, and a central
 * directory that ends where the end records begin. */
static int read_end_records(const zip *z, zdir *dir, bs_err *e) {
    const unsigned char *d = z->d;
    const char *fn = z->fname;
    size_t eocd = 0;
    int rc = find_end_record(z, &eocd, e);
    if (rc != BS_OK) return rc;
    const unsigned char *q = d + eocd;
    *dir = (zdir){rd16(q + 4), rd16(q + 6), rd16(q + 8), rd16(q + 10), rd32(q + 12), rd32(q + 16), eocd};
    if (eocd >= Z64_LOC_LEN && rd32(d + eocd - Z64_LOC_LEN) == 0x07064b50u &&
        (rc = read_zip64_end(z, eocd, dir, e)) != BS_OK)
        return rc;
    if (dir->n_disk != 0 || dir->n_cd_disk != 0 || dir->n_here != dir->n_total)
        return bs_fail(e, BS_EFORMAT, "%s: multi-disk zip archives are not supported", fn);
    if (dir->n_total == 0) return bs_fail(e, BS_EFORMAT, "%s: empty zip archive", fn);
    if (dir->n_total > BS_PT_MAX_ENTRIES)
        return bs_fail(e, BS_EFORMAT, "%s: %llu zip entries (at most %d)", fn, (unsigned long long)dir->n_total,
                       BS_PT_MAX_ENTRIES);
    if (dir->cd_off > dir->cd_limit || dir->cd_size != dir->cd_limit - dir->cd_off)
        return bs_fail(e, BS_EFORMAT, "%s: central directory (offset %llu, %llu bytes) does not end at the end record",
                       fn, (unsigned long long)dir->cd_off, (unsigned long long)dir->cd_size);
    return BS_OK;
}

/* One central directory entry's fields */
typedef struct {
    uint16_t flags, method, nlen, elen, clen;
    uint32_t crc, csize, usize, loff;
    const char *name;
} cen_rec;

/* The local header of entry en (and its data descriptor, if flagged) must
 * agree with the central directory record c; the data must match its CRC. */
static int check_local_header(const zip *z, size_t cd_off, const cen_rec *c, zentry *en, bs_err *e) {
    const unsigned char *d = z->d;
    const char *fn = z->fname;
    if (c->loff > cd_off || cd_off - c->loff < LOC_LEN || rd32(d + c->loff) != 0x04034b50u)
        return bs_fail(e, BS_EFORMAT, "%s: %s: local header missing at offset %u", fn, en->name, c->loff);
    const unsigned char *l = d + c->loff;
    uint16_t lnlen = rd16(l + 26), lelen = rd16(l + 28);
    if (rd16(l + 6) != c->flags || rd16(l + 8) != c->method || lnlen != c->nlen ||
        (size_t)LOC_LEN + lnlen + lelen > cd_off - c->loff || memcmp(l + LOC_LEN, c->name, c->nlen) != 0)
        return bs_fail(e, BS_EFORMAT, "%s: %s: local header disagrees with the central directory", fn, en->name);
    uint32_t lcrc = rd32(l + 14), lcs = rd32(l + 18), lus = rd32(l + 22);
    int described = (c->flags & 0x0008) != 0;
    if (!(lcrc == c->crc && lcs == c->csize && lus == c->usize) && !(described && lcrc == 0 && lcs == 0 && lus == 0))
        return bs_fail(e, BS_EFORMAT, "%s: %s: local header sizes or CRC disagree with the central directory", fn,
                       en->name);
    en->begin = c->loff;
    en->data_off = (size_t)c->loff + LOC_LEN + lnlen + lelen;
    en->size = c->csize;
    if (en->size > cd_off - en->data_off)
        return bs_fail(e, BS_EFORMAT, "%s: %s: data (%zu bytes) runs past the end of the archive's data", fn,
                       en->name, en->size);
    en->end = en->data_off + en->size;
    if (described) { /* data descriptor: optional signature, CRC, sizes */
        const unsigned char *dd = d + en->end;
        size_t room = cd_off - en->end, sig = room >= 4 && rd32(dd) == 0x08074b50u ? 4 : 0;
        if (room < sig + 12 || rd32(dd + sig) != c->crc || rd32(dd + sig + 4) != c->csize ||
            rd32(dd + sig + 8) != c->usize)
            return bs_fail(e, BS_EFORMAT, "%s: %s: data descriptor disagrees with the central directory", fn,
                           en->name);
        en->end += sig + 12;
    }
    if (crc32_of(d + en->data_off, en->size) != c->crc)
        return bs_fail(e, BS_EFORMAT, "%s: %s: CRC-32 mismatch (corrupt data)", fn, en->name);
    return BS_OK;
}

/* Central directory entry i at *p: a stored, unencrypted, uniquely and
 * safely named entry whose local header agrees; *p moves past it. */
static int read_entry(zip *z, const zdir *dir, uint64_t i, size_t *p, bs_err *e) {
    const unsigned char *d = z->d;
    const char *fn = z->fname;
    size_t cd_limit = dir->cd_limit;
    zentry *en = &z->ent[z->n];
    if (cd_limit - *p < CEN_LEN || rd32(d + *p) != 0x02014b50u)
        return bs_fail(e, BS_EFORMAT, "%s: central directory entry %llu is malformed", fn, (unsigned long long)i);
    const unsigned char *c = d + *p;
    cen_rec r = {rd16(c + 8), rd16(c + 10), rd16(c + 28), rd16(c + 30), rd16(c + 32),
                 rd32(c + 16), rd32(c + 20), rd32(c + 24), rd32(c + 42), (const char *)c + CEN_LEN};
    if ((size_t)CEN_LEN + r.nlen + r.elen + r.clen > cd_limit - *p)
        return bs_fail(e, BS_EFORMAT, "%s: central directory entry %llu runs past the directory", fn,
                       (unsigned long long)i);
    if (r.nlen > BS_PT_MAX_NAME || !name_ok(r.name, r.nlen))
        return bs_fail(e, BS_EFORMAT, "%s: zip entry %llu has an unacceptable name", fn, (unsigned long long)i);
    memcpy(en->name, r.name, r.nlen);
    en->name[r.nlen] = 0;
    if (rd16(c + 34) != 0) return bs_fail(e, BS_EFORMAT, "%s: %s: multi-disk entry", fn, en->name);
    if (r.flags & ~(uint16_t)0x0808)
        return bs_fail(e, BS_EFORMAT, "%s: %s: zip flags 0x%04x (encryption or other features) not supported", fn,
                       en->name, r.flags);
    if (r.method != 0)
        return bs_fail(e, BS_EFORMAT, "%s: %s: compressed zip entry (method %u); only stored entries are read", fn,
                       en->name, r.method);
    if (r.csize == 0xFFFFFFFFu || r.usize == 0xFFFFFFFFu || r.loff == 0xFFFFFFFFu)
        return bs_fail(e, BS_EFORMAT, "%s: %s: ZIP64 entry sizes are not supported", fn, en->name);
    if (r.csize != r.usize)
        return bs_fail(e, BS_EFORMAT, "%s: %s: stored entry with sizes %u and %u", fn, en->name, r.csize, r.usize);
    for (size_t j = 0; j < z->n; j++)
        if (!strcmp(z->ent[j].name, en->name)) return bs_fail(e, BS_EFORMAT, "%s: duplicate zip entry %s", fn, en->name);
    int rc = check_local_header(z, (size_t)dir->cd_off, &r, en, e);
    if (rc != BS_OK) return rc;
    *p += (size_t)CEN_LEN + r.nlen + r.elen + r.clen;
    z->n++;
    return BS_OK;
}

/* No two entries (local header .. end of data) share a byte. */
static int check_no_overlap(const zip *z, bs_err *e) {
    zentry **by = malloc(z->n * sizeof *by);
    if (!by) return bs_fail(e, BS_ENOMEM, "%s: out of memory", z->fname);
    for (size_t i = 0; i < z->n; i++) by[i] = &z->ent[i];
    qsort(by, z->n, sizeof *by, cmp_begin);
    int overlap = 0;
    for (size_t i = 1; i < z->n; i++) overlap |= by[i]->begin < by[i - 1]->end;
    free(by);
    if (overlap) return bs_fail(e, BS_EFORMAT, "%s: zip entries overlap", z->fname);
    return BS_OK;
}

/* z->top: the one top folder every entry is inside */
static int find_top_folder(zip *z, bs_err *e) {
    const char *fn = z->fname;
    const char *slash = strchr(z->ent[0].name, '/');
    if (!slash) return bs_fail(e, BS_EFORMAT, "%s: zip entry %s is not inside a top folder", fn, z->ent[0].name);
    size_t tl = (size_t)(slash - z->ent[0].name) + 1;
    memcpy(z->top, z->ent[0].name, tl);
    z->top[tl] = 0;
    for (size_t i = 1; i < z->n; i++)
        if (strncmp(z->ent[i].name, z->top, tl))
            return bs_fail(e, BS_EFORMAT, "%s: zip entries %s and %s do not share one top folder", fn, z->ent[0].name,
                           z->ent[i].name);
    return BS_OK;
}

/* Finds the end record, reads the central directory and checks every entry
 * against its local header. */
static int zip_open(zip *z, bs_err *e) {
    zdir dir;
    int rc = read_end_records(z, &dir, e);
    if (rc != BS_OK) return rc;
    z->ent = calloc((size_t)dir.n_total, sizeof *z->ent);
    if (!z->ent) return bs_fail(e, BS_ENOMEM, "%s: out of memory", z->fname);
    size_t p = (size_t)dir.cd_off;
    for (uint64_t i = 0; i < dir.n_total; i++)
        if ((rc = read_entry(z, &dir, i, &p, e)) != BS_OK) return rc;
    if (p != dir.cd_limit) return bs_fail(e, BS_EFORMAT, "%s: bytes after the last central directory entry", z->fname);
    if ((rc = check_no_overlap(z, e)) != BS_OK) return rc;
    return find_top_folder(z, e);
}

/* The entry <top><rest>, or NULL. */
static const zentry *zip_find(const zip *z, const char *rest, size_t rest_len) {
    size_t tl = strlen(z->top);
    for (size_t i = 0; i < z->n; i++)
        if (strlen(z->ent[i].name) == tl + rest_len && !memcmp(z->ent[i].name + tl, rest, rest_len)) return &z->ent[i];
    return NULL;
}

/* ---- the pickle subset ---- */

enum { G_ORDERED_DICT, G_REBUILD_V2, G_FLOAT_ST, G_HALF_ST, G_BF16_ST };
static const char *const GLOBALS[] = {"collections\nOrderedDict", "torch._utils\n_rebuild_tensor_v2",
                                      "torch\nFloatStorage", "torch\nHalfStorage", "torch\nBFloat16Storage"};

typedef enum { PV_NONE, PV_BOOL, PV_INT, PV_FLOAT, PV_STR, PV_TUPLE, PV_LIST, PV_DICT, PV_GLOBAL, PV_STORAGE,
               PV_TENSOR } pv_kind;
static const char *const KIND_NAMES[] = {"None", "bool", "int", "float", "str", "tuple", "list", "dict",
                                         "global", "storage", "tensor"};

typedef struct pv pv;
struct pv {
    pv_kind kind;
    int64_t i;            /* int, bool; global id; storage dtype (global id); tensor offset */
    const char *s;        /* str (into the pickle); storage key */
    uint32_t slen;
    pv **items;           /* tuple/list elements; dict: key, value, key, value … */
    size_t n, cap;        /* elements (dict: pairs) */
    int64_t numel;        /* storage */
    pv *storage;          /* tensor */
    int ndim;             /* tensor */
    int64_t size[BS_PT_MAX_DIMS];
};

/* MAX_DICT keeps dict assignment (a linear search, as entries are few) from
 * becoming quadratic work on a hostile pickle. */
enum { MAX_STACK = 65536, MAX_MEMO = 65536, MAX_VALUES = 1 << 20, MAX_DICT = 4096 };

typedef struct {
    const unsigned char *p;
    size_t len, pos;
    const char *fname;
    pv **all;             /* every value made, for freeing */
    size_t n_all, cap_all;
    pv **stack;
    size_t sp;
    size_t *marks;
    size_t n_marks;
    pv **memo;
    size_t n_memo;
} vm;

static pv *pv_new(vm *m, pv_kind k) {
    if (m->n_all == MAX_VALUES) return NULL;
    if (m->n_all == m->cap_all) {
        size_t nc = m->cap_all ? m->cap_all * 2 : 256;
        pv **na = realloc(m->all, nc * sizeof *na);
        if (!na) return NULL;
        m->all = na;
        m->cap_all = nc;
    }
    pv *v = calloc(1, sizeof *v);
    if (!v) return NULL;
    v->kind = k;
    m->all[m->n_all++] = v;
    return v;
}

static int pv_append(pv *c, pv *x) {
    if (c->n == c->cap) {
        size_t nc = c->cap ? c->cap * 2 : 8;
        pv **ni = realloc(c->items, nc * sizeof *ni);
        if (!ni) return -1;
        c->items = ni;
        c->cap = nc;
    }
    c->items[c->n++] = x;
    return 0;
}

/* Python dict assignment: string and int keys only; an equal key is replaced. */
static int dict_set(vm *m, pv *d, pv *k, pv *v, bs_err *e) {
    if (k->kind != PV_STR && k->kind != PV_INT)
        return bs_fail(e, BS_EFORMAT, "%s: data.pkl: dict key of type %s", m->fname, KIND_NAMES[k->kind]);
    for (size_t i = 0; i < d->n; i++) {
        pv *o = d->items[2 * i];
        if (o->kind == k->kind && (k->kind == PV_INT ? o->i == k->i : o->slen == k->slen && !memcmp(o->s, k->s, k->slen))) {
            d->items[2 * i + 1] = v;
            return BS_OK;
        }
    }
    if (d->n == MAX_DICT) return bs_fail(e, BS_EFORMAT, "%s: data.pkl: dict with more than %d entries", m->fname, MAX_DICT);
    if (d->n * 2 + 2 > d->cap) {
        size_t nc = d->cap ? d->cap * 2 : 8;
        pv **ni = realloc(d->items, nc * sizeof *ni);
        if (!ni) return bs_fail(e, BS_ENOMEM, "%s: out of memory", m->fname);
        d->items = ni;
        d->cap = nc;
    }
    d->items[2 * d->n] = k;
    d->items[2 * d->n + 1] = v;
    d->n++;
    return BS_OK;
}

static int push(vm *m, pv *v, bs_err *e) {
    if (!v) return bs_fail(e, BS_ENOMEM, "%s: data.pkl: out of memory (or more than %d values)", m->fname, MAX_VALUES);
    if (m->sp == MAX_STACK) return bs_fail(e, BS_EFORMAT, "%s: data.pkl: stack deeper than %d", m->fname, MAX_STACK);
    m->stack[m->sp++] = v;
    return BS_OK;
}

static int pop(vm *m, pv **v, bs_err *e) {
    size_t floor = m->n_marks ? m->marks[m->n_marks - 1] : 0;
    if (m->sp <= floor) return bs_fail(e, BS_EFORMAT, "%s: data.pkl: stack underflow at byte %zu", m->fname, m->pos);
    *v = m->stack[--m->sp];
    return BS_OK;
}

static int need(vm *m, size_t n, bs_err *e) {
    if (m->len - m->pos < n) return bs_fail(e, BS_EFORMAT, "%s: data.pkl: truncated pickle", m->fname);
    return BS_OK;
}

static int memo_put(vm *m, size_t idx, bs_err *e) {
    if (m->sp == 0 || (m->n_marks && m->sp <= m->marks[m->n_marks - 1]))
        return bs_fail(e, BS_EFORMAT, "%s: data.pkl: memo put on an empty stack", m->fname);
    if (idx >= MAX_MEMO) return bs_fail(e, BS_EFORMAT, "%s: data.pkl: memo index %zu too large", m->fname, idx);
    if (idx >= m->n_memo) {
        pv **nm = realloc(m->memo, (idx + 1) * sizeof *nm);
        if (!nm) return bs_fail(e, BS_ENOMEM, "%s: out of memory", m->fname);
        for (size_t i = m->n_memo; i <= idx; i++) nm[i] = NULL;
        m->memo = nm;
        m->n_memo = idx + 1;
    }
    m->memo[idx] = m->stack[m->sp - 1];
    return BS_OK;
}

static int memo_get(vm *m, size_t idx, bs_err *e) {
    if (idx >= m->n_memo || !m->memo[idx])
        return bs_fail(e, BS_EFORMAT, "%s: data.pkl: memo index %zu was never stored", m->fname, idx);
    return push(m, m->memo[idx], e);
}

/* Pops everything above the last mark into a new tuple/list. */
static int pop_mark_into(vm *m, pv_kind k, bs_err *e) {
    if (!m->n_marks) return bs_fail(e, BS_EFORMAT, "%s: data.pkl: no mark on the stack", m->fname);
    size_t mk = m->marks[--m->n_marks];
    pv *t = pv_new(m, k);
    if (!t) return push(m, NULL, e);
    for (size_t i = mk; i < m->sp; i++)
        if (pv_append(t, m->stack[i]) < 0) return bs_fail(e, BS_ENOMEM, "%s: out of memory", m->fname);
    m->sp = mk;
    return push(m, t, e);
}

static int int_tuple(const pv *t, int64_t *out, int *n) {
    if (t->kind != PV_TUPLE || t->n > BS_PT_MAX_DIMS) return 0;
    for (size_t i = 0; i < t->n; i++) {
        if (t->items[i]->kind != PV_INT) return 0;
        out[i] = t->items[i]->i;
    }
    *n = (int)t->n;
    return 1;
}

/* REDUCE: OrderedDict() and _rebuild_tensor_v2(...) are the only calls. */
static int reduce(vm *m, pv *fn, pv *args, pv **out, bs_err *e) {
    const char *f = m->fname;
    if (fn->kind != PV_GLOBAL) return bs_fail(e, BS_EFORMAT, "%s: data.pkl: REDUCE on a %s", f, KIND_NAMES[fn->kind]);
    if (args->kind != PV_TUPLE) return bs_fail(e, BS_EFORMAT, "%s: data.pkl: REDUCE arguments are not a tuple", f);
    if (fn->i == G_ORDERED_DICT) {
        if (args->n) return bs_fail(e, BS_EFORMAT, "%s: data.pkl: OrderedDict called with arguments", f);
        return (*out = pv_new(m, PV_DICT)) ? BS_OK : bs_fail(e, BS_ENOMEM, "%s: out of memory", f);
    }
    if (fn->i != G_REBUILD_V2)
        return bs_fail(e, BS_EFORMAT, "%s: data.pkl: storage class called directly", f);
    if (args->n != 6 && args->n != 7)
        return bs_fail(e, BS_EFORMAT, "%s: data.pkl: _rebuild_tensor_v2 with %zu arguments", f, args->n);
    pv **a = args->items;
    int64_t stride[BS_PT_MAX_DIMS];
    int nst = 0;
    pv *t = pv_new(m, PV_TENSOR);
    if (!t) return bs_fail(e, BS_ENOMEM, "%s: out of memory", f);
    if (a[0]->kind != PV_STORAGE) return bs_fail(e, BS_EFORMAT, "%s: data.pkl: tensor without a storage", f);
    if (a[1]->kind != PV_INT || a[1]->i < 0) return bs_fail(e, BS_EFORMAT, "%s: data.pkl: bad storage offset", f);
    if (!int_tuple(a[2], t->size, &t->ndim)) return bs_fail(e, BS_EFORMAT, "%s: data.pkl: bad tensor size", f);
    if (!int_tuple(a[3], stride, &nst) || nst != t->ndim)
        return bs_fail(e, BS_EFORMAT, "%s: data.pkl: bad tensor stride", f);
    if (a[4]->kind != PV_BOOL) return bs_fail(e, BS_EFORMAT, "%s: data.pkl: requires_grad is not a bool", f);
    if (a[5]->kind != PV_DICT || a[5]->n) return bs_fail(e, BS_EFORMAT, "%s: data.pkl: tensor with backward hooks", f);
    if (args->n == 7 && !(a[6]->kind == PV_NONE || (a[6]->kind == PV_DICT && a[6]->n == 0)))
        return bs_fail(e, BS_EFORMAT, "%s: data.pkl: tensor with metadata", f);
    /* contiguous row-major (05 §14 E2), sizes >= 0, extent inside the storage */
    int64_t numel = 1, expect = 1;
    for (int d = t->ndim - 1; d >= 0; d--) {
        if (t->size[d] < 0 || t->size[d] > INT32_MAX) return bs_fail(e, BS_EFORMAT, "%s: data.pkl: tensor size %lld", f, (long long)t->size[d]);
        if (t->size[d] != 1 && stride[d] != expect)
            return bs_fail(e, BS_EFORMAT, "%s: data.pkl: tensor is not contiguous (stride %lld at dim %d, expected %lld)", f,
                           (long long)stride[d], d, (long long)expect);
        if (__builtin_mul_overflow(expect, t->size[d], &expect) || __builtin_mul_overflow(numel, t->size[d], &numel))
            return bs_fail(e, BS_EFORMAT, "%s: data.pkl: tensor size overflows", f);
    }
    int64_t end;
    if (__builtin_add_overflow(a[1]->i, numel, &end) || end > a[0]->numel)
        return bs_fail(e, BS_EFORMAT, "%s: data.pkl: tensor (offset %lld, %lld elements) runs past its storage of %lld",
                       f, (long long)a[1]->i, (long long)numel, (long long)a[0]->numel);
    t->storage = a[0];
    t->i = a[1]->i;
    t->numel = numel;
    *out = t;
    return BS_OK;
}

/* BINPERSID: ("storage", <storage class>, key, location, numel). */
static int persid(vm *m, pv *pid, pv **out, bs_err *e) {
    const char *f = m->fname;
    if (pid->kind != PV_TUPLE || pid->n != 5 || pid->items[0]->kind != PV_STR || pid->items[0]->slen != 7 ||
        memcmp(pid->items[0]->s, "storage", 7) || pid->items[1]->kind != PV_GLOBAL || pid->items[1]->i < G_FLOAT_ST ||
        pid->items[2]->kind != PV_STR || pid->items[3]->kind != PV_STR || pid->items[4]->kind != PV_INT)
        return bs_fail(e, BS_EFORMAT, "%s: data.pkl: persistent id is not a storage reference", f);
    pv *k = pid->items[2];
    if (k->slen == 0 || k->slen > 64 || memchr(k->s, '/', k->slen) || memchr(k->s, 0, k->slen))
        return bs_fail(e, BS_EFORMAT, "%s: data.pkl: bad storage key", f);
    if (pid->items[4]->i < 0 || pid->items[4]->i > ((int64_t)1 << 40))
        return bs_fail(e, BS_EFORMAT, "%s: data.pkl: storage of %lld elements", f, (long long)pid->items[4]->i);
    pv *s = pv_new(m, PV_STORAGE);
    if (!s) return bs_fail(e, BS_ENOMEM, "%s: out of memory", f);
    s->i = pid->items[1]->i;
    s->s = k->s;
    s->slen = k->slen;
    s->numel = pid->items[4]->i;
    *out = s;
    return BS_OK;
}

/* TUPLE1..TUPLE3: the top n values into a new tuple */
static int op_tuple_n(vm *m, int n, bs_err *e) {
    int rc;
    pv *t = pv_new(m, PV_TUPLE);
    if (!t) return push(m, NULL, e);
    pv *el[3];
    for (int i = n - 1; i >= 0; i--)
        if ((rc = pop(m, &el[i], e)) < 0) return rc;
    for (int i = 0; i < n; i++)
        if (pv_append(t, el[i]) < 0) return bs_fail(e, BS_ENOMEM, "%s: out of memory", m->fname);
    return push(m, t, e);
}

/* BINUNICODE: a 4-byte length, then the UTF-8 bytes (kept in the pickle) */
static int op_binunicode(vm *m, const unsigned char *a, bs_err *e) {
    int rc;
    pv *v;
    if ((rc = need(m, 4, e)) < 0) return rc;
    uint32_t n = rd32(a);
    m->pos += 4;
    if ((rc = need(m, n, e)) < 0) return rc;
    if ((v = pv_new(m, PV_STR))) { v->s = (const char *)m->p + m->pos; v->slen = n; }
    m->pos += n;
    return push(m, v, e);
}

/* BININT (4 bytes, signed), BININT1 (1), BININT2 (2) */
static int op_binint(vm *m, unsigned char op, const unsigned char *a, bs_err *e) {
    int rc;
    pv *v;
    size_t n = op == 'J' ? 4 : op == 'K' ? 1 : 2;
    if ((rc = need(m, n, e)) < 0) return rc;
    if ((v = pv_new(m, PV_INT))) v->i = op == 'J' ? (int64_t)(int32_t)rd32(a) : op == 'K' ? a[0] : rd16(a);
    m->pos += n;
    return push(m, v, e);
}

/* BINFLOAT: a big-endian double, its bits kept in i */
static int op_binfloat(vm *m, const unsigned char *a, bs_err *e) {
    int rc;
    pv *v;
    if ((rc = need(m, 8, e)) < 0) return rc;
    uint64_t u = 0;
    for (int i = 0; i < 8; i++) u = u << 8 | a[i];
    if ((v = pv_new(m, PV_FLOAT))) memcpy(&v->i, &u, 8);
    m->pos += 8;
    return push(m, v, e);
}

/* GLOBAL "module\nname\n": only the allowed names */
static int op_global(vm *m, const unsigned char *a, bs_err *e) {
    const char *f = m->fname;
    pv *v;
    const unsigned char *nl1 = memchr(a, '\n', m->len - m->pos);
    const unsigned char *nl2 = nl1 ? memchr(nl1 + 1, '\n', m->len - (size_t)(nl1 + 1 - m->p)) : NULL;
    if (!nl2 || nl2 - a > 200) return bs_fail(e, BS_EFORMAT, "%s: data.pkl: malformed GLOBAL", f);
    size_t gl = (size_t)(nl2 - a);
    int g = -1;
    for (int i = 0; i < (int)(sizeof GLOBALS / sizeof *GLOBALS); i++)
        if (strlen(GLOBALS[i]) == gl && !memcmp(GLOBALS[i], a, gl)) g = i;
    if (g < 0) {
        char name[201];
        memcpy(name, a, gl);
        name[gl] = 0;
        for (size_t i = 0; i < gl; i++)
            if (name[i] == '\n') name[i] = '.';
            else if ((unsigned char)name[i] < 0x20 || (unsigned char)name[i] >= 0x7F) name[i] = '?';
        return bs_fail(e, BS_EFORMAT, "%s: data.pkl: global %s is not allowed", f, name);
    }
    if ((v = pv_new(m, PV_GLOBAL))) v->i = g;
    m->pos += gl + 1;
    return push(m, v, e);
}

/* BUILD: an empty state on a tensor; the _metadata attribute of a state dict */
static int op_build(vm *m, bs_err *e) {
    int rc;
    pv *x, *y;
    if ((rc = pop(m, &x, e)) < 0 || (rc = pop(m, &y, e)) < 0) return rc;
    if (!(y->kind == PV_TENSOR && x->kind == PV_DICT && x->n == 0) && !(y->kind == PV_DICT && x->kind == PV_DICT))
        return bs_fail(e, BS_EFORMAT, "%s: data.pkl: BUILD of a %s with a %s state", m->fname, KIND_NAMES[y->kind],
                       KIND_NAMES[x->kind]);
    return push(m, y, e);
}

/* SETITEM: key and value into the dict below them */
static int op_setitem(vm *m, bs_err *e) {
    int rc;
    pv *x, *y;
    if ((rc = pop(m, &x, e)) < 0 || (rc = pop(m, &y, e)) < 0) return rc;
    if (m->sp == 0 || (m->n_marks && m->sp <= m->marks[m->n_marks - 1]) || m->stack[m->sp - 1]->kind != PV_DICT)
        return bs_fail(e, BS_EFORMAT, "%s: data.pkl: SETITEM without a dict", m->fname);
    return dict_set(m, m->stack[m->sp - 1], y, x, e);
}

/* SETITEMS: the key, value pairs above the last mark into the dict below it */
static int op_setitems(vm *m, bs_err *e) {
    if (!m->n_marks) return bs_fail(e, BS_EFORMAT, "%s: data.pkl: SETITEMS without a mark", m->fname);
    size_t mk = m->marks[--m->n_marks];
    if (mk == 0 || m->stack[mk - 1]->kind != PV_DICT || (m->sp - mk) % 2)
        return bs_fail(e, BS_EFORMAT, "%s: data.pkl: SETITEMS without a dict or with an odd count", m->fname);
    int rc = BS_OK;
    for (size_t i = mk; i < m->sp && rc == BS_OK; i += 2)
        rc = dict_set(m, m->stack[mk - 1], m->stack[i], m->stack[i + 1], e);
    m->sp = mk;
    return rc;
}

/* BINPUT/LONG_BINPUT (q, r) and BINGET/LONG_BINGET (h, j): a 1- or 4-byte memo index */
static int op_memo(vm *m, unsigned char op, const unsigned char *a, bs_err *e) {
    int rc;
    if (op == 'q' || op == 'h') {
        if ((rc = need(m, 1, e)) < 0) return rc;
        m->pos += 1;
        return op == 'q' ? memo_put(m, a[0], e) : memo_get(m, a[0], e);
    }
    if ((rc = need(m, 4, e)) < 0) return rc;
    m->pos += 4;
    return op == 'r' ? memo_put(m, rd32(a), e) : memo_get(m, rd32(a), e);
}

static int run_pickle(vm *m, pv **root, bs_err *e) {
    const char *f = m->fname;
    int rc;
    if (!(m->stack = malloc(MAX_STACK * sizeof *m->stack)) || !(m->marks = malloc(MAX_STACK * sizeof *m->marks)))
        return bs_fail(e, BS_ENOMEM, "%s: out of memory", f);
    if (m->len < 2 || m->p[0] != 0x80 || m->p[1] != 2)
        return bs_fail(e, BS_EFORMAT, "%s: data.pkl: not a protocol-2 pickle", f);
    m->pos = 2;
    for (;;) {
        if ((rc = need(m, 1, e)) < 0) return rc;
        size_t at = m->pos;
        unsigned char op = m->p[m->pos++];
        const unsigned char *a = m->p + m->pos;
        pv *v = NULL, *x = NULL, *y = NULL;
        switch (op) {
        case '.': /* STOP */
            if (m->pos != m->len) return bs_fail(e, BS_EFORMAT, "%s: data.pkl: bytes after STOP", f);
            if (m->n_marks || m->sp != 1) return bs_fail(e, BS_EFORMAT, "%s: data.pkl: stack not a single value at STOP", f);
            *root = m->stack[0];
            return BS_OK;
        case '}': rc = push(m, pv_new(m, PV_DICT), e); break;
        case ']': rc = push(m, pv_new(m, PV_LIST), e); break;
        case ')': rc = push(m, pv_new(m, PV_TUPLE), e); break;
        case 'N': rc = push(m, pv_new(m, PV_NONE), e); break;
        case 0x88: case 0x89:
            if ((v = pv_new(m, PV_BOOL))) v->i = op == 0x88;
            rc = push(m, v, e);
            break;
        case '(':
            if (m->n_marks == MAX_STACK) return bs_fail(e, BS_EFORMAT, "%s: data.pkl: too many marks", f);
            m->marks[m->n_marks++] = m->sp;
            rc = BS_OK;
            break;
        case 't': rc = pop_mark_into(m, PV_TUPLE, e); break;
        case 0x85: case 0x86: case 0x87: rc = op_tuple_n(m, op - 0x84, e); break;
        case 'X': rc = op_binunicode(m, a, e); break;
        case 'J': case 'K': case 'M': rc = op_binint(m, op, a, e); break;
        case 'G': rc = op_binfloat(m, a, e); break;
        case 'c': rc = op_global(m, a, e); break;
        case 'R':
            if ((rc = pop(m, &x, e)) < 0 || (rc = pop(m, &y, e)) < 0) return rc;
            if ((rc = reduce(m, y, x, &v, e)) < 0) return rc;
            rc = push(m, v, e);
            break;
        case 'b': rc = op_build(m, e); break;
        case 'Q':
            if ((rc = pop(m, &x, e)) < 0) return rc;
            if ((rc = persid(m, x, &v, e)) < 0) return rc;
            rc = push(m, v, e);
            break;
        case 's': rc = op_setitem(m, e); break;
        case 'u': rc = op_setitems(m, e); break;
        case 'q': case 'h': case 'r': case 'j': rc = op_memo(m, op, a, e); break;
        default:
            return bs_fail(e, BS_EFORMAT, "%s: data.pkl: unsupported pickle opcode 0x%02x at byte %zu", f, op, at);
        }
        if (rc < 0) return rc;
    }
}

/* ---- the root dict ---- */

static int convert_tensor(const zip *z, const char *fn, const pv *key, const pv *t, bs_pt_tensor *out, bs_err *e) {
    const pv *st = t->storage;
    char rest[80];
    int rl = snprintf(rest, sizeof rest, "data/%.*s", (int)st->slen, st->s);
    const zentry *en = zip_find(z, rest, (size_t)rl);
    if (!(out->name = malloc(key->slen + 1))) return bs_fail(e, BS_ENOMEM, "%s: out of memory", fn);
    memcpy(out->name, key->s, key->slen);
    out->name[key->slen] = 0;
    if (!en) return bs_fail(e, BS_EFORMAT, "%s: %s: storage entry %s%s missing", fn, out->name, z->top, rest);
    size_t es = st->i == G_FLOAT_ST ? 4 : 2;
    if ((uint64_t)st->numel * es != en->size)
        return bs_fail(e, BS_EFORMAT, "%s: %s: storage %s holds %zu bytes, its %lld elements need %llu", fn, out->name,
                       rest, en->size, (long long)st->numel, (unsigned long long)st->numel * es);
    out->ndim = t->ndim;
    memcpy(out->shape, t->size, sizeof out->shape);
    out->numel = t->numel;
    out->storage = st->i == G_FLOAT_ST ? "FloatStorage" : st->i == G_HALF_ST ? "HalfStorage" : "BFloat16Storage";
    if (!(out->data = malloc((size_t)(t->numel ? t->numel : 1) * sizeof *out->data)))
        return bs_fail(e, BS_ENOMEM, "%s: out of memory", fn);
    const unsigned char *src = z->d + en->data_off + (size_t)t->i * es;
    for (int64_t i = 0; i < t->numel; i++) {
        const unsigned char *p = src + (size_t)i * es;
        if (es == 4) {
            uint32_t u = rd32(p);
            memcpy(&out->data[i], &u, 4);
        } else {
            out->data[i] = st->i == G_HALF_ST ? bs_f16_to_f32(rd16(p)) : bs_bf16_to_f32(rd16(p));
        }
    }
    return BS_OK;
}

static int keyeq(const pv *k, const char *s) { return k->kind == PV_STR && k->slen == strlen(s) && !memcmp(k->s, s, k->slen); }

static int read_root(const zip *z, const char *fn, const pv *root, bs_pt_file *out, bs_err *e) {
    if (root->kind != PV_DICT) return bs_fail(e, BS_EFORMAT, "%s: data.pkl: the root is a %s, not a dict", fn, KIND_NAMES[root->kind]);
    out->int_keys = calloc(root->n ? root->n : 1, sizeof *out->int_keys);
    out->int_vals = calloc(root->n ? root->n : 1, sizeof *out->int_vals);
    if (!out->int_keys || !out->int_vals) return bs_fail(e, BS_ENOMEM, "%s: out of memory", fn);
    for (size_t i = 0; i < root->n; i++) {
        const pv *k = root->items[2 * i], *v = root->items[2 * i + 1];
        if (k->kind != PV_STR) continue;
        if (v->kind == PV_INT) {
            char *s = malloc(k->slen + 1);
            if (!s) return bs_fail(e, BS_ENOMEM, "%s: out of memory", fn);
            memcpy(s, k->s, k->slen);
            s[k->slen] = 0;
            out->int_keys[out->n_ints] = s;
            out->int_vals[out->n_ints++] = v->i;
        } else if (keyeq(k, "state_dict")) {
            if (v->kind != PV_DICT) return bs_fail(e, BS_EFORMAT, "%s: state_dict is a %s, not a dict", fn, KIND_NAMES[v->kind]);
            out->has_state_dict = 1;
            out->tensors = calloc(v->n ? v->n : 1, sizeof *out->tensors);
            if (!out->tensors) return bs_fail(e, BS_ENOMEM, "%s: out of memory", fn);
            for (size_t j = 0; j < v->n; j++) {
                const pv *tk = v->items[2 * j], *tv = v->items[2 * j + 1];
                if (tk->kind != PV_STR || tv->kind != PV_TENSOR)
                    return bs_fail(e, BS_EFORMAT, "%s: state_dict entry %zu is not a named tensor", fn, j);
                int rc = convert_tensor(z, fn, tk, tv, &out->tensors[out->n_tensors++], e);
                if (rc < 0) return rc;
            }
        }
    }
    return BS_OK;
}

int bs_pt_read_mem(const unsigned char *data, size_t len, const char *fname, bs_pt_file *out, bs_err *e) {
    memset(out, 0, sizeof *out);
    zip z = {.d = data, .len = len, .fname = fname};
    vm m = {.fname = fname};
    pv *root = NULL;
    int rc = zip_open(&z, e);
    if (rc == BS_OK) {
        const zentry *pk = zip_find(&z, "data.pkl", 8);
        if (!pk) rc = bs_fail(e, BS_EFORMAT, "%s: no data.pkl in the archive", fname);
        else if (pk->size > BS_PT_MAX_PICKLE_BYTES)
            rc = bs_fail(e, BS_EFORMAT, "%s: data.pkl of %zu bytes (at most %zu)", fname, pk->size, BS_PT_MAX_PICKLE_BYTES);
        else {
            m.p = data + pk->data_off;
            m.len = pk->size;
            rc = run_pickle(&m, &root, e);
        }
    }
    if (rc == BS_OK) rc = read_root(&z, fname, root, out, e);
    for (size_t i = 0; i < m.n_all; i++) {
        free(m.all[i]->items);
        free(m.all[i]);
    }
    free(m.all); free(m.stack); free(m.marks); free(m.memo);
    free(z.ent);
    if (rc < 0) bs_pt_free(out);
    return rc;
}

int bs_pt_read_file(const char *path, const char *fname, bs_pt_file *out, bs_err *e) {
    memset(out, 0, sizeof *out);
    struct stat st;
    if (stat(path, &st) != 0) return bs_fail(e, BS_EIO, "%s: cannot read %s", fname, path);
    if (!S_ISREG(st.st_mode)) return bs_fail(e, BS_EIO, "%s: %s is not a regular file", fname, path);
    if ((uint64_t)st.st_size > BS_PT_MAX_FILE_BYTES)
        return bs_fail(e, BS_EFORMAT, "%s: %lld bytes (at most %zu)", fname, (long long)st.st_size, BS_PT_MAX_FILE_BYTES);
    char *buf = NULL;
    size_t len = 0;
    int rc = bs_read_regular_file(path, &buf, &len, BS_MODEL_FILE_MAX, e);
    if (rc < 0) return rc;
    rc = bs_pt_read_mem((const unsigned char *)buf, len, fname, out, e);
    free(buf);
    return rc;
}

void bs_pt_free(bs_pt_file *f) {
    for (size_t i = 0; i < f->n_ints; i++) free(f->int_keys[i]);
    free(f->int_keys);
    free(f->int_vals);
    for (size_t i = 0; i < f->n_tensors; i++) {
        free(f->tensors[i].name);
        free(f->tensors[i].data);
    }
    free(f->tensors);
    memset(f, 0, sizeof *f);
}

int bs_pt_int(const bs_pt_file *f, const char *key, int64_t *v) {
    for (size_t i = 0; i < f->n_ints; i++)
        if (!strcmp(f->int_keys[i], key)) { *v = f->int_vals[i]; return 1; }
    return 0;
}

const bs_pt_tensor *bs_pt_tensor_get(const bs_pt_file *f, const char *name) {
    for (size_t i = 0; i < f->n_tensors; i++)
        if (!strcmp(f->tensors[i].name, name)) return &f->tensors[i];
    return NULL;
}
