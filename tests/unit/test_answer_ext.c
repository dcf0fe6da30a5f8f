/* multi and act answer objects against the vectors of spec 03 §1.4 and §2.6
 * (p given as exact doubles), plus the edges of the rules the spec states in
 * words: stable order on equal P, max/min truncation and clamping, the short
 * form's defer row, a repeated action name, round6 halves away from zero, the
 * max_error key as Python str(), validated vs unvalidated. Questions are built
 * by the request validator from JSON bodies, as the server does. */
#include "check.h"
#include "engine/answer.h"
#include "decision/decide.h"
#include "protocol/pyjson.h"
#include "protocol/request.h"

static bs_request *parse(const char *question) {
    bs_buf b;
    bs_buf_init(&b);
    bs_buf_printf(&b, "{\"model\":\"m\",\"state\":\"s\",\"questions\":{\"q\":%s}}", question);
    bs_reply rep;
    bs_reply_init(&rep);
    bs_err e = {0};
    bs_request *r = NULL;
    int rc = bs_request_parse(b.data, b.len, BS_DIALECT_SYSTEMONE, NULL, &r, &rep, &e);
    if (rc < 0) fprintf(stderr, "parse %s: %s %s\n", question, e.msg, rep.body.data ? rep.body.data : "");
    bs_reply_free(&rep);
    bs_buf_free(&b);
    return r;
}

static void check_multi(int line, const char *question, const double *pyes, const char *want) {
    bs_request *r = parse(question);
    if (!r) { check_fail_++; return; }
    bs_buf out;
    bs_buf_init(&out);
    bs_err e = {0};
    int rc = bs_answer_multi(&out, &r->questions[0], pyes, &e);
    const char *got = rc == 0 && out.data ? out.data : "(error)";
    if (!strcmp(got, want)) check_pass_++;
    else { check_fail_++; fprintf(stderr, "line %d:\n  got:  %s\n  want: %s\n", line, got, want); }
    bs_buf_free(&out);
    bs_request_free(r);
}
#define MULTI(q, p, want) check_multi(__LINE__, q, p, want)

/* want NULL: the refusal without a defer action (03 §2.5). */
static void check_act(int line, const char *question, const char *calibration, const double *p, const char *want) {
    bs_request *r = parse(question);
    if (!r) { check_fail_++; return; }
    bs_calibration cal;
    memset(&cal, 0, sizeof cal);
    bs_err e = {0};
    if (calibration && bs_calibration_parse(&cal, calibration, strlen(calibration), &e) < 0) {
        fprintf(stderr, "line %d: %s\n", line, e.msg);
        check_fail_++;
    }
    bs_buf out;
    bs_buf_init(&out);
    int fails = -1;
    int rc = bs_answer_act(&out, &r->questions[0], &cal, p, &fails, &e);
    const char *got = rc < 0 ? "(error)" : fails ? NULL : out.data ? out.data : "";
    if (want ? got && !strcmp(got, want) : rc == 0 && fails == 1 && out.len == 0) check_pass_++;
    else {
        check_fail_++;
        fprintf(stderr, "line %d:\n  got:  %s\n  want: %s\n", line, got ? got : "(refusal)", want ? want : "(refusal)");
    }
    bs_buf_free(&out);
    bs_calibration_free(&cal);
    bs_request_free(r);
}
#define ACT(q, cal, p, want) check_act(__LINE__, q, cal, p, want)

