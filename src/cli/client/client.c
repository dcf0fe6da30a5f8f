/* `basal client` (spec 06 §5.3; the behaviour of basal-rs's client, learned
 * from its docs/CLIENT.md): input records in, one answer per record out, in
 * input order, over HTTP with libcurl.
 *
 * One thread drives everything through a curl multi handle: at most --jobs
 * records are between "read" and "written" at a time (in flight, waiting for
 * a retry, or answered but waiting for an earlier record), so memory stays
 * bounded whatever the input length and output keeps input order. Input is
 * read without blocking (client_input.c) and polled together with the
 * transfers, so a slow producer never delays answers already in flight.
 *
 * With --local the same loop runs without HTTP: --jobs is 1 and each waiting
 * record is decided in-process on the model loaded at start (a basal_session),
 * the way `basal decide` does, before the next record is read. */
#include <curl/curl.h>
#include <errno.h>
#include <math.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "basal.h" /* --local: the public API only */
#include "cli/cli.h"
#include "cli/client/client.h"
#include "cli/client/http.h"
#include "protocol/request.h"
#include "protocol/respjson.h"

#define CL_MAX_RESPONSE (16u << 20)

typedef struct {
    const char *ask, *template_path, *request, *state, *state_pointer, *url, *model, *key_env;
    const char **choice, **level, **label;
    int n_choice, n_level, n_label;
    double threshold;
    int threshold_set, format, value, keep_going, jobs, timeout, retries, progress;
    int local, threads, local_only_set; /* --local; --threads; a flag of --local given */
    cli_device dev;
    size_t max_input_bytes;
} cl_opts;

enum { SLOT_FREE, SLOT_WAITING, SLOT_RUNNING, SLOT_DONE };

typedef struct {
    int state;
    uint64_t index;
    char *input_json; /* the record as echoed in the envelope; NULL = null */
    bs_buf body, resp;
    CURL *h;
    int attempt, too_big;
    double not_before;
    char retry_after[64];
    int has_retry_after;
    /* result */
    int ok;
    char *response;      /* compact JSON of the 2xx body */
    const char *kind;    /* error kind: http, transport, protocol, input, configuration */
    char *message;
    long status;         /* 0 = none */
    char *detail;        /* compact JSON of an error body, NULL = none */
    char errbuf[CURL_ERROR_SIZE];
} cl_slot;

typedef struct {
    cl_opts *o;
    cl_http http;
    bj_value *template; /* questions of --ask / --template, or NULL with --request */
    char *model;        /* --model or BASAL_MODEL, normalised; NULL = from the request or discovered */
    char *discovered;
    CURLM *multi;
    cl_slot *slots;
    unsigned long long retries_done;
    basal_session *local; /* --local: the in-process model, else NULL */
} cl_ctx;

static volatile sig_atomic_t g_interrupted;
static int g_sigpipe[2] = {-1, -1};

static void on_sigint(int sig) {
    (void)sig;
    g_interrupted = 1;
    if (g_sigpipe[1] >= 0) {
        char c = 1;
        ssize_t r = write(g_sigpipe[1], &c, 1);
        (void)r;
    }
}

static int usage_error(const char *msg) {
    cli_error("client", "%s", msg);
    return 2;
}

/* ---- request construction ---- */

/* {"KEY":"DESC"|null,...} from KEY[=DESC] options; -1 on an empty or repeated key. */
static int put_criteria(bs_buf *b, const char **opts, int n, const char *flag) {
    bs_buf_putc(b, '{');
    for (int i = 0; i < n; i++) {
        const char *eq = strchr(opts[i], '=');
        size_t klen = eq ? (size_t)(eq - opts[i]) : strlen(opts[i]);
        if (klen == 0) return cli_error("client", "empty key in %s '%s'", flag, opts[i]), -1;
        for (int j = 0; j < i; j++) {
            const char *eq2 = strchr(opts[j], '=');
            size_t k2 = eq2 ? (size_t)(eq2 - opts[j]) : strlen(opts[j]);
            if (k2 == klen && !memcmp(opts[i], opts[j], klen))
                return cli_error("client", "duplicate %s key '%.*s'", flag, (int)klen, opts[i]), -1;
        }
        if (i) bs_buf_putc(b, ',');
        bj_put_string(b, opts[i], klen);
        bs_buf_putc(b, ':');
        if (eq) bj_put_string(b, eq + 1, strlen(eq + 1));
        else bs_buf_puts(b, "null");
    }
    bs_buf_putc(b, '}');
    return 0;
}

static int key_is(const bj_value *obj, size_t i, const char *k) {
    return obj->key_lens[i] == strlen(k) && !memcmp(obj->keys[i], k, obj->key_lens[i]);
}

/* base (an object) with "state" and "model" replaced or added (NULL = keep). */
static void put_request(bs_buf *b, const bj_value *base, const bj_value *state, const char *model) {
    int have_state = 0, have_model = 0;
    bs_buf_putc(b, '{');
    for (size_t i = 0; i < base->n; i++) {
        if (i) bs_buf_putc(b, ',');
        bj_put_string(b, base->keys[i], base->key_lens[i]);
        bs_buf_putc(b, ':');
        if (state && key_is(base, i, "state")) {
            bs_resp_value(b, state);
            have_state = 1;
        } else if (model && key_is(base, i, "model")) {
            bj_put_string(b, model, strlen(model));
            have_model = 1;
        } else {
            bs_resp_value(b, base->items[i]);
        }
    }
    int first = base->n == 0;
    if (state && !have_state) {
        bs_buf_puts(b, first ? "\"state\":" : ",\"state\":");
        bs_resp_value(b, state);
        first = 0;
    }
    if (model && !have_model) {
        bs_buf_puts(b, first ? "\"model\":" : ",\"model\":");
        bj_put_string(b, model, strlen(model));
    }
    bs_buf_putc(b, '}');
}

