/* The `basal serve` YAML file (spec 06 §4.2), read with libyaml's document
 * API. YAML 1.2 core-schema scalars: a plain `true`/`false` is a bool, a plain
 * decimal an integer, a plain `null`/`~`/empty value is "not given"; quoted
 * scalars are always strings, so `max_inflight: "8"` is refused like serde
 * (basal-rs) refuses it. */
#include "server/config.h"

#include <arpa/inet.h>
#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <yaml.h>

#include "base/suggest.h"
#include "base/util.h"
#include "server/server.h"

static char *dupstr(const char *s) {
    size_t n = strlen(s) + 1;
    char *d = malloc(n);
    if (d) memcpy(d, s, n);
    return d;
}

int bs_serve_model_init(bs_serve_model *m, bs_err *e) {
    memset(m, 0, sizeof *m);
    m->dtype = dupstr("auto");
    m->gemm_table = dupstr("auto");
    m->max_batch_tokens = 8192;
    m->long_tokens = 4096;
    m->tree_max_tokens = 32768;
    m->max_questions = BS_DEFAULT_MAX_QUESTIONS;
    m->max_request_tokens = BS_DEFAULT_MAX_REQUEST_TOKENS;
    m->orders = 2;
    if (!m->dtype || !m->gemm_table) {
        free(m->dtype);
        free(m->gemm_table);
        return bs_fail(e, BS_ENOMEM, "out of memory");
    }
    return BS_OK;
}

static void model_free(bs_serve_model *m) {
    free(m->path);
    free(m->repo);
    free(m->revision);
    free(m->dtype);
    free(m->gemm_table);
    free(m->calibration);
    free(m->name);
    for (size_t i = 0; i < m->n_aliases; i++) free(m->aliases[i]);
    free(m->aliases);
    memset(m, 0, sizeof *m);
}

int bs_serve_config_init(bs_serve_config *c, bs_err *e) {
    memset(c, 0, sizeof *c);
    c->max_inflight = 1024;
    c->long_slice_ms = 100;
    c->max_body_bytes = 16777216;
    c->ui = 1;
    c->header_timeout_s = BS_DEFAULT_HEADER_TIMEOUT_S;
    c->body_timeout_s = BS_DEFAULT_BODY_TIMEOUT_S;
    c->keepalive_timeout_s = BS_DEFAULT_KEEPALIVE_TIMEOUT_S;
    c->max_client_connections = BS_DEFAULT_MAX_CLIENT_CONNECTIONS;
    c->access_log = 1;
    c->release_date = dupstr(BS_DEFAULT_RELEASE_DATE);
    c->backend = dupstr("auto");
    c->log_format = dupstr("text");
    if (!c->release_date || !c->backend || !c->log_format) {
        bs_serve_config_free(c);
        return bs_fail(e, BS_ENOMEM, "out of memory");
    }
    return BS_OK;
}

void bs_serve_config_free(bs_serve_config *c) {
    free(c->addr);
    free(c->default_model);
    free(c->release_date);
    free(c->gemm_cache);
    free(c->api_key_env);
    free(c->backend);
    free(c->access_log_file);
    free(c->log_format);
    free(c->decision_log);
    for (size_t i = 0; i < c->n_cors_origins; i++) free(c->cors_origins[i]);
    free(c->cors_origins);
    for (size_t i = 0; i < c->n_models; i++) model_free(&c->models[i]);
    free(c->models);
    memset(c, 0, sizeof *c);
}

int bs_serve_config_add_model(bs_serve_config *c, bs_serve_model *m, bs_err *e) {
    bs_serve_model *n = realloc(c->models, (c->n_models + 1) * sizeof *n);
    if (!n) return bs_fail(e, BS_ENOMEM, "out of memory");
    c->models = n;
    c->models[c->n_models++] = *m;
    memset(m, 0, sizeof *m);
    return BS_OK;
}

