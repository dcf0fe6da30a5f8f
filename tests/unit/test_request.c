/* Request validation and the response writer against the spec's own vectors:
 * 02 §1.2 (floats, strings, echoed values), §3 (decode errors, positions as
 * CPython reports them), §4.3 (every validation test vector), §4.4, §5
 * (/v1/basal forms) and 01 §2.8 (shown option texts).
 *
 * Test mode for tests/e2e/t_prompt_jinja.sh: `test_request --reply systemone|basal`
 * answers a stream of bodies on stdin with their statuses and reply bodies. */
#include "check.h"
#include "protocol/pyjson.h"
#include "protocol/request.h"
#include "protocol/request_err.h"
#include "protocol/respjson.h"

#include <utf8proc.h>

#define S_PL "Klient pisze: zapłaciłem dwa razy za to samo zamówienie, proszę o zwrot."

/* Test bodies are written with ` for " to stay readable; every string made
 * here is freed at the end so the leak checker stays quiet. */
static char *pool[4096];
static size_t npool;

static const char *J(const char *s) {
    char *d = strdup(s);
    for (char *p = d; *p; p++)
        if (*p == '`') *p = '"';
    pool[npool++] = d;
    return d;
}

static const char *fmt(const char *f, const char *a) {
    size_t n = strlen(f) + strlen(a) + 1;
    char *d = malloc(n);
    snprintf(d, n, f, a);
    pool[npool++] = d;
    return J(d);
}

/* {"model":"m","state":S,"questions":{"q":<q>}} */
static const char *body_q(const char *q) {
    return fmt("{`model`:`basal-1.5-4.5B`,`state`:`" S_PL "`,`questions`:{`q`:%s}}", q);
}

/* Runs steps 4–5, 8 and 9 and returns the reply (status 200 and an empty
 * body when everything passed). */
static int run_steps(bs_dialect d, const char *body, size_t len, bs_reply *rep, bs_request **out) {
    bs_err e = { 0 };
    bs_request *r = NULL;
    int rc = bs_request_parse(body, len, d, NULL, &r, rep, &e);
    if (rc == 0) rc = bs_request_check_capability(r, NULL, rep, &e);
    if (rc == 0) {
        rep->status = 200;
        rep->body.len = 0;
    }
    if (out) *out = r;
    else bs_request_free(r);
    return rc;
}

static void expect_len(int line, bs_dialect d, const char *body, size_t len, int status, const char *want) {
    bs_reply rep;
    bs_reply_init(&rep);
    run_steps(d, body, len, &rep, NULL);
    const char *got = rep.body.data ? rep.body.data : "";
    if (rep.status == status && strcmp(got, want) == 0) {
        check_pass_++;
    } else {
        check_fail_++;
        fprintf(stderr, "line %d: body %s\n  got:  %d %s\n  want: %d %s\n", line, body, rep.status, got, status,
                want);
    }
    bs_reply_free(&rep);
}
#define EXPECT(d, body, status, want) expect_len(__LINE__, d, body, strlen(body), status, want)
#define SO BS_DIALECT_SYSTEMONE
#define BA BS_DIALECT_BASAL

static void test_floats(void) {
    static const struct { double v; const char *s; } vec[] = {
        /* 02 §1.2 test vectors */
        { 0.5, "0.5" }, { 1.0, "1.0" }, { 100.0, "100.0" }, { 1e-4, "0.0001" }, { 1e-5, "0.00001" },
        { 1e-6, "1e-6" }, { 4.5e-5, "0.000045" }, { 4.5e-6, "4.5e-6" }, { 1e15, "1000000000000000.0" },
        { 1e16, "1e16" }, { 1.5e300, "1.5e300" }, { 1e-7, "1e-7" }, { 0.1 + 0.2, "0.30000000000000004" },
        { 0.9959494503985423, "0.9959494503985423" },
        /* the layout's own examples */
        { 0.0, "0.0" }, { -0.0, "-0.0" }, { 12.34, "12.34" }, { 477.6, "477.6" }, { 5e-324, "5e-324" },
        { 2.5e-10, "2.5e-10" }, { -1.5, "-1.5" }, { 0.04, "0.04" }, { 3.635, "3.635" },
        { 0.20000000000000004, "0.20000000000000004" }, { 1.2345678901234568e20, "1.2345678901234568e20" },
        { 0.004050549601457665, "0.004050549601457665" }, { 0.6958333333333333, "0.6958333333333333" },
    };
    for (size_t i = 0; i < sizeof vec / sizeof vec[0]; i++) {
        bs_buf b;
        bs_buf_init(&b);
        bs_resp_double(&b, vec[i].v);
        CHECK_STR(b.data, vec[i].s);
        bs_buf_free(&b);
    }
    bs_buf b;
    bs_buf_init(&b);
    bs_resp_double(&b, NAN);
    bs_buf_putc(&b, ',');
    bs_resp_double(&b, -INFINITY);
    CHECK_STR(b.data, "null,null");
    bs_buf_free(&b);
}

static void test_strings_and_echo(void) {
    bs_buf b;
    bs_buf_init(&b);
    static const char in[] = "\"\\\b\t\n\f\r\x01\x1f/\x7f\xe2\x80\xa8\xc3\xa9\x00z";
    bs_resp_string(&b, in, sizeof in - 1);
    CHECK_STR(b.data, "\"\\\"\\\\\\b\\t\\n\\f\\r\\u0001\\u001f/\x7f\xe2\x80\xa8\xc3\xa9\\u0000z\"");
    bs_buf_free(&b);

    /* echoed values: compact, number literals as written, strings re-escaped */
    const char *src = J("{ `a` : 2.50, `b` : [1e5, -0, 1E+2, 0.1], `c` : `x\\u0000y\\/\\u00e9`, `d`: {}, "
                        "`e`: [ ], `f`: true, `g`: null, `a2`: -3e-7 }");
    bj_value *v = NULL;
    bs_err e = { 0 };
    CHECK_INT(bj_parse(src, strlen(src), NULL, &v, &e), 0);
    bs_buf_init(&b);
    bs_resp_value(&b, v);
    CHECK_STR(b.data, J("{`a`:2.50,`b`:[1e5,-0,1E+2,0.1],`c`:`x\\u0000y/é`,`d`:{},`e`:[],`f`:true,`g`:null,"
                        "`a2`:-3e-7}"));
    bs_buf_free(&b);
    bj_free(v);
}

/* 02 §3: CPython's messages and character positions (verified against
 * CPython 3.11's json.loads; the project-only cases follow the table). */
