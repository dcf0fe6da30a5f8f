/* `basal compare --a DIR --b DIR --out FILE` (spec 06 §6): two exports in the
 * reference format (bench.jsonl, systemone.jsonl) side by side, with the
 * report of basal-rs `compare` (crates/basal-cli/src/compare.rs):
 *   - exact checks of every order's prompt, input_ids, letter_ids and perm and
 *     of the packing (prefix_len, packed_len, readout_cols);
 *   - for items with identical tokens: differences b - a of letter logits,
 *     per-order probabilities, p_avg and p_cal (summaries of |x|), total
 *     variation, argmax agreement with every flip listed;
 *   - quality of both sides against `gold` (accuracy, NLL, Brier, ECE);
 *   - System One answers field by field, and the upstream-compatible endpoint
 *     (`answer_upstream` of b) against a's upstream answer.
 * The report goes to --out (never overwritten), one summary line to stderr.
 * Exit 0 when the comparison ran, whatever it found; 1 when an input cannot
 * be read or parsed (file and line named) or the output cannot be written;
 * 2 for usage errors. */
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli/cli.h"
#include "cli/parity/stats.h"
#include "protocol/pyjson.h"
#include "base/util.h"

#define CMD "compare"

/* ---- reading ---- */

/* The non-blank lines of a JSONL file as a JSON array; NULL after printing
 * "basal compare: PATH:LINE: why" or "reading PATH: why". */
static json_t *read_jsonl(const char *dir, const char *name) {
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    json_t *out = NULL;
    char *text = NULL;
    size_t len = 0;
    bs_err e = {0};
    if (bs_read_file(path, &text, &len, &e) < 0) {
        cli_error(CMD, "reading %s", e.msg);
        return NULL;
    }
    if (!(out = json_array())) goto fail;
    size_t lineno = 0;
    for (size_t i = 0; i < len;) {
        size_t j = i;
        while (j < len && text[j] != '\n') j++;
        lineno++;
        size_t e = j;
        if (e > i && text[e - 1] == '\r') e--;
        size_t k = i;
        while (k < e && strchr(" \t\r\v\f", text[k])) k++;
        if (k < e) {
            json_error_t je;
            /* a request may hold "\u0000" (02 §4.3 Q3 renders it), which serde_json reads */
            json_t *v = json_loadb(text + i, e - i, JSON_ALLOW_NUL, &je);
            if (!v) {
                cli_error(CMD, "%s:%zu: %s (column %d)", path, lineno, je.text, je.column);
                goto fail;
            }
            if (json_array_append_new(out, v) < 0) goto fail;
        }
        i = j + 1;
    }
    free(text);
    return out;
fail:
    json_decref(out);
    free(text);
    return NULL;
}

/* v[key] as serde_json's Index reads it: NULL (null) when v is not an object
 * or has no such key. */
static json_t *jget(const json_t *v, const char *key) { return json_object_get(v, key); }
static int is_null(const json_t *v) { return !v || json_is_null(v); }
/* Value equality with an absent value equal to null. */
static int jeq(const json_t *x, const json_t *y) {
    if (is_null(x) || is_null(y)) return is_null(x) && is_null(y);
    return json_equal((json_t *)x, (json_t *)y);
}
/* A new reference to v, null when absent. */
static json_t *jref(json_t *v) { return v ? json_incref(v) : json_null(); }
static const char *str_of(const json_t *v, const char *key) {
    const char *s = json_string_value(jget(v, key));
    return s ? s : "";
}
/* The numbers of an array (others skipped); 0 or -1 (out of memory). */
static int f64s(const json_t *a, ps_vec *out) {
    out->n = 0;
    size_t i;
    json_t *x;
    json_array_foreach(a, i, x)
        if (json_is_number(x) && ps_vec_push(out, json_number_value(x)) < 0) return -1;
    return 0;
}
static json_t *vec_json(const ps_vec *v) {
    json_t *a = json_array();
    for (size_t i = 0; a && i < v->n; i++)
        if (json_array_append_new(a, ps_num(v->v[i])) < 0) {
            json_decref(a);
            return NULL;
        }
    return a;
}
/* Compact JSON text of a value, as Rust's Value::to_string (the key of a
 * bench record is its `index` so printed). */
