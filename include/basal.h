/* basal-c's public API: error codes, the error record every function fills,
 * and the in-process decision session (libbasal.a / libbasal.so,
 * `pkg-config --cflags --libs basal`). Functions return 0 (BS_OK) or a
 * negative BS_E* code and, when given a bs_err, a human-readable message
 * naming the file and the problem; none of them exits or aborts. */
#ifndef BASAL_H
#define BASAL_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

#if defined(__GNUC__) || defined(__clang__)
#define BASAL_PRINTF(f, a) __attribute__((format(printf, f, a)))
#else
#define BASAL_PRINTF(f, a)
#endif

#define BASAL_VERSION "0.1.0"

enum {
    BS_OK = 0,
    BS_EINVAL = -1,    /* bad argument or bad input data */
    BS_EIO = -2,       /* file missing, unreadable, short read */
    BS_ENOMEM = -3,    /* allocation failed */
    BS_EFORMAT = -4,   /* a file exists but its content violates the format */
    BS_EUNSUP = -5,    /* valid but not implemented by this runtime (refused, never ignored) */
    BS_EINTERNAL = -6, /* broken invariant; a bug, reported instead of crashing */
    BS_ERANGE = -7     /* value outside a limit (positions, sizes) */
};

typedef struct bs_err {
    int code;
    char msg[1024];
} bs_err;

/* Records code and a printf-style message in e (if e is not NULL); returns code. */
int bs_fail(bs_err *e, int code, const char *fmt, ...) BASAL_PRINTF(3, 4);

/* A short description of a code (BS_OK and the BS_E* above), a static
 * string; "unknown error" for other values. */
const char *bs_strerror(int code);

/* ---- the in-process API: one model, decisions one call at a time ----
 *
 *   basal_session *s;
 *   bs_err e;
 *   basal_options o;
 *   basal_options_init(&o);
 *   if (basal_open(&s, "/models/basal-1.5-mini", &o, &e) < 0) { puts(e.msg); return 1; }
 *   basal_result r;
 *   if (basal_decide(s, body, strlen(body), &r, &e) == 0) printf("%d %s\n", r.status, r.json);
 *   basal_result_free(&r);
 *   basal_close(s);
 *
 * A decision is exactly what `basal serve` answers on POST /v1/systemone for
 * the same body (spec 01/02): the same validation, prompts, packed forwards
 * and decision math, byte for byte the same JSON except usage.latency_ms,
 * which an in-process call leaves out. Link with -lbasal (pkg-config basal).
 *
 * Ownership: the caller owns what it passes in (nothing is kept after a
 * call returns) and frees what comes out with the function named for it: a
 * session with basal_close, a result's json with basal_result_free. Strings
 * returned as const char * belong to the library (lifetimes below). e may be
 * NULL everywhere; a function given one clears it first. */

/* The version of this header; basal_version() is the library's, to check
 * that the two match when libbasal.so is loaded at run time. */
#define BASAL_VERSION_MAJOR 0
#define BASAL_VERSION_MINOR 1
#define BASAL_VERSION_PATCH 0
/* "MAJOR.MINOR.PATCH" of the library; a static string. */
const char *basal_version(void);

/* A loaded model with its compute threads and caches (opaque). Not
 * thread-safe: one call at a time per session (open several, or run
 * `basal serve`, for concurrent requests). */
typedef struct basal_session basal_session;

