/* The answers of one `basal eval` setting (cli/eval/eval.h): each graded
 * item's request decided in-process by a basal_session (include/basal.h),
 * one at a time, or sent to a server's POST /v1/systemone with up to --jobs
 * requests in flight over one libcurl multi handle, retried as `basal
 * client` retries (cli/client/http.h). Either way an answer is read the same
 * way, and an item the model refuses is recorded with the endpoint's reason
 * while the others go on. */
#include <curl/curl.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "api/session.h"
#include "base/progress.h"
#include "cli/cli.h"
#include "cli/eval/eval.h"
#include "cli/eval/run.h"

#define EV_MAX_RESPONSE (16u << 20)

int ev_result_init(ev_result *r, const ev_set *s) {
    memset(r, 0, sizeof *r);
    r->p = calloc(s->n_probs ? s->n_probs : 1, sizeof *r->p);
    r->pred = calloc(s->n_targets ? s->n_targets : 1, sizeof *r->pred);
    r->ok = calloc(s->n_targets ? s->n_targets : 1, 1);
    r->latency_ms = malloc((s->n_items ? s->n_items : 1) * sizeof *r->latency_ms);
    if (!r->p || !r->pred || !r->ok || !r->latency_ms) {
        ev_result_free(r);
        return BS_ENOMEM;
    }
    for (size_t i = 0; i < s->n_items; i++) r->latency_ms[i] = NAN;
    return BS_OK;
}

void ev_result_free(ev_result *r) {
    free(r->label);
    free(r->model);
    free(r->dtype);
    free(r->calibration);
    free(r->p);
    free(r->pred);
    free(r->ok);
    free(r->latency_ms);
    for (size_t i = 0; i < r->n_errors; i++) free(r->errors[i].message);
    free(r->errors);
    memset(r, 0, sizeof *r);
}

void ev_result_error(ev_result *r, size_t item, long status, char *message) {
    if (r->n_errors == r->cap_errors) {
        size_t nc = r->cap_errors ? 2 * r->cap_errors : 8;
        ev_error *ne = realloc(r->errors, nc * sizeof *ne);
        if (!ne) {
            free(message);
            return;
        }
        r->errors = ne;
        r->cap_errors = nc;
    }
    r->errors[r->n_errors++] = (ev_error){item, status, message ? message : strdup("out of memory")};
}

static int number_of(const bj_value *v, double *out) {
    if (!v || v->type != BJ_NUMBER) return -1;
    *out = strtod(v->str, NULL);
    return isfinite(*out) && *out >= 0 && *out <= 1 ? 0 : -1;
}

/* One decision's distribution from its answer object a. */
static int read_target(const ev_set *s, const ev_target *t, const bj_value *a, double *p, bs_err *e) {
    const ev_group *g = &s->groups[t->group];
    const bj_value *type = bj_get(a, "type"), *probs = bj_get(a, "probabilities");
    if (!type || type->type != BJ_STRING || strcmp(type->str, ev_type_name(g->type)))
        return bs_fail(e, BS_EFORMAT, "the answer to \"%s\" is not of type %s", t->qid, ev_type_name(g->type));
    if (g->type == BS_Q_NOUL || g->type == BS_Q_MULTI) {
        const bj_value *v = g->type == BS_Q_NOUL ? bj_get(a, "noul") : probs ? bj_get(probs, g->label) : NULL;
        if (number_of(v, &p[0]))
            return bs_fail(e, BS_EFORMAT, "the answer to \"%s\" has no probability%s%s", t->qid,
                           g->label ? " for label " : "", g->label ? g->label : "");
        p[1] = 1.0 - p[0];
        return BS_OK;
    }
    for (size_t i = 0; i < t->n_opts; i++)
        if (number_of(probs ? bj_get(probs, t->keys[i]) : NULL, &p[i]))
            return bs_fail(e, BS_EFORMAT, "the answer to \"%s\" has no probability for \"%s\"", t->qid, t->keys[i]);
    return BS_OK;
}

int ev_result_answer(ev_result *r, const ev_set *s, size_t item, const char *json, size_t len, bs_err *e) {
    const ev_item *it = &s->items[item];
    bj_value *v = NULL;
    bs_err pe = {0};
    if (bj_parse(json, len, NULL, &v, &pe) != 0) return bs_fail(e, BS_EFORMAT, "the answer is not JSON: %s", pe.msg);
    const bj_value *answers = bj_get(v, "answers"), *usage = bj_get(v, "usage");
    int rc = answers && answers->type == BJ_OBJECT ? BS_OK : bs_fail(e, BS_EFORMAT, "the answer has no answers object");
    for (size_t k = 0; k < it->n_targets && rc == BS_OK; k++) {
        size_t t = it->first_target + k;
        const ev_target *x = &s->targets[t];
        const bj_value *a = bj_get(answers, x->qid);
        if (!a || a->type != BJ_OBJECT) rc = bs_fail(e, BS_EFORMAT, "the answer has no \"%s\"", x->qid);
        else rc = read_target(s, x, a, r->p + x->p_off, e);
    }
    for (size_t k = 0; k < it->n_targets && rc == BS_OK; k++) {
        size_t t = it->first_target + k, best = 0;
        const double *p = r->p + s->targets[t].p_off;
        for (size_t i = 1; i < s->targets[t].n_opts; i++)
            if (p[i] > p[best]) best = i;
        r->pred[t] = best;
        r->ok[t] = 1;
    }
    const bj_value *lat = usage ? bj_get(usage, "latency_ms") : NULL;
    if (rc == BS_OK && lat && lat->type == BJ_NUMBER) r->latency_ms[item] = strtod(lat->str, NULL);
    bj_free(v);
    return rc;
}

