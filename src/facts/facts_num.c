/* Decimal and date arithmetic of facts "auto" (facts_num.h). */
#include "facts/facts_num.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "facts/facts_re.h"

#define PREC 28

/* ---- env: arena and sticky error ------------------------------------------ */

struct fx_chunk {
    fx_chunk *next;
    size_t used, cap;
    _Alignas(16) unsigned char mem[];
};

void fx_env_init(fx_env *v) { memset(v, 0, sizeof *v); }

void fx_env_free(fx_env *v) {
    fx_chunk *c = v->chunks;
    while (c) {
        fx_chunk *n = c->next;
        free(c);
        c = n;
    }
    v->chunks = NULL;
}

void *fx_alloc(fx_env *v, size_t n) {
    n = (n + 15) & ~(size_t)15;
    if (!n) n = 16;
    fx_chunk *c = v->chunks;
    if (!c || c->cap - c->used < n) {
        size_t cap = n > 16384 ? n : 16384;
        c = malloc(sizeof *c + cap);
        if (!c) {
            v->oom = 1;
            return NULL;
        }
        c->next = v->chunks;
        c->used = 0;
        c->cap = cap;
        v->chunks = c;
    }
    void *p = c->mem + c->used;
    c->used += n;
    return p;
}

void fx_raise(fx_env *v, const char *msg) {
    if (v->raised) return;
    v->raised = 1;
    snprintf(v->msg, sizeof v->msg, "%s", msg);
}

/* ---- decimal ------------------------------------------------------------- */

static const fx_dec ZERO = {0, 0, 0, NULL};

/* Normalizes digits m[0..n) (little-endian, may hold zeros at both ends) into
 * an arena value. */
static fx_dec make(fx_env *v, int neg, const uint8_t *m, size_t n, int64_t exp) {
    while (n && m[n - 1] == 0) n--;
    size_t lo = 0;
    while (lo < n && m[lo] == 0) lo++;
    if (lo == n) return ZERO;
    uint8_t *d = fx_alloc(v, n - lo);
    if (!d) return ZERO;
    memcpy(d, m + lo, n - lo);
    return (fx_dec){neg, n - lo, exp + (int64_t)lo, d};
}

/* The exact value m · 10^exp rounded to 28 digits, ROUND_HALF_EVEN; sticky:
 * nonzero digits below m. m is modified. */
static fx_dec round_prec(fx_env *v, int neg, uint8_t *m, size_t n, int64_t exp, int sticky) {
    while (n && m[n - 1] == 0) n--;
    if (n > PREC) {
        size_t drop = n - PREC;
        int rd = m[drop - 1];
        int rest = sticky;
        for (size_t i = 0; i + 1 < drop && !rest; i++) rest = m[i] != 0;
        uint8_t *keep = m + drop;
        size_t kn = PREC;
        exp += (int64_t)drop;
        if (rd > 5 || (rd == 5 && (rest || (keep[0] & 1)))) {
            size_t i = 0;
            while (i < kn && keep[i] == 9) keep[i++] = 0;
            if (i < kn) keep[i]++;
            else { /* 999…9 + 1: one digit more, which is 1 followed by zeros */
                keep[kn - 1] = 1;
                memset(keep, 0, kn - 1);
                exp += 1;
            }
        }
        return make(v, neg, keep, kn, exp);
    }
    return make(v, neg, m, n, exp);
}

fx_dec fx_dec_parse(fx_env *v, const uint32_t *t, size_t n) {
    uint8_t *m = fx_alloc(v, n ? n : 1);
    if (!m) return ZERO;
    size_t k = 0;
    int64_t frac = 0;
    int point = 0;
    for (size_t i = n; i-- > 0;) { /* little-endian: last character first */
        uint32_t c = t[i];
        if (c == ' ' || c == 0xA0) continue;
        if (c == ',' || c == '.') { point = 1; frac = (int64_t)k; continue; }
        m[k++] = (uint8_t)fx_digit_value(c);
    }
    return make(v, 0, m, k, point ? -frac : 0);
}

