/* The checks `basal serve` makes before it loads any weight, shared with
 * `basal doctor` so that the doctor fails exactly when serve would refuse to
 * start (issue 18): loading a real model takes minutes, and a configuration
 * error found after it (an empty API key variable, a busy address, a
 * duplicate name) wastes them. Only cheap things are read here: environment
 * variables, directory entries and each model's basal.json. */
#include "server/config.h"

#include <errno.h>
#include <libgen.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/log.h"
#include "base/util.h"
#include "device/device.h"
#include "model/basal_model.h"

static int set(char **dst, const char *v, bs_err *e) {
    char *d = bs_strfmt("%s", v);
    if (!d) return bs_fail(e, BS_ENOMEM, "out of memory");
    free(*dst);
    *dst = d;
    return BS_OK;
}

static const char *env(const char *name) {
    const char *v = getenv(name);
    return v && *v ? v : NULL;
}

/* on / off for --access-log and BASAL_ACCESS_LOG: -1 when neither. */
static int on_off(const char *v, int env_style) {
    if (!strcmp(v, "off") || !strcmp(v, "false") || !strcmp(v, "0")) return 0;
    if (!strcmp(v, "on") || !strcmp(v, "true") || !strcmp(v, "1")) return 1;
    return env_style ? 1 : -1; /* BASAL_ACCESS_LOG: any other non-empty value turns it on (06 §4.4) */
}

int bs_serve_config_apply_env(bs_serve_config *c, const char *addr, const char *access_log,
                              const char *access_log_file, const char *log_format, bs_err *e) {
    int rc;
    const char *a = addr ? addr : env("BASAL_ADDR") ? env("BASAL_ADDR") : c->addr ? c->addr : "127.0.0.1:8000";
    if (!addr && env("BASAL_ADDR")) { /* the flag and the YAML key are checked where they are read */
        struct sockaddr_storage ss;
        socklen_t sl;
        bs_err ae = { 0 };
        if (bs_parse_addr(a, &ss, &sl, &ae) < 0) return bs_fail(e, BS_EINVAL, "BASAL_ADDR: %s", ae.msg);
    }
    if ((rc = set(&c->addr, a, e)) < 0) return rc;
    if (access_log) {
        int v = on_off(access_log, 0);
        if (v < 0) return bs_fail(e, BS_EINVAL, "--access-log must be on or off, got '%s'", access_log);
        c->access_log = v;
    } else if (env("BASAL_ACCESS_LOG")) {
        c->access_log = on_off(env("BASAL_ACCESS_LOG"), 1);
    }
    const char *file = access_log_file ? access_log_file : env("BASAL_ACCESS_LOG_FILE");
    if (file && (rc = set(&c->access_log_file, file, e)) < 0) return rc;
    const char *fmt = log_format ? log_format : env("BASAL_LOG_FORMAT");
    bs_log_format f;
    if (fmt) {
        if (bs_log_format_parse(fmt, &f) < 0)
            return bs_fail(e, BS_EINVAL, "%s must be text or json, got '%s'", log_format ? "--log-format" : "BASAL_LOG_FORMAT",
                           fmt);
        if ((rc = set(&c->log_format, fmt, e)) < 0) return rc;
    }
    return BS_OK;
}

void bs_serve_checked_free(bs_serve_checked *k) {
    for (size_t i = 0; i < k->n; i++) {
        if (k->dirs) free(k->dirs[i]);
        if (k->names) free(k->names[i]);
        if (k->pending) bs_hub_pending_free(k->pending[i]);
    }
    free(k->dirs);
    free(k->names);
    free(k->pending);
    free(k->api_key);
    memset(k, 0, sizeof *k);
}

/* The served name from a basal.json (the load checks it again, fully):
 * dir's, or the file path of one fetched ahead of its model. */