static void test_decode_errors(void) {
    static const struct { const char *body; size_t len; const char *msg; int pos; const char *lc; } vec[] = {
        { "not json", 8, "Expecting value", 0, "line 1 column 1" },
        { "tru", 3, "Expecting value", 0, "line 1 column 1" },
        { "-", 1, "Expecting value", 0, "line 1 column 1" },
        { "[1,]", 4, "Expecting value", 3, "line 1 column 4" },
        { "{\"a\":", 5, "Expecting value", 5, "line 1 column 6" },
        { "]", 1, "Expecting value", 0, "line 1 column 1" },
        { "", 0, "Expecting value", 0, "line 1 column 1" },
        { "  \n", 3, "Expecting value", 3, "line 2 column 1" },
        { "NaN", 3, "Expecting value", 0, "line 1 column 1" },
        { "[Infinity]", 10, "Expecting value", 1, "line 1 column 2" },
        { "-Infinity", 9, "Expecting value", 0, "line 1 column 1" },
        { "{\"a\":1,}", 8, "Expecting property name enclosed in double quotes", 7, "line 1 column 8" },
        { "{\"a\" 1}", 7, "Expecting ':' delimiter", 5, "line 1 column 6" },
        { "{\n\"a\" 1}", 8, "Expecting ':' delimiter", 6, "line 2 column 5" },
        { "[1 2]", 5, "Expecting ',' delimiter", 3, "line 1 column 4" },
        { "\"abc", 4, "Unterminated string starting at", 0, "line 1 column 1" },
        { "[\"a\x01\"]", 6, "Invalid control character at", 3, "line 1 column 4" },
        { "[\"\\x\"]", 6, "Invalid \\escape", 2, "line 1 column 3" },
        { "[\"\\u12G4\"]", 10, "Invalid \\uXXXX escape", 3, "line 1 column 4" },
        { "[\"\\ud800\"]", 10, "Invalid \\uXXXX escape", 3, "line 1 column 4" },
        { "[\"\\udc00x\"]", 11, "Invalid \\uXXXX escape", 3, "line 1 column 4" },
        { "{} x", 4, "Extra data", 3, "line 1 column 4" },
        { "01", 2, "Extra data", 1, "line 1 column 2" },
        { "1.", 2, "Extra data", 1, "line 1 column 2" },
        { "[\"\xc3\xa9\xff\"]", 6, "Invalid UTF-8", 3, "line 1 column 4" },
        { "[\n  \"\xc5\x82\",\n  x]", 15, "Expecting value", 11, "line 3 column 3" },
        { "\xef\xbb\xbfnot json", 11, "Expecting value", 0, "line 1 column 1" },
        { "\xef\xbb\xbf[1 2]", 8, "Expecting ',' delimiter", 3, "line 1 column 4" },
    };
    for (size_t i = 0; i < sizeof vec / sizeof vec[0]; i++) {
        char want[512], esc[128];
        /* the message as a JSON string: only the backslashes need escaping */
        size_t k = 0;
        for (const char *m = vec[i].msg; *m; m++) {
            if (*m == '\\') esc[k++] = '\\';
            esc[k++] = *m;
        }
        esc[k] = 0;
        snprintf(want, sizeof want,
                 "{\"detail\":[{\"type\":\"json_invalid\",\"loc\":[\"body\",%d],\"msg\":\"JSON decode error\","
                 "\"input\":{},\"ctx\":{\"error\":\"%s\"}}]}", vec[i].pos, esc);
        expect_len(__LINE__ * 1000 + (int)i, SO, vec[i].body, vec[i].len, 422, want);
        snprintf(want, sizeof want, "{\"error\":\"%s: %s (char %d)\"}", esc, vec[i].lc, vec[i].pos);
        expect_len(__LINE__ * 1000 + (int)i, BA, vec[i].body, vec[i].len, 422, want);
    }
    /* nesting: 128 levels parse, the 129th bracket is refused where it stands */
    char deep[300];
    memset(deep, '[', 129);
    memset(deep + 129, ']', 129);
    expect_len(__LINE__, SO, deep, 258, 422,
               "{\"detail\":[{\"type\":\"json_invalid\",\"loc\":[\"body\",128],\"msg\":\"JSON decode error\","
               "\"input\":{},\"ctx\":{\"error\":\"Maximum nesting depth exceeded\"}}]}");
    expect_len(__LINE__, BA, deep, 258, 422,
               "{\"error\":\"Maximum nesting depth exceeded: line 1 column 129 (char 128)\"}");
    /* 128 levels are fine: the body then fails validation as an array (T1), echoed whole */
    char want[1024];
    int wn = snprintf(want, sizeof want, "{\"detail\":[{\"type\":\"model_attributes_type\",\"loc\":[\"body\"],"
                      "\"msg\":\"Input should be a valid dictionary or object to extract fields from\",\"input\":");
    memcpy(want + wn, deep + 1, 256);
    strcpy(want + wn + 256, "}]}");
    expect_len(__LINE__, SO, deep + 1, 256, 422, want);
}

static void test_validation_vectors(void) {
    /* 02 §4.3 validation test vectors */
    EXPECT(SO, body_q("{`type`:`choice`,`instructions`:`Temat?`,`criteria`:{}}"), 400,
           J("{`detail`:`Choice question must have at least one choice: q`}"));
    {
        char q[8192];
        size_t n = (size_t)snprintf(q, sizeof q, "{`type`:`choice`,`criteria`:{");
        for (int i = 0; i < 256; i++) n += (size_t)snprintf(q + n, sizeof q - n, "%s`o%d`:null", i ? "," : "", i);
        snprintf(q + n, sizeof q - n, "}}");
        EXPECT(SO, body_q(q), 400, J("{`detail`:`Too many choices. Must have at most 255 choices.`}"));
        n = (size_t)snprintf(q, sizeof q, "{`type`:`choice`,`criteria`:[");
        for (int i = 0; i < 256; i++) n += (size_t)snprintf(q + n, sizeof q - n, "%s`o%d`", i ? "," : "", i);
        snprintf(q + n, sizeof q - n, "]}");
        EXPECT(SO, body_q(q), 400, J("{`detail`:`Too many choices. Must have at most 255 choices.`}"));
        /* 300 list entries collapsing to 255 are valid, and /v1/systemone answers 11–255 (03 §5) */
        n = (size_t)snprintf(q, sizeof q, "{`type`:`choice`,`criteria`:[");
        for (int i = 0; i < 300; i++) n += (size_t)snprintf(q + n, sizeof q - n, "%s`o%d`", i ? "," : "", i % 255);
        snprintf(q + n, sizeof q - n, "]}");
        EXPECT(SO, body_q(q), 200, "");
        /* /v1/basal keeps the 2..10 rule (03 §5, 02 §5) */
        EXPECT(BA, body_q(q), 422, J("{`error`:`question \\`q\\`: 255 options (supported: 2..10)`}"));
    }
    EXPECT(SO, body_q("{`type`:`choice`,`instructions`:`Temat?`}"), 422,
           J("{`detail`:[{`type`:`missing`,`loc`:[`body`,`questions`,`q`,`choice`,`criteria`],`msg`:`Field "
             "required`,`input`:{`type`:`choice`,`instructions`:`Temat?`}}]}"));
    EXPECT(SO, body_q("{`type`:`score`,`instructions`:`Pilność?`,`criteria`:[]}"), 422,
           J("{`detail`:[{`type`:`too_short`,`loc`:[`body`,`questions`,`q`,`score`,`criteria`],`msg`:`List should "
             "have at least 1 item after validation, not 0`,`input`:[],`ctx`:{`field_type`:`List`,`min_length`:1,"
             "`actual_length`:0}}]}"));
    EXPECT(SO, body_q("{`type`:`score`,`criteria`:[`0`,`1`,`2`,`3`,`4`,`5`,`6`,`7`,`8`,`9`,`10`]}"), 400,
           J("{`detail`:`Too many score levels. Must have at most 10 levels.`}"));
    EXPECT(SO, body_q("{`type`:`score`,`instructions`:`Pilność?`,`criteria`:[`niska`,null,`wysoka`]}"), 422,
           J("{`detail`:[{`type`:`string_type`,`loc`:[`body`,`questions`,`q`,`score`,`criteria`,1,`str`],`msg`:"
             "`Input should be a valid string`,`input`:null},{`type`:`dict_type`,`loc`:[`body`,`questions`,`q`,"
             "`score`,`criteria`,1,`dict[any,any]`],`msg`:`Input should be a valid dictionary`,`input`:null},"
             "{`type`:`list_type`,`loc`:[`body`,`questions`,`q`,`score`,`criteria`,1,`list[any]`],`msg`:`Input "
             "should be a valid list`,`input`:null}]}"));
    EXPECT(SO, body_q("{`type`:`noul`}"), 400, J("{`detail`:`Noul question must have criteria or instructions: q`}"));
    EXPECT(SO, body_q("{`type`:`noul`,`instructions`:null}"), 400,
           J("{`detail`:`Noul question must have criteria or instructions: q`}"));
    EXPECT(SO, body_q("{`type`:`noul`,`instructions`:5}"), 422,
           J("{`detail`:[{`type`:`string_type`,`loc`:[`body`,`questions`,`q`,`noul`,`instructions`,`str`],`msg`:"
             "`Input should be a valid string`,`input`:5},{`type`:`dict_type`,`loc`:[`body`,`questions`,`q`,`noul`,"
             "`instructions`,`dict[any,any]`],`msg`:`Input should be a valid dictionary`,`input`:5},{`type`:"
             "`list_type`,`loc`:[`body`,`questions`,`q`,`noul`,`instructions`,`list[any]`],`msg`:`Input should be "
             "a valid list`,`input`:5}]}"));
    EXPECT(SO, body_q("{`instructions`:`Czy chodzi o płatność?`}"), 422,
           J("{`detail`:[{`type`:`union_tag_not_found`,`loc`:[`body`,`questions`,`q`],`msg`:`Unable to extract tag "
             "using discriminator 'type'`,`input`:{`instructions`:`Czy chodzi o płatność?`},`ctx`:{`discriminator`:"
             "`'type'`}}]}"));
    EXPECT(SO, body_q("{`type`:`rank`,`instructions`:`x`}"), 400,
           J("{`detail`:{`error_type`:`api_usage_error`,`message`:`Invalid request. Unknown question type "
             "\\`rank\\` (choice, noul, score): q`}}"));
    EXPECT(SO, J("{`model`:`m`,`state`:`s`,`questions`:{}}"), 422,
           J("{`detail`:[{`type`:`too_short`,`loc`:[`body`,`questions`],`msg`:`Dictionary should have at least 1 "
             "item after validation, not 0`,`input`:{},`ctx`:{`field_type`:`Dictionary`,`min_length`:1,"
             "`actual_length`:0}}]}"));
    EXPECT(SO, J("{`model`:`m`,`state`:`s`,`questions`:[{`type`:`noul`,`instructions`:`x`}]}"), 422,
           J("{`detail`:[{`type`:`dict_type`,`loc`:[`body`,`questions`],`msg`:`Input should be a valid dictionary`,"
             "`input`:[{`type`:`noul`,`instructions`:`x`}]}]}"));
    EXPECT(SO, J("{`model`:`m`,`state`:5,`questions`:{`q`:{`type`:`noul`,`instructions`:`x`}}}"), 422,
           J("{`detail`:[{`type`:`string_type`,`loc`:[`body`,`state`,`str`],`msg`:`Input should be a valid "
             "string`,`input`:5},{`type`:`dict_type`,`loc`:[`body`,`state`,`dict[any,any]`],`msg`:`Input should be "
             "a valid dictionary`,`input`:5},{`type`:`list_type`,`loc`:[`body`,`state`,`list[any]`],`msg`:`Input "
             "should be a valid list`,`input`:5}]}"));
    {
        const char *b = J("{`model`:`m`,`state`:null,`questions`:{`q`:{`type`:`noul`,`instructions`:`x`}}}");
        EXPECT(SO, b, 422,
               fmt("{`detail`:[{`type`:`missing`,`loc`:[`body`,`state`],`msg`:`Field required`,`input`:%s}]}", b));
        b = J("{`state`:`" S_PL "`,`questions`:{`q`:{`type`:`noul`,`instructions`:`x`}}}");
        EXPECT(SO, b, 422,
               fmt("{`detail`:[{`type`:`missing`,`loc`:[`body`,`model`],`msg`:`Field required`,`input`:%s}]}", b));
    }
    {
        bs_reply rep;
        bs_reply_init(&rep);
        bs_reply_unknown_model(&rep, SO, "nope-1", 6);
        CHECK_INT(rep.status, 400);
        CHECK_STR(rep.body.data, J("{`detail`:{`error_type`:`api_usage_error`,`message`:`Unknown model: nope-1`}}"));
        bs_reply_unknown_model(&rep, BA, "nope-1", 6);
        CHECK_INT(rep.status, 422);
        CHECK_STR(rep.body.data, J("{`error`:`Unknown model: nope-1`}"));
        bs_reply_free(&rep);
        bj_value *v = NULL;
        CHECK_INT(bs_body_parse(J("{`model`:`nope-1`}"), 18, SO, &v, &rep, NULL), 0);
        size_t ml = 0;
        CHECK_STR(bs_body_model(v, &ml), "nope-1");
        CHECK_INT(ml, 6);
        bj_free(v);
        CHECK_INT(bs_body_parse(J("{`model`:5}"), 11, SO, &v, &rep, NULL), 0);
        CHECK(bs_body_model(v, &ml) == NULL);
        bj_free(v);
    }
    EXPECT(SO, "[]", 422,
           J("{`detail`:[{`type`:`model_attributes_type`,`loc`:[`body`],`msg`:`Input should be a valid dictionary or "
             "object to extract fields from`,`input`:[]}]}"));
    EXPECT(SO, J("{`model`:`m`,`state`:null,`questions`:{`a`:{`type`:`score`,`criteria`:[]},`b`:{`type`:`choice`}}}"),
           422,
           J("{`detail`:[{`type`:`missing`,`loc`:[`body`,`state`],`msg`:`Field required`,`input`:{`model`:`m`,"
             "`state`:null,`questions`:{`a`:{`type`:`score`,`criteria`:[]},`b`:{`type`:`choice`}}}},{`type`:"
             "`too_short`,`loc`:[`body`,`questions`,`a`,`score`,`criteria`],`msg`:`List should have at least 1 item "
             "after validation, not 0`,`input`:[],`ctx`:{`field_type`:`List`,`min_length`:1,`actual_length`:0}},"
             "{`type`:`missing`,`loc`:[`body`,`questions`,`b`,`choice`,`criteria`],`msg`:`Field required`,`input`:"
             "{`type`:`choice`}}]}"));
}

