/* Request validation and readout items for /v1/systemone and /v1/basal
 * (spec 02 §3–§5, 01 §2.6–§2.8). The two dialects share the top level and the
 * named-option texts; their per-question rules differ (strict pydantic-style
 * schema with every error collected, versus upstream's lenient parsing with
 * one error per question). multi and act (03 §1–§2) share one builder for
 * both dialects. */
#include "protocol/request.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "protocol/request_err.h"
#include "protocol/respjson.h"

const char *bs_qtype_name(bs_qtype t) {
    switch (t) {
    case BS_Q_CHOICE: return "choice";
    case BS_Q_NOUL: return "noul";
    case BS_Q_SCORE: return "score";
    case BS_Q_MULTI: return "multi";
    case BS_Q_ACT: return "act";
    }
    return "choice";
}

static int qtype_parse(const char *s, size_t n, bs_qtype *t) {
    static const bs_qtype all[] = { BS_Q_CHOICE, BS_Q_NOUL, BS_Q_SCORE, BS_Q_MULTI, BS_Q_ACT };
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) {
        const char *name = bs_qtype_name(all[i]);
        if (strlen(name) == n && memcmp(name, s, n) == 0) {
            *t = all[i];
            return 1;
        }
    }
    return 0;
}

int bs_json_truthy(const bj_value *v) {
    if (!v) return 0;
    switch (v->type) {
    case BJ_NULL:
    case BJ_FALSE: return 0;
    case BJ_TRUE: return 1;
    /* A nonzero integer literal is at least 1 in magnitude, so strtod is 0
     * exactly for Python's falsy 0, -0, 0.0, 0e5 and underflowing floats. */
    case BJ_NUMBER: return v->str && strtod(v->str, NULL) != 0;
    case BJ_STRING: return v->len > 0;
    case BJ_ARRAY:
    case BJ_OBJECT: return v->n > 0;
    }
    return 0;
}

static int is_str(const bj_value *v, const char *s) {
    return v && v->type == BJ_STRING && v->len == strlen(s) && memcmp(v->str, s, v->len) == 0;
}

static int is_description(const bj_value *v) {
    return v->type == BJ_STRING || v->type == BJ_OBJECT || v->type == BJ_ARRAY;
}

static int is_null(const bj_value *v) { return !v || v->type == BJ_NULL; }

/* ---- step 4–5: body ---- */

int bs_body_parse(const char *data, size_t len, bs_dialect d, bj_value **out, bs_reply *rep, bs_err *e) {
    *out = NULL;
    /* json.loads on bytes drops a UTF-8 BOM; positions count from after it. */
    if (len >= 3 && memcmp(data, "\xEF\xBB\xBF", 3) == 0) {
        data += 3;
        len -= 3;
    }
    bj_parse_opts po = { .max_depth = 128 };
    bj_error pe;
    bs_err pe_err;
    int rc = bj_parse_ex(data, len, &po, out, &pe, &pe_err);
    if (rc == BS_ENOMEM || (rc < 0 && !pe.msg)) return bs_fail(e, BS_ENOMEM, "request body: out of memory");
    rep->body.len = 0;
    if (rc < 0) {
        bs_reply_json_invalid(rep, d, pe.msg, pe.pos, pe.lineno, pe.colno);
        if (rep->body.oom) return bs_fail(e, BS_ENOMEM, "request body: out of memory");
        return bs_fail(e, BS_EINVAL, "request body: %s", pe_err.msg);
    }
    if (d == BS_DIALECT_BASAL && (*out)->type != BJ_OBJECT) {
        bj_free(*out);
        *out = NULL;
        static const char not_object[] = "request body must be a JSON object";
        bs_reply_basal(rep, 422, not_object, sizeof not_object - 1);
        if (rep->body.oom) return bs_fail(e, BS_ENOMEM, "request body: out of memory");
        return bs_fail(e, BS_EINVAL, "%s", not_object);
    }
    return BS_OK;
}

const char *bs_body_model(const bj_value *body, size_t *len) {
    const bj_value *m = bj_get(body, "model");
    if (!m || m->type != BJ_STRING) return NULL;
    if (len) *len = m->len;
    return m->str;
}

/* ---- building blocks ---- */

typedef struct vctx {
    bs_dialect d;
    verrs errs;
    bs_request *r;
    int oom;
} vctx;

static int text_dup(bs_text *t, const char *s, size_t n) {
    t->s = malloc(n + 1);
    if (!t->s) return -1;
    if (n) memcpy(t->s, s, n);
    t->s[n] = 0;
    t->len = n;
    return 0;
}

/* Moves a buffer's bytes into t (the buffer is left empty). */
static int text_from_buf(bs_text *t, bs_buf *b) {
    if (b->oom) return -1;
    int rc = text_dup(t, b->data ? b->data : "", b->len);
    b->len = 0;
    return rc;
}

static int text_of(bs_text *t, const bj_value *v) {
    bs_buf b;
    bs_buf_init(&b);
    bj_pytext(v, &b);
    int rc = text_from_buf(t, &b);
    bs_buf_free(&b);
    return rc;
}

static int text_eq(const bs_text *a, const bs_text *b) {
    return a->len == b->len && (a->len == 0 || memcmp(a->s, b->s, a->len) == 0);
}

static int alloc_options(bs_question *q, size_t n) {
    q->n_options = n;
    q->keys = calloc(n ? n : 1, sizeof *q->keys);
    q->options = calloc(n ? n : 1, sizeof *q->options);
    return q->keys && q->options ? 0 : -1;
}

/* Named options (01 §2.8): raw text = key for a null description, else
 * text(description); shown = raw when the description is null, or in hide
 * mode when no other entry has the same raw text; else "<key>: <raw>". descs[i]
 * NULL means a null description. Keys must already be in q->keys. */
