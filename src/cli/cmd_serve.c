/* `basal serve` (spec 06 §4): where the configuration comes from (flags, env,
 * YAML, defaults), loading every model before listening, one engine per
 * model on one shared device gate, and the signal-driven shutdown that
 * answers every request in flight before exiting 0. */
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
#include <unistd.h>

#include "cli/cli.h"
#include "core/util.h"
#include "cpu/pool.h"
#include "engine/engine.h"
#include "engine/gate.h"
#include "device/device.h"
#include "model/basal_model.h"
#include "server/config.h"
#include "server/modelref.h"
#include "server/server.h"

/* Flags as given; `set` tells a flag from its default (06 §4.1 precedence). */
typedef struct {
    const char *config;
    const char **models;
    size_t n_models;
    const char *dtype, *readout, *kernels, *gemm_table, *addr, *schedule, *release_date, *api_key_env, *backend, *cors;
    long long state_cache_mb, tree_max_tokens, max_batch_tokens, max_inflight, long_tokens, long_slice_ms,
        max_body_bytes, threads, max_questions, max_request_tokens, header_timeout, body_timeout, keepalive_timeout,
        max_connections, max_client_connections;
    int set_state_cache_mb, set_tree_max_tokens, set_max_batch_tokens, set_max_inflight, set_long_tokens,
        set_long_slice_ms, set_max_body_bytes, set_threads, set_max_questions, set_max_request_tokens,
        set_header_timeout, set_body_timeout, set_keepalive_timeout, set_max_connections, set_max_client_connections;
    int no_prefix_cache, access_log, metrics;
} flags_t;

static void usage(FILE *f) {
    fprintf(f,
            "usage: basal serve (--model DIR|REF ... | --config serve.yml) [options]\n"
            "  --addr IP:PORT           listen address (default 127.0.0.1:8000; env BASAL_ADDR)\n"
            "  --dtype auto|f16|bf16|f32  precision (f16 needs CUDA)   --threads N   CPU threads (0 = all)\n"
            "  --max-batch-tokens N  --schedule hrrn|fifo  --long-tokens N  --long-slice-ms N\n"
            "  --state-cache-mb N  --tree-max-tokens N  --no-prefix-cache  --max-inflight N\n"
            "  --max-body-bytes N  --api-key-env NAME  --release-date S  --metrics  --access-log\n"
            "  --max-questions N (1024)  --max-request-tokens N (65536)   per-request limits\n"
            "  --header-timeout S (10)  --body-timeout S (60)  --keepalive-timeout S (5)   HTTP deadlines\n"
            "  --max-connections N (0: max-inflight + 1024)  --max-client-connections N (128 per address)\n"
            "  --cors ORIGIN[,ORIGIN]|'*'  allow browser pages of these origins (CORS; default off; env BASAL_CORS)\n"
            "  --readout f32|bf16  --kernels fused  --backend auto|cpu|cuda  --gemm-table PATH (CUDA only)\n");
}

static int num(const char *flag, const char *v, long long min, long long max, long long *out, int *set) {
    if (!v) return 2;
    if (bs_cfg_parse_int(v, min, max, out) < 0) {
        fprintf(stderr, "basal serve: %s: expected an integer in %lld..%lld, got '%s'\n", flag, min, max, v);
        return 2;
    }
    *set = 1;
    return 0;
}