/* Rules of 02 §4.3 beyond the published vectors. */
static void test_validation_rules(void) {
    /* T3, T9 (no input), T11 (no type segment), collection order */
    EXPECT(SO, J("{`model`:7,`state`:`s`,`questions`:{`q`:{`type`:`multi`,`evidence`:1,`criteria`:[`a`]}},"
                 "`facts`:`on`}"),
           422,
           J("{`detail`:[{`type`:`string_type`,`loc`:[`body`,`model`],`msg`:`Input should be a valid string`,`input`"
             ":7},{`type`:`literal_error`,`loc`:[`body`,`facts`],`msg`:`facts must be \\`off\\` or \\`auto\\``},"
             "{`type`:`value_error`,`loc`:[`body`,`questions`,`q`,`evidence`],`msg`:`evidence is not supported for "
             "multi`}]}"));
    /* Q4, with the compact JSON of the value; the first usage error wins */
    EXPECT(SO, J("{`model`:`m`,`state`:`s`,`questions`:{`a`:{`type`:null},`b`:{`type`:[`x`, 1.50]}}}"), 400,
           J("{`detail`:{`error_type`:`api_usage_error`,`message`:`Invalid request. Question type null is not a "
             "string: a`}}"));
    EXPECT(SO, J("{`model`:`m`,`state`:`s`,`questions`:{`b`:{`type`:[`x`, 1.50]}}}"), 400,
           J("{`detail`:{`error_type`:`api_usage_error`,`message`:`Invalid request. Question type [\\`x\\`,1.50] is "
             "not a string: b`}}"));
    /* Q3 quoting (Rust {:?}): \t \n \0 \" \\ and \u{…} for other controls */
    EXPECT(SO, J("{`model`:`m`,`state`:`s`,`questions`:{`q`:{`type`:`a\\t\\n\\u0000\\u0001\\u007f\\`\\\\ż`}}}"), 400,
           J("{`detail`:{`error_type`:`api_usage_error`,`message`:`Invalid request. Unknown question type "
             "\\`a\\\\t\\\\n\\\\0\\\\u{1}\\\\u{7f}\\\\\\`\\\\\\\\ż\\` (choice, noul, score): q`}}"));
    /* Polish letters whose UTF-8 continuation byte lies in 80..9F (ą ć ę ł ń ś: C4 85, C4 87, C4 99, C5 82,
     * C5 84, C5 9B) are characters, not C1 controls: copied whole; U+0085 itself is escaped */
    EXPECT(SO, J("{`model`:`m`,`state`:`s`,`questions`:{`q`:{`type`:`ąćęłńś\\u0085`}}}"), 400,
           J("{`detail`:{`error_type`:`api_usage_error`,`message`:`Invalid request. Unknown question type "
             "\\`ąćęłńś\\\\u{85}\\` (choice, noul, score): q`}}"));
    /* usage errors lose to any schema error of the request */
    EXPECT(SO, J("{`model`:`m`,`state`:`s`,`questions`:{`a`:{`type`:`rank`},`b`:{`type`:`choice`}}}"), 422,
           J("{`detail`:[{`type`:`missing`,`loc`:[`body`,`questions`,`b`,`choice`,`criteria`],`msg`:`Field "
             "required`,`input`:{`type`:`choice`}}]}"));
    /* after a type failure Q5/Q6 are still reported, without the type segment */
    EXPECT(SO, J("{`model`:`m`,`state`:`s`,`questions`:{`q`:{`instructions`:true,`option_keys`:`x`}}}"), 422,
           J("{`detail`:[{`type`:`union_tag_not_found`,`loc`:[`body`,`questions`,`q`],`msg`:`Unable to extract tag "
             "using discriminator 'type'`,`input`:{`instructions`:true,`option_keys`:`x`},`ctx`:{`discriminator`:"
             "`'type'`}},{`type`:`string_type`,`loc`:[`body`,`questions`,`q`,`instructions`,`str`],`msg`:`Input "
             "should be a valid string`,`input`:true},{`type`:`dict_type`,`loc`:[`body`,`questions`,`q`,"
             "`instructions`,`dict[any,any]`],`msg`:`Input should be a valid dictionary`,`input`:true},{`type`:"
             "`list_type`,`loc`:[`body`,`questions`,`q`,`instructions`,`list[any]`],`msg`:`Input should be a valid "
             "list`,`input`:true},{`type`:`literal_error`,`loc`:[`body`,`questions`,`q`,`option_keys`],`msg`:"
             "`option_keys must be \\`show\\` or \\`hide\\``}]}"));
    /* Q6 with the type segment; Q7 replaces it */
    EXPECT(SO, J("{`model`:`m`,`state`:`s`,`questions`:{`q`:{`type`:`choice`,`option_keys`:null,`criteria`:[`a`]},"
                 "`r`:{`type`:`choice`,`option_keys`:false,`criteria`:[`a`]}}}"),
           422,
           J("{`detail`:[{`type`:`literal_error`,`loc`:[`body`,`questions`,`r`,`choice`,`option_keys`],`msg`:"
             "`option_keys must be \\`show\\` or \\`hide\\``}]}"));
    EXPECT(SO, J("{`model`:`m`,`state`:`s`,`questions`:{`q`:{`type`:`noul`,`option_keys`:1,`criteria`:null}}}"), 400,
           J("{`detail`:`Noul question must have criteria or instructions: q`}"));
    /* N1, N2 */
    EXPECT(SO, J("{`model`:`m`,`state`:`s`,`questions`:{`q`:{`type`:`noul`,`criteria`:[1]}}}"), 422,
           J("{`detail`:[{`type`:`model_type`,`loc`:[`body`,`questions`,`q`,`noul`,`criteria`],`msg`:`Input should "
             "be a valid dictionary or instance of NoulCriteria`,`input`:[1]}]}"));
    EXPECT(SO, J("{`model`:`m`,`state`:`s`,`questions`:{`q`:{`type`:`noul`,`criteria`:{`false`:0,`x`:1,`true`:"
                 "false}}}}"),
           422,
           J("{`detail`:[{`type`:`string_type`,`loc`:[`body`,`questions`,`q`,`noul`,`criteria`,`true`,`str`],`msg`:"
             "`Input should be a valid string`,`input`:false},{`type`:`dict_type`,`loc`:[`body`,`questions`,`q`,"
             "`noul`,`criteria`,`true`,`dict[any,any]`],`msg`:`Input should be a valid dictionary`,`input`:false},"
             "{`type`:`list_type`,`loc`:[`body`,`questions`,`q`,`noul`,`criteria`,`true`,`list[any]`],`msg`:`Input "
             "should be a valid list`,`input`:false},{`type`:`string_type`,`loc`:[`body`,`questions`,`q`,`noul`,"
             "`criteria`,`false`,`str`],`msg`:`Input should be a valid string`,`input`:0},{`type`:`dict_type`,`loc`:"
             "[`body`,`questions`,`q`,`noul`,`criteria`,`false`,`dict[any,any]`],`msg`:`Input should be a valid "
             "dictionary`,`input`:0},{`type`:`list_type`,`loc`:[`body`,`questions`,`q`,`noul`,`criteria`,`false`,"
             "`list[any]`],`msg`:`Input should be a valid list`,`input`:0}]}"));
    /* C2 (every bad key, C5 not checked), C3 (first bad element, integer index), C4 */
    EXPECT(SO, J("{`model`:`m`,`state`:`s`,`questions`:{`q`:{`type`:`choice`,`criteria`:{`a`:1.0e0,`b`:null,"
                 "`c`:true}}}}"),
           422,
           J("{`detail`:[{`type`:`string_type`,`loc`:[`body`,`questions`,`q`,`choice`,`criteria`,`a`,`str`],`msg`:"
             "`Input should be a valid string`,`input`:1.0e0},{`type`:`dict_type`,`loc`:[`body`,`questions`,`q`,"
             "`choice`,`criteria`,`a`,`dict[any,any]`],`msg`:`Input should be a valid dictionary`,`input`:1.0e0},"
             "{`type`:`list_type`,`loc`:[`body`,`questions`,`q`,`choice`,`criteria`,`a`,`list[any]`],`msg`:`Input "
             "should be a valid list`,`input`:1.0e0},{`type`:`string_type`,`loc`:[`body`,`questions`,`q`,`choice`,"
             "`criteria`,`c`,`str`],`msg`:`Input should be a valid string`,`input`:true},{`type`:`dict_type`,`loc`:"
             "[`body`,`questions`,`q`,`choice`,`criteria`,`c`,`dict[any,any]`],`msg`:`Input should be a valid "
             "dictionary`,`input`:true},{`type`:`list_type`,`loc`:[`body`,`questions`,`q`,`choice`,`criteria`,`c`,"
             "`list[any]`],`msg`:`Input should be a valid list`,`input`:true}]}"));
    EXPECT(SO, J("{`model`:`m`,`state`:`s`,`questions`:{`q`:{`type`:`choice`,`criteria`:[`a`,2,null]}}}"), 422,
           J("{`detail`:[{`type`:`string_type`,`loc`:[`body`,`questions`,`q`,`choice`,`criteria`,1],`msg`:`Input "
             "should be a valid string`,`input`:2}]}"));
    EXPECT(SO, J("{`model`:`m`,`state`:`s`,`questions`:{`q`:{`type`:`choice`,`criteria`:null}}}"), 422,
           J("{`detail`:[{`type`:`dict_type`,`loc`:[`body`,`questions`,`q`,`choice`,`criteria`],`msg`:`Input should "
             "be a valid dictionary`,`input`:null}]}"));
    EXPECT(SO, J("{`model`:`m`,`state`:`s`,`questions`:{`q`:{`type`:`choice`,`criteria`:[]}}}"), 400,
           J("{`detail`:`Choice question must have at least one choice: q`}"));
    /* S1 (loc criteria), levels alias, S5, S6, S4 on objects */
    EXPECT(SO, J("{`model`:`m`,`state`:`s`,`questions`:{`q`:{`type`:`score`,`criteria`:null,`levels`:null}}}"), 422,
           J("{`detail`:[{`type`:`missing`,`loc`:[`body`,`questions`,`q`,`score`,`criteria`],`msg`:`Field "
             "required`,`input`:{`type`:`score`,`criteria`:null,`levels`:null}}]}"));
    EXPECT(SO, J("{`model`:`m`,`state`:`s`,`questions`:{`q`:{`type`:`score`,`levels`:{}}}}"), 422,
           J("{`detail`:[{`type`:`too_short`,`loc`:[`body`,`questions`,`q`,`score`,`levels`],`msg`:`Dictionary "
             "should have at least 1 item after validation, not 0`,`input`:{},`ctx`:{`field_type`:`Dictionary`,"
             "`min_length`:1,`actual_length`:0}}]}"));
    EXPECT(SO, J("{`model`:`m`,`state`:`s`,`questions`:{`q`:{`type`:`score`,`criteria`:`abc`}}}"), 422,
           J("{`detail`:[{`type`:`list_type`,`loc`:[`body`,`questions`,`q`,`score`,`criteria`],`msg`:`Input should "
             "be a valid list`,`input`:`abc`}]}"));
    EXPECT(SO, J("{`model`:`m`,`state`:`s`,`questions`:{`q`:{`type`:`score`,`criteria`:{`a`:1,`b`:1,`c`:1,`d`:1,"
                 "`e`:1,`f`:1,`g`:1,`h`:1,`i`:1,`j`:1,`k`:1}}}}"),
           400, J("{`detail`:`Too many score levels. Must have at most 10 levels.`}"));
    /* question not an object (Q1), question ids with escapes in loc and messages */
    EXPECT(SO, J("{`model`:`m`,`state`:`s`,`questions`:{`a\\`b`:[],`c\\u0001`:{`type`:`choice`,`criteria`:{}}}}"), 422,
           J("{`detail`:[{`type`:`model_attributes_type`,`loc`:[`body`,`questions`,`a\\`b`],`msg`:`Input should be "
             "a valid dictionary or object to extract fields from`,`input`:[]}]}"));
    EXPECT(SO, J("{`model`:`m`,`state`:`s`,`questions`:{`c\\u0001`:{`type`:`choice`,`criteria`:{}}}}"), 400,
           J("{`detail`:`Choice question must have at least one choice: c\\u0001`}"));
}