/* ---- requests the endpoint refuses ---- */

/* The message and kind basal-rs's client gives a request its engine refuses
 * (client.rs Failure::decision: the DecideError's Display, its kind by
 * variant), from the error reply our endpoint sends for it: 422 {"detail":
 * [...]} is "validation error: <the list as compact JSON>" (kind request),
 * {"error":"unsupported","detail":[...]} "unsupported: <list>", a 5xx
 * "internal error: <detail>" (kind internal), and a 400 usage error (02 §4.3)
 * "usage error: <its message>" (kind request). malloc'd; NULL: no memory. */
static char *refusal_message(int status, const char *body, size_t len, const char **kind) {
    bj_value *v = NULL;
    bs_err e = {0};
    bs_buf m;
    bs_buf_init(&m);
    if (bj_parse(body, len, NULL, &v, &e) != 0) v = NULL;
    const bj_value *err = v ? bj_get(v, "error") : NULL, *det = v ? bj_get(v, "detail") : NULL;
    const bj_value *text = det && det->type == BJ_OBJECT ? bj_get(det, "message") : det;
    *kind = "request";
    if (status >= 500) {
        *kind = "internal";
        bs_buf_puts(&m, "internal error: ");
    } else if (err && err->type == BJ_STRING && !strcmp(err->str, "unsupported")) {
        *kind = "unsupported";
        bs_buf_puts(&m, "unsupported: ");
    } else if (det && det->type == BJ_ARRAY) {
        bs_buf_puts(&m, "validation error: ");
    } else {
        bs_buf_puts(&m, "usage error: ");
    }
    if (text && text->type == BJ_STRING) bs_buf_put(&m, text->str, text->len);
    else if (det) bs_resp_value(&m, det);
    else bs_buf_printf(&m, "status %d", status);
    bj_free(v);
    if (m.oom) {
        bs_buf_free(&m);
        return NULL;
    }
    return m.data;
}

/* Step 8 of 02 §3 (the validation that needs no model) on a request body, as
 * basal-rs's client runs parse_request before it sends a record or loads a
 * model: 0 valid; 1 refused (its error reply in *status and *body, malloc'd); -1 no
 * memory. */
static int validate_request(const char *data, size_t len, int *status, char **body) {
    bs_reply rep;
    bs_reply_init(&rep);
    bs_request *req = NULL;
    bs_err e = {0};
    int rc = bs_request_parse(data, len, BS_DIALECT_SYSTEMONE, NULL, &req, &rep, &e);
    int ret = 0;
    if (rc == BS_OK) {
        bs_request_free(req);
    } else if (rc == BS_EINVAL && rep.body.len && !rep.body.oom) {
        *status = rep.status;
        *body = rep.body.data;
        bs_buf_init(&rep.body);
        ret = 1;
    } else if (rc == BS_ENOMEM || rep.body.oom) {
        ret = -1;
    } /* anything else: the server decides */
    bs_reply_free(&rep);
    return ret;
}

/* The template (a request object without state) of --ask or --template; exit status on failure. */
static int build_template(cl_ctx *c) {
    cl_opts *o = c->o;
    bs_buf b;
    bs_buf_init(&b);
    int rc = 2;
    if (o->ask) {
        bs_buf_puts(&b, "{\"questions\":{\"result\":{\"type\":");
        if (o->n_choice) {
            bs_buf_puts(&b, "\"choice\",\"instructions\":");
            bj_put_string(&b, o->ask, strlen(o->ask));
            bs_buf_puts(&b, ",\"criteria\":");
            if (put_criteria(&b, o->choice, o->n_choice, "--choice")) goto done;
        } else if (o->n_level) {
            bs_buf_puts(&b, "\"score\",\"instructions\":");
            bj_put_string(&b, o->ask, strlen(o->ask));
            bs_buf_puts(&b, ",\"criteria\":[");
            for (int i = 0; i < o->n_level; i++) {
                if (i) bs_buf_putc(&b, ',');
                bj_put_string(&b, o->level[i], strlen(o->level[i]));
            }
            bs_buf_putc(&b, ']');
        } else if (o->n_label) {
            bs_buf_puts(&b, "\"multi\",\"instructions\":");
            bj_put_string(&b, o->ask, strlen(o->ask));
            bs_buf_puts(&b, ",\"criteria\":");
            if (put_criteria(&b, o->label, o->n_label, "--label")) goto done;
            bs_buf_puts(&b, ",\"threshold\":");
            bj_fmt_pyfloat(o->threshold, &b);
        } else {
            bs_buf_puts(&b, "\"noul\",\"instructions\":");
            bj_put_string(&b, o->ask, strlen(o->ask));
        }
        bs_buf_puts(&b, "}}}");
    } else {
        char *text;
        size_t len;
        bs_err e = {0};
        if (bs_read_file(o->template_path, &text, &len, &e) != 0) {
            cli_error("client", "template: %s", e.msg);
            goto done;
        }
        if (len > o->max_input_bytes) {
            free(text);
            cli_error("client", "template exceeds --max-input-bytes");
            goto done;
        }
        bs_buf_put(&b, text, len);
        free(text);
    }
    if (b.oom) {
        cli_error("client", "out of memory");
        goto done;
    }
    bj_error je;
    bs_err e = {0};
    if (bj_parse_ex(b.data, b.len, NULL, &c->template, &je, &e) != 0) {
        c->template = NULL;
        cli_error("client", "template: invalid JSON: %s", je.msg ? je.msg : e.msg);
        goto done;
    }
    if (c->template->type != BJ_OBJECT) {
        cli_error("client", "template must be a request object containing questions");
        goto done;
    }
    /* its questions are checked once, on an empty state (basal-rs: "invalid
     * questions in template"), rather than failing every record */
    static const bj_value empty_state = {.type = BJ_STRING, .str = (char *)"", .len = 0};
    bs_buf probe;
    bs_buf_init(&probe);
    put_request(&probe, c->template, &empty_state, "client-validation");
    int status = 0;
    char *body = NULL;
    int vr = probe.oom ? -1 : validate_request(probe.data, probe.len, &status, &body);
    bs_buf_free(&probe);
    if (vr != 0) {
        const char *kind;
        char *msg = vr > 0 ? refusal_message(status, body, strlen(body), &kind) : NULL;
        cli_error("client", "%s%s", msg ? "invalid questions in template: " : "", msg ? msg : "out of memory");
        free(msg);
        free(body);
        goto done;
    }
    const bj_value *q = bj_get(c->template, "questions");
    if (o->value && (!q || q->n != 1)) {
        cli_error("client", "--value requires exactly one question");
        goto done;
    }
    rc = 0;
done:
    bs_buf_free(&b);
    return rc;
}