int bs_cfg_parse_int(const char *s, long long min, long long max, long long *out) {
    const char *p = s;
    if (*p == '+' || *p == '-') p++;
    if (!*p) return -1;
    for (const char *q = p; *q; q++)
        if (*q < '0' || *q > '9') return -1;
    errno = 0;
    char *end;
    long long v = strtoll(s, &end, 10);
    if (errno || *end || v < min || v > max) return -1;
    *out = v;
    return 0;
}

int bs_cfg_check_dtype(const char *v) {
    return !strcmp(v, "auto") || !strcmp(v, "f16") || !strcmp(v, "bf16") || !strcmp(v, "f32") || !strcmp(v, "int8w") ||
                   !strcmp(v, "int8")
               ? 0
               : -1;
}

int bs_cfg_check_schedule(const char *v, int *fifo) {
    if (!strcmp(v, "hrrn")) *fifo = 0;
    else if (!strcmp(v, "fifo")) *fifo = 1;
    else return -1;
    return 0;
}

int bs_cfg_check_backend(const char *v) {
    return !strcmp(v, "auto") || !strcmp(v, "cpu") || !strcmp(v, "cuda") ? 0 : -1;
}

int bs_parse_addr(const char *s, struct sockaddr_storage *out, socklen_t *len, bs_err *e) {
    memset(out, 0, sizeof *out);
    const char *colon = strrchr(s, ':');
    long long port;
    if (!colon || bs_cfg_parse_int(colon + 1, 0, 65535, &port) < 0 || colon[1] == '+' || colon[1] == '-')
        return bs_fail(e, BS_EINVAL, "invalid address %s (expected IP:port or [IPv6]:port)", s);
    char host[64];
    size_t hl = (size_t)(colon - s);
    int v6 = 0;
    if (hl >= 2 && s[0] == '[' && s[hl - 1] == ']') {
        s++;
        hl -= 2;
        v6 = 1;
    }
    if (hl == 0 || hl >= sizeof host)
        return bs_fail(e, BS_EINVAL, "invalid address %s (expected IP:port or [IPv6]:port)", s);
    memcpy(host, s, hl);
    host[hl] = 0;
    if (v6) {
        struct sockaddr_in6 *a = (struct sockaddr_in6 *)out;
        if (inet_pton(AF_INET6, host, &a->sin6_addr) != 1)
            return bs_fail(e, BS_EINVAL, "invalid IPv6 address %s (host names are not accepted)", host);
        a->sin6_family = AF_INET6;
        a->sin6_port = htons((unsigned short)port);
        *len = sizeof *a;
    } else {
        struct sockaddr_in *a = (struct sockaddr_in *)out;
        if (inet_pton(AF_INET, host, &a->sin_addr) != 1)
            return bs_fail(e, BS_EINVAL, "invalid IP address %s (host names are not accepted; IPv6 goes in [])",
                           host);
        a->sin_family = AF_INET;
        a->sin_port = htons((unsigned short)port);
        *len = sizeof *a;
    }
    return BS_OK;
}

/* ---- YAML nodes ---- */

typedef struct {
    yaml_document_t *doc;
    const char *name;
    bs_err *e;
    bs_serve_config *cfg;
} yctx;

static int yfail(yctx *y, const yaml_node_t *n, const char *fmt, const char *arg) {
    char msg[512];
    snprintf(msg, sizeof msg, fmt, arg);
    return bs_fail(y->e, BS_EINVAL, "%s:%zu: %s", y->name, n ? (size_t)n->start_mark.line + 1 : (size_t)1, msg);
}

static const char *scalar(const yaml_node_t *n) {
    return n->type == YAML_SCALAR_NODE ? (const char *)n->data.scalar.value : NULL;
}

static int plain(const yaml_node_t *n) {
    return n->type == YAML_SCALAR_NODE && n->data.scalar.style == YAML_PLAIN_SCALAR_STYLE;
}

static int is_null(const yaml_node_t *n) {
    if (!plain(n)) return 0;
    const char *s = scalar(n);
    return !*s || !strcmp(s, "~") || !strcmp(s, "null") || !strcmp(s, "Null") || !strcmp(s, "NULL");
}

