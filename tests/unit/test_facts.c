/* facts: "auto" (spec 03 §3): every vector of §3.9 (tests/data/facts_vectors.jsonl,
 * extracted from the spec's table) and the vectors worked out by hand from
 * basal-rs facts.rs (tests/data/facts_vectors_rust.jsonl: rate order, value
 * coverage, error order, month overflow, ...), the injection format of §3.2, the regex
 * engine's Python semantics on hand-checked cases, and the decimal type on
 * values worked out by hand from the decimal module's rules.
 *
 *   test_facts                run the checks
 *   test_facts --stdin        read one JSON string (a state) per line; print one
 *                             JSON object per line, {"lines": [...]} or
 *                             {"error": "..."} (tests/e2e/t_facts_ref.sh compares it
 *                             with tools/facts_ref.py)
 *   test_facts --stdin --memo the same with every regex search through the
 *                             visited-state bitmap (the hostile-state path)
 *   test_facts --classes      print the code point ranges of \d, \w, \s
 *   test_facts --bench FILE N time N runs of facts on FILE's text (ms per run) */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "facts/facts.h"
#include "facts/facts_num.h"
#include "facts/facts_re.h"
#include "protocol/pyjson.h"
#include "tokenizer/tokenizer.h"
#include "base/utf8.h"
#include "base/util.h"
#include "engine/plan.h"
#include "model/basal_model.h"

#define VECTORS "tests/data/facts_vectors.jsonl"
#define VECTORS_RUST "tests/data/facts_vectors_rust.jsonl"

/* The expected injected state of §3.2 for the given lines. */
static void expected_inject(bs_buf *b, const char *state, size_t len, const bj_value *lines) {
    bs_buf_put(b, state, len);
    if (!lines->n) return;
    bs_buf_puts(b, "\n\nFakty pomocnicze (wyliczone automatycznie, bez oceny prawnej):");
    for (size_t i = 0; i < lines->n; i++) {
        bs_buf_puts(b, "\n- ");
        bs_buf_put(b, lines->items[i]->str, lines->items[i]->len);
    }
}

/* Every line of path ({"state", "lines"} or {"state", "error"}; other keys
 * are notes) through bs_facts_inject; want = the number of lines. */
static void test_vectors(const char *path, int want_count) {
    char *data = NULL;
    size_t len = 0;
    bs_err e = {0};
    if (bs_read_file(path, &data, &len, &e) < 0) {
        fprintf(stderr, "cannot read %s\n", path);
        CHECK(!"cannot read a vector file");
        return;
    }
    int count = 0;
    for (char *line = data, *next; line && *line; line = next) {
        next = strchr(line, '\n');
        if (next) *next++ = 0;
        bj_value *v = NULL;
        if (bj_parse(line, strlen(line), NULL, &v, &e) < 0) { CHECK(!"bad vector line"); continue; }
        const bj_value *st = bj_get(v, "state"), *lines = bj_get(v, "lines"), *err = bj_get(v, "error");
        bs_buf out, msg, want;
        bs_buf_init(&out);
        bs_buf_init(&msg);
        bs_buf_init(&want);
        int rc = bs_facts_inject(NULL, st->str, st->len, &out, &msg);
        if (err) {
            CHECK_INT(rc, 1);
            CHECK_STR(msg.data, err->str);
        } else {
            CHECK_INT(rc, 0);
            expected_inject(&want, st->str, st->len, lines);
            CHECK_STR(out.data, want.data);
            /* no facts: the state itself, byte for byte */
            if (!lines->n) CHECK(out.len == st->len && !memcmp(out.data, st->str, st->len));
        }
        count++;
        bs_buf_free(&out);
        bs_buf_free(&msg);
        bs_buf_free(&want);
        bj_free(v);
    }
    CHECK_INT(count, want_count);
    free(data);
}

