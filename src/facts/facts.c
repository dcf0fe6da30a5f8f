/* facts: "auto" (spec 03 §3.6–§3.7): the algorithm over the code points of the
 * state, with the patterns of facts_re and the numbers of facts_num. Every
 * step follows upstream's order of evaluation, so the first Python exception
 * recorded (facts_num's sticky error) is the one upstream raises. */
#include "facts/facts.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "basal.h"
#include "facts/facts_num.h"
#include "facts/facts_re.h"
#include "base/utf8.h"

enum {
    P_DATE_TXT, P_DATE_NUM, P_DATE_ISO, P_DURATION, P_DUR_WORD, P_AGO, P_TODAY, P_AMOUNT, P_VAT, P_VAT_CTX,
    P_STATED, P_EURO, P_RATE_ANY, P_RATE_PER, P_RATE_EQ, P_EURO_X_RATE, P_KURS, P_BOUND, P_LABEL, P_BUDGET,
    P_USED, P_PRODUCT, P_TIER, P_QTY, P_FEE, P_COUNT
};

#define MONTHS_ALT "stycznia|lutego|marca|kwietnia|maja|czerwca|lipca|sierpnia|września|października|listopada|grudnia"
#define SP "[ \\u00a0]"
#define EUR_WORD "(?:euro\\b|EUR\\b|€)"

/* 03 §3.4, in Python `re` syntax */
static const char *const PATTERNS[P_COUNT] = {
    [P_DATE_TXT] = "\\b(\\d{1,2}) (" MONTHS_ALT ") (\\d{4})(?: r\\.)?",
    [P_DATE_NUM] = "\\b(\\d{1,2})\\.(\\d{1,2})\\.(\\d{4})\\b",
    [P_DATE_ISO] = "\\b(\\d{4})-(\\d{2})-(\\d{2})\\b",
    [P_DURATION] = "\\b(\\d{1,3}) (dni|dnia|dzień|tygodni|tygodnie|tydzień|miesięcy|miesiące|miesiąc|lat|lata|rok)\\b",
    [P_DUR_WORD] = "\\b(tydzień|tygodnia|miesiąc|miesiąca|rok|roku)\\b",
    [P_AGO] = "\\b(\\d{1,3}) (dni|dzień) temu\\b",
    [P_TODAY] = "\\b(?:[Dd]ziś|[Dd]zisiaj)(?: jest| mamy|:)? ",
    [P_AMOUNT] = "(?<![\\d,])\\b(\\d{1,3}(?: \\d{3})+(?:,\\d{2})?|\\d+(?:,\\d{2})?) zł\\b",
    [P_VAT] = "(?<![\\d,.])\\b(23|8|5) ?%",
    [P_VAT_CTX] = "\\bVAT\\b|\\bpodat\\w* od towarów",
    [P_STATED] = "(?<![\\d,])\\b(\\d{1,3}(?:" SP "\\d{3})+(?:,\\d{2})?|\\d+(?:,\\d{2})?)" SP "?(?:zł|PLN)\\b",
    [P_EURO] = "(?<![\\d,])\\b(\\d{1,3}(?:" SP "\\d{3})*(?:,\\d{1,2})?)" SP "?" EUR_WORD,
    [P_RATE_ANY] = "(?<![\\d,])\\b(\\d{1,2},\\d{2,4})" SP "?(?:zł|PLN)\\b",
    [P_RATE_PER] = "(?<![\\d,])\\b(\\d{1,2},\\d{2,4})" SP "?(?:zł|PLN)\\b" SP "?(?:za|/)" SP "?(?:1" SP ")?" EUR_WORD,
    [P_RATE_EQ] = "\\b1" SP "?" EUR_WORD SP "?=" SP "?(\\d{1,2},\\d{2,4})" SP "?(?:zł|PLN)\\b",
    [P_EURO_X_RATE] = "(?<![\\d,])\\b(\\d{1,3}(?:" SP "\\d{3})*(?:,\\d{1,2})?)" SP "?" EUR_WORD SP "?[×*]" SP
                      "?(\\d{1,2},\\d{2,4})" SP "?(?:zł|PLN)\\b",
    [P_KURS] = "\\b[Kk]urs\\w*",
    [P_BOUND] = "[.;!?](?=\\s+[A-ZĄĆĘŁŃÓŚŹŻ„\"(])|\\n",
    [P_LABEL] = SP "?\\(?(netto|brutto)\\b",
    [P_BUDGET] = "\\b[Bb]udżet\\w*",
    [P_USED] = "\\b(wykorzystano|wydano|wydatkowano|zużyto|zaangażowano|rozdysponowano)\\b",
    [P_PRODUCT] = "(?<![\\d,])(?<!\\d" SP ")\\b(\\d{1,4})" SP "?(?:(?:szt\\.|sztuk[ia]?|usł\\.|godz\\.|kg|op\\.|"
                  "opak\\.|kpl\\.|os\\.)" SP "?)?×" SP "?(?=\\d)",
    [P_TIER] = "(?<![\\d,])\\b(\\d{1,3}(?:" SP "\\d{3})*(?:,\\d{2})?) zł(?: netto| brutto)?(?: za (?:sztukę|szt\\.))?"
               "(?: przy (?:zamówieniu|zakupie))? (poniżej|do|od|powyżej|co najmniej|min\\.) (\\d{1,5})"
               "(?: do (\\d{1,5})|" SP "?[–-]" SP "?(\\d{1,5}))? (?:szt\\.|sztuk)",
    [P_QTY] = "(?<![\\d,])(?<!\\d" SP ")\\b(\\d{1,5})" SP "(?:szt\\.|sztuk[ia]?\\b)",
    [P_FEE] = "\\b(?:[Dd]ostawa|[Ww]ysyłka|[Tt]ransport|[Pp]rzesyłka|[Kk]oszty? (?:dostawy|wysyłki|transportu|"
              "przesyłki))\\b",
};

static const char *const MONTHS[12] = {"stycznia", "lutego", "marca", "kwietnia", "maja", "czerwca",
                                       "lipca", "sierpnia", "września", "października", "listopada", "grudnia"};
static const char *const WEEKDAYS[7] = {"poniedziałek", "wtorek", "środa", "czwartek", "piątek", "sobota",
                                        "niedziela"};
enum { MAX_DATES = 6, MAX_DURATIONS = 3, MAX_AMOUNTS = 3, MAX_TOTAL = 12, MAX_COMPARE = 6, MAX_PLAIN = 3,
       MAX_EURO = 3 };
#define MAXG 5 /* TIER has the most groups */

static fx_re *g_re[P_COUNT];
static int g_re_ok;
static pthread_once_t g_once = PTHREAD_ONCE_INIT;

static void compile_all(void) {
    g_re_ok = 1;
    for (int i = 0; i < P_COUNT; i++)
        if (!(g_re[i] = fx_re_compile(PATTERNS[i]))) g_re_ok = 0;
}

/* ---- matches ------------------------------------------------------------- */

typedef struct {
    size_t g[2 * (MAXG + 1)];
} fx_m;

#define VPUSH(env, arr, n, cap, item) do { \
    if ((n) == (cap)) { \
        size_t nc_ = (cap) ? 2 * (cap) : 8; \
        void *p_ = fx_alloc((env), nc_ * sizeof *(arr)); \
        if (!p_) break; \
        if (n) memcpy(p_, (arr), (n) * sizeof *(arr)); \
        (arr) = p_; \
        (cap) = nc_; \
    } \
    (arr)[(n)++] = (item); \
} while (0)