static int read_name(const char *dir, const char *file, char **name, bs_err *e) {
    char *path = file ? bs_strfmt("%s", file) : bs_path_join(dir, "basal.json"), *text = NULL, *version = NULL;
    size_t len = 0;
    int tobj, rc;
    if (!path) return bs_fail(e, BS_ENOMEM, "out of memory");
    rc = bs_read_regular_file(path, &text, &len, BS_MODEL_FILE_MAX, e);
    free(path);
    if (rc < 0) return rc;
    bs_err je = { 0 };
    rc = bs_basal_json_check(text, len, name, &version, &tobj, &je);
    free(text);
    free(version);
    if (rc < 0) return bs_fail(e, rc, "%s: %s", dir, je.msg);
    return BS_OK;
}

static int name_taken(const bs_serve_config *c, const bs_serve_checked *k, size_t upto, const char *name) {
    for (size_t i = 0; i < upto; i++) {
        if (!k->names[i]) continue; /* not in the cache (doctor): its name is not known */
        if (k->names[i] && !strcmp(k->names[i], name)) return 1;
        for (size_t a = 0; a < c->models[i].n_aliases; a++)
            if (!strcmp(c->models[i].aliases[a], name)) return 1;
    }
    return 0;
}

/* The access log file can be written: it exists and is writable, or its
 * directory is (nothing is created here: doctor runs this too). */
static int check_log_file(const char *path, bs_err *e) {
    if (access(path, F_OK) == 0) {
        if (access(path, W_OK) != 0) return bs_fail(e, BS_EIO, "access log %s is not writable: %s", path, strerror(errno));
        return BS_OK;
    }
    char *copy = bs_strfmt("%s", path);
    if (!copy) return bs_fail(e, BS_ENOMEM, "out of memory");
    const char *dir = dirname(copy);
    int rc = BS_OK;
    if (access(dir, W_OK) != 0)
        rc = bs_fail(e, BS_EIO, "cannot create the access log %s: directory %s: %s", path, dir, strerror(errno));
    free(copy);
    return rc;
}