static char *value_text(const json_t *v) {
    if (is_null(v)) return strdup("null");
    if (json_is_integer(v)) {
        char b[32];
        snprintf(b, sizeof b, "%lld", (long long)json_integer_value(v));
        return strdup(b);
    }
    if (json_is_real(v)) {
        bs_buf b;
        bs_buf_init(&b);
        bs_fmt_double_shortest(json_real_value(v), &b);
        bs_buf_putc(&b, 0);
        return b.data;
    }
    return json_dumps(v, JSON_COMPACT | JSON_ENCODE_ANY | JSON_PRESERVE_ORDER);
}

/* ---- report pieces ---- */

/* Intended differences of basal-rs from upstream `to_items`: token mismatches
 * of these System One items are listed apart and left out of the numerics. */
static const char *known_deviation(const char *c, const char *item) {
    if (!strcmp(c, "so-null-and-missing-instructions") && !strcmp(item, "explicit_null"))
        return "instructions=null is treated as missing (empty); upstream renders the text \"null\"";
    if (!strcmp(c, "so-empty-structures") && !strcmp(item, "empty_true"))
        return "noul description \"\"/{} is kept; upstream replaces falsy descriptions with Tak/Nie";
    if (!strcmp(c, "so-unknown-type")) return "unknown type is a validation error; upstream treats it as choice";
    if (!strcmp(c, "so-missing-type")) return "missing type is a validation error; upstream defaults to choice";
    return NULL;
}

typedef struct {
    json_int_t orders;
    json_t *mismatches, *deviations;
    int oom;
} tokcheck;

static void add_str(json_t *list, const char *s, int *oom) {
    if (json_array_append_new(list, json_string(s)) < 0) *oom = 1;
}

/* 1 when every order and the packing agree; otherwise the record goes to the
 * mismatches (or, with a deviation, to the known deviations) and 0. */
static int tc_compare(tokcheck *tc, const char *tag, const json_t *a, const json_t *b, const char *deviation) {
    static const char *const fields[] = {"prompt", "input_ids", "letter_ids", "perm"};
    static const char *const pack[] = {"prefix_len", "packed_len", "readout_cols"};
    json_t *diffs = json_array();
    if (!diffs) return tc->oom = 1, 0;
    const json_t *ao = jget(a, "orders"), *bo = jget(b, "orders");
    size_t na = json_array_size(ao), nb = json_array_size(bo);
    char s[256];
    if (na != nb) {
        snprintf(s, sizeof s, "orders %zu vs %zu", na, nb);
        add_str(diffs, s, &tc->oom);
    }
    for (size_t k = 0; k < na && k < nb; k++) {
        tc->orders++;
        const json_t *x = json_array_get(ao, k), *y = json_array_get(bo, k);
        for (int f = 0; f < 4; f++)
            if (!jeq(jget(x, fields[f]), jget(y, fields[f]))) {
                snprintf(s, sizeof s, "order %zu: %s", k, fields[f]);
                add_str(diffs, s, &tc->oom);
            }
    }
    for (int f = 0; f < 3; f++)
        if (!jeq(jget(jget(a, "pack"), pack[f]), jget(jget(b, "pack"), pack[f]))) {
            snprintf(s, sizeof s, "pack.%s", pack[f]);
            add_str(diffs, s, &tc->oom);
        }
    if (json_array_size(diffs) == 0) {
        json_decref(diffs);
        return 1;
    }
    json_t *rec = json_pack("{s:s, s:o, s:o}", "item", tag, "differences", diffs, "reason",
                            deviation ? json_string(deviation) : json_null());
    if (json_array_append_new(deviation ? tc->deviations : tc->mismatches, rec) < 0) tc->oom = 1;
    return 0;
}

typedef struct {
    ps_vec logit, order_prob, avg, cal, tv_avg, tv_cal;
    json_t *flips_avg, *flips_cal;
    size_t items;
    int oom;
} numeric;

static void push_diffs(ps_vec *dst, const ps_vec *p, const ps_vec *q, int *oom) {
    for (size_t i = 0; i < p->n && i < q->n; i++)
        if (ps_vec_push(dst, q->v[i] - p->v[i]) < 0) *oom = 1;
}

static void flip(json_t *list, const char *tag, const ps_vec *pa, const ps_vec *pb, const json_t *a, int *oom) {
    size_t x = ps_argmax(pa->v, pa->n), y = ps_argmax(pb->v, pb->n);
    if (x == y) return;
    json_t *rec = json_pack("{s:s, s:I, s:I, s:o, s:o, s:o}", "item", tag, "a", (json_int_t)x, "b", (json_int_t)y,
                            "gold", jref(jget(a, "gold")), "a_p", vec_json(pa), "b_p", vec_json(pb));
    if (json_array_append_new(list, rec) < 0) *oom = 1;
}