typedef struct {
    fx_m *m;
    size_t n, cap;
} mlist;

/* A text: the state or a window of it, searched as a string of its own. */
typedef struct {
    const uint32_t *t;
    size_t n;
} text;

static int search_at(fx_env *v, int p, text x, size_t from, fx_m *m) {
    int r = fx_re_search(g_re[p], x.t, x.n, from, m->g);
    if (r < 0) v->oom = 1;
    return r == 1;
}

/* pattern.finditer(text): continues at each match end (no pattern matches empty) */
static mlist finditer(fx_env *v, int p, text x) {
    mlist l = {0};
    fx_m m;
    size_t pos = 0;
    while (pos <= x.n && search_at(v, p, x, pos, &m)) {
        VPUSH(v, l.m, l.n, l.cap, m);
        pos = m.g[1] > m.g[0] ? m.g[1] : m.g[0] + 1;
    }
    return l;
}

static size_t gstart(const fx_m *m, int g) { return m->g[2 * g]; }
static size_t gend(const fx_m *m, int g) { return m->g[2 * g + 1]; }
static int has_group(const fx_m *m, int g) { return m->g[2 * g] != FX_NOPOS; }

/* int() of a group (at most 5 digits here) */
static long long py_int(text x, const fx_m *m, int g) {
    long long r = 0;
    for (size_t i = gstart(m, g); i < gend(m, g); i++) r = r * 10 + fx_digit_value(x.t[i]);
    return r;
}

static fx_dec dec_of(fx_env *v, text x, const fx_m *m, int g) {
    return fx_dec_parse(v, x.t + gstart(m, g), gend(m, g) - gstart(m, g));
}

/* The code points t[0..n) equal the UTF-8 string s (a valid constant). */
static int cps_eq(const uint32_t *t, size_t n, const char *s) {
    const unsigned char *u = (const unsigned char *)s;
    size_t i = 0;
    while (*u) {
        uint32_t c;
        int k;
        if (*u < 0x80) { c = *u; k = 0; }
        else if (*u < 0xE0) { c = *u & 0x1F; k = 1; }
        else if (*u < 0xF0) { c = *u & 0x0F; k = 2; }
        else { c = *u & 0x07; k = 3; }
        u++;
        while (k--) c = (c << 6) | (*u++ & 0x3F);
        if (i >= n || t[i] != c) return 0;
        i++;
    }
    return i == n;
}

static size_t cps_len(const char *s) {
    size_t n = 0;
    for (const unsigned char *u = (const unsigned char *)s; *u; u++) n += (*u & 0xC0) != 0x80;
    return n;
}

/* The group's code points equal the UTF-8 string s. */
static int group_is(text x, const fx_m *m, int g, const char *s) {
    return cps_eq(x.t + gstart(m, g), gend(m, g) - gstart(m, g), s);
}

static void put_cps(bs_buf *b, const uint32_t *t, size_t n) {
    char u[4];
    for (size_t i = 0; i < n; i++) bs_buf_put(b, u, bs_utf8_put(t[i], u));
}

/* text[0:pos] ends with the UTF-8 string s */
static int ends_with(text x, size_t pos, const char *s) {
    size_t n = cps_len(s);
    return pos >= n && cps_eq(x.t + pos - n, n, s);
}

/* ---- the run -------------------------------------------------------------- */

typedef struct {
    fx_env *v;
    text x;
    size_t *bounds;
    size_t nb;
    char **lines;
    size_t nl, capl;
} run;

static void add_line(run *r, bs_buf *b) {
    if (b->oom) r->v->oom = 1;
    char *s = fx_alloc(r->v, b->len + 1);
    if (s) {
        memcpy(s, b->data ? b->data : "", b->len);
        s[b->len] = 0;
        VPUSH(r->v, r->lines, r->nl, r->capl, s);
    }
    bs_buf_free(b);
    bs_buf_init(b);
}

/* sent(pos): the number of bounds before pos */
static size_t sent(const run *r, size_t pos) {
    size_t lo = 0, hi = r->nb;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (r->bounds[mid] < pos) lo = mid + 1;
        else hi = mid;
    }
    return lo;
}

/* length of cut(a, n): the window text[a:a+n] up to its first BOUND match */
static size_t cut_len(run *r, size_t a, size_t n) {
    size_t wl = r->x.n - a < n ? r->x.n - a : n;
    text w = {r->x.t + a, wl};
    fx_m m;
    return search_at(r->v, P_BOUND, w, 0, &m) ? gstart(&m, 0) : wl;
}

static void put_date(bs_buf *b, fx_date d) { bs_buf_printf(b, "%d %s %d r.", d.d, MONTHS[d.m - 1], d.y); }

typedef struct {
    size_t pos;
    fx_date d;
} dated;

static int dated_cmp(const void *a, const void *b) {
    const dated *x = a, *y = b;
    if (x->pos != y->pos) return x->pos < y->pos ? -1 : 1;
    int64_t ox = fx_date_ordinal(x->d), oy = fx_date_ordinal(y->d);
    return (ox > oy) - (ox < oy);
}

/* The valid dates of a text in order of first appearance, deduplicated. */
static size_t find_dates(fx_env *v, text x, fx_date **out) {
    static const int pats[3] = {P_DATE_TXT, P_DATE_NUM, P_DATE_ISO};
    dated *rec = NULL;
    size_t nr = 0, cr = 0;
    for (int k = 0; k < 3; k++) {
        mlist l = finditer(v, pats[k], x);
        for (size_t i = 0; i < l.n; i++) {
            const fx_m *m = &l.m[i];
            long long y, mo = 0, d;
            if (k == 0) {
                for (int j = 0; j < 12; j++)
                    if (group_is(x, m, 2, MONTHS[j])) mo = j + 1;
                y = py_int(x, m, 3);
                d = py_int(x, m, 1);
            } else if (k == 1) {
                y = py_int(x, m, 3);
                mo = py_int(x, m, 2);
                d = py_int(x, m, 1);
            } else {
                y = py_int(x, m, 1);
                mo = py_int(x, m, 2);
                d = py_int(x, m, 3);
            }
            fx_date date;
            const char *msg;
            if (fx_date_make(y, mo, d, &date, &msg)) {
                dated dd = {gstart(m, 0), date};
                VPUSH(v, rec, nr, cr, dd);
            }
        }
    }
    if (nr) qsort(rec, nr, sizeof *rec, dated_cmp);
    fx_date *ds = fx_alloc(v, (nr ? nr : 1) * sizeof *ds);
    size_t n = 0;
    /* callers use the first MAX_DATES distinct dates only */
    for (size_t i = 0; ds && i < nr && n < MAX_DATES; i++) {
        int seen = 0;
        for (size_t j = 0; j < n && !seen; j++) seen = fx_date_eq(ds[j], rec[i].d);
        if (!seen) ds[n++] = rec[i].d;
    }
    *out = ds;
    return ds ? n : 0;
}

/* ---- VAT and exchange rates ------------------------------------------------ */