/* ---- HTTP ---- */

static size_t on_body(char *p, size_t size, size_t n, void *ud) {
    cl_slot *s = ud;
    size_t len = size * n;
    if (s->resp.len + len > CL_MAX_RESPONSE) {
        s->too_big = 1;
        return 0;
    }
    bs_buf_put(&s->resp, p, len);
    return s->resp.oom ? 0 : len;
}

static size_t on_header(char *p, size_t size, size_t n, void *ud) {
    cl_slot *s = ud;
    size_t len = size * n;
    if (cl_http_retry_after(p, len, s->retry_after, sizeof s->retry_after)) s->has_retry_after = 1;
    return len;
}

static void easy_common(cl_ctx *c, CURL *h, cl_slot *s) {
    cl_http_easy(&c->http, h);
    curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, on_body);
    curl_easy_setopt(h, CURLOPT_WRITEDATA, s);
    curl_easy_setopt(h, CURLOPT_HEADERFUNCTION, on_header);
    curl_easy_setopt(h, CURLOPT_HEADERDATA, s);
    curl_easy_setopt(h, CURLOPT_ERRORBUFFER, s->errbuf);
    curl_easy_setopt(h, CURLOPT_PRIVATE, s);
}

static void set_error(cl_slot *s, const char *kind, char *message) {
    s->ok = 0;
    s->kind = kind;
    free(s->message);
    s->message = message ? message : bs_strfmt("out of memory");
}

/* Classifies a finished attempt into s's result; returns 1 when it is transient. */
static int classify(cl_slot *s, CURLcode rc, int need_answers) {
    free(s->detail);
    s->detail = NULL;
    free(s->response);
    s->response = NULL;
    s->status = 0;
    if (rc != CURLE_OK) {
        if (s->too_big) {
            set_error(s, "protocol", bs_strfmt("server response exceeds 16 MiB"));
            return 0;
        }
        set_error(s, "transport", bs_strfmt("%s", s->errbuf[0] ? s->errbuf : curl_easy_strerror(rc)));
        return 1;
    }
    long status = 0;
    curl_easy_getinfo(s->h, CURLINFO_RESPONSE_CODE, &status);
    bj_value *v = NULL;
    bj_error je;
    bs_err e = {0};
    int parsed = bj_parse_ex(s->resp.data ? s->resp.data : "", s->resp.len, NULL, &v, &je, &e) == 0;
    if (status >= 200 && status < 300) {
        if (!parsed) {
            set_error(s, "protocol", bs_strfmt("server returned invalid JSON: %s", je.msg ? je.msg : e.msg));
            return 0;
        }
        const bj_value *a = bj_get(v, "answers");
        if (need_answers && (!a || a->type != BJ_OBJECT)) {
            bj_free(v);
            set_error(s, "protocol", bs_strfmt("server response has no answers object"));
            return 0;
        }
        bs_buf b;
        bs_buf_init(&b);
        bs_resp_value(&b, v);
        bj_free(v);
        s->ok = 1;
        s->response = b.oom ? NULL : b.data;
        if (!s->response) {
            bs_buf_free(&b);
            set_error(s, "internal", bs_strfmt("out of memory"));
        }
        return 0;
    }
    set_error(s, "http", bs_strfmt("HTTP %ld", status));
    s->status = status;
    if (parsed) {
        bs_buf b;
        bs_buf_init(&b);
        bs_resp_value(&b, v);
        bj_free(v);
        if (b.oom) bs_buf_free(&b);
        else s->detail = b.data;
    }
    return cl_http_transient(status);
}

/* GET /v1/models once: the server's only model becomes the default. 0 or the slot's error. */
static int discover_model(cl_ctx *c, cl_slot *s) {
    if (c->discovered) return 0;
    CURL *h = curl_easy_init();
    if (!h) return set_error(s, "internal", bs_strfmt("curl_easy_init failed")), -1;
    s->h = h;
    easy_common(c, h, s);
    curl_easy_setopt(h, CURLOPT_URL, c->http.url_models);
    CURLcode rc = curl_easy_perform(h);
    classify(s, rc, 0);
    int ret = -1;
    if (s->ok) {
        bj_value *v = NULL;
        bs_err e = {0};
        bj_parse(s->response, strlen(s->response), NULL, &v, &e);
        const bj_value *models = v ? bj_get(v, "models") : NULL;
        const bj_value *name = models && models->type == BJ_ARRAY && models->n == 1 ? bj_get(models->items[0], "name") : NULL;
        if (!models || models->type != BJ_ARRAY) {
            set_error(s, "protocol", bs_strfmt("server response has no models array"));
        } else if (models->n != 1) {
            set_error(s, "configuration",
                      bs_strfmt("server must expose exactly one model for automatic selection; set --model or BASAL_MODEL"));
        } else if (!name || name->type != BJ_STRING || name->len == 0) {
            set_error(s, "protocol", bs_strfmt("server model has no name"));
        } else {
            c->discovered = strndup(name->str, name->len);
            ret = c->discovered ? 0 : -1;
        }
        bj_free(v);
        free(s->response);
        s->response = NULL;
    }
    curl_easy_cleanup(h);
    s->h = NULL;
    s->resp.len = 0;
    s->errbuf[0] = 0;
    return ret;
}

