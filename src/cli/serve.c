/* `basal serve` (spec 06 §4): where the configuration comes from (flags, env,
 * YAML, defaults), one engine per model on one shared device gate, and the
 * signal-driven shutdown that answers every request in flight before exiting 0.
 *
 * Start order (issue 18): the whole configuration is checked (the function
 * `basal doctor` runs too) and the address bound before any weight is read,
 * so a bad configuration or a busy port fails in milliseconds, not after
 * minutes of loading; while the models load the server already answers
 * (GET /health 503 "loading", the other routes 503 + Retry-After), so a load
 * balancer or an orchestrator can tell "starting" from "dead". */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <netinet/in.h>
#include <pthread.h>
#include <semaphore.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "cli/cli.h"
#include "base/log.h"
#include "base/progress.h"
#include "protocol/respjson.h"
#include "base/util.h"
#include "cpu/gemm.h"
#include "cpu/pool.h"
#include "engine/engine.h"
#include "engine/gate.h"
#include "device/device.h"
#include "model/basal_model.h"
#include "server/config.h"
#include "hub/hub.h"
#include "protocol/pyjson.h"
#include "server/decision_log.h"
#include "server/modelref.h"
#include "server/server.h"

/* Flags as given; `set` tells a flag from its default (06 §4.1 precedence). */
typedef struct {
    const char *config;
    const char **models;
    size_t n_models;
    const char *dtype, *readout, *kernels, *gemm_table, *addr, *schedule, *release_date, *api_key_env, *backend, *cors;
    const char *access_log, *access_log_file, *log_format; /* NULL: not given */
    long long state_cache_mb, tree_max_tokens, max_batch_tokens, max_inflight, long_tokens, long_slice_ms,
        max_body_bytes, threads, max_questions, max_request_tokens, header_timeout, body_timeout, keepalive_timeout,
        max_connections, max_client_connections;
    int set_state_cache_mb, set_tree_max_tokens, set_max_batch_tokens, set_max_inflight, set_long_tokens,
        set_long_slice_ms, set_max_body_bytes, set_threads, set_max_questions, set_max_request_tokens,
        set_header_timeout, set_body_timeout, set_keepalive_timeout, set_max_connections, set_max_client_connections;
    int no_prefix_cache, metrics, no_ui, offline;
    /* decision knobs (YAML per model) and the decision log (YAML decision_log) */
    long long orders;
    int set_orders, no_calibration, log_decisions_state;
    double int8_alpha; /* --int8-smooth-alpha: as basal_options.int8_smooth_alpha */
    const char *calibration, *name, *log_decisions;
} flags_t;

const cli_doc cli_doc_serve = {
    "serve", "(--model DIR|REF ... | --config FILE) [options]",
    "HTTP server: /v1/systemone, /v1/basal, /v1/models, /health, /metrics",
    "Where the configuration comes from (spec 06 §4.1), first wins:\n"
    "  models:  --model REF (repeatable) > --config FILE > env BASAL_CONFIG > ./basal-serve.yml\n"
    "           in the working directory, if it exists > the built-in " BS_DEFAULT_MODEL_REF "\n"
    "  address: --addr > env BASAL_ADDR > YAML addr > 127.0.0.1:8000\n"
    "  access log (on by default): --access-log on|off > env BASAL_ACCESS_LOG (0/off/false = off)\n"
    "           > YAML access_log; --access-log-file > env BASAL_ACCESS_LOG_FILE > YAML > stderr\n"
    "  log format: --log-format > env BASAL_LOG_FORMAT > YAML log_format > text; env BASAL_LOG_LEVEL\n"
    "           (debug|info|warn|error, default info)\n"
    "With a configuration file the model and admission flags (--dtype, --schedule, --max-batch-tokens,\n"
    "--long-tokens, --state-cache-mb, --tree-max-tokens, --no-prefix-cache, --max-inflight,\n"
    "--long-slice-ms, --max-questions, --max-request-tokens, --release-date, --orders, --calibration,\n"
    "--no-calibration, --name) are ignored with a warning; set them in the file. `basal init` writes a commented basal-serve.yml with every key.\n"
    "A repository reference (mini, 4.5B, max, owner/name[@revision]; YAML repo: + revision:) that is\n"
    "not in the Hugging Face cache is downloaded into it before it loads (as `basal pull` does),\n"
    "while GET /health answers 503 with the progress. Hub environment: HF_HUB_CACHE, HF_HOME\n"
    "(the cache: $HF_HUB_CACHE, else $HF_HOME/hub, else ~/.cache/huggingface/hub), HF_ENDPOINT,\n"
    "HF_TOKEN (else $HF_HOME/token), HF_HUB_OFFLINE=1 (as --offline).\n"
    "Other environment: BASAL_HOME,\n"
    "XDG_CACHE_HOME, the variable named by --api-key-env, BASAL_CPU (cap the CPU kernel family),\n"
    "BASAL_BF16=auto|amx|avx512-bf16|avx2|portable (the kernel of dtype bf16; auto = the fastest the CPU has),\n"
    "BASAL_INT8=auto|amx|avx512-vnni|avx-vnni|avx2|portable (the kernel of dtype int8).\n"
    "The address is bound before the models load: GET /health answers 503 {\"status\":\"loading\"} until\n"
    "they are, then 200 (readiness); GET /health/live is always 200 (liveness). SIGHUP reopens the\n"
    "access log file; SIGINT or SIGTERM finish the requests in flight, then exit 0.\n",
};

/* The numbers of the flags start at the configuration's defaults. */
static void flags_defaults(flags_t *f, const bs_serve_config *dc, const bs_serve_model *dm) {
    f->state_cache_mb = dm->state_cache_mb;
    f->tree_max_tokens = dm->tree_max_tokens;
    f->max_batch_tokens = dm->max_batch_tokens;
    f->long_tokens = dm->long_tokens;
    f->max_questions = dm->max_questions;
    f->max_request_tokens = dm->max_request_tokens;
    f->orders = dm->orders;
    f->max_inflight = dc->max_inflight;
    f->long_slice_ms = dc->long_slice_ms;
    f->max_body_bytes = dc->max_body_bytes;
    f->threads = dc->threads;
    f->header_timeout = dc->header_timeout_s;
    f->body_timeout = dc->body_timeout_s;
    f->keepalive_timeout = dc->keepalive_timeout_s;
    f->max_connections = dc->max_connections;
    f->max_client_connections = dc->max_client_connections;
}