static int named_options(bs_question *q, const bj_value *const *descs) {
    size_t n = q->n_options;
    int rc = -1;
    char *dup = NULL;
    bs_text *raw = calloc(n ? n : 1, sizeof *raw);
    if (!raw) return -1;
    for (size_t i = 0; i < n; i++) {
        int r1 = is_null(descs[i]) ? text_dup(&raw[i], q->keys[i].s, q->keys[i].len) : text_of(&raw[i], descs[i]);
        if (r1 < 0) goto done;
    }
    /* n is at most 255 here (10 on /v1/basal), so pairwise comparison is cheap. */
    dup = calloc(n ? n : 1, 1);
    if (!dup) goto done;
    for (size_t i = 0; i < n; i++)
        for (size_t j = i + 1; j < n; j++)
            if (text_eq(&raw[i], &raw[j])) dup[i] = dup[j] = 1;
    for (size_t i = 0; i < n; i++) {
        if (is_null(descs[i]) || (q->hide && !dup[i])) {
            q->options[i] = raw[i];
            raw[i].s = NULL;
        } else {
            bs_buf b;
            bs_buf_init(&b);
            bs_buf_put(&b, q->keys[i].s, q->keys[i].len);
            bs_buf_put(&b, ": ", 2);
            bs_buf_put(&b, raw[i].s, raw[i].len);
            int r2 = text_from_buf(&q->options[i], &b);
            bs_buf_free(&b);
            if (r2 < 0) goto done;
        }
    }
    rc = 0;
done:
    for (size_t i = 0; i < n; i++) free(raw[i].s);
    free(raw);
    free(dup);
    return rc;
}

/* Distinct byte strings in first-occurrence order (a Python dict's keys); a
 * hash index keeps a body with a million list entries linear. */
typedef struct strset {
    bs_text *items; /* owned copies */
    size_t n, cap;
    size_t *slot;   /* index + 1, 0 = empty */
    size_t nslot;
} strset;

static uint64_t hash_bytes(const char *s, size_t n) {
    uint64_t h = 1469598103934665603ULL;
    for (size_t i = 0; i < n; i++) h = (h ^ (unsigned char)s[i]) * 1099511628211ULL;
    return h;
}

static void strset_free(strset *st) {
    for (size_t i = 0; i < st->n; i++) free(st->items[i].s);
    free(st->items);
    free(st->slot);
    memset(st, 0, sizeof *st);
}

static int strset_rehash(strset *st, size_t nslot) {
    size_t *slot = calloc(nslot, sizeof *slot);
    if (!slot) return -1;
    for (size_t i = 0; i < st->n; i++) {
        size_t h = (size_t)hash_bytes(st->items[i].s, st->items[i].len) & (nslot - 1);
        while (slot[h]) h = (h + 1) & (nslot - 1);
        slot[h] = i + 1;
    }
    free(st->slot);
    st->slot = slot;
    st->nslot = nslot;
    return 0;
}

/* Adds s unless present; takes ownership of s->s either way. */
static int strset_add(strset *st, bs_text *s) {
    if ((st->n + 1) * 2 > st->nslot && strset_rehash(st, st->nslot ? st->nslot * 2 : 32) < 0) goto fail;
    size_t h = (size_t)hash_bytes(s->s, s->len) & (st->nslot - 1);
    for (; st->slot[h]; h = (h + 1) & (st->nslot - 1))
        if (text_eq(&st->items[st->slot[h] - 1], s)) {
            free(s->s);
            s->s = NULL;
            return 0;
        }
    if (st->n == st->cap) {
        size_t nc = st->cap ? st->cap * 2 : 16;
        bs_text *ni = realloc(st->items, nc * sizeof *ni);
        if (!ni) goto fail;
        st->items = ni;
        st->cap = nc;
    }
    st->items[st->n] = *s;
    st->slot[h] = ++st->n;
    s->s = NULL;
    return 0;
fail:
    free(s->s);
    s->s = NULL;
    return -1;
}

/* Keys from a list (choice extension): text(element) for each, duplicates
 * collapsed; descriptions are all null. */
static int keys_from_list(const bj_value *arr, strset *st) {
    for (size_t i = 0; i < arr->n; i++) {
        bs_text t;
        if (text_of(&t, arr->items[i]) < 0 || strset_add(st, &t) < 0) return -1;
    }
    return 0;
}

static int options_from_set(bs_question *q, strset *st) {
    if (alloc_options(q, st->n) < 0) return -1;
    const bj_value **descs = calloc(st->n ? st->n : 1, sizeof *descs);
    if (!descs) return -1;
    for (size_t i = 0; i < st->n; i++) {
        q->keys[i] = st->items[i];
        st->items[i].s = NULL;
    }
    int rc = named_options(q, descs);
    free(descs);
    return rc;
}

static int options_from_object(bs_question *q, const bj_value *obj) {
    if (alloc_options(q, obj->n) < 0) return -1;
    for (size_t i = 0; i < obj->n; i++)
        if (text_dup(&q->keys[i], obj->keys[i], obj->key_lens[i]) < 0) return -1;
    return named_options(q, (const bj_value *const *)obj->items);
}

/* Score levels from an array: keys "0", "1", … and texts text(level). */
static int options_from_levels(bs_question *q, const bj_value *arr) {
    if (alloc_options(q, arr->n) < 0) return -1;
    for (size_t i = 0; i < arr->n; i++) {
        char k[24];
        int kn = snprintf(k, sizeof k, "%zu", i);
        if (text_dup(&q->keys[i], k, (size_t)kn) < 0 || text_of(&q->options[i], arr->items[i]) < 0) return -1;
    }
    return 0;
}

static int yes_no(bs_question *q, const bj_value *yes, const bj_value *no) {
    if (alloc_options(q, 2) < 0 || text_dup(&q->keys[0], "true", 4) < 0 || text_dup(&q->keys[1], "false", 5) < 0)
        return -1;
    const bj_value *side[2] = { yes, no };
    const char *dflt[2] = { bs_lang_yes(q->lang), bs_lang_no(q->lang) };
    for (int i = 0; i < 2; i++) {
        int rc = side[i] ? text_of(&q->options[i], side[i]) : text_dup(&q->options[i], dflt[i], strlen(dflt[i]));
        if (rc < 0) return -1;
    }
    return 0;
}

/* Question-level loc: body, questions, <id>; the type segment joins later. */
static vloc qloc(const bs_question *q, const char *typeseg) {
    vloc l = vloc_str(vloc_cstr(vloc_body(), "questions"), q->id.s, q->id.len);
    l.typeseg = typeseg;
    return l;
}

/* "<prefix><q>" usage message with the raw question id. */
static void usage_with_id(vctx *c, ve_kind kind, const char *prefix, const bs_question *q) {
    bs_buf b;
    bs_buf_init(&b);
    bs_buf_puts(&b, prefix);
    bs_buf_put(&b, q->id.s, q->id.len);
    if (b.oom) c->oom = 1;
    else verrs_add(&c->errs, kind, "value_error", qloc(q, NULL), b.data, b.len, NULL, 0, NULL);
    bs_buf_free(&b);
}

/* ---- /v1/systemone questions ---- */

