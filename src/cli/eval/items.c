/* The item files of `basal eval` (cli/eval/eval.h). One JSON object per
 * non-blank line, in one of three forms:
 *
 *   upstream basal-run, simple item (rkinas/basal basal/run.py):
 *     {"id"?, "state", "question", "options": [...], "type"?: "choice"|"noul"|"score", "gold"?: index}
 *     asked as run.py asks it: question "q", options keyed "0".."n-1" with
 *     option_keys "hide" (choice, score), or a noul with criteria
 *     {"true": options[0], "false": options[1]}; gold is the option index
 *     (noul: 0 = yes). A simple item without gold is not graded.
 *   upstream basal-run, full request: {"id"?, "state", "questions", ...} —
 *     basal-run grades none of these; they are counted and not sent.
 *   ours: {"id"?, "request": <a POST /v1/systemone body>, "expected": {"<question id>": <answer>}}
 *     answer: choice, score and act the option key (score also its index,
 *     noul and noul-based act also true/false); multi the array of the
 *     labels that apply (the others do not), or {"<label>": true|false, ...}
 *     for some labels. Questions left out of expected are asked, not scored.
 *
 * The request's "model" is replaced by the evaluated model's served name
 * (or added), so one file evaluates any model. Every request is validated as
 * the endpoint validates it (02 §3 step 8) before anything is evaluated; an
 * error names the file and line. */
#include <stdlib.h>
#include <string.h>

#include "base/sha256.h"
#include "cli/cli.h"
#include "cli/eval/eval.h"
#include "protocol/reply.h"
#include "protocol/respjson.h"

#define VALIDATION_MODEL "basal-eval"

const char *ev_type_name(bs_qtype t) { return bs_qtype_name(t); }

static int grow(void **v, size_t *cap, size_t need, size_t size) {
    if (need <= *cap) return 0;
    size_t nc = *cap ? 2 * *cap : 16;
    while (nc < need) nc *= 2;
    void *nv = realloc(*v, nc * size);
    if (!nv) return -1;
    *v = nv;
    *cap = nc;
    return 0;
}

static int key_is(const bj_value *obj, size_t i, const char *k) {
    return obj->key_lens[i] == strlen(k) && !memcmp(obj->keys[i], k, obj->key_lens[i]);
}

static int text_eq(const bs_text *t, const char *s, size_t n) { return t->len == n && !memcmp(t->s, s, n); }

void ev_item_body(const ev_item *it, const char *model, bs_buf *b) {
    const bj_value *rq = it->request;
    bs_buf_puts(b, "{\"model\":");
    bs_resp_cstr(b, model);
    for (size_t i = 0; i < rq->n; i++) {
        if (key_is(rq, i, "model")) continue;
        bs_buf_putc(b, ',');
        bs_resp_string(b, rq->keys[i], rq->key_lens[i]);
        bs_buf_putc(b, ':');
        bs_resp_value(b, rq->items[i]);
    }
    bs_buf_putc(b, '}');
}

/* ---- groups ---- */

static size_t group_of(ev_set *s, const bs_question *q, const bs_text *label) {
    for (size_t g = 0; g < s->n_groups; g++) {
        const ev_group *gr = &s->groups[g];
        if (gr->type != q->type || strlen(gr->question) != q->id.len || memcmp(gr->question, q->id.s, q->id.len))
            continue;
        if (!label && !gr->label) return g;
        if (label && gr->label && strlen(gr->label) == label->len && !memcmp(gr->label, label->s, label->len))
            return g;
    }
    if (grow((void **)&s->groups, &s->cap_groups, s->n_groups + 1, sizeof *s->groups)) return EV_ANY;
    ev_group *gr = &s->groups[s->n_groups];
    memset(gr, 0, sizeof *gr);
    gr->type = q->type;
    gr->question = strndup(q->id.s, q->id.len);
    gr->label = label ? strndup(label->s, label->len) : NULL;
    if (!gr->question || (label && !gr->label)) {
        free(gr->question);
        free(gr->label);
        return EV_ANY;
    }
    return s->n_groups++;
}