/* scratch: four vectors the caller owns (reused between calls). */
static void num_add(numeric *nm, const char *tag, const json_t *a, const json_t *b, ps_vec *s) {
    nm->items++;
    const json_t *ao = jget(a, "orders"), *bo = jget(b, "orders");
    for (size_t k = 0; k < json_array_size(ao) && k < json_array_size(bo); k++) {
        const json_t *x = json_array_get(ao, k), *y = json_array_get(bo, k);
        if (f64s(jget(x, "letter_logits"), &s[0]) < 0 || f64s(jget(y, "letter_logits"), &s[1]) < 0) nm->oom = 1;
        push_diffs(&nm->logit, &s[0], &s[1], &nm->oom);
        if (f64s(jget(x, "probs"), &s[0]) < 0 || f64s(jget(y, "probs"), &s[1]) < 0) nm->oom = 1;
        push_diffs(&nm->order_prob, &s[0], &s[1], &nm->oom);
    }
    if (f64s(jget(a, "p_avg"), &s[0]) < 0 || f64s(jget(b, "p_avg"), &s[1]) < 0 || f64s(jget(a, "p_cal"), &s[2]) < 0 ||
        f64s(jget(b, "p_cal"), &s[3]) < 0)
        nm->oom = 1;
    push_diffs(&nm->avg, &s[0], &s[1], &nm->oom);
    push_diffs(&nm->cal, &s[2], &s[3], &nm->oom);
    if (ps_vec_push(&nm->tv_avg, ps_tv(s[0].v, s[0].n, s[1].v, s[1].n)) < 0 ||
        ps_vec_push(&nm->tv_cal, ps_tv(s[2].v, s[2].n, s[3].v, s[3].n)) < 0)
        nm->oom = 1;
    flip(nm->flips_avg, tag, &s[0], &s[1], a, &nm->oom);
    flip(nm->flips_cal, tag, &s[2], &s[3], a, &nm->oom);
}

static json_t *num_json(const numeric *nm) {
    char ag_avg[64], ag_cal[64];
    snprintf(ag_avg, sizeof ag_avg, "%zu/%zu", nm->items - json_array_size(nm->flips_avg), nm->items);
    snprintf(ag_cal, sizeof ag_cal, "%zu/%zu", nm->items - json_array_size(nm->flips_cal), nm->items);
    return json_pack("{s:I, s:o, s:o, s:o, s:o, s:o, s:o, s:s, s:s, s:O, s:O}", "items", (json_int_t)nm->items,
                     "letter_logit_diff", ps_summary(nm->logit.v, nm->logit.n), "order_prob_diff",
                     ps_summary(nm->order_prob.v, nm->order_prob.n), "avg_prob_diff",
                     ps_summary(nm->avg.v, nm->avg.n), "cal_prob_diff", ps_summary(nm->cal.v, nm->cal.n), "tv_avg",
                     ps_summary(nm->tv_avg.v, nm->tv_avg.n), "tv_cal", ps_summary(nm->tv_cal.v, nm->tv_cal.n),
                     "argmax_agreement_avg", ag_avg, "argmax_agreement_cal", ag_cal, "flips_avg", nm->flips_avg,
                     "flips_cal", nm->flips_cal);
}

static int num_init(numeric *nm) {
    memset(nm, 0, sizeof *nm);
    nm->flips_avg = json_array();
    nm->flips_cal = json_array();
    return nm->flips_avg && nm->flips_cal ? 0 : -1;
}

static void num_free(numeric *nm) {
    ps_vec *v[] = {&nm->logit, &nm->order_prob, &nm->avg, &nm->cal, &nm->tv_avg, &nm->tv_cal};
    for (int i = 0; i < 6; i++) ps_vec_free(v[i]);
    json_decref(nm->flips_avg);
    json_decref(nm->flips_cal);
}

/* `upstream_error`, else `error` (the first key present decides), non-null. */
static json_t *error_of(const json_t *c) {
    json_t *v = json_object_get(c, "upstream_error");
    if (!v) v = json_object_get(c, "error");
    return is_null(v) ? NULL : v;
}
static json_t *answer_of(const json_t *c) {
    json_t *v = json_object_get(c, "upstream_answer");
    if (!v) v = json_object_get(c, "answer");
    return is_null(v) ? NULL : v;
}
static const json_t *item_named(const json_t *c, const char *name) {
    size_t i;
    json_t *x;
    json_array_foreach(jget(c, "items"), i, x) if (!strcmp(str_of(x, "name"), name)) return x;
    return NULL;
}