static void test_capability(void) {
    const char *ok = "{`model`:`m`,`state`:`s`,`questions`:{`q`:{`type`:`choice`,`criteria`:[`a`,`b`]%s}}}";
    EXPECT(SO, fmt(ok, ""), 200, "");
    EXPECT(SO, fmt(ok, ",`evidence`:[0]"), 422,
           J("{`error`:`unsupported`,`detail`:[{`type`:`unsupported_feature`,`loc`:[`body`,`questions`,`q`,"
             "`evidence`],`msg`:`evidence is not available for this model (no evidence_head.pt)`}]}"));
    EXPECT(SO, fmt(ok, ",`evidence`:0.0"), 200, "");
    EXPECT(SO, fmt(ok, ",`evidence`:``"), 200, "");
    EXPECT(BA, fmt(ok, ",`evidence`:true"), 422,
           J("{`error`:`evidence is not available for this model (no evidence_head.pt)`}"));
    /* 02 §4.4: act with 1 or more than 10 options; multi with any number of labels passes */
    EXPECT(SO, J("{`model`:`m`,`state`:`s`,`questions`:{`m`:{`type`:`multi`,`criteria`:[`a`]},`x`:{`type`:`act`,"
                 "`criteria`:{`a`:null},`costs`:{`wrong`:1}},`y`:{`type`:`act`,`criteria`:[`1`,`2`,`3`,`4`,`5`,`6`,"
                 "`7`,`8`,`9`,`10`,`11`],`costs`:{`wrong`:1}}},`facts`:`auto`}"),
           422,
           J("{`error`:`unsupported`,`detail`:[{`type`:`unsupported_single_option`,`loc`:[`body`,`questions`,`x`,"
             "`criteria`],`msg`:`act with a single option/level is not supported yet: its expected behaviour is "
             "unresolved`},{`type`:`unsupported_option_count`,`loc`:[`body`,`questions`,`y`,`criteria`],`msg`:`11 "
             "options: the letter readout of the model reads 2..10; only choice questions take more (the grouped "
             "11..255 strategy)`},{`type`:`unsupported_feature`,`loc`:[`body`,`facts`],`msg`:`facts \\`auto\\` is "
             "not available on this server yet`}]}"));
    EXPECT(SO, J("{`model`:`m`,`state`:`s`,`questions`:{`m`:{`type`:`multi`,`criteria`:[`a`,`b`,`c`,`d`,`e`,`f`,"
                 "`g`,`h`,`i`,`j`,`k`,`l`]},`x`:{`type`:`act`,`criteria`:{`a`:null,`b`:null},`costs`:{`wrong`:1},"
                 "`evidence`:1}}}"),
           422,
           J("{`error`:`unsupported`,`detail`:[{`type`:`unsupported_feature`,`loc`:[`body`,`questions`,`x`,"
             "`evidence`],`msg`:`evidence is not available for this model (no evidence_head.pt)`}]}"));
    EXPECT(SO, J("{`model`:`m`,`state`:`s`,`questions`:{`q`:{`type`:`choice`,`criteria`:[`a`]},`r`:{`type`:`score`,"
                 "`levels`:[`x`]}},`facts`:`off`}"),
           200, "");
}