/* The VAT rates with a VAT context in their sentence, as a bit set (1: 23, 2: 8, 4: 5). */
static int vat_rates(run *r) {
    int set = 0, last_ctx = 0;
    size_t last_k = (size_t)-1; /* matches come in text order: one VAT_CTX search per sentence */
    mlist l = finditer(r->v, P_VAT, r->x);
    for (size_t i = 0; i < l.n; i++) {
        size_t s = gstart(&l.m[i], 0), k = sent(r, s);
        if (k == last_k) {
            if (last_ctx) {
                long long v = py_int(r->x, &l.m[i], 1);
                set |= v == 23 ? 1 : v == 8 ? 2 : 4;
            }
            continue;
        }
        size_t lo = k > 0 ? r->bounds[k - 1] + 1 : 0, hi = k < r->nb ? r->bounds[k] : r->x.n;
        /* VAT_CTX.search(text, lo, hi): the characters around the slice are
         * bounds (not word characters), so the slice as a string is the same */
        text w = {r->x.t + lo, hi - lo};
        fx_m m;
        last_k = k;
        last_ctx = search_at(r->v, P_VAT_CTX, w, 0, &m);
        if (last_ctx) {
            long long v = py_int(r->x, &l.m[i], 1);
            set |= v == 23 ? 1 : v == 8 ? 2 : 4;
        }
    }
    return set;
}

static int rate_count(int set) { return !!(set & 1) + !!(set & 2) + !!(set & 4); }

/* The VAT factor of one rate: 1 + r/100 and its text with a decimal comma. */
static fx_dec vat_factor(fx_env *v, int bit, const char **txt) {
    static const uint32_t k23[] = {'1', '.', '2', '3'}, k8[] = {'1', '.', '0', '8'}, k5[] = {'1', '.', '0', '5'};
    *txt = bit == 1 ? "1,23" : bit == 2 ? "1,08" : "1,05";
    return fx_dec_parse(v, bit == 1 ? k23 : bit == 2 ? k8 : k5, 4);
}

typedef struct {
    size_t pos; /* start of the rate text */
    size_t len;
    fx_dec val;
} rate;

typedef struct {
    size_t euro_pos; /* start of EURO_X_RATE's g1 */
    rate r;
} explicit_rate;

static void find_rates(run *r, rate **rates_out, size_t *nrates, explicit_rate **ex_out, size_t *nex) {
    fx_env *v = r->v;
    rate *rs = NULL;
    size_t n = 0, cap = 0;
    explicit_rate *ex = NULL;
    size_t ne = 0, ce = 0;
    mlist kurs = finditer(v, P_KURS, r->x);
    for (size_t i = 0; i < kurs.n; i++) {
        size_t a = gend(&kurs.m[i], 0);
        text w = {r->x.t + a, cut_len(r, a, 160)};
        mlist l = finditer(v, P_RATE_ANY, w);
        for (size_t j = 0; j < l.n; j++) {
            rate x = {a + gstart(&l.m[j], 1), gend(&l.m[j], 1) - gstart(&l.m[j], 1), dec_of(v, w, &l.m[j], 1)};
            VPUSH(v, rs, n, cap, x);
        }
    }
    static const int per_eq[2] = {P_RATE_PER, P_RATE_EQ};
    for (int k = 0; k < 2; k++) {
        mlist l = finditer(v, per_eq[k], r->x);
        for (size_t j = 0; j < l.n; j++) {
            rate x = {gstart(&l.m[j], 1), gend(&l.m[j], 1) - gstart(&l.m[j], 1), dec_of(v, r->x, &l.m[j], 1)};
            VPUSH(v, rs, n, cap, x);
        }
    }
    mlist l = finditer(v, P_EURO_X_RATE, r->x);
    for (size_t j = 0; j < l.n; j++) {
        rate x = {gstart(&l.m[j], 2), gend(&l.m[j], 2) - gstart(&l.m[j], 2), dec_of(v, r->x, &l.m[j], 2)};
        VPUSH(v, rs, n, cap, x);
        explicit_rate e = {gstart(&l.m[j], 1), x};
        VPUSH(v, ex, ne, ce, e);
    }
    fx_dec one = fx_dec_u64(v, 1), ten = fx_dec_u64(v, 10);
    size_t k = 0;
    for (size_t i = 0; i < n; i++)
        if (fx_dec_cmp(rs[i].val, one) > 0 && fx_dec_cmp(rs[i].val, ten) < 0) rs[k++] = rs[i];
    /* an explicit pair stays when it is still among the rates: its value passed */
    size_t ke = 0;
    for (size_t i = 0; i < ne; i++)
        if (fx_dec_cmp(ex[i].r.val, one) > 0 && fx_dec_cmp(ex[i].r.val, ten) < 0) ex[ke++] = ex[i];
    *rates_out = rs;
    *nrates = k;
    *ex_out = ex;
    *nex = ke;
}

/* ---- money (03 §3.7) ------------------------------------------------------ */

enum { U_FREE, U_RATE, U_ALIAS, U_OP, U_SUBJ };
enum { LAB_NONE, LAB_NETTO, LAB_BRUTTO };

typedef struct {
    size_t s;
    fx_dec v;
    int use;
    int lab;
} stated;

typedef struct {
    fx_dec v;
    int lab;
    long src; /* stated index or -1 */
} subject;

typedef struct {
    fx_dec v;
    int kind;
    long group;
} pooled;

/* money()'s state: the stated amounts and what its steps have found so far */
typedef struct {
    run *r;
    fx_env *v;
    stated *st;
    size_t nst;
    run calc; /* the money lines, split off at the end */
    bs_buf b; /* the line being written */
    fx_dec *refs; /* computed results (pool kind 2) */
    size_t nrefs, crefs;
    subject *subj;
    size_t nsubj, csubj;
} money_ctx;

/* qsort_r order of pool indices: (kind, value, index) */
static int pool_cmp(const void *a, const void *b, void *ctx) {
    const pooled *pool = ctx;
    size_t i = *(const size_t *)a, j = *(const size_t *)b;
    if (pool[i].kind != pool[j].kind) return pool[i].kind < pool[j].kind ? -1 : 1;
    int c = fx_dec_cmp(pool[i].v, pool[j].v);
    if (c) return c;
    return (i > j) - (i < j);
}

/* The first stated entry starting at or after pos (entries are in text order). */
static size_t stated_from(const money_ctx *c, size_t pos) {
    size_t lo = 0, hi = c->nst;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (c->st[mid].s < pos) lo = mid + 1;
        else hi = mid;
    }
    return lo;
}

static long stated_at(const money_ctx *c, size_t pos) {
    size_t i = stated_from(c, pos);
    return i < c->nst && c->st[i].s == pos ? (long)i : -1;
}

static long first_free(money_ctx *c, size_t a, size_t n) {
    size_t lim = a + cut_len(c->r, a, n);
    for (size_t i = stated_from(c, a); i < c->nst && c->st[i].s < lim; i++)
        if (c->st[i].use == U_FREE) return (long)i;
    return -1;
}

static const char *lab_name(int lab) { return lab == LAB_NETTO ? "netto" : "brutto"; }

/* The stated amounts in text order, each with the netto/brutto label right after it. */
static void find_stated(money_ctx *c) {
    run *r = c->r;
    fx_env *v = c->v;
    size_t cst = 0;
    mlist sl = finditer(v, P_STATED, r->x);
    for (size_t i = 0; i < sl.n; i++) {
        fx_m lm;
        int lab = LAB_NONE;
        int hit = fx_re_match(g_re[P_LABEL], r->x.t, r->x.n, gend(&sl.m[i], 0), lm.g);
        if (hit < 0) v->oom = 1;
        if (hit == 1) lab = r->x.t[gstart(&lm, 1)] == 'n' ? LAB_NETTO : LAB_BRUTTO;
        stated a = {gstart(&sl.m[i], 0), dec_of(v, r->x, &sl.m[i], 1), U_FREE, lab};
        VPUSH(v, c->st, c->nst, cst, a);
    }
}

