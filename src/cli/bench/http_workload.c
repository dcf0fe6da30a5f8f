/* The benchmark's workload files: reading, the manifest check, planning
 * (bench_workload.h). */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "basal.h"
#include "cli/bench/http_workload.h"
#include "cli/cli.h"
#include "protocol/reply.h"
#include "protocol/respjson.h"
#include "base/sha256.h"

static int class_index(bm_workload *w, const char *name) {
    for (int i = 0; i < w->n_classes; i++)
        if (!strcmp(w->classes[i], name)) return i;
    if (w->n_classes == BM_MAX_CLASSES) return -1;
    w->classes[w->n_classes] = strdup(name);
    return w->classes[w->n_classes] ? w->n_classes++ : -1;
}

/* basal-rs's classes for lines without one, by the size of the body sent */
static const char *size_class(size_t bytes) {
    return bytes <= 2048 ? "payload-le-2KiB" : bytes <= 16384 ? "payload-2-to-16KiB" : "payload-gt-16KiB";
}

void bm_raw_free(bm_raw_file *f) {
    for (size_t i = 0; i < f->n; i++) {
        free(f->r[i].id);
        free(f->r[i].cls);
        free(f->r[i].body);
    }
    free(f->r);
    memset(f, 0, sizeof *f);
}

/* Reads a workload file in the v2 line format: {"id"?, "class"?, "request"}; blank lines are
 * skipped; the model goes in place where "model" is null, or at the end when it is missing. */
int bm_read_workload(const char *path, const char *model, bm_raw_file *f) {
    char *text;
    size_t len;
    bs_err e = {0};
    memset(f, 0, sizeof *f);
    if (bs_read_file(path, &text, &len, &e) != 0) {
        cli_error("benchmark", "%s", e.msg);
        return -1;
    }
    bs_sha256(text, len, f->file_sha);
    int rc = 0;
    size_t lineno = 0, cap = 0;
    for (char *p = text; p < text + len && !rc;) {
        char *nl = memchr(p, '\n', (size_t)(text + len - p));
        size_t n = nl ? (size_t)(nl - p) : (size_t)(text + len - p);
        lineno++;
        size_t blank = 0;
        while (blank < n && (p[blank] == ' ' || p[blank] == '\t' || p[blank] == '\r')) blank++;
        if (blank < n) {
            bj_value *v = NULL;
            if (bj_parse(p, n, NULL, &v, &e) != 0) {
                cli_error("benchmark", "%s:%zu: %s", path, lineno, e.msg);
                rc = -1;
                break;
            }
            const bj_value *req = bj_get(v, "request"), *id = bj_get(v, "id"), *cl = bj_get(v, "class");
            const bj_value *qs = req ? bj_get(req, "questions") : NULL;
            if (!req || req->type != BJ_OBJECT || !qs || qs->type != BJ_OBJECT) {
                cli_error("benchmark", "%s:%zu: a line needs \"request\" with \"questions\"", path, lineno);
                bj_free(v);
                rc = -1;
                break;
            }
            bm_raw_req r = {0};
            bs_buf b, free_body;
            bs_buf_init(&b);
            bs_buf_init(&free_body);
            bs_resp_value(&free_body, req);
            bs_buf_putc(&b, '{');
            int have_model = 0;
            for (size_t i = 0; i < req->n; i++) {
                if (i) bs_buf_putc(&b, ',');
                bj_put_string(&b, req->keys[i], req->key_lens[i]);
                bs_buf_putc(&b, ':');
                if (req->key_lens[i] == 5 && !memcmp(req->keys[i], "model", 5)) {
                    have_model = 1;
                    if (req->items[i]->type == BJ_NULL) {
                        bj_put_string(&b, model, strlen(model));
                        continue;
                    }
                }
                bs_resp_value(&b, req->items[i]);
            }
            if (!have_model) {
                bs_buf_puts(&b, req->n ? ",\"model\":" : "\"model\":");
                bj_put_string(&b, model, strlen(model));
            }
            bs_buf_putc(&b, '}');
            if (!free_body.oom) bs_sha256(free_body.data, free_body.len, r.free_key);
            r.body = b.data;
            r.len = b.len;
            r.questions = (int)qs->n;
            r.id = id && id->type == BJ_STRING ? strndup(id->str, id->len) : bs_strfmt("request-%zu", f->n);
            r.cls = cl && cl->type == BJ_STRING ? strndup(cl->str, cl->len) : NULL;
            int oom = b.oom || free_body.oom || !r.id || (cl && cl->type == BJ_STRING && !r.cls);
            bs_buf_free(&free_body);
            bj_free(v);
            if (!oom && f->n == cap) {
                cap = cap ? 2 * cap : 256;
                bm_raw_req *grown = realloc(f->r, cap * sizeof *grown);
                if (grown) f->r = grown;
                else oom = 1;
            }
            if (oom) {
                cli_error("benchmark", "%s:%zu: out of memory", path, lineno);
                bs_buf_free(&b);
                free(r.id);
                free(r.cls);
                rc = -1;
                break;
            }
            f->r[f->n++] = r;
        }
        p = nl ? nl + 1 : text + len;
    }
    free(text);
    if (!rc && (f->n == 0 || f->n > 100000)) {
        cli_error("benchmark", "%s: needs 1..100000 requests, has %zu", path, f->n);
        rc = -1;
    }
    if (rc) bm_raw_free(f);
    return rc;
}