static int so_noul(vctx *c, bs_question *q, const bj_value *qo, vloc L) {
    const bj_value *crit = bj_get(qo, "criteria");
    if (!is_null(crit) && crit->type != BJ_OBJECT) { /* N1 */
        verrs_addc(&c->errs, VE_SCHEMA, "model_type", vloc_cstr(L, "criteria"),
                   "Input should be a valid dictionary or instance of NoulCriteria", crit, 1, NULL);
        return 0;
    }
    const bj_value *side[2] = { NULL, NULL };
    static const char *const names[2] = { "true", "false" };
    int bad = 0;
    for (int i = 0; i < 2 && crit; i++) {
        const bj_value *v = bj_get(crit, names[i]);
        if (is_null(v)) continue;
        if (!is_description(v)) { /* N2 */
            verrs_union(&c->errs, vloc_cstr(vloc_cstr(L, "criteria"), names[i]), v);
            bad = 1;
        }
        side[i] = v; /* "", {}, [] are kept as given on this dialect */
    }
    return bad ? 0 : yes_no(q, side[0], side[1]);
}

static int so_choice(vctx *c, bs_question *q, const bj_value *qo, vloc L) {
    const bj_value *crit = bj_get(qo, "criteria");
    vloc LC = vloc_cstr(L, "criteria");
    if (!crit) { /* C1 */
        verrs_missing(&c->errs, LC, qo);
        return 0;
    }
    if (crit->type == BJ_OBJECT) {
        int bad = 0;
        for (size_t i = 0; i < crit->n; i++) /* C2 */
            if (!is_null(crit->items[i]) && !is_description(crit->items[i])) {
                verrs_union(&c->errs, vloc_str(LC, crit->keys[i], crit->key_lens[i]), crit->items[i]);
                bad = 1;
            }
        if (bad) return 0;
        if (crit->n == 0) { /* C5 */
            usage_with_id(c, VE_USAGE_STR, "Choice question must have at least one choice: ", q);
            return 0;
        }
        if (crit->n > BS_MAX_CHOICE_OPTIONS) { /* C6 */
            verrs_addc(&c->errs, VE_USAGE_STR, "value_error", LC, "Too many choices. Must have at most 255 choices.",
                       NULL, 0, NULL);
            return 0;
        }
        return options_from_object(q, crit);
    }
    if (crit->type == BJ_ARRAY) {
        for (size_t i = 0; i < crit->n; i++) /* C3: the first bad element only */
            if (crit->items[i]->type != BJ_STRING) {
                verrs_addc(&c->errs, VE_SCHEMA, "string_type", vloc_idx(LC, i), "Input should be a valid string",
                           crit->items[i], 1, NULL);
                return 0;
            }
        strset st = { 0 };
        int rc = keys_from_list(crit, &st);
        if (rc == 0 && st.n == 0)
            usage_with_id(c, VE_USAGE_STR, "Choice question must have at least one choice: ", q);
        else if (rc == 0 && st.n > BS_MAX_CHOICE_OPTIONS)
            verrs_addc(&c->errs, VE_USAGE_STR, "value_error", LC, "Too many choices. Must have at most 255 choices.",
                       NULL, 0, NULL);
        else if (rc == 0)
            rc = options_from_set(q, &st);
        strset_free(&st);
        return rc;
    }
    verrs_addc(&c->errs, VE_SCHEMA, "dict_type", LC, "Input should be a valid dictionary", crit, 1, NULL); /* C4 */
    return 0;
}

static int so_score(vctx *c, bs_question *q, const bj_value *qo, vloc L) {
    const char *field = "criteria";
    const bj_value *f = bj_get(qo, "criteria");
    if (is_null(f)) {
        field = "levels";
        f = bj_get(qo, "levels");
    }
    if (is_null(f)) { /* S1 */
        verrs_missing(&c->errs, vloc_cstr(L, "criteria"), qo);
        return 0;
    }
    vloc LF = vloc_cstr(L, field);
    static const char *const too_many = "Too many score levels. Must have at most 10 levels.";
    if (f->type == BJ_ARRAY) {
        if (f->n == 0) { /* S2 */
            verrs_too_short(&c->errs, LF, f);
            return 0;
        }
        int bad = 0;
        for (size_t i = 0; i < f->n; i++) /* S3 */
            if (!is_description(f->items[i])) {
                verrs_union(&c->errs, vloc_idx(LF, i), f->items[i]);
                bad = 1;
            }
        if (bad) return 0;
        if (f->n > BS_MAX_SCORE_LEVELS) { /* S4 */
            verrs_addc(&c->errs, VE_USAGE_STR, "value_error", LF, too_many, NULL, 0, NULL);
            return 0;
        }
        if (options_from_levels(q, f) < 0) return -1;
    } else if (f->type == BJ_OBJECT) {
        if (f->n == 0) { /* S5 */
            verrs_too_short(&c->errs, LF, f);
            return 0;
        }
        if (f->n > BS_MAX_SCORE_LEVELS) { /* S4 */
            verrs_addc(&c->errs, VE_USAGE_STR, "value_error", LF, too_many, NULL, 0, NULL);
            return 0;
        }
        if (options_from_object(q, f) < 0) return -1;
    } else { /* S6 */
        verrs_addc(&c->errs, VE_SCHEMA, "list_type", LF, "Input should be a valid list", f, 1, NULL);
        return 0;
    }
    q->legend = calloc(f->n, sizeof *q->legend);
    if (!q->legend) return -1;
    for (size_t i = 0; i < f->n; i++) q->legend[i] = f->items[i];
    return 0;
}

/* ---- multi and act (03 §1–§2), shared by both dialects ---- */

/* A number field's value as a double (the literal's nearest double). */
static double number_of(const bj_value *v) { return strtod(v->str, NULL); }

/* Rust's `x.trunc() as i64`: toward zero, saturating, NaN -> 0. */
static long long trunc_saturate(double x) {
    if (x != x) return 0;
    if (x >= 9223372036854775807.0) return INT64_MAX;
    if (x <= -9223372036854775808.0) return INT64_MIN;
    return (long long)x;
}

/* 03 §1.2: threshold, then max, then min: present, not null, not a number. */
static int multi_number(vctx *c, const bj_value *qo, vloc L, const char *field, const bj_value **out) {
    const bj_value *v = bj_get(qo, field);
    *out = NULL;
    if (is_null(v)) return 1;
    if (v->type != BJ_NUMBER) {
        char msg[48];
        int n = snprintf(msg, sizeof msg, "%s must be a number", field);
        verrs_add(&c->errs, VE_SCHEMA, "float_type", vloc_cstr(L, field), msg, (size_t)n, NULL, 0, NULL);
        return 0;
    }
    *out = v;
    return 1;
}