int main(void) {
    /* 03 §1.4 vectors */
    const double dfr[3] = {0.9, 0.7, 0.1};
    MULTI("{\"type\":\"multi\",\"criteria\":[\"d\",\"r\",\"f\"],\"threshold\":0.5,\"max\":1}", dfr,
          "{\"type\":\"multi\",\"selected\":[\"d\"],\"probabilities\":{\"d\":0.9,\"r\":0.7,\"f\":0.1},"
          "\"threshold\":0.5,\"set_confidence\":0.24300000000000008}");
    const double ab[2] = {0.4792832104562643, 0.17182183081841235};
    MULTI("{\"type\":\"multi\",\"instructions\":\"x\",\"criteria\":{\"a\":null,\"b\":null}}", ab,
          "{\"type\":\"multi\",\"selected\":[],\"probabilities\":{\"a\":0.4792832104562643,\"b\":0.17182183081841235},"
          "\"threshold\":0.5,\"set_confidence\":0.4312462774264451}");
    /* selection in P order, stable on equal P; threshold printed as a float */
    const double eq[4] = {0.6, 0.8, 0.6, 0.2};
    MULTI("{\"type\":\"multi\",\"criteria\":[\"a\",\"b\",\"c\",\"d\"],\"threshold\":0}", eq,
          "{\"type\":\"multi\",\"selected\":[\"b\",\"a\",\"c\",\"d\"],\"probabilities\":{\"a\":0.6,\"b\":0.8,\"c\":0.6,"
          "\"d\":0.2},\"threshold\":0.0,\"set_confidence\":0.0576}");
    /* max 0 keeps nothing; max -2 also; max 2.9 truncates to 2 */
    MULTI("{\"type\":\"multi\",\"criteria\":[\"a\",\"b\",\"c\",\"d\"],\"max\":0}", eq,
          "{\"type\":\"multi\",\"selected\":[],\"probabilities\":{\"a\":0.6,\"b\":0.8,\"c\":0.6,\"d\":0.2},"
          "\"threshold\":0.5,\"set_confidence\":0.025599999999999998}");
    MULTI("{\"type\":\"multi\",\"criteria\":[\"a\",\"b\",\"c\",\"d\"],\"max\":-2}", eq,
          "{\"type\":\"multi\",\"selected\":[],\"probabilities\":{\"a\":0.6,\"b\":0.8,\"c\":0.6,\"d\":0.2},"
          "\"threshold\":0.5,\"set_confidence\":0.025599999999999998}");
    MULTI("{\"type\":\"multi\",\"criteria\":[\"a\",\"b\",\"c\",\"d\"],\"max\":2.9}", eq,
          "{\"type\":\"multi\",\"selected\":[\"b\",\"a\"],\"probabilities\":{\"a\":0.6,\"b\":0.8,\"c\":0.6,\"d\":0.2},"
          "\"threshold\":0.5,\"set_confidence\":0.15360000000000001}");
    /* min above the selection takes the first min of the order; min > n takes all;
     * threshold 1 (an integer) prints 1.0 */
    MULTI("{\"type\":\"multi\",\"criteria\":[\"a\",\"b\",\"c\",\"d\"],\"threshold\":1,\"min\":3}", eq,
          "{\"type\":\"multi\",\"selected\":[\"b\",\"a\",\"c\"],\"probabilities\":{\"a\":0.6,\"b\":0.8,\"c\":0.6,"
          "\"d\":0.2},\"threshold\":1.0,\"set_confidence\":0.2304}");
    MULTI("{\"type\":\"multi\",\"criteria\":[\"a\",\"b\",\"c\",\"d\"],\"threshold\":0.7,\"max\":0,\"min\":99}", eq,
          "{\"type\":\"multi\",\"selected\":[\"b\",\"a\",\"c\",\"d\"],\"probabilities\":{\"a\":0.6,\"b\":0.8,\"c\":0.6,"
          "\"d\":0.2},\"threshold\":0.7,\"set_confidence\":0.0576}");
    /* min -1 with nothing selected: fewer than min is false */
    MULTI("{\"type\":\"multi\",\"criteria\":[\"a\",\"b\",\"c\",\"d\"],\"threshold\":0.9,\"min\":-1}", eq,
          "{\"type\":\"multi\",\"selected\":[],\"probabilities\":{\"a\":0.6,\"b\":0.8,\"c\":0.6,\"d\":0.2},"
          "\"threshold\":0.9,\"set_confidence\":0.025599999999999998}");

    /* 03 §2.6 vectors */
    const char *refund = "{\"type\":\"act\",\"criteria\":{\"true\":\"Spełnia\",\"false\":\"Nie spełnia\"},"
                         "\"costs\":{\"approve\":{\"true\":0,\"false\":1240},\"reject\":{\"true\":300,\"false\":0},"
                         "\"human\":{\"true\":15,\"false\":15}}%s}";
    char qbuf[512];
    const double p1[2] = {0.962, 0.038};
    snprintf(qbuf, sizeof qbuf, refund, "");
    ACT(qbuf, NULL, p1,
        "{\"type\":\"act\",\"action\":\"human\",\"expected_costs\":{\"approve\":47.12,\"reject\":288.6,\"human\":15.0},"
        "\"answer\":\"true\",\"probabilities\":{\"true\":0.962,\"false\":0.038},\"confidence\":0.962,"
        "\"calibration\":\"unvalidated\"}");
    const double p2[2] = {0.995, 0.005};
    const char *cal1 = "{\"temperature_per_prim\":{\"noul\":1.0},\"thresholds\":{\"0.01\":{\"confidence\":0.999}}}";
    snprintf(qbuf, sizeof qbuf, refund, ",\"max_error\":0.01");
    ACT(qbuf, cal1, p2,
        "{\"type\":\"act\",\"action\":\"human\",\"expected_costs\":{\"approve\":6.2,\"reject\":298.5,\"human\":15.0},"
        "\"answer\":\"true\",\"probabilities\":{\"true\":0.995,\"false\":0.005},\"confidence\":0.995,"
        "\"refused\":\"approve\",\"calibration\":\"validated\"}");
    /* the key is Python str(): 1e-2 and 0.0100 are "0.01" too */
    snprintf(qbuf, sizeof qbuf, refund, ",\"max_error\":1e-2");
    ACT(qbuf, cal1, p2,
        "{\"type\":\"act\",\"action\":\"human\",\"expected_costs\":{\"approve\":6.2,\"reject\":298.5,\"human\":15.0},"
        "\"answer\":\"true\",\"probabilities\":{\"true\":0.995,\"false\":0.005},\"confidence\":0.995,"
        "\"refused\":\"approve\",\"calibration\":\"validated\"}");
    snprintf(qbuf, sizeof qbuf, refund, ",\"max_error\":0.0100");
    ACT(qbuf, cal1, p2,
        "{\"type\":\"act\",\"action\":\"human\",\"expected_costs\":{\"approve\":6.2,\"reject\":298.5,\"human\":15.0},"
        "\"answer\":\"true\",\"probabilities\":{\"true\":0.995,\"false\":0.005},\"confidence\":0.995,"
        "\"refused\":\"approve\",\"calibration\":\"validated\"}");
    /* confidence at the threshold: no refusal, no extra key */
    const char *cal2 = "{\"temperature_per_prim\":{\"noul\":1.0},\"thresholds\":{\"0.01\":{\"confidence\":0.995},"
                       "\"1\":{\"confidence\":0.1}}}";
    snprintf(qbuf, sizeof qbuf, refund, ",\"max_error\":0.01");
    ACT(qbuf, cal2, p2,
        "{\"type\":\"act\",\"action\":\"approve\",\"expected_costs\":{\"approve\":6.2,\"reject\":298.5,\"human\":15.0},"
        "\"answer\":\"true\",\"probabilities\":{\"true\":0.995,\"false\":0.005},\"confidence\":0.995,"
        "\"calibration\":\"validated\"}");
    /* an integer max_error is its own key "1"; 1.0 would be "1.0" (no threshold) */
    snprintf(qbuf, sizeof qbuf, refund, ",\"max_error\":1");
    ACT(qbuf, cal2, p2,
        "{\"type\":\"act\",\"action\":\"approve\",\"expected_costs\":{\"approve\":6.2,\"reject\":298.5,\"human\":15.0},"
        "\"answer\":\"true\",\"probabilities\":{\"true\":0.995,\"false\":0.005},\"confidence\":0.995,"
        "\"calibration\":\"validated\"}");
    snprintf(qbuf, sizeof qbuf, refund, ",\"max_error\":1.0");
    ACT(qbuf, cal2, p2,
        "{\"type\":\"act\",\"action\":\"approve\",\"expected_costs\":{\"approve\":6.2,\"reject\":298.5,\"human\":15.0},"
        "\"answer\":\"true\",\"probabilities\":{\"true\":0.995,\"false\":0.005},\"confidence\":0.995,"
        "\"max_error\":\"no certified threshold for this target\",\"calibration\":\"validated\"}");
    /* short form (upstream test_act_short_form) */
    const double half[2] = {0.5, 0.5};
    ACT("{\"type\":\"act\",\"criteria\":{\"a\":\"A\",\"b\":\"B\"},\"costs\":{\"wrong\":99,\"defer\":1}}", NULL, half,
        "{\"type\":\"act\",\"action\":\"defer\",\"expected_costs\":{\"a\":49.5,\"b\":49.5,\"defer\":1.0},"
        "\"answer\":\"a\",\"probabilities\":{\"a\":0.5,\"b\":0.5},\"confidence\":0.5,\"calibration\":\"unvalidated\"}");
    /* refusal without a defer action; a defer_action that names no row is used */
    const char *full = "{\"type\":\"act\",\"costs\":{\"go\":{\"true\":0,\"false\":10},\"stop\":{\"true\":10,\"false\":0}},"
                       "\"max_error\":0.01%s}";
    snprintf(qbuf, sizeof qbuf, full, "");
    ACT(qbuf, cal1, p1, NULL);
    snprintf(qbuf, sizeof qbuf, full, ",\"defer_action\":\"ask\"");
    ACT(qbuf, cal1, p1,
        "{\"type\":\"act\",\"action\":\"ask\",\"expected_costs\":{\"go\":0.38,\"stop\":9.62},\"answer\":\"true\","
        "\"probabilities\":{\"true\":0.962,\"false\":0.038},\"confidence\":0.962,\"refused\":\"go\","
        "\"calibration\":\"validated\"}");
    /* a choice base is validated only with option_keys "hide"; round6 rounds halves away
     * from zero (2.5e-6 -> 3e-6, where Python round() would give 2e-6) */
    const double one[2] = {1.0, 0.0};
    const char *chq = "{\"type\":\"act\",\"criteria\":[\"a\",\"b\"],%s\"costs\":{\"x\":{\"a\":0.0000025,\"b\":0},"
                      "\"y\":{\"a\":0.0000125,\"b\":0},\"z\":{\"b\":1,\"a\":-0.0000025}}}";
    snprintf(qbuf, sizeof qbuf, chq, "");
    ACT(qbuf, cal1, one,
        "{\"type\":\"act\",\"action\":\"z\",\"expected_costs\":{\"x\":3e-6,\"y\":0.000013,\"z\":-3e-6},"
        "\"answer\":\"a\",\"probabilities\":{\"a\":1.0,\"b\":0.0},\"confidence\":1.0,\"calibration\":\"unvalidated\"}");
    snprintf(qbuf, sizeof qbuf, chq, "\"option_keys\":\"hide\",");
    ACT(qbuf, cal1, one,
        "{\"type\":\"act\",\"action\":\"z\",\"expected_costs\":{\"x\":3e-6,\"y\":0.000013,\"z\":-3e-6},"
        "\"answer\":\"a\",\"probabilities\":{\"a\":1.0,\"b\":0.0},\"confidence\":1.0,\"calibration\":\"validated\"}");
    /* an outcome named "defer" in the short form: expected_costs is an object, the
     * repeated name keeps its first place with the last row's value; the first
     * minimum wins */
    ACT("{\"type\":\"act\",\"criteria\":[\"defer\",\"b\"],\"costs\":{\"wrong\":4,\"defer\":3}}", NULL, half,
        "{\"type\":\"act\",\"action\":\"defer\",\"expected_costs\":{\"defer\":3.0,\"b\":2.0},\"answer\":\"defer\","
        "\"probabilities\":{\"defer\":0.5,\"b\":0.5},\"confidence\":0.5,\"calibration\":\"unvalidated\"}");

    /* A tiny temperature (5e-324) makes the calibrated distribution all NaN
     * (printed null). basal-rs decision.rs: multi orders with
     * partial_cmp().unwrap_or(Equal) in a stable sort, so NaN labels keep
     * their order and `min` takes the first labels; act's confidence is a
     * fold of f64::max from -inf, which skips NaN, so it is -inf: below any
     * threshold, the action is refused (or the request fails without a
     * defer action); the first action and the first key win the NaN ties. */
    const double nan3[3] = {NAN, NAN, NAN}, nan2[2] = {NAN, NAN};
    MULTI("{\"type\":\"multi\",\"criteria\":[\"a\",\"b\",\"c\"],\"min\":2}", nan3,
          "{\"type\":\"multi\",\"selected\":[\"a\",\"b\"],\"probabilities\":{\"a\":null,\"b\":null,\"c\":null},"
          "\"threshold\":0.5,\"set_confidence\":null}");
    /* mixed NaN and numbers, as Rust's insertion sort of <= 20 elements leaves them:
     * 0.2 passes nothing (NaN before it), 0.9 passes 0.2 only */
    const double mixed[4] = {0.2, NAN, 0.2, 0.9};
    MULTI("{\"type\":\"multi\",\"criteria\":[\"a\",\"b\",\"c\",\"d\"],\"threshold\":0,\"min\":4}", mixed,
          "{\"type\":\"multi\",\"selected\":[\"a\",\"b\",\"d\",\"c\"],\"probabilities\":{\"a\":0.2,\"b\":null,"
          "\"c\":0.2,\"d\":0.9},\"threshold\":0.0,\"set_confidence\":null}");
    snprintf(qbuf, sizeof qbuf, refund, ",\"max_error\":0.01");
    ACT(qbuf, cal1, nan2,
        "{\"type\":\"act\",\"action\":\"human\",\"expected_costs\":{\"approve\":null,\"reject\":null,\"human\":null},"
        "\"answer\":\"true\",\"probabilities\":{\"true\":null,\"false\":null},\"confidence\":null,"
        "\"refused\":\"approve\",\"calibration\":\"validated\"}");
    snprintf(qbuf, sizeof qbuf, full, "");
    ACT(qbuf, cal1, nan2, NULL);
    CHECK(bs_max_p(nan3, 3) == -INFINITY);
    const double some_nan[3] = {NAN, 0.25, 0.75};
    CHECK(bs_max_p(some_nan, 3) == 0.75);

    /* the helpers directly */
    CHECK(bs_round6(2.5e-6) == 3e-6);
    CHECK(bs_round6(-2.5e-6) == -3e-6);
    double ex[2];
    const double cst[4] = {1, 2, 2, 1};
    CHECK_INT(bs_act_expected(cst, 2, half, 2, ex), 0); /* a tie keeps the first row */
    printf("%d passed, %d failed\n", check_pass_, check_fail_);
    return check_fail_ ? 1 : 0;
}