/* Largest |x[k] - y[k]| over the keys of object x whose values are numbers in
 * both (0 when none). */
static double max_abs_obj_diff(const json_t *x, const json_t *y) {
    double m = 0;
    const char *k;
    json_t *v;
    json_object_foreach((json_t *)x, k, v) {
        json_t *w = json_object_get(y, k);
        if (json_is_number(v) && json_is_number(w)) m = fmax(m, fabs(json_number_value(v) - json_number_value(w)));
    }
    return m;
}

/* Same set of keys (two non-objects count as the same, as basal-rs's
 * Option<BTreeSet> comparison). */
static int same_key_set(const json_t *a, const json_t *b) {
    if (!json_is_object(a) || !json_is_object(b)) return json_is_object(a) == json_is_object(b);
    if (json_object_size(a) != json_object_size(b)) return 0;
    const char *k;
    json_t *v;
    json_object_foreach((json_t *)a, k, v) if (!json_object_get(b, k)) return 0;
    return 1;
}

/* Same keys in the same order. */
static int same_key_seq(const json_t *a, const json_t *b) {
    if (json_object_size(a) != json_object_size(b)) return 0;
    void *i = json_object_iter((json_t *)a), *j = json_object_iter((json_t *)b);
    for (; i && j; i = json_object_iter_next((json_t *)a, i), j = json_object_iter_next((json_t *)b, j))
        if (strcmp(json_object_iter_key(i), json_object_iter_key(j))) return 0;
    return 1;
}

static int span_eq(const json_t *x, const json_t *y) {
    return jeq(jget(x, "start"), jget(y, "start")) && jeq(jget(x, "end"), jget(y, "end")) &&
           jeq(jget(x, "text"), jget(y, "text"));
}

static json_t *spans(const json_t *ev) {
    json_t *out = json_array();
    size_t i;
    json_t *x;
    json_array_foreach(ev, i, x) json_array_append_new(
        out, json_pack("[o, o, o]", jref(jget(x, "start")), jref(jget(x, "end")), jref(jget(x, "text"))));
    return out;
}

static void set_diff(json_t *out, const char *key, const json_t *x, const json_t *y) {
    if (json_is_number(x) && json_is_number(y))
        json_object_set_new(out, key, ps_num(json_number_value(y) - json_number_value(x)));
}

/* Differences of two System One answers to the same question, as basal-rs's
 * answer_diff: probabilities, noul/score values, choice, confidence (listed
 * and differenced), the set of fields, legend, type, the multi/act fields,
 * evidence spans, set confidence and expected costs. */