/* The §3.2 example, written out. */
static void test_format(void) {
    const char *s = "Doręczono 20 marca 2027 r., termin 7 dni.";
    bs_buf out, msg;
    bs_buf_init(&out);
    bs_buf_init(&msg);
    CHECK_INT(bs_facts_inject(NULL, s, strlen(s), &out, &msg), 0);
    CHECK_STR(out.data, "Doręczono 20 marca 2027 r., termin 7 dni.\n\n"
                        "Fakty pomocnicze (wyliczone automatycznie, bez oceny prawnej):\n"
                        "- 20 marca 2027 r. to sobota\n"
                        "- 20 marca 2027 r. + 7 dni (kalendarzowo) = 27 marca 2027 r. (sobota)");
    bs_buf_free(&out);
    /* the other upstream checks of §3.9 */
    const char *two = "Cennik: 174,00 zł za sztukę przy zamówieniu poniżej 20 szt.; 156,60 zł od 20 do 99 szt.; "
                      "139,20 zł od 100 szt. Dostawa kosztuje 39,00 zł, a przy wartości towaru co najmniej "
                      "2 000,00 zł jest bezpłatna. Klient zamawia 98 szt., a potem 120 szt.";
    bs_buf_init(&out);
    CHECK_INT(bs_facts_inject(NULL, two, strlen(two), &out, &msg), 0);
    CHECK(!strstr(out.data, " × 156,60 zł"));
    bs_buf_free(&out);
    const char *vat2 = "Faktura na 1 000,00 zł netto. Stawka VAT 23%. Usługa: 500,00 zł netto, VAT 8%.";
    bs_buf_init(&out);
    CHECK_INT(bs_facts_inject(NULL, vat2, strlen(vat2), &out, &msg), 0);
    CHECK(strstr(out.data, "Fakty pomocnicze") != NULL);
    CHECK(!strstr(out.data, " netto × "));
    bs_buf_free(&out);
    /* an empty state, a state of only whitespace */
    bs_buf_init(&out);
    CHECK_INT(bs_facts_inject(NULL, "", 0, &out, &msg), 0);
    CHECK_INT(out.len, 0);
    bs_buf_free(&out);
    bs_buf_free(&msg);
}

static int re_find(const char *pat, const char *text, size_t from, size_t *caps) {
    fx_re *re = fx_re_compile(pat);
    if (!re) return -2;
    uint32_t *t = NULL;
    size_t n = 0;
    bs_utf8_decode(text, strlen(text), &t, &n, NULL);
    int r = fx_re_search(re, t, n, from, caps);
    free(t);
    fx_re_free(re);
    return r;
}