/* ---- 1. exchange rates and euro ---- */

typedef struct {
    rate *all;
    size_t n;
    explicit_rate *ex;
    size_t nex;
    size_t *distinct; /* index of the first rate of each value */
    size_t ndist;
} rate_set;

typedef struct {
    size_t p;
    fx_dec v;
} euro;

/* The euro amounts to convert: not "za N euro", not "N euro =", the first
 * MAX_EURO distinct values (only those are used). */
static size_t find_euros(money_ctx *c, euro **out) {
    run *r = c->r;
    fx_env *v = c->v;
    euro *eur = NULL;
    size_t neur = 0, ceur = 0;
    mlist el = finditer(v, P_EURO, r->x);
    for (size_t i = 0; i < el.n && neur < MAX_EURO; i++) {
        size_t s = gstart(&el.m[i], 0), e = gend(&el.m[i], 0);
        if (ends_with(r->x, s, "za ")) continue;
        while (e < r->x.n && fx_is_space(r->x.t[e])) e++;
        if (e < r->x.n && r->x.t[e] == '=') continue;
        fx_dec val = dec_of(v, r->x, &el.m[i], 1);
        int seen = 0;
        for (size_t j = 0; j < neur && !seen; j++) seen = !fx_dec_cmp(eur[j].v, val);
        if (!seen) {
            euro x = {s, val};
            VPUSH(v, eur, neur, ceur, x);
        }
    }
    *out = eur;
    return neur;
}

/* The rate euro amount e converts at: its explicit pair, else the text's one
 * rate value, else the one value of its sentence's rates (its last text);
 * NULL when there is none. */
static const rate *euro_rate(const run *r, const rate_set *rs, const euro *e) {
    for (size_t j = 0; j < rs->nex; j++)
        if (rs->ex[j].euro_pos == e->p) return &rs->ex[j].r;
    if (rs->ndist == 1) return &rs->all[rs->distinct[0]];
    const rate *first = NULL, *last = NULL;
    int several = 0;
    size_t se = sent(r, e->p);
    for (size_t j = 0; j < rs->n; j++) {
        if (sent(r, rs->all[j].pos) != se) continue;
        if (!first) first = &rs->all[j];
        else if (fx_dec_cmp(first->val, rs->all[j].val)) several = 1;
        if (!fx_dec_cmp(first->val, rs->all[j].val)) last = &rs->all[j];
    }
    return first && !several ? last : NULL;
}

/* "E euro × R zł = X"; the free amounts of the euro's sentence equal to X
 * are X restated (aliases), and X is compared as a computed result. */
static void euro_line(money_ctx *c, const euro *e, const rate *rt) {
    run *r = c->r;
    fx_env *v = c->v;
    fx_dec cv = fx_dec_q(v, fx_dec_mul(v, e->v, rt->val));
    fx_put_num(v, &c->b, e->v);
    bs_buf_puts(&c->b, " euro × ");
    put_cps(&c->b, r->x.t + rt->pos, rt->len);
    bs_buf_puts(&c->b, " zł = ");
    fx_put_amt(v, &c->b, cv);
    add_line(&c->calc, &c->b);
    size_t se = sent(r, e->p);
    for (size_t j = 0; j < c->nst; j++)
        if (c->st[j].use == U_FREE && !fx_dec_cmp(c->st[j].v, cv) && sent(r, c->st[j].s) == se)
            c->st[j].use = U_ALIAS;
    VPUSH(v, c->refs, c->nrefs, c->crefs, cv);
}

static void money_euro(money_ctx *c) {
    fx_env *v = c->v;
    rate_set rs = {0};
    size_t cdist = 0;
    find_rates(c->r, &rs.all, &rs.n, &rs.ex, &rs.nex);
    for (size_t i = 0; i < rs.n; i++) {
        long a = stated_at(c, rs.all[i].pos);
        if (a >= 0) c->st[a].use = U_RATE;
    }
    for (size_t i = 0; i < rs.n && rs.ndist < 2; i++) { /* only "exactly one value" is asked */
        int seen = 0;
        for (size_t j = 0; j < rs.ndist && !seen; j++) seen = !fx_dec_cmp(rs.all[rs.distinct[j]].val, rs.all[i].val);
        if (!seen) VPUSH(v, rs.distinct, rs.ndist, cdist, i);
    }
    euro *eur;
    size_t neur = find_euros(c, &eur);
    for (size_t i = 0; i < neur && i < MAX_EURO; i++) {
        const rate *rt = euro_rate(c->r, &rs, &eur[i]);
        if (rt) euro_line(c, &eur[i], rt);
    }
}

/* ---- 2. budget ---- */

typedef struct {
    long x; /* the stated amount */
    size_t ws, we; /* its spending word's span */
} spent;

/* The amounts spent from budget bi: the first free amount after each
 * spending word of the budget's sentence or the next, each amount once. */
static size_t find_spent(money_ctx *c, long bi, spent **out) {
    run *r = c->r;
    fx_env *v = c->v;
    spent *used = NULL;
    size_t nu = 0, cu = 0;
    size_t sb = sent(r, c->st[bi].s);
    uint8_t *kept = fx_alloc(v, c->nst); /* stated entries already taken by a spending word */
    if (kept) memset(kept, 0, c->nst);
    mlist ul = finditer(v, P_USED, r->x);
    for (size_t i = 0; kept && i < ul.n; i++) {
        size_t su = sent(r, gstart(&ul.m[i], 0));
        if (su != sb && su != sb + 1) continue;
        long x = first_free(c, gend(&ul.m[i], 0), 40);
        if (x >= 0 && x != bi && !kept[x]) {
            spent sp = {x, gstart(&ul.m[i], 1), gend(&ul.m[i], 1)};
            VPUSH(v, used, nu, cu, sp);
            kept[x] = 1;
        }
    }
    *out = used;
    return nu;
}

/* "budżet B − word X − ... = rest" */
static void money_budget(money_ctx *c) {
    run *r = c->r;
    fx_env *v = c->v;
    fx_m bm;
    if (!search_at(v, P_BUDGET, r->x, 0, &bm)) return;
    long bi = first_free(c, gend(&bm, 0), 80);
    if (bi < 0) return;
    spent *used;
    size_t nu = find_spent(c, bi, &used);
    if (!nu) return;
    fx_dec total = {0, 0, 0, NULL};
    for (size_t j = 0; j < nu; j++) total = fx_dec_add(v, total, c->st[used[j].x].v);
    fx_dec rest = fx_dec_sub(v, c->st[bi].v, total);
    bs_buf_puts(&c->b, "budżet ");
    fx_put_amt(v, &c->b, c->st[bi].v);
    for (size_t j = 0; j < nu; j++) {
        bs_buf_puts(&c->b, " − ");
        put_cps(&c->b, r->x.t + used[j].ws, used[j].we - used[j].ws);
        bs_buf_putc(&c->b, ' ');
        fx_put_amt(v, &c->b, c->st[used[j].x].v);
    }
    bs_buf_puts(&c->b, " = ");
    fx_put_amt(v, &c->b, rest);
    add_line(&c->calc, &c->b);
    c->st[bi].use = U_OP;
    for (size_t j = 0; j < nu; j++) c->st[used[j].x].use = U_OP;
    fx_dec qr = fx_dec_q(v, rest);
    VPUSH(v, c->refs, c->nrefs, c->crefs, qr);
}