/* ---- records ---- */

static void slot_clear(cl_slot *s) {
    if (s->h) curl_easy_cleanup(s->h);
    free(s->input_json);
    bs_buf_free(&s->body);
    bs_buf_free(&s->resp);
    free(s->response);
    free(s->message);
    free(s->detail);
    memset(s, 0, sizeof *s);
}

/* Turns a decoded input record into a waiting request, or a finished error. */
static void slot_fill(cl_ctx *c, cl_slot *s, uint64_t index, cl_record *rec, int echo) {
    memset(s, 0, sizeof *s);
    bs_buf_init(&s->body);
    bs_buf_init(&s->resp);
    s->index = index;
    s->state = SLOT_DONE;
    if (!rec->value) {
        set_error(s, "input", rec->err_msg);
        rec->err_msg = NULL;
        return;
    }
    bj_value *in = rec->value;
    if (echo) {
        bs_buf b;
        bs_buf_init(&b);
        bs_resp_value(&b, in);
        s->input_json = b.oom ? (bs_buf_free(&b), NULL) : b.data;
    }
    const bj_value *base = c->template ? c->template : in;
    const bj_value *state = NULL;
    if (c->template) {
        state = c->o->state_pointer ? cl_pointer_get(in, c->o->state_pointer) : in;
        if (!state) {
            bs_buf m;
            bs_buf_init(&m);
            bs_buf_puts(&m, "missing state at ");
            bj_put_string(&m, c->o->state_pointer, strlen(c->o->state_pointer));
            set_error(s, "input", m.oom ? NULL : m.data);
            goto done;
        }
    } else if (in->type != BJ_OBJECT) {
        set_error(s, "input", bs_strfmt("request must be a JSON object"));
        goto done;
    }
    if (c->o->value) {
        const bj_value *q = bj_get(base, "questions");
        if (!q || q->type != BJ_OBJECT || q->n != 1) {
            set_error(s, "input", bs_strfmt("--value requires exactly one question"));
            goto done;
        }
    }
    const char *model = c->model;
    int discover = 0;
    if (!model) {
        const bj_value *m = bj_get(base, "model");
        if (m && m->type == BJ_STRING) {
            char *own = strndup(m->str, m->len);
            if (own) {
                const char *norm = cl_model_name(own);
                if (norm != own) model = norm;  /* a static served name */
            }
            free(own);
        } else if (!m) {
            discover = 1;
        }
    }
    /* validated before it is sent (and before a model is discovered for it),
     * as basal-rs's client does: a malformed record fails here with kind
     * request, the error body our endpoint would send as detail, no status */
    put_request(&s->body, base, state, discover ? "client-discovery" : model);
    int status = 0;
    char *refused = NULL;
    int vr = s->body.oom ? -1 : validate_request(s->body.data, s->body.len, &status, &refused);
    if (vr < 0) {
        set_error(s, "internal", bs_strfmt("out of memory"));
        goto done;
    }
    if (vr > 0) {
        const char *kind = "request";
        set_error(s, kind, refusal_message(status, refused, strlen(refused), &kind));
        s->kind = kind;
        s->detail = refused;
        goto done;
    }
    if (discover) {
        if (discover_model(c, s) != 0) goto done;
        s->body.len = 0;
        put_request(&s->body, base, state, c->discovered);
    }
    if (s->body.oom) {
        set_error(s, "internal", bs_strfmt("out of memory"));
        goto done;
    }
    s->state = SLOT_WAITING;
done:
    bj_free(rec->value);
    rec->value = NULL;
}

static int start_transfer(cl_ctx *c, cl_slot *s) {
    if (!s->h) {
        s->h = curl_easy_init();
        if (!s->h) return -1;
        easy_common(c, s->h, s);
        curl_easy_setopt(s->h, CURLOPT_URL, c->http.url_decide);
        curl_easy_setopt(s->h, CURLOPT_POSTFIELDS, s->body.data);
        curl_easy_setopt(s->h, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)s->body.len);
    }
    s->resp.len = 0;
    s->too_big = 0;
    s->has_retry_after = 0;
    s->errbuf[0] = 0;
    if (curl_multi_add_handle(c->multi, s->h) != CURLM_OK) return -1;
    s->state = SLOT_RUNNING;
    return 0;
}

/* A finished transfer: done, or waiting for its retry. */
static void finish_transfer(cl_ctx *c, cl_slot *s, CURLcode rc) {
    curl_multi_remove_handle(c->multi, s->h);
    int transient = classify(s, rc, 1);
    s->state = SLOT_DONE;
    if (!transient || s->attempt >= c->o->retries) return;
    /* a Retry-After of more than 30 s (or not whole seconds) is not shortened: the record fails */
    double delay = cl_http_retry_delay(s->attempt, s->has_retry_after ? s->retry_after : NULL);
    if (delay < 0) return;
    s->attempt++;
    c->retries_done++;
    s->state = SLOT_WAITING;
    s->not_before = bs_now_ms() + delay * 1000.0;
}

/* ---- in-process decisions (--local) ---- */

/* Decides a waiting record on the local model; the slot is then done. A
 * request the endpoint would refuse fails with kind "request" (validation,
 * unknown model, act refusal), "unsupported" or "internal" (its status 500)
 * and the endpoint's error body as detail; a runtime failure with kind
 * "internal" and the 500 body the server would send. */
