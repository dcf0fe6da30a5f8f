#include "engine/plan.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "decision/act.h"
#include "engine/plan_int.h"
#include "decision/decide.h"
#include "facts/facts.h"
#include "protocol/respjson.h"
#include "engine/evidence_run.h"
#include "engine/triesize.h"

void bs_letter_cache_init(bs_letter_cache *c) {
    memset(c, 0, sizeof *c);
    pthread_mutex_init(&c->mu, NULL);
}

void bs_letter_cache_free(bs_letter_cache *c) { pthread_mutex_destroy(&c->mu); }

/* 01 §5: tokenize prompt + letter for each of the first k letters; each must
 * add exactly one id to the prompt's ids, and the k ids must differ. */
static int compute_letters(const bs_basal_model *m, const bs_order *o, size_t k, int32_t *ids, bs_err *e) {
    bs_buf s;
    bs_buf_init(&s);
    int ok = 1, rc = BS_OK;
    for (size_t i = 0; i < k && ok; i++) {
        s.len = 0;
        bs_buf_put(&s, o->prompt.data, o->prompt.len);
        bs_buf_putc(&s, BS_LETTERS[i]);
        if (s.oom) { rc = bs_fail(e, BS_ENOMEM, "out of memory"); break; }
        int32_t *t = NULL;
        size_t n = 0;
        if ((rc = bs_tokenizer_encode(m->tok, s.data, s.len, &t, &n, NULL, e)) < 0) break;
        ok = n == (size_t)o->n_ids + 1 && memcmp(t, o->ids, (size_t)o->n_ids * sizeof *t) == 0;
        if (ok) ids[i] = t[n - 1];
        free(t);
        for (size_t j = 0; ok && j < i; j++) ok = ids[j] != ids[i];
    }
    bs_buf_free(&s);
    return rc < 0 ? rc : ok;
}

static int letters_for(const bs_basal_model *m, bs_letter_cache *lc, const bs_order *o, size_t k, int32_t *ids,
                       bs_err *e) {
    pthread_mutex_lock(&lc->mu);
    int rc = BS_OK;
    if (lc->state[k] == 0) {
        int32_t got[BS_MAX_LETTER_OPTIONS];
        rc = compute_letters(m, o, k, got, e);
        if (rc >= 0) {
            lc->state[k] = rc ? 1 : -1;
            memcpy(lc->ids[k], got, sizeof got);
            rc = BS_OK;
        }
    }
    if (rc == BS_OK) {
        if (lc->state[k] > 0) memcpy(ids, lc->ids[k], k * sizeof *ids);
        else rc = 1; /* not single tokens */
    }
    pthread_mutex_unlock(&lc->mu);
    return rc;
}

static int item_state_len(const bs_basal_model *m, const bs_request *r, const bs_question *q, bs_item *it,
                          bs_err *e);

static void items_free(bs_item *items, size_t n) {
    for (size_t i = 0; i < n; i++)
        for (int o = 0; o < BS_N_ORDERS; o++) { /* unused orders are zeroed */
            bs_buf_free(&items[i].orders[o].prompt);
            free(items[i].orders[o].ids);
            free(items[i].orders[o].lens);
        }
    free(items);
}

void bs_plan_free(bs_plan *p) {
    bs_request_free(p->req);
    items_free(p->items, p->n_items);
    items_free(p->finals, p->n_finals);
    free(p->lcs);
    bs_ev_free(p);
    memset(p, 0, sizeof *p);
}

/* A request over one of the limits: 422 in the unsupported shape. */
static int over_limit(bs_reply *rep, bs_dialect d, const char *type, const char *msg) {
    bs_unsupported u;
    bs_unsupported_init(&u, d);
    bs_unsupported_add(&u, type, NULL, 0, msg);
    bs_unsupported_reply(&u, rep);
    bs_unsupported_free(&u);
    return BS_EINVAL;
}