/* What the flags table cannot check: the combinations and the values of
 * --kernels, --addr, --log-format and --access-log. 0, else 2 (a usage
 * error, reported here). */
static int check_flags(const flags_t *f) {
    if (f->config && (f->n_models || f->gemm_table)) {
        cli_error("serve", "--config cannot be combined with %s", f->n_models ? "--model" : "--gemm-table");
        return 2;
    }
    if (f->name && f->n_models > 1) {
        cli_error("serve", "--name names one model; with several, set name: per model in a configuration file");
        return 2;
    }
    if (f->name && !*f->name) {
        cli_error("serve", "--name must not be empty");
        return 2;
    }
    if (f->log_decisions_state && !f->log_decisions) {
        cli_error("serve", "--log-decisions-state needs --log-decisions FILE|-");
        return 2;
    }
    if (f->kernels && strcmp(f->kernels, "fused")) {
        cli_error("serve", "--kernels %s is not supported (the only value is fused)", f->kernels);
        return 2;
    }
    if (f->addr) { /* a bad flag value is a usage error (06 §2), found before any model loads */
        struct sockaddr_storage ss;
        socklen_t sl;
        bs_err ae = {0};
        if (bs_parse_addr(f->addr, &ss, &sl, &ae) < 0) {
            cli_error("serve", "--addr: %s", ae.msg);
            return 2;
        }
    }
    bs_log_format lf;
    if (f->log_format && bs_log_format_parse(f->log_format, &lf) < 0) {
        cli_error("serve", "--log-format must be text or json");
        return 2;
    }
    if (f->access_log && strcmp(f->access_log, "on") && strcmp(f->access_log, "off") && strcmp(f->access_log, "true") &&
        strcmp(f->access_log, "false")) {
        cli_error("serve", "--access-log must be on or off");
        return 2;
    }
    return 0;
}