static void local_decide(cl_ctx *c, cl_slot *s) {
    basal_result r = {0};
    bs_reply rep;
    bs_reply_init(&rep);
    bs_err e = {0};
    int rc = basal_decide(c->local, s->body.data, s->body.len, &r, &e);
    s->state = SLOT_DONE;
    if (rc == 0 && r.status == 200) {
        s->ok = 1;
        s->response = r.json;
        r.json = NULL;
        goto done;
    }
    if (rc == 0) {
        rep.status = r.status;
        bs_buf_put(&rep.body, r.json, r.len);
        const char *kind = "request";
        set_error(s, kind, refusal_message(rep.status, rep.body.data ? rep.body.data : "", rep.body.len, &kind));
        s->kind = kind;
    } else {
        set_error(s, "internal", bs_strfmt("internal error: %s", e.msg));
        bs_reply_internal(&rep, BS_DIALECT_SYSTEMONE, e.msg);
    }
    if (rep.body.len && !rep.body.oom) {
        s->detail = rep.body.data;
        bs_buf_init(&rep.body);
    }
done:
    basal_result_free(&r);
    bs_reply_free(&rep);
}

/* ---- output ---- */

/* --value: the single answer's value; NULL with *why on failure. */
static int put_value(bs_buf *b, const char *response, const char **why) {
    bj_value *v = NULL;
    bs_err e = {0};
    int rc = -1;
    if (bj_parse(response, strlen(response), NULL, &v, &e) != 0) {
        *why = "invalid response";
        return -1;
    }
    const bj_value *a = bj_get(v, "answers");
    if (!a || a->type != BJ_OBJECT || a->n != 1) {
        *why = "--value requires exactly one answer";
        goto done;
    }
    const bj_value *ans = a->items[0], *type = bj_get(ans, "type");
    const char *field = NULL;
    if (type && type->type == BJ_STRING) {
        if (!strcmp(type->str, "noul")) field = "noul";
        else if (!strcmp(type->str, "choice")) field = "choice";
        else if (!strcmp(type->str, "score")) field = "score";
        else if (!strcmp(type->str, "multi")) field = "selected";
        else if (!strcmp(type->str, "act")) field = "action";
    }
    if (!field) {
        *why = "unknown answer type";
        goto done;
    }
    const bj_value *f = bj_get(ans, field);
    if (!f) {
        *why = "missing answer field";
        goto done;
    }
    if (f->type == BJ_STRING) bs_buf_put(b, f->str, f->len);
    else bs_resp_value(b, f);
    rc = 0;
done:
    bj_free(v);
    return rc;
}

static void put_error_object(bs_buf *b, const cl_slot *s) {
    bs_buf_puts(b, "{\"kind\":");
    bj_put_string(b, s->kind, strlen(s->kind));
    bs_buf_puts(b, ",\"message\":");
    bj_put_string(b, s->message, strlen(s->message));
    if (s->status) bs_buf_printf(b, ",\"status\":%ld", s->status);
    if (s->detail) {
        bs_buf_puts(b, ",\"detail\":");
        bs_buf_puts(b, s->detail);
    }
    bs_buf_putc(b, '}');
}

/* Writes one record; 1 if it counts as failed, 0 if not, -1 on an output error. */
static int write_record(cl_ctx *c, const cl_slot *s, int stream) {
    bs_buf b;
    bs_buf_init(&b);
    int failed = !s->ok;
    if (c->o->value) {
        if (s->ok) {
            const char *why = NULL;
            if (put_value(&b, s->response, &why) != 0) {
                cli_error("client", "record %llu: %s", (unsigned long long)s->index, why);
                bs_buf_free(&b);
                return 1;
            }
        } else {
            put_error_object(&b, s);
            cli_error("client", "%s", b.data);
            bs_buf_free(&b);
            return 1;
        }
    } else if (!stream) {
        if (!s->ok) {
            put_error_object(&b, s);
            cli_error("client", "%s", b.data);
            bs_buf_free(&b);
            return 1;
        }
        bs_buf_puts(&b, s->response);
    } else {
        bs_buf_printf(&b, "{\"index\":%llu,\"ok\":%s,\"input\":", (unsigned long long)s->index, s->ok ? "true" : "false");
        bs_buf_puts(&b, s->input_json ? s->input_json : "null");
        if (s->ok) {
            bs_buf_puts(&b, ",\"response\":");
            bs_buf_puts(&b, s->response);
        } else {
            bs_buf_puts(&b, ",\"error\":");
            put_error_object(&b, s);
        }
        bs_buf_putc(&b, '}');
    }
    bs_buf_putc(&b, '\n');
    int rc = failed;
    if (b.oom || fwrite(b.data, 1, b.len, stdout) != b.len) rc = -1;
    bs_buf_free(&b);
    return rc;
}

static void progress_line(unsigned long long done, long long total, double t0, int final) {
    double el = (bs_now_ms() - t0) / 1000.0;
    double rate = el > 0 ? done / el : 0;
    char eta[32] = "";
    if (total > 0 && rate > 0 && (long long)done < total)
        snprintf(eta, sizeof eta, "  ETA %.0f s", (total - (long long)done) / rate);
    if (total >= 0)
        fprintf(stderr, "\r\033[Kbasal client: %llu/%lld done  %.1f rec/s%s", done, total, rate, eta);
    else
        fprintf(stderr, "\r\033[Kbasal client: %llu done  %.1f rec/s", done, rate);
    if (final) fputc('\n', stderr);
    fflush(stderr);
}

/* ---- main loop ---- */