static void multi_spec_free(bs_multi_spec *m) {
    if (!m) return;
    for (size_t i = 0; i < m->n_labels; i++) {
        if (m->label_keys) free(m->label_keys[i].s);
        if (m->labels) free(m->labels[i].s);
    }
    free(m->label_keys);
    free(m->labels);
    free(m);
}

static void act_spec_free(bs_act_spec *a) {
    if (!a) return;
    for (size_t i = 0; a->actions && i < a->n_actions; i++) free(a->actions[i].s);
    free(a->actions);
    free(a->costs);
    free(a->defer.s);
    free(a->max_error);
    free(a);
}

/* 03 §1.1–§1.3: labels from an object {key: description} or a list of key
 * strings; the branch options are the default yes/no texts. */
static int ext_multi(vctx *c, bs_question *q, const bj_value *qo, vloc L) {
    const bj_value *crit = bj_get(qo, "criteria");
    vloc LC = vloc_cstr(L, "criteria");
    if (!is_null(crit) && crit->type != BJ_OBJECT && crit->type != BJ_ARRAY) {
        verrs_addc(&c->errs, VE_SCHEMA, "dict_type", LC, "multi criteria must be an object or a list", NULL, 0, NULL);
        return 0;
    }
    if (crit && crit->type == BJ_ARRAY)
        for (size_t i = 0; i < crit->n; i++)
            if (crit->items[i]->type != BJ_STRING) { /* the first bad element only */
                verrs_addc(&c->errs, VE_SCHEMA, "string_type", vloc_idx_str(LC, i), "labels must be strings", NULL,
                           0, NULL);
                return 0;
            }
    if (is_null(crit) || crit->n == 0) {
        verrs_addc(&c->errs, VE_SCHEMA, "missing", LC, "multi needs criteria", NULL, 0, NULL);
        return 0;
    }
    const bj_value *th, *mx, *mn;
    if (!multi_number(c, qo, L, "threshold", &th) || !multi_number(c, qo, L, "max", &mx) ||
        !multi_number(c, qo, L, "min", &mn))
        return 0;
    bs_multi_spec *m = calloc(1, sizeof *m);
    if (!m) return -1;
    q->multi = m;
    m->threshold = th ? number_of(th) : 0.5;
    if ((m->has_max = mx != NULL)) m->max = trunc_saturate(number_of(mx));
    if ((m->has_min = mn != NULL)) m->min = trunc_saturate(number_of(mn));
    if (crit->type == BJ_ARRAY) {
        strset st = { 0 };
        int rc = 0;
        for (size_t i = 0; i < crit->n && rc == 0; i++) {
            bs_text t;
            rc = text_dup(&t, crit->items[i]->str, crit->items[i]->len) < 0 || strset_add(&st, &t) < 0 ? -1 : 0;
        }
        if (rc == 0) {
            m->label_keys = calloc(st.n, sizeof *m->label_keys);
            m->labels = calloc(st.n, sizeof *m->labels);
            if (!m->label_keys || !m->labels) rc = -1;
        }
        for (size_t i = 0; rc == 0 && i < st.n; i++) {
            m->n_labels = i + 1;
            m->label_keys[i] = st.items[i];
            st.items[i].s = NULL;
            if (text_dup(&m->labels[i], m->label_keys[i].s, m->label_keys[i].len) < 0) rc = -1;
        }
        strset_free(&st);
        if (rc < 0) return -1;
    } else {
        m->label_keys = calloc(crit->n, sizeof *m->label_keys);
        m->labels = calloc(crit->n, sizeof *m->labels);
        if (!m->label_keys || !m->labels) return -1;
        for (size_t i = 0; i < crit->n; i++) {
            m->n_labels = i + 1;
            if (text_dup(&m->label_keys[i], crit->keys[i], crit->key_lens[i]) < 0) return -1;
            int rc = is_null(crit->items[i]) ? text_dup(&m->labels[i], crit->keys[i], crit->key_lens[i])
                                              : text_of(&m->labels[i], crit->items[i]);
            if (rc < 0) return -1;
        }
    }
    return yes_no(q, NULL, NULL);
}

static int all_yes_no_keys(const bj_value *obj) {
    for (size_t i = 0; i < obj->n; i++) {
        size_t n = obj->key_lens[i];
        const char *k = obj->keys[i];
        if (!((n == 4 && !memcmp(k, "true", 4)) || (n == 5 && !memcmp(k, "false", 5)))) return 0;
    }
    return 1;
}

/* "costs[<a>] must give a cost for every outcome [<o1>, <o2>, …]" with Rust
 * debug quoting (03 §2.3). */
static void act_row_error(vctx *c, const bs_question *q, vloc LC, const char *a, size_t an) {
    bs_buf b;
    bs_buf_init(&b);
    bs_buf_puts(&b, "costs[");
    bs_quote_debug(&b, a, an);
    bs_buf_puts(&b, "] must give a cost for every outcome [");
    for (size_t j = 0; j < q->n_options; j++) {
        if (j) bs_buf_puts(&b, ", ");
        bs_quote_debug(&b, q->keys[j].s, q->keys[j].len);
    }
    bs_buf_putc(&b, ']');
    if (b.oom) c->oom = 1;
    else verrs_add(&c->errs, VE_SCHEMA, "value_error", vloc_str(LC, a, an), b.data, b.len, NULL, 0, NULL);
    bs_buf_free(&b);
}

static void cost_error(vctx *c, vloc l) {
    verrs_addc(&c->errs, VE_SCHEMA, "float_type", l, "cost must be a number", NULL, 0, NULL);
}

/* 03 §2.3: the short form {wrong, defer} or the full form {action: {outcome:
 * cost}}. Returns 1 when the table is valid, 0 after an error, -1 on OOM. */
