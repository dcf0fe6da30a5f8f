/* Evidence spans (spec 03 §4): the span-selection vector of §4.7 exactly, the
 * masked-pair rule, the facts limit, the head-input location of §4.3 on hand-
 * checked offsets, upstream's test_evidence.py checks, and the head's math on
 * a hand-computable case.
 *
 *   test_evidence                      the unit tests
 *   test_evidence --load FILE HIDDEN   loads FILE as evidence_head.pt for a model
 *                                      of that hidden size; prints the tensors as
 *                                      JSON (f32 values, %.9g) or "error: <msg>"
 *                                      and exits 1 (tests/t_evidence_head.sh)
 *   test_evidence --load-many HIDDEN FILE...  the fuzz corpus: loaded or refused
 *                                      with a message, nothing else. */
#include "check.h"
#include "model/evidence.h"

static char *spans_json(const char *state, const bs_ev_span *s, int n) {
    bs_buf b;
    bs_buf_init(&b);
    bs_evidence_json(&b, state, strlen(state), s, n);
    return b.data;
}

static void test_vector_47(void) {
    bs_err e = {0};
    const char *state = "Ala ma kota. Kot ma Al\xc4\x99.";
    int32_t rel[16] = {0, 3, 3, 6, 6, 11, 11, 12, 12, 16, 16, 19, 19, 23, 23, 24};
    float ls[8] = {-0.6931471824645996f, -2.995732307434082f, -2.995732307434082f, -3.9120230674743652f,
                   -1.2039728164672852f, -3.5065579414367676f, -3.5065579414367676f, -3.9120230674743652f};
    float le[8] = {-3.9120230674743652f, -3.5065579414367676f, -0.9162907600402832f, -2.995732307434082f,
                   -3.9120230674743652f, -3.5065579414367676f, -0.9162907600402832f, -2.995732307434082f};
    bs_ev_span s[5];
    int n = bs_best_spans(ls, le, 8, rel, 5, s, &e);
    CHECK_INT(n, 2);
    n = bs_evidence_limit(s, n, -1);
    char *j = spans_json(state, s, n);
    CHECK_STR(j, "[{\"text\":\"Ala ma kota\",\"start\":0,\"end\":11,\"probability\":0.19999999398584362},"
                 "{\"text\":\" Kot ma Al\xc4\x99\",\"start\":12,\"end\":23,\"probability\":0.11999999516310282}]");
    free(j);
    /* facts limit 16: the second span is clipped to 16 characters */
    n = bs_best_spans(ls, le, 8, rel, 5, s, &e);
    n = bs_evidence_limit(s, n, 16);
    j = spans_json(state, s, n);
    CHECK_STR(j, "[{\"text\":\"Ala ma kota\",\"start\":0,\"end\":11,\"probability\":0.19999999398584362},"
                 "{\"text\":\" Kot\",\"start\":12,\"end\":16,\"probability\":0.11999999516310282}]");
    free(j);
    /* facts limit 12: the span starting at 12 is dropped */
    n = bs_best_spans(ls, le, 8, rel, 5, s, &e);
    n = bs_evidence_limit(s, n, 12);
    CHECK_INT(n, 1);
    CHECK_INT(s[0].end, 11);
}

/* m = 2: three valid pairs < want = 4, so the masked pair (1, 0) follows with
 * score -1e9 (probability 0) and, not overlapping, is kept as an empty span. */
static void test_masked_pairs(void) {
    bs_err e = {0};
    int32_t rel[4] = {0, 3, 3, 6};
    float l[2] = {-1.0f, -1.0f};
    bs_ev_span s[5];
    int n = bs_best_spans(l, l, 2, rel, 5, s, &e);
    CHECK_INT(n, 3);
    char *j = spans_json("abcdef", s, n);
    CHECK_STR(j, "[{\"text\":\"abc\",\"start\":0,\"end\":3,\"probability\":0.1353352832366127},"
                 "{\"text\":\"def\",\"start\":3,\"end\":6,\"probability\":0.1353352832366127},"
                 "{\"text\":\"\",\"start\":3,\"end\":3,\"probability\":0.0}]");
    free(j);
    /* m = 1: one valid pair, want = 1 */
    n = bs_best_spans(l, l, 1, rel, 5, s, &e);
    CHECK_INT(n, 1);
    CHECK_INT(s[0].start, 0);
    CHECK_INT(s[0].end, 3);
}

/* Upstream tests/test_evidence.py: a peaked distribution returns the sentence
 * with probability > 0.99; random scores never give an empty span or one
 * longer than 80 tokens; spans are sorted and do not overlap. */