static int too_many_tokens(bs_reply *rep, bs_dialect d, const bs_plan_limits *lim) {
    char msg[200];
    snprintf(msg, sizeof msg,
             "the prompts of this request hold more than %lld distinct tokens, the server's limit "
             "(max_request_tokens); ask fewer questions or send a shorter state",
             (long long)lim->max_request_tokens);
    return over_limit(rep, d, "request_too_long", msg);
}

/* A choice with 11..255 options (03 §5); validation and the capability check
 * let no other question with more than ten options through. */
int bs_plan_is_large_choice(const bs_question *q) { return q->n_options > BS_MAX_LETTER_OPTIONS; }

/* Round-1 items of one question: a multi question has one per label, a large
 * choice one per group (04 §3 P2). */
size_t bs_plan_question_items(const bs_question *q) {
    if (q->n_options < 2) return 0;
    if (bs_plan_is_large_choice(q)) {
        int np = bs_lc_prompt_count((int)q->n_options);
        return np > BS_LC_ROUND2_PROMPTS ? (size_t)(np - BS_LC_ROUND2_PROMPTS) : 0;
    }
    return q->multi ? q->multi->n_labels : 1;
}

/* 04 §3 P3 for one order whose perm is set: the prompt over opts[perm[0..k)],
 * tokenized whole. */
static int build_order(bs_order *od, const bs_basal_model *m, const bs_request *r, const bs_question *q,
                       const bs_text *qtext, size_t k, bs_err *e) {
    int rc = bs_prompt_build_parts(&od->prompt, m->bos, strlen(m->bos), q->lang, &r->state, qtext, q->options,
                                   od->perm, k, &od->parts, e);
    if (rc < 0) return rc;
    if (od->prompt.oom) return bs_fail(e, BS_ENOMEM, "out of memory");
    size_t n = 0;
    if ((rc = bs_tokenizer_encode(m->tok, od->prompt.data, od->prompt.len, &od->ids, &n, NULL, e)) < 0) return rc;
    od->n_ids = (int32_t)n;
    return BS_OK;
}

/* The letter ids of an item (01 §5); 1 with rep filled when the letters are
 * not single tokens for this tokenizer. */
static int item_letters(const bs_basal_model *m, bs_letter_cache *lc, const bs_request *r, bs_item *it,
                        bs_reply *rep, bs_err *e) {
    int lr = letters_for(m, lc, &it->orders[0], it->k, it->letter_ids, e);
    if (lr == 1) {
        char msg[128];
        snprintf(msg, sizeof msg, "option letters are not single tokens for this tokenizer (%zu options)", it->k);
        bs_reply_internal(rep, r->dialect, msg);
        return BS_EINVAL;
    }
    return lr;
}

static void too_long_add(bs_unsupported *u, const bs_question *q, size_t longest, int max_pos) {
    char msg[160];
    snprintf(msg, sizeof msg, "a prompt of %zu tokens exceeds the model limit %d", longest, max_pos);
    bs_unsupported_add(u, "prompt_too_long", q->id.s, q->id.len, msg);
}

/* The question text of an item: the instructions, or for a multi branch the
 * instructions with the label suffix of 03 §1.3 (built into tmp). */
bs_text bs_plan_item_question(const bs_question *q, size_t branch, bs_buf *tmp) {
    if (!q->multi) return q->instructions;
    tmp->len = 0;
    bs_prompt_multi_question(tmp, q->lang, &q->instructions, &q->multi->labels[branch]);
    bs_text t = {tmp->data ? tmp->data : (char *)"", tmp->len};
    return t;
}