static int act_costs(vctx *c, bs_question *q, const bj_value *qo, vloc L, bs_act_spec *a) {
    const bj_value *costs = bj_get(qo, "costs");
    vloc LC = vloc_cstr(L, "costs");
    size_t k = q->n_options;
    if (!costs || costs->type != BJ_OBJECT || costs->n == 0) {
        verrs_addc(&c->errs, VE_SCHEMA, "missing", LC, "act needs costs", NULL, 0, NULL);
        return 0;
    }
    const bj_value *wrong = bj_get(costs, "wrong"), *defer = bj_get(costs, "defer");
    size_t named = (wrong != NULL) + (defer != NULL);
    if (named == costs->n && !(wrong && wrong->type == BJ_OBJECT)) { /* short form */
        if (!wrong || wrong->type != BJ_NUMBER) {
            cost_error(c, vloc_cstr(LC, "wrong"));
            return 0;
        }
        if (defer && defer->type != BJ_NUMBER) {
            cost_error(c, vloc_cstr(LC, "defer"));
            return 0;
        }
        double w = number_of(wrong);
        a->n_actions = k + (defer != NULL);
        a->actions = calloc(a->n_actions, sizeof *a->actions);
        a->costs = calloc(a->n_actions * k, sizeof *a->costs);
        if (!a->actions || !a->costs) return -1;
        for (size_t y = 0; y < k; y++) {
            if (text_dup(&a->actions[y], q->keys[y].s, q->keys[y].len) < 0) return -1;
            for (size_t z = 0; z < k; z++) a->costs[y * k + z] = z == y ? 0.0 : w;
        }
        if (defer) {
            if (text_dup(&a->actions[k], "defer", 5) < 0 || text_dup(&a->defer, "defer", 5) < 0) return -1;
            for (size_t z = 0; z < k; z++) a->costs[k * k + z] = number_of(defer);
        }
        return 1;
    }
    /* full form: rows in request order, each exactly the outcomes */
    a->actions = calloc(costs->n, sizeof *a->actions);
    a->costs = calloc(costs->n * (k ? k : 1), sizeof *a->costs);
    if (!a->actions || !a->costs) return -1;
    for (size_t i = 0; i < costs->n; i++) {
        const bj_value *row = costs->items[i];
        const char *an = costs->keys[i];
        size_t al = costs->key_lens[i];
        int ok = row->type == BJ_OBJECT && row->n == k;
        for (size_t z = 0; ok && z < k; z++) {
            int found = 0;
            for (size_t j = 0; j < row->n && !found; j++)
                found = row->key_lens[j] == q->keys[z].len && !memcmp(row->keys[j], q->keys[z].s, q->keys[z].len);
            ok = found;
        }
        if (!ok) {
            act_row_error(c, q, LC, an, al);
            return 0;
        }
        for (size_t z = 0; z < k; z++) {
            size_t j = 0;
            while (row->key_lens[j] != q->keys[z].len || memcmp(row->keys[j], q->keys[z].s, q->keys[z].len)) j++;
            if (row->items[j]->type != BJ_NUMBER) {
                cost_error(c, vloc_str(vloc_str(LC, an, al), row->keys[j], row->key_lens[j]));
                return 0;
            }
            a->costs[i * k + z] = number_of(row->items[j]);
        }
        a->n_actions = i + 1;
        if (text_dup(&a->actions[i], an, al) < 0) return -1;
    }
    const bj_value *da = bj_get(qo, "defer_action");
    if (da && da->type == BJ_STRING && da->len > 0) {
        if (text_dup(&a->defer, da->str, da->len) < 0) return -1;
    } else {
        static const char *const names[2] = { "defer", "human" };
        for (int n = 0; n < 2 && !a->defer.s; n++)
            for (size_t i = 0; i < a->n_actions; i++)
                if (a->actions[i].len == strlen(names[n]) && !memcmp(a->actions[i].s, names[n], a->actions[i].len)) {
                    if (text_dup(&a->defer, names[n], strlen(names[n])) < 0) return -1;
                    break;
                }
    }
    return 1;
}

/* 03 §2.5 rule 1: Python str() of the max_error number. An integer literal as
 * written (json.loads gives an int; "-0" is 0), otherwise repr of the double. */
static int max_error_key(const bj_value *v, char **out) {
    bs_buf b;
    bs_buf_init(&b);
    if (!strpbrk(v->str, ".eE")) bs_buf_puts(&b, strcmp(v->str, "-0") ? v->str : "0");
    else bj_fmt_pyfloat(number_of(v), &b);
    bs_buf_putc(&b, 0);
    if (b.oom) {
        bs_buf_free(&b);
        return -1;
    }
    *out = b.data; /* ownership moves to the spec */
    return 0;
}

/* 03 §2.1–§2.5: the readout base (noul, or choice/score with the choice rules
 * C1–C6), then the costs, then max_error; the first failure only. */
static int ext_act(vctx *c, bs_question *q, const bj_value *qo, vloc L) {
    const bj_value *crit = bj_get(qo, "criteria"), *base = bj_get(qo, "base");
    int noul = (crit && crit->type == BJ_OBJECT && all_yes_no_keys(crit)) || is_str(base, "noul") ||
               (is_null(crit) && !base);
    size_t start = c->errs.n;
    bs_qtype bt = BS_Q_NOUL;
    if (noul) {
        /* a criteria that is not an object is dropped; N1 cannot apply */
        int rc = !is_null(crit) && crit->type != BJ_OBJECT ? yes_no(q, NULL, NULL) : so_noul(c, q, qo, L);
        if (rc < 0) return -1;
    } else {
        if (base && base->type == BJ_STRING && !is_str(base, "choice") && !is_str(base, "score")) {
            bs_buf b;
            bs_buf_init(&b);
            bs_buf_puts(&b, "unsupported act base ");
            bs_quote_debug(&b, base->str, base->len);
            if (b.oom) c->oom = 1;
            else verrs_add(&c->errs, VE_SCHEMA, "literal_error", vloc_cstr(L, "base"), b.data, b.len, NULL, 0, NULL);
            bs_buf_free(&b);
            return 0;
        }
        bt = is_str(base, "score") ? BS_Q_SCORE : BS_Q_CHOICE;
        if (so_choice(c, q, qo, L) < 0) return -1;
    }
    if (c->errs.n > start || !q->keys) return 0;
    bs_act_spec *a = calloc(1, sizeof *a);
    if (!a) return -1;
    q->act = a;
    a->base = bt;
    int rc = act_costs(c, q, qo, L, a);
    if (rc <= 0) return rc;
    const bj_value *me = bj_get(qo, "max_error");
    if (!is_null(me)) {
        if (me->type != BJ_NUMBER) {
            verrs_addc(&c->errs, VE_SCHEMA, "float_type", vloc_cstr(L, "max_error"), "max_error must be a number",
                       NULL, 0, NULL);
            return 0;
        }
        if (max_error_key(me, &a->max_error) < 0) return -1;
    }
    return 0;
}