fx_dec fx_dec_u64(fx_env *v, uint64_t x) {
    uint8_t m[20];
    size_t n = 0;
    while (x) { m[n++] = (uint8_t)(x % 10); x /= 10; }
    return make(v, 0, m, n, 0);
}

/* a's digits aligned to exponent e (<= a.exp), into out[0..len). */
static void aligned(fx_dec a, int64_t e, uint8_t *out, size_t len) {
    memset(out, 0, len);
    size_t sh = (size_t)(a.exp - e);
    if (a.n) memcpy(out + sh, a.d, a.n);
}

static int cmp_mag(const uint8_t *a, const uint8_t *b, size_t n) {
    for (size_t i = n; i-- > 0;)
        if (a[i] != b[i]) return a[i] < b[i] ? -1 : 1;
    return 0;
}

fx_dec fx_dec_add(fx_env *v, fx_dec a, fx_dec b) {
    if (!a.n && !b.n) return ZERO;
    int64_t e = !a.n ? b.exp : !b.n ? a.exp : (a.exp < b.exp ? a.exp : b.exp);
    size_t la = a.n ? a.n + (size_t)(a.exp - e) : 0, lb = b.n ? b.n + (size_t)(b.exp - e) : 0;
    size_t len = (la > lb ? la : lb) + 1;
    uint8_t *x = fx_alloc(v, len), *y = fx_alloc(v, len), *r = fx_alloc(v, len);
    if (!x || !y || !r) return ZERO;
    if (a.n) aligned(a, e, x, len); else memset(x, 0, len);
    if (b.n) aligned(b, e, y, len); else memset(y, 0, len);
    if (a.neg == b.neg || !a.n || !b.n) {
        int neg = a.n ? a.neg : b.neg;
        int carry = 0;
        for (size_t i = 0; i < len; i++) {
            int s = x[i] + y[i] + carry;
            r[i] = (uint8_t)(s % 10);
            carry = s / 10;
        }
        return round_prec(v, neg, r, len, e, 0);
    }
    int c = cmp_mag(x, y, len);
    if (c == 0) return ZERO;
    const uint8_t *big = c > 0 ? x : y, *small = c > 0 ? y : x;
    int neg = c > 0 ? a.neg : b.neg, borrow = 0;
    for (size_t i = 0; i < len; i++) {
        int s = big[i] - small[i] - borrow;
        borrow = s < 0;
        r[i] = (uint8_t)(s < 0 ? s + 10 : s);
    }
    return round_prec(v, neg, r, len, e, 0);
}

fx_dec fx_dec_sub(fx_env *v, fx_dec a, fx_dec b) {
    b.neg = !b.neg;
    return fx_dec_add(v, a, b);
}

fx_dec fx_dec_mul(fx_env *v, fx_dec a, fx_dec b) {
    if (!a.n || !b.n) return ZERO;
    size_t len = a.n + b.n + 1;
    uint32_t *acc = calloc(len, sizeof *acc);
    uint8_t *r = fx_alloc(v, len);
    if (!acc || !r) { free(acc); v->oom = 1; return ZERO; }
    /* b is short in every use (a factor, a rate, a count): carry per row keeps
     * the accumulators small */
    for (size_t j = 0; j < b.n; j++) {
        uint32_t carry = 0;
        for (size_t i = 0; i < a.n; i++) {
            uint32_t s = acc[i + j] + (uint32_t)a.d[i] * b.d[j] + carry;
            acc[i + j] = s % 10;
            carry = s / 10;
        }
        for (size_t k = j + a.n; carry; k++) {
            uint32_t s = acc[k] + carry;
            acc[k] = s % 10;
            carry = s / 10;
        }
    }
    for (size_t i = 0; i < len; i++) r[i] = (uint8_t)acc[i];
    free(acc);
    return round_prec(v, a.neg != b.neg, r, len, a.exp + b.exp, 0);
}