/* A string value; a null leaves *dst (the default) untouched. */
static int get_str(yctx *y, const char *key, const yaml_node_t *v, char **dst) {
    if (is_null(v)) return BS_OK;
    const char *s = scalar(v);
    if (!s) return yfail(y, v, "%s: expected a string", key);
    if (strlen(s) != v->data.scalar.length) return yfail(y, v, "%s: NUL character in value", key);
    char *d = dupstr(s);
    if (!d) return bs_fail(y->e, BS_ENOMEM, "out of memory");
    free(*dst);
    *dst = d;
    return BS_OK;
}

static int get_int(yctx *y, const char *key, const yaml_node_t *v, long long min, long long max, long long *out) {
    long long x;
    if (!plain(v) || is_null(v) || bs_cfg_parse_int(scalar(v), LLONG_MIN, LLONG_MAX, &x) < 0)
        return yfail(y, v, "%s: expected an integer", key);
    if (x < min || x > max) {
        char msg[160];
        if (max == LLONG_MAX) snprintf(msg, sizeof msg, "%%s: must be at least %lld", min);
        else snprintf(msg, sizeof msg, "%%s: must be between %lld and %lld", min, max);
        return yfail(y, v, msg, key);
    }
    *out = x;
    return BS_OK;
}

/* Counts and sizes that end up in int fields of the engine options. */
static int get_long(yctx *y, const char *key, const yaml_node_t *v, long min, long *out) {
    long long x;
    int rc = get_int(y, key, v, min, INT_MAX, &x);
    if (rc == 0) *out = (long)x;
    return rc;
}

static int get_bool(yctx *y, const char *key, const yaml_node_t *v, int *out) {
    const char *s = plain(v) ? scalar(v) : NULL;
    if (s && (!strcmp(s, "true") || !strcmp(s, "True") || !strcmp(s, "TRUE"))) *out = 1;
    else if (s && (!strcmp(s, "false") || !strcmp(s, "False") || !strcmp(s, "FALSE"))) *out = 0;
    else return yfail(y, v, "%s: expected true or false", key);
    return BS_OK;
}

static int get_enum(yctx *y, const char *key, const yaml_node_t *v, int (*check)(const char *), const char *choices,
                    char **dst) {
    const char *s = scalar(v);
    if (!s || is_null(v) || check(s) < 0) {
        char fmt[256];
        snprintf(fmt, sizeof fmt, "%%s: expected one of %s", choices);
        return yfail(y, v, fmt, key);
    }
    return get_str(y, key, v, dst);
}

static int check_dtype_fn(const char *s) { return bs_cfg_check_dtype(s); }