static void test_regex(void) {
    size_t c[12];
    /* leftmost-first alternation, not longest: Python's 'miesiąc' before 'miesiące' loses to \b */
    CHECK_INT(re_find("(ab|abc)c", "abcc", 0, c), 1);
    CHECK_INT(c[3], 2); /* group 1 = "ab" */
    CHECK_INT(re_find("\\b(\\d{1,3}) (miesiąc|miesiące)\\b", "2 miesiące", 0, c), 1);
    CHECK_INT(c[1], 10);
    /* greedy with backtracking */
    CHECK_INT(re_find("(\\d{1,3}(?: \\d{3})+|\\d+) zł", "12 345 678 zł", 0, c), 1);
    CHECK_INT(c[0], 0);
    CHECK_INT(c[3], 10);
    /* lookbehind: a digit or comma before refuses the start, the next start is tried */
    CHECK_INT(re_find("(?<![\\d,])\\b(\\d+) zł", "1,50 zł", 0, c), 0);
    CHECK_INT(re_find("(?<![\\d,])(?<!\\d[ \\u00a0])\\b(\\d{1,4})×", "3 4×", 0, c), 0);
    CHECK_INT(re_find("(?<![\\d,])(?<!\\d[ \\u00a0])\\b(\\d{1,4})×", "a 4×", 0, c), 1);
    /* \b and \w are Unicode: 'ą' is a word character, NBSP and '–' are not */
    CHECK_INT(re_find("\\brok\\b", "wyrok", 0, c), 0);
    CHECK_INT(re_find("\\brok\\b", "roką", 0, c), 0);
    CHECK_INT(re_find("\\brok\\b", "\u00a0rok–", 0, c), 1);
    /* \d is every Nd digit: Arabic-Indic ٣ */
    CHECK_INT(re_find("(\\d{2})", "x\u0663\u0664", 0, c), 1);
    CHECK_INT(fx_digit_value(0x0664), 4);
    CHECK_INT(fx_digit_value(0x1D7D9), 1); /* mathematical double-struck digit one */
    /* lookahead is not consumed */
    CHECK_INT(re_find("[.;!?](?=\\s+[A-ZĄĆĘŁŃÓŚŹŻ„\"(])|\\n", "a. b. Ćma", 0, c), 1);
    CHECK_INT(c[0], 4);
    CHECK_INT(c[1], 5);
    /* {m,n} alternatives and optional groups report unset groups */
    CHECK_INT(re_find("(\\d)(?: do (\\d)|-(\\d))? x", "5-7 x", 0, c), 1);
    CHECK(c[4] == FX_NOPOS && c[6] == 2);
    /* syntax outside the subset is refused, not misread */
    CHECK(fx_re_compile("a.b") == NULL);
    CHECK(fx_re_compile("[^a]") == NULL);
    CHECK(fx_re_compile("a+?") == NULL);
    CHECK(fx_re_compile("(?<!a+)b") == NULL);
    CHECK(fx_re_compile("(a") == NULL);
}

static fx_dec dec_s(fx_env *v, const char *s) {
    uint32_t *t = NULL;
    size_t n = 0;
    bs_utf8_decode(s, strlen(s), &t, &n, NULL);
    fx_dec d = fx_dec_parse(v, t, n);
    free(t);
    return d;
}

static void amt_is(fx_env *v, fx_dec x, const char *want) {
    bs_buf b;
    bs_buf_init(&b);
    fx_put_amt(v, &b, x);
    CHECK_STR(b.data, want);
    bs_buf_free(&b);
}

static void test_decimal(void) {
    fx_env v;
    fx_env_init(&v);
    /* 1000 = 1000.00 numerically; grouping and the decimal comma */
    CHECK_INT(fx_dec_cmp(dec_s(&v, "1 000"), dec_s(&v, "1000,00")), 0);
    amt_is(&v, dec_s(&v, "8754000"), "8 754 000,00 zł");
    amt_is(&v, dec_s(&v, "4,31"), "4,31 zł");
    amt_is(&v, fx_dec_sub(&v, dec_s(&v, "0"), dec_s(&v, "1234,5")), "-1 234,50 zł");
    /* ROUND_HALF_UP in quantize: 0.005 -> 0.01, 2.675 -> 2.68 */
    amt_is(&v, dec_s(&v, "0,005"), "0,01 zł");
    amt_is(&v, dec_s(&v, "2,675"), "2,68 zł");
    /* 1000 / 1.23 = 813.0081300813008130081300813 (28 digits, half even), q -> 813.01 */
    fx_dec k = dec_s(&v, "1.23");
    amt_is(&v, fx_dec_div(&v, dec_s(&v, "1000"), k), "813,01 zł");
    /* 28-digit rounding of a product (Python: 1.050000000000000000000000000E+28):
     * 9999999999999999999999999999 * 1.05 = 10499999999999999999999999998.95 */
    fx_dec big = fx_dec_mul(&v, dec_s(&v, "9999999999999999999999999999"), dec_s(&v, "1.05"));
    CHECK_INT(fx_dec_cmp(big, dec_s(&v, "10500000000000000000000000000")), 0);
    CHECK(!v.raised);
    /* half even on an exact tie: 0.5 ulp at 28 digits (…5 followed by nothing) */
    fx_dec tie = fx_dec_add(&v, dec_s(&v, "1000000000000000000000000002"), dec_s(&v, "0,5"));
    CHECK_INT(fx_dec_cmp(tie, dec_s(&v, "1000000000000000000000000002")), 0);
    fx_dec tie2 = fx_dec_add(&v, dec_s(&v, "1000000000000000000000000003"), dec_s(&v, "0,5"));
    CHECK_INT(fx_dec_cmp(tie2, dec_s(&v, "1000000000000000000000000004")), 0);
    /* quantize past 28 digits: 10^26 raises InvalidOperation, 10^26 - 0.01 does not */
    amt_is(&v, dec_s(&v, "99999999999999999999999999,99"), "99 999 999 999 999 999 999 999 999,99 zł");
    CHECK(!v.raised);
    fx_dec_q(&v, dec_s(&v, "100000000000000000000000000"));
    CHECK(v.raised);
    CHECK_STR(v.msg, "[<class 'decimal.InvalidOperation'>]");
    fx_env_free(&v);
}