static int parse_flags(int argc, char **argv, flags_t *f) {
    memset(f, 0, sizeof *f);
    if (!(f->models = calloc((size_t)argc, sizeof *f->models))) return 1;
    /* The numbers start at the configuration's defaults, so that --help shows
     * them; a value counts only when its flag was given (set_*). */
    bs_serve_config dc;
    bs_serve_model dm;
    bs_err de = {0};
    if (bs_serve_config_init(&dc, &de) < 0) return 1;
    if (bs_serve_model_init(&dm, &de) < 0) {
        bs_serve_config_free(&dc);
        return 1;
    }
    flags_defaults(f, &dc, &dm);
    cli_list models = {f->models, 0};
#define NUM(name, meta, def, help, field, lo, hi) \
    CLI_ROW(name, meta, def, NULL, help, CLI_LLONG, .dst = &f->field, .min = (lo), .max = (hi), .seen = &f->set_##field)
    const cli_opt opts[] = {
        CLI_LIST("--model", "DIR|REF", BS_DEFAULT_MODEL_REF, NULL,
                 "model directory, short name (mini, 4.5B, max) or owner/name[@rev] (repeatable)", &models),
        CLI_STR("--config", "FILE", "./basal-serve.yml if it exists", "BASAL_CONFIG",
                "YAML configuration (spec 06 §4.2; basal init writes one)", &f->config),
        CLI_STR("--addr", "IP:PORT", "YAML addr, else 127.0.0.1:8000", "BASAL_ADDR",
                "listen address ([IPv6]:port; port 0 picks a free one)", &f->addr),
        CLI_OPTIONAL("--access-log", "on", "on", "BASAL_ACCESS_LOG",
                     "one log line per request (time, request id, client, status, model, timings); YAML access_log",
                     &f->access_log, "on|off|true|false"),
        CLI_STR("--access-log-file", "PATH", "stderr", "BASAL_ACCESS_LOG_FILE",
                "write the access log to this file (appended; SIGHUP reopens it); YAML access_log_file",
                &f->access_log_file),
        CLI_CHOICE("--log-format", "text", "BASAL_LOG_FORMAT", "every log line as text or one JSON object; YAML log_format",
                   &f->log_format, "text|json"),
        CLI_STR("--cors", "ORIGIN[,ORIGIN]|'*'", "off", "BASAL_CORS",
                "allow browser pages of these origins (CORS; 204 preflight); YAML cors_origins", &f->cors),
        CLI_SW("--no-ui", "GET / answers 404 instead of the playground page (YAML ui: false)", &f->no_ui),
        CLI_SW("--metrics", "Prometheus text on GET /metrics (also YAML metrics: true)", &f->metrics),
        CLI_SW("--offline", "models from the Hugging Face cache only, never downloaded (as HF_HUB_OFFLINE=1)",
               &f->offline),
        CLI_STR("--api-key-env", "NAME", "none: no authentication", NULL,
                "environment variable holding the Bearer API key", &f->api_key_env),
        CLI_CHOICE("--backend", "auto", NULL, "compute backend; auto = CUDA if built in and a GPU is present",
                   &f->backend, "auto|cpu|cuda"),
        NUM("--threads", "N", "0 = online CPUs", "CPU compute threads (one pool per process)", threads, 0, INT_MAX),
        CLI_CHOICE("--dtype", "auto", NULL, "precision per model; auto = f16 on CUDA, f32 on the CPU (f16 needs CUDA; int8w = int8 weights, int8 = int8 weights and activations, CPU)",
                   &f->dtype, "auto|f16|bf16|f32|int8w|int8"),
        CLI_CALL("--int8-smooth-alpha", "A", "0.5", NULL,
                 "dtype int8: SmoothQuant's alpha in (0, 1]; 0 turns the smoothing off", &f->int8_alpha,
                 cli_int8_alpha_opt),
        NUM("--max-batch-tokens", "N", NULL, "packed tokens admitted per batch", max_batch_tokens, 1, INT_MAX),
        CLI_CHOICE("--schedule", "hrrn", NULL, "admission order", &f->schedule, "hrrn|fifo"),
        NUM("--long-tokens", "N", NULL, "requests above this many packed tokens use the long lane (0 = one lane)",
            long_tokens, 0, INT_MAX),
        NUM("--long-slice-ms", "N", NULL, "least work of the long lane between two hand-overs of the device",
            long_slice_ms, 0, INT_MAX),
        NUM("--max-inflight", "N", NULL, "waiting + running requests of all models; more get 529", max_inflight, 1,
            INT_MAX),
        NUM("--state-cache-mb", "N", NULL, "state K/V cache per engine in MiB (0 = off)", state_cache_mb, 0, INT_MAX),
        NUM("--tree-max-tokens", "N", NULL, "longest packed tree row", tree_max_tokens, 1, INT_MAX),
        CLI_SW("--no-prefix-cache", "do not precompute the template prefixes", &f->no_prefix_cache),
        NUM("--orders", "1|2", NULL, "option orders per question: 2 = original and reversed, averaged; 1 = original only",
            orders, 1, 2),
        CLI_STR("--calibration", "FILE", "the model's CALIBRATION.json", NULL,
                "per-type temperatures (and max_error thresholds) from this file", &f->calibration),
        CLI_SW("--no-calibration", "no calibration: temperature 1 for every question type", &f->no_calibration),
        CLI_STR("--name", "NAME", "basal.json name", NULL, "the served model name (one --model)", &f->name),
        CLI_STR("--log-decisions", "FILE|-", "off", NULL,
                "one JSON line per answered request (appended; - = stdout; SIGHUP reopens); YAML decision_log",
                &f->log_decisions),
        CLI_SW("--log-decisions-state", "the decision log also holds the state text (YAML decision_log_state)",
               &f->log_decisions_state),
        NUM("--max-questions", "N", NULL, "questions per request", max_questions, 1, INT_MAX),
        NUM("--max-request-tokens", "N", NULL, "distinct prompt tokens per request", max_request_tokens, 1, INT_MAX),
        NUM("--max-body-bytes", "N", NULL, "request body limit; larger gets 413", max_body_bytes, 1, LLONG_MAX),
        NUM("--header-timeout", "S", NULL, "seconds to receive the request headers", header_timeout, 1, INT_MAX),
        NUM("--body-timeout", "S", NULL, "seconds to receive the request body", body_timeout, 1, INT_MAX),
        NUM("--keepalive-timeout", "S", NULL, "seconds an idle keep-alive connection stays open", keepalive_timeout,
            1, INT_MAX),
        NUM("--max-connections", "N", "0 = max-inflight + 1024", "open connections at most", max_connections, 0,
            INT_MAX),
        NUM("--max-client-connections", "N", NULL, "open connections per client address", max_client_connections, 1,
            INT_MAX),
        CLI_STR("--release-date", "S", dc.release_date, NULL, "release date reported by GET /v1/models",
                &f->release_date),
        CLI_CHOICE("--readout", "f32", NULL, "bf16 rounds each letter logit to bf16 on the host (diagnostic)",
                   &f->readout, "f32|bf16"),
        CLI_STR("--kernels", "fused", "fused", NULL, "the only value (basal-rs's candle path is refused)", &f->kernels),
        CLI_STR("--gemm-table", "PATH", "auto", NULL, "cuBLASLt GEMM table (CUDA only; not with --config)",
                &f->gemm_table),
    };
#undef NUM
    int rc = cli_parse(&cli_doc_serve, opts, CLI_N(opts), NULL, argc, argv);
    f->n_models = models.n;
    bs_serve_config_free(&dc);
    free(dm.dtype);
    free(dm.gemm_table);
    if (rc) return rc;
    return check_flags(f);
}

static int set_str(char **dst, const char *v) {
    char *d = bs_strfmt("%s", v);
    if (!d) return -1;
    free(*dst);
    *dst = d;
    return 0;
}

/* Applies 06 §4.1: the model set and the flags onto the configuration. */
static int build_config(const flags_t *f, bs_serve_config *c, bs_err *e) {
    int rc = bs_serve_config_init(c, e);
    if (rc < 0) return rc;
    const char *file = f->config;
    if (!f->n_models && !file) {
        const char *env = getenv("BASAL_CONFIG");
        if (env && *env) file = env;
        else if (bs_file_exists("basal-serve.yml")) file = "basal-serve.yml";
    }
    if (file) {
        if ((rc = bs_serve_config_load(c, file, e)) < 0) return rc;
        static const struct { const char *flag; size_t off; } ignored[] = {
            { "--dtype", offsetof(flags_t, dtype) }, { "--schedule", offsetof(flags_t, schedule) },
            { "--release-date", offsetof(flags_t, release_date) },
        };
        for (size_t i = 0; i < sizeof ignored / sizeof *ignored; i++)
            if (*(const char *const *)((const char *)f + ignored[i].off))
                bs_log(BS_LOG_WARN, "serve", "%s is ignored with a configuration file (set it in %s)", ignored[i].flag,
                       file);
        if (f->set_max_batch_tokens || f->set_long_tokens || f->set_state_cache_mb || f->set_tree_max_tokens ||
            f->no_prefix_cache || f->set_max_inflight || f->set_long_slice_ms || f->set_max_questions ||
            f->set_max_request_tokens || f->set_orders || f->calibration || f->no_calibration || f->name || f->int8_alpha)
            bs_log(BS_LOG_WARN, "serve", "model and admission flags are ignored with a configuration file (%s)", file);
    } else {
        const char *refs_default[] = { BS_DEFAULT_MODEL_REF };
        const char *const *refs = f->n_models ? f->models : refs_default;
        size_t n = f->n_models ? f->n_models : 1;
        for (size_t i = 0; i < n; i++) {
            bs_serve_model m;
            if ((rc = bs_serve_model_init(&m, e)) < 0) return rc;
            m.path = bs_strfmt("%s", refs[i]); /* resolved (directory or reference) at load */
            if (!m.path || (f->dtype && set_str(&m.dtype, f->dtype)) ||
                (f->gemm_table && set_str(&m.gemm_table, f->gemm_table))) {
                free(m.path);
                free(m.dtype);
                free(m.gemm_table);
                return bs_fail(e, BS_ENOMEM, "out of memory");
            }
            if (f->schedule) bs_cfg_check_schedule(f->schedule, &m.schedule_fifo);
            if (f->set_max_batch_tokens) m.max_batch_tokens = (long)f->max_batch_tokens;
            if (f->set_long_tokens) m.long_tokens = (long)f->long_tokens;
            if (f->set_state_cache_mb) m.state_cache_mb = (long)f->state_cache_mb;
            if (f->set_tree_max_tokens) m.tree_max_tokens = (long)f->tree_max_tokens;
            if (f->set_max_questions) m.max_questions = (long)f->max_questions;
            if (f->set_max_request_tokens) m.max_request_tokens = (long)f->max_request_tokens;
            m.no_prefix_cache = f->no_prefix_cache;
            m.orders = (long)f->orders;
            m.no_calibration = f->no_calibration;
            m.int8_smooth_alpha = f->int8_alpha;
            if ((f->calibration && set_str(&m.calibration, f->calibration)) || (f->name && set_str(&m.name, f->name))) {
                free(m.path);
                free(m.dtype);
                free(m.gemm_table);
                free(m.calibration);
                return bs_fail(e, BS_ENOMEM, "out of memory");
            }
            if ((rc = bs_serve_config_add_model(c, &m, e)) < 0) return rc;
        }
        if (f->set_max_inflight) c->max_inflight = (long)f->max_inflight;
        if (f->set_long_slice_ms) c->long_slice_ms = (long)f->long_slice_ms;
        if (f->release_date && set_str(&c->release_date, f->release_date)) return bs_fail(e, BS_ENOMEM, "out of memory");
    }
    /* These win over the file (06 §4.1). */
    if ((rc = bs_serve_config_apply_env(c, f->addr, f->access_log, f->access_log_file, f->log_format, e)) < 0) return rc;
    if ((f->api_key_env && set_str(&c->api_key_env, f->api_key_env)) || (f->backend && set_str(&c->backend, f->backend)))
        return bs_fail(e, BS_ENOMEM, "out of memory");
    if (f->metrics) c->metrics = 1;
    if (f->log_decisions && set_str(&c->decision_log, f->log_decisions)) return bs_fail(e, BS_ENOMEM, "out of memory");
    if (f->log_decisions_state) c->decision_log_state = 1;
    if (f->no_ui) c->ui = 0;
    const char *env_cors = getenv("BASAL_CORS");
    const char *cors = f->cors ? f->cors : env_cors && *env_cors ? env_cors : NULL;
    if (cors && (rc = bs_cfg_set_cors(c, cors, e)) < 0) return rc;
    if (f->set_max_body_bytes) c->max_body_bytes = f->max_body_bytes;
    if (f->set_threads) c->threads = (long)f->threads;
    if (f->set_header_timeout) c->header_timeout_s = (long)f->header_timeout;
    if (f->set_body_timeout) c->body_timeout_s = (long)f->body_timeout;
    if (f->set_keepalive_timeout) c->keepalive_timeout_s = (long)f->keepalive_timeout;
    if (f->set_max_connections) c->max_connections = (long)f->max_connections;
    if (f->set_max_client_connections) c->max_client_connections = (long)f->max_client_connections;
    return BS_OK;
}

static int bind_listen(const char *addr, int *fd_out, char *shown, size_t shown_len, bs_err *e) {
    struct sockaddr_storage ss;
    socklen_t sl;
    int rc = bs_parse_addr(addr, &ss, &sl, e);
    if (rc < 0) return rc;
    int fd = socket(ss.ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) return bs_fail(e, BS_EIO, "socket: %s", strerror(errno));
    int one = 1;
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    if (ss.ss_family == AF_INET6) setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &one, sizeof one);
    if (bind(fd, (struct sockaddr *)&ss, sl) < 0 || listen(fd, 1024) < 0) {
        rc = bs_fail(e, BS_EIO, "binding %s: %s", addr, strerror(errno));
        close(fd);
        return rc;
    }
    fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
    struct sockaddr_storage got;
    socklen_t gl = sizeof got;
    char ip[INET6_ADDRSTRLEN] = "?";
    unsigned port = 0;
    if (getsockname(fd, (struct sockaddr *)&got, &gl) == 0) {
        if (got.ss_family == AF_INET6) {
            inet_ntop(AF_INET6, &((struct sockaddr_in6 *)&got)->sin6_addr, ip, sizeof ip);
            port = ntohs(((struct sockaddr_in6 *)&got)->sin6_port);
            snprintf(shown, shown_len, "[%s]:%u", ip, port);
        } else {
            inet_ntop(AF_INET, &((struct sockaddr_in *)&got)->sin_addr, ip, sizeof ip);
            port = ntohs(((struct sockaddr_in *)&got)->sin_port);
            snprintf(shown, shown_len, "%s:%u", ip, port);
        }
    }
    *fd_out = fd;
    return BS_OK;
}