/* 03 §1.2 (multi) and §2.2–§2.5 (act): every validation error with its type,
 * loc (type segment, label indices as strings) and message, no input; the
 * /v1/basal forms (the msg only, and the 2..10 rule for act). */
static void test_multi_act(void) {
    const char *m = "{`type`:`multi`,`instructions`:`x`%s}";
    /* criteria neither object, array nor null */
    EXPECT(SO, body_q(fmt(m, ",`criteria`:5,`threshold`:`x`")), 422,
           J("{`detail`:[{`type`:`dict_type`,`loc`:[`body`,`questions`,`q`,`multi`,`criteria`],`msg`:`multi "
             "criteria must be an object or a list`}]}"));
    EXPECT(SO, body_q(fmt(m, ",`criteria`:`login`")), 422,
           J("{`detail`:[{`type`:`dict_type`,`loc`:[`body`,`questions`,`q`,`multi`,`criteria`],`msg`:`multi "
             "criteria must be an object or a list`}]}"));
    EXPECT(BA, body_q(fmt(m, ",`criteria`:true")), 422, J("{`error`:`multi criteria must be an object or a list`}"));
    /* the first non-string label, its index as a string */
    EXPECT(SO, body_q(fmt(m, ",`criteria`:[`a`,1,null]")), 422,
           J("{`detail`:[{`type`:`string_type`,`loc`:[`body`,`questions`,`q`,`multi`,`criteria`,`1`],`msg`:`labels "
             "must be strings`}]}"));
    EXPECT(BA, body_q(fmt(m, ",`criteria`:[{`a`:1}]")), 422, J("{`error`:`labels must be strings`}"));
    /* no labels: absent, null, {}, [] */
    static const char *const none[] = { "", ",`criteria`:null", ",`criteria`:{}", ",`criteria`:[]" };
    for (int i = 0; i < 4; i++) {
        EXPECT(SO, body_q(fmt(m, none[i])), 422,
               J("{`detail`:[{`type`:`missing`,`loc`:[`body`,`questions`,`q`,`multi`,`criteria`],`msg`:`multi needs "
                 "criteria`}]}"));
        EXPECT(BA, body_q(fmt(m, none[i])), 422, J("{`error`:`multi needs criteria`}"));
    }
    /* threshold, then max, then min; null is absent; only the first failure */
    EXPECT(SO, body_q(fmt(m, ",`criteria`:[`a`],`threshold`:`0.5`,`max`:true,`min`:[]")), 422,
           J("{`detail`:[{`type`:`float_type`,`loc`:[`body`,`questions`,`q`,`multi`,`threshold`],`msg`:`threshold "
             "must be a number`}]}"));
    EXPECT(SO, body_q(fmt(m, ",`criteria`:[`a`],`threshold`:null,`max`:true,`min`:[]")), 422,
           J("{`detail`:[{`type`:`float_type`,`loc`:[`body`,`questions`,`q`,`multi`,`max`],`msg`:`max must be a "
             "number`}]}"));
    EXPECT(SO, body_q(fmt(m, ",`criteria`:{`a`:null},`threshold`:0.7,`max`:2,`min`:{}")), 422,
           J("{`detail`:[{`type`:`float_type`,`loc`:[`body`,`questions`,`q`,`multi`,`min`],`msg`:`min must be a "
             "number`}]}"));
    EXPECT(BA, body_q(fmt(m, ",`criteria`:[`a`],`max`:`2`")), 422, J("{`error`:`max must be a number`}"));
    EXPECT(SO, body_q(fmt(m, ",`criteria`:[`a`,`a`],`threshold`:0,`max`:-1.5,`min`:1e3,`option_keys`:`hide`")), 200,
           "");
    /* the question's own errors first (Q5), then the multi rule */
    EXPECT(SO, body_q("{`type`:`multi`,`instructions`:5,`criteria`:[]}"), 422,
           J("{`detail`:[{`type`:`string_type`,`loc`:[`body`,`questions`,`q`,`multi`,`instructions`,`str`],`msg`:`"
             "Input should be a valid string`,`input`:5},{`type`:`dict_type`,`loc`:[`body`,`questions`,`q`,`multi`,"
             "`instructions`,`dict[any,any]`],`msg`:`Input should be a valid dictionary`,`input`:5},{`type`:"
             "`list_type`,`loc`:[`body`,`questions`,`q`,`multi`,`instructions`,`list[any]`],`msg`:`Input should be a "
             "valid list`,`input`:5},{`type`:`missing`,`loc`:[`body`,`questions`,`q`,`multi`,`criteria`],`msg`:`multi "
             "needs criteria`}]}"));

    const char *a = "{`type`:`act`,`instructions`:`Czy zwrot?`%s}";
    /* base: an unknown string; a non-string base counts as absent (choice) */
    EXPECT(SO, body_q(fmt(a, ",`criteria`:{`a`:`A`,`b`:`B`},`base`:`may\\`be`,`costs`:5")), 422,
           J("{`detail`:[{`type`:`literal_error`,`loc`:[`body`,`questions`,`q`,`act`,`base`],`msg`:`unsupported act "
             "base \\`may\\\\\\`be\\``}]}"));
    EXPECT(BA, body_q(fmt(a, ",`criteria`:[`a`,`b`],`base`:`noulx`,`costs`:{`wrong`:1}")), 422,
           J("{`error`:`unsupported act base \\`noulx\\``}"));
    EXPECT(SO, body_q(fmt(a, ",`criteria`:[`a`,`b`],`base`:7,`costs`:{`wrong`:1}")), 200, "");
    /* choice base: C1 (criteria absent with a base), C2, C3, C4, C5, C6 */
    EXPECT(SO, body_q(fmt(a, ",`base`:`choice`,`costs`:{`wrong`:1}")), 422,
           J("{`detail`:[{`type`:`missing`,`loc`:[`body`,`questions`,`q`,`act`,`criteria`],`msg`:`Field required`,"
             "`input`:{`type`:`act`,`instructions`:`Czy zwrot?`,`base`:`choice`,`costs`:{`wrong`:1}}}]}"));
    EXPECT(SO, body_q(fmt(a, ",`criteria`:{`a`:1,`b`:`B`},`costs`:{`wrong`:1}")), 422,
           J("{`detail`:[{`type`:`string_type`,`loc`:[`body`,`questions`,`q`,`act`,`criteria`,`a`,`str`],`msg`:`Input "
             "should be a valid string`,`input`:1},{`type`:`dict_type`,`loc`:[`body`,`questions`,`q`,`act`,`criteria`,"
             "`a`,`dict[any,any]`],`msg`:`Input should be a valid dictionary`,`input`:1},{`type`:`list_type`,`loc`:["
             "`body`,`questions`,`q`,`act`,`criteria`,`a`,`list[any]`],`msg`:`Input should be a valid list`,`input`:1}"
             "]}"));
    EXPECT(SO, body_q(fmt(a, ",`criteria`:[`a`,2],`costs`:{`wrong`:1}")), 422,
           J("{`detail`:[{`type`:`string_type`,`loc`:[`body`,`questions`,`q`,`act`,`criteria`,1],`msg`:`Input should "
             "be a valid string`,`input`:2}]}"));
    EXPECT(SO, body_q(fmt(a, ",`criteria`:`a`,`costs`:{`wrong`:1}")), 422,
           J("{`detail`:[{`type`:`dict_type`,`loc`:[`body`,`questions`,`q`,`act`,`criteria`],`msg`:`Input should be "
             "a valid dictionary`,`input`:`a`}]}"));
    EXPECT(SO, body_q(fmt(a, ",`criteria`:[],`costs`:{`wrong`:1}")), 400,
           J("{`detail`:`Choice question must have at least one choice: q`}"));
    EXPECT(BA, body_q(fmt(a, ",`criteria`:[],`costs`:{`wrong`:1}")), 422,
           J("{`error`:`Choice question must have at least one choice: q`}"));
    /* noul base: empty object, base noul with a dropped non-object, N2 */
    EXPECT(SO, body_q(fmt(a, ",`criteria`:{},`costs`:{`wrong`:1}")), 200, "");
    EXPECT(SO, body_q("{`type`:`act`,`base`:`noul`,`criteria`:5,`costs`:{`wrong`:1}}"), 200, "");
    EXPECT(SO, body_q(fmt(a, ",`criteria`:{`true`:5},`costs`:{`wrong`:1}")), 422,
           J("{`detail`:[{`type`:`string_type`,`loc`:[`body`,`questions`,`q`,`act`,`criteria`,`true`,`str`],`msg`:`"
             "Input should be a valid string`,`input`:5},{`type`:`dict_type`,`loc`:[`body`,`questions`,`q`,`act`,"
             "`criteria`,`true`,`dict[any,any]`],`msg`:`Input should be a valid dictionary`,`input`:5},{`type`:"
             "`list_type`,`loc`:[`body`,`questions`,`q`,`act`,`criteria`,`true`,`list[any]`],`msg`:`Input should be a "
             "valid list`,`input`:5}]}"));
    /* costs: absent, not an object, empty */
    static const char *const nocost[] = { "", ",`costs`:[1]", ",`costs`:{}", ",`costs`:null" };
    for (int i = 0; i < 4; i++) {
        EXPECT(SO, body_q(fmt(a, nocost[i])), 422,
               J("{`detail`:[{`type`:`missing`,`loc`:[`body`,`questions`,`q`,`act`,`costs`],`msg`:`act needs "
                 "costs`}]}"));
        EXPECT(BA, body_q(fmt(a, nocost[i])), 422, J("{`error`:`act needs costs`}"));
    }
    /* short form: wrong (also when absent), then defer */
    EXPECT(SO, body_q(fmt(a, ",`costs`:{`defer`:1}")), 422,
           J("{`detail`:[{`type`:`float_type`,`loc`:[`body`,`questions`,`q`,`act`,`costs`,`wrong`],`msg`:`cost must "
             "be a number`}]}"));
    EXPECT(SO, body_q(fmt(a, ",`costs`:{`wrong`:`9`,`defer`:`x`}")), 422,
           J("{`detail`:[{`type`:`float_type`,`loc`:[`body`,`questions`,`q`,`act`,`costs`,`wrong`],`msg`:`cost must "
             "be a number`}]}"));
    EXPECT(SO, body_q(fmt(a, ",`costs`:{`wrong`:9,`defer`:null}")), 422,
           J("{`detail`:[{`type`:`float_type`,`loc`:[`body`,`questions`,`q`,`act`,`costs`,`defer`],`msg`:`cost must "
             "be a number`}]}"));
    /* full form: a row without exactly the outcomes (wrong as an object is a row) */
    EXPECT(SO, body_q(fmt(a, ",`costs`:{`wrong`:{`true`:1}}")), 422,
           J("{`detail`:[{`type`:`value_error`,`loc`:[`body`,`questions`,`q`,`act`,`costs`,`wrong`],`msg`:`costs["
             "\\`wrong\\`] must give a cost for every outcome [\\`true\\`, \\`false\\`]`}]}"));
    EXPECT(SO, body_q(fmt(a, ",`criteria`:[`x`,`y\\`z`,`w`],`costs`:{`ok`:{`x`:1,`y\\`z`:2,`w`:3},`bad`:5}")), 422,
           J("{`detail`:[{`type`:`value_error`,`loc`:[`body`,`questions`,`q`,`act`,`costs`,`bad`],`msg`:`costs["
             "\\`bad\\`] must give a cost for every outcome [\\`x\\`, \\`y\\\\\\`z\\`, \\`w\\`]`}]}"));
    EXPECT(SO, body_q(fmt(a, ",`costs`:{`go`:{`true`:1,`false`:2,`x`:3}}")), 422,
           J("{`detail`:[{`type`:`value_error`,`loc`:[`body`,`questions`,`q`,`act`,`costs`,`go`],`msg`:`costs["
             "\\`go\\`] must give a cost for every outcome [\\`true\\`, \\`false\\`]`}]}"));
    EXPECT(BA, body_q(fmt(a, ",`costs`:{`go`:{`false`:1,`maybe`:2}}")), 422,
           J("{`error`:`costs[\\`go\\`] must give a cost for every outcome [\\`true\\`, \\`false\\`]`}"));
    /* a cost that is not a number: loc [costs, action, outcome], outcomes in key order */
    EXPECT(SO, body_q(fmt(a, ",`costs`:{`go`:{`false`:`1`,`true`:null}}")), 422,
           J("{`detail`:[{`type`:`float_type`,`loc`:[`body`,`questions`,`q`,`act`,`costs`,`go`,`true`],`msg`:`cost "
             "must be a number`}]}"));
    /* max_error */
    EXPECT(SO, body_q(fmt(a, ",`costs`:{`wrong`:1},`max_error`:`0.01`")), 422,
           J("{`detail`:[{`type`:`float_type`,`loc`:[`body`,`questions`,`q`,`act`,`max_error`],`msg`:`max_error must "
             "be a number`}]}"));
    EXPECT(BA, body_q(fmt(a, ",`costs`:{`wrong`:1},`max_error`:[]")), 422, J("{`error`:`max_error must be a number`}"));
    EXPECT(SO, body_q(fmt(a, ",`costs`:{`wrong`:1},`max_error`:null,`defer_action`:5,`actions`:7")), 200, "");
    /* /v1/basal: the 2..10 rule instead of the capability errors; null instructions are fine */
    EXPECT(BA, body_q("{`type`:`act`,`criteria`:[`a`],`costs`:{`wrong`:1}}"), 422,
           J("{`error`:`question \\`q\\`: 1 options (supported: 2..10)`}"));
    EXPECT(BA, body_q("{`type`:`act`,`criteria`:[`1`,`2`,`3`,`4`,`5`,`6`,`7`,`8`,`9`,`10`,`11`],`costs`:{`wrong`:1}}"),
           422, J("{`error`:`question \\`q\\`: 11 options (supported: 2..10)`}"));
    EXPECT(BA, body_q("{`type`:`act`,`instructions`:null,`costs`:{`wrong`:1}}"), 200, "");
    EXPECT(BA, body_q("{`type`:`multi`,`criteria`:[`a`]}"), 200, "");
    /* T11 comes before the question's own errors */
    EXPECT(BA, body_q("{`type`:`multi`,`evidence`:`yes`,`criteria`:5}"), 422,
           J("{`error`:`evidence is not supported for multi; multi criteria must be an object or a list`}"));
}

