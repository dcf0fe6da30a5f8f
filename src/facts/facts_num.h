/* Numbers and dates of facts "auto" (spec 03 §3.3): an exact decimal type with
 * Python `decimal.Decimal` default-context arithmetic (every + − × ÷ result
 * rounded to 28 significant digits, ROUND_HALF_EVEN; quantize to 0.01
 * ROUND_HALF_UP failing past 28 digits) and `datetime.date` (years 1..9999,
 * proleptic Gregorian) with CPython's error messages.
 *
 * Errors are sticky: the first Python exception of a computation is kept in
 * the env (its message is what upstream reports), later operations still
 * return well-formed values and the caller discards the result at the end.
 * All values live in the env's arena and die with it. */
#ifndef BS_FACTS_NUM_H
#define BS_FACTS_NUM_H

#include <stddef.h>
#include <stdint.h>

#include "base/util.h"

typedef struct fx_chunk fx_chunk;

typedef struct fx_env {
    fx_chunk *chunks;
    int oom;          /* an allocation failed */
    int raised;       /* a Python exception was raised; msg holds its text */
    char msg[64];
} fx_env;

void fx_env_init(fx_env *v);
void fx_env_free(fx_env *v);
void *fx_alloc(fx_env *v, size_t n);
/* Records a Python exception unless one is already recorded. */
void fx_raise(fx_env *v, const char *msg);

/* (-1)^neg · d · 10^exp with d the little-endian digits d[0..n), no zero at
 * either end (zero: n = 0). */
typedef struct fx_dec {
    int neg;
    size_t n;
    int64_t exp;
    const uint8_t *d;
} fx_dec;

/* The exact value of a matched number: \d characters (any Unicode digit),
 * ' ' and NBSP skipped, ',' or '.' as the decimal point. */
fx_dec fx_dec_parse(fx_env *v, const uint32_t *t, size_t n);
fx_dec fx_dec_u64(fx_env *v, uint64_t x);
fx_dec fx_dec_add(fx_env *v, fx_dec a, fx_dec b);
fx_dec fx_dec_sub(fx_env *v, fx_dec a, fx_dec b);
fx_dec fx_dec_mul(fx_env *v, fx_dec a, fx_dec b);
/* b's coefficient must have at most 18 digits and be nonzero (the VAT factor). */
fx_dec fx_dec_div(fx_env *v, fx_dec a, fx_dec b);
int fx_dec_cmp(fx_dec a, fx_dec b);
int fx_dec_is_integral(fx_dec a);
/* quantize(Decimal("0.01"), ROUND_HALF_UP); raises InvalidOperation past 28 digits. */
fx_dec fx_dec_q(fx_env *v, fx_dec a);
/* amt(x): `1 234,50 zł`; num(x): `2 000 000` or `139 000,50`. */
void fx_put_amt(fx_env *v, bs_buf *b, fx_dec x);
void fx_put_num(fx_env *v, bs_buf *b, fx_dec x);

typedef struct fx_date {
    int y, m, d;
} fx_date;

/* datetime.date(y, m, d): 1 when valid; 0 with *msg the CPython ValueError text. */
int fx_date_make(long long y, long long m, long long d, fx_date *out, const char **msg);
int64_t fx_date_ordinal(fx_date d);
/* date.fromordinal / date + timedelta: raises "date value out of range". */
fx_date fx_date_from_ordinal(fx_env *v, int64_t n);
int fx_date_weekday(fx_date d); /* Monday 0 */
int fx_date_eq(fx_date a, fx_date b);
/* d + n calendar months (day clamped), raising as CPython's date() does. */
fx_date fx_date_add_months(fx_env *v, fx_date d, long long n);
/* d with the year + n (29 February -> 28 February). */
fx_date fx_date_add_years(fx_env *v, fx_date d, long long n);
/* Polish statutory day off of d's year, or NULL (03 §3.6 step 1). */
const char *fx_holiday(fx_date d);

#endif