/* The class index of key in group g, added when new; EV_ANY: no memory. */
static size_t class_of(ev_group *g, const char *key, size_t n) {
    for (size_t c = 0; c < g->n_classes; c++)
        if (strlen(g->classes[c]) == n && !memcmp(g->classes[c], key, n)) return c;
    if (grow((void **)&g->classes, &g->cap_classes, g->n_classes + 1, sizeof *g->classes)) return EV_ANY;
    if (!(g->classes[g->n_classes] = strndup(key, n))) return EV_ANY;
    return g->n_classes++;
}

/* One decision of item: question q (label: a multi label's index, else -1)
 * with n options named keys, expected option gold. */
static int add_target(ev_set *s, size_t item, const bs_question *q, int label, const bs_text *keys, size_t n,
                      size_t gold, bs_err *e) {
    static const bs_text yes_no[2] = {{"true", 4}, {"false", 5}};
    if (label >= 0) keys = yes_no, n = 2;
    size_t g = group_of(s, q, label >= 0 ? &q->multi->label_keys[label] : NULL);
    if (g == EV_ANY || grow((void **)&s->targets, &s->cap_targets, s->n_targets + 1, sizeof *s->targets))
        return bs_fail(e, BS_ENOMEM, "out of memory");
    ev_target *t = &s->targets[s->n_targets];
    memset(t, 0, sizeof *t);
    t->cls = calloc(n, sizeof *t->cls);
    t->keys = calloc(n, sizeof *t->keys);
    if (!t->cls || !t->keys) goto oom;
    for (size_t i = 0; i < n; i++) {
        size_t c = class_of(&s->groups[g], keys[i].s, keys[i].len);
        if (c == EV_ANY) goto oom;
        t->cls[i] = c;
    }
    for (size_t i = 0; i < n; i++) t->keys[i] = s->groups[g].classes[t->cls[i]];
    t->qid = s->groups[g].question;
    t->item = item;
    t->group = g;
    t->n_opts = n;
    t->gold = gold;
    t->label = label;
    t->p_off = s->n_probs;
    s->n_probs += n;
    s->n_targets++;
    return BS_OK;
oom:
    free(t->cls);
    free(t->keys);
    return bs_fail(e, BS_ENOMEM, "out of memory");
}

/* ---- expected answers (our form) ---- */

static void put_keys(bs_buf *b, const bs_text *keys, size_t n) {
    for (size_t i = 0; i < n && i < 12; i++) {
        bs_buf_puts(b, i ? ", " : "");
        bs_resp_string(b, keys[i].s, keys[i].len);
    }
    if (n > 12) bs_buf_printf(b, ", ... (%zu in all)", n);
}

static int is_index(const bj_value *v, size_t n, size_t *out) {
    if (v->type != BJ_NUMBER || !v->len || strspn(v->str, "0123456789") != v->len || v->len > 6) return 0;
    size_t i = (size_t)strtoul(v->str, NULL, 10);
    if (i >= n) return 0;
    *out = i;
    return 1;
}

/* The option of q that v names; -1 with the reason in why. */
static int expected_option(const bs_question *q, const bj_value *v, size_t *out, bs_buf *why) {
    int yes_no = q->n_options == 2 && text_eq(&q->keys[0], "true", 4) && text_eq(&q->keys[1], "false", 5);
    if (v->type == BJ_TRUE || v->type == BJ_FALSE) {
        if (yes_no) return *out = v->type == BJ_TRUE ? 0 : 1, 0;
    } else if (v->type == BJ_STRING) {
        for (size_t i = 0; i < q->n_options; i++)
            if (text_eq(&q->keys[i], v->str, v->len)) return *out = i, 0;
    } else if (q->type == BS_Q_SCORE && is_index(v, q->n_options, out)) {
        return 0;
    }
    bs_resp_value(why, v);
    bs_buf_printf(why, " is not an answer of this %s question (", bs_qtype_name(q->type));
    if (yes_no) bs_buf_puts(why, "true or false");
    else put_keys(why, q->keys, q->n_options);
    if (q->type == BS_Q_SCORE) bs_buf_printf(why, ", or a level index 0..%zu", q->n_options - 1);
    bs_buf_putc(why, ')');
    return -1;
}

static long label_index(const bs_multi_spec *m, const char *s, size_t n) {
    for (size_t k = 0; k < m->n_labels; k++)
        if (text_eq(&m->label_keys[k], s, n)) return (long)k;
    return -1;
}