/* Signals go to one thread. Loading a large model takes minutes and cannot
 * be interrupted cleanly, so a stop signal before the server is ready ends
 * the process at once (no request can be in flight yet); afterwards the first
 * one starts the graceful shutdown and a second one cuts it short. SIGHUP
 * reopens the access log file (after logrotate moved it away). */
static atomic_int g_serving;
static sem_t g_stop;
static int g_signal;
static bs_log_sink *g_access; /* the access log; never freed (the signal thread may reopen it) */
/* g_access as the signal thread sees it: published once it is open (the
 * thread starts before the configuration check, which may talk to the Hub
 * for minutes, so that a stop signal then still ends the process) */
static _Atomic(bs_log_sink *) g_access_sig;
/* The decision log as the signal thread sees it; g_sig_mu keeps it alive
 * while SIGHUP reopens it (serve_free closes it under the same lock). */
static pthread_mutex_t g_sig_mu = PTHREAD_MUTEX_INITIALIZER;
static bs_dlog *g_dlog_sig;

/* The writer reopens it and logs how that went: never blocks this thread. */
static void sighup_decision_log(void) {
    pthread_mutex_lock(&g_sig_mu);
    bs_dlog_reopen(g_dlog_sig);
    pthread_mutex_unlock(&g_sig_mu);
}