static void test_dates(void) {
    fx_env v;
    fx_env_init(&v);
    fx_date d;
    const char *msg;
    CHECK(!fx_date_make(2026, 2, 29, &d, &msg));
    CHECK_STR(msg, "day is out of range for month");
    CHECK(fx_date_make(2024, 2, 29, &d, &msg));
    CHECK_INT(fx_date_weekday(d), 3); /* Thursday */
    fx_date y = fx_date_add_years(&v, d, 1);
    CHECK(y.y == 2025 && y.m == 2 && y.d == 28);
    fx_date m = fx_date_add_months(&v, (fx_date){2024, 1, 31}, 1);
    CHECK(m.y == 2024 && m.m == 2 && m.d == 29);
    CHECK(!v.raised);
    /* December 9999 + 1 month: year 10000 */
    fx_date_add_months(&v, (fx_date){9999, 12, 1}, 1);
    CHECK_STR(v.msg, "year 10000 is out of range");
    fx_env_free(&v);
    fx_env_init(&v);
    fx_date_from_ordinal(&v, fx_date_ordinal((fx_date){1, 1, 2}) - 5);
    CHECK_STR(v.msg, "date value out of range");
    fx_env_free(&v);
    /* holidays: Easter 2026 is 5 April; Boże Ciało = Easter + 60 = 4 June */
    CHECK_STR(fx_holiday((fx_date){2026, 4, 5}), "Wielkanoc");
    CHECK_STR(fx_holiday((fx_date){2026, 6, 4}), "Boże Ciało");
    CHECK(fx_holiday((fx_date){2024, 12, 24}) == NULL);
    CHECK_STR(fx_holiday((fx_date){2025, 12, 24}), "Wigilia Bożego Narodzenia");
}

/* The state cache's prefix (04 §3 P4) of a facts request: both questions of
 * one state share it, and it covers the appended facts (the injected text is
 * the state for packing and for the cache). Needs the tiny-bias fixture's
 * manifests and tokenizer (no weights). */