/* The items of a validated request (04 §3); p->req is set. */
static int plan_items(bs_plan *p, const bs_basal_model *m, bs_letter_cache *lc, const bs_plan_limits *lim,
                      int want_state_len, bs_reply *rep, bs_err *e) {
    const bs_request *r = p->req;
    int rc = BS_OK;
    bs_unsupported too_long;
    bs_unsupported_init(&too_long, r->dialect);
    bs_trie_counter tc;
    bs_tc_init(&tc);
    int64_t max_tokens = lim ? lim->max_request_tokens : 0;
    bs_buf qtmp;
    bs_buf_init(&qtmp);
    p->usage.questions = r->n_questions;
    size_t cap = 0, n_lc = 0;
    for (size_t qi = 0; qi < r->n_questions; qi++) {
        cap += bs_plan_question_items(&r->questions[qi]);
        n_lc += bs_plan_is_large_choice(&r->questions[qi]);
    }
    p->items = calloc(cap ? cap : 1, sizeof *p->items);
    if (!p->items || (n_lc && !(p->lcs = calloc(n_lc, sizeof *p->lcs)))) {
        rc = bs_fail(e, BS_ENOMEM, "out of memory");
        goto fail;
    }
    for (size_t qi = 0; qi < r->n_questions; qi++) {
        const bs_question *q = &r->questions[qi];
        size_t nb = bs_plan_question_items(q);
        if (nb == 0) continue; /* answered without the model */
        bs_plan_lc *plc = NULL;
        if (bs_plan_is_large_choice(q)) { /* 03 §5.1: the groups; round 1 asks each in order 0 only */
            plc = &p->lcs[p->n_lc++];
            plc->question = qi;
            plc->first_item = p->n_items;
            if ((rc = bs_lc_plan_round1(&plc->lc, (int)q->n_options, e)) < 0) goto fail;
            if ((size_t)plc->lc.n_round1 != nb) {
                rc = bs_fail(e, BS_EINTERNAL, "large choice: %d groups planned, %zu expected", plc->lc.n_round1, nb);
                goto fail;
            }
        } else if (q->n_options > BS_MAX_LETTER_OPTIONS) {
            rc = bs_fail(e, BS_EINTERNAL, "question with %zu options reached planning", q->n_options);
            goto fail;
        }
        p->usage.branches += q->multi ? nb : 1; /* 02 §4.6: a large choice counts once */
        size_t first = p->n_items, longest = 0;
        for (size_t br = 0; br < nb; br++) { /* a multi question: one yes/no item per label */
            bs_item *it = &p->items[p->n_items++];
            it->question = qi;
            it->branch = br;
            it->k = plc ? (size_t)plc->lc.group[br].size : q->n_options;
            it->n_orders = plc ? 1 : m->orders == 1 ? 1 : BS_N_ORDERS;
            bs_text qtext = bs_plan_item_question(q, br, &qtmp);
            if (qtmp.oom) { rc = bs_fail(e, BS_ENOMEM, "out of memory"); goto fail; }
            for (int o = 0; o < it->n_orders; o++) {
                bs_order *od = &it->orders[o];
                if (plc) bs_lc_group_perm(&plc->lc.group[br], o, od->perm);
                else bs_prompt_perm(it->k, o, od->perm);
                if ((rc = build_order(od, m, r, q, &qtext, it->k, e)) < 0) goto fail;
                p->usage.input_tokens += (size_t)od->n_ids;
                if ((size_t)od->n_ids > longest) longest = (size_t)od->n_ids;
            }
            /* Every question re-tokenizes the whole prompt: bound that work too. */
            if (max_tokens && (int64_t)p->usage.input_tokens > BS_INPUT_TOKENS_FACTOR * max_tokens) {
                rc = too_many_tokens(rep, r->dialect, lim);
                goto fail;
            }
        }
        /* 04 §3 P7: only this request fails, one element per offending question. */
        if (longest > (size_t)m->cfg.max_pos) {
            too_long_add(&too_long, q, longest, m->cfg.max_pos);
            continue;
        }
        for (size_t i = first; i < p->n_items; i++) {
            bs_item *it = &p->items[i];
            const int32_t *pr[BS_N_ORDERS] = {it->orders[0].ids, it->orders[1].ids};
            int32_t ln[BS_N_ORDERS] = {it->orders[0].n_ids, it->orders[1].n_ids};
            if (bs_tc_insert(&tc, pr, ln, (size_t)it->n_orders) < 0) { rc = bs_fail(e, BS_ENOMEM, "out of memory"); goto fail; }
            if (max_tokens && tc.tokens > max_tokens) {
                rc = too_many_tokens(rep, r->dialect, lim);
                goto fail;
            }
            if (want_state_len && (rc = item_state_len(m, r, q, it, e)) < 0) goto fail;
            if ((rc = item_letters(m, lc, r, it, rep, e)) != 0) goto fail;
        }
    }
    p->round = 1;
    p->want_state_len = want_state_len;
    if ((rc = bs_ev_plan(p, m, &too_long, e)) < 0) goto fail;
    p->cost = tc.tokens > 0 ? tc.tokens : 1;
    if (too_long.n) {
        bs_unsupported_reply(&too_long, rep);
        rc = BS_EINVAL;
    }
fail:
    bs_buf_free(&qtmp);
    bs_tc_free(&tc);
    bs_unsupported_free(&too_long);
    return rc;
}