/* "HTTP 422: <reason>" style text of a refusal, malloc'd. */
static char *refusal_message(long status, const char *body, size_t len) {
    bs_buf b;
    bs_buf_init(&b);
    bs_buf_printf(&b, "refused with %ld: ", status);
    ev_refusal_text(&b, body, len);
    if (b.oom) {
        bs_buf_free(&b);
        return NULL;
    }
    return b.data;
}

/* ---- in-process ---- */

int ev_run_session(basal_session *ss, const ev_set *s, ev_result *r, bs_progress *p, bs_err *e) {
    bs_runner *run = bs_session_runner(ss);
    cli_fwd_progress fwd = {"eval", p, NULL};
    run->watch = cli_fwd_progress_watch;
    run->watch_ctx = &fwd;
    bs_buf body;
    bs_buf_init(&body);
    int rc = BS_OK;
    for (size_t i = 0; i < s->n_items && rc == BS_OK; i++) {
        body.len = 0;
        ev_item_body(&s->items[i], r->model, &body);
        if (body.oom) {
            rc = bs_fail(e, BS_ENOMEM, "out of memory");
            break;
        }
        basal_result res = {0};
        rc = basal_decide(ss, body.data, body.len, &res, e);
        if (rc == BS_OK && res.status == 200) {
            bs_err ae = {0};
            if (ev_result_answer(r, s, i, res.json, res.len, &ae) < 0)
                rc = bs_fail(e, BS_EINTERNAL, "%s: %s", s->items[i].where, ae.msg); /* our own answer: a bug */
            r->latency_ms[i] = res.plan_ms + res.forward_ms;
        } else if (rc == BS_OK) {
            ev_result_error(r, i, res.status, refusal_message(res.status, res.json, res.len));
        }
        basal_result_free(&res);
        cli_fwd_progress_end(&fwd);
        bs_progress_add(p, 1);
    }
    run->watch = NULL;
    run->watch_ctx = NULL;
    bs_buf_free(&body);
    return rc;
}

/* ---- over HTTP ---- */

typedef struct {
    int busy, waiting;
    size_t item;
    CURL *h;
    bs_buf body, resp;
    int attempt, too_big, has_retry_after, orders;
    double not_before;
    char retry_after[64], errbuf[CURL_ERROR_SIZE];
} ev_slot;

static size_t on_body(char *p, size_t size, size_t n, void *ud) {
    ev_slot *s = ud;
    size_t len = size * n;
    if (s->resp.len + len > EV_MAX_RESPONSE) {
        s->too_big = 1;
        return 0;
    }
    bs_buf_put(&s->resp, p, len);
    return s->resp.oom ? 0 : len;
}

static size_t on_header(char *p, size_t size, size_t n, void *ud) {
    ev_slot *s = ud;
    size_t len = size * n;
    if (cl_http_retry_after(p, len, s->retry_after, sizeof s->retry_after)) s->has_retry_after = 1;
    if (len > 15 && !strncasecmp(p, "x-basal-orders:", 15)) s->orders = atoi(p + 15);
    return len;
}

static int slot_start(const ev_http *hx, ev_slot *sl, CURLM *multi) {
    if (!sl->h) {
        if (!(sl->h = curl_easy_init())) return -1;
        cl_http_easy(hx->http, sl->h);
        curl_easy_setopt(sl->h, CURLOPT_URL, hx->http->url_decide);
        curl_easy_setopt(sl->h, CURLOPT_POSTFIELDS, sl->body.data);
        curl_easy_setopt(sl->h, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)sl->body.len);
        curl_easy_setopt(sl->h, CURLOPT_WRITEFUNCTION, on_body);
        curl_easy_setopt(sl->h, CURLOPT_WRITEDATA, sl);
        curl_easy_setopt(sl->h, CURLOPT_HEADERFUNCTION, on_header);
        curl_easy_setopt(sl->h, CURLOPT_HEADERDATA, sl);
        curl_easy_setopt(sl->h, CURLOPT_ERRORBUFFER, sl->errbuf);
        curl_easy_setopt(sl->h, CURLOPT_PRIVATE, sl);
    }
    sl->resp.len = 0;
    sl->too_big = sl->has_retry_after = sl->orders = 0;
    sl->errbuf[0] = 0;
    if (curl_multi_add_handle(multi, sl->h) != CURLM_OK) return -1;
    sl->waiting = 0;
    return 0;
}