static void test_upstream_checks(void) {
    bs_err e = {0};
    const char *state = "Okres wypowiedzenia wynosi trzy miesi\xc4\x85" "ce. Strony podpisa\xc5\x82y umow\xc4\x99.";
    int32_t rel[20] = {0, 5, 5, 19, 19, 26, 26, 31, 31, 40, 40, 41, 41, 48, 48, 59, 59, 66, 66, 67};
    float ls[10], le[10];
    for (int i = 0; i < 10; i++) ls[i] = le[i] = -20.0f;
    ls[0] = -0.0001f;
    le[4] = -0.0001f;
    bs_ev_span s[5];
    int n = bs_evidence_limit(s, bs_best_spans(ls, le, 10, rel, 5, s, &e), -1);
    CHECK(n >= 1);
    char *j = spans_json(state, s, 1);
    CHECK_CONTAINS(j, "\"text\":\"Okres wypowiedzenia wynosi trzy miesi\xc4\x85" "ce\"");
    free(j);
    CHECK(s[0].p > 0.99);
    /* random scores over 300 tokens of 1 character */
    enum { M = 300 };
    static int32_t r2[2 * M];
    static float a[M], b[M];
    for (int i = 0; i < M; i++) { r2[2 * i] = i; r2[2 * i + 1] = i + 1; }
    uint32_t x = 12345;
    int bad = 0;
    for (int round = 0; round < 50; round++) {
        for (int i = 0; i < M; i++) {
            x = x * 1664525u + 1013904223u;
            a[i] = -(float)(x >> 8) / (float)(1 << 24) * 10.0f;
            x = x * 1664525u + 1013904223u;
            b[i] = -(float)(x >> 8) / (float)(1 << 24) * 10.0f;
        }
        int k = bs_best_spans(a, b, M, r2, 5, s, &e);
        bad |= k < 1;
        for (int i = 0; i < k; i++) {
            bad |= s[i].end <= s[i].start || s[i].end - s[i].start > BS_EV_MAX_SPAN;
            if (i) bad |= s[i].p > s[i - 1].p;
            for (int t = 0; t < i; t++) bad |= !(s[i].end <= s[t].start || s[i].start >= s[t].end);
        }
    }
    CHECK_INT(bad, 0);
}

/* 03 §4.3 on hand-checked offsets: the first LF + state; tokens inside; empty-
 * span tokens between state tokens are read too; characters, not bytes. */
static void test_locate(void) {
    bs_err e = {0};
    /* prompt "<s>X\nŻó\xc5\x82w ma\nY": state "Żółw ma" starts at character 5 */
    const char *prompt = "<s>X\n\xc5\xbb\xc3\xb3\xc5\x82w ma\nY";
    const char *state = "\xc5\xbb\xc3\xb3\xc5\x82w ma";
    /* tokens: <s> (0,3) X (3,4) \n (4,5) byte tokens of Ż (5,5) (5,6), "ółw" (6,9), "▁ma" (9,12), \n (12,13), Y (13,14) */
    int32_t offs[] = {0, 3, 3, 4, 4, 5, 5, 5, 5, 6, 6, 9, 9, 12, 12, 13, 13, 14};
    int32_t t0, t1, *rel = NULL;
    int r = bs_evidence_locate(prompt, strlen(prompt), state, strlen(state), offs, 9, &t0, &t1, &rel, &e);
    CHECK_INT(r, 1);
    CHECK_INT(t0, 4);
    CHECK_INT(t1, 7);
    int32_t want[6] = {0, 1, 1, 4, 4, 7};
    CHECK(rel && !memcmp(rel, want, sizeof want));
    free(rel);
    /* the state is found only after an LF: a leading copy without one is skipped */
    const char *p2 = "ab\nab";
    int32_t o2[] = {0, 2, 2, 3, 3, 5};
    r = bs_evidence_locate(p2, 5, "ab", 2, o2, 3, &t0, &t1, &rel, &e);
    CHECK_INT(r, 1);
    CHECK_INT(t0, 2);
    free(rel);
    r = bs_evidence_locate("abab", 4, "ab", 2, o2, 2, &t0, &t1, &rel, &e);
    CHECK_INT(r, 0);
    /* a token straddling the state's end is not a state token */
    int32_t o3[] = {0, 2, 2, 5};
    r = bs_evidence_locate("x\nabc", 5, "ab", 2, o3, 2, &t0, &t1, &rel, &e);
    CHECK_INT(r, 0);
}