static int so_question(vctx *c, bs_question *q, const bj_value *qo) {
    if (qo->type != BJ_OBJECT) { /* Q1 */
        verrs_addc(&c->errs, VE_SCHEMA, "model_attributes_type", qloc(q, NULL),
                   "Input should be a valid dictionary or object to extract fields from", qo, 1, NULL);
        return 0;
    }
    size_t start = c->errs.n;
    const bj_value *t = bj_get(qo, "type");
    int known = 0;
    if (!t) { /* Q2 */
        verrs_addc(&c->errs, VE_SCHEMA, "union_tag_not_found", qloc(q, NULL),
                   "Unable to extract tag using discriminator 'type'", qo, 1, "{\"discriminator\":\"'type'\"}");
    } else if (t->type == BJ_STRING) {
        known = qtype_parse(t->str, t->len, &q->type);
        if (!known) { /* Q3 */
            bs_buf b;
            bs_buf_init(&b);
            bs_buf_puts(&b, "Invalid request. Unknown question type ");
            bs_quote_debug(&b, t->str, t->len);
            bs_buf_puts(&b, " (choice, noul, score): ");
            bs_buf_put(&b, q->id.s, q->id.len);
            if (b.oom) c->oom = 1;
            else verrs_add(&c->errs, VE_USAGE_OBJ, "value_error", qloc(q, NULL), b.data, b.len, NULL, 0, NULL);
            bs_buf_free(&b);
        }
    } else { /* Q4 */
        bs_buf b;
        bs_buf_init(&b);
        bs_buf_puts(&b, "Invalid request. Question type ");
        bs_resp_value(&b, t);
        bs_buf_puts(&b, " is not a string: ");
        bs_buf_put(&b, q->id.s, q->id.len);
        if (b.oom) c->oom = 1;
        else verrs_add(&c->errs, VE_USAGE_OBJ, "value_error", qloc(q, NULL), b.data, b.len, NULL, 0, NULL);
        bs_buf_free(&b);
    }
    vloc L = qloc(q, known ? bs_qtype_name(q->type) : NULL);
    const bj_value *ins = bj_get(qo, "instructions");
    if (is_null(ins)) {
        if (text_dup(&q->instructions, "", 0) < 0) return -1;
    } else if (is_description(ins)) {
        if (text_of(&q->instructions, ins) < 0) return -1;
    } else { /* Q5 */
        verrs_union(&c->errs, vloc_cstr(L, "instructions"), ins);
    }
    const bj_value *ok = bj_get(qo, "option_keys");
    if (is_str(ok, "hide")) q->hide = 1;
    else if (!is_null(ok) && !is_str(ok, "show")) /* Q6 */
        verrs_addc(&c->errs, VE_SCHEMA, "literal_error", vloc_cstr(L, "option_keys"),
                   "option_keys must be \"show\" or \"hide\"", NULL, 0, NULL);
    if (!known) return 0;
    q->lang = bs_lang_detect(c->r->state.s, c->r->state.len, q->instructions.s, q->instructions.len);
    q->evidence = bs_json_truthy(bj_get(qo, "evidence"));
    switch (q->type) {
    case BS_Q_NOUL:
        if (is_null(ins) && is_null(bj_get(qo, "criteria"))) { /* Q7 replaces the question's other errors */
            verrs_truncate(&c->errs, start);
            usage_with_id(c, VE_USAGE_STR, "Noul question must have criteria or instructions: ", q);
            return 0;
        }
        return so_noul(c, q, qo, L);
    case BS_Q_CHOICE: return so_choice(c, q, qo, L);
    case BS_Q_SCORE: return so_score(c, q, qo, L);
    case BS_Q_MULTI: return ext_multi(c, q, qo, L);
    case BS_Q_ACT: return ext_act(c, q, qo, L);
    }
    return 0;
}

/* ---- /v1/basal questions (upstream to_items as ported by basal-rs) ---- */

static void basal_error(vctx *c, const bs_question *q, const char *field, const char *msg, size_t n) {
    vloc l = qloc(q, NULL);
    if (field) l = vloc_cstr(l, field);
    verrs_add(&c->errs, VE_SCHEMA, "value_error", l, msg, n, NULL, 0, NULL);
}

static void basal_errorc(vctx *c, const bs_question *q, const char *field, const char *msg) {
    basal_error(c, q, field, msg, strlen(msg));
}

