/* `basal eval`: labelled items evaluated against a model, in-process or over
 * HTTP, with accuracy, macro-F1, log-loss, Brier score, expected calibration
 * error and confusion matrices per question type and per question, for one
 * or more settings side by side.
 *
 *   items.c    the item files (upstream's basal-run lines and ours) as
 *              System One requests and the decisions they score
 *   run.c      the answers: a basal_session per setting, or a server
 *   metrics.c  the metric definitions
 *   report.c   the JSON report and the text summary
 *   html.c     the self-contained HTML report
 *   eval.c     the command: options, settings, the order of the work
 *
 * A *decision* (ev_target) is one question of one item with an expected
 * answer (a multi question gives one yes/no decision per label). Decisions
 * of the same question id, type (and multi label) across items form a
 * *question* (ev_group), the unit of a confusion matrix. */
#ifndef BS_CLI_EVAL_H
#define BS_CLI_EVAL_H

#include <stddef.h>

#include "base/util.h"
#include "protocol/pyjson.h"
#include "protocol/request.h"

#define EV_BINS 15          /* confidence bins of the ECE, the reliability diagram and the histogram */
#define EV_LOG_CLIP 1e-15   /* log-loss reads max(p, EV_LOG_CLIP) */
#define EV_N_TYPES 5        /* bs_qtype values */

typedef struct ev_group {
    char *question;    /* the question id */
    char *label;       /* multi: the label key; else NULL */
    bs_qtype type;
    size_t n_classes;
    char **classes;    /* answer keys in the order first seen (multi: "true", "false") */
    size_t cap_classes;
    size_t class_base; /* offset of its classes among every group's (macro-F1 counts) */
} ev_group;

typedef struct ev_target {
    size_t item, group;
    size_t n_opts; /* options of the question (2 for noul and a multi label) */
    size_t gold;   /* the expected option */
    size_t *cls;   /* option -> class index in the group */
    size_t p_off;  /* offset of its n_opts probabilities in an ev_result's p */
    char *qid;     /* the question id (answers key) */
    char **keys;   /* the option keys, canonical order (borrowed from the group) */
    int label;     /* multi: the label's index; else -1 */
} ev_target;

typedef struct ev_item {
    char *where;       /* "FILE:LINE" */
    char *id;          /* the id as compact JSON (upstream: "id", else the line's 0-based index) */
    bj_value *request; /* the request object; its model is replaced when sent */
    size_t first_target, n_targets;
} ev_item;

typedef struct ev_input {
    char *path;
    char sha256[65];
    size_t lines, items, graded, ungraded;
} ev_input;

typedef struct ev_set {
    ev_input *inputs;
    size_t n_inputs;
    ev_item *items; /* graded items only: an item without expected answers is counted, never sent */
    size_t n_items, cap_items;
    ev_target *targets;
    size_t n_targets, cap_targets;
    ev_group *groups;
    size_t n_groups, cap_groups;
    size_t n_probs, n_classes; /* Σ n_opts over targets, Σ n_classes over groups */
    size_t n_ungraded;
} ev_set;

/* Reads the item files (path "-" is stdin) in order. A malformed line is
 * an error "FILE:LINE: why" in e (BS_EINVAL); nothing is kept then. */
int ev_set_read(ev_set *s, const char *const *paths, size_t n_paths, bs_err *e);
void ev_set_free(ev_set *s);
/* The request body of an item asked of model (the request with its
 * "model" replaced, or added first). */
void ev_item_body(const ev_item *it, const char *model, bs_buf *b);
const char *ev_type_name(bs_qtype t);
/* The reason of an endpoint's error body, for a person: the message of a
 * usage error, or "msg at body.state; ..." for each error of a list. */
void ev_refusal_text(bs_buf *b, const char *body, size_t len);

/* ---- answers of one setting ---- */

typedef struct ev_error {
    size_t item;
    long status;   /* HTTP status of the refusal; 0 = none (transport, protocol) */
    char *message;
} ev_error;

typedef struct ev_result {
    char *label;         /* "orders=2 dtype=f32", or "served NAME" */
    char *model;         /* the served model name the requests named */
    char *dtype;         /* the compute mode, or NULL (a server that does not say) */
    int orders;          /* 1 or 2; 0 = not known */
    int orders_mixed;    /* --url: answers came with different x-basal-orders */
    char *calibration;   /* in-process: where the calibration came from; NULL over HTTP */
    double *p;           /* n_probs probabilities */
    size_t *pred;        /* per target: the predicted option (the first maximum) */
    unsigned char *ok;   /* per target: answered */
    double *latency_ms;  /* per item: usage.latency_ms over HTTP, plan + forward in-process; NAN unknown */
    double seconds, load_seconds;
    ev_error *errors;
    size_t n_errors, cap_errors;
} ev_result;

int ev_result_init(ev_result *r, const ev_set *s);
void ev_result_free(ev_result *r);
/* Records item's error (message malloc'd by the caller, owned here). */
void ev_result_error(ev_result *r, size_t item, long status, char *message);
/* Fills the decisions of item from a /v1/systemone 200 body; BS_EFORMAT with
 * the reason when the body lacks an answer the item needs. */
int ev_result_answer(ev_result *r, const ev_set *s, size_t item, const char *json, size_t len, bs_err *e);

/* ---- metrics (metrics.c has the definitions) ---- */

typedef struct ev_metrics {
    size_t n;                    /* decisions */
    double accuracy, macro_f1, log_loss, brier, ece, mean_confidence;
    size_t f1_classes;           /* classes the macro-F1 averages over */
    size_t bin_n[EV_BINS];
    double bin_conf[EV_BINS];    /* mean confidence of the bin (NAN when empty) */
    double bin_acc[EV_BINS];     /* accuracy of the bin (NAN when empty) */
} ev_metrics;

#define EV_ANY ((size_t)-1)
/* Over the answered decisions of type (-1: any) and group (EV_ANY: any). */
int ev_metrics_compute(const ev_set *s, const ev_result *r, int type, size_t group, ev_metrics *m, bs_err *e);
/* The bin of a confidence c in [0, 1]: b with b/15 < c <= (b+1)/15 (bin 0 also takes 0). */
int ev_bin_of(double c);
/* counts[expected * n + predicted] over group's answered decisions (n = its classes). */
void ev_confusion(const ev_set *s, const ev_result *r, size_t group, size_t *counts);
/* Share of the decisions answered in both whose prediction agrees; NAN when none. */
double ev_agreement(const ev_set *s, const ev_result *a, const ev_result *b);

/* ---- reports ---- */

typedef struct ev_report {
    const ev_set *set;
    ev_result *results;
    size_t n_results;
    const char *source;   /* "model" or "url" */
    const char *model_dir, *url;
    const char *created;  /* UTC timestamp */
    const char *threads_note;
} ev_report;

int ev_write_json(const ev_report *r, bs_buf *b, bs_err *e);
int ev_write_html(const ev_report *r, bs_buf *b, bs_err *e);
int ev_write_text(const ev_report *r, bs_buf *b, bs_err *e);
/* upstream basal-run's summary line per setting (with the setting first) */
int ev_write_summary_json(const ev_report *r, bs_buf *b, bs_err *e);
/* One JSON line per decision and setting (--decisions). */
void ev_write_decisions(const ev_report *r, bs_buf *b);
/* The median of the known latencies of r, or NAN. */
double ev_latency_p50(const ev_set *s, const ev_result *r);

#endif