static int run(cl_ctx *c, cl_input *in, int stream, long long total) {
    cl_opts *o = c->o;
    uint64_t next_index = 0, next_out = 0;
    int input_done = 0, failed = 0, rc = 0;
    double t0 = bs_now_ms(), last_progress = 0;
    bs_err e = {0};
    for (;;) {
        if (g_interrupted) {
            rc = 130;
            break;
        }
        int wrote = 0;
        while (next_out < next_index && c->slots[next_out % o->jobs].state == SLOT_DONE) {
            cl_slot *s = &c->slots[next_out % o->jobs];
            int w = write_record(c, s, stream);
            slot_clear(s);
            next_out++;
            wrote = 1;
            if (w < 0) {
                rc = errno == EPIPE ? 0 : 2;
                if (rc) cli_error("client", "writing output: %s", strerror(errno));
                goto done;
            }
            failed |= w;
            if (w && !o->keep_going) {
                rc = 1;
                goto done;
            }
        }
        if (wrote && fflush(stdout) != 0) {
            rc = errno == EPIPE ? 0 : 2;
            if (rc) cli_error("client", "writing output: %s", strerror(errno));
            goto done;
        }
        if (o->progress && (bs_now_ms() - last_progress > 200 || (input_done && next_out == next_index))) {
            progress_line(next_out, total, t0, 0);
            last_progress = bs_now_ms();
        }
        if (input_done && next_out == next_index) {
            rc = failed;
            break;
        }
        int want_input = 0;
        while (!input_done && next_index - next_out < (uint64_t)o->jobs) {
            cl_record rec;
            int r = cl_input_next(in, &rec, &e);
            if (r == 1) {
                slot_fill(c, &c->slots[next_index % o->jobs], next_index, &rec, stream);
                free(rec.err_msg);
                next_index++;
            } else if (r == 0) {
                want_input = 1;
                break;
            } else if (r == -1) {
                input_done = 1;
            } else {
                cli_error("client", "%s", e.msg);
                rc = 2;
                goto done;
            }
        }
        double now = bs_now_ms(), next_due = INFINITY;
        int local_done = 0;
        for (int i = 0; i < o->jobs; i++) {
            cl_slot *s = &c->slots[i];
            if (s->state != SLOT_WAITING) continue;
            if (c->local) {
                local_decide(c, s);
                local_done = 1;
            } else if (s->not_before <= now) {
                if (start_transfer(c, s) != 0) {
                    set_error(s, "internal", bs_strfmt("could not start a transfer"));
                    s->state = SLOT_DONE;
                }
            } else if (s->not_before < next_due) {
                next_due = s->not_before;
            }
        }
        int running = 0, finished = 0;
        curl_multi_perform(c->multi, &running);
        CURLMsg *m;
        int left;
        while ((m = curl_multi_info_read(c->multi, &left))) {
            if (m->msg != CURLMSG_DONE) continue;
            cl_slot *s = NULL;
            curl_easy_getinfo(m->easy_handle, CURLINFO_PRIVATE, (char **)&s);
            finish_transfer(c, s, m->data.result);
            finished = 1;
        }
        if (finished || local_done) continue;
        int timeout = 200;
        if (next_due < INFINITY) {
            double d = next_due - bs_now_ms();
            if (d < timeout) timeout = d < 0 ? 0 : (int)d + 1;
        }
        struct curl_waitfd extra[2];
        unsigned n_extra = 0;
        extra[n_extra++] = (struct curl_waitfd){.fd = g_sigpipe[0], .events = CURL_WAIT_POLLIN};
        if (want_input) extra[n_extra++] = (struct curl_waitfd){.fd = in->fd, .events = CURL_WAIT_POLLIN};
        curl_multi_poll(c->multi, extra, n_extra, timeout, NULL);
    }
done:
    fflush(stdout);
    if (o->progress) progress_line(next_out, total, t0, 1);
    if (rc == 130) cli_error("client", "interrupted after %llu records", (unsigned long long)next_out);
    if (c->retries_done) cli_error("client", "%llu retries", c->retries_done);
    return rc;
}

/* ---- options ---- */

const cli_doc cli_doc_client = {
    "client", "(--ask TEXT [--choice K[=D]...|--level D...|--label K[=D]... [--threshold X]] | --template FILE |\n"
              "                    --request FILE|-) [options]",
    "send System One requests to a server: one answer per input record on stdout, in input order",
    "--ask asks a yes/no (noul) question unless --choice, --level or --label is given; its id is\n"
    "\"result\". With --input lines or jsonl each non-blank line is a record, one envelope each:\n"
    "  {\"index\":i,\"ok\":true,\"input\":...,\"response\":...} or\n"
    "  {\"index\":i,\"ok\":false,\"input\":...,\"error\":{\"kind\":...,\"message\":...,\"status\":...,\"detail\":...}}\n"
    "Retries (--retries) follow connection/receive errors and HTTP 408, 429, 500, 502, 503, 504, 529,\n"
    "waiting 1, 2, 4, 8, then 16 s, or the server's Retry-After in seconds when it is at most 30\n"
    "(otherwise the record fails). The API key is sent as Authorization: Bearer; none when the\n"
    "variable named by --key-env is unset or empty.\n"
    "Each request is validated before it is sent (no model needed): a malformed record fails\n"
    "with kind request, message \"validation error: [...]\" and the endpoint's error body as\n"
    "detail, without a status; a --template/--ask whose questions are invalid is a usage error.\n"
    "--local loads the model --model names (a directory, mini, 4.5B, max or owner/name[@revision]\n"
    "from the Hugging Face cache, downloaded when missing) once and decides each record in-process, in input order:\n"
    "the same output, with no usage.latency_ms. A record the endpoint would refuse fails with\n"
    "kind request, unsupported or internal and the endpoint's error body as detail. --threads,\n"
    "--backend, --device, --dtype and --gemm-table apply to --local only; --url, --key-env,\n"
    "--timeout and --retries to the server only.\n"
    "Exit status: 0 every record answered (a \"no\" is an answer), 1 a record failed, 2 usage or I/O error,\n"
    "130 interrupted (SIGINT; answers already written stay written).\n",
};