static void test_plan_state_len(void) {
    char dir[1024];
    snprintf(dir, sizeof dir, "%s/tiny-bias", check_env("FIXTURES", "build/fixtures"));
    bs_basal_model m;
    bs_err e = {0};
    if (bs_basal_load(&m, dir, NULL, 0, &e) < 0) {
        fprintf(stderr, "test_facts: %s\n", e.msg);
        CHECK(!"tiny-bias fixture");
        return;
    }
    const char *state = "Zamówienie: 3 × 465,50 zł netto oraz 2 szt. × 1 200,00 zł netto. Stawka VAT 23%. Budżet "
                        "działu na zakupy wynosi 5 000,00 zł, wykorzystano 1 800,00 zł.";
    bs_buf body, inj, msg;
    bs_buf_init(&body);
    bs_buf_init(&inj);
    bs_buf_init(&msg);
    bs_buf_puts(&body, "{\"model\": \"m\", \"state\": ");
    bj_put_string(&body, state, strlen(state));
    bs_buf_puts(&body, ", \"facts\": \"auto\", \"questions\": {\"a\": {\"type\": \"noul\", \"instructions\": "
                       "\"Czy budżet wystarczy?\"}, \"b\": {\"type\": \"choice\", \"instructions\": \"Co dalej?\", "
                       "\"criteria\": [\"kupić\", \"czekać\", \"odrzucić\"]}}}");
    CHECK_INT(bs_facts_inject(NULL, state, strlen(state), &inj, &msg), 0);
    bj_value *v = NULL;
    bs_plan p;
    bs_reply rep;
    bs_reply_init(&rep);
    bs_letter_cache lc;
    bs_letter_cache_init(&lc);
    CHECK_INT(bj_parse(body.data, body.len, NULL, &v, &e), 0);
    int rc = bs_plan_request(&p, v, BS_DIALECT_SYSTEMONE, &m, &lc, NULL, 1, &rep, &e);
    if (rc) fprintf(stderr, "plan: %s %.*s\n", e.msg, (int)rep.body.len, rep.body.data ? rep.body.data : "");
    CHECK_INT(rc, 0);
    if (rc == 0) {
        CHECK_INT(p.n_items, 2);
        CHECK(p.req->state.len == inj.len && !memcmp(p.req->state.s, inj.data, inj.len));
        for (size_t i = 0; i < p.n_items; i++) {
            const bs_order *o = &p.items[i].orders[0];
            const char *at = strstr(o->prompt.data, inj.data);
            const char *hdr = at ? strstr(at, "Fakty pomocnicze") : NULL;
            CHECK(at && hdr);
            if (!at || !hdr) continue;
            size_t end_c = 0, hdr_c = 0; /* code point offsets in the prompt */
            for (const char *c = o->prompt.data; c < at + inj.len; c++) {
                if ((*c & 0xC0) == 0x80) continue;
                if (c < hdr) hdr_c++;
                end_c++;
            }
            int32_t *ids = NULL, *off = NULL;
            size_t n = 0;
            CHECK_INT(bs_tokenizer_encode(m.tok, o->prompt.data, o->prompt.len, &ids, &n, &off, &e), 0);
            size_t k_end = 0, k_hdr = 0; /* tokens wholly before the state's end / the facts header */
            for (size_t t = 0; t < n; t++) {
                if ((size_t)off[2 * t + 1] <= end_c) k_end = t + 1;
                if ((size_t)off[2 * t + 1] <= hdr_c) k_hdr = t + 1;
            }
            /* the shared prefix reaches the end of the facts (one boundary token of slack) */
            CHECK((size_t)p.items[i].state_len + 1 >= k_end);
            CHECK(k_end > k_hdr + 20);
            CHECK(p.items[i].state_len == p.items[0].state_len);
            CHECK(!memcmp(o->ids, p.items[0].orders[0].ids, (size_t)p.items[0].state_len * sizeof *o->ids));
            free(ids);
            free(off);
        }
        bs_plan_free(&p);
    }
    bs_reply_free(&rep);
    bs_letter_cache_free(&lc);
    bs_buf_free(&body);
    bs_buf_free(&inj);
    bs_buf_free(&msg);
    bs_basal_free(&m);
}

/* ---- tool modes ------------------------------------------------------------ */