/* ---- 3. products: quantity × unit price, lists by sentence ---- */

typedef struct {
    size_t key; /* sentence */
    long items_n[5];
    long items_a[5];
    size_t n;
} product_list;

/* The "n × price" items (price a free stated amount) by sentence: the first
 * two lists, five items each, are used. */
static size_t product_lists(money_ctx *c, product_list pl[2]) {
    run *r = c->r;
    size_t npl = 0;
    mlist pml = finditer(c->v, P_PRODUCT, r->x);
    for (size_t i = 0; i < pml.n; i++) {
        long long n = py_int(r->x, &pml.m[i], 1);
        long a = stated_at(c, gend(&pml.m[i], 0));
        if (a < 0 || c->st[a].use != U_FREE || n <= 0) continue;
        size_t k = sent(r, gstart(&pml.m[i], 0));
        /* sentences only grow along the text, so a list is the last one or new */
        product_list *l = npl && pl[npl - 1].key == k ? &pl[npl - 1] : NULL;
        if (!l) {
            if (npl == 2) break; /* only the first two lists are used */
            l = &pl[npl++];
            l->key = k;
            l->n = 0;
        }
        if (l->n < 5) {
            l->items_n[l->n] = (long)n;
            l->items_a[l->n] = a;
            l->n++;
        }
    }
    return npl;
}

/* A list's lines (n × price of each item of n > 1, then the sum of several
 * items); its total is a subject, labelled when all its prices share one label.
 * A single item of one is its price, a subject itself. */
static void product_lines(money_ctx *c, const product_list *l) {
    fx_env *v = c->v;
    int labs_seen[3] = {0, 0, 0}, nlabs = 0, lab = LAB_NONE;
    for (size_t j = 0; j < l->n; j++) {
        int lb = c->st[l->items_a[j]].lab;
        if (!labs_seen[lb]) { labs_seen[lb] = 1; nlabs++; lab = lb; }
    }
    if (nlabs != 1) lab = LAB_NONE;
    if (l->n == 1 && l->items_n[0] == 1) {
        long a = l->items_a[0];
        c->st[a].use = U_SUBJ;
        subject s = {c->st[a].v, lab, a};
        VPUSH(v, c->subj, c->nsubj, c->csubj, s);
        return;
    }
    fx_dec tots[5];
    for (size_t j = 0; j < l->n; j++) {
        long a = l->items_a[j];
        tots[j] = fx_dec_mul(v, fx_dec_u64(v, (uint64_t)l->items_n[j]), c->st[a].v);
        if (l->items_n[j] > 1) {
            bs_buf_printf(&c->b, "%ld × ", l->items_n[j]);
            fx_put_amt(v, &c->b, c->st[a].v);
            bs_buf_puts(&c->b, " = ");
            fx_put_amt(v, &c->b, tots[j]);
            add_line(&c->calc, &c->b);
        }
        c->st[a].use = U_OP;
    }
    fx_dec total = {0, 0, 0, NULL};
    for (size_t j = 0; j < l->n; j++) total = fx_dec_add(v, total, tots[j]);
    if (l->n > 1) {
        for (size_t j = 0; j < l->n; j++) {
            if (j) bs_buf_puts(&c->b, " + ");
            fx_put_amt(v, &c->b, tots[j]);
        }
        bs_buf_puts(&c->b, " = ");
        fx_put_amt(v, &c->b, total);
        add_line(&c->calc, &c->b);
    }
    subject s = {total, lab, -1};
    VPUSH(v, c->subj, c->nsubj, c->csubj, s);
}

static void money_products(money_ctx *c) {
    product_list pl[2];
    size_t npl = product_lists(c, pl);
    for (size_t li = 0; li < npl; li++) product_lines(c, &pl[li]);
}

/* ---- 4. tiered price list ---- */

/* The ordered quantities outside the tier list tl (QTY matches not inside a
 * tier, not before "×", not after a range word): the first two distinct. */
static size_t tier_quantities(money_ctx *c, const mlist *tl, long long qs[2]) {
    static const char *const QTY_PRE[8] = {"poniżej ", "od ", "do ", "powyżej ", "najmniej ", "min. ", "–", "-"};
    run *r = c->r;
    size_t nq = 0;
    mlist ql = finditer(c->v, P_QTY, r->x);
    for (size_t i = 0; i < ql.n && nq < 2; i++) {
        size_t s = gstart(&ql.m[i], 0), e = gend(&ql.m[i], 0);
        /* tier matches are in text order and disjoint: the last one starting at or before s */
        size_t lo = 0, hi = tl->n;
        while (lo < hi) {
            size_t mid = (lo + hi) / 2;
            if (gstart(&tl->m[mid], 0) <= s) lo = mid + 1;
            else hi = mid;
        }
        int inside = lo > 0 && s < gend(&tl->m[lo - 1], 0);
        size_t k = e;
        if (k < r->x.n && (r->x.t[k] == ' ' || r->x.t[k] == 0xA0)) k++;
        int times = k < r->x.n && r->x.t[k] == 0xD7;
        int pre = 0;
        for (int j = 0; j < 8 && !pre; j++) pre = ends_with(r->x, s, QTY_PRE[j]);
        if (inside || times || pre) continue;
        long long qv = py_int(r->x, &ql.m[i], 1);
        if (!(nq == 1 && qs[0] == qv)) qs[nq++] = qv;
    }
    return nq;
}

/* Whether quantity q is in tier m; the condition is written to cb. */
static int tier_holds(const run *r, const fx_m *m, long long q, bs_buf *cb) {
    long long x = py_int(r->x, m, 3);
    int yg = has_group(m, 4) ? 4 : has_group(m, 5) ? 5 : 0;
    int ok;
    if (group_is(r->x, m, 2, "poniżej")) { ok = q < x; bs_buf_printf(cb, "%lld < %lld", q, x); }
    else if (group_is(r->x, m, 2, "do")) { ok = q <= x; bs_buf_printf(cb, "%lld ≤ %lld", q, x); }
    else if (group_is(r->x, m, 2, "powyżej")) { ok = q > x; bs_buf_printf(cb, "%lld > %lld", q, x); }
    else if (yg) {
        ok = x <= q && q <= py_int(r->x, m, yg);
        bs_buf_printf(cb, "%lld ≤ %lld ≤ ", x, q);
        put_cps(cb, r->x.t + gstart(m, yg), gend(m, yg) - gstart(m, yg));
    } else { ok = q >= x; bs_buf_printf(cb, "%lld ≥ %lld", q, x); }
    return ok;
}