static int ba_question(vctx *c, bs_question *q, const bj_value *qo) {
    if (qo->type != BJ_OBJECT) {
        basal_errorc(c, q, NULL, "question must be an object");
        return 0;
    }
    const bj_value *t = bj_get(qo, "type");
    q->type = BS_Q_CHOICE;
    if (t && t->type == BJ_STRING && !qtype_parse(t->str, t->len, &q->type)) q->uncalibrated = 1;
    const bj_value *ins = bj_get(qo, "instructions");
    /* upstream renders json.dumps(None): an explicit null is the text "null" */
    if ((ins ? text_of(&q->instructions, ins) : text_dup(&q->instructions, "", 0)) < 0) return -1;
    q->lang = bs_lang_detect(c->r->state.s, c->r->state.len, q->instructions.s, q->instructions.len);
    q->evidence = bs_json_truthy(bj_get(qo, "evidence"));
    const bj_value *ok = bj_get(qo, "option_keys");
    if (is_str(ok, "hide")) {
        q->hide = 1;
    } else if (ok && !is_str(ok, "show")) {
        bs_buf b;
        bs_buf_init(&b);
        bs_buf_puts(&b, "option_keys must be \"show\" or \"hide\", got ");
        bs_resp_value(&b, ok);
        if (b.oom) c->oom = 1;
        else basal_error(c, q, "option_keys", b.data, b.len);
        bs_buf_free(&b);
        return 0;
    }
    const bj_value *crit = bj_get(qo, "criteria");
    switch (q->type) {
    /* multi and act use the /v1/systemone builders (02 §5.1); act then
     * takes the 2..10 rule below, multi has none. */
    case BS_Q_MULTI: return ext_multi(c, q, qo, qloc(q, "multi"));
    case BS_Q_ACT: {
        size_t start = c->errs.n;
        if (ext_act(c, q, qo, qloc(q, "act")) < 0) return -1;
        if (c->errs.n > start) return 0;
        break;
    }
    case BS_Q_NOUL: {
        const bj_value *side[2] = { NULL, NULL };
        if (bs_json_truthy(crit)) {
            if (crit->type != BJ_OBJECT) {
                basal_errorc(c, q, "criteria", "noul criteria must be an object");
                return 0;
            }
            /* upstream truthiness: every falsy side falls back to Tak/Nie */
            side[0] = bs_json_truthy(bj_get(crit, "true")) ? bj_get(crit, "true") : NULL;
            side[1] = bs_json_truthy(bj_get(crit, "false")) ? bj_get(crit, "false") : NULL;
        }
        if (yes_no(q, side[0], side[1]) < 0) return -1;
        break;
    }
    case BS_Q_SCORE: {
        const bj_value *f = bs_json_truthy(crit) ? crit : NULL;
        if (!f && bs_json_truthy(bj_get(qo, "levels"))) f = bj_get(qo, "levels");
        int rc = 0;
        /* Out-of-range counts are only reported, so nothing is built for them. */
        if (!f) rc = alloc_options(q, 0);
        else if ((f->type == BJ_OBJECT || f->type == BJ_ARRAY) && (f->n < 2 || f->n > BS_MAX_LETTER_OPTIONS))
            q->n_options = f->n;
        else if (f->type == BJ_OBJECT) rc = options_from_object(q, f);
        else if (f->type == BJ_ARRAY) rc = options_from_levels(q, f);
        else {
            basal_errorc(c, q, "criteria", "score criteria must be a list or an object");
            return 0;
        }
        if (rc < 0) return -1;
        break;
    }
    case BS_Q_CHOICE: {
        int rc = 0;
        if (!bs_json_truthy(crit)) {
            rc = alloc_options(q, 0);
        } else if (crit->type == BJ_OBJECT) {
            if (crit->n < 2 || crit->n > BS_MAX_LETTER_OPTIONS) q->n_options = crit->n;
            else rc = options_from_object(q, crit);
        } else if (crit->type == BJ_ARRAY) {
            strset st = { 0 };
            rc = keys_from_list(crit, &st);
            if (rc == 0 && st.n >= 2 && st.n <= BS_MAX_LETTER_OPTIONS) rc = options_from_set(q, &st);
            else q->n_options = st.n;
            strset_free(&st);
        } else {
            basal_errorc(c, q, "criteria", "criteria must be an object or a list");
            return 0;
        }
        if (rc < 0) return -1;
        break;
    }
    }
    if (q->n_options < 2 || q->n_options > BS_MAX_LETTER_OPTIONS) {
        bs_buf b;
        bs_buf_init(&b);
        bs_buf_puts(&b, "question ");
        bs_quote_debug(&b, q->id.s, q->id.len);
        bs_buf_printf(&b, ": %zu options (supported: 2..%d)", q->n_options, BS_MAX_LETTER_OPTIONS);
        if (b.oom) c->oom = 1;
        else basal_error(c, q, "criteria", b.data, b.len);
        bs_buf_free(&b);
    }
    return 0;
}

/* ---- top level ---- */

static size_t utf8_chars(const char *s, size_t n) {
    size_t k = 0;
    for (size_t i = 0; i < n; i++) k += ((unsigned char)s[i] & 0xC0) != 0x80;
    return k;
}

static int validate(vctx *c, const bs_request_opts *opts) {
    bs_request *r = c->r;
    const bj_value *body = r->body;
    int so = c->d == BS_DIALECT_SYSTEMONE;
    vloc B = vloc_body();
    if (body->type != BJ_OBJECT) { /* T1 (only /v1/systemone gets here) */
        verrs_addc(&c->errs, VE_SCHEMA, "model_attributes_type", B,
                   "Input should be a valid dictionary or object to extract fields from", body, 1, NULL);
        return 0;
    }
    const bj_value *model = bj_get(body, "model");
    if (model && model->type == BJ_STRING) {
        r->model = model->str;
        r->model_len = model->len;
    } else if (so && !model) { /* T2 */
        verrs_missing(&c->errs, vloc_cstr(B, "model"), body);
    } else if (so) { /* T3 */
        verrs_addc(&c->errs, VE_SCHEMA, "string_type", vloc_cstr(B, "model"), "Input should be a valid string",
                   model, 1, NULL);
    }
    const bj_value *state = bj_get(body, "state");
    int state_ok = 0;
    if (is_null(state)) { /* T4 */
        verrs_missing(&c->errs, vloc_cstr(B, "state"), body);
    } else if (so && !is_description(state)) { /* T5 */
        verrs_union(&c->errs, vloc_cstr(B, "state"), state);
    } else {
        free(r->state.s);
        r->state.s = NULL;
        if (text_of(&r->state, state) < 0) return -1;
        state_ok = 1;
    }
    const bj_value *qs = bj_get(body, "questions");
    int qs_ok = 0;
    if (!qs) verrs_missing(&c->errs, vloc_cstr(B, "questions"), body); /* T6 */
    else if (qs->type == BJ_OBJECT && qs->n == 0) verrs_too_short(&c->errs, vloc_cstr(B, "questions"), qs); /* T7 */
    else if (qs->type != BJ_OBJECT) /* T8 */
        verrs_addc(&c->errs, VE_SCHEMA, "dict_type", vloc_cstr(B, "questions"), "Input should be a valid dictionary",
                   qs, 1, NULL);
    else qs_ok = 1;
    const bj_value *facts = bj_get(body, "facts");
    if (is_str(facts, "auto")) {
        r->facts_auto = 1;
        if (state_ok) {
            r->facts_limit = utf8_chars(r->state.s, r->state.len);
            if (opts && opts->facts) {
                bs_buf out, msg;
                bs_buf_init(&out);
                bs_buf_init(&msg);
                int rc = opts->facts(opts->facts_ctx, r->state.s, r->state.len, &out, &msg);
                if (rc == 0 && !out.oom) {
                    free(r->state.s);
                    rc = text_from_buf(&r->state, &out);
                    r->facts_applied = 1;
                } else if (rc == 1 && !msg.oom) { /* T10 */
                    verrs_add(&c->errs, VE_SCHEMA, "value_error", vloc_cstr(B, "state"), msg.data ? msg.data : "",
                              msg.len, NULL, 0, NULL);
                    rc = 0;
                } else if (rc >= 0) {
                    rc = -1;
                }
                bs_buf_free(&out);
                bs_buf_free(&msg);
                if (rc < 0) return -1;
            }
        }
    } else if (!is_null(facts) && !is_str(facts, "off")) { /* T9 */
        verrs_addc(&c->errs, VE_SCHEMA, "literal_error", vloc_cstr(B, "facts"), "facts must be \"off\" or \"auto\"",
                   NULL, 0, NULL);
    }
    if (!qs_ok) return 0;
    for (size_t i = 0; i < qs->n; i++) { /* T11 */
        const bj_value *qo = qs->items[i];
        if (is_str(bj_get(qo, "type"), "multi") && bs_json_truthy(bj_get(qo, "evidence"))) {
            vloc l = vloc_str(vloc_cstr(B, "questions"), qs->keys[i], qs->key_lens[i]);
            verrs_addc(&c->errs, VE_SCHEMA, "value_error", vloc_cstr(l, "evidence"),
                       "evidence is not supported for multi", NULL, 0, NULL);
        }
    }
    /* /v1/systemone reports every error at once; /v1/basal looks at the
     * questions only with a usable state (basal-rs). */
    if (!so && !state_ok) return 0;
    r->questions = calloc(qs->n, sizeof *r->questions);
    if (!r->questions) return -1;
    r->n_questions = qs->n;
    for (size_t i = 0; i < qs->n; i++) {
        bs_question *q = &r->questions[i];
        if (text_dup(&q->id, qs->keys[i], qs->key_lens[i]) < 0) return -1;
        q->raw = qs->items[i];
        int rc = so ? so_question(c, q, qs->items[i]) : ba_question(c, q, qs->items[i]);
        if (rc < 0 || c->oom || c->errs.oom) return -1;
    }
    return 0;
}