/* multi: an array of the labels that apply, or {label: true|false}. */
static int expected_multi(ev_set *s, size_t item, const bs_question *q, const bj_value *v, bs_buf *why, bs_err *e) {
    const bs_multi_spec *m = q->multi;
    signed char *gold = calloc(m->n_labels ? m->n_labels : 1, 1); /* 0 unknown, 1 applies, 2 does not */
    if (!gold) return bs_fail(e, BS_ENOMEM, "out of memory");
    int rc = 1;
    if (v->type == BJ_ARRAY) memset(gold, 2, m->n_labels);
    else if (v->type != BJ_OBJECT) {
        bs_buf_puts(why, "a multi question expects the array of the labels that apply, or {\"label\": true|false}");
        goto done;
    }
    for (size_t i = 0; i < v->n; i++) {
        const bj_value *x = v->items[i];
        const char *name = v->type == BJ_ARRAY ? x->str : v->keys[i];
        size_t len = v->type == BJ_ARRAY ? x->len : v->key_lens[i];
        if (v->type == BJ_ARRAY && x->type != BJ_STRING) {
            bs_buf_puts(why, "the labels must be strings");
            goto done;
        }
        if (v->type == BJ_OBJECT && x->type != BJ_TRUE && x->type != BJ_FALSE) {
            bs_buf_puts(why, "each label expects true or false");
            goto done;
        }
        long k = label_index(m, name, len);
        if (k < 0 || (v->type == BJ_ARRAY && gold[k] == 1)) {
            bs_resp_string(why, name, len);
            if (k >= 0) {
                bs_buf_puts(why, " is listed twice");
            } else {
                bs_buf_puts(why, " is not a label of this question (labels: ");
                put_keys(why, m->label_keys, m->n_labels);
                bs_buf_putc(why, ')');
            }
            goto done;
        }
        gold[k] = v->type == BJ_ARRAY || x->type == BJ_TRUE ? 1 : 2;
    }
    rc = 0;
    for (size_t k = 0; k < m->n_labels && rc == 0; k++)
        if (gold[k]) rc = add_target(s, item, q, (int)k, NULL, 0, gold[k] == 1 ? 0 : 1, e);
done:
    free(gold);
    return rc;
}

static int add_expected(ev_set *s, size_t item, const bs_request *req, const bj_value *exp, const char *where,
                        bs_err *e) {
    if (!exp || exp->type != BJ_OBJECT || !exp->n)
        return bs_fail(e, BS_EINVAL, "%s: \"expected\" must be an object {\"<question id>\": <answer>, ...} "
                                     "naming at least one question", where);
    bs_buf why;
    bs_buf_init(&why);
    int rc = BS_OK;
    for (size_t i = 0; i < exp->n && rc == BS_OK; i++) {
        const bs_question *q = NULL;
        for (size_t k = 0; k < req->n_questions && !q; k++)
            if (text_eq(&req->questions[k].id, exp->keys[i], exp->key_lens[i])) q = &req->questions[k];
        why.len = 0;
        if (!q) {
            bs_buf_puts(&why, "no such question (questions: ");
            for (size_t k = 0; k < req->n_questions; k++) {
                bs_buf_puts(&why, k ? ", " : "");
                bs_resp_string(&why, req->questions[k].id.s, req->questions[k].id.len);
            }
            bs_buf_putc(&why, ')');
        } else if (q->type == BS_Q_MULTI) {
            rc = expected_multi(s, item, q, exp->items[i], &why, e);
        } else {
            size_t gold = 0;
            rc = expected_option(q, exp->items[i], &gold, &why) ? 1 : add_target(s, item, q, -1, q->keys, q->n_options, gold, e);
        }
        if ((rc == 1 || !q) && !why.oom) {
            bs_fail(e, BS_EINVAL, "%s: expected[\"%.*s\"]: %s", where, (int)exp->key_lens[i], exp->keys[i], why.data);
            rc = BS_EINVAL;
        } else if (why.oom) {
            rc = bs_fail(e, BS_ENOMEM, "out of memory");
        }
    }
    bs_buf_free(&why);
    return rc;
}

/* ---- validation ---- */

