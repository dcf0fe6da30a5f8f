/* Decision requests of /v1/systemone and /v1/basal (spec 02 §3–§5, 01 §2.6–§2.8):
 * body decoding with CPython's error positions, validation with the exact error
 * bodies of each dialect, and the readout items (keys and shown option texts)
 * of every question. The HTTP layer runs the steps in the order of 02 §3:
 *
 *   bs_body_parse        step 4 (decode) and 5 (/v1/basal: body is an object)
 *   (admission)          step 6, the server's
 *   bs_body_model        step 7 routing (protocol/reply.h: bs_reply_unknown_model)
 *   bs_request_validate  step 8
 *   bs_request_check_capability  step 9
 *
 * Each failing step fills a bs_reply (status and JSON body) and returns
 * BS_EINVAL; BS_ENOMEM and other codes are server errors. */
#ifndef BS_REQUEST_H
#define BS_REQUEST_H

#include <stddef.h>
#include "basal.h"
#include "protocol/prompt.h"
#include "protocol/pyjson.h"
#include "protocol/reply.h"
#include "base/util.h"

typedef enum { BS_Q_CHOICE, BS_Q_NOUL, BS_Q_SCORE, BS_Q_MULTI, BS_Q_ACT } bs_qtype;
const char *bs_qtype_name(bs_qtype t);

#define BS_MAX_CHOICE_OPTIONS 255
#define BS_MAX_SCORE_LEVELS 10

/* multi (03 §1): the labels and the selection rule. Each label is a yes/no
 * readout with the question's default yes/no options (keys/options of the
 * question hold true/false and Tak/Nie or Yes/No). */
typedef struct bs_multi_spec {
    size_t n_labels;
    bs_text *label_keys;   /* criteria keys in order (duplicates of a list collapsed) */
    bs_text *labels;       /* label texts: the key for a null description, else text(description) */
    double threshold;      /* default 0.5 */
    int has_max, has_min;
    long long max, min;    /* truncated toward zero, saturated like Rust's `as i64` */
} bs_multi_spec;

/* act (03 §2): the cost table over the base readout's outcomes (the
 * question's keys), the defer action and the error target. */
typedef struct bs_act_spec {
    bs_qtype base;         /* BS_Q_NOUL, BS_Q_CHOICE or BS_Q_SCORE (calibration key) */
    size_t n_actions;
    bs_text *actions;      /* action names in row order */
    double *costs;         /* [n_actions][n_options], row-major */
    bs_text defer;         /* defer action name; defer.s == NULL: none */
    char *max_error;       /* Python str() of max_error (the CALIBRATION.json key); NULL: absent */
} bs_act_spec;

typedef struct bs_question {
    bs_text id;            /* the questions key, echoed in answers */
    bs_qtype type;
    int uncalibrated;      /* /v1/basal: an unknown type read as choice (T = 1) */
    bs_text instructions;  /* the question text (01 §2.7) */
    bs_lang lang;          /* from state text (after facts) + instructions */
    int hide;              /* option_keys "hide" */
    int evidence;          /* Python-truthy "evidence" */
    size_t n_options;
    bs_text *keys;         /* answer keys, canonical order */
    bs_text *options;      /* shown option texts (01 §2.8), canonical order */
    /* /v1/systemone score: the original level values for the legend (array
     * elements or object values), borrowed from the request body; else NULL.
     * /v1/basal legends are the shown texts (options). */
    const bj_value **legend;
    const bj_value *raw;   /* the question object in the body (type-specific extensions) */
    bs_multi_spec *multi;  /* type multi: the labels; else NULL */
    bs_act_spec *act;      /* type act: the costs; else NULL */
} bs_question;

typedef struct bs_request {
    bs_dialect dialect;
    bj_value *body;        /* the parsed body, owned; borrowed pointers point into it */
    const char *model;     /* the model field if it is a string, else NULL */
    size_t model_len;
    bs_text state;         /* state text, after the facts injection */
    int facts_auto;        /* facts: "auto" requested */
    int facts_applied;     /* the facts hook ran (facts_auto without a hook is refused at step 9) */
    size_t facts_limit;    /* characters of the state text before injection */
    size_t n_questions;
    bs_question *questions;
} bs_request;

/* facts: "auto" (03 §3): returns 0 with the injected state text in out, 1 when
 * the computation raises (the Python exception text in msg, reported as T10),
 * or a negative BS_E* code. */
typedef int (*bs_facts_fn)(void *ctx, const char *state, size_t len, bs_buf *out, bs_buf *msg);

typedef struct bs_request_opts {
    bs_facts_fn facts; /* NULL: facts "auto" is accepted by validation and refused at step 9 */
    void *facts_ctx;
} bs_request_opts;

/* What the serving model can do, for the capability check. */
typedef struct bs_caps {
    int evidence_head; /* evidence_head.pt loaded */
} bs_caps;

/* Steps 4–5: decodes the body (a leading UTF-8 BOM is skipped; nesting at
 * most 128). A decode error or, on /v1/basal, a non-object body fills rep. */
int bs_body_parse(const char *data, size_t len, bs_dialect d, bj_value **out, bs_reply *rep, bs_err *e);

/* Step 7: the model field when the body is an object and it is a string; NULL
 * otherwise (the request then goes to the default model). */
const char *bs_body_model(const bj_value *body, size_t *len);

/* Step 8: validates body (ownership passes to this function, also on failure)
 * and builds the request. opts may be NULL. */
int bs_request_validate(bj_value *body, bs_dialect d, const bs_request_opts *opts, bs_request **out,
                        bs_reply *rep, bs_err *e);

/* Steps 4, 5 and 8 in one call, for callers without routing or admission. */
int bs_request_parse(const char *data, size_t len, bs_dialect d, const bs_request_opts *opts,
                     bs_request **out, bs_reply *rep, bs_err *e);

/* Step 9: 422 {"error":"unsupported",…} (or the /v1/basal form) for questions
 * this engine cannot answer. caps may be NULL (no optional capability). */
int bs_request_check_capability(const bs_request *r, const bs_caps *caps, bs_reply *rep, bs_err *e);

void bs_request_free(bs_request *r);

/* Python truthiness of a JSON value (absent = NULL is falsy). */
int bs_json_truthy(const bj_value *v);

#endif