static int stdin_mode(void) {
    size_t cap = 1 << 16, len = 0;
    char *line = malloc(cap);
    int c, rc = 0;
    if (!line) return 1;
    bs_buf out;
    bs_buf_init(&out);
    while ((c = getchar()) != EOF) {
        if (c != '\n') {
            if (len + 1 >= cap) {
                char *p = realloc(line, cap *= 2);
                if (!p) { rc = 1; break; }
                line = p;
            }
            line[len++] = (char)c;
            continue;
        }
        bj_value *v = NULL;
        bs_err e = {0};
        if (bj_parse(line, len, NULL, &v, &e) < 0 || v->type != BJ_STRING) {
            fprintf(stderr, "test_facts --stdin: not a JSON string: %.*s\n", (int)len, line);
            bj_free(v);
            rc = 1;
            break;
        }
        bs_buf lines, msg;
        bs_buf_init(&lines);
        bs_buf_init(&msg);
        int r = bs_facts_lines(v->str, v->len, &lines, &msg);
        if (r == 1) {
            bs_buf_puts(&out, "{\"error\": ");
            bj_put_string(&out, msg.data, msg.len);
            bs_buf_puts(&out, "}\n");
        } else if (r == 0) {
            bs_buf_puts(&out, "{\"lines\": [");
            size_t a = 0;
            int first = 1;
            for (size_t i = 0; i < lines.len; i++)
                if (lines.data[i] == '\n') {
                    if (!first) bs_buf_puts(&out, ", ");
                    first = 0;
                    bj_put_string(&out, lines.data + a, i - a);
                    a = i + 1;
                }
            bs_buf_puts(&out, "]}\n");
        } else {
            fprintf(stderr, "test_facts --stdin: facts failed with %d\n", r);
            rc = 1;
        }
        bs_buf_free(&lines);
        bs_buf_free(&msg);
        bj_free(v);
        len = 0;
        if (rc) break;
    }
    fwrite(out.data ? out.data : "", 1, out.len, stdout);
    bs_buf_free(&out);
    free(line);
    return rc;
}

static int classes_mode(void) {
    int (*fn[3])(uint32_t) = {fx_is_digit, fx_is_word, fx_is_space};
    const char *names[3] = {"d", "w", "s"};
    for (int k = 0; k < 3; k++) {
        printf("%s", names[k]);
        for (uint32_t c = 0; c <= 0x110000; c++) {
            int in = c < 0x110000 && fn[k](c), prev = c > 0 && fn[k](c - 1);
            if (in && !prev) printf(" %X", c);
            if (!in && prev) printf("-%X", c - 1);
        }
        printf("\n");
    }
    return 0;
}

static int bench_mode(const char *path, int runs) {
    char *data = NULL;
    size_t len = 0;
    bs_err e = {0};
    if (bs_read_file(path, &data, &len, &e) < 0) { fprintf(stderr, "cannot read %s\n", path); return 1; }
    double best = 1e30, total = 0;
    size_t nlines = 0;
    for (int i = 0; i < runs; i++) {
        bs_buf out, msg;
        bs_buf_init(&out);
        bs_buf_init(&msg);
        double t0 = bs_now_ms();
        int rc = bs_facts_inject(NULL, data, len, &out, &msg);
        double dt = bs_now_ms() - t0;
        if (rc < 0) { fprintf(stderr, "facts failed %d\n", rc); return 1; }
        nlines = 0;
        for (size_t j = len; j < out.len; j++) nlines += out.data[j] == '\n';
        total += dt;
        if (dt < best) best = dt;
        bs_buf_free(&out);
        bs_buf_free(&msg);
    }
    printf("facts on %s (%zu bytes): best %.2f ms, mean %.2f ms over %d runs, %zu lines added\n", path, len, best,
           total / runs, runs, nlines ? nlines - 2 : 0);
    free(data);
    return 0;
}

int main(int argc, char **argv) {
    if (argc > 2 && !strcmp(argv[1], "--stdin") && !strcmp(argv[2], "--memo")) {
        fx_re_set_step_budget(0); /* every search through the visited-state bitmap */
        return stdin_mode();
    }
    if (argc > 1 && !strcmp(argv[1], "--stdin")) return stdin_mode();
    if (argc > 1 && !strcmp(argv[1], "--classes")) return classes_mode();
    if (argc > 3 && !strcmp(argv[1], "--bench")) return bench_mode(argv[2], atoi(argv[3]));
    test_vectors(VECTORS, 31);
    test_vectors(VECTORS_RUST, 15);
    test_format();
    test_regex();
    test_decimal();
    test_dates();
    test_plan_state_len();
    return check_report("test_facts");
}