void ev_refusal_text(bs_buf *b, const char *body, size_t len) {
    bj_value *v = NULL;
    bs_err e = {0};
    if (bj_parse(body, len, NULL, &v, &e) != 0) {
        bs_buf_put(b, body, len);
        return;
    }
    const bj_value *d = bj_get(v, "detail");
    const bj_value *msg = d && d->type == BJ_OBJECT ? bj_get(d, "message") : NULL;
    if (msg && msg->type == BJ_STRING) bs_buf_put(b, msg->str, msg->len);
    for (size_t i = 0; d && d->type == BJ_ARRAY && i < d->n; i++) {
        const bj_value *m = bj_get(d->items[i], "msg"), *loc = bj_get(d->items[i], "loc");
        bs_buf_puts(b, i ? "; " : "");
        if (m && m->type == BJ_STRING) bs_buf_put(b, m->str, m->len);
        for (size_t k = 0; loc && loc->type == BJ_ARRAY && k < loc->n; k++) {
            bs_buf_puts(b, k ? "." : " at ");
            const bj_value *x = loc->items[k];
            bs_buf_put(b, x->str, x->len); /* strings and numbers both keep their text */
        }
    }
    if (!msg && !(d && d->type == BJ_ARRAY)) bs_buf_put(b, body, len);
    bj_free(v);
}

/* Validates the request of body (model VALIDATION_MODEL) as the endpoint
 * does; *out on success. */
static int validate(const bs_buf *body, const char *where, bs_request **out, bs_err *e) {
    bs_reply rep;
    bs_reply_init(&rep);
    bs_err ve = {0};
    int rc = bs_request_parse(body->data, body->len, BS_DIALECT_SYSTEMONE, NULL, out, &rep, &ve);
    if (rc == BS_EINVAL && rep.body.len) {
        bs_buf t;
        bs_buf_init(&t);
        ev_refusal_text(&t, rep.body.data, rep.body.len);
        rc = bs_fail(e, BS_EINVAL, "%s: the request is invalid (the endpoint would answer %d): %s", where, rep.status,
                     t.oom ? "out of memory" : t.data);
        bs_buf_free(&t);
    } else if (rc < 0) {
        rc = bs_fail(e, rc, "%s: %s", where, ve.msg);
    }
    bs_reply_free(&rep);
    return rc;
}

/* ---- the three forms ---- */

/* run.py's to_request for a simple item, with our model field. */
static int simple_body(const bj_value *rec, const char *where, bs_buf *b, size_t *n_opts, bs_err *e) {
    const bj_value *state = bj_get(rec, "state"), *question = bj_get(rec, "question"), *opts = bj_get(rec, "options");
    const bj_value *type = bj_get(rec, "type");
    if (!state) return bs_fail(e, BS_EINVAL, "%s: a basal-run item needs \"state\"", where);
    if (!question) return bs_fail(e, BS_EINVAL, "%s: a basal-run item needs \"question\" (its text)", where);
    if (!opts || opts->type != BJ_ARRAY) return bs_fail(e, BS_EINVAL, "%s: \"options\" must be a list of option texts", where);
    if (type && type->type != BJ_STRING) return bs_fail(e, BS_EINVAL, "%s: \"type\" must be a string", where);
    const char *t = type ? type->str : "choice";
    if (strcmp(t, "choice") && strcmp(t, "noul") && strcmp(t, "score"))
        return bs_fail(e, BS_EINVAL, "%s: \"type\" must be choice, noul or score (basal-run), not \"%s\"", where, t);
    if (!strcmp(t, "noul") && opts->n != 2)
        return bs_fail(e, BS_EINVAL, "%s: a noul item needs exactly two options: [yes-text, no-text]", where);
    bs_buf_puts(b, "{\"model\":\"" VALIDATION_MODEL "\",\"state\":");
    bs_resp_value(b, state);
    bs_buf_printf(b, ",\"questions\":{\"q\":{\"type\":\"%s\",\"instructions\":", t);
    bs_resp_value(b, question);
    bs_buf_puts(b, ",\"criteria\":{");
    for (size_t i = 0; i < opts->n; i++) {
        if (!strcmp(t, "noul")) bs_buf_puts(b, i ? ",\"false\":" : "\"true\":");
        else bs_buf_printf(b, i ? ",\"%zu\":" : "\"%zu\":", i);
        bs_resp_value(b, opts->items[i]);
    }
    bs_buf_puts(b, strcmp(t, "noul") ? "},\"option_keys\":\"hide\"}}}" : "}}}}");
    *n_opts = opts->n;
    return b->oom ? bs_fail(e, BS_ENOMEM, "out of memory") : BS_OK;
}