int bs_cfg_check_origin(const char *v) {
    if (!strcmp(v, "*")) return 0;
    const char *h = !strncmp(v, "http://", 7) ? v + 7 : !strncmp(v, "https://", 8) ? v + 8 : NULL;
    if (!h || !*h) return -1;
    for (const char *p = h; *p; p++) {
        unsigned char ch = (unsigned char)*p;
        /* host (a name, IPv4 or [IPv6]) and port: no path, query, user,
         * space, comma or control character can be part of an Origin */
        if (!((ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') || ch == '.' ||
              ch == '-' || ch == ':' || ch == '[' || ch == ']' || ch == '_'))
            return -1;
    }
    return 0;
}

static void cors_clear(bs_serve_config *c) {
    for (size_t i = 0; i < c->n_cors_origins; i++) free(c->cors_origins[i]);
    free(c->cors_origins);
    c->cors_origins = NULL;
    c->n_cors_origins = 0;
}

static int cors_add(bs_serve_config *c, const char *o, size_t n) {
    char **na = realloc(c->cors_origins, (c->n_cors_origins + 1) * sizeof *na);
    if (!na) return -1;
    c->cors_origins = na;
    if (!(na[c->n_cors_origins] = malloc(n + 1))) return -1;
    memcpy(na[c->n_cors_origins], o, n);
    na[c->n_cors_origins][n] = 0;
    c->n_cors_origins++;
    return 0;
}

int bs_cfg_set_cors(bs_serve_config *c, const char *list, bs_err *e) {
    cors_clear(c);
    const char *p = list;
    for (;;) {
        const char *end = strchr(p, ',');
        size_t n = end ? (size_t)(end - p) : strlen(p);
        while (n && (*p == ' ' || *p == '\t')) p++, n--;
        while (n && (p[n - 1] == ' ' || p[n - 1] == '\t')) n--;
        if (cors_add(c, p, n) < 0) {
            cors_clear(c);
            return bs_fail(e, BS_ENOMEM, "out of memory");
        }
        if (bs_cfg_check_origin(c->cors_origins[c->n_cors_origins - 1]) < 0) {
            int rc = bs_fail(e, BS_EINVAL,
                             "CORS origin '%.200s' is not \"*\" or scheme://host[:port] (http or https, no path)",
                             c->cors_origins[c->n_cors_origins - 1]);
            cors_clear(c);
            return rc;
        }
        if (!end) break;
        p = end + 1;
    }
    return BS_OK;
}

/* cors_origins: "*" / one origin, or a list of them. */
static int get_cors(yctx *y, const char *key, const yaml_node_t *v) {
    cors_clear(y->cfg);
    if (is_null(v)) return BS_OK;
    if (scalar(v)) {
        if (bs_cfg_check_origin(scalar(v)) < 0) return yfail(y, v, "%s: expected \"*\" or scheme://host[:port] origins", key);
        return cors_add(y->cfg, scalar(v), strlen(scalar(v))) < 0 ? bs_fail(y->e, BS_ENOMEM, "out of memory") : BS_OK;
    }
    if (v->type != YAML_SEQUENCE_NODE) return yfail(y, v, "%s: expected a list of origins", key);
    for (yaml_node_item_t *it = v->data.sequence.items.start; it < v->data.sequence.items.top; it++) {
        const yaml_node_t *a = yaml_document_get_node(y->doc, *it);
        const char *s = a ? scalar(a) : NULL;
        if (!s || is_null(a) || strlen(s) != a->data.scalar.length || bs_cfg_check_origin(s) < 0)
            return yfail(y, a ? a : v, "%s: expected \"*\" or scheme://host[:port] origins", key);
        if (cors_add(y->cfg, s, strlen(s)) < 0) return bs_fail(y->e, BS_ENOMEM, "out of memory");
    }
    return BS_OK;
}
static int check_backend_fn(const char *s) { return bs_cfg_check_backend(s); }
static int check_log_format_fn(const char *s) { return strcmp(s, "text") && strcmp(s, "json") ? -1 : 0; }

/* Walks a mapping, refusing non-string and duplicate keys; calls fn per pair. */
typedef int (*pair_fn)(yctx *y, const char *key, const yaml_node_t *k, const yaml_node_t *v, void *arg);

static int each_pair(yctx *y, const yaml_node_t *map, const char *what, pair_fn fn, void *arg) {
    if (map->type != YAML_MAPPING_NODE) return yfail(y, map, "%s must be a mapping", what);
    for (yaml_node_pair_t *p = map->data.mapping.pairs.start; p < map->data.mapping.pairs.top; p++) {
        const yaml_node_t *k = yaml_document_get_node(y->doc, p->key);
        const yaml_node_t *v = yaml_document_get_node(y->doc, p->value);
        const char *ks = k ? scalar(k) : NULL;
        if (!ks || !v) return yfail(y, k, "%s: keys must be strings", what);
        for (yaml_node_pair_t *q = map->data.mapping.pairs.start; q < p; q++) {
            const yaml_node_t *k2 = yaml_document_get_node(y->doc, q->key);
            if (k2 && scalar(k2) && !strcmp(scalar(k2), ks)) return yfail(y, k, "duplicate field %s", ks);
        }
        int rc = fn(y, ks, k, v, arg);
        if (rc < 0) return rc;
    }
    return BS_OK;
}

/* "unknown field KEY", with the closest known key when one is near. The
 * lists name every key the two functions below accept. */
static const char *const model_keys[] = {
    "path", "repo", "revision", "dtype", "gemm_table", "max_batch_tokens", "long_tokens", "state_cache_mb",
    "tree_max_tokens", "max_questions", "max_request_tokens", "no_prefix_cache", "schedule", "aliases",
    "orders", "calibration", "no_calibration", "name", "int8_smooth_alpha",
};
static const char *const top_keys[] = {
    "addr", "default_model", "max_inflight", "long_slice_ms", "release_date", "access_log", "metrics",
    "gemm_cache", "api_key_env", "max_body_bytes", "backend", "threads", "header_timeout_s", "body_timeout_s",
    "keepalive_timeout_s", "max_connections", "max_client_connections", "models", "access_log_file", "log_format", "ui",
    "cors_origins", "decision_log", "decision_log_state",
};

static int unknown_key(yctx *y, const yaml_node_t *k, const char *key, const char *const *known, size_t n) {
    const char *s = bs_suggest(key, known, n);
    char msg[300];
    if (s) snprintf(msg, sizeof msg, "unknown field %.200s (did you mean %s?)", key, s);
    else snprintf(msg, sizeof msg, "unknown field %.200s", key);
    return yfail(y, k, "%s", msg);
}

static int model_pair(yctx *y, const char *key, const yaml_node_t *k, const yaml_node_t *v, void *arg) {
    bs_serve_model *m = arg;
    if (!strcmp(key, "path")) return get_str(y, key, v, &m->path);
    if (!strcmp(key, "repo")) return get_str(y, key, v, &m->repo);
    if (!strcmp(key, "revision")) return get_str(y, key, v, &m->revision);
    if (!strcmp(key, "dtype")) return get_enum(y, key, v, check_dtype_fn, "auto, f16, bf16, f32, int8w, int8", &m->dtype);
    if (!strcmp(key, "int8_smooth_alpha")) { /* 0: no smoothing, as --int8-smooth-alpha 0 */
        char *end = NULL;
        const char *s = plain(v) && !is_null(v) ? scalar(v) : NULL;
        double a = s ? strtod(s, &end) : -1.0;
        if (!s || !*s || *end || !(a >= 0.0 && a <= 1.0))
            return yfail(y, v, "%s: expected a number in [0, 1] (0: no smoothing)", key);
        m->int8_smooth_alpha = a > 0.0 ? a : -1.0;
        return BS_OK;
    }
    if (!strcmp(key, "gemm_table")) return get_str(y, key, v, &m->gemm_table);
    if (!strcmp(key, "max_batch_tokens")) return get_long(y, key, v, 1, &m->max_batch_tokens);
    if (!strcmp(key, "long_tokens")) return get_long(y, key, v, 0, &m->long_tokens);
    if (!strcmp(key, "state_cache_mb")) return get_long(y, key, v, 0, &m->state_cache_mb);
    if (!strcmp(key, "tree_max_tokens")) return get_long(y, key, v, 1, &m->tree_max_tokens);
    if (!strcmp(key, "max_questions")) return get_long(y, key, v, 1, &m->max_questions);
    if (!strcmp(key, "max_request_tokens")) return get_long(y, key, v, 1, &m->max_request_tokens);
    if (!strcmp(key, "no_prefix_cache")) return get_bool(y, key, v, &m->no_prefix_cache);
    if (!strcmp(key, "orders")) {
        int rc = get_long(y, key, v, 1, &m->orders);
        if (rc == BS_OK && m->orders > 2) return yfail(y, v, "%s: expected 1 or 2", key);
        return rc;
    }
    if (!strcmp(key, "calibration")) return get_str(y, key, v, &m->calibration);
    if (!strcmp(key, "no_calibration")) return get_bool(y, key, v, &m->no_calibration);
    if (!strcmp(key, "name")) {
        int rc = get_str(y, key, v, &m->name);
        if (rc == BS_OK && m->name && !*m->name) return yfail(y, v, "%s: expected a non-empty string", key);
        return rc;
    }
    if (!strcmp(key, "schedule")) {
        const char *s = scalar(v);
        if (!s || bs_cfg_check_schedule(s, &m->schedule_fifo) < 0)
            return yfail(y, v, "%s: expected one of hrrn, fifo", key);
        return BS_OK;
    }
    if (!strcmp(key, "aliases")) {
        if (v->type != YAML_SEQUENCE_NODE) return yfail(y, v, "%s: expected a list of strings", key);
        for (yaml_node_item_t *it = v->data.sequence.items.start; it < v->data.sequence.items.top; it++) {
            const yaml_node_t *a = yaml_document_get_node(y->doc, *it);
            if (!a || !scalar(a) || is_null(a) || !*scalar(a)) return yfail(y, a ? a : v, "%s: expected a list of strings", key);
            char **na = realloc(m->aliases, (m->n_aliases + 1) * sizeof *na);
            if (!na) return bs_fail(y->e, BS_ENOMEM, "out of memory");
            m->aliases = na;
            if (!(m->aliases[m->n_aliases] = dupstr(scalar(a)))) return bs_fail(y->e, BS_ENOMEM, "out of memory");
            m->n_aliases++;
        }
        return BS_OK;
    }
    return unknown_key(y, k, key, model_keys, sizeof model_keys / sizeof *model_keys);
}

static int models_value(yctx *y, bs_serve_config *c, const yaml_node_t *v) {
    if (v->type != YAML_SEQUENCE_NODE) return yfail(y, v, "%s: expected a list of models", "models");
    if (v->data.sequence.items.start == v->data.sequence.items.top) return yfail(y, v, "%s: no models", "models");
    for (yaml_node_item_t *it = v->data.sequence.items.start; it < v->data.sequence.items.top; it++) {
        const yaml_node_t *n = yaml_document_get_node(y->doc, *it);
        bs_serve_model m;
        int rc = bs_serve_model_init(&m, y->e);
        if (rc < 0) return rc;
        if ((rc = each_pair(y, n, "a models entry", model_pair, &m)) < 0) goto fail;
        if (!m.path == !m.repo) {
            rc = yfail(y, n, "%s", "a model needs exactly one of path and repo");
            goto fail;
        }
        if (m.revision && !m.repo) {
            rc = yfail(y, n, "%s", "revision is only allowed with repo");
            goto fail;
        }
        if ((rc = bs_serve_config_add_model(c, &m, y->e)) < 0) goto fail;
        continue;
    fail:
        model_free(&m);
        return rc;
    }
    return BS_OK;
}

static int top_pair(yctx *y, const char *key, const yaml_node_t *k, const yaml_node_t *v, void *arg) {
    bs_serve_config *c = arg;
    if (!strcmp(key, "addr")) {
        struct sockaddr_storage ss;
        socklen_t sl;
        int rc = get_str(y, key, v, &c->addr);
        if (rc < 0 || !c->addr) return rc;
        bs_err ae;
        if (bs_parse_addr(c->addr, &ss, &sl, &ae) < 0) return yfail(y, v, "addr: %.400s", ae.msg);
        return BS_OK;
    }
    if (!strcmp(key, "default_model")) return get_str(y, key, v, &c->default_model);
    if (!strcmp(key, "max_inflight")) return get_long(y, key, v, 1, &c->max_inflight);
    if (!strcmp(key, "long_slice_ms")) return get_long(y, key, v, 0, &c->long_slice_ms);
    if (!strcmp(key, "release_date")) return get_str(y, key, v, &c->release_date);
    if (!strcmp(key, "access_log")) return get_bool(y, key, v, &c->access_log);
    if (!strcmp(key, "metrics")) return get_bool(y, key, v, &c->metrics);
    if (!strcmp(key, "access_log_file")) return get_str(y, key, v, &c->access_log_file);
    if (!strcmp(key, "log_format")) return get_enum(y, key, v, check_log_format_fn, "text, json", &c->log_format);
    if (!strcmp(key, "ui")) return get_bool(y, key, v, &c->ui);
    if (!strcmp(key, "decision_log")) return get_str(y, key, v, &c->decision_log);
    if (!strcmp(key, "decision_log_state")) return get_bool(y, key, v, &c->decision_log_state);
    if (!strcmp(key, "gemm_cache")) return get_str(y, key, v, &c->gemm_cache);
    if (!strcmp(key, "api_key_env")) return get_str(y, key, v, &c->api_key_env);
    if (!strcmp(key, "max_body_bytes")) return get_int(y, key, v, 1, LLONG_MAX, &c->max_body_bytes);
    if (!strcmp(key, "backend")) return get_enum(y, key, v, check_backend_fn, "auto, cpu, cuda", &c->backend);
    if (!strcmp(key, "threads")) return get_long(y, key, v, 0, &c->threads);
    if (!strcmp(key, "header_timeout_s")) return get_long(y, key, v, 1, &c->header_timeout_s);
    if (!strcmp(key, "body_timeout_s")) return get_long(y, key, v, 1, &c->body_timeout_s);
    if (!strcmp(key, "keepalive_timeout_s")) return get_long(y, key, v, 1, &c->keepalive_timeout_s);
    if (!strcmp(key, "max_connections")) return get_long(y, key, v, 0, &c->max_connections);
    if (!strcmp(key, "max_client_connections")) return get_long(y, key, v, 1, &c->max_client_connections);
    if (!strcmp(key, "cors_origins")) return get_cors(y, key, v);
    if (!strcmp(key, "models")) return models_value(y, c, v);
    return unknown_key(y, k, key, top_keys, sizeof top_keys / sizeof *top_keys);
}

int bs_serve_config_parse_yaml(bs_serve_config *c, const char *text, size_t len, const char *name, bs_err *e) {
    yaml_parser_t parser;
    yaml_document_t doc;
    int rc = BS_OK, have_doc = 0;
    if (!yaml_parser_initialize(&parser)) return bs_fail(e, BS_ENOMEM, "out of memory");
    yaml_parser_set_input_string(&parser, (const unsigned char *)text, len);
    if (!yaml_parser_load(&parser, &doc)) {
        rc = bs_fail(e, BS_EINVAL, "%s:%zu: %s %s", name, (size_t)parser.problem_mark.line + 1,
                     parser.problem ? parser.problem : "invalid YAML", parser.context ? parser.context : "");
        goto done;
    }
    have_doc = 1;
    yctx y = { &doc, name, e, c };
    yaml_node_t *root = yaml_document_get_root_node(&doc);
    if (!root) {
        rc = bs_fail(e, BS_EINVAL, "%s: empty configuration (models is required)", name);
        goto done;
    }
    /* One document only, as basal-rs (serde_yaml::from_str) requires: a
     * second one ("---" then more keys) would otherwise be ignored unread,
     * with whatever mistakes or intentions it holds. */
    {
        yaml_document_t next;
        if (!yaml_parser_load(&parser, &next)) {
            rc = bs_fail(e, BS_EINVAL, "%s:%zu: %s %s", name, (size_t)parser.problem_mark.line + 1,
                         parser.problem ? parser.problem : "invalid YAML", parser.context ? parser.context : "");
            goto done;
        }
        yaml_node_t *extra = yaml_document_get_root_node(&next);
        size_t line = extra ? (size_t)extra->start_mark.line + 1 : 0;
        yaml_document_delete(&next);
        if (extra) {
            rc = bs_fail(e, BS_EINVAL, "%s:%zu: more than one YAML document (a configuration is one document)", name,
                         line);
            goto done;
        }
    }
    size_t before = c->n_models;
    if ((rc = each_pair(&y, root, "the configuration", top_pair, c)) < 0) goto done;
    if (c->n_models == before) rc = bs_fail(e, BS_EINVAL, "%s: missing field models", name);
done:
    if (have_doc) yaml_document_delete(&doc);
    yaml_parser_delete(&parser);
    return rc;
}

int bs_serve_config_load(bs_serve_config *c, const char *path, bs_err *e) {
    char *text = NULL;
    size_t len = 0;
    int rc = bs_read_file(path, &text, &len, e);
    if (rc < 0) return rc;
    rc = bs_serve_config_parse_yaml(c, text, len, path, e);
    free(text);
    return rc;
}