/* When q is in exactly one tier: "condition; q × price = total", the total a subject. */
static void tier_line(money_ctx *c, const mlist *tl, long long q) {
    run *r = c->r;
    fx_env *v = c->v;
    long hit = -1;
    int nhits = 0;
    bs_buf cond;
    bs_buf_init(&cond);
    for (size_t i = 0; i < tl->n; i++) {
        bs_buf cb;
        bs_buf_init(&cb);
        int ok = tier_holds(r, &tl->m[i], q, &cb);
        if (ok && ++nhits == 1) {
            hit = (long)i;
            bs_buf_free(&cond);
            cond = cb;
        } else {
            bs_buf_free(&cb);
        }
    }
    if (nhits == 1) {
        fx_dec p = dec_of(v, r->x, &tl->m[hit], 1);
        fx_dec t = fx_dec_mul(v, fx_dec_u64(v, (uint64_t)q), p);
        bs_buf_put(&c->b, cond.data ? cond.data : "", cond.len);
        if (cond.oom) v->oom = 1;
        bs_buf_printf(&c->b, "; %lld × ", q);
        fx_put_amt(v, &c->b, p);
        bs_buf_puts(&c->b, " = ");
        fx_put_amt(v, &c->b, t);
        add_line(&c->calc, &c->b);
        subject s = {t, LAB_NONE, -1};
        VPUSH(v, c->subj, c->nsubj, c->csubj, s);
    }
    bs_buf_free(&cond);
}

static void money_tiers(money_ctx *c) {
    mlist tl = finditer(c->v, P_TIER, c->r->x);
    if (tl.n < 2) return;
    long long qs[2];
    size_t nq = tier_quantities(c, &tl, qs);
    if (nq == 1) tier_line(c, &tl, qs[0]);
    for (size_t i = 0; i < tl.n; i++) {
        long a = stated_at(c, gstart(&tl.m[i], 1));
        if (a >= 0 && c->st[a].use == U_FREE) c->st[a].use = U_OP;
    }
}

/* ---- 5. delivery fee: "subject + fee = total" for the one subject ---- */

static void money_fee(money_ctx *c) {
    fx_env *v = c->v;
    if (c->nsubj != 1) return;
    mlist fl = finditer(v, P_FEE, c->r->x);
    for (size_t i = 0; i < fl.n; i++) {
        long f = first_free(c, gend(&fl.m[i], 0), 30);
        if (f < 0) continue;
        fx_put_amt(v, &c->b, c->subj[0].v);
        bs_buf_puts(&c->b, " + ");
        fx_put_amt(v, &c->b, c->st[f].v);
        bs_buf_puts(&c->b, " = ");
        fx_put_amt(v, &c->b, fx_dec_add(v, c->subj[0].v, c->st[f].v));
        add_line(&c->calc, &c->b);
        c->st[f].use = U_OP;
        break;
    }
}

/* ---- 6. net/gross, and the pool of values to compare ---- */

/* The free labelled amounts become subjects; with one VAT rate, each
 * labelled subject is converted ("X netto × 1,23 = Y brutto", unless the VAT
 * lines already cover it). The pool: subjects and their conversions (kind 0),
 * free amounts (kind 1), computed results (kind 2). */
static size_t money_pool(money_ctx *c, const fx_dec *covered, size_t ncov, int vset, pooled **out) {
    fx_env *v = c->v;
    for (size_t i = 0; i < c->nst; i++)
        if (c->st[i].use == U_FREE && c->st[i].lab != LAB_NONE) {
            c->st[i].use = U_SUBJ;
            subject s = {c->st[i].v, c->st[i].lab, (long)i};
            VPUSH(v, c->subj, c->nsubj, c->csubj, s);
        }
    int one_rate = rate_count(vset) == 1;
    const char *kk = NULL;
    fx_dec k = {0, 0, 0, NULL};
    if (one_rate) k = vat_factor(v, vset, &kk);
    pooled *pool = NULL;
    size_t npool = 0, cpool = 0;
    for (size_t g = 0; g < c->nsubj; g++) {
        const subject *sg = &c->subj[g];
        pooled pv = {fx_dec_q(v, sg->v), 0, (long)g};
        VPUSH(v, pool, npool, cpool, pv);
        if (!one_rate || sg->lab == LAB_NONE) continue;
        int netto = sg->lab == LAB_NETTO;
        fx_dec d = netto ? fx_dec_mul(v, sg->v, k) : fx_dec_div(v, sg->v, k);
        int cov = 0;
        if (sg->src >= 0)
            for (size_t j = 0; j < ncov && !cov; j++) cov = !fx_dec_cmp(covered[j], c->st[sg->src].v);
        if (!cov) {
            fx_put_amt(v, &c->b, sg->v);
            bs_buf_printf(&c->b, " %s %s %s = ", lab_name(sg->lab), netto ? "×" : "÷", kk);
            fx_put_amt(v, &c->b, d);
            bs_buf_printf(&c->b, " %s", netto ? "brutto" : "netto");
            add_line(&c->calc, &c->b);
        }
        pooled pd = {fx_dec_q(v, d), 0, (long)g};
        VPUSH(v, pool, npool, cpool, pd);
    }
    for (size_t i = 0; i < c->nrefs; i++) {
        pooled pr = {c->refs[i], 2, -1 - (long)i};
        VPUSH(v, pool, npool, cpool, pr);
    }
    for (size_t i = 0; i < c->nst; i++)
        if (c->st[i].use == U_FREE) {
            pooled pa = {c->st[i].v, 1, -100 - (long)i};
            VPUSH(v, pool, npool, cpool, pa);
        }
    *out = pool;
    return npool;
}

/* ---- 7.–8. comparisons ---- */

/* The pool without later duplicates of a (value, kind): sorted by (kind,
 * value, index), the first of each equal run stays; *plain counts the kind-1
 * entries left. */
static pooled *pool_unique(fx_env *v, pooled *pool, size_t npool, size_t *nuq_out, size_t *plain_out) {
    pooled *uq = fx_alloc(v, (npool ? npool : 1) * sizeof *uq);
    size_t *ord = fx_alloc(v, (npool ? npool : 1) * sizeof *ord);
    uint8_t *keep = fx_alloc(v, npool ? npool : 1);
    size_t nuq = 0, plain = 0;
    if (uq && ord && keep) {
        for (size_t i = 0; i < npool; i++) ord[i] = i;
        qsort_r(ord, npool, sizeof *ord, pool_cmp, pool);
        for (size_t i = 0; i < npool; i++)
            keep[ord[i]] = i == 0 || pool[ord[i - 1]].kind != pool[ord[i]].kind ||
                           fx_dec_cmp(pool[ord[i - 1]].v, pool[ord[i]].v) != 0;
        for (size_t i = 0; i < npool; i++)
            if (keep[i]) {
                uq[nuq++] = pool[i];
                plain += pool[i].kind == 1;
            }
    }
    *nuq_out = nuq;
    *plain_out = plain;
    return uq;
}

/* The first entry of the ascending index list l[0..n) after i. */
static size_t index_after(const size_t *l, size_t n, size_t i) {
    size_t lo = 0, hi = n;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (l[mid] <= i) lo = mid + 1;
        else hi = mid;
    }
    return lo;
}

/* "x > y" (or <, =), the lower kind first */
static void compare_line(money_ctx *c, run *comps, const pooled *a, const pooled *b) {
    fx_env *v = c->v;
    const pooled *x = a->kind <= b->kind ? a : b;
    const pooled *y = x == a ? b : a;
    int cmp = fx_dec_cmp(x->v, y->v);
    fx_put_amt(v, &c->b, x->v);
    bs_buf_puts(&c->b, cmp > 0 ? " > " : cmp < 0 ? " < " : " = ");
    fx_put_amt(v, &c->b, y->v);
    add_line(comps, &c->b);
}

/* The first MAX_COMPARE pairs (i < j, different groups; two plain amounts
 * only when plain <= MAX_PLAIN) by (plain members, i, j). The j of a pair
 * are walked in index lists of the kind they need, so a pool of many plain
 * amounts costs no quadratic scan. */
