/* `basal serve` configuration (spec 06 §4): the YAML file of §4.2, the values
 * of the command-line flags of §4.3, and the address syntax. Only the shape
 * and ranges of the values are checked here; what needs the models (served
 * names, default_model, dtype against the backend) is checked at start. */
#ifndef BS_SERVE_CONFIG_H
#define BS_SERVE_CONFIG_H

#include <stddef.h>
#include <sys/socket.h>

#include "basal.h"
#include "hub/hub.h"

typedef struct bs_serve_model {
    char *path;              /* local directory, or NULL */
    char *repo, *revision;   /* repository reference (06 §3), or NULL */
    char *dtype;             /* auto | f16 | bf16 | f32 | int8w | int8 */
    double int8_smooth_alpha; /* dtype int8 (model/smooth.h): as basal_options, 0 the default, negative none */
    char *gemm_table;        /* auto | none | a path (CUDA only) */
    long max_batch_tokens;   /* >= 1 */
    int schedule_fifo;       /* 0 hrrn, 1 fifo */
    long long_tokens;        /* >= 0; 0 = no long lane */
    long state_cache_mb;     /* >= 0 */
    long tree_max_tokens;    /* >= 1 */
    long max_questions;      /* >= 1: questions per request */
    long max_request_tokens; /* >= 1: distinct prompt tokens per request (engine/plan.h) */
    int no_prefix_cache;
    long orders;             /* 1 | 2: option orders per readout (01 §2.9; 1 = the original order only) */
    char *calibration;       /* a CALIBRATION.json instead of the model's, or NULL */
    int no_calibration;      /* 1: temperature 1 for every type (wins over calibration) */
    char *name;              /* the served name instead of basal.json's, or NULL */
    char **aliases;
    size_t n_aliases;
} bs_serve_model;

typedef struct bs_serve_config {
    char *addr;              /* NULL = not given (the caller applies 06 §4.1) */
    char *default_model;     /* NULL = the first model */
    long max_inflight;       /* >= 1 */
    long long_slice_ms;      /* >= 0 */
    char *release_date;
    int access_log, metrics;  /* access_log: on by default (issue 18) */
    char *access_log_file;    /* NULL = stderr */
    char *log_format;         /* text | json */
    char *decision_log;       /* the decision log: a file (appended; SIGHUP reopens it), "-" = stdout, NULL = off */
    int decision_log_state;   /* 1: the decision log also holds each request's state text */
    int ui;                  /* GET / serves the playground page (default 1) */
    char *gemm_cache;        /* NULL = default */
    char *api_key_env;       /* NULL = no authentication */
    long long max_body_bytes;/* >= 1 */
    /* HTTP deadlines (seconds, >= 1) and connection limits (server.h) */
    long header_timeout_s, body_timeout_s, keepalive_timeout_s;
    long max_connections;    /* >= 0; 0 = max_inflight + 1024 within the descriptor limit */
    long max_client_connections; /* >= 1 */
    char *backend;           /* auto | cpu | cuda */
    long threads;            /* >= 0; 0 = online CPUs */
    /* CORS, opt-in: origins whose pages may call the API from a browser
     * ("*" alone = any origin); none = CORS off. */
    char **cors_origins;
    size_t n_cors_origins;
    bs_serve_model *models;
    size_t n_models;
} bs_serve_config;

/* The defaults of 06 §4.2 (no models). */
int bs_serve_config_init(bs_serve_config *c, bs_err *e);
void bs_serve_config_free(bs_serve_config *c);
/* A model entry with the per-model defaults of 06 §4.2. */
int bs_serve_model_init(bs_serve_model *m, bs_err *e);
/* Appends a model entry (taking over m's allocations). */
int bs_serve_config_add_model(bs_serve_config *c, bs_serve_model *m, bs_err *e);

/* Parses a YAML document onto c (which holds the defaults). name labels the
 * messages ("<name>:<line>: unknown field foo"). Unknown keys at any level,
 * duplicate keys, wrong types and out-of-range values are errors; so are an
 * empty models list and a model with both or neither of path and repo. */
int bs_serve_config_parse_yaml(bs_serve_config *c, const char *text, size_t len, const char *name, bs_err *e);
int bs_serve_config_load(bs_serve_config *c, const char *path, bs_err *e);

/* 06 §4.1 for the settings that flags, the environment and the file all set
 * (a NULL flag is one not given): addr (flag > BASAL_ADDR > YAML addr >
 * 127.0.0.1:8000); the access log (flag "on"/"off" > BASAL_ACCESS_LOG, where
 * 0, off and false mean off and any other non-empty value on > YAML
 * access_log > on); its file (flag > BASAL_ACCESS_LOG_FILE > YAML
 * access_log_file > stderr); the log format (flag > BASAL_LOG_FORMAT > YAML
 * log_format > text). Invalid values are errors. */
int bs_serve_config_apply_env(bs_serve_config *c, const char *addr, const char *access_log,
                              const char *access_log_file, const char *log_format, bs_err *e);

/* What `basal serve` checks before it loads any weight (and `basal doctor`
 * runs the same function): the address, the API key variable, the backend
 * and dtypes against this build and machine, the GEMM table files, the access
 * log file, every model reference (resolved to a directory whose basal.json
 * names the model), served names and aliases unique, default_model served. */
typedef struct bs_serve_checked {
    char **dirs;           /* per model: the resolved directory (NULL while it is to be downloaded) */
    char **names;          /* per model: the served name (basal.json; NULL when not known yet) */
    bs_hub_pending **pending; /* per model: the download still to make (hub.h), or NULL */
    size_t n;
    size_t n_uncached;     /* BS_HUB_CACHED: models not in the cache (their names are not checked) */
    size_t default_model;  /* index into the models */
    char *api_key;         /* the key (NULL: no authentication) */
    int cuda;              /* the CUDA backend will serve */
} bs_serve_checked;
/* mode BS_HUB_DOWNLOAD (serve): a repository model that is not in the cache
 * is looked up on the Hub and its basal.json fetched, the rest left pending
 * (finish it with bs_hub_resolve_finish); BS_HUB_CACHED (doctor): nothing is
 * downloaded, a model not in the cache is counted in n_uncached unless the
 * Hub is off (HF_HUB_OFFLINE), which is an error as serve would give it. */
int bs_serve_config_check(const bs_serve_config *c, bs_hub_mode mode, bs_serve_checked *out, bs_err *e);
void bs_serve_checked_free(bs_serve_checked *k);

/* Shared by the YAML loader and the flags: a decimal integer in [min, max]. */
int bs_cfg_parse_int(const char *s, long long min, long long max, long long *out);
/* IP:port or [IPv6]:port (host names refused), port 0..65535. */
int bs_parse_addr(const char *s, struct sockaddr_storage *out, socklen_t *len, bs_err *e);
/* Validation of the enumerated values, shared with the flags. */
int bs_cfg_check_dtype(const char *v);
int bs_cfg_check_schedule(const char *v, int *fifo);
int bs_cfg_check_backend(const char *v);
/* One CORS origin: "*", or scheme "://" host [":" port] as a browser sends it
 * in Origin (http or https, no path, no trailing slash). 0 or -1. */
int bs_cfg_check_origin(const char *v);
/* Appends the origins of a comma list ("a,b", or "*") to the configuration
 * (replacing what was there). Errors name the bad origin. */
int bs_cfg_set_cors(bs_serve_config *c, const char *list, bs_err *e);

#endif