int bs_plan_request(bs_plan *p, bj_value *body, bs_dialect d, const bs_basal_model *m, bs_letter_cache *lc,
                    const bs_plan_limits *lim, int want_state_len, bs_reply *rep, bs_err *e) {
    memset(p, 0, sizeof *p);
    /* facts "auto" (03 §3) runs inside validation, so every path from a body
     * to a plan (server, decide, prepare, bench) injects the same state */
    static const bs_request_opts opts = {bs_facts_inject, NULL};
    int rc = bs_request_validate(body, d, &opts, &p->req, rep, e);
    if (rc == BS_OK && lim && lim->max_questions && p->req->n_questions > lim->max_questions) {
        char msg[160];
        snprintf(msg, sizeof msg, "%zu questions; the server answers at most %zu in one request (max_questions)",
                 p->req->n_questions, lim->max_questions);
        rc = over_limit(rep, d, "too_many_questions", msg);
    }
    bs_caps caps = {.evidence_head = m->evidence != NULL};
    if (rc == BS_OK) rc = bs_request_check_capability(p->req, &caps, rep, e);
    if (rc == BS_OK) rc = plan_items(p, m, lc, lim, want_state_len, rep, e);
    if (rc < 0) bs_plan_free(p);
    return rc;
}

int bs_plan_text(bs_plan *p, const char *data, size_t len, bs_dialect d, const bs_basal_model *m,
                 bs_letter_cache *lc, bs_reply *rep, bs_err *e) {
    memset(p, 0, sizeof *p);
    bj_value *body = NULL;
    int rc = bs_body_parse(data, len, d, &body, rep, e);
    if (rc < 0) return rc;
    size_t ml = 0;
    const char *model = bs_body_model(body, &ml);
    if (model && (ml != strlen(m->name) || memcmp(model, m->name, ml))) {
        bs_reply_unknown_model(rep, d, model, ml);
        bj_free(body);
        return BS_EINVAL;
    }
    return bs_plan_request(p, body, d, m, lc, NULL, 0, rep, e);
}

size_t bs_plan_step_items(const bs_plan *p, bs_item **items) {
    if (p->round <= 1) { /* 0: a plan built by hand (tests) */
        *items = p->items;
        return p->n_items;
    }
    *items = p->round == 2 ? p->finals : NULL;
    return p->round == 2 ? p->n_finals : 0;
}

