/* Evidence spans (spec 03 §4): the span-selection vector of §4.7 exactly, the
 * masked-pair rule, the facts limit, the head-input location of §4.3 on hand-
 * checked offsets, upstream's test_evidence.py checks, the head's math on
 * a hand-computable case, and the head reader on archives assembled by hand
 * from the format of 05 §14 E2 (a valid one and broken ones).
 *
 *   test_evidence                      the unit tests
 *   test_evidence --load FILE HIDDEN   loads FILE as evidence_head.pt for a model
 *                                      of that hidden size; prints the tensors as
 *                                      JSON (f32 values, %.9g) or "error: <msg>"
 *                                      and exits 1 (tests/e2e/t_evidence_head.sh)
 *   test_evidence --load-many HIDDEN FILE...  the fuzz corpus: loaded or refused
 *                                      with a message, nothing else. */
#include "check.h"
#include "engine/evidence_run.h"
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

/* Upstream tests/unit/test_evidence.py: a peaked distribution returns the sentence
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
 * span tokens are never the first state token but are read between state
 * tokens; characters, not bytes. */
static void test_locate(void) {
    bs_err e = {0};
    /* prompt "<s>X\nŻó\xc5\x82w ma\nY": state "Żółw ma" starts at character 5 */
    const char *prompt = "<s>X\n\xc5\xbb\xc3\xb3\xc5\x82w ma\nY";
    const char *state = "\xc5\xbb\xc3\xb3\xc5\x82w ma";
    /* tokens as Hugging Face reports them when Ż falls back to bytes: <s> (0,3)
       X (3,4) \n (4,5), both byte tokens of Ż (5,6), "ółw" (6,9), "▁ma" (9,12),
       \n (12,13), Y (13,14): the state starts at the first byte token */
    int32_t offs[] = {0, 3, 3, 4, 4, 5, 5, 6, 5, 6, 6, 9, 9, 12, 12, 13, 13, 14};
    int32_t t0, t1, *rel = NULL;
    int r = bs_evidence_locate(prompt, strlen(prompt), state, strlen(state), offs, 9, &t0, &t1, &rel, &e);
    CHECK_INT(r, 1);
    CHECK_INT(t0, 3);
    CHECK_INT(t1, 7);
    int32_t want[8] = {0, 1, 0, 1, 1, 4, 4, 7};
    CHECK(rel && !memcmp(rel, want, sizeof want));
    free(rel);
    /* synthetic empty spans (5,5) and (9,9): skipped at the start, kept inside */
    int32_t offs_e[] = {0, 3, 3, 4, 4, 5, 5, 5, 5, 6, 6, 9, 9, 9, 9, 12, 12, 13, 13, 14};
    r = bs_evidence_locate(prompt, strlen(prompt), state, strlen(state), offs_e, 10, &t0, &t1, &rel, &e);
    CHECK_INT(r, 1);
    CHECK_INT(t0, 4);
    CHECK_INT(t1, 8);
    int32_t want_e[8] = {0, 1, 1, 4, 4, 4, 4, 7};
    CHECK(rel && !memcmp(rel, want_e, sizeof want_e));
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

/* ---- hand-assembled torch.save archives (spec 05 §14 E2 by hand, no torch) ---- */

typedef struct { unsigned char d[8192]; size_t n; } bytes_t;

static void put(bytes_t *b, const void *p, size_t n) { memcpy(b->d + b->n, p, n); b->n += n; }
static void put8(bytes_t *b, unsigned v) { b->d[b->n++] = (unsigned char)v; }
static void put16(bytes_t *b, unsigned v) { put8(b, v & 0xFF); put8(b, (v >> 8) & 0xFF); }
static void put32(bytes_t *b, uint32_t v) { put16(b, v & 0xFFFF); put16(b, v >> 16); }
static void pstr(bytes_t *b, const char *s) { put8(b, 'X'); put32(b, (uint32_t)strlen(s)); put(b, s, strlen(s)); }
static void pint(bytes_t *b, unsigned v) { put8(b, 'K'); put8(b, v); }
static void pglobal(bytes_t *b, const char *mod, const char *name) {
    put8(b, 'c'); put(b, mod, strlen(mod)); put8(b, '\n'); put(b, name, strlen(name)); put8(b, '\n');
}

/* {"d": 2, "k": 1, "state_dict": OrderedDict(six [1, 2] float tensors, storage i)}; storage 3 has
 * `numel3` elements; `rebuild` names the tensor-rebuilding global; extra_op is put before STOP's SETITEMS. */
static void head_pickle(bytes_t *b, const char *rebuild_mod, const char *rebuild, unsigned numel3, int extra_op) {
    static const char *names[6] = {"ws.weight", "us.weight", "we.weight", "ue.weight", "bs.weight", "be.weight"};
    b->n = 0;
    put8(b, 0x80); put8(b, 2); put8(b, '}'); put8(b, '(');
    pstr(b, "d"); pint(b, 2); pstr(b, "k"); pint(b, 1); pstr(b, "state_dict");
    pglobal(b, "collections", "OrderedDict"); put8(b, 'q'); put8(b, 1); put8(b, ')'); put8(b, 'R'); put8(b, '(');
    for (int t = 0; t < 6; t++) {
        char key[2] = {(char)('0' + t), 0};
        pstr(b, names[t]);
        pglobal(b, rebuild_mod, rebuild);
        put8(b, '('); put8(b, '(');
        pstr(b, "storage"); pglobal(b, "torch", "FloatStorage"); pstr(b, key); pstr(b, "cpu");
        pint(b, t == 3 ? numel3 : 2);
        put8(b, 't'); put8(b, 'Q');
        pint(b, 0); pint(b, 1); pint(b, 2); put8(b, 0x86); pint(b, 2); pint(b, 1); put8(b, 0x86);
        put8(b, 0x89); put8(b, 'h'); put8(b, 1); put8(b, ')'); put8(b, 'R');
        put8(b, 't'); put8(b, 'R');
    }
    if (extra_op) put8(b, (unsigned)extra_op);
    put8(b, 'u'); put8(b, 'u'); put8(b, '.');
}

static uint32_t crc32_ref(const unsigned char *p, size_t n) { /* bitwise, independent of the loader's table */
    uint32_t c = 0xFFFFFFFFu;
    for (size_t i = 0; i < n; i++) {
        c ^= p[i];
        for (int k = 0; k < 8; k++) c = (c >> 1) ^ (0xEDB88320u & (0u - (c & 1)));
    }
    return ~c;
}

/* A stored zip of a/data.pkl, a/data/0..5 (two floats each: t+1, -(t+1)/4)
 * unless `skip` names one of them, and a/version; `method` in every header. */
static void zip_head(bytes_t *z, const bytes_t *pk, int skip, unsigned method) {
    char names[8][32];
    const unsigned char *data[8];
    size_t len[8], off[8];
    float vals[6][2];
    int n = 0;
    snprintf(names[n], 32, "a/data.pkl"); data[n] = pk->d; len[n++] = pk->n;
    for (int t = 0; t < 6; t++) {
        vals[t][0] = (float)(t + 1);
        vals[t][1] = -(float)(t + 1) / 4;
        if (t == skip) continue;
        snprintf(names[n], 32, "a/data/%d", t); data[n] = (const unsigned char *)vals[t]; len[n++] = 8;
    }
    snprintf(names[n], 32, "a/version"); data[n] = (const unsigned char *)"3\n"; len[n++] = 2;
    z->n = 0;
    for (int i = 0; i < n; i++) {
        off[i] = z->n;
        put32(z, 0x04034b50); put16(z, 20); put16(z, 0); put16(z, method); put32(z, 0);
        put32(z, crc32_ref(data[i], len[i])); put32(z, (uint32_t)len[i]); put32(z, (uint32_t)len[i]);
        put16(z, (unsigned)strlen(names[i])); put16(z, 0); put(z, names[i], strlen(names[i])); put(z, data[i], len[i]);
    }
    size_t cd = z->n;
    for (int i = 0; i < n; i++) {
        put32(z, 0x02014b50); put16(z, 20); put16(z, 20); put16(z, 0); put16(z, method); put32(z, 0);
        put32(z, crc32_ref(data[i], len[i])); put32(z, (uint32_t)len[i]); put32(z, (uint32_t)len[i]);
        put16(z, (unsigned)strlen(names[i])); put16(z, 0); put16(z, 0); put16(z, 0); put16(z, 0); put32(z, 0);
        put32(z, (uint32_t)off[i]); put(z, names[i], strlen(names[i]));
    }
    size_t cdn = z->n - cd;
    put32(z, 0x06054b50); put16(z, 0); put16(z, 0); put16(z, (unsigned)n); put16(z, (unsigned)n);
    put32(z, (uint32_t)cdn); put32(z, (uint32_t)cd); put16(z, 0);
}

static int load_mem(const bytes_t *z, bs_evidence_head *h, bs_err *e) {
    bs_pt_file f;
    int rc = bs_pt_read_mem(z->d, z->n, "evidence_head.pt", &f, e);
    if (rc < 0) return rc;
    rc = bs_evidence_head_from_pt(h, &f, 2, e);
    bs_pt_free(&f);
    return rc;
}

static void expect_refused(const bytes_t *z, const char *msg) {
    bs_evidence_head h;
    bs_err e = {0};
    int rc = load_mem(z, &h, &e);
    CHECK(rc < 0);
    if (rc == 0) bs_evidence_head_free(&h);
    else CHECK_CONTAINS(e.msg, msg);
}

static void test_archives(void) {
    static bytes_t pk, z;
    bs_evidence_head h;
    bs_err e = {0};
    head_pickle(&pk, "torch._utils", "_rebuild_tensor_v2", 2, 0);
    zip_head(&z, &pk, -1, 0);
    CHECK_INT(load_mem(&z, &h, &e), 0);
    if (!e.msg[0]) {
        CHECK_INT(h.d, 2);
        CHECK_INT(h.k, 1);
        CHECK(h.ws[0] == 1.0f && h.ws[1] == -0.25f && h.be[0] == 6.0f && h.be[1] == -1.5f);
        bs_evidence_head_free(&h);
    }
    z.n -= 10;
    expect_refused(&z, "no zip end-of-central-directory record");
    zip_head(&z, &pk, -1, 8);
    expect_refused(&z, "compressed zip entry (method 8)");
    zip_head(&z, &pk, 3, 0);
    expect_refused(&z, "ue.weight: storage entry a/data/3 missing");
    zip_head(&z, &pk, -1, 0);
    z.d[40] ^= 1; /* a byte of data.pkl: its CRC no longer matches */
    expect_refused(&z, "CRC-32 mismatch");
    head_pickle(&pk, "posix", "system", 2, 0);
    zip_head(&z, &pk, -1, 0);
    expect_refused(&z, "global posix.system is not allowed");
    head_pickle(&pk, "torch._utils", "_rebuild_tensor_v2", 1, 0);
    zip_head(&z, &pk, -1, 0);
    expect_refused(&z, "runs past its storage of 1");
    head_pickle(&pk, "torch._utils", "_rebuild_tensor_v2", 2, 'e');
    zip_head(&z, &pk, -1, 0);
    expect_refused(&z, "unsupported pickle opcode 0x65");
    head_pickle(&pk, "torch._utils", "_rebuild_tensor_v2", 2, 0);
    pk.n--; /* no STOP */
    zip_head(&z, &pk, -1, 0);
    expect_refused(&z, "truncated pickle");
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
    test_archives();
    return check_report("test_evidence");
}