static int format_opt(void *dst, const char *flag, const char *v) {
    int *f = dst;
    if (!strcmp(v, "text")) *f = CL_TEXT;
    else if (!strcmp(v, "json")) *f = CL_JSON;
    else if (!strcmp(v, "lines")) *f = CL_LINES;
    else if (!strcmp(v, "jsonl")) *f = CL_JSONL;
    else return usage_error("--input must be text, json, lines or jsonl");
    return 0;
}

static int progress_opt(void *dst, const char *flag, const char *v) {
    int *p = dst;
    if (!strcmp(v, "auto")) *p = -1;
    else if (!strcmp(v, "always")) *p = 1;
    else if (!strcmp(v, "never")) *p = 0;
    else return usage_error("--progress must be auto, always or never");
    return 0;
}

static int parse_args(int argc, char **argv, cl_opts *o) {
    o->key_env = "BASAL_API_KEY";
    o->threshold = 0.5;
    o->format = -1;
    o->jobs = 1;
    o->timeout = 120;
    o->max_input_bytes = 2u << 20;
    o->progress = -1;
    o->choice = calloc((size_t)argc, sizeof *o->choice);
    o->level = calloc((size_t)argc, sizeof *o->level);
    o->label = calloc((size_t)argc, sizeof *o->label);
    if (!o->choice || !o->level || !o->label) return usage_error("out of memory");
    cli_list choice = {o->choice, 0}, level = {o->level, 0}, label = {o->label, 0};
    long long max_input = (long long)o->max_input_bytes;
    const cli_opt opts[] = {
        CLI_STR("--ask", "TEXT", "", NULL, "one question about each state (yes/no unless an option below is given)",
                &o->ask),
        CLI_LIST("--choice", "KEY[=DESC]", "", NULL, "a choice option (repeat; the first '=' splits key and description)",
                 &choice),
        CLI_LIST("--level", "DESC", "", NULL, "a score level, ordered from 0 upwards (repeat)", &level),
        CLI_LIST("--label", "KEY[=DESC]", "", NULL, "a multi label (repeat)", &label),
        CLI_ROW("--threshold", "X", NULL, NULL, "multi selection threshold, 0..1; needs --label", CLI_DOUBLE,
                .dst = &o->threshold, .min = 0, .max = 1, .seen = &o->threshold_set),
        CLI_STR("--template", "FILE", "", NULL, "a request JSON whose questions are asked; each record is its state",
                &o->template_path),
        CLI_STR("--request", "FILE|-", "", NULL, "full System One requests (--input json or jsonl)", &o->request),
        CLI_STR("--state", "FILE|-", "- = stdin", NULL, "the states", &o->state),
        CLI_CALL("--input", "FORMAT", "text with --ask/--template, json with --request", NULL,
                 "text|json|lines|jsonl; lines/jsonl: one record per non-blank line", &o->format, format_opt),
        CLI_STR("--state-pointer", "PTR", "", NULL, "JSON pointer to the state in each json/jsonl record, e.g. /text",
                &o->state_pointer),
        CLI_LLONG("--max-input-bytes", "N", "2097152 = 2 MiB", NULL, "longest record or template (at most 64 MiB)",
                  &max_input, 1, 64LL << 20),
        CLI_SW("--value", "print only the single answer's value (key, number or array); not with --keep-going",
               &o->value),
        CLI_SW("--keep-going", "with lines/jsonl: answer every record, exit 1 at the end if one failed", &o->keep_going),
        CLI_CALL("--progress", "WHEN", "auto", NULL, "auto|always|never: a progress line on stderr (auto = a terminal)",
                 &o->progress, progress_opt),
        CLI_STR("--url", "URL", CL_DEFAULT_URL, "BASAL_URL", "server base URL", &o->url),
        CLI_STR("--model", "NAME|REF", "the request's, else the server's only model", "BASAL_MODEL",
                "model; mini, 4.5B, max become basal-1.5-*; with --local a directory or owner/name[@revision]",
                &o->model),
        CLI_STR("--key-env", "NAME", NULL, NULL, "environment variable with the API key (Bearer)", &o->key_env),
        CLI_INT("--jobs", "N", NULL, NULL, "concurrent requests, 1..256", &o->jobs, 1, 256),
        CLI_INT("--timeout", "SECONDS", NULL, NULL, "limit per attempt, including the response body", &o->timeout, 1,
                86400),
        CLI_INT("--retries", "N", NULL, NULL, "extra attempts after transient failures (at most 10)", &o->retries, 0,
                10),
        CLI_SW("--local", "decide in-process on the model --model names, one record at a time (no server; --jobs 1)",
               &o->local),
        CLI_ROW("--threads", "N", "0 = online CPUs", NULL, "with --local: CPU compute threads", CLI_INT,
                .dst = &o->threads, .min = 0, .max = 1 << 16, .seen = &o->local_only_set),
        CLI_DEVICE_ROWS(&o->dev),
    };
    int rc = cli_parse(&cli_doc_client, opts, CLI_N(opts), NULL, argc, argv);
    o->n_choice = (int)choice.n;
    o->n_level = (int)level.n;
    o->n_label = (int)label.n;
    o->max_input_bytes = (size_t)max_input;
    if (rc) return rc;
    if (o->dev.device || o->dev.dtype || o->dev.gemm_table || o->dev.int8_alpha) o->local_only_set = 1;
    if (o->local_only_set && !o->local)
        return usage_error("--threads, --backend, --device, --dtype and --gemm-table need --local");
    if (o->local) {
        if (o->jobs != 1) return usage_error("--local requires --jobs 1");
        if (o->url) return usage_error("--local excludes --url");
        if (!o->model) {
            const char *env = getenv("BASAL_MODEL");
            if (env && *env) o->model = env;
        }
        if (!o->model) return usage_error("--local requires --model REF (or BASAL_MODEL)");
    }
    int sources = !!o->ask + !!o->template_path + !!o->request;
    if (sources != 1) return usage_error("give exactly one of --ask, --template, --request");
    if ((o->n_choice > 0) + (o->n_level > 0) + (o->n_label > 0) > 1)
        return usage_error("--choice, --level and --label exclude each other");
    if ((o->n_choice || o->n_level || o->n_label) && !o->ask) return usage_error("--choice, --level and --label need --ask");
    if (o->threshold_set && !o->n_label) return usage_error("--threshold needs --label");
    if (o->ask && !o->ask[strspn(o->ask, " \t\r\n")]) return usage_error("--ask cannot be empty");
    if (o->model && !o->model[strspn(o->model, " \t\r\n")]) return usage_error("--model cannot be empty");
    if (o->format < 0) o->format = o->request ? CL_JSON : CL_TEXT;
    int stream = o->format == CL_LINES || o->format == CL_JSONL;
    if (o->request && (o->state || o->state_pointer)) return usage_error("--request excludes --state and --state-pointer");
    if (o->request && o->format != CL_JSON && o->format != CL_JSONL) return usage_error("--request requires --input json or jsonl");
    if (o->keep_going && !stream) return usage_error("--keep-going requires --input lines or jsonl");
    if (o->keep_going && o->value) return usage_error("--value excludes --keep-going");
    if (o->state_pointer) {
        if (o->format != CL_JSON && o->format != CL_JSONL) return usage_error("--state-pointer requires --input json or jsonl");
        if (!cl_pointer_valid(o->state_pointer))
            return usage_error("--state-pointer must be a JSON pointer, e.g. /text (~0 for ~, ~1 for /)");
    }
    return 0;
}