static void compare_lines(money_ctx *c, const pooled *uq, size_t nuq, size_t plain, run *comps) {
    fx_env *v = c->v;
    size_t *la = fx_alloc(v, (nuq ? nuq : 1) * sizeof *la), *lp = fx_alloc(v, (nuq ? nuq : 1) * sizeof *lp);
    size_t na = 0, np = 0;
    for (size_t i = 0; la && lp && i < nuq; i++) {
        if (uq[i].kind == 1) lp[np++] = i;
        else la[na++] = i;
    }
    *comps = (run){v, c->r->x, c->r->bounds, c->r->nb, NULL, 0, 0};
    for (int nk = 0; la && lp && nk <= 2 && comps->nl < MAX_COMPARE; nk++) {
        if (nk == 2 && plain > MAX_PLAIN) break;
        for (size_t i = 0; i < nuq && comps->nl < MAX_COMPARE; i++) {
            int ip = uq[i].kind == 1;
            if ((nk == 0 && ip) || (nk == 2 && !ip)) continue;
            const size_t *l = (nk == 0 || (nk == 1 && ip)) ? la : lp;
            size_t nl = l == la ? na : np;
            for (size_t k = index_after(l, nl, i); k < nl && comps->nl < MAX_COMPARE; k++) {
                size_t j = l[k];
                if (uq[i].group != uq[j].group) compare_line(c, comps, &uq[i], &uq[j]);
            }
        }
    }
}

/* The money lines (calculations, then comparisons) of 03 §3.7, in the order
 * of its steps; each step marks the stated amounts it uses. */
static void money(run *r, const fx_dec *covered, size_t ncov, int vset, char ***calc_out, size_t *ncalc,
                  char ***comp_out, size_t *ncomp) {
    money_ctx c = {.r = r, .v = r->v, .calc = {r->v, r->x, r->bounds, r->nb, NULL, 0, 0}};
    bs_buf_init(&c.b);
    find_stated(&c);
    money_euro(&c);
    money_budget(&c);
    money_products(&c);
    money_tiers(&c);
    money_fee(&c);
    pooled *pool;
    size_t npool = money_pool(&c, covered, ncov, vset, &pool);
    size_t nuq, plain;
    pooled *uq = pool_unique(c.v, pool, npool, &nuq, &plain);
    run comps;
    compare_lines(&c, uq, nuq, plain, &comps);
    bs_buf_free(&c.b);
    *calc_out = c.calc.lines;
    *ncalc = c.calc.nl;
    *comp_out = comps.lines;
    *ncomp = comps.nl;
}

/* ---- facts(text) (03 §3.6) ------------------------------------------------- */

static int size_cmp(const void *a, const void *b) {
    size_t x = *(const size_t *)a, y = *(const size_t *)b;
    return (x > y) - (x < y);
}

/* The sentence bounds: the positions only (a whole match record per sentence
 * would be twelve times the memory on a long state). */
static void find_bounds(run *r) {
    fx_env *v = r->v;
    size_t cb = 0;
    fx_m m;
    for (size_t pos = 0; pos <= r->x.n && search_at(v, P_BOUND, r->x, pos, &m); pos = gend(&m, 0)) {
        size_t b0 = gstart(&m, 0);
        VPUSH(v, r->bounds, r->nb, cb, b0);
    }
}

/* 1. each date's weekday (and holiday); 2. the gaps between consecutive dates */
static void date_lines(run *r, bs_buf *b, const fx_date *ds, size_t nd) {
    for (size_t i = 0; i < nd; i++) {
        put_date(b, ds[i]);
        bs_buf_printf(b, " to %s", WEEKDAYS[fx_date_weekday(ds[i])]);
        const char *h = fx_holiday(ds[i]);
        if (h) bs_buf_printf(b, "; dzień ustawowo wolny od pracy (%s)", h);
        add_line(r, b);
    }
    for (size_t i = 0; i + 1 < nd; i++) {
        int64_t n = fx_date_ordinal(ds[i + 1]) - fx_date_ordinal(ds[i]);
        bs_buf_puts(b, "Od ");
        put_date(b, ds[i]);
        bs_buf_puts(b, " do ");
        put_date(b, ds[i + 1]);
        bs_buf_printf(b, ": %lld dni (%s)", (long long)(n < 0 ? -n : n), n >= 0 ? "później" : "wcześniej");
        add_line(r, b);
    }
}

/* 3. today minus N: "N dni temu" counted back from the date after "dziś" */
static void today_lines(run *r, bs_buf *b) {
    fx_env *v = r->v;
    fx_m tm;
    if (!search_at(v, P_TODAY, r->x, 0, &tm)) return;
    size_t e = gend(&tm, 0);
    text w = {r->x.t + e, r->x.n - e < 40 ? r->x.n - e : 40};
    fx_date *td;
    if (!find_dates(v, w, &td)) return;
    mlist al = finditer(v, P_AGO, r->x);
    for (size_t i = 0; i < al.n; i++) {
        long long n = py_int(r->x, &al.m[i], 1);
        fx_date back = fx_date_from_ordinal(v, fx_date_ordinal(td[0]) - n);
        bs_buf_printf(b, "%lld dni przed ", n);
        put_date(b, td[0]);
        bs_buf_puts(b, " to ");
        put_date(b, back);
        add_line(r, b);
    }
}

typedef struct {
    long long n[MAX_DURATIONS + 1];
    char unit[MAX_DURATIONS + 1]; /* d(ays), w(eeks), m(onths), y(ears) */
    size_t count;
} durations;

/* The distinct durations: "N unit" (not "N dni temu"), then the bare unit
 * words as 1 unit. The list is capped at 3 only at the end upstream, but a
 * 4th entry can never be printed, and membership only looks at earlier
 * entries. */
static void find_durations(run *r, durations *d) {
    fx_env *v = r->v;
    d->count = 0;
    mlist dl = finditer(v, P_DURATION, r->x);
    for (size_t i = 0; i < dl.n && d->count < MAX_DURATIONS; i++) {
        const fx_m *m = &dl.m[i];
        long long n = py_int(r->x, m, 1);
        const uint32_t *u = r->x.t + gstart(m, 2);
        char unit = u[0] == 'd' ? 'd' : (u[0] == 't' && u[1] == 'y') ? 'w' : (u[0] == 'm' && u[1] == 'i' && u[2] == 'e')
                                                                      ? 'm' : 'y';
        int seen = 0;
        for (size_t j = 0; j < d->count && !seen; j++) seen = d->n[j] == n && d->unit[j] == unit;
        size_t e = gend(m, 0);
        static const uint32_t temu[5] = {' ', 't', 'e', 'm', 'u'};
        int ago = r->x.n - e >= 5 && !memcmp(r->x.t + e, temu, sizeof temu);
        if (!seen && !ago) { d->n[d->count] = n; d->unit[d->count] = unit; d->count++; }
    }
    mlist wl = finditer(v, P_DUR_WORD, r->x);
    for (size_t i = 0; i < wl.n && d->count < MAX_DURATIONS; i++) {
        const uint32_t *u = r->x.t + gstart(&wl.m[i], 1);
        char unit = u[0] == 't' ? 'w' : u[0] == 'm' ? 'm' : 'y';
        int seen = 0;
        for (size_t j = 0; j < d->count && !seen; j++) seen = d->n[j] == 1 && d->unit[j] == unit;
        if (!seen) { d->n[d->count] = 1; d->unit[d->count] = unit; d->count++; }
    }
}