static void *signal_thread(void *arg) {
    const sigset_t *set = arg;
    int sig, n = 0;
    for (;;) {
        if (sigwait(set, &sig) != 0) continue;
        if (sig == SIGHUP) {
            bs_err e = { 0 };
            bs_log_sink *access = atomic_load(&g_access_sig);
            if (!bs_log_sink_is_file(access))
                bs_log(BS_LOG_INFO, "serve", "SIGHUP: no access log file to reopen; ignored");
            else if (bs_log_sink_reopen(access, &e) < 0)
                bs_log(BS_LOG_ERROR, "serve", "SIGHUP: %s; still writing to the old file", e.msg);
            else
                bs_log(BS_LOG_INFO, "serve", "SIGHUP: access log reopened");
            sighup_decision_log();
            continue;
        }
        const char *name = sig == SIGINT ? "SIGINT" : "SIGTERM";
        if (!atomic_load(&g_serving)) {
            bs_log(BS_LOG_WARN, "serve", "%s before the server was ready; exiting", name);
            _exit(1);
        }
        if (n++) {
            bs_log(BS_LOG_WARN, "serve", "second signal; exiting without waiting for the requests in flight");
            _exit(1);
        }
        g_signal = sig;
        sem_post(&g_stop);
    }
    return NULL;
}

/* Test-only (tests/e2e/t_serve_startup.sh): BASAL_TEST_LOAD_DELAY_MS makes each
 * model load take that much longer, so that the loading state can be seen
 * with the tiny fixtures. Not for production use. */
static void test_load_delay(void) {
    const char *v = getenv("BASAL_TEST_LOAD_DELAY_MS");
    long long ms;
    if (!v || bs_cfg_parse_int(v, 1, 600000, &ms) < 0) return;
    struct timespec ts = { (time_t)(ms / 1000), (long)(ms % 1000) * 1000000L };
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {}
}

/* Test-only (tests/server/decision_knobs_test.py): BASAL_TEST_DLOG_QUEUE_BYTES
 * bounds the decision log's queue below its 64 MiB, so that a reader that
 * does not read makes it drop lines after a few requests. 0 = the default. */
static size_t test_dlog_queue_bytes(void) {
    const char *v = getenv("BASAL_TEST_DLOG_QUEUE_BYTES");
    long long n;
    if (!v || bs_cfg_parse_int(v, 1, 1LL << 40, &n) < 0) return 0;
    return (size_t)n;
}

typedef struct {
    bs_basal_model m;
    int loaded;
    bs_engine *engine;
} served_t;

/* A download at the start (issue 31): /health shows its progress, and the
 * log a line every BASAL_PROGRESS_INTERVAL_MS (5 s). */
typedef struct {
    bs_server *srv;
    const char *name;      /* the served name */
    double t0, last_log;
    long period_ms;
} dl_watch;

static int on_download(void *ud, const bs_hub_progress *hp) {
    dl_watch *w = ud;
    double now = bs_now_ms(), el = (now - w->t0) / 1e3;
    uint64_t fresh = hp->done > hp->resumed ? hp->done - hp->resumed : 0;
    double rate = el > 0.5 ? (double)fresh / el : 0, eta = rate > 0 ? (double)(hp->total - hp->done) / rate : -1;
    bs_buf b;
    bs_buf_init(&b);
    bs_buf_puts(&b, "\"phase\":\"downloading\",\"download\":{\"model\":");
    bs_resp_string(&b, w->name, strlen(w->name));
    bs_buf_puts(&b, ",\"repo\":");
    bs_resp_string(&b, hp->repo, strlen(hp->repo));
    bs_buf_puts(&b, ",\"file\":");
    if (hp->file) bs_resp_string(&b, hp->file, strlen(hp->file));
    else bs_buf_puts(&b, "null");
    bs_buf_printf(&b, ",\"files_done\":%d,\"files_total\":%d,\"bytes_done\":%llu,\"bytes_total\":%llu,"
                  "\"bytes_per_s\":%.0f,\"eta_s\":", hp->files_done, hp->files_total, (unsigned long long)hp->done,
                  (unsigned long long)hp->total, rate);
    if (eta >= 0) bs_buf_printf(&b, "%.0f}", eta);
    else bs_buf_puts(&b, "null}");
    if (!b.oom) bs_server_set_loading_detail(w->srv, b.data);
    bs_buf_free(&b);
    if (now - w->last_log >= (double)w->period_ms && hp->total) {
        w->last_log = now;
        bs_log(BS_LOG_INFO, "hub", "downloading %s: %.0f%% (%.1f of %.1f MB), %.1f MB/s%s%s", hp->repo,
               100.0 * (double)hp->done / (double)hp->total, (double)hp->done / 1e6, (double)hp->total / 1e6, rate / 1e6,
               hp->file ? ", " : "", hp->file ? hp->file : "");
    }
    return 0;
}

/* Downloads what the configuration check left pending (06 §3 R2), while
 * the server answers /health 503 with the progress. */
static int finish_downloads(bs_server *srv, bs_serve_checked *k, bs_err *e) {
    for (size_t i = 0; i < k->n; i++) {
        if (!k->pending[i]) continue;
        const bs_hub_plan *p = bs_hub_pending_plan(k->pending[i]);
        dl_watch w = { srv, k->names[i], bs_now_ms(), bs_now_ms(), bs_progress_interval_ms(5000) };
        bs_hub_pending_watch(k->pending[i], on_download, &w);
        bs_log(BS_LOG_INFO, "hub", "%s: downloading %s@%.8s (%.2f GB) before loading it", k->names[i], p->ref.repo,
               p->commit, (double)p->bytes_missing / 1e9);
        int rc = bs_hub_resolve_finish(k->pending[i], &k->dirs[i], e);
        bs_server_set_loading_detail(srv, NULL);
        if (rc < 0) return rc;
        bs_hub_pending_free(k->pending[i]);
        k->pending[i] = NULL;
    }
    return BS_OK;
}