/* 02 §5: the /v1/basal forms. */
static void test_basal(void) {
    EXPECT(BA, "[1]", 422, J("{`error`:`request body must be a JSON object`}"));
    EXPECT(BA, "\"x\"", 422, J("{`error`:`request body must be a JSON object`}"));
    EXPECT(BA, "{}", 422, J("{`error`:`Field required; Field required`}"));
    EXPECT(BA, J("{`model`:5,`state`:null,`questions`:{}}"), 422,
           J("{`error`:`Field required; Dictionary should have at least 1 item after validation, not 0`}"));
    EXPECT(BA, J("{`state`:5,`questions`:[],`facts`:1}"), 422,
           J("{`error`:`Input should be a valid dictionary; facts must be \\`off\\` or \\`auto\\``}"));
    /* invalid state: the questions are not looked at */
    EXPECT(BA, J("{`questions`:{`q`:{`type`:`choice`}}}"), 422, J("{`error`:`Field required`}"));
    EXPECT(BA, J("{`state`:`s`,`questions`:{`q`:5,`r`:{`criteria`:[`a`,`b`]}}}"), 422,
           J("{`error`:`question must be an object`}"));
    EXPECT(BA, J("{`state`:`s`,`questions`:{`q`:{`option_keys`:`maybe`,`criteria`:[`a`,`b`]}}}"), 422,
           J("{`error`:`option_keys must be \\`show\\` or \\`hide\\`, got \\`maybe\\``}"));
    EXPECT(BA, J("{`state`:`s`,`questions`:{`q`:{`option_keys`:null,`criteria`:[`a`,`b`]}}}"), 422,
           J("{`error`:`option_keys must be \\`show\\` or \\`hide\\`, got null`}"));
    EXPECT(BA, J("{`state`:`s`,`questions`:{`q`:{`option_keys`:{`a`: 1.50},`criteria`:[`a`,`b`]}}}"), 422,
           J("{`error`:`option_keys must be \\`show\\` or \\`hide\\`, got {\\`a\\`:1.50}`}"));
    EXPECT(BA, J("{`state`:`s`,`questions`:{`q`:{`type`:`choice`,`criteria`:[`a`]}}}"), 422,
           J("{`error`:`question \\`q\\`: 1 options (supported: 2..10)`}"));
    EXPECT(BA, J("{`state`:`s`,`questions`:{`q\\`\\t`:{`criteria`:{`a`:1,`b`:2,`c`:3,`d`:4,`e`:5,`f`:6,`g`:7,`h`:8,"
                 "`i`:9,`j`:10,`k`:11,`l`:12}}}}"),
           422, J("{`error`:`question \\`q\\\\\\`\\\\t\\`: 12 options (supported: 2..10)`}"));
    EXPECT(BA, J("{`state`:`s`,`questions`:{`q`:{`criteria`:[`a`,`a`]}}}"), 422,
           J("{`error`:`question \\`q\\`: 1 options (supported: 2..10)`}"));
    EXPECT(BA, J("{`state`:`s`,`questions`:{`q`:{`criteria`:{}},`r`:{`type`:`score`}}}"), 422,
           J("{`error`:`question \\`q\\`: 0 options (supported: 2..10); question \\`r\\`: 0 options (supported: "
             "2..10)`}"));
    EXPECT(BA, J("{`state`:`s`,`questions`:{`q`:{`criteria`:`ab`}}}"), 422,
           J("{`error`:`criteria must be an object or a list`}"));
    EXPECT(BA, J("{`state`:`s`,`questions`:{`q`:{`type`:`noul`,`criteria`:[1]}}}"), 422,
           J("{`error`:`noul criteria must be an object`}"));
    EXPECT(BA, J("{`state`:`s`,`questions`:{`q`:{`type`:`score`,`criteria`:0,`levels`:5}}}"), 422,
           J("{`error`:`score criteria must be a list or an object`}"));
    EXPECT(BA, J("{`state`:`s`,`questions`:{`q`:{`type`:`noul`}}}"), 200, "");
    EXPECT(BA, J("{`state`:7,`questions`:{`q`:{`type`:`noul`,`criteria`:0}},`facts`:null}"), 200, "");
}