static json_t *answer_diff(const json_t *a, const json_t *b) {
    json_t *out = json_pack("{s:o, s:o}", "type_a", jref(jget(a, "type")), "type_b", jref(jget(b, "type")));
    if (!out) return NULL;
    const json_t *pa = jget(a, "probabilities");
    json_object_set_new(out, "max_abs_prob_diff",
                        json_is_object(pa) ? ps_num(max_abs_obj_diff(pa, jget(b, "probabilities"))) : json_null());
    set_diff(out, "noul_diff", jget(a, "noul"), jget(b, "noul"));
    set_diff(out, "score_diff", jget(a, "score"), jget(b, "score"));
    const json_t *ca = jget(a, "choice"), *cb = jget(b, "choice");
    if (json_is_string(ca) || json_is_string(cb)) {
        json_object_set_new(out, "choice_a", jref((json_t *)ca));
        json_object_set_new(out, "choice_b", jref((json_t *)cb));
        json_object_set_new(out, "choice_same", json_boolean(jeq(ca, cb)));
    }
    json_object_set_new(out, "confidence_a", jref(jget(a, "confidence")));
    json_object_set_new(out, "confidence_b", jref(jget(b, "confidence")));
    set_diff(out, "confidence_diff", jget(a, "confidence"), jget(b, "confidence"));
    json_object_set_new(out, "fields_same", json_boolean(same_key_set(a, b)));
    if (!is_null(jget(a, "legend")) || !is_null(jget(b, "legend")))
        json_object_set_new(out, "legend_same", json_boolean(jeq(jget(a, "legend"), jget(b, "legend"))));
    json_object_set_new(out, "type_same", json_boolean(jeq(jget(a, "type"), jget(b, "type"))));
    static const char *const ext[] = {"selected", "action", "refused", "answer", "calibration", "max_error",
                                      "threshold"};
    for (int f = 0; f < 7; f++)
        if (!is_null(jget(a, ext[f])) || !is_null(jget(b, ext[f]))) {
            char key[32];
            snprintf(key, sizeof key, "%s_same", ext[f]);
            json_object_set_new(out, key, json_boolean(jeq(jget(a, ext[f]), jget(b, ext[f]))));
        }
    const json_t *ea = jget(a, "evidence"), *eb = jget(b, "evidence");
    if (json_is_array(ea) && json_is_array(eb)) {
        size_t na = json_array_size(ea), nb = json_array_size(eb);
        int same = na == nb;
        double m = 0;
        for (size_t k = 0; k < na && k < nb; k++) {
            const json_t *x = json_array_get(ea, k), *y = json_array_get(eb, k);
            if (!span_eq(x, y)) same = 0;
            const json_t *px = jget(x, "probability"), *py = jget(y, "probability");
            if (json_is_number(px) && json_is_number(py))
                m = fmax(m, fabs(json_number_value(px) - json_number_value(py)));
        }
        int first = na && nb ? span_eq(json_array_get(ea, 0), json_array_get(eb, 0)) : na == nb;
        json_object_set_new(out, "evidence_spans_same", json_boolean(same));
        json_object_set_new(out, "evidence_first_same", json_boolean(first));
        json_object_set_new(out, "evidence_max_abs_probability_diff", ps_num(m));
        json_object_set_new(out, "evidence_a", spans(ea));
        json_object_set_new(out, "evidence_b", spans(eb));
    } else if (!is_null(ea) || !is_null(eb)) {
        json_object_set_new(out, "evidence_spans_same", json_false());
    }
    set_diff(out, "set_confidence_diff", jget(a, "set_confidence"), jget(b, "set_confidence"));
    const json_t *xa = jget(a, "expected_costs"), *xb = jget(b, "expected_costs");
    if (json_is_object(xa) && json_is_object(xb)) {
        json_object_set_new(out, "expected_costs_keys_same", json_boolean(same_key_seq(xa, xb)));
        json_object_set_new(out, "expected_costs_max_abs_diff", ps_num(max_abs_obj_diff(xa, xb)));
    }
    return out;
}

/* ---- writing ---- */

static void put_pretty(bs_buf *b, const json_t *v, int depth) {
    switch (json_typeof(v)) {
    case JSON_OBJECT: {
        if (json_object_size(v) == 0) {
            bs_buf_puts(b, "{}");
            return;
        }
        bs_buf_putc(b, '{');
        int first = 1;
        for (void *it = json_object_iter((json_t *)v); it; it = json_object_iter_next((json_t *)v, it)) {
            bs_buf_puts(b, first ? "\n" : ",\n");
            first = 0;
            for (int i = 0; i <= depth; i++) bs_buf_puts(b, "  ");
            bj_put_string(b, json_object_iter_key(it), json_object_iter_key_len(it));
            bs_buf_puts(b, ": ");
            put_pretty(b, json_object_iter_value(it), depth + 1);
        }
        bs_buf_putc(b, '\n');
        for (int i = 0; i < depth; i++) bs_buf_puts(b, "  ");
        bs_buf_putc(b, '}');
        return;
    }
    case JSON_ARRAY: {
        if (json_array_size(v) == 0) {
            bs_buf_puts(b, "[]");
            return;
        }
        bs_buf_putc(b, '[');
        for (size_t k = 0; k < json_array_size(v); k++) {
            bs_buf_puts(b, k ? ",\n" : "\n");
            for (int i = 0; i <= depth; i++) bs_buf_puts(b, "  ");
            put_pretty(b, json_array_get(v, k), depth + 1);
        }
        bs_buf_putc(b, '\n');
        for (int i = 0; i < depth; i++) bs_buf_puts(b, "  ");
        bs_buf_putc(b, ']');
        return;
    }
    case JSON_STRING: bj_put_string(b, json_string_value(v), json_string_length(v)); return;
    case JSON_INTEGER: bs_buf_printf(b, "%lld", (long long)json_integer_value(v)); return;
    case JSON_REAL: bs_fmt_double_shortest(json_real_value(v), b); return;
    case JSON_TRUE: bs_buf_puts(b, "true"); return;
    case JSON_FALSE: bs_buf_puts(b, "false"); return;
    default: bs_buf_puts(b, "null"); return;
    }
}