int cmd_client(int argc, char **argv) {
    cl_opts o;
    memset(&o, 0, sizeof o);
    cl_ctx c;
    memset(&c, 0, sizeof c);
    c.o = &o;
    cl_input in;
    memset(&in, 0, sizeof in);
    in.fd = -1;
    basal_session *local = NULL;
    int rc = parse_args(argc, argv, &o), curl_ready = 0;
    if (rc) {
        rc = rc < 0 ? 0 : rc;
        goto done;
    }
    if (curl_global_init(CURL_GLOBAL_DEFAULT) != 0) {
        rc = usage_error("libcurl initialisation failed");
        goto done;
    }
    curl_ready = 1;
    c.http.timeout_s = o.timeout;
    c.http.user_agent = "basal-client/" BASAL_VERSION;
    if (!o.local && ((rc = cl_http_urls(&c.http, "client", o.url)) || (rc = cl_http_headers(&c.http, "client", o.key_env))))
        goto done;
    if (!o.request && (rc = build_template(&c))) goto done;
    const char *model = o.model;
    if (!model) {
        const char *env = getenv("BASAL_MODEL");
        if (env && *env) model = env;
    }
    if (o.local) {
        /* every request names the loaded model: its served name */
        const char *dir = NULL;
        if ((rc = cli_model_ref(&dir, "--model", model)) != 0) goto done;
        rc = 1;
        basal_options bo;
        bs_err le = {0};
        basal_options_init(&bo);
        bo.threads = o.threads;
        cli_device_apply(&o.dev, &bo);
        if (basal_open(&local, dir, &bo, &le) < 0) {
            cli_error("client", "%s", le.msg);
            goto done;
        }
        c.local = local;
        model = basal_model_name(local);
        rc = 0;
    }
    if (model && !(c.model = strdup(o.local ? model : cl_model_name(model)))) {
        rc = usage_error("out of memory");
        goto done;
    }
    const char *source = o.request ? o.request : o.state ? o.state : "-";
    bs_err e = {0};
    if (cl_input_open(&in, source, (cl_format)o.format, o.max_input_bytes, &e) != 0) {
        cli_error("client", "%s", e.msg);
        rc = 2;
        goto done;
    }
    int stream = (o.format == CL_LINES || o.format == CL_JSONL) && !o.value;
    if (o.progress < 0) o.progress = isatty(2);
    long long total = o.progress ? cl_count_records(source, (cl_format)o.format) : -1;
    c.slots = calloc((size_t)o.jobs, sizeof *c.slots);
    c.multi = curl_multi_init();
    if (!c.slots || !c.multi || pipe(g_sigpipe) != 0) {
        rc = usage_error("out of memory");
        goto done;
    }
    /* SIGINT stops the loop between steps (the pipe wakes its poll); a closed
     * stdout shows up as EPIPE on write instead of killing the process. */
    struct sigaction sa, old_int, old_pipe;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_sigint;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, &old_int);
    sa.sa_handler = SIG_IGN;
    sigaction(SIGPIPE, &sa, &old_pipe);
    g_interrupted = 0;
    rc = run(&c, &in, stream, total);
    sigaction(SIGINT, &old_int, NULL);
    sigaction(SIGPIPE, &old_pipe, NULL);
done:
    if (c.slots) {
        for (int i = 0; i < o.jobs; i++) {
            if (c.slots[i].h && c.slots[i].state == SLOT_RUNNING) curl_multi_remove_handle(c.multi, c.slots[i].h);
            slot_clear(&c.slots[i]);
        }
        free(c.slots);
    }
    if (c.multi) curl_multi_cleanup(c.multi);
    for (int i = 0; i < 2; i++)
        if (g_sigpipe[i] >= 0) {
            close(g_sigpipe[i]);
            g_sigpipe[i] = -1;
        }
    cl_input_close(&in);
    cl_http_free(&c.http);
    bj_free(c.template);
    free(c.model);
    free(c.discovered);
    free(o.choice);
    free(o.level);
    free(o.label);
    basal_close(local);
    if (curl_ready) curl_global_cleanup();
    return rc;
}