static bs_request *parse_ok(bs_dialect d, const char *body) {
    bs_reply rep;
    bs_reply_init(&rep);
    bs_request *r = NULL;
    bs_err e = { 0 };
    int rc = bs_request_parse(body, strlen(body), d, NULL, &r, &rep, &e);
    if (rc) fprintf(stderr, "unexpected failure: %s -> %s\n", body, rep.body.data ? rep.body.data : e.msg);
    CHECK_INT(rc, 0);
    bs_reply_free(&rep);
    return r;
}

static void check_options(int line, const bs_question *q, const char *const *keys, const char *const *opts, size_t n) {
    int ok = q->n_options == n;
    for (size_t i = 0; ok && i < n; i++)
        ok = strlen(keys[i]) == q->keys[i].len && !memcmp(keys[i], q->keys[i].s, q->keys[i].len) &&
             strlen(opts[i]) == q->options[i].len && !memcmp(opts[i], q->options[i].s, q->options[i].len);
    if (ok) {
        check_pass_++;
        return;
    }
    check_fail_++;
    fprintf(stderr, "line %d: options differ:", line);
    for (size_t i = 0; i < q->n_options; i++) fprintf(stderr, " [%s|%s]", q->keys[i].s, q->options[i].s);
    fprintf(stderr, "\n");
}
#define OPTS(q, ...) do { \
    static const char *const kv_[] = { __VA_ARGS__ }; \
    size_t n_ = sizeof kv_ / sizeof kv_[0] / 2; \
    const char *k_[16], *o_[16]; \
    for (size_t i_ = 0; i_ < n_; i_++) { k_[i_] = kv_[2 * i_]; o_[i_] = kv_[2 * i_ + 1]; } \
    check_options(__LINE__, q, k_, o_, n_); \
} while (0)

/* 01 §2.8 and the dialect differences of 02 §5.1 */
static void test_option_texts(void) {
    bs_request *r = parse_ok(SO, J("{`model`:`m`,`state`:`s`,`questions`:{"
                                   "`a`:{`type`:`choice`,`criteria`:{`returns`:`Returns`,`it`:`IT`}},"
                                   "`b`:{`type`:`choice`,`criteria`:{`x`:null,`y`:`why`}},"
                                   "`c`:{`type`:`choice`,`criteria`:{`approve`:{`requires_manager`:false}}},"
                                   "`d`:{`type`:`choice`,`criteria`:{`option_1`:`Yes`,`opcja_2`:`Nie`},"
                                   "`option_keys`:`hide`},"
                                   "`e`:{`type`:`choice`,`criteria`:{`a`:`same`,`b`:`same`},`option_keys`:`hide`},"
                                   "`f`:{`type`:`choice`,`criteria`:{`t1`:`Billing`,`t2`:`Billing`,`t3`:"
                                   "`Retention`},`option_keys`:`hide`},"
                                   "`g`:{`type`:`choice`,`criteria`:{`correct`:{},`ignore`:[],`reject`:"
                                   "`Odrzucić fakturę`}},"
                                   "`h`:{`type`:`choice`,`criteria`:[`b`,`a`,`b`,`c`],`option_keys`:`show`},"
                                   "`i`:{`type`:`choice`,`criteria`:{`k`:``,`l`:[1.50, {`z`: null}]},"
                                   "`option_keys`:null},"
                                   "`j`:{`type`:`choice`,`criteria`:{`x`:`y`,`y`:null},`option_keys`:`hide`}}}"));
    if (r) {
        CHECK_INT(r->n_questions, 10);
        OPTS(&r->questions[0], "returns", "returns: Returns", "it", "it: IT");
        OPTS(&r->questions[1], "x", "x", "y", "y: why");
        OPTS(&r->questions[2], "approve", "approve: {\"requires_manager\": false}");
        OPTS(&r->questions[3], "option_1", "Yes", "opcja_2", "Nie");
        OPTS(&r->questions[4], "a", "a: same", "b", "b: same");
        OPTS(&r->questions[5], "t1", "t1: Billing", "t2", "t2: Billing", "t3", "Retention");
        OPTS(&r->questions[6], "correct", "correct: {}", "ignore", "ignore: []", "reject", "reject: Odrzucić fakturę");
        OPTS(&r->questions[7], "b", "b", "a", "a", "c", "c");
        OPTS(&r->questions[8], "k", "k: ", "l", "l: [1.5, {\"z\": null}]");
        /* x's raw "y" duplicates the raw text of y (its key, the description being null) */
        OPTS(&r->questions[9], "x", "x: y", "y", "y");
        CHECK_STR(r->model, "m");
        CHECK_STR(r->state.s, "s");
    }
    bs_request_free(r);

    /* noul: defaults by language; "", {}, [] kept on /v1/systemone */
    r = parse_ok(SO, J("{`model`:`m`,`state`:{`a`: 1.0},`questions`:{"
                       "`en`:{`type`:`noul`,`instructions`:`Is it?`},"
                       "`pl`:{`type`:`noul`,`instructions`:`Czy to błąd?`,`criteria`:{`true`:null}},"
                       "`k`:{`type`:`noul`,`criteria`:{`true`:``,`false`:{},`other`:5},`option_keys`:`hide`},"
                       "`o`:{`type`:`noul`,`instructions`:null,`criteria`:{`false`:[1, `ż`]}}}}"));
    if (r) {
        CHECK_STR(r->state.s, "{\"a\": 1.0}");
        OPTS(&r->questions[0], "true", "Yes", "false", "No");
        CHECK_INT(r->questions[0].lang, BS_LANG_EN);
        OPTS(&r->questions[1], "true", "Tak", "false", "Nie");
        CHECK_INT(r->questions[1].lang, BS_LANG_PL);
        OPTS(&r->questions[2], "true", "", "false", "{}");
        /* the language comes from state + instructions, never from options */
        OPTS(&r->questions[3], "true", "Yes", "false", "[1, \"ż\"]");
        CHECK_INT(r->questions[3].lang, BS_LANG_EN);
        CHECK_STR(r->questions[3].instructions.s, "");
    }
    bs_request_free(r);
    r = parse_ok(BA, J("{`state`:`Zażółć`,`questions`:{"
                       "`k`:{`type`:`noul`,`criteria`:{`true`:``,`false`:{}}},"
                       "`l`:{`type`:`noul`,`criteria`:{`true`:0,`false`:`nope`},`instructions`:null},"
                       "`m`:{`type`:`noul`,`criteria`:[]}}}"));
    if (r) {
        OPTS(&r->questions[0], "true", "Tak", "false", "Nie");
        OPTS(&r->questions[1], "true", "Tak", "false", "nope");
        CHECK_STR(r->questions[1].instructions.s, "null");
        OPTS(&r->questions[2], "true", "Tak", "false", "Nie");
    }
    bs_request_free(r);

    /* score: arrays (no prefix whatever option_keys says), objects (named), levels alias, legend */
    r = parse_ok(SO, J("{`model`:`m`,`state`:`s`,`questions`:{"
                       "`a`:{`type`:`score`,`criteria`:[`niska`,{`level`:`średnia`,`sla_h`:48},[`wysoka`,`dziś`]],"
                       "`option_keys`:`show`},"
                       "`b`:{`type`:`score`,`criteria`:null,`levels`:{`low`:`Low`,`mid`:null,`high`:{`x`:2.50}},"
                       "`option_keys`:`hide`},"
                       "`c`:{`type`:`score`,`levels`:[`pilne`]}}}"));
    if (r) {
        OPTS(&r->questions[0], "0", "niska", "1", "{\"level\": \"średnia\", \"sla_h\": 48}", "2",
             "[\"wysoka\", \"dziś\"]");
        OPTS(&r->questions[1], "low", "Low", "mid", "mid", "high", "{\"x\": 2.5}");
        OPTS(&r->questions[2], "0", "pilne");
        bs_buf b;
        bs_buf_init(&b);
        for (int qi = 0; qi < 2; qi++)
            for (size_t i = 0; i < r->questions[qi].n_options; i++) {
                bs_resp_value(&b, r->questions[qi].legend[i]);
                bs_buf_putc(&b, ' ');
            }
        CHECK_STR(b.data, "\"niska\" {\"level\":\"średnia\",\"sla_h\":48} [\"wysoka\",\"dziś\"] \"Low\" null "
                          "{\"x\":2.50} ");
        bs_buf_free(&b);
    }
    bs_request_free(r);

    /* /v1/basal: type defaults, text() keys of lists, score texts of any value, show/hide */
    r = parse_ok(BA, J("{`model`:7,`state`:[1, 2.50],`questions`:{"
                       "`a`:{`type`:`rank`,`criteria`:[1,`1`,true,null,{`k`:[]}]},"
                       "`b`:{`type`:5,`criteria`:{`x`:0,`y`:null,`z`:false},`option_keys`:`hide`},"
                       "`c`:{`type`:`score`,`criteria`:[],`levels`:[null,3,`hi`]},"
                       "`d`:{`type`:`score`,`criteria`:{`lo`:`L`,`hi`:`L`},`option_keys`:`hide`}}}"));
    if (r) {
        CHECK(r->model == NULL);
        CHECK_STR(r->state.s, "[1, 2.5]");
        CHECK_INT(r->questions[0].type, BS_Q_CHOICE);
        CHECK_INT(r->questions[0].uncalibrated, 1);
        OPTS(&r->questions[0], "1", "1", "true", "true", "null", "null", "{\"k\": []}", "{\"k\": []}");
        CHECK_INT(r->questions[1].uncalibrated, 0);
        OPTS(&r->questions[1], "x", "0", "y", "y", "z", "false");
        CHECK_INT(r->questions[2].type, BS_Q_SCORE);
        OPTS(&r->questions[2], "0", "null", "1", "3", "2", "hi");
        CHECK(r->questions[2].legend == NULL);
        OPTS(&r->questions[3], "lo", "lo: L", "hi", "hi: L");
    }
    bs_request_free(r);

    /* BOM skipped; duplicate keys: last value at the first position */
    r = parse_ok(SO, J("\xef\xbb\xbf{`model`:`m`,`state`:`a`,`questions`:{`q`:{`type`:`choice`,`criteria`:{`x`:`1`,"
                       "`y`:`2`,`x`:`3`}}},`state`:`b`}"));
    if (r) {
        CHECK_STR(r->state.s, "b");
        OPTS(&r->questions[0], "x", "x: 3", "y", "y: 2");
    }
    bs_request_free(r);
}