fx_dec fx_dec_div(fx_env *v, fx_dec a, fx_dec b) {
    uint64_t dv = 0;
    for (size_t i = b.n; i-- > 0;) dv = dv * 10 + b.d[i];
    if (!b.n || b.n > 18) { v->oom = 1; return ZERO; } /* never: the divisor is a VAT factor */
    if (!a.n) return ZERO;
    /* a · 10^s / b with s large enough for 28 digits plus a rounding digit */
    size_t s = PREC + 2 + b.n, len = s + a.n;
    uint8_t *num = fx_alloc(v, len), *q = fx_alloc(v, len);
    if (!num || !q) return ZERO;
    memset(num, 0, s);
    memcpy(num + s, a.d, a.n);
    uint64_t r = 0;
    for (size_t i = len; i-- > 0;) {
        /* r < dv < 10^18, so r * 10 + 9 fits in 64 bits */
        uint64_t cur = r * 10 + num[i];
        q[i] = (uint8_t)(cur / dv);
        r = cur % dv;
    }
    return round_prec(v, a.neg != b.neg, q, len, a.exp - b.exp - (int64_t)s, r != 0);
}

int fx_dec_cmp(fx_dec a, fx_dec b) {
    if (!a.n && !b.n) return 0;
    if (!a.n) return b.neg ? 1 : -1;
    if (!b.n) return a.neg ? -1 : 1;
    if (a.neg != b.neg) return a.neg ? -1 : 1;
    int sign = a.neg ? -1 : 1;
    /* compare adjusted exponents (position of the leading digit) first */
    int64_t ta = a.exp + (int64_t)a.n, tb = b.exp + (int64_t)b.n;
    if (ta != tb) return ta < tb ? -sign : sign;
    size_t i = a.n, j = b.n;
    while (i && j) {
        uint8_t x = a.d[--i], y = b.d[--j];
        if (x != y) return x < y ? -sign : sign;
    }
    if (i) return sign; /* a has more nonzero digits below */
    if (j) return -sign;
    return 0;
}

int fx_dec_is_integral(fx_dec a) { return a.exp >= 0; }

/* Hundredths of a after ROUND_HALF_UP, as little-endian digits; -1 (and
 * InvalidOperation raised) past 28 digits. */
static int cents(fx_env *v, fx_dec a, uint8_t **out, size_t *n) {
    *out = NULL;
    *n = 0;
    if (!a.n) return 0;
    int64_t shift = a.exp + 2;
    uint8_t *m;
    size_t k;
    if (shift >= 0) {
        if ((uint64_t)shift + a.n > PREC) goto fail;
        k = (size_t)shift + a.n;
        m = fx_alloc(v, k + 1);
        if (!m) return -1;
        memset(m, 0, (size_t)shift);
        memcpy(m + shift, a.d, a.n);
    } else {
        size_t drop = (size_t)(-shift);
        int rd = drop <= a.n ? a.d[drop - 1] : 0;
        k = drop < a.n ? a.n - drop : 0;
        m = fx_alloc(v, k + 1);
        if (!m) return -1;
        if (k) memcpy(m, a.d + drop, k);
        if (rd >= 5) {
            size_t i = 0;
            while (i < k && m[i] == 9) m[i++] = 0;
            if (i < k) m[i]++;
            else m[k++] = 1;
        }
        while (k && m[k - 1] == 0) k--;
        if (k > PREC) goto fail;
    }
    *out = m;
    *n = k;
    return 0;
fail:
    fx_raise(v, "[<class 'decimal.InvalidOperation'>]");
    return -1;
}

fx_dec fx_dec_q(fx_env *v, fx_dec a) {
    uint8_t *m;
    size_t n;
    if (cents(v, a, &m, &n) < 0) return ZERO;
    return make(v, a.neg, m, n, -2);
}

static void put_grouped(bs_buf *b, const char *digits, size_t n) {
    for (size_t i = 0; i < n; i++) {
        if (i && (n - i) % 3 == 0) bs_buf_putc(b, ' ');
        bs_buf_putc(b, digits[i]);
    }
}