/* The trie size of the order prompts of items[0..n) (04 §4), at least 1. */
static int64_t items_cost(const bs_item *items, size_t n) {
    bs_trie_counter tc;
    bs_tc_init(&tc);
    int64_t total = 0;
    for (size_t i = 0; i < n; i++) {
        const int32_t *pr[BS_N_ORDERS] = {items[i].orders[0].ids, items[i].orders[1].ids};
        int32_t len[BS_N_ORDERS] = {items[i].orders[0].n_ids, items[i].orders[1].n_ids};
        if (bs_tc_insert(&tc, pr, len, (size_t)items[i].n_orders) < 0) { /* out of memory: the plain sum */
            total = 0;
            for (size_t j = 0; j < n; j++)
                for (int o = 0; o < items[j].n_orders; o++) total += items[j].orders[o].n_ids;
            bs_tc_free(&tc);
            return total > 0 ? total : 1;
        }
    }
    total = tc.tokens;
    bs_tc_free(&tc);
    return total > 0 ? total : 1;
}

int64_t bs_plan_cost(const bs_plan *p) {
    if (p->cost > 0) return p->cost;
    bs_item *items;
    size_t n = bs_plan_step_items(p, &items);
    return items_cost(items, n);
}

/* 04 §3 P4: leading ids the first order prompt shares with two probe prompts
 * that keep the item's state and language but ask "A" / "B" with options x, y. */
static int item_state_len(const bs_basal_model *m, const bs_request *r, const bs_question *q, bs_item *it,
                          bs_err *e) {
    static const bs_text probe_q[2] = {{(char *)"A", 1}, {(char *)"B", 1}};
    static const bs_text probe_opts[2] = {{(char *)"x", 1}, {(char *)"y", 1}};
    size_t perm[2] = {0, 1};
    int32_t shared = it->orders[0].n_ids;
    for (int i = 0; i < 2; i++) {
        bs_buf pr;
        bs_buf_init(&pr);
        int rc = bs_prompt_build(&pr, m->bos, strlen(m->bos), q->lang, &r->state, &probe_q[i], probe_opts, perm, 2, e);
        int32_t *ids = NULL;
        size_t n = 0;
        if (rc == 0 && pr.oom) rc = bs_fail(e, BS_ENOMEM, "out of memory");
        if (rc == 0) rc = bs_tokenizer_encode(m->tok, pr.data, pr.len, &ids, &n, NULL, e);
        bs_buf_free(&pr);
        if (rc < 0) return rc;
        int32_t l = 0;
        while (l < shared && (size_t)l < n && ids[l] == it->orders[0].ids[l]) l++;
        shared = l;
        free(ids);
    }
    it->state_len = shared;
    return BS_OK;
}

static bs_type_key type_key(bs_qtype t) {
    switch (t) {
    case BS_Q_NOUL: return BS_TYPE_NOUL;
    case BS_Q_SCORE: return BS_TYPE_SCORE;
    default: return BS_TYPE_CHOICE;
    }
}



/* The calibration key of a question's readouts (01 §8): a multi branch is a
 * yes/no readout, act uses its base. */
static bs_type_key question_type_key(const bs_question *q) {
    if (q->multi) return BS_TYPE_NOUL;
    if (q->act) return type_key(q->act->base);
    return type_key(q->type);
}

/* 01 §6–§7: the uncalibrated, order-averaged distribution of one item
 * (canonical order of its k options). */
static int item_average(const bs_item *it, double *avg, bs_err *e) {
    double qv[BS_N_ORDERS][BS_MAX_LETTER_OPTIONS];
    int perm[BS_N_ORDERS][BS_MAX_LETTER_OPTIONS];
    const double *qs[BS_N_ORDERS];
    const int *perms[BS_N_ORDERS];
    for (int o = 0; o < it->n_orders; o++) {
        int rc = bs_softmax_logits(it->orders[o].logits, (int)it->k, qv[o], e);
        if (rc < 0) return rc;
        for (size_t i = 0; i < it->k; i++) perm[o][i] = (int)it->orders[o].perm[i];
        qs[o] = qv[o];
        perms[o] = perm[o];
    }
    bs_average_orders(qs, perms, it->n_orders, (int)it->k, avg);
    return BS_OK;
}