typedef struct basal_options {
    int threads;            /* CPU compute threads; 0 = the online CPUs */
    const char *backend;    /* "auto" (NULL too: CUDA when built in and a GPU is present), "cpu", "cuda" */
    const char *dtype;      /* "auto" (NULL too), "f32", "bf16", "int8w", "int8" (CPU only), "f16" (CUDA only) */
    const char *gemm_table; /* CUDA: a cuBLASLt table from `basal gemm-search`; NULL = none */
    int no_prefix_cache;    /* 1: do not precompute the template prefixes (slower decisions) */
    int tree_max_tokens;    /* the longest packed row; 0 = 32768 */
    int readout_bf16;       /* 1: round each letter logit to bf16 first (diagnostic) */
    int evidence_separate;  /* 1: evidence spans in forwards of their own (diagnostic) */
    int orders;             /* option orders per readout: 2 (original and reversed, averaged; 0 too) or 1
                             * (the original order only: half the option tokens, less accurate) */
    const char *calibration; /* a CALIBRATION.json used instead of the model's; NULL = the model's */
    int no_calibration;     /* 1: no calibration (temperature 1 for every type); wins over calibration */
    double int8_smooth_alpha; /* dtype int8: SmoothQuant's alpha in (0, 1]; 0 = the default (0.5); negative = no
                               * smoothing */
} basal_options;

/* The defaults (every field 0 / NULL). */
void basal_options_init(basal_options *o);

/* Loads the model into a new session, *out (the caller's; free it with
 * basal_close): a model directory, or a reference (mini, 4.5B, max,
 * owner/name[@revision]) from the Hugging Face cache, downloaded into it when
 * missing unless HF_HUB_OFFLINE is set. o may be NULL (the defaults); its
 * strings are read during the call only. On failure *out is NULL and e names
 * the file and the problem. */
int basal_open(basal_session **out, const char *model, const basal_options *o, bs_err *e);
/* Frees everything the session holds; NULL is fine. */
void basal_close(basal_session *s);
/* The served model name (basal.json), owned by the session: valid until
 * basal_close ("" for NULL). */
const char *basal_model_name(const basal_session *s);

typedef struct basal_result {
    int status;        /* 200: json is the answer; else the HTTP status /v1/systemone answers (400, 422, ...)
                        * and json is its error body */
    char *json;        /* NUL-terminated JSON, owned by the result: freed by basal_result_free */
    size_t len;        /* bytes of json */
    double plan_ms;    /* validation, prompts and tokens of this request */
    double forward_ms; /* the forward passes and the decision math of its call (shared by a batch's requests;
                        * 0 for a request refused before its forwards ran) */
} basal_result;

/* Decides one /v1/systemone request body (request: len bytes, copied as
 * needed; no NUL needed). 0: *r holds the answer or the endpoint's error body
 * (r->status says which). Negative: a runtime failure (out of memory, a
 * device error), message in e, r->json NULL. Free r with basal_result_free
 * either way. */
int basal_decide(basal_session *s, const char *request, size_t len, basal_result *r, bs_err *e);

/* Decides n requests in one call: each is validated and planned on its own,
 * and the forwards of all of them are packed together as the server packs
 * one batch (requests sharing a state or questions share their prefixes).
 * results[i] gets what basal_decide would give for requests[i] (lens[i]
 * bytes), refusals included; on the CPU backend the answers are bitwise
 * those of one call per request. 0: every results[i] is set. Negative: a
 * runtime failure, every results[i].json NULL. Free each result with
 * basal_result_free either way. */
int basal_decide_batch(basal_session *s, size_t n, const char *const *requests, const size_t *lens,
                       basal_result *results, bs_err *e);

/* The logit lens of one /v1/systemone request: the same validation, prompts
 * and packed forwards as basal_decide, and after every layer the letter
 * distribution of every question and option order (the final norm and the
 * letter rows of the output head applied to that layer's hidden state at the
 * readout token; the last layer is the served, uncalibrated distribution bit
 * for bit). 200: r->json is the lens document (README "Logit lens"; its
 * "answer" is what basal_decide answers); else the endpoint's error body, as
 * basal_decide, or 422 unsupported "lens_unavailable" when the session runs
 * on another backend than the CPU. r->json is owned by r: free it with
 * basal_result_free. Negative: a runtime failure, message in e. */
int basal_lens(basal_session *s, const char *request, size_t len, basal_result *r, bs_err *e);
/* Frees r->json and zeroes *r; NULL is fine. */
void basal_result_free(basal_result *r);

#ifdef __cplusplus
}
#endif

#endif