static void put_fixed2(fx_env *v, bs_buf *b, fx_dec x) {
    uint8_t *m;
    size_t n;
    if (cents(v, x, &m, &n) < 0) return;
    char *s = fx_alloc(v, n + 3);
    if (!s) return;
    size_t len = n < 3 ? 3 : n;
    for (size_t i = 0; i < len; i++) s[i] = (char)('0' + (len - 1 - i < n ? m[len - 1 - i] : 0));
    if (x.neg) bs_buf_putc(b, '-');
    put_grouped(b, s, len - 2);
    bs_buf_putc(b, ',');
    bs_buf_put(b, s + len - 2, 2);
}

void fx_put_amt(fx_env *v, bs_buf *b, fx_dec x) {
    put_fixed2(v, b, x);
    bs_buf_puts(b, " zł");
}

void fx_put_num(fx_env *v, bs_buf *b, fx_dec x) {
    if (!fx_dec_is_integral(x)) {
        put_fixed2(v, b, x);
        return;
    }
    if (!x.n) {
        bs_buf_putc(b, '0');
        return;
    }
    size_t len = x.n + (size_t)x.exp;
    char *s = fx_alloc(v, len);
    if (!s) return;
    for (size_t i = 0; i < len; i++) s[i] = (char)('0' + (len - 1 - i >= (size_t)x.exp ? x.d[len - 1 - i - x.exp] : 0));
    if (x.neg) bs_buf_putc(b, '-');
    put_grouped(b, s, len);
}

/* ---- dates ----------------------------------------------------------------- */