/* 01 §6–§8: the final distribution of one item (canonical order). */
int bs_plan_item_distribution(const bs_item *it, const bs_question *q, const bs_basal_model *m, double *pf,
                             bs_err *e) {
    double avg[BS_MAX_LETTER_OPTIONS];
    int rc = item_average(it, avg, e);
    if (rc < 0) return rc;
    double temp = q->uncalibrated ? 1.0 : bs_calibration_temp(&m->calib, question_type_key(q));
    bs_calibrate(avg, (int)it->k, temp, pf);
    return BS_OK;
}

int bs_plan_item_local(const bs_item *it, bs_item *loc, size_t *members, bs_err *e) {
    *loc = *it;
    if (it->k > BS_MAX_LETTER_OPTIONS || it->n_orders < 1 || it->n_orders > BS_N_ORDERS)
        return bs_fail(e, BS_EINTERNAL, "item with %zu options and %d orders", it->k, it->n_orders);
    for (size_t i = 0; i < it->k; i++) members[i] = it->orders[0].perm[i];
    for (int o = 0; o < it->n_orders; o++)
        for (size_t j = 0; j < it->k; j++) {
            size_t at = 0;
            while (at < it->k && members[at] != it->orders[o].perm[j]) at++;
            if (at == it->k) return bs_fail(e, BS_EINTERNAL, "order %d shows an option order 0 lacks", o);
            loc->orders[o].perm[j] = at;
        }
    return BS_OK;
}

int bs_plan_item_dist(const bs_plan *p, const bs_item *it, const bs_basal_model *m, double *avg, double *temp,
                      double *cal, bs_err *e) {
    const bs_question *q = &p->req->questions[it->question];
    /* a large choice's item names the question's options (indices up to 254):
     * averaged over its own, or avg (k entries) would be written past its end */
    bs_item loc;
    size_t members[BS_MAX_LETTER_OPTIONS];
    int rc = bs_plan_item_local(it, &loc, members, e);
    if (rc == BS_OK) rc = item_average(&loc, avg, e);
    if (rc < 0) return rc;
    *temp = q->uncalibrated ? 1.0 : bs_calibration_temp(&m->calib, question_type_key(q));
    bs_calibrate(avg, (int)it->k, *temp, cal);
    return BS_OK;
}

/* Round 1 of every large choice is in: fit, finalists, their item in both
 * orders (03 §5.3–§5.4). */
static int prepare_round2(bs_plan *p, const bs_basal_model *m, bs_letter_cache *lc, bs_reply *rep, bs_err *e) {
    const bs_request *r = p->req;
    bs_unsupported too_long;
    bs_unsupported_init(&too_long, r->dialect);
    int rc = BS_OK;
    if (!(p->finals = calloc(p->n_lc, sizeof *p->finals))) return bs_fail(e, BS_ENOMEM, "out of memory");
    for (size_t i = 0; i < p->n_lc; i++) {
        bs_plan_lc *plc = &p->lcs[i];
        const bs_question *q = &r->questions[plc->question];
        const float *logits[BS_LC_MAX_ROUND1_GROUPS];
        if (plc->first_item + (size_t)plc->lc.n_round1 > p->n_items) {
            rc = bs_fail(e, BS_EINTERNAL, "large choice %zu: its groups are not in the plan", i);
            break;
        }
        for (int g = 0; g < plc->lc.n_round1; g++) {
            const bs_item *it = &p->items[plc->first_item + (size_t)g];
            if (it->question != plc->question || it->branch != (size_t)g || it->k != (size_t)plc->lc.group[g].size) {
                rc = bs_fail(e, BS_EINTERNAL, "large choice %zu: group %d does not match its item", i, g);
                break;
            }
            logits[g] = it->orders[0].logits;
        }
        if (rc < 0 || (rc = bs_lc_finish_round1(&plc->lc, logits, e)) < 0) break;
        const bs_lc_group *fin = bs_lc_finalists(&plc->lc);
        bs_item *it = &p->finals[p->n_finals++];
        it->question = plc->question;
        it->branch = (size_t)plc->lc.n_round1; /* the finalist group's index */
        it->k = (size_t)fin->size;
        it->n_orders = m->orders == 1 ? 1 : BS_N_ORDERS; /* one option order: the finals too */
        size_t longest = 0;
        for (int o = 0; o < it->n_orders && rc == BS_OK; o++) {
            bs_order *od = &it->orders[o];
            bs_lc_group_perm(fin, o, od->perm);
            if ((rc = build_order(od, m, r, q, &q->instructions, it->k, e)) < 0) break;
            p->usage.input_tokens += (size_t)od->n_ids; /* 03 §5.5: the final prompts */
            if ((size_t)od->n_ids > longest) longest = (size_t)od->n_ids;
        }
        if (rc < 0) break;
        if (longest > (size_t)m->cfg.max_pos) { /* 04 §3 P7, known only now: this request alone fails */
            too_long_add(&too_long, q, longest, m->cfg.max_pos);
            continue;
        }
        if (p->want_state_len && (rc = item_state_len(m, r, q, it, e)) < 0) break;
        if ((rc = item_letters(m, lc, r, it, rep, e)) != 0) break;
    }
    if (rc == BS_OK && too_long.n) {
        bs_unsupported_reply(&too_long, rep);
        rc = rep->body.oom ? bs_fail(e, BS_ENOMEM, "out of memory") : BS_EINVAL;
    }
    bs_unsupported_free(&too_long);
    if (rc == BS_OK) {
        p->round = 2;
        p->cost = items_cost(p->finals, p->n_finals);
    }
    return rc;
}