/* The request object of our form (checked to be an object) with the model
 * field set for validation. */
static int ours_body(const bj_value *rec, const char *where, bs_buf *b, bs_err *e) {
    const bj_value *rq = bj_get(rec, "request");
    if (rq->type != BJ_OBJECT)
        return bs_fail(e, BS_EINVAL, "%s: \"request\" must be a /v1/systemone request object", where);
    ev_item tmp = {.request = (bj_value *)rq};
    ev_item_body(&tmp, VALIDATION_MODEL, b);
    return b->oom ? bs_fail(e, BS_ENOMEM, "out of memory") : BS_OK;
}

/* The item's request object, kept: ours as given, a simple item's as built. */
static int keep_request(ev_item *it, const bj_value *rec, const bs_buf *body, bs_err *e) {
    const bj_value *rq = bj_get(rec, "request");
    bs_buf b;
    bs_buf_init(&b);
    if (rq) bs_resp_value(&b, rq);
    else bs_buf_put(&b, body->data, body->len);
    int rc = b.oom ? bs_fail(e, BS_ENOMEM, "out of memory") : bj_parse(b.data, b.len, NULL, &it->request, e);
    bs_buf_free(&b);
    return rc;
}

static int simple_gold(const bj_value *rec, size_t n_opts, const char *where, size_t *gold, bs_err *e) {
    const bj_value *g = bj_get(rec, "gold");
    if (!g) return 0;
    if (!is_index(g, n_opts, gold)) {
        bs_buf v;
        bs_buf_init(&v);
        bs_resp_value(&v, g);
        bs_fail(e, BS_EINVAL, "%s: \"gold\" must be the index of the right option, an integer 0..%zu (got %s)", where,
                n_opts ? n_opts - 1 : 0, v.oom ? "?" : v.data);
        bs_buf_free(&v);
        return BS_EINVAL;
    }
    return 1;
}

static void put_id(bs_buf *b, const bj_value *rec, size_t index) {
    const bj_value *id = bj_get(rec, "id");
    if (id) bs_resp_value(b, id);
    else bs_buf_printf(b, "%zu", index);
}

/* One parsed line. */
static int add_record(ev_set *s, ev_input *in, const bj_value *rec, const char *where, size_t index, bs_err *e) {
    if (rec->type != BJ_OBJECT) return bs_fail(e, BS_EINVAL, "%s: an item must be a JSON object", where);
    int ours = bj_get(rec, "request") != NULL, upstream_request = !ours && bj_get(rec, "questions") != NULL;
    if (!ours && !upstream_request && !bj_get(rec, "question") && !bj_get(rec, "options"))
        return bs_fail(e, BS_EINVAL, "%s: not an eval item: give {\"state\", \"question\", \"options\", \"gold\"} "
                                     "(basal-run) or {\"request\", \"expected\"} (see basal eval --help)", where);
    if (ours && !bj_get(rec, "expected"))
        return bs_fail(e, BS_EINVAL, "%s: an item with \"request\" needs \"expected\": {\"<question id>\": <answer>}", where);
    bs_buf body;
    bs_buf_init(&body);
    bs_request *req = NULL;
    size_t n_opts = 0, gold = 0;
    int graded = 0, rc;
    if (ours) rc = ours_body(rec, where, &body, e);
    else if (upstream_request) rc = BS_OK; /* never sent: basal-run grades no full request */
    else rc = simple_body(rec, where, &body, &n_opts, e);
    if (rc == BS_OK && !upstream_request) rc = validate(&body, where, &req, e);
    if (rc == BS_OK && !ours && !upstream_request) rc = (graded = simple_gold(rec, n_opts, where, &gold, e)) < 0 ? graded : 0;
    graded |= ours;
    if (rc == BS_OK && graded) {
        if (grow((void **)&s->items, &s->cap_items, s->n_items + 1, sizeof *s->items)) {
            rc = bs_fail(e, BS_ENOMEM, "out of memory");
            goto done;
        }
        ev_item *it = &s->items[s->n_items];
        memset(it, 0, sizeof *it);
        bs_buf id;
        bs_buf_init(&id);
        put_id(&id, rec, index);
        it->id = id.data;
        it->where = strdup(where);
        it->first_target = s->n_targets;
        s->n_items++; /* owned by s from here, freed with it on failure */
        if (!it->id || !it->where) rc = bs_fail(e, BS_ENOMEM, "out of memory");
        if (rc == BS_OK) rc = keep_request(it, rec, &body, e);
        if (rc == BS_OK)
            rc = ours ? add_expected(s, s->n_items - 1, req, bj_get(rec, "expected"), where, e)
                      : add_target(s, s->n_items - 1, &req->questions[0], -1, req->questions[0].keys,
                                   req->questions[0].n_options, gold, e);
        it->n_targets = s->n_targets - it->first_target;
    }
    if (rc == BS_OK) {
        in->items++;
        if (graded) in->graded++;
        else in->ungraded++, s->n_ungraded++;
    }
done:
    bs_request_free(req);
    bs_buf_free(&body);
    return rc;
}