/* Records "<byte count>\n<body>" on stdin; one line "<status> <reply body>"
 * per record on stdout (reply bodies are compact JSON without raw LFs). */
static int reply_mode(const char *dialect) {
    bs_dialect d = strcmp(dialect, "basal") == 0 ? BA : SO;
    size_t len;
    while (scanf("%zu", &len) == 1 && getchar() == '\n') {
        char *data = malloc(len + 1);
        if (!data || fread(data, 1, len, stdin) != len) {
            free(data);
            return 1;
        }
        bs_reply rep;
        bs_reply_init(&rep);
        int rc = run_steps(d, data, len, &rep, NULL);
        printf("%d %s\n", rep.status, rep.body.data ? rep.body.data : "");
        bs_reply_free(&rep);
        free(data);
        if (rc != 0 && rc != BS_EINVAL) return 1;
    }
    return 0;
}

/* bs_quote_debug against Rust's own {:?} of every scalar value, between two
 * letters (tests/data/rust-debug-escapes.txt, from tools/rust-debug-escapes.rs).
 * Our Unicode data is utf8proc's (15.0 on Debian 12), the table's that of the
 * rustc that wrote it: characters assigned since (unassigned, Cn, here and
 * printed by Rust) and marks whose Grapheme_Extend changed since differ by
 * design; they are counted and bounded, any other difference fails. */
#define RDE "tests/data/rust-debug-escapes.txt"
static void test_quote_debug(void) {
    enum { NCP = 0x110000 };
    char **kind = calloc(NCP, sizeof *kind);
    FILE *f = fopen(RDE, "r");
    CHECK(kind && f);
    if (!kind || !f) {
        fprintf(stderr, "cannot read %s (run from the repository root)\n", RDE);
        free(kind);
        if (f) fclose(f);
        return;
    }
    char line[256];
    unsigned a, b;
    char k[64], *kinds[16];
    int ranges = 0, nkinds = 0;
    while (fgets(line, sizeof line, f)) {
        if (line[0] == '#' || sscanf(line, "%x %x %63s", &a, &b, k) != 3 || b >= NCP || a > b) continue;
        int u = 0; /* the kinds are few (u and six fixed escapes): one copy each */
        while (u < nkinds && strcmp(kinds[u], k)) u++;
        if (u == nkinds && nkinds < 16) kinds[nkinds++] = strdup(k);
        for (unsigned cp = a; u < nkinds && cp <= b; cp++) kind[cp] = kinds[u];
        ranges++;
    }
    fclose(f);
    CHECK(ranges > 800);
    long compared = 0, newer = 0, extend = 0, other = 0;
    for (int32_t cp = 0; cp < NCP; cp++) {
        if (cp >= 0xD800 && cp <= 0xDFFF) continue;
        char in[8] = "a";
        utf8proc_ssize_t w = utf8proc_encode_char(cp, (utf8proc_uint8_t *)in + 1);
        in[1 + w] = 'b';
        char want[64];
        if (!kind[cp]) snprintf(want, sizeof want, "\"a%.*sb\"", (int)w, in + 1);
        else if (!strcmp(kind[cp], "u")) snprintf(want, sizeof want, "\"a\\u{%x}b\"", (unsigned)cp);
        else snprintf(want, sizeof want, "\"a%sb\"", kind[cp]);
        bs_buf out = {0};
        bs_quote_debug(&out, in, (size_t)w + 2);
        bs_buf_putc(&out, '\0');
        compared++;
        if (out.data && !strcmp(out.data, want)) {
            free(out.data);
            continue;
        }
        utf8proc_category_t c = utf8proc_category(cp);
        if (!kind[cp] && c == UTF8PROC_CATEGORY_CN) newer++;
        else if ((kind[cp] && c == UTF8PROC_CATEGORY_MC) ||
                 (!kind[cp] && utf8proc_get_property(cp)->boundclass == UTF8PROC_BOUNDCLASS_EXTEND))
            extend++;
        else if (other++ < 10) CHECK_STR(out.data, want);
        free(out.data);
    }
    printf("quote_debug: %ld scalar values, %ld assigned after utf8proc's Unicode, %ld marks whose "
           "Grapheme_Extend changed, %ld other differences\n", compared, newer, extend, other);
    CHECK_INT(compared, NCP - 0x800);
    CHECK_INT(other, 0);
    CHECK(newer < 12000);
    CHECK(extend < 64);
    for (int u = 0; u < nkinds; u++) free(kinds[u]);
    free(kind);
}

int main(int argc, char **argv) {
    if (argc == 3 && strcmp(argv[1], "--reply") == 0) return reply_mode(argv[2]);
    test_floats();
    test_strings_and_echo();
    test_decode_errors();
    test_validation_vectors();
    test_validation_rules();
    test_capability();
    test_multi_act();
    test_basal();
    test_option_texts();
    test_quote_debug();
    for (size_t i = 0; i < npool; i++) free(pool[i]);
    return check_report("test_request");
}