int bs_plan_advance(bs_plan *p, const bs_basal_model *m, bs_letter_cache *lc, bs_reply *rep, bs_err *e) {
    if (p->round <= 1 && p->n_lc > 0) {
        int rc = prepare_round2(p, m, lc, rep, e);
        return rc < 0 ? rc : 1;
    }
    if (p->round == 2) {
        if (p->n_finals != p->n_lc) return bs_fail(e, BS_EINTERNAL, "large choice: round 2 is incomplete");
        for (size_t i = 0; i < p->n_lc; i++) {
            bs_plan_lc *plc = &p->lcs[i];
            const bs_question *q = &p->req->questions[plc->question];
            const bs_item *it = &p->finals[i];
            /* 01 §8 with the choice temperature (03 §5.4 step 3) */
            double temp = q->uncalibrated ? 1.0 : bs_calibration_temp(&m->calib, BS_TYPE_CHOICE);
            int rc = bs_lc_finish_round2(&plc->lc, it->orders[0].logits, it->n_orders > 1 ? it->orders[1].logits : NULL,
                                         temp, plc->p, e);
            if (rc < 0) return rc;
        }
    }
    p->round = 3;
    return 0;
}

int bs_plan_refusal(const bs_plan *p, const bs_basal_model *m, bs_reply *rep, bs_err *e) {
    const bs_request *r = p->req;
    size_t item = 0;
    for (size_t qi = 0; qi < r->n_questions; qi++) {
        const bs_question *q = &r->questions[qi];
        size_t ni = bs_plan_question_items(q);
        if (!q->act || ni == 0) {
            item += ni;
            continue;
        }
        if (item >= p->n_items || p->items[item].question != qi)
            return bs_fail(e, BS_EINTERNAL, "plan and request disagree at question %zu", qi);
        double pf[BS_MAX_LETTER_OPTIONS];
        int rc = bs_plan_item_distribution(&p->items[item++], q, m, pf, e);
        if (rc < 0) return rc;
        bs_act_result ar;
        if ((rc = bs_act_decide(q, &m->calib, pf, NULL, &ar, e)) < 0) return rc;
        if (!ar.fails) continue;
        bs_reply_act_refusal(rep, r->dialect, q->id.s, q->id.len);
        if (rep->body.oom) return bs_fail(e, BS_ENOMEM, "out of memory");
        return 1;
    }
    return 0;
}