static int read_input(ev_set *s, ev_input *in, bs_err *e) {
    char *text = NULL;
    size_t len = 0;
    if (cli_read_request(in->path, &text, &len) < 0) return bs_fail(e, BS_EIO, "%s: cannot be read", in->path);
    uint8_t d[32];
    bs_sha256(text, len, d);
    bs_sha256_hex(d, in->sha256);
    int rc = BS_OK;
    size_t lineno = 0;
    for (size_t at = 0; at < len && rc == BS_OK;) {
        const char *nl = memchr(text + at, '\n', len - at);
        size_t ll = nl ? (size_t)(nl - (text + at)) : len - at;
        lineno++;
        if (strspn(text + at, " \t\r") < ll) {
            char where[512];
            snprintf(where, sizeof where, "%s:%zu", in->path, lineno);
            bj_value *rec = NULL;
            bj_error je;
            bs_err pe = {0};
            if (bj_parse_ex(text + at, ll, NULL, &rec, &je, &pe) != 0) {
                if (!je.msg) rc = bs_fail(e, BS_ENOMEM, "out of memory");
                else rc = bs_fail(e, BS_EINVAL, "%s: invalid JSON: %s (column %zu)", where, je.msg, je.colno);
            } else {
                rc = add_record(s, in, rec, where, in->lines, e);
                bj_free(rec);
            }
            in->lines++;
        }
        at += ll + 1;
    }
    free(text);
    return rc;
}

int ev_set_read(ev_set *s, const char *const *paths, size_t n_paths, bs_err *e) {
    memset(s, 0, sizeof *s);
    s->inputs = calloc(n_paths ? n_paths : 1, sizeof *s->inputs);
    if (!s->inputs) return bs_fail(e, BS_ENOMEM, "out of memory");
    int rc = BS_OK;
    for (size_t i = 0; i < n_paths && rc == BS_OK; i++) {
        ev_input *in = &s->inputs[s->n_inputs++];
        if (!(in->path = strdup(paths[i]))) rc = bs_fail(e, BS_ENOMEM, "out of memory");
        else rc = read_input(s, in, e);
    }
    for (size_t g = 0; g < s->n_groups; g++) {
        s->groups[g].class_base = s->n_classes;
        s->n_classes += s->groups[g].n_classes;
    }
    if (rc < 0) ev_set_free(s);
    return rc;
}

void ev_set_free(ev_set *s) {
    for (size_t i = 0; i < s->n_inputs; i++) free(s->inputs[i].path);
    for (size_t i = 0; i < s->n_items; i++) {
        free(s->items[i].where);
        free(s->items[i].id);
        bj_free(s->items[i].request);
    }
    for (size_t i = 0; i < s->n_targets; i++) {
        free(s->targets[i].cls);
        free(s->targets[i].keys);
    }
    for (size_t g = 0; g < s->n_groups; g++) {
        for (size_t c = 0; c < s->groups[g].n_classes; c++) free(s->groups[g].classes[c]);
        free(s->groups[g].classes);
        free(s->groups[g].question);
        free(s->groups[g].label);
    }
    free(s->inputs);
    free(s->items);
    free(s->targets);
    free(s->groups);
    memset(s, 0, sizeof *s);
}