/* 0, or -1 after printing why (an existing path is never replaced). */
static int write_report(const char *path, const json_t *r) {
    struct stat st;
    if (stat(path, &st) == 0) {
        cli_error(CMD, "%s exists; choose a new output path", path);
        return -1;
    }
    bs_buf b;
    bs_buf_init(&b);
    put_pretty(&b, r, 0);
    bs_buf_putc(&b, '\n');
    int rc = -1, fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
    if (fd < 0) {
        cli_error(CMD, errno == EEXIST ? "%s exists; choose a new output path" : "writing %s: %s", path,
                  strerror(errno));
        goto done;
    }
    size_t off = 0;
    while (off < b.len) {
        ssize_t w = write(fd, b.data + off, b.len - off);
        if (w < 0 && errno == EINTR) continue;
        if (w <= 0) break;
        off += (size_t)w;
    }
    if (off < b.len || close(fd) < 0) {
        cli_error(CMD, "writing %s: %s", path, strerror(errno));
        if (off < b.len) close(fd);
        unlink(path);
        goto done;
    }
    rc = 0;
done:
    bs_buf_free(&b);
    return rc;
}

/* ---- the comparison ---- */

static int strcmp_ptr(const void *x, const void *y) {
    return strcmp(*(const char *const *)x, *(const char *const *)y);
}

/* The last record of list whose key (by keyfn) is key, or NULL. */
static json_t *find_last(const json_t *list, char *const *keys, const char *key) {
    for (size_t i = json_array_size(list); i-- > 0;)
        if (keys[i] && !strcmp(keys[i], key)) return json_array_get(list, i);
    return NULL;
}

static char **bench_keys(const json_t *list) {
    size_t n = json_array_size(list);
    char **k = calloc(n ? n : 1, sizeof *k);
    for (size_t i = 0; k && i < n; i++) k[i] = value_text(jget(json_array_get(list, i), "index"));
    return k;
}

static void free_keys(char **k, size_t n) {
    if (!k) return;
    for (size_t i = 0; i < n; i++) free(k[i]);
    free(k);
}

typedef struct {
    json_t *a_bench, *b_bench, *a_so, *b_so;
} exports;

/* Upstream-compatible endpoint of b (`answer_upstream`) against a's upstream
 * answer; NULL when b has none. */
static json_t *upstream_case(const char *id, const json_t *a, const json_t *b) {
    json_t *ub = json_object_get(b, "answer_upstream");
    if (!ub) return NULL;
    json_t *ua = answer_of(a), *err_a = json_object_get(a, "upstream_error");
    if (is_null(err_a)) err_a = NULL;
    json_t *err_b = json_object_get(ub, "error");
    json_t *qs = json_array();
    if (ua && !err_b) {
        const json_t *ans_a = jget(ua, "answers"), *ans_b = jget(ub, "answers");
        size_t n = json_object_size(ans_a) + json_object_size(ans_b), m = 0;
        const char **names = calloc(n ? n : 1, sizeof *names);
        const char *k;
        json_t *v;
        if (names) {
            json_object_foreach((json_t *)ans_a, k, v) names[m++] = k;
            json_object_foreach((json_t *)ans_b, k, v) names[m++] = k;
            qsort(names, m, sizeof *names, strcmp_ptr);
            for (size_t i = 0; i < m; i++) {
                if (i && !strcmp(names[i], names[i - 1])) continue;
                json_t *x = json_object_get(ans_a, names[i]), *y = json_object_get(ans_b, names[i]);
                json_array_append_new(qs, x && y ? json_pack("{s:s, s:o}", "question", names[i], "diff",
                                                              answer_diff(x, y))
                                                 : json_pack("{s:s, s:b}", "question", names[i], "only_in_one", 1));
            }
        }
        free(names);
    }
    return json_pack("{s:s, s:o, s:o, s:b, s:o}", "id", id, "error_upstream", jref(err_a), "error_ours", jref(err_b),
                     "errors_agree", (err_a != NULL) == (err_b != NULL), "questions", qs);
}