/* `basal serve` from the flags to the shutdown; serve_free releases it. */
typedef struct {
    flags_t f;
    bs_serve_config c;
    bs_serve_checked k;
    bs_pool *pool;
    bs_gate *gate;
    served_t *sv;
    bs_server_model *sm;
    bs_engine **engines;
    bs_server *srv;
    bs_dlog *dlog;  /* the decision log, or NULL */
    int listen_fd, shut;
    size_t n;
    char shown[96]; /* the bound address as the log shows it */
    bs_err e;
} serve_state;

/* The format of the lines logged before the configuration is read: flag > env */
static void early_log_format(int argc, char **argv) {
    bs_log_format lf;
    for (int i = 1; i + 1 < argc; i++)
        if (!strcmp(argv[i], "--log-format") && bs_log_format_parse(argv[i + 1], &lf) == 0) bs_log_set_format(lf);
    for (int i = 1; i < argc; i++)
        if (!strncmp(argv[i], "--log-format=", 13) && bs_log_format_parse(argv[i] + 13, &lf) == 0) bs_log_set_format(lf);
}

/* The process before any other thread exists, so that every thread inherits
 * the mask and only the signal thread sees these signals; the signals it
 * waits for. */
static const sigset_t *prepare_process(void) {
    static sigset_t sigs;
    sigemptyset(&sigs);
    sigaddset(&sigs, SIGINT);
    sigaddset(&sigs, SIGTERM);
    sigaddset(&sigs, SIGHUP);
    pthread_sigmask(SIG_BLOCK, &sigs, NULL);
    signal(SIGPIPE, SIG_IGN);
    sem_init(&g_stop, 0, 0);
    atomic_store(&g_serving, 0);
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
        rl.rlim_cur = rl.rlim_max;
        setrlimit(RLIMIT_NOFILE, &rl);
    }
    return &sigs;
}

/* 1. the whole configuration, before any weight is read; the signal thread
 * and the access log. Negative on a failure (logged). */
static int serve_configure(serve_state *s, const sigset_t *sigs) {
    bs_log_format lf;
    if (build_config(&s->f, &s->c, &s->e) < 0) { bs_log(BS_LOG_ERROR, "serve", "%s", s->e.msg); return -1; }
    if (bs_log_format_parse(s->c.log_format, &lf) == 0) bs_log_set_format(lf);
    /* the check may ask the Hub (retries, Retry-After): SIGINT/SIGTERM must end it */
    pthread_t sig_th;
    if (pthread_create(&sig_th, NULL, signal_thread, (void *)sigs) != 0) {
        bs_log(BS_LOG_ERROR, "serve", "cannot start the signal thread");
        return -1;
    }
    pthread_detach(sig_th);
    if (bs_serve_config_check(&s->c, BS_HUB_DOWNLOAD, &s->k, &s->e) < 0) {
        bs_log(BS_LOG_ERROR, "serve", "%s", s->e.msg);
        return -1;
    }
    s->n = s->c.n_models;
    if (s->c.access_log && bs_log_sink_open(&g_access, s->c.access_log_file, &s->e) < 0) {
        bs_log(BS_LOG_ERROR, "serve", "%s", s->e.msg);
        return -1;
    }
    atomic_store(&g_access_sig, g_access);
    if (s->c.decision_log &&
        bs_dlog_open(&s->dlog, s->c.decision_log, s->n, s->c.decision_log_state, test_dlog_queue_bytes(), &s->e) < 0) {
        bs_log(BS_LOG_ERROR, "serve", "%s", s->e.msg);
        return -1;
    }
    pthread_mutex_lock(&g_sig_mu);
    g_dlog_sig = s->dlog;
    pthread_mutex_unlock(&g_sig_mu);
    return 0;
}

/* 2. the address, and the server in its loading state. Negative on a
 * failure (logged). */
static int serve_start_server(serve_state *s) {
    const bs_serve_config *c = &s->c;
    size_t n = s->n;
    if (bind_listen(c->addr, &s->listen_fd, s->shown, sizeof s->shown, &s->e) < 0) {
        bs_log(BS_LOG_ERROR, "serve", "%s", s->e.msg);
        return -1;
    }
    if (!(s->sv = calloc(n, sizeof *s->sv)) || !(s->sm = calloc(n, sizeof *s->sm)) ||
        !(s->engines = calloc(n, sizeof *s->engines))) {
        bs_log(BS_LOG_ERROR, "serve", "out of memory");
        return -1;
    }
    for (size_t i = 0; i < n; i++) {
        bs_server_model *sm = &s->sm[i];
        sm->name = s->k.names[i];
        sm->aliases = (const char *const *)c->models[i].aliases;
        sm->n_aliases = c->models[i].n_aliases;
        /* the opt-in reduced-precision mode is visible to clients; the
         * default modes keep the spec's exact body */
        if (c->models[i].dtype && !strcmp(c->models[i].dtype, "bf16")) sm->dtype = "bf16";
        if (c->models[i].dtype && !strcmp(c->models[i].dtype, "int8w")) sm->dtype = "int8w";
        if (c->models[i].dtype && !strcmp(c->models[i].dtype, "int8")) sm->dtype = "int8";
    }
    bs_server_opts so = {
        .models = s->sm, .n_models = n, .default_model = s->k.default_model, .listen_fd = s->listen_fd,
        .max_inflight = c->max_inflight, .max_body_bytes = (unsigned long long)c->max_body_bytes,
        .api_key = s->k.api_key, .api_key_len = s->k.api_key ? strlen(s->k.api_key) : 0,
        .release_date = c->release_date, .metrics = c->metrics, .access_log = g_access, .no_ui = !c->ui,
        .decision_log = s->dlog,
        .cors_origins = (const char *const *)c->cors_origins, .n_cors_origins = c->n_cors_origins,
        .header_timeout_s = c->header_timeout_s, .body_timeout_s = c->body_timeout_s,
        .keepalive_timeout_s = c->keepalive_timeout_s, .max_connections = c->max_connections,
        .max_client_connections = c->max_client_connections,
    };
    if (bs_server_start(&s->srv, &so, &s->e) < 0) { bs_log(BS_LOG_ERROR, "serve", "%s", s->e.msg); return -1; }
    s->listen_fd = -1; /* the server owns it now */
    bs_log(BS_LOG_INFO, "serve", "listening on http://%s; loading %zu model%s (GET /health answers 503 until ready)",
           s->shown, n, n == 1 ? "" : "s");
    if (c->access_log)
        bs_log(BS_LOG_INFO, "serve", "access log on (%s)", bs_log_sink_is_file(g_access) ? c->access_log_file : "stderr");
    if (s->dlog)
        bs_log(BS_LOG_INFO, "serve", "decision log on (%s%s)", bs_dlog_is_file(s->dlog) ? c->decision_log : "stdout",
               c->decision_log_state ? ", with the state texts" : "");
    return 0;
}