void bs_request_free(bs_request *r) {
    if (!r) return;
    for (size_t i = 0; i < r->n_questions; i++) {
        bs_question *q = &r->questions[i];
        free(q->id.s);
        free(q->instructions.s);
        for (size_t k = 0; q->keys && k < q->n_options; k++) free(q->keys[k].s);
        for (size_t k = 0; q->options && k < q->n_options; k++) free(q->options[k].s);
        free(q->keys);
        free(q->options);
        free(q->legend);
        multi_spec_free(q->multi);
        act_spec_free(q->act);
    }
    free(r->questions);
    free(r->state.s);
    bj_free(r->body);
    free(r);
}

int bs_request_validate(bj_value *body, bs_dialect d, const bs_request_opts *opts, bs_request **out,
                        bs_reply *rep, bs_err *e) {
    *out = NULL;
    int rc = BS_OK;
    vctx c;
    memset(&c, 0, sizeof c);
    c.d = d;
    c.r = calloc(1, sizeof *c.r);
    if (!c.r) {
        bj_free(body);
        return bs_fail(e, BS_ENOMEM, "request: out of memory");
    }
    c.r->dialect = d;
    c.r->body = body;
    if (!body) {
        rc = bs_fail(e, BS_EINVAL, "request: no body");
        goto done;
    }
    if (text_dup(&c.r->state, "", 0) < 0 || validate(&c, opts) < 0 || c.oom || c.errs.oom) {
        rc = bs_fail(e, BS_ENOMEM, "request: out of memory");
        goto done;
    }
    if (c.errs.n) {
        verrs_reply(&c.errs, d, rep);
        rc = rep->body.oom ? bs_fail(e, BS_ENOMEM, "request: out of memory")
                           : bs_fail(e, BS_EINVAL, "request: %zu validation error(s)", c.errs.n);
        goto done;
    }
    *out = c.r;
    c.r = NULL;
done:
    verrs_free(&c.errs);
    bs_request_free(c.r);
    return rc;
}

int bs_request_parse(const char *data, size_t len, bs_dialect d, const bs_request_opts *opts,
                     bs_request **out, bs_reply *rep, bs_err *e) {
    bj_value *body = NULL;
    *out = NULL;
    int rc = bs_body_parse(data, len, d, &body, rep, e);
    if (rc < 0) return rc;
    return bs_request_validate(body, d, opts, out, rep, e);
}

/* ---- step 9 ---- */

int bs_request_check_capability(const bs_request *r, const bs_caps *caps, bs_reply *rep, bs_err *e) {
    verrs errs = { 0 };
    int rc = BS_OK;
    vloc B = vloc_body();
    for (size_t i = 0; i < r->n_questions; i++) {
        const bs_question *q = &r->questions[i];
        vloc L = vloc_str(vloc_cstr(B, "questions"), q->id.s, q->id.len);
        if (q->type == BS_Q_ACT && q->n_options == 1) { /* 02 §4.4 */
            verrs_addc(&errs, VE_SCHEMA, "unsupported_single_option", vloc_cstr(L, "criteria"),
                       "act with a single option/level is not supported yet: its expected behaviour is unresolved",
                       NULL, 0, NULL);
        } else if (q->type == BS_Q_ACT && q->n_options > BS_MAX_LETTER_OPTIONS) {
            bs_buf b;
            bs_buf_init(&b);
            bs_buf_printf(&b, "%zu options: the letter readout of the model reads 2..10; only choice questions take "
                              "more (the grouped 11..255 strategy)", q->n_options);
            if (!b.oom)
                verrs_add(&errs, VE_SCHEMA, "unsupported_option_count", vloc_cstr(L, "criteria"), b.data, b.len,
                          NULL, 0, NULL);
            else errs.oom = 1;
            bs_buf_free(&b);
        }
    }
    if (r->facts_auto && !r->facts_applied)
        verrs_addc(&errs, VE_SCHEMA, "unsupported_feature", vloc_cstr(B, "facts"),
                   "facts \"auto\" is not available on this server yet", NULL, 0, NULL);
    if (!errs.n) {
        for (size_t i = 0; i < r->n_questions; i++) {
            const bs_question *q = &r->questions[i];
            if (!q->evidence) continue;
            vloc L = vloc_cstr(vloc_str(vloc_cstr(B, "questions"), q->id.s, q->id.len), "evidence");
            if (!caps || !caps->evidence_head)
                verrs_addc(&errs, VE_SCHEMA, "unsupported_feature", L,
                           "evidence is not available for this model (no evidence_head.pt)", NULL, 0, NULL);
            else if (q->n_options > BS_MAX_LETTER_OPTIONS)
                verrs_addc(&errs, VE_SCHEMA, "unsupported_feature", L, "evidence needs at most 10 options", NULL, 0,
                           NULL);
        }
    }
    if (errs.oom) {
        rc = bs_fail(e, BS_ENOMEM, "request: out of memory");
    } else if (errs.n) {
        verrs_reply_unsupported(&errs, r->dialect, rep);
        rc = rep->body.oom ? bs_fail(e, BS_ENOMEM, "request: out of memory")
                           : bs_fail(e, BS_EINVAL, "request: %zu unsupported feature(s)", errs.n);
    }
    verrs_free(&errs);
    return rc;
}
