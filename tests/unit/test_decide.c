/* Decision math against the numeric vectors of spec 01 §10 and the confidence
 * examples of spec 02 §4.6 (values printed in the response number format). */
#include "check.h"
#include "decision/decide.h"
#include "protocol/pyjson.h"

static char buf_[64];
static const char *fmt(double x) {
    bs_buf b;
    bs_buf_init(&b);
    bs_fmt_double_shortest(x, &b);
    snprintf(buf_, sizeof buf_, "%s", b.data ? b.data : "");
    bs_buf_free(&b);
    return buf_;
}

#define CHECK_FMT(x, s) CHECK_STR(fmt(x), s)

int main(void) {
    bs_err e = {0};
    /* Three options, two orders: order 0 shows 0,1,2; order 1 shows 2,1,0. */
    float l0[3] = {2.0f, 0.5f, -1.0f}, l1[3] = {-0.5f, 0.0f, 1.5f};
    double q0[3], q1[3], pavg[3], pcal[3];
    CHECK_INT(bs_softmax_logits(l0, 3, q0, &e), 0);
    CHECK_INT(bs_softmax_logits(l1, 3, q1, &e), 0);
    CHECK_FMT(q0[0], "0.7855970345892759");
    CHECK_FMT(q0[1], "0.1752903921400367");
    CHECK_FMT(q0[2], "0.039112573270687456");
    CHECK_FMT(q1[0], "0.09962364806231833");
    CHECK_FMT(q1[1], "0.16425162762508783");
    CHECK_FMT(q1[2], "0.7361247243125939");
    int p0[3] = {0, 1, 2}, p1[3] = {2, 1, 0};
    const double *qs[2] = {q0, q1};
    const int *perms[2] = {p0, p1};
    bs_average_orders(qs, perms, 2, 3, pavg);
    CHECK_FMT(pavg[0], "0.7608608794509348");
    CHECK_FMT(pavg[1], "0.16977100988256227");
    CHECK_FMT(pavg[2], "0.06936811066650289");
    CHECK_FMT(bs_choice_confidence(pavg, 3), "0.6412913191764023");
    CHECK_FMT(bs_score_value(pavg, 3), "0.30850723121556806");
    CHECK_FMT(bs_score_confidence(pavg, 3), "0.5372391531766478");
    CHECK_FMT(bs_max_p(pavg, 3), "0.7608608794509348");
    bs_calibrate(pavg, 3, 0.96, pcal);
    CHECK_FMT(pcal[0], "0.7739201135508798");
    CHECK_FMT(pcal[1], "0.16222246854553504");
    CHECK_FMT(pcal[2], "0.06385741790358522");
    CHECK_FMT(bs_choice_confidence(pcal, 3), "0.6608801703263196");
    CHECK_FMT(bs_score_value(pcal, 3), "0.2899373043527055");
    CHECK_FMT(bs_score_confidence(pcal, 3), "0.5650940434709417");
    bs_calibrate(pavg, 3, 1.33, pcal);
    CHECK_FMT(pcal[0], "0.6716322031029989");
    CHECK_FMT(pcal[1], "0.21743312348276178");
    CHECK_FMT(pcal[2], "0.11093467341423933");
    CHECK_FMT(bs_choice_confidence(pcal, 3), "0.5074483046544983");
    CHECK_FMT(bs_score_value(pcal, 3), "0.4393024703112405");
    CHECK_FMT(bs_score_confidence(pcal, 3), "0.3410462945331393");
    bs_calibrate(pavg, 3, 1.0, pcal); /* T == 1 exactly: unchanged */
    CHECK(memcmp(pcal, pavg, sizeof pcal) == 0);

    /* Noul: order 0 shows (true, false), order 1 (false, true). */
    float n0[2] = {1.25f, -0.75f}, n1[2] = {-1.0f, 0.5f};
    double a[2], b[2], np[2], nc[2];
    bs_softmax_logits(n0, 2, a, &e);
    bs_softmax_logits(n1, 2, b, &e);
    int np0[2] = {0, 1}, np1[2] = {1, 0};
    const double *nq[2] = {a, b};
    const int *npm[2] = {np0, np1};
    bs_average_orders(nq, npm, 2, 2, np);
    CHECK_FMT(np[0], "0.8491857770857629");
    CHECK_FMT(np[1], "0.15081422291423693");
    bs_calibrate(np, 2, 1.33, nc);
    CHECK_FMT(nc[0], "0.7857374314742744");
    CHECK_FMT(nc[1], "0.21426256852572564");

    /* Confidence formulas on published distributions (01 §10, 02 §4.6). */
    double c1[2] = {0.9959494503985423, 0.004050549601457665};
    CHECK_FMT(bs_choice_confidence(c1, 2), "0.9918989007970846");
    double s1[2] = {0.07998318024813036, 0.9200168197518697};
    CHECK_FMT(bs_score_confidence(s1, 2), "0.8400336395037393");
    CHECK_FMT(bs_score_value(s1, 2), "0.9200168197518697");
    double s2[3] = {0.04692466242647387, 0.22873214401769956, 0.7243431935558265};
    CHECK_FMT(bs_score_confidence(s2, 3), "0.516127796694029");
    CHECK_FMT(bs_score_value(s2, 3), "1.6774185311293526");
    double s3[5] = {0.005, 0.005, 0.04, 0.25, 0.70};
    CHECK_FMT(bs_score_confidence(s3, 5), "0.6958333333333333");
    CHECK_FMT(bs_score_value(s3, 5), "3.635");
    double flat[10];
    for (int i = 0; i < 10; i++) flat[i] = 0.1;
    CHECK_FMT(bs_score_confidence(flat, 10), "0.0");
    double d1[3] = {0.61, 0.35, 0.04};
    CHECK_FMT(bs_choice_confidence(d1, 3), "0.415");
    double d2[4] = {0.40, 0.34, 0.24, 0.02};
    CHECK_FMT(bs_choice_confidence(d2, 4), "0.20000000000000004");
    double d3[3] = {0.0, 0.57, 0.43};
    CHECK_FMT(bs_score_confidence(d3, 3), "0.355");
    double big[11];
    big[0] = 0.6892363749954429;
    for (int i = 1; i < 11; i++) big[i] = (1 - big[0]) / 10;
    CHECK_FMT(bs_choice_confidence(big, 11), "0.6581600124949871");
    /* ties: the first maximum */
    double tie[3] = {0.25, 0.5, 0.25};
    CHECK_INT(bs_argmax(tie, 3), 1);
    double tie2[2] = {0.5, 0.5};
    CHECK_INT(bs_argmax(tie2, 2), 0);

    /* Non-finite logits are an internal error, never a decision. */
    float bad[2] = {1.0f, NAN};
    CHECK_INT(bs_softmax_logits(bad, 2, a, &e), BS_EINTERNAL);
    CHECK_CONTAINS(e.msg, "non-finite letter logits");

    /* CALIBRATION.json rules (01 §1.5). */
    bs_calibration c;
    const char *ok = "{\"temperature_per_prim\":{\"choice\":0.9,\"noul\":1.3,\"score\":0.9},"
                     "\"thresholds\":{\"0.05\":{\"confidence\":0.93},\"0.1\":{\"confidence\":0.8}},\"x\":1}";
    CHECK_INT(bs_calibration_parse(&c, ok, strlen(ok), &e), 0);
    CHECK(c.calibrated);
    CHECK_FMT(bs_calibration_temp(&c, BS_TYPE_NOUL), "1.3");
    CHECK_FMT(bs_calibration_temp(&c, BS_TYPE_MULTI), "1.0");
    CHECK_INT(c.n_thresholds, 2);
    if (c.n_thresholds == 2) {
        CHECK_STR(c.thresholds[0].key, "0.05");
        CHECK_FMT(c.thresholds[1].confidence, "0.8");
    }
    bs_calibration_free(&c);
    const char *unk = "{\"temperature_per_prim\":{\"rank\":1.0}}";
    CHECK(bs_calibration_parse(&c, unk, strlen(unk), &e) < 0);
    CHECK_CONTAINS(e.msg, "CALIBRATION.json: unknown type rank");
    const char *nonnum = "{\"temperature_per_prim\":{\"choice\":\"1\"}}";
    CHECK(bs_calibration_parse(&c, nonnum, strlen(nonnum), &e) < 0);
    CHECK_CONTAINS(e.msg, "CALIBRATION.json: temperature");
    const char *neg = "{\"temperature_per_prim\":{\"score\":0}}";
    CHECK(bs_calibration_parse(&c, neg, strlen(neg), &e) < 0);
    CHECK_CONTAINS(e.msg, "temperature of score must be a positive number");
    CHECK(bs_calibration_parse(&c, "{nope", 5, &e) < 0);
    CHECK_CONTAINS(e.msg, "CALIBRATION.json");
    /* Valid JSON that serde_json (basal-rs) and json.loads (upstream) both read: a
     * repeated key takes the last value; an integer beyond 64 bits is a number
     * (an ignored field here, a threshold's confidence of 1 as an integer). */
    const char *dup = "{\"temperature_per_prim\":{\"choice\":0.9,\"choice\":1.2},\"seed\":123456789012345678901234567890,"
                      "\"thresholds\":{\"0.05\":{\"confidence\":1}}}";
    CHECK_INT(bs_calibration_parse(&c, dup, strlen(dup), &e), 0);
    CHECK_FMT(bs_calibration_temp(&c, BS_TYPE_CHOICE), "1.2");
    CHECK_INT(c.n_thresholds, 1);
    if (c.n_thresholds == 1) CHECK_FMT(c.thresholds[0].confidence, "1.0");
    bs_calibration_free(&c);
    /* malformed thresholds certify nothing (basal-rs engine.rs: get(key).and_then(get
     * "confidence").and_then(as_f64)): not an object, an entry without a number */
    const char *badth = "{\"thresholds\":{\"0.05\":{\"confidence\":\"0.9\"},\"0.1\":[0.9],\"0.2\":{\"confidence\":0.7}}}";
    CHECK_INT(bs_calibration_parse(&c, badth, strlen(badth), &e), 0);
    CHECK_INT(c.n_thresholds, 1);
    if (c.n_thresholds == 1) CHECK_STR(c.thresholds[0].key, "0.2");
    bs_calibration_free(&c);
    const char *thlist = "{\"thresholds\":[{\"confidence\":0.9}]}";
    CHECK_INT(bs_calibration_parse(&c, thlist, strlen(thlist), &e), 0);
    CHECK_INT(c.n_thresholds, 0);
    bs_calibration_free(&c);
    const char *empty = "{\"temperature_per_prim\":{}}";
    CHECK_INT(bs_calibration_parse(&c, empty, strlen(empty), &e), 0);
    CHECK(!c.calibrated);
    bs_calibration_free(&c);
    return check_report("test_decide");
}