/* The dtype a model computes in, as the decision log records it. */
static const char *served_dtype(const bs_serve_model *mc, const bs_model *md) {
    if (md->backend) return mc->dtype && strcmp(mc->dtype, "auto") ? mc->dtype : "f16";
    return bs_model_dtype_name(md);
}

/* The members every decision log line of model i carries (decision_log.h). */
static int dlog_model(serve_state *s, size_t i, const char *dir) {
    const bs_basal_model *m = &s->sv[i].m;
    bs_buf b;
    bs_buf_init(&b);
    bs_buf_puts(&b, "\"model\":");
    bj_put_string(&b, m->name, strlen(m->name));
    /* a Hugging Face snapshot directory is named by its commit */
    const char *base = strrchr(dir, '/');
    base = base ? base + 1 : dir;
    bs_buf_puts(&b, ",\"revision\":");
    if (bs_hub_is_commit(base) && strstr(dir, "/snapshots/")) bs_buf_printf(&b, "\"%s\"", base);
    else bs_buf_puts(&b, "null");
    bs_buf_puts(&b, ",\"version\":");
    if (m->version) bj_put_string(&b, m->version, strlen(m->version));
    else bs_buf_puts(&b, "null");
    bs_buf_printf(&b, ",\"dtype\":\"%s\",\"orders\":%d,\"calibration\":", served_dtype(&s->c.models[i], &m->model),
                  m->orders);
    bj_put_string(&b, m->calib_source, strlen(m->calib_source));
    int rc = b.oom ? bs_fail(&s->e, BS_ENOMEM, "out of memory") : bs_dlog_set_model(s->dlog, i, b.data, &s->e);
    bs_buf_free(&b);
    return rc;
}

/* The decision knobs of a model's entry: orders, calibration, served name. */
static int apply_knobs(bs_basal_model *m, const bs_serve_model *mc, bs_err *e) {
    m->orders = (int)mc->orders;
    if ((mc->no_calibration || mc->calibration) &&
        bs_basal_set_calibration(m, mc->no_calibration ? NULL : mc->calibration, e) < 0)
        return -1;
    if (mc->name) {
        char *n = strdup(mc->name);
        if (!n) return bs_fail(e, BS_ENOMEM, "out of memory");
        free(m->name);
        m->name = n;
    }
    return 0;
}

/* 3. what is to be downloaded, then the models, each on its device.
 * Negative on a failure (logged). */
static int serve_load_models(serve_state *s) {
    size_t n = s->n;
    if (finish_downloads(s->srv, &s->k, &s->e) < 0) { bs_log(BS_LOG_ERROR, "hub", "%s", s->e.msg); return -1; }
    if (!(s->pool = bs_pool_create((int)s->c.threads))) {
        bs_log(BS_LOG_ERROR, "serve", "cannot start the thread pool");
        return -1;
    }
    for (size_t i = 0; i < n; i++) {
        bs_serve_model *mc = &s->c.models[i];
        served_t *sv = &s->sv[i];
        const char *name = s->k.names[i], *dir = s->k.dirs[i];
        const char *ref = mc->path ? mc->path : mc->repo;
        double t0 = bs_now_ms();
        bs_log(BS_LOG_INFO, "model", "loading %s (%zu of %zu) from %s", name, i + 1, n, dir);
        test_load_delay();
        if (bs_basal_load(&sv->m, dir, s->pool, 1, &s->e) < 0) { bs_log(BS_LOG_ERROR, "model", "%s", s->e.msg); return -1; }
        sv->loaded = 1;
        if (!mc->name && strcmp(sv->m.name, name)) { /* basal.json changed while starting */
            bs_log(BS_LOG_ERROR, "model", "%s: basal.json names %s, was %s a moment ago", dir, sv->m.name, name);
            return -1;
        }
        if (apply_knobs(&sv->m, mc, &s->e) < 0) { bs_log(BS_LOG_ERROR, "model", "%s: %s", ref, s->e.msg); return -1; }
        /* the backend of spec 05 §5: cpu, cuda, or auto (CUDA when a usable GPU is present);
         * dtype f16 on the CPU was refused by the check */
        const char *tbl = strcmp(mc->gemm_table, "auto") && strcmp(mc->gemm_table, "none") ? mc->gemm_table : NULL;
        sv->m.model.int8_alpha = mc->int8_smooth_alpha;
        if (bs_device_attach_ex(&sv->m.model, s->c.backend, mc->dtype, tbl, &s->e) < 0) {
            bs_log(BS_LOG_ERROR, "model", "%s: %s", ref, s->e.msg);
            return -1;
        }
        if (s->dlog && dlog_model(s, i, dir) < 0) { bs_log(BS_LOG_ERROR, "model", "%s", s->e.msg); return -1; }
        bs_log(BS_LOG_INFO, "model", "loaded %s in %.1f s", name, (bs_now_ms() - t0) / 1e3);
        bs_server_set_loaded(s->srv, i + 1);
    }
    return 0;
}