static int parse_flags(int argc, char **argv, flags_t *f) {
    memset(f, 0, sizeof *f);
    if (!(f->models = calloc((size_t)argc, sizeof *f->models))) return 1;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        int rc = 0;
#define STR(name, field) else if (!strcmp(a, name)) { if (!(f->field = cli_value(argc, argv, &i))) return 2; }
#define NUM(name, field, min, max) \
    else if (!strcmp(a, name)) rc = num(name, cli_value(argc, argv, &i), min, max, &f->field, &f->set_##field);
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) { usage(stdout); return -1; }
        else if (!strcmp(a, "--model")) { if (!(f->models[f->n_models++] = cli_value(argc, argv, &i))) return 2; }
        STR("--config", config) STR("--dtype", dtype) STR("--readout", readout) STR("--kernels", kernels)
        STR("--gemm-table", gemm_table) STR("--addr", addr) STR("--schedule", schedule)
        STR("--release-date", release_date) STR("--api-key-env", api_key_env) STR("--backend", backend)
        STR("--cors", cors)
        NUM("--state-cache-mb", state_cache_mb, 0, INT_MAX) NUM("--tree-max-tokens", tree_max_tokens, 1, INT_MAX)
        NUM("--max-batch-tokens", max_batch_tokens, 1, INT_MAX) NUM("--max-inflight", max_inflight, 1, INT_MAX)
        NUM("--long-tokens", long_tokens, 0, INT_MAX) NUM("--long-slice-ms", long_slice_ms, 0, INT_MAX)
        NUM("--max-body-bytes", max_body_bytes, 1, LLONG_MAX) NUM("--threads", threads, 0, INT_MAX)
        NUM("--max-questions", max_questions, 1, INT_MAX) NUM("--max-request-tokens", max_request_tokens, 1, INT_MAX)
        NUM("--header-timeout", header_timeout, 1, INT_MAX) NUM("--body-timeout", body_timeout, 1, INT_MAX)
        NUM("--keepalive-timeout", keepalive_timeout, 1, INT_MAX)
        NUM("--max-connections", max_connections, 0, INT_MAX)
        NUM("--max-client-connections", max_client_connections, 1, INT_MAX)
        else if (!strcmp(a, "--no-prefix-cache")) f->no_prefix_cache = 1;
        else if (!strcmp(a, "--access-log")) f->access_log = 1;
        else if (!strcmp(a, "--metrics")) f->metrics = 1;
        else {
            fprintf(stderr, "basal serve: unknown option %s\n", a);
            usage(stderr);
            return 2;
        }
#undef STR
#undef NUM
        if (rc) return rc;
    }
    int fifo;
    if (f->config && (f->n_models || f->gemm_table)) {
        fprintf(stderr, "basal serve: --config cannot be combined with %s\n", f->n_models ? "--model" : "--gemm-table");
        return 2;
    }
    if (f->dtype && bs_cfg_check_dtype(f->dtype) < 0) {
        fprintf(stderr, "basal serve: --dtype must be auto, f16, bf16 or f32\n");
        return 2;
    }
    if (f->schedule && bs_cfg_check_schedule(f->schedule, &fifo) < 0) {
        fprintf(stderr, "basal serve: --schedule must be hrrn or fifo\n");
        return 2;
    }
    if (f->backend && bs_cfg_check_backend(f->backend) < 0) {
        fprintf(stderr, "basal serve: --backend must be auto, cpu or cuda\n");
        return 2;
    }
    if (f->readout && strcmp(f->readout, "f32") && strcmp(f->readout, "bf16")) {
        fprintf(stderr, "basal serve: --readout must be f32 or bf16\n");
        return 2;
    }
    if (f->kernels && strcmp(f->kernels, "fused")) {
        fprintf(stderr, "basal serve: --kernels %s is not supported (the only value is fused)\n", f->kernels);
        return 2;
    }
    return 0;
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
                fprintf(stderr, "basal serve: %s is ignored with a configuration file (set it in %s)\n",
                        ignored[i].flag, file);
        if (f->set_max_batch_tokens || f->set_long_tokens || f->set_state_cache_mb || f->set_tree_max_tokens ||
            f->no_prefix_cache || f->set_max_inflight || f->set_long_slice_ms || f->set_max_questions ||
            f->set_max_request_tokens)
            fprintf(stderr, "basal serve: model and admission flags are ignored with a configuration file (%s)\n", file);
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
            if ((rc = bs_serve_config_add_model(c, &m, e)) < 0) return rc;
        }
        if (f->set_max_inflight) c->max_inflight = (long)f->max_inflight;
        if (f->set_long_slice_ms) c->long_slice_ms = (long)f->long_slice_ms;
        if (f->release_date && set_str(&c->release_date, f->release_date)) return bs_fail(e, BS_ENOMEM, "out of memory");
    }
    /* These win over the file (06 §4.1). */
    const char *env_addr = getenv("BASAL_ADDR");
    const char *addr = f->addr ? f->addr : env_addr && *env_addr ? env_addr : c->addr ? c->addr : "127.0.0.1:8000";
    const char *env_log = getenv("BASAL_ACCESS_LOG");
    if (set_str(&c->addr, addr) || (f->api_key_env && set_str(&c->api_key_env, f->api_key_env)) ||
        (f->backend && set_str(&c->backend, f->backend)))
        return bs_fail(e, BS_ENOMEM, "out of memory");
    if (f->access_log || (env_log && *env_log && strcmp(env_log, "0"))) c->access_log = 1;
    if (f->metrics) c->metrics = 1;
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

/* Stop signals go to one thread. Loading a large model takes minutes and
 * cannot be interrupted cleanly, so a signal before the server is up ends the
 * process at once (nothing is listening yet); afterwards the first signal
 * starts the graceful shutdown and a second one cuts it short. */
static atomic_int g_serving;
static sem_t g_stop;
static int g_signal;