/* A finished attempt: 1 when it will be retried, else 0 (the item is done). */
static int slot_finish(const ev_http *hx, const ev_set *s, ev_result *r, ev_slot *sl, CURLcode cc) {
    long status = 0;
    if (cc == CURLE_OK) curl_easy_getinfo(sl->h, CURLINFO_RESPONSE_CODE, &status);
    int transient = cc != CURLE_OK ? !sl->too_big : cl_http_transient(status);
    if (transient && sl->attempt < hx->retries) {
        double delay = cl_http_retry_delay(sl->attempt, sl->has_retry_after ? sl->retry_after : NULL);
        if (delay >= 0) {
            sl->attempt++;
            sl->waiting = 1;
            sl->not_before = bs_now_ms() + delay * 1000.0;
            return 1;
        }
    }
    const char *data = sl->resp.data ? sl->resp.data : "";
    if (cc != CURLE_OK) {
        ev_result_error(r, sl->item, 0, sl->too_big ? bs_strfmt("the response exceeds 16 MiB")
                                                    : bs_strfmt("%s", sl->errbuf[0] ? sl->errbuf : curl_easy_strerror(cc)));
    } else if (status != 200) {
        ev_result_error(r, sl->item, status, refusal_message(status, data, sl->resp.len));
    } else {
        bs_err ae = {0};
        if (ev_result_answer(r, s, sl->item, data, sl->resp.len, &ae) < 0)
            ev_result_error(r, sl->item, status, bs_strfmt("the server's answer: %s", ae.msg));
        if (sl->orders && r->orders && sl->orders != r->orders) r->orders_mixed = 1;
        if (sl->orders && !r->orders) r->orders = sl->orders;
    }
    return 0;
}

static void slot_clear(ev_slot *sl) {
    if (sl->h) curl_easy_cleanup(sl->h);
    bs_buf_free(&sl->body);
    bs_buf_free(&sl->resp);
    memset(sl, 0, sizeof *sl);
}

/* Fills free slots with the next items; -1 on no memory. */
static int slot_fill(const ev_set *s, const ev_result *r, ev_slot *slots, int jobs, size_t *next) {
    for (int j = 0; j < jobs && *next < s->n_items; j++) {
        ev_slot *sl = &slots[j];
        if (sl->busy) continue;
        slot_clear(sl);
        sl->item = (*next)++;
        sl->busy = sl->waiting = 1;
        ev_item_body(&s->items[sl->item], r->model, &sl->body);
        if (sl->body.oom) return -1;
    }
    return 0;
}

int ev_run_http(const ev_http *hx, const ev_set *s, ev_result *r, bs_progress *p, bs_err *e) {
    ev_slot *slots = calloc((size_t)hx->jobs, sizeof *slots);
    CURLM *multi = curl_multi_init();
    int rc = slots && multi ? BS_OK : bs_fail(e, BS_ENOMEM, "out of memory");
    size_t next = 0, done = 0;
    while (rc == BS_OK && done < s->n_items) {
        if (slot_fill(s, r, slots, hx->jobs, &next) < 0) {
            rc = bs_fail(e, BS_ENOMEM, "out of memory");
            break;
        }
        double now = bs_now_ms(), next_due = INFINITY;
        for (int j = 0; j < hx->jobs && rc == BS_OK; j++) {
            ev_slot *sl = &slots[j];
            if (!sl->busy || !sl->waiting) continue;
            if (sl->not_before > now) next_due = sl->not_before < next_due ? sl->not_before : next_due;
            else if (slot_start(hx, sl, multi) < 0) rc = bs_fail(e, BS_ENOMEM, "could not start a transfer");
        }
        int running = 0, left = 0;
        curl_multi_perform(multi, &running);
        CURLMsg *m;
        while ((m = curl_multi_info_read(multi, &left))) {
            if (m->msg != CURLMSG_DONE) continue;
            ev_slot *sl = NULL;
            curl_easy_getinfo(m->easy_handle, CURLINFO_PRIVATE, (char **)&sl);
            CURLcode cc = m->data.result;
            curl_multi_remove_handle(multi, sl->h);
            if (slot_finish(hx, s, r, sl, cc)) continue;
            sl->busy = 0;
            done++;
            bs_progress_add(p, 1);
        }
        int timeout = 200;
        if (next_due < INFINITY) {
            double d = next_due - bs_now_ms();
            if (d < timeout) timeout = d < 0 ? 0 : (int)d + 1;
        }
        if (done < s->n_items) curl_multi_poll(multi, NULL, 0, timeout, NULL);
    }
    for (int j = 0; slots && j < hx->jobs; j++) {
        if (slots[j].h && slots[j].busy && !slots[j].waiting) curl_multi_remove_handle(multi, slots[j].h);
        slot_clear(&slots[j]);
    }
    free(slots);
    if (multi) curl_multi_cleanup(multi);
    return rc;
}