/* 4. each of the first three dates plus each duration, in calendar terms */
static void duration_lines(run *r, bs_buf *b, const fx_date *ds, size_t nd, const durations *du) {
    fx_env *v = r->v;
    for (size_t i = 0; i < nd && i < 3; i++)
        for (size_t j = 0; j < du->count; j++) {
            fx_date d = ds[i], p;
            long long n = du->n[j];
            const char *word;
            switch (du->unit[j]) {
            case 'd': p = fx_date_from_ordinal(v, fx_date_ordinal(d) + n); word = n == 1 ? "dzień" : "dni"; break;
            case 'w':
                p = fx_date_from_ordinal(v, fx_date_ordinal(d) + 7 * n);
                word = n == 1 ? "tydzień" : "tygodnie";
                break;
            case 'm': p = fx_date_add_months(v, d, n); word = n == 1 ? "miesiąc" : "miesiące"; break;
            default: p = fx_date_add_years(v, d, n); word = n == 1 ? "rok" : "lata"; break;
            }
            put_date(b, d);
            bs_buf_printf(b, " + %lld %s (kalendarzowo) = ", n, word);
            put_date(b, p);
            bs_buf_printf(b, " (%s)", WEEKDAYS[fx_date_weekday(p)]);
            add_line(r, b);
        }
}

/* 5. VAT: each of the first MAX_AMOUNTS amounts that are not exchange rates,
 * times and divided by each VAT factor of vset. Returns how many (amount,
 * factor) lines were written, their amounts in covered. */
static size_t vat_lines(run *r, bs_buf *b, int vset, fx_dec covered[MAX_AMOUNTS * 3]) {
    fx_env *v = r->v;
    rate *rates;
    explicit_rate *ex;
    size_t nrates, nex;
    find_rates(r, &rates, &nrates, &ex, &nex);
    size_t *rate_pos = fx_alloc(v, (nrates ? nrates : 1) * sizeof *rate_pos); /* sorted, for the lookups */
    if (!rate_pos) nrates = 0;
    for (size_t i = 0; i < nrates; i++) rate_pos[i] = rates[i].pos;
    if (nrates) qsort(rate_pos, nrates, sizeof *rate_pos, size_cmp);
    size_t ncov = 0, namt = 0;
    mlist aml = finditer(v, P_AMOUNT, r->x);
    for (size_t i = 0; i < aml.n && namt < MAX_AMOUNTS; i++) {
        size_t s = gstart(&aml.m[i], 0);
        size_t lo = 0, hi = nrates;
        while (lo < hi) {
            size_t mid = (lo + hi) / 2;
            if (rate_pos[mid] < s) lo = mid + 1;
            else hi = mid;
        }
        if (lo < nrates && rate_pos[lo] == s) continue;
        namt++;
        fx_dec x = dec_of(v, r->x, &aml.m[i], 1);
        static const int order[3] = {1, 2, 4}; /* 23, 8, 5: descending */
        for (int j = 0; j < 3; j++) {
            if (!(vset & order[j])) continue;
            const char *kt;
            fx_dec k = vat_factor(v, order[j], &kt);
            fx_put_amt(v, b, x);
            bs_buf_printf(b, " × %s = ", kt);
            fx_put_amt(v, b, fx_dec_mul(v, x, k));
            bs_buf_puts(b, "; ");
            fx_put_amt(v, b, x);
            bs_buf_printf(b, " ÷ %s = ", kt);
            fx_put_amt(v, b, fx_dec_div(v, x, k));
            add_line(r, b);
            covered[ncov++] = x;
        }
    }
    return ncov;
}

/* 6.–7. the money lines, capped: MAX_TOTAL lines in all, calculations first,
 * then at most MAX_COMPARE comparisons */
static void money_lines(run *r, const fx_dec *covered, size_t ncov, int vset) {
    fx_env *v = r->v;
    char **calc, **comp;
    size_t ncalc, ncomp;
    money(r, covered, ncov, vset, &calc, &ncalc, &comp, &ncomp);
    size_t room = r->nl < MAX_TOTAL ? MAX_TOTAL - r->nl : 0;
    if (ncalc > room) ncalc = room;
    size_t left = room - ncalc;
    if (ncomp > left) ncomp = left;
    if (ncomp > MAX_COMPARE) ncomp = MAX_COMPARE;
    for (size_t i = 0; i < ncalc; i++) VPUSH(v, r->lines, r->nl, r->capl, calc[i]);
    for (size_t i = 0; i < ncomp; i++) VPUSH(v, r->lines, r->nl, r->capl, comp[i]);
}

static void facts(run *r) {
    fx_env *v = r->v;
    bs_buf b;
    bs_buf_init(&b);
    find_bounds(r);
    if (v->oom) return;
    fx_date *ds;
    size_t nd = find_dates(v, r->x, &ds);
    if (nd > MAX_DATES) nd = MAX_DATES;
    date_lines(r, &b, ds, nd);
    today_lines(r, &b);
    durations du;
    find_durations(r, &du);
    duration_lines(r, &b, ds, nd, &du);
    int vset = vat_rates(r);
    fx_dec covered[MAX_AMOUNTS * 3];
    size_t ncov = vat_lines(r, &b, vset, covered);
    bs_buf_free(&b);
    money_lines(r, covered, ncov, vset);
}

int bs_facts_lines(const char *state, size_t len, bs_buf *lines, bs_buf *msg) {
    pthread_once(&g_once, compile_all);
    if (!g_re_ok) return BS_EINTERNAL;
    uint32_t *cps = NULL;
    size_t n = 0;
    int rc = bs_utf8_decode(state, len, &cps, &n, NULL);
    if (rc < 0) return rc;
    fx_env v;
    fx_env_init(&v);
    run r = {&v, {cps, n}, NULL, 0, NULL, 0, 0};
    facts(&r);
    if (v.oom) {
        rc = BS_ENOMEM;
    } else if (v.raised) {
        bs_buf_puts(msg, v.msg);
        rc = msg->oom ? BS_ENOMEM : 1;
    } else {
        for (size_t i = 0; i < r.nl; i++) {
            bs_buf_puts(lines, r.lines[i]);
            bs_buf_putc(lines, '\n');
        }
        rc = lines->oom ? BS_ENOMEM : 0;
    }
    fx_env_free(&v);
    free(cps);
    return rc;
}

int bs_facts_inject(void *ctx, const char *state, size_t len, bs_buf *out, bs_buf *msg) {
    (void)ctx;
    bs_buf lines;
    bs_buf_init(&lines);
    int rc = bs_facts_lines(state, len, &lines, msg);
    if (rc == 0) {
        bs_buf_put(out, state, len);
        if (lines.len) {
            bs_buf_puts(out, "\n\n" BS_FACTS_HEADER);
            /* each line ends with '\n' in lines: print "\n- line" */
            size_t a = 0;
            for (size_t i = 0; i < lines.len; i++)
                if (lines.data[i] == '\n') {
                    bs_buf_puts(out, "\n- ");
                    bs_buf_put(out, lines.data + a, i - a);
                    a = i + 1;
                }
        }
        if (out->oom) rc = BS_ENOMEM;
    }
    bs_buf_free(&lines);
    return rc;
}