static void *signal_thread(void *arg) {
    const sigset_t *set = arg;
    int sig, n = 0;
    for (;;) {
        if (sigwait(set, &sig) != 0) continue;
        if (!atomic_load(&g_serving)) {
            fprintf(stderr, "basal serve: %s before the server was ready; exiting\n", sig == SIGINT ? "SIGINT" : "SIGTERM");
            _exit(1);
        }
        if (n++) {
            fprintf(stderr, "basal serve: second signal; exiting without waiting for the requests in flight\n");
            _exit(1);
        }
        g_signal = sig;
        sem_post(&g_stop);
    }
    return NULL;
}

typedef struct {
    bs_basal_model m;
    int loaded;
    bs_engine *engine;
} served_t;

static int name_taken(const bs_serve_config *c, const served_t *sv, size_t upto, const char *name) {
    for (size_t i = 0; i < upto; i++) {
        if (!strcmp(sv[i].m.name, name)) return 1;
        for (size_t a = 0; a < c->models[i].n_aliases; a++)
            if (!strcmp(c->models[i].aliases[a], name)) return 1;
    }
    return 0;
}

int cmd_serve(int argc, char **argv) {
    double t_start = bs_now_ms();
    flags_t f;
    int status = parse_flags(argc, argv, &f);
    if (status) {
        free(f.models);
        return status < 0 ? 0 : status;
    }
    status = 1;
    bs_err e = { 0 };
    bs_serve_config c;
    memset(&c, 0, sizeof c);
    bs_pool *pool = NULL;
    bs_gate *gate = NULL;
    served_t *sv = NULL;
    bs_server_model *sm = NULL;
    bs_server *srv = NULL;
    char *api_key = NULL;
    int listen_fd = -1;
    size_t n = 0;

    /* Before any other thread exists, so that every thread inherits the mask
     * and only the signal thread sees the stop signals. */
    static sigset_t stop;
    sigemptyset(&stop);
    sigaddset(&stop, SIGINT);
    sigaddset(&stop, SIGTERM);
    pthread_sigmask(SIG_BLOCK, &stop, NULL);
    signal(SIGPIPE, SIG_IGN);
    pthread_t sig_th;
    sem_init(&g_stop, 0, 0);
    atomic_store(&g_serving, 0);
    if (pthread_create(&sig_th, NULL, signal_thread, &stop) != 0) {
        fprintf(stderr, "basal serve: cannot start the signal thread\n");
        goto done;
    }
    pthread_detach(sig_th);
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
        rl.rlim_cur = rl.rlim_max;
        setrlimit(RLIMIT_NOFILE, &rl);
    }

    if (build_config(&f, &c, &e) < 0) { fprintf(stderr, "basal serve: %s\n", e.msg); goto done; }
    if (c.api_key_env) {
        const char *k = getenv(c.api_key_env);
        if (!k || !*k) { fprintf(stderr, "basal serve: api key variable %s is empty\n", c.api_key_env); goto done; }
        if (!(api_key = bs_strfmt("%s", k))) goto done;
    }
    n = c.n_models;
    if (!(sv = calloc(n, sizeof *sv)) || !(sm = calloc(n, sizeof *sm))) goto done;
    if (!(pool = bs_pool_create((int)c.threads))) { fprintf(stderr, "basal serve: cannot start the thread pool\n"); goto done; }
    for (size_t i = 0; i < n; i++) {
        bs_serve_model *mc = &c.models[i];
        const char *ref = mc->path ? mc->path : mc->repo;
        char *dir = NULL;
        if (bs_model_ref_resolve(ref, mc->repo ? mc->revision : NULL, &dir, &e) < 0) {
            fprintf(stderr, "basal serve: %s\n", e.msg);
            goto done;
        }
        int lrc = bs_basal_load(&sv[i].m, dir, pool, 1, &e);
        free(dir);
        if (lrc < 0) { fprintf(stderr, "basal serve: %s\n", e.msg); goto done; }
        sv[i].loaded = 1;
        /* the backend of spec 05 §5: cpu, cuda, or auto (CUDA when a usable GPU is present);
         * dtype f16 on the CPU is refused here */
        const char *tbl = strcmp(mc->gemm_table, "auto") && strcmp(mc->gemm_table, "none") ? mc->gemm_table : NULL;
        if (bs_device_attach_ex(&sv[i].m.model, c.backend, mc->dtype, tbl, &e) < 0) {
            fprintf(stderr, "basal serve: %s: %s\n", ref, e.msg);
            goto done;
        }
        if (name_taken(&c, sv, i, sv[i].m.name)) {
            fprintf(stderr, "basal serve: model %s configured twice\n", sv[i].m.name);
            goto done;
        }
        for (size_t a = 0; a < mc->n_aliases; a++) {
            int dup = name_taken(&c, sv, i, mc->aliases[a]) || !strcmp(mc->aliases[a], sv[i].m.name);
            for (size_t b = 0; b < a; b++) dup |= !strcmp(mc->aliases[a], mc->aliases[b]);
            if (dup) { fprintf(stderr, "basal serve: model %s configured twice\n", mc->aliases[a]); goto done; }
        }
    }
    size_t def = 0;
    if (c.default_model) {
        def = n;
        for (size_t i = 0; i < n && def == n; i++) {
            if (!strcmp(sv[i].m.name, c.default_model)) def = i;
            for (size_t a = 0; a < c.models[i].n_aliases; a++)
                if (!strcmp(c.models[i].aliases[a], c.default_model)) def = i;
        }
        if (def == n) {
            fprintf(stderr, "basal serve: default model %s is not served ([", c.default_model);
            for (size_t i = 0; i < n; i++) fprintf(stderr, "%s\"%s\"", i ? ", " : "", sv[i].m.name);
            fprintf(stderr, "])\n");
            goto done;
        }
    }
    if (!(gate = bs_gate_create((double)c.long_slice_ms, NULL, NULL))) goto done;
    for (size_t i = 0; i < n; i++) {
        bs_serve_model *mc = &c.models[i];
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
        eo.readout_bf16 = f.readout && !strcmp(f.readout, "bf16");
        if (bs_engine_create(&sv[i].engine, &sv[i].m, &eo, gate, &e) < 0) {
            fprintf(stderr, "basal serve: %s: %s\n", sv[i].m.name, e.msg);
            goto done;
        }
        sm[i].name = sv[i].m.name;
        sm[i].aliases = (const char *const *)mc->aliases;
        sm[i].n_aliases = mc->n_aliases;
        sm[i].engine = sv[i].engine;
    }
    char shown[96] = "";
    if (bind_listen(c.addr, &listen_fd, shown, sizeof shown, &e) < 0) { fprintf(stderr, "basal serve: %s\n", e.msg); goto done; }
    bs_server_opts so = {
        .models = sm, .n_models = n, .default_model = def, .listen_fd = listen_fd,
        .max_inflight = c.max_inflight, .max_body_bytes = (unsigned long long)c.max_body_bytes,
        .api_key = api_key, .api_key_len = api_key ? strlen(api_key) : 0, .release_date = c.release_date,
        .metrics = c.metrics, .access_log = c.access_log,
        .cors_origins = (const char *const *)c.cors_origins, .n_cors_origins = c.n_cors_origins,
        .header_timeout_s = c.header_timeout_s, .body_timeout_s = c.body_timeout_s,
        .keepalive_timeout_s = c.keepalive_timeout_s, .max_connections = c.max_connections,
        .max_client_connections = c.max_client_connections,
    };
    if (bs_server_start(&srv, &so, &e) < 0) { fprintf(stderr, "basal serve: %s\n", e.msg); goto done; }
    listen_fd = -1; /* the server owns it now */
    atomic_store(&g_serving, 1); /* before the readiness line: a signal from then on is graceful */
    fprintf(stderr, "serving on http://%s (ready %.1f s after the start)\n", shown, (bs_now_ms() - t_start) / 1e3);
    for (size_t i = 0; i < n; i++) {
        const bs_serve_model *mc = &c.models[i];
        fprintf(stderr, "serving %s (batch %ld tokens, %s, ", sv[i].m.name, mc->max_batch_tokens,
                mc->schedule_fifo ? "Fifo" : "Hrrn");
        if (mc->long_tokens) fprintf(stderr, "long lane above %ld tokens)\n", mc->long_tokens);
        else fprintf(stderr, "no long lane)\n");
    }
    while (sem_wait(&g_stop) != 0) {}
    fprintf(stderr, "basal serve: %s: answering the requests in flight, then exiting\n",
            g_signal == SIGINT ? "SIGINT" : "SIGTERM");
    bs_server_shutdown(srv);
    status = 0;
done:
    /* Engines first: they complete every job they hold, whose connections the
     * server then answers before it stops. */
    for (size_t i = 0; sv && i < n; i++)
        if (sv[i].engine) bs_engine_destroy(sv[i].engine);
    bs_server_destroy(srv);
    if (listen_fd >= 0) close(listen_fd);
    for (size_t i = 0; sv && i < n; i++)
        if (sv[i].loaded) bs_basal_free(&sv[i].m);
    if (gate) bs_gate_destroy(gate);
    bs_pool_destroy(pool);
    free(sv);
    free(sm);
    free(api_key);
    bs_serve_config_free(&c);
    free(f.models);
    if (status == 0) fprintf(stderr, "basal serve: stopped\n");
    return status;
}