static json_t *compare(const char *a_dir, const char *b_dir, const exports *x) {
    json_t *report = NULL, *missing = json_array(), *cases = json_array(), *upstream = json_array();
    tokcheck tc = {0, json_array(), json_array(), 0};
    numeric num, so_num;
    int ok_num = num_init(&num) == 0, ok_so = num_init(&so_num) == 0;
    ps_vec s[4] = {{0}}, pa = {0}, pb = {0};
    size_t nb = json_array_size(x->b_bench), nbs = json_array_size(x->b_so), nq = 0;
    char **bkeys = bench_keys(x->b_bench), **bids = calloc(nbs ? nbs : 1, sizeof *bids);
    ps_vec *q[4] = {calloc(json_array_size(x->a_bench) + 1, sizeof(ps_vec)),
                    calloc(json_array_size(x->a_bench) + 1, sizeof(ps_vec)),
                    calloc(json_array_size(x->a_bench) + 1, sizeof(ps_vec)),
                    calloc(json_array_size(x->a_bench) + 1, sizeof(ps_vec))};
    size_t *gold = calloc(json_array_size(x->a_bench) + 1, sizeof *gold);
    if (!missing || !cases || !upstream || !tc.mismatches || !tc.deviations || !ok_num || !ok_so || !bkeys || !bids ||
        !q[0] || !q[1] || !q[2] || !q[3] || !gold)
        goto done;
    for (size_t i = 0; i < nbs; i++)
        if (!(bids[i] = strdup(str_of(json_array_get(x->b_so, i), "id")))) goto done;

    size_t i;
    json_t *a;
    json_array_foreach(x->a_bench, i, a) {
        char *key = value_text(jget(a, "index"));
        if (!key) goto done;
        json_t *b = find_last(x->b_bench, bkeys, key);
        if (!b) {
            json_array_append_new(missing, json_string(key));
            free(key);
            continue;
        }
        char tag[512];
        snprintf(tag, sizeof tag, "bench/%s", key);
        free(key);
        if (!tc_compare(&tc, tag, a, b, NULL)) continue;
        num_add(&num, tag, a, b, s);
        json_t *g = jget(a, "gold");
        if (json_is_integer(g) && json_integer_value(g) >= 0) {
            gold[nq] = (size_t)json_integer_value(g);
            if (f64s(jget(a, "p_avg"), &q[0][nq]) < 0 || f64s(jget(b, "p_avg"), &q[1][nq]) < 0 ||
                f64s(jget(a, "p_cal"), &q[2][nq]) < 0 || f64s(jget(b, "p_cal"), &q[3][nq]) < 0)
                goto done;
            nq++;
        }
    }

    json_array_foreach(x->a_so, i, a) {
        const char *id = str_of(a, "id");
        json_t *b = find_last(x->b_so, bids, id);
        if (!b) {
            json_array_append_new(missing, json_string(id));
            continue;
        }
        json_t *items = json_array();
        size_t k;
        json_t *bi;
        json_array_foreach(jget(b, "items"), k, bi) {
            const char *name = str_of(bi, "name");
            const json_t *ai = item_named(a, name);
            if (!ai) {
                json_array_append_new(items, json_pack("{s:s, s:s}", "item", name, "note", "only in b"));
                continue;
            }
            char tag[1024];
            snprintf(tag, sizeof tag, "systemone/%s/%s", id, name);
            int same = tc_compare(&tc, tag, ai, bi, known_deviation(id, name));
            if (same) num_add(&so_num, tag, ai, bi, s);
            json_t *xa = answer_of(a), *xb = answer_of(b);
            json_t *ya = xa ? json_object_get(jget(xa, "answers"), name) : NULL;
            json_t *yb = xb ? json_object_get(jget(xb, "answers"), name) : NULL;
            if (f64s(jget(ai, "p_cal"), &pa) < 0 || f64s(jget(bi, "p_cal"), &pb) < 0) goto done;
            json_array_append_new(items, json_pack("{s:s, s:b, s:o, s:o}", "item", name, "tokens_identical", same,
                                                   "tv_cal", ps_num(ps_tv(pa.v, pa.n, pb.v, pb.n)), "answer",
                                                   ya && yb ? answer_diff(ya, yb) : json_null()));
        }
        const char *dev = known_deviation(id, "");
        json_array_append_new(cases, json_pack("{s:s, s:o, s:o, s:o, s:o}", "id", id, "error_a", jref(error_of(a)),
                                               "error_b", jref(error_of(b)), "deviation",
                                               dev ? json_string(dev) : json_null(), "items", items));
        json_t *u = upstream_case(id, a, b);
        if (u) json_array_append_new(upstream, u);
    }
    if (tc.oom || num.oom || so_num.oom) goto done;

    report = json_pack(
        "{s:s, s:s, s:s, s:O, s:{s:I, s:O, s:O}, s:o, s:{s:o, s:o, s:o, s:o}, s:{s:o, s:O}, s:O}", "a", a_dir, "b",
        b_dir, "sign", "differences are b - a", "missing", missing, "tokens", "orders_compared", tc.orders,
        "mismatches", tc.mismatches, "known_deviations", tc.deviations, "bench", num_json(&num), "quality", "a_avg",
        ps_quality(q[0], gold, nq), "b_avg", ps_quality(q[1], gold, nq), "a_cal", ps_quality(q[2], gold, nq),
        "b_cal", ps_quality(q[3], gold, nq), "systemone", "numeric_identical_tokens", num_json(&so_num), "cases",
        cases, "upstream_endpoint", upstream);
done:
    if (!report) cli_error(CMD, "out of memory");
    for (int k = 0; k < 4; k++) {
        ps_vec_free(&s[k]);
        for (size_t j = 0; q[k] && j <= json_array_size(x->a_bench); j++) ps_vec_free(&q[k][j]);
        free(q[k]);
    }
    ps_vec_free(&pa);
    ps_vec_free(&pb);
    free(gold);
    free_keys(bkeys, nb);
    free_keys(bids, nbs);
    if (ok_num) num_free(&num);
    if (ok_so) num_free(&so_num);
    json_decref(tc.mismatches);
    json_decref(tc.deviations);
    json_decref(missing);
    json_decref(cases);
    json_decref(upstream);
    return report;
}