/* The head on d = 2, k = 1: LN of any row (u, v), u != v, is (±1, ∓1)·c with
 * c = 1/sqrt(1 + 1e-5/((u-v)/2)^2); with all weights 1 the bilinear term is
 * zero, so s_i = bs·LN(h_i) and ls follows in closed form (to f32 rounding). */
static void test_head_math(void) {
    bs_err e = {0};
    float ws[2] = {1, 1}, us[2] = {1, 1}, we[2] = {1, 1}, ue[2] = {1, 1}, bsv[2] = {2, 0}, bev[2] = {0, 1};
    bs_evidence_head h = {.d = 2, .k = 1, .ws = ws, .us = us, .we = we, .ue = ue, .bs = bsv, .be = bev};
    float hs[4] = {1, 3, 5, 1}, q[2] = {0, 1}, ls[2], le[2];
    CHECK_INT(bs_evidence_scores(&h, hs, 2, q, ls, le, &e), 0);
    double c1 = 1.0 / sqrt(1.0 + 1e-5), c2 = 1.0 / sqrt(1.0 + 1e-5 / 4.0);
    /* row 0 -> (-c1, c1), row 1 -> (c2, -c2); s = (-2 c1, 2 c2), e = (c1, -c2) */
    double s0 = -2 * c1, s1 = 2 * c2, e0 = c1, e1 = -c2;
    double ms = s0 > s1 ? s0 : s1, me = e0 > e1 ? e0 : e1;
    double lse_s = ms + log(exp(s0 - ms) + exp(s1 - ms)), lse_e = me + log(exp(e0 - me) + exp(e1 - me));
    CHECK_NEAR(ls[0], (float)(s0 - lse_s), 1e-6);
    CHECK_NEAR(ls[1], (float)(s1 - lse_s), 1e-6);
    CHECK_NEAR(le[0], (float)(e0 - lse_e), 1e-6);
    CHECK_NEAR(le[1], (float)(e1 - lse_e), 1e-6);
    hs[1] = NAN;
    CHECK_INT(bs_evidence_scores(&h, hs, 2, q, ls, le, &e), BS_EINTERNAL);
}

static int load_main(const char *path, int hidden) {
    bs_evidence_head h;
    bs_err e = {0};
    if (bs_evidence_head_load(&h, path, hidden, &e) < 0) {
        printf("error: %s\n", e.msg);
        return 1;
    }
    const char *names[6] = {"ws.weight", "us.weight", "we.weight", "ue.weight", "bs.weight", "be.weight"};
    const float *data[6] = {h.ws, h.us, h.we, h.ue, h.bs, h.be};
    printf("{\"d\":%d,\"k\":%d,\"tensors\":{", h.d, h.k);
    for (int t = 0; t < 6; t++) {
        int rows = t < 4 ? h.k : 1;
        printf("%s\"%s\":{\"shape\":[%d,%d],\"values\":[", t ? "," : "", names[t], rows, h.d);
        for (int i = 0; i < rows * h.d; i++) printf("%s%.9g", i ? "," : "", data[t][i]);
        printf("]}");
    }
    printf("}}\n");
    bs_evidence_head_free(&h);
    return 0;
}

/* --load-many HIDDEN FILE...: every file loads or is refused with a message
 * naming evidence_head.pt (run under ASan+UBSan by the asan suite). */
static int load_many(int hidden, int n, char **files) {
    int loaded = 0, refused = 0, bad = 0;
    for (int i = 0; i < n; i++) {
        bs_evidence_head h;
        bs_err e = {0};
        int rc = bs_evidence_head_load(&h, files[i], hidden, &e);
        if (rc == 0) { loaded++; bs_evidence_head_free(&h); }
        else if ((rc == BS_EFORMAT || rc == BS_EIO) && !strncmp(e.msg, "evidence_head.pt: ", 18)) refused++;
        else { bad++; printf("%s: code %d: %s\n", files[i], rc, e.msg); }
    }
    printf("%d files: %d loaded, %d refused with a message, %d other outcomes\n", n, loaded, refused, bad);
    return bad ? 1 : 0;
}

int main(int argc, char **argv) {
    if (argc == 4 && !strcmp(argv[1], "--load")) return load_main(argv[2], atoi(argv[3]));
    if (argc >= 3 && !strcmp(argv[1], "--load-many")) return load_many(atoi(argv[2]), argc - 3, argv + 3);
    test_vector_47();
    test_masked_pairs();
    test_upstream_checks();
    test_locate();
    test_head_math();
    return check_report("test_evidence");
}