int bs_serve_config_check(const bs_serve_config *c, bs_hub_mode mode, bs_serve_checked *k, bs_err *e) {
    memset(k, 0, sizeof *k);
    int rc;
    struct sockaddr_storage ss;
    socklen_t sl;
    if (!c->addr) return bs_fail(e, BS_EINVAL, "no listen address");
    if ((rc = bs_parse_addr(c->addr, &ss, &sl, e)) < 0) return rc;
    bs_log_format f;
    if (!c->log_format || bs_log_format_parse(c->log_format, &f) < 0)
        return bs_fail(e, BS_EINVAL, "log_format must be text or json");
    if (c->access_log && c->access_log_file && (rc = check_log_file(c->access_log_file, e)) < 0) return rc;
    if (c->api_key_env) {
        const char *key = getenv(c->api_key_env);
        if (!key || !*key) return bs_fail(e, BS_EINVAL, "api key variable %s is empty", c->api_key_env);
        if (!(k->api_key = bs_strfmt("%s", key))) return bs_fail(e, BS_ENOMEM, "out of memory");
    }
    rc = BS_OK;
    const char *backend = c->backend ? c->backend : "auto";
    if (bs_cfg_check_backend(backend) < 0) return bs_fail(e, BS_EINVAL, "backend must be auto, cpu or cuda");
    if (!strcmp(backend, "cuda")) {
        if (!bs_device_has_cuda())
            rc = bs_fail(e, BS_EUNSUP, "backend cuda: this build has no CUDA backend (built without nvcc or with CUDA=0)");
        else if (bs_device_cuda_count() <= 0)
            rc = bs_fail(e, BS_EUNSUP, "backend cuda: no usable CUDA GPU (compute capability 8.0 or newer)");
        if (rc < 0) goto fail;
        k->cuda = 1;
    } else if (!strcmp(backend, "auto")) {
        k->cuda = bs_device_has_cuda() && bs_device_cuda_count() > 0;
    }
    if (!c->n_models) {
        rc = bs_fail(e, BS_EINVAL, "no models");
        goto fail;
    }
    if (!(k->dirs = calloc(c->n_models, sizeof *k->dirs)) || !(k->names = calloc(c->n_models, sizeof *k->names)) ||
        !(k->pending = calloc(c->n_models, sizeof *k->pending))) {
        rc = bs_fail(e, BS_ENOMEM, "out of memory");
        goto fail;
    }
    k->n = c->n_models;
    for (size_t i = 0; i < c->n_models; i++) {
        const bs_serve_model *m = &c->models[i];
        const char *ref = m->path ? m->path : m->repo;
        if (!ref) {
            rc = bs_fail(e, BS_EINVAL, "a model needs exactly one of path and repo");
            goto fail;
        }
        const char *rev = m->repo ? bs_hub_yaml_revision(m->repo, m->revision) : NULL;
        bs_err re = { 0 };
        rc = bs_hub_resolve_begin(ref, rev, mode, NULL, &k->dirs[i], &k->pending[i], &re);
        if (rc < 0 && mode == BS_HUB_CACHED && bs_hub_would_download(ref, rev)) {
            k->n_uncached++; /* serve would download it */
            rc = BS_OK;
            continue;
        }
        if (rc < 0) {
            rc = bs_fail(e, rc, "%s", re.msg);
            goto fail;
        }
        if (!k->cuda && m->dtype && !strcmp(m->dtype, "f16")) {
            rc = bs_fail(e, BS_EUNSUP, "%s: dtype f16 needs the CUDA backend; use bf16 or f32", ref);
            goto fail;
        }
        if (k->cuda && m->gemm_table && strcmp(m->gemm_table, "auto") && strcmp(m->gemm_table, "none") &&
            !bs_file_exists(m->gemm_table)) {
            rc = bs_fail(e, BS_EIO, "%s: gemm_table %s: no such file", ref, m->gemm_table);
            goto fail;
        }
        if (m->calibration && !m->no_calibration && !bs_file_exists(m->calibration)) {
            rc = bs_fail(e, BS_EIO, "%s: calibration file %s does not exist (give a CALIBRATION.json, or no_calibration)",
                         ref, m->calibration);
            goto fail;
        }
        const char *name_file = k->pending[i] ? bs_hub_pending_name_file(k->pending[i]) : NULL;
        if ((rc = read_name(k->dirs[i] ? k->dirs[i] : ref, name_file, &k->names[i], e)) < 0) goto fail;
        if (m->name) { /* the served name replaces basal.json's (basal.json is still checked) */
            free(k->names[i]);
            if (!(k->names[i] = strdup(m->name))) {
                rc = bs_fail(e, BS_ENOMEM, "out of memory");
                goto fail;
            }
        }
        if (name_taken(c, k, i, k->names[i])) {
            rc = bs_fail(e, BS_EINVAL, "model %s configured twice", k->names[i]);
            goto fail;
        }
        for (size_t a = 0; a < m->n_aliases; a++) {
            int dup = name_taken(c, k, i, m->aliases[a]) || !strcmp(m->aliases[a], k->names[i]);
            for (size_t b = 0; b < a; b++) dup |= !strcmp(m->aliases[a], m->aliases[b]);
            if (dup) {
                rc = bs_fail(e, BS_EINVAL, "model %s configured twice", m->aliases[a]);
                goto fail;
            }
        }
    }
    k->default_model = 0;
    if (c->default_model) {
        size_t def = k->n;
        for (size_t i = 0; i < k->n && def == k->n; i++) {
            if (k->names[i] && !strcmp(k->names[i], c->default_model)) def = i;
            for (size_t a = 0; a < c->models[i].n_aliases; a++)
                if (!strcmp(c->models[i].aliases[a], c->default_model)) def = i;
        }
        if (def == k->n && k->n_uncached) def = 0; /* doctor: a model not downloaded yet may be the one */
        if (def == k->n) {
            bs_buf b;
            bs_buf_init(&b);
            for (size_t i = 0; i < k->n; i++) bs_buf_printf(&b, "%s\"%s\"", i ? ", " : "", k->names[i]);
            rc = bs_fail(e, BS_EINVAL, "default model %s is not served ([%s])", c->default_model,
                         b.data && !b.oom ? b.data : "");
            bs_buf_free(&b);
            goto fail;
        }
        k->default_model = def;
    }
    return BS_OK;
fail:
    bs_serve_checked_free(k);
    return rc;
}