static const int DAYS_IN_MONTH[13] = {0, 31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
static const int DAYS_BEFORE_MONTH[13] = {0, 0, 31, 59, 90, 120, 151, 181, 212, 243, 273, 304, 334};
#define MAX_ORDINAL 3652059

static int is_leap(long long y) { return y % 4 == 0 && (y % 100 != 0 || y % 400 == 0); }

static int days_in(long long y, int m) { return m == 2 && is_leap(y) ? 29 : DAYS_IN_MONTH[m]; }

int fx_date_make(long long y, long long m, long long d, fx_date *out, const char **msg) {
    if (y < 1 || y > 9999) { *msg = NULL; return 0; } /* the caller formats "year %lld is out of range" */
    if (m < 1 || m > 12) { *msg = "month must be in 1..12"; return 0; }
    if (d < 1 || d > days_in(y, (int)m)) { *msg = "day is out of range for month"; return 0; }
    *out = (fx_date){(int)y, (int)m, (int)d};
    return 1;
}

int64_t fx_date_ordinal(fx_date d) {
    int64_t y1 = d.y - 1;
    return y1 * 365 + y1 / 4 - y1 / 100 + y1 / 400 + DAYS_BEFORE_MONTH[d.m] + (d.m > 2 && is_leap(d.y)) + d.d;
}

fx_date fx_date_from_ordinal(fx_env *v, int64_t n) {
    if (n < 1 || n > MAX_ORDINAL) {
        fx_raise(v, "date value out of range");
        return (fx_date){1, 1, 1};
    }
    n -= 1;
    int64_t n400 = n / 146097; n %= 146097;
    int64_t n100 = n / 36524; n %= 36524;
    int64_t n4 = n / 1461; n %= 1461;
    int64_t n1 = n / 365; n %= 365;
    int64_t year = n400 * 400 + 1 + n100 * 100 + n4 * 4 + n1;
    if (n1 == 4 || n100 == 4) return (fx_date){(int)(year - 1), 12, 31};
    int leap = n1 == 3 && (n4 != 24 || n100 == 3);
    int month = (int)((n + 50) >> 5);
    int64_t preceding = DAYS_BEFORE_MONTH[month] + (month > 2 && leap);
    if (preceding > n) {
        month -= 1;
        preceding -= DAYS_IN_MONTH[month] + (month == 2 && leap);
    }
    return (fx_date){(int)year, month, (int)(n - preceding + 1)};
}

int fx_date_weekday(fx_date d) { return (int)((fx_date_ordinal(d) + 6) % 7); }

int fx_date_eq(fx_date a, fx_date b) { return a.y == b.y && a.m == b.m && a.d == b.d; }

/* date(y, m, d) that raises into the env. */
static fx_date make_or_raise(fx_env *v, long long y, long long m, long long d, int *ok) {
    fx_date r = {1, 1, 1};
    const char *msg = NULL;
    *ok = fx_date_make(y, m, d, &r, &msg);
    if (!*ok) {
        char buf[64];
        if (!msg) {
            snprintf(buf, sizeof buf, "year %lld is out of range", y);
            msg = buf;
        }
        fx_raise(v, msg);
    }
    return r;
}

static long long floordiv(long long a, long long b) { return a / b - ((a % b != 0) && ((a < 0) != (b < 0))); }

fx_date fx_date_add_months(fx_env *v, fx_date d, long long n) {
    long long t = (long long)d.y * 12 + d.m - 1 + n;
    long long y = floordiv(t, 12), m = t - y * 12 + 1;
    int ok;
    /* the last day of the target month = the day before the next month's 1st,
     * which is built first (so November 9999 + 1 month raises, as upstream) */
    fx_date next = make_or_raise(v, y + (m == 12), m % 12 + 1, 1, &ok);
    if (!ok) return d;
    int last = fx_date_from_ordinal(v, fx_date_ordinal(next) - 1).d;
    return make_or_raise(v, y, m, d.d < last ? d.d : last, &ok);
}

fx_date fx_date_add_years(fx_env *v, fx_date d, long long n) {
    fx_date r;
    const char *msg;
    if (fx_date_make((long long)d.y + n, d.m, d.d, &r, &msg)) return r;
    int ok;
    return make_or_raise(v, (long long)d.y + n, d.m, 28, &ok);
}

static fx_date easter(int y) {
    int a = y % 19, b = y / 100, c = y % 100;
    int d = b / 4, e = b % 4, f = (b + 8) / 25, g = (b - f + 1) / 3;
    int h = (19 * a + b - d - g + 15) % 30;
    int i = c / 4, k = c % 4;
    int l = ((32 + 2 * e + 2 * i - h - k) % 7 + 7) % 7;
    int m = (a + 11 * h + 22 * l) / 451;
    int t = h + l - 7 * m + 114;
    return (fx_date){y, t / 31, t % 31 + 1};
}

const char *fx_holiday(fx_date d) {
    static const struct { int m, d; const char *name; } fixed[] = {
        {1, 1, "Nowy Rok"}, {1, 6, "Trzech Króli"}, {5, 1, "Święto Pracy"}, {5, 3, "Święto Konstytucji 3 Maja"},
        {8, 15, "Wniebowzięcie NMP"}, {11, 1, "Wszystkich Świętych"}, {11, 11, "Święto Niepodległości"},
        {12, 25, "Boże Narodzenie"}, {12, 26, "drugi dzień Bożego Narodzenia"},
    };
    /* A later entry of upstream's table wins; the fixed days never meet
     * Easter-based ones except where checked below in table order. */
    const char *name = NULL;
    int64_t od = fx_date_ordinal(d), oe = fx_date_ordinal(easter(d.y));
    /* the table in upstream order, scanned to the end so the later name wins */
    if (d.m == 1 && d.d == 1) name = fixed[0].name;
    if (d.m == 1 && d.d == 6) name = fixed[1].name;
    if (od == oe) name = "Wielkanoc";
    if (od == oe + 1) name = "Poniedziałek Wielkanocny";
    if (d.m == 5 && d.d == 1) name = fixed[2].name;
    if (d.m == 5 && d.d == 3) name = fixed[3].name;
    if (od == oe + 49) name = "Zielone Świątki";
    if (od == oe + 60) name = "Boże Ciało";
    for (size_t i = 4; i < sizeof fixed / sizeof fixed[0]; i++)
        if (d.m == fixed[i].m && d.d == fixed[i].d) name = fixed[i].name;
    if (d.y >= 2025 && d.m == 12 && d.d == 24) name = "Wigilia Bożego Narodzenia";
    return name;
}