/* The device gate and one engine per model; then the server is ready.
 * Negative on a failure (logged, but for the gate). */
static int serve_start_engines(serve_state *s) {
    if (!(s->gate = bs_gate_create((double)s->c.long_slice_ms, NULL, NULL))) return -1;
    for (size_t i = 0; i < s->n; i++) {
        bs_serve_model *mc = &s->c.models[i];
        served_t *sv = &s->sv[i];
        bs_engine_opts eo;
        bs_engine_opts_default(&eo);
        eo.max_batch_tokens = (int)mc->max_batch_tokens;
        eo.schedule = mc->schedule_fifo ? BS_SCHED_FIFO : BS_SCHED_HRRN;
        eo.long_tokens = (int)mc->long_tokens;
        eo.tree_max_tokens = (int)mc->tree_max_tokens;
        eo.state_cache_mb = (size_t)mc->state_cache_mb;
        eo.no_prefix_cache = mc->no_prefix_cache;
        eo.limits.max_questions = (size_t)mc->max_questions;
        eo.limits.max_request_tokens = mc->max_request_tokens;
        eo.readout_bf16 = s->f.readout && !strcmp(s->f.readout, "bf16");
        if (bs_engine_create(&sv->engine, &sv->m, &eo, s->gate, &s->e) < 0) {
            bs_log(BS_LOG_ERROR, "engine", "%s: %s", sv->m.name, s->e.msg);
            return -1;
        }
        s->engines[i] = sv->engine;
    }
    bs_server_set_ready(s->srv, s->engines);
    atomic_store(&g_serving, 1); /* before the readiness line: a signal from then on is graceful */
    return 0;
}

/* The readiness line, then per model its device and admission. */
static void log_serving(const serve_state *s, double t_start) {
    bs_log(BS_LOG_INFO, "serve", "serving on http://%s (ready %.1f s after the start)", s->shown,
           (bs_now_ms() - t_start) / 1e3);
    for (size_t i = 0; i < s->n; i++) {
        const bs_serve_model *mc = &s->c.models[i];
        char lane[64] = "no long lane";
        if (mc->long_tokens) snprintf(lane, sizeof lane, "long lane above %ld tokens", mc->long_tokens);
        const bs_model *md = &s->sv[i].m.model;
        char dev[128];
        if (md->backend) snprintf(dev, sizeof dev, "%s", md->backend->name);
        else if (md->quant == BS_QUANT_INT8)
            snprintf(dev, sizeof dev, "cpu, dtype int8, kernels %s (int8) and %s (attention)", bs_gemm_i8_kernel_name(),
                     bs_gemm_bf16_kernel_name());
        else if (md->compute == BS_COMPUTE_BF16)
            snprintf(dev, sizeof dev, "cpu, dtype %s, kernel %s", bs_model_dtype_name(md), bs_gemm_bf16_kernel_name());
        else snprintf(dev, sizeof dev, "cpu, dtype f32, kernel %s", bs_gemm_kernel_name(bs_gemm_kernel()));
        const bs_basal_model *bm = &s->sv[i].m;
        bs_log(BS_LOG_INFO, "serve", "serving %s on %s (batch %ld tokens, %s, %s; %d option order%s, calibration %s)",
               bm->name, dev, mc->max_batch_tokens, mc->schedule_fifo ? "Fifo" : "Hrrn", lane, bm->orders,
               bm->orders == 1 ? "" : "s", bm->calib_source);
    }
}

/* Stop taking requests first (a failed start: nothing was submitted);
 * then the engines, which complete every job they hold, whose
 * connections the server then answers before it stops. */
static void serve_free(serve_state *s, int status) {
    if (s->srv && !s->shut) bs_server_shutdown(s->srv);
    for (size_t i = 0; s->sv && i < s->n; i++)
        if (s->sv[i].engine) bs_engine_destroy(s->sv[i].engine);
    bs_server_destroy(s->srv);
    pthread_mutex_lock(&g_sig_mu);
    g_dlog_sig = NULL;
    pthread_mutex_unlock(&g_sig_mu);
    bs_dlog_close(s->dlog); /* after the server: every answered request is queued; its lines are written */
    if (s->listen_fd >= 0) close(s->listen_fd);
    for (size_t i = 0; s->sv && i < s->n; i++)
        if (s->sv[i].loaded) bs_basal_free(&s->sv[i].m);
    if (s->gate) bs_gate_destroy(s->gate);
    bs_pool_destroy(s->pool);
    free(s->sv);
    free(s->sm);
    free(s->engines);
    bs_serve_checked_free(&s->k);
    bs_serve_config_free(&s->c);
    free(s->f.models);
    if (status == 0) bs_log(BS_LOG_INFO, "serve", "stopped");
    /* g_access stays open: the detached signal thread may still reopen it */
}

int cmd_serve(int argc, char **argv) {
    double t_start = bs_now_ms();
    early_log_format(argc, argv);
    serve_state s;
    memset(&s, 0, sizeof s);
    s.listen_fd = -1;
    int status = parse_flags(argc, argv, &s.f);
    if (status) {
        free(s.f.models);
        return status < 0 ? 0 : status;
    }
    if (s.f.offline) setenv("HF_HUB_OFFLINE", "1", 1); /* read where every model reference resolves */
    status = 1;
    const sigset_t *sigs = prepare_process();
    if (serve_configure(&s, sigs) < 0 || serve_start_server(&s) < 0 || serve_load_models(&s) < 0 ||
        serve_start_engines(&s) < 0)
        goto done;
    log_serving(&s, t_start);
    while (sem_wait(&g_stop) != 0) {}
    bs_log(BS_LOG_INFO, "serve", "%s: answering the requests in flight, then exiting",
           g_signal == SIGINT ? "SIGINT" : "SIGTERM");
    bs_server_shutdown(s.srv);
    s.shut = 1;
    status = 0;
done:
    serve_free(&s, status);
    return status;
}