static int cmp_key(const void *a, const void *b) { return memcmp(a, b, 32); }

static int cmp_strp(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

/* distinct 32-byte keys among n */
static size_t count_unique(const uint8_t (*keys)[32], size_t n) {
    uint8_t(*c)[32] = malloc((n ? n : 1) * 32);
    if (!c) return 0;
    memcpy(c, keys, n * 32);
    qsort(c, n, 32, cmp_key);
    size_t u = n ? 1 : 0;
    for (size_t i = 1; i < n; i++) u += memcmp(c[i - 1], c[i], 32) != 0;
    free(c);
    return u;
}

/* Spec 06 §7.5: the hashes and counts of a workload file are checked against the manifest.json
 * beside it (basal-rs's build_benchmark.py summary: sha256, requests, questions, classes with
 * "auto-payload-size" for lines without one, unique_payloads, ordered_model_free_payloads_sha256)
 * before a run; ids must be unique. No manifest.json: nothing to check (returns 0). */
int bm_check_manifest(const char *dir, const char *file, const bm_raw_file *f, int *checked) {
    char *mpath = bs_path_join(dir, "manifest.json"), *text = NULL;
    size_t len;
    bs_err e = {0};
    *checked = 0;
    if (!mpath) return -1;
    if (access(mpath, F_OK) != 0) {
        free(mpath);
        return 0;
    }
    int rc = -1;
    bj_value *m = NULL;
    if (bs_read_file(mpath, &text, &len, &e) != 0 || bj_parse(text, len, NULL, &m, &e) != 0) {
        cli_error("benchmark", "%s: %s", mpath, e.msg);
        goto done;
    }
    const bj_value *ws = bj_get(m, "workloads"), *w = ws ? bj_get(ws, file) : NULL;
    if (!w || w->type != BJ_OBJECT) {
        cli_error("benchmark", "%s does not describe %s", mpath, file);
        goto done;
    }
    char hex[65], want[80];
    bs_sha256_hex(f->file_sha, hex);
    const bj_value *x = bj_get(w, "sha256");
    if (!x || x->type != BJ_STRING || x->len != 64 || memcmp(x->str, hex, 64)) {
        cli_error("benchmark", "%s/%s: SHA-256 %s; %s expects %.*s", dir, file, hex, mpath,
                x && x->type == BJ_STRING ? (int)x->len : 4, x && x->type == BJ_STRING ? x->str : "none");
        goto done;
    }
    size_t questions = 0;
    uint8_t(*keys)[32] = malloc(f->n * 32);
    if (!keys) goto done;
    for (size_t i = 0; i < f->n; i++) {
        questions += (size_t)f->r[i].questions;
        memcpy(keys[i], f->r[i].free_key, 32);
    }
    size_t unique = count_unique((const uint8_t(*)[32])keys, f->n);
    uint8_t d[32];
    bs_sha256(keys, f->n * 32, d);
    free(keys);
    char ordered[65];
    bs_sha256_hex(d, ordered);
    const char *names[] = {"requests", "questions", "unique_payloads"};
    size_t have[] = {f->n, questions, unique};
    for (int i = 0; i < 3; i++) {
        x = bj_get(w, names[i]);
        snprintf(want, sizeof want, "%zu", have[i]);
        if (!x || x->type != BJ_NUMBER || strlen(want) != x->len || memcmp(x->str, want, x->len)) {
            cli_error("benchmark", "%s/%s: %s %zu; %s says %.*s", dir, file, names[i], have[i], mpath,
                    x ? (int)x->len : 4, x ? x->str : "none");
            goto done;
        }
    }
    x = bj_get(w, "ordered_model_free_payloads_sha256");
    if (x && (x->type != BJ_STRING || x->len != 64 || memcmp(x->str, ordered, 64))) {
        cli_error("benchmark", "%s/%s: ordered model-free payloads SHA-256 %s; %s says %.*s", dir, file,
                ordered, mpath, x->type == BJ_STRING ? (int)x->len : 1, x->type == BJ_STRING ? x->str : "?");
        goto done;
    }
    const bj_value *cl = bj_get(w, "classes");
    size_t in_manifest = 0;
    for (size_t k = 0; cl && cl->type == BJ_OBJECT && k < cl->n; k++) in_manifest += 1;
    if (!cl || cl->type != BJ_OBJECT) {
        cli_error("benchmark", "%s: %s has no classes", mpath, file);
        goto done;
    }
    /* every class of the file with its count, and no other class in the manifest (sorted cnames:
     * equal classes are runs; a 100,000-line file stays linear-logarithmic) */
    size_t distinct = 0;
    char **cnames = malloc((f->n ? f->n : 1) * sizeof *cnames);
    if (!cnames) goto done;
    for (size_t i = 0; i < f->n; i++) cnames[i] = f->r[i].cls ? f->r[i].cls : (char *)"auto-payload-size";
    qsort(cnames, f->n, sizeof *cnames, cmp_strp);
    for (size_t i = 0, j; i < f->n; i = j) {
        for (j = i + 1; j < f->n && !strcmp(cnames[j], cnames[i]);) j++;
        size_t count = j - i;
        distinct++;
        const bj_value *cv = bj_get(cl, cnames[i]);
        snprintf(want, sizeof want, "%zu", count);
        if (!cv || cv->type != BJ_NUMBER || strlen(want) != cv->len || memcmp(cv->str, want, cv->len)) {
            cli_error("benchmark", "%s/%s: class %s has %zu requests; %s says %.*s", dir, file, cnames[i],
                    count, mpath, cv ? (int)cv->len : 4, cv ? cv->str : "none");
            free(cnames);
            goto done;
        }
    }
    free(cnames);
    if (distinct != in_manifest) {
        cli_error("benchmark", "%s/%s: %zu classes; %s lists %zu", dir, file, distinct, mpath, in_manifest);
        goto done;
    }
    char **ids = malloc(f->n * sizeof *ids);
    if (!ids) goto done;
    for (size_t i = 0; i < f->n; i++) ids[i] = f->r[i].id;
    qsort(ids, f->n, sizeof *ids, cmp_strp);
    for (size_t i = 1; i < f->n; i++)
        if (!strcmp(ids[i - 1], ids[i])) {
            cli_error("benchmark", "%s/%s: request id %s appears more than once", dir, file, ids[i]);
            free(ids);
            goto done;
        }
    free(ids);
    *checked = 1;
    rc = 0;
done:
    bj_free(m);
    free(text);
    free(mpath);
    return rc;
}

/* Plans a body with the model's tokenizer (no weights), as the server would: its prompt tokens
 * over both orders, or *too_long with the 422 body's detail when every refusal is
 * prompt_too_long (basal-rs skips those requests whole). Returns -1 on any other refusal. */
static int plan_body(const bs_basal_model *m, bs_letter_cache *lc, const bm_request *r, long *tokens, char **too_long) {
    bs_reply rep;
    bs_reply_init(&rep);
    bs_plan p = {0};
    bs_err e = {0};
    *tokens = 0;
    *too_long = NULL;
    int rc = bs_plan_text(&p, r->body, r->len, BS_DIALECT_SYSTEMONE, m, lc, &rep, &e);
    if (rc == 0) {
        for (size_t i = 0; i < p.n_items; i++)
            for (int o = 0; o < p.items[i].n_orders; o++) *tokens += p.items[i].orders[o].n_ids;
    } else if (rc == BS_EINVAL && rep.body.len) {
        bj_value *v = NULL;
        bs_err pe = {0};
        const bj_value *d = NULL;
        int only_too_long = 0;
        if (bj_parse(rep.body.data, rep.body.len, NULL, &v, &pe) == 0 && (d = bj_get(v, "detail")) &&
            d->type == BJ_ARRAY && d->n) {
            only_too_long = 1;
            for (size_t i = 0; i < d->n; i++) {
                const bj_value *k = bj_get(d->items[i], "type");
                only_too_long &= k && k->type == BJ_STRING && k->len == 15 && !memcmp(k->str, "prompt_too_long", 15);
            }
        }
        if (only_too_long) {
            bs_buf b;
            bs_buf_init(&b);
            bs_resp_value(&b, d);
            *too_long = b.oom ? (bs_buf_free(&b), strdup("null")) : b.data;
            rc = *too_long ? 0 : -1;
        } else {
            cli_error("benchmark", "planning benchmark request %s: %.*s", r->id, (int)rep.body.len,
                    rep.body.data);
            rc = -1;
        }
        bj_free(v);
    } else {
        cli_error("benchmark", "planning benchmark request %s: %s", r->id, e.msg);
        rc = -1;
    }
    bs_plan_free(&p);
    bs_reply_free(&rep);
    return rc;
}

/* equal payloads next to each other, first occurrence first */
typedef struct {
    const uint8_t *key;
    size_t pos;
} key_pos;

static int cmp_key_pos(const void *a, const void *b) {
    const key_pos *x = a, *y = b;
    int c = memcmp(x->key, y->key, 32);
    return c ? c : (x->pos > y->pos) - (x->pos < y->pos);
}

typedef struct {
    uint8_t order[32];
    size_t i;
} order_key;

static int cmp_order(const void *a, const void *b) {
    const order_key *x = a, *y = b;
    int c = memcmp(x->order, y->order, 32);
    return c ? c : (x->i > y->i) - (x->i < y->i);
}

/* basal-rs's prepare(): the model in every body, classes by size where a line has none, each
 * unique payload planned once (over the context limit: skipped whole, reported), the mixed
 * workload in ascending SHA-256("mixed-v1/7/" + id) order; then the workload's description. */
int bm_prepare_workload(const bm_raw_file *f, const char *name, int shuffle, const bs_basal_model *m,
                            bs_letter_cache *lc, bm_workload *w, bm_requests *rq) {
    w->name = strdup(name);
    w->source_requests = f->n;
    rq->r = calloc(f->n, sizeof *rq->r);
    w->skipped = calloc(f->n, sizeof *w->skipped);
    key_pos *by_key = malloc((f->n ? f->n : 1) * sizeof *by_key);
    if (!w->name || !rq->r || !w->skipped || !by_key) {
        free(by_key);
        return -1;
    }
    for (size_t i = 0; i < f->n; i++) {
        const bm_raw_req *x = &f->r[i];
        bm_request *r = &rq->r[rq->n++];
        r->id = x->id;
        r->body = x->body;
        r->len = x->len;
        r->questions = x->questions;
        r->input_tokens = -1;
        r->cls = class_index(w, x->cls ? x->cls : size_class(x->len));
        if (r->cls < 0) {
            cli_error("benchmark", "%s: more than %d classes", name, BM_MAX_CLASSES);
            free(by_key);
            return -1;
        }
        bs_sha256(x->body, x->len, r->key);
    }
    /* group equal payloads: plan once, share the first answer */
    size_t n = rq->n;
    for (size_t i = 0; i < n; i++) by_key[i] = (key_pos){rq->r[i].key, i};
    qsort(by_key, n, sizeof *by_key, cmp_key_pos);
    int rc = 0;
    for (size_t g = 0; g < n && !rc;) {
        size_t end = g + 1;
        while (end < n && !memcmp(by_key[g].key, by_key[end].key, 32)) end++;
        long tokens = -1;
        char *too_long = NULL;
        if (m && plan_body(m, lc, &rq->r[by_key[g].pos], &tokens, &too_long) != 0) rc = -1;
        for (size_t k = g; k < end && !rc; k++) {
            bm_request *r = &rq->r[by_key[k].pos];
            r->input_tokens = m ? tokens : -1;
            r->skipped = too_long != NULL;
            if (too_long) {
                bm_skipped *s = &w->skipped[w->n_skipped++];
                s->id = strdup(r->id);
                s->cls = r->cls;
                s->detail = strdup(too_long);
            }
        }
        free(too_long);
        g = end;
    }
    free(by_key);
    if (rc) return -1;
    /* the skipped requests leave the workload */
    size_t kept = 0;
    for (size_t i = 0; i < n; i++)
        if (!rq->r[i].skipped) rq->r[kept++] = rq->r[i];
    rq->n = kept;
    if (shuffle && kept) {
        order_key *ok = malloc(kept * sizeof *ok);
        bm_request *copy = malloc(kept * sizeof *copy);
        if (!ok || !copy) {
            free(ok);
            free(copy);
            return -1;
        }
        for (size_t i = 0; i < kept; i++) {
            char *s = bs_strfmt("mixed-v1/7/%s", rq->r[i].id);
            if (!s) {
                free(ok);
                free(copy);
                return -1;
            }
            bs_sha256(s, strlen(s), ok[i].order);
            ok[i].i = i;
            free(s);
        }
        qsort(ok, kept, sizeof *ok, cmp_order);
        for (size_t i = 0; i < kept; i++) copy[i] = rq->r[ok[i].i];
        memcpy(rq->r, copy, kept * sizeof *copy);
        free(ok);
        free(copy);
    }
    /* the description, over the requests that run */
    w->requests = kept;
    w->payload_bytes = malloc((kept ? kept : 1) * sizeof *w->payload_bytes);
    w->input_tokens = m ? malloc((kept ? kept : 1) * sizeof *w->input_tokens) : NULL;
    uint8_t(*keys)[32] = malloc((kept ? kept : 1) * 32);
    if (!w->payload_bytes || (m && !w->input_tokens) || !keys) {
        free(keys);
        return -1;
    }
    for (size_t i = 0; i < kept; i++) {
        const bm_request *r = &rq->r[i];
        w->class_requests[r->cls]++;
        w->questions += (size_t)r->questions;
        w->payload_bytes[i] = (double)r->len;
        if (w->input_tokens) w->input_tokens[i] = (double)r->input_tokens;
        memcpy(keys[i], r->key, 32);
    }
    w->unique_payloads = count_unique((const uint8_t(*)[32])keys, kept);
    uint8_t d[32];
    bs_sha256(keys, kept * 32, d);
    bs_sha256_hex(d, w->ordered_payloads_sha256);
    free(keys);
    return 0;
}

/* Every request's answer slot: that of the first request (over all workloads) with the same
 * payload, as basal-rs keys its first answers by the payload's digest. */
int bm_link_answers(bm_requests *rqs, int nw) {
    size_t total = 0;
    for (int i = 0; i < nw; i++) total += rqs[i].n;
    bm_request **all = malloc((total ? total : 1) * sizeof *all);
    if (!all) return -1;
    size_t k = 0;
    for (int i = 0; i < nw; i++)
        for (size_t j = 0; j < rqs[i].n; j++) all[k++] = &rqs[i].r[j];
    key_pos *v = malloc((total ? total : 1) * sizeof *v);
    if (!v) {
        free(all);
        return -1;
    }
    for (size_t i = 0; i < total; i++) v[i] = (key_pos){all[i]->key, i};
    qsort(v, total, sizeof *v, cmp_key_pos);
    for (size_t i = 0; i < total;) {
        size_t end = i + 1;
        while (end < total && !memcmp(v[i].key, v[end].key, 32)) end++;
        for (size_t j = i; j < end; j++) all[v[j].pos]->first_answer = &all[v[i].pos]->answer;
        i = end;
    }
    free(v);
    free(all);
    return 0;
}