/* ---- the command ---- */

const cli_doc cli_doc_compare = {
    "compare", "--a DIR --b DIR --out FILE",
    "compare two exports (reference or runtime): tokens, decisions, logit and probability differences, answers",
    "Each DIR holds bench.jsonl and systemone.jsonl in the reference format (spec 06 §6).\n"
    "Differences are b - a. The report (JSON) goes to --out, which must not exist; one summary\n"
    "line goes to stderr: token mismatches, argmax agreement (avg, cal), max |logit diff|, max TV.\n"
    "Exit status: 0 when the comparison ran (whatever it found), 1 when an input cannot be read\n"
    "or parsed or the report cannot be written, 2 for usage errors.\n",
};

int cmd_compare(int argc, char **argv) {
    const char *a_dir = NULL, *b_dir = NULL, *out = NULL;
    const cli_opt opts[] = {
        CLI_STR("--a", "DIR", "", NULL, "first export, the base of the differences (required)", &a_dir),
        CLI_STR("--b", "DIR", "", NULL, "second export (required)", &b_dir),
        CLI_STR("--out", "FILE", "", NULL, "report JSON to write; must not exist (required)", &out),
    };
    int prc = cli_parse(&cli_doc_compare, opts, CLI_N(opts), NULL, argc, argv);
    if (prc) return prc < 0 ? 0 : prc;
    if (!a_dir || !b_dir || !out) {
        cli_error(CMD, "--a DIR, --b DIR and --out FILE are required (see basal compare --help)");
        return 2;
    }
    int status = 1;
    exports x = {0};
    json_t *r = NULL;
    if (!(x.a_bench = read_jsonl(a_dir, "bench.jsonl")) || !(x.b_bench = read_jsonl(b_dir, "bench.jsonl")) ||
        !(x.b_so = read_jsonl(b_dir, "systemone.jsonl")) || !(x.a_so = read_jsonl(a_dir, "systemone.jsonl")))
        goto done;
    if (!(r = compare(a_dir, b_dir, &x))) goto done;
    if (write_report(out, r) < 0) goto done;
    const json_t *n = jget(r, "bench");
    bs_buf l;
    bs_buf_init(&l);
    bs_buf_printf(&l, "tokens: %zu mismatches; bench argmax avg ", json_array_size(jget(jget(r, "tokens"), "mismatches")));
    put_pretty(&l, jget(n, "argmax_agreement_avg"), 0);
    bs_buf_puts(&l, ", cal ");
    put_pretty(&l, jget(n, "argmax_agreement_cal"), 0);
    bs_buf_puts(&l, "; max |logit diff| ");
    put_pretty(&l, jget(jget(n, "letter_logit_diff"), "max"), 0);
    bs_buf_puts(&l, "; max TV avg ");
    put_pretty(&l, jget(jget(n, "tv_avg"), "max"), 0);
    fprintf(stderr, "%s\n", l.data ? l.data : "");
    bs_buf_free(&l);
    status = 0;
done:
    json_decref(r);
    json_decref(x.a_bench);
    json_decref(x.b_bench);
    json_decref(x.a_so);
    json_decref(x.b_so);
    return status;
}
