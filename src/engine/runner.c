#include "engine/runner.h"

#include <stdlib.h>
#include <string.h>

#include "base/util.h"
#include "engine/evidence_run.h"
#include "engine/lens.h"
#include "engine/pack.h"
#include "engine/triesize.h"

/* ---- prefix caches (04 §13) ---- */

static void entry_free(bs_cache_entry *c) {
    free(c->ids);
    bs_kv_free(&c->kv);
    memset(c, 0, sizeof *c);
}

/* The hook of a forward of m for runner r (NULL: none): the gate's
 * checkpoint on a preemptible lane, the runner's layer watch. */
static void hook(const bs_runner *r, const bs_model *m, bs_fwd_hook *h, bs_fwd_input *in) {
    bs_fwd_hook_attach(h, m, r && r->preemptible ? r->gate : NULL, r ? r->watch : NULL, r ? r->watch_ctx : NULL, in);
}

/* Computes the K/V of ids[0..n) continuing from `from` (a cached prefix of
 * ids, or NULL) with the forward's own code path (K1). */
static int capture(const bs_model *m, const int32_t *ids, int32_t n, const bs_cache_entry *from, bs_kv *out,
                   const bs_runner *r, bs_err *e) {
    int32_t np = from ? from->kv.n_tokens : 0, M = n - np;
    int rc = bs_kv_alloc(out, m, n, e);
    if (rc < 0) return rc;
    int32_t *pos = malloc((size_t)M * sizeof *pos);
    if (!pos) { bs_kv_free(out); return bs_fail(e, BS_ENOMEM, "out of memory"); }
    for (int32_t i = 0; i < M; i++) pos[i] = np + i;
    bs_unit u = {.q_start = 0, .q_len = M, .n_ranges = 1, .r_start = {0}, .r_len = {M}, .prefix = from ? &from->kv : NULL};
    bs_fwd_input in = {.n_tokens = M, .ids = ids + np, .pos = pos, .n_units = 1, .units = &u,
                       .capture = out};
    bs_fwd_hook h;
    hook(r, m, &h, &in);
    rc = bs_forward(m, &in, NULL, e);
    if (rc == BS_OK) bs_fwd_hook_done(&h);
    free(pos);
    if (rc < 0) bs_kv_free(out);
    return rc;
}

int bs_prefix_set_build(bs_prefix_set *ps, const bs_basal_model *m, bs_gate *gate, bs_err *e) {
    memset(ps, 0, sizeof *ps);
    static const bs_text states[2] = {{(char *)"a", 1}, {(char *)"b", 1}};
    static const bs_text q = {(char *)"q", 1};
    static const bs_text opts[2] = {{(char *)"x", 1}, {(char *)"y", 1}};
    size_t perm[2] = {0, 1};
    int rc = BS_OK;
    for (int lang = 0; lang < 2 && rc == 0; lang++) {
        int32_t *ids[2] = {NULL, NULL};
        size_t n[2] = {0, 0};
        for (int i = 0; i < 2 && rc == 0; i++) {
            bs_buf pr;
            bs_buf_init(&pr);
            rc = bs_prompt_build(&pr, m->bos, strlen(m->bos), (bs_lang)lang, &states[i], &q, opts, perm, 2, e);
            if (rc == 0 && pr.oom) rc = bs_fail(e, BS_ENOMEM, "out of memory");
            if (rc == 0) rc = bs_tokenizer_encode(m->tok, pr.data, pr.len, &ids[i], &n[i], NULL, e);
            bs_buf_free(&pr);
        }
        if (rc == 0) {
            int32_t l = 0;
            while ((size_t)l < n[0] && (size_t)l < n[1] && ids[0][l] == ids[1][l]) l++;
            int dup = 0;
            for (int j = 0; j < ps->n; j++)
                dup |= ps->e[j].kv.n_tokens == l && !memcmp(ps->e[j].ids, ids[0], (size_t)l * sizeof(int32_t));
            if (l > 0 && l < m->cfg.max_pos && !dup) {
                bs_cache_entry *c = &ps->e[ps->n];
                if (!(c->ids = malloc((size_t)l * sizeof *c->ids))) rc = bs_fail(e, BS_ENOMEM, "out of memory");
                else {
                    memcpy(c->ids, ids[0], (size_t)l * sizeof *c->ids);
                    if (gate) bs_gate_enter_urgent(gate);
                    rc = capture(&m->model, c->ids, l, NULL, &c->kv, NULL, e);
                    if (gate) bs_gate_leave(gate);
                    if (rc == 0) {
                        c->pinned = 1;
                        c->bytes = bs_kv_bytes(&m->model, l);
                        ps->n++;
                    } else {
                        free(c->ids);
                        c->ids = NULL;
                    }
                }
            }
        }
        free(ids[0]);
        free(ids[1]);
    }
    if (rc < 0) bs_prefix_set_free(ps);
    return rc;
}

void bs_prefix_set_free(bs_prefix_set *ps) {
    for (int i = 0; i < ps->n; i++) entry_free(&ps->e[i]);
    memset(ps, 0, sizeof *ps);
}

void bs_runner_init(bs_runner *r, const bs_basal_model *m, int tree_max_tokens, int forward_max_tokens,
                    const bs_prefix_set *pinned, size_t state_cache_bytes, bs_gate *gate, int preemptible) {
    memset(r, 0, sizeof *r);
    r->m = m;
    r->tree_max_tokens = tree_max_tokens;
    r->forward_max_tokens = forward_max_tokens;
    r->pinned = pinned;
    r->st_budget = state_cache_bytes;
    r->gate = gate;
    r->preemptible = preemptible;
}

void bs_runner_free(bs_runner *r) {
    for (size_t i = 0; i < r->n_st; i++) entry_free(&r->st[i]);
    free(r->st);
    r->st = NULL;
    r->n_st = r->cap_st = r->st_used = 0;
}

/* K3: the longest cached prefix P with len(P) < row length, the row's ids
 * starting with P, and every token of the row allowed to see it. */
static bs_cache_entry *choose_prefix(bs_runner *r, const bs_row *row, int *is_pinned) {
    bs_cache_entry *best = NULL;
    int32_t min_last = row->len;
    for (int32_t k = 0; k < row->n_prompts; k++)
        if (row->last[k] < min_last) min_last = row->last[k];
    for (size_t pass = 0; pass < 2; pass++) {
        size_t n = pass == 0 ? (size_t)(r->pinned ? r->pinned->n : 0) : r->n_st;
        for (size_t i = 0; i < n; i++) {
            bs_cache_entry *c = pass == 0 ? (bs_cache_entry *)&r->pinned->e[i] : &r->st[i];
            int32_t l = c->kv.n_tokens;
            if (l >= row->len || (best && l <= best->kv.n_tokens)) continue;
            if (!(l <= row->prefix_len || row->n_prompts == 1)) continue;
            if (l > min_last) continue; /* a readout token must be computed, not cached */
            if (memcmp(row->ids, c->ids, (size_t)l * sizeof *c->ids)) continue;
            best = c;
            *is_pinned = pass == 0;
        }
    }
    return best;
}

/* K4 step 3: evict least-recently-used entries until `need` more bytes fit. */
static void evict_for(bs_runner *r, size_t need) {
    while (r->n_st && r->st_used + need > r->st_budget) {
        size_t lru = 0;
        for (size_t i = 1; i < r->n_st; i++)
            if (r->st[i].last_use < r->st[lru].last_use) lru = i;
        r->st_used -= r->st[lru].bytes;
        entry_free(&r->st[lru]);
        r->st[lru] = r->st[--r->n_st];
    }
}

/* ---- rows and forwards (04 §6) ---- */

typedef struct {
    bs_plan *plan;
    bs_item *item;
    int lang;
    size_t state_rank; /* first-appearance index of the state text within its language */
} item_ref;

static int same_state(const bs_request *a, const bs_request *b) {
    return a->state.len == b->state.len && !memcmp(a->state.s, b->state.s, a->state.len);
}

static int cmp_i32(const void *a, const void *b) {
    int32_t x = *(const int32_t *)a, y = *(const int32_t *)b;
    return (x > y) - (x < y);
}

/* The letter token ids of the items, sorted and unique: the lm_head rows the
 * forward reads out. */
static int unique_letter_ids(const item_ref *items, const size_t *first, size_t nr, int32_t **out, size_t *nuniq,
                             bs_err *e) {
    size_t nu = 0;
    for (size_t i = first[0]; i < first[nr]; i++) nu += items[i].item->k;
    int32_t *uids = *out = malloc((nu ? nu : 1) * sizeof *uids);
    if (!uids) return bs_fail(e, BS_ENOMEM, "out of memory");
    nu = 0;
    for (size_t i = first[0]; i < first[nr]; i++)
        for (size_t l = 0; l < items[i].item->k; l++) uids[nu++] = items[i].item->letter_ids[l];
    qsort(uids, nu, sizeof *uids, cmp_i32);
    size_t n = 0;
    for (size_t i = 0; i < nu; i++)
        if (n == 0 || uids[n - 1] != uids[i]) uids[n++] = uids[i];
    *nuniq = n;
    return BS_OK;
}

/* K4: a single-row forward whose prefix is none or pinned (chosen) may cache
 * the state of its row: captured here, then px[0] is that state. */
static int cache_row_state(bs_runner *r, const bs_row *row, int32_t state_len, bs_cache_entry *chosen, const bs_kv **px,
                           bs_err *e) {
    const bs_model *m = &r->m->model;
    int32_t np = chosen ? chosen->kv.n_tokens : 0;
    int32_t root = state_len < row->len - 1 ? state_len : row->len - 1;
    size_t bytes = bs_kv_bytes(m, root > 0 ? root : 0);
    if (!(root >= np + 32 && bytes <= r->st_budget)) return BS_OK;
    evict_for(r, bytes);
    if (r->n_st == r->cap_st) {
        size_t ncap = r->cap_st ? r->cap_st * 2 : 8;
        bs_cache_entry *ns = realloc(r->st, ncap * sizeof *ns);
        if (!ns) return bs_fail(e, BS_ENOMEM, "out of memory");
        r->st = ns;
        r->cap_st = ncap;
    }
    bs_cache_entry *c = &r->st[r->n_st];
    memset(c, 0, sizeof *c);
    if (!(c->ids = malloc((size_t)root * sizeof *c->ids))) return bs_fail(e, BS_ENOMEM, "out of memory");
    memcpy(c->ids, row->ids, (size_t)root * sizeof *c->ids);
    int rc = capture(m, c->ids, root, chosen, &c->kv, r, e);
    if (rc < 0) {
        free(c->ids);
        c->ids = NULL;
        return rc;
    }
    r->forward_tokens += root - np;
    c->bytes = bytes;
    c->last_use = r->clock;
    r->n_st++;
    r->st_used += bytes;
    r->state_inserts++;
    px[0] = &c->kv;
    return BS_OK;
}

/* The cached prefix of each row into px (NULL: none); then K4's state of a
 * single row. */
static int choose_prefixes(bs_runner *r, const bs_row *rows, size_t nr, const int32_t *row_state_len,
                           const bs_kv **px, bs_err *e) {
    bs_cache_entry *chosen_one = NULL;
    int chosen_pinned = 0;
    for (size_t ri = 0; ri < nr; ri++) {
        int pinned = 0;
        bs_cache_entry *c = choose_prefix(r, &rows[ri], &pinned);
        if (c) {
            c->last_use = r->clock;
            if (!pinned) r->state_hits++;
            px[ri] = &c->kv;
        }
        if (ri == 0) { chosen_one = c; chosen_pinned = pinned; }
    }
    if (nr == 1 && r->st_budget > 0 && (!chosen_one || chosen_pinned))
        return cache_row_state(r, &rows[0], row_state_len[0], chosen_one, px, e);
    return BS_OK;
}

/* Evidence rows of the items' order-0 prompts, read from this forward on the
 * CPU backend (engine/evidence_run.h: bitwise the separate forward): added
 * to er, and when there are any, pk reads them out too. Returns their count
 * (0: none) or an error. */
static int add_evidence_rows(const item_ref *items, const size_t *first, const bs_row *rows, size_t nr,
                             const bs_kv **px, int H, bs_packed *pk, bs_ev_rows *er, bs_err *e) {
    int rc = BS_OK;
    int32_t off = 0;
    for (size_t ri = 0; ri < nr; ri++) {
        int32_t skip = px[ri] ? px[ri]->n_tokens : 0, kp = 0; /* kp: the item's first prompt in the row */
        for (size_t i = first[ri]; i < first[ri + 1] && rc == BS_OK; kp += items[i++].item->n_orders)
            rc = bs_ev_rows_add(er, items[i].plan, items[i].item, &rows[ri], kp, off, skip, e);
        if (rc < 0) return rc;
        off += rows[ri].len - skip;
    }
    int ev_rows = bs_ev_rows_prepare(er, H, e);
    if (ev_rows > 0) {
        pk->in.readouts = er->readouts;
        pk->in.n_readouts = er->n_readouts;
        pk->in.hidden = er->hidden;
    }
    return ev_rows;
}

/* The letters' logits of every order of every item. readout_of is indexed
 * by flat prompt: rows in order, items in row order, orders within an item. */
static void store_letter_logits(const bs_runner *r, item_ref *items, const size_t *first, size_t nr,
                                const int32_t *readout_of, const float *lg, const int32_t *uids, size_t nuniq) {
    size_t k = 0;
    for (size_t i = first[0]; i < first[nr]; i++) {
        bs_item *it = items[i].item;
        for (int o = 0; o < it->n_orders; o++, k++) {
            const float *row_lg = lg + (size_t)readout_of[k] * nuniq;
            for (size_t l = 0; l < it->k; l++) {
                const int32_t *hit = bsearch(&it->letter_ids[l], uids, nuniq, sizeof *uids, cmp_i32);
                /* readout_bf16: a diagnostic that emulates a bf16 lm_head (round to nearest even, widen) */
                it->orders[o].logits[l] = bs_readout_logit(r->readout_bf16, row_lg[hit - uids]);
            }
        }
    }
}

/* The logit lens rows of the items whose plan asked for it (engine/lens.h),
 * attached to the forward pk (nothing when none did). */
static int add_lens_rows(item_ref *items, const size_t *first, size_t nr, bs_packed *pk, bs_lens_rows *lr,
                         bs_err *e) {
    size_t k = 0;
    int rc = BS_OK;
    for (size_t i = first[0]; i < first[nr] && rc == BS_OK; i++)
        for (int o = 0; o < items[i].item->n_orders && rc == BS_OK; o++, k++)
            if (items[i].plan->lens) rc = bs_lens_rows_add(lr, items[i].item, o, pk->readout_of[k], e);
    return rc < 0 ? rc : bs_lens_rows_attach(lr, &pk->in, e);
}

/* Runs one forward over rows[0..nr) of the given items (row r holds items
 * items[first[r] .. first[r+1])). */
static int run_forward(bs_runner *r, item_ref *items, const size_t *first, bs_row *rows, size_t nr,
                       const int32_t *row_state_len, bs_err *e) {
    const bs_model *m = &r->m->model;
    const bs_kv **px = calloc(nr, sizeof *px);
    int32_t *uids = NULL;
    float *lg = NULL;
    bs_packed pk;
    bs_ev_rows er;
    bs_lens_rows lr;
    int packed = 0, rc = BS_OK, ev_init = 0, ev_rows = 0;
    size_t nuniq = 0;
    bs_lens_rows_init(&lr, m, r->readout_bf16);
    if (!px) return bs_fail(e, BS_ENOMEM, "out of memory");
    if ((rc = unique_letter_ids(items, first, nr, &uids, &nuniq, e)) < 0) goto done;

    /* the device gate is held from choosing the cached prefixes to the end
     * of the forward, and left on every path */
    if (r->gate) (r->preemptible ? bs_gate_enter_preemptible : bs_gate_enter_urgent)(r->gate);
    r->clock++;
    rc = choose_prefixes(r, rows, nr, row_state_len, px, e);
    if (rc == BS_OK && (rc = bs_packed_build(&pk, rows, (int32_t)nr, px, uids, (int32_t)nuniq, e)) == BS_OK) packed = 1;
    if (rc == BS_OK && r->m->evidence && !m->backend && !r->evidence_separate &&
        (rc = bs_ev_rows_init(&er, pk.in.readouts, pk.in.n_readouts, pk.in.n_tokens, e)) == BS_OK) {
        ev_init = 1;
        if ((ev_rows = add_evidence_rows(items, first, rows, nr, px, m->cfg.hidden, &pk, &er, e)) < 0) rc = ev_rows;
    }
    if (rc == BS_OK) rc = add_lens_rows(items, first, nr, &pk, &lr, e);
    if (rc == BS_OK && !(lg = malloc((size_t)pk.in.n_readouts * nuniq * sizeof *lg)))
        rc = bs_fail(e, BS_ENOMEM, "out of memory");
    if (rc == BS_OK) {
        pk.in.profile = r->profile;
        bs_fwd_hook h;
        hook(r, m, &h, &pk.in);
        rc = bs_forward(m, &pk.in, lg, e);
        if (rc == BS_OK) bs_fwd_hook_done(&h);
        r->forwards++;
        r->forward_tokens += pk.in.n_tokens;
    }
    if (r->gate) bs_gate_leave(r->gate);
    if (rc == BS_OK && ev_rows > 0) {
        rc = bs_ev_rows_finish(&er, r->m->evidence, e);
        r->evidence_inline += (int64_t)er.n_jobs;
    }
    if (rc < 0) goto done;
    store_letter_logits(r, items, first, nr, pk.readout_of, lg, uids, nuniq);
done:
    bs_lens_rows_free(&lr);
    if (ev_init) bs_ev_rows_free(&er);
    if (packed) bs_packed_free(&pk);
    free(lg);
    free(uids);
    free(px);
    return rc;
}

static const int32_t BUDGET_LENS[] = {128, 192, 256, 320, 384, 448, 512, 640, 768, 1024, 1280, 1536, 2048, 3072};
static const int32_t BUDGET_BATCHES[] = {1, 2, 4, 8, 16, 32};
enum { BUDGET_TOKENS = 12288 };

/* The smallest entry >= x, or -1 for none (infinity). */
static int64_t bucket(int64_t x, const int32_t *xs, size_t n) {
    for (size_t i = 0; i < n; i++)
        if (x <= xs[i]) return xs[i];
    return -1;
}

size_t bs_budget_chunks(const int32_t *lens, size_t n, size_t *order, size_t *start) {
    for (size_t i = 0; i < n; i++) { /* stable insertion sort: n is one batch of items */
        size_t j = i;
        while (j > 0 && lens[order[j - 1]] > lens[i]) {
            order[j] = order[j - 1];
            j--;
        }
        order[j] = i;
    }
    size_t nc = 0, cur = 0;
    for (size_t i = 0; i < n; i++) {
        int64_t rows = (int64_t)cur + 1, len = lens[order[i]];
        int64_t b = bucket(rows, BUDGET_BATCHES, 6), l = bucket(len, BUDGET_LENS, 14);
        int over = rows > 32 || len > 3072 || b < 0 || l < 0 || b * l > BUDGET_TOKENS;
        if (cur > 0 && over) {
            start[++nc] = i;
            cur = 0;
        }
        if (i == 0) start[0] = 0;
        cur++;
    }
    if (n) start[++nc] = n;
    return nc;
}

/* `budget` batching: one row per item, per language sorted by packed length
 * and cut into upstream's chunks, one forward per chunk. */
static int run_budget(bs_runner *r, item_ref *items, size_t ni, bs_err *e) {
    bs_row *rows = calloc(ni, sizeof *rows), *crows = malloc(ni * sizeof *crows);
    item_ref *citems = malloc(ni * sizeof *citems);
    size_t *order = malloc(ni * sizeof *order), *start = malloc((ni + 1) * sizeof *start);
    size_t *first = malloc((ni + 1) * sizeof *first);
    int32_t *lens = malloc(ni * sizeof *lens), *row_sl = malloc(ni * sizeof *row_sl);
    size_t packed = 0;
    int rc = BS_OK;
    if (!rows || !crows || !citems || !order || !start || !first || !lens || !row_sl) {
        rc = bs_fail(e, BS_ENOMEM, "out of memory");
        goto done;
    }
    for (; packed < ni; packed++) {
        const bs_item *it = items[packed].item;
        const int32_t *pr[BS_N_ORDERS] = {it->orders[0].ids, it->orders[1].ids};
        int32_t ln[BS_N_ORDERS] = {it->orders[0].n_ids, it->orders[1].n_ids};
        if ((rc = bs_pack_row(&rows[packed], pr, ln, it->n_orders, e)) < 0) goto done;
        lens[packed] = rows[packed].len;
    }
    for (size_t s = 0; s < ni;) { /* items are already grouped by language (F1) */
        size_t t = s + 1;
        while (t < ni && items[t].lang == items[s].lang) t++;
        size_t nc = bs_budget_chunks(lens + s, t - s, order, start);
        for (size_t c = 0; c < nc; c++) {
            size_t cn = start[c + 1] - start[c];
            for (size_t j = 0; j < cn; j++) {
                size_t i = s + order[start[c] + j];
                citems[j] = items[i];
                crows[j] = rows[i]; /* a shallow copy: rows[] keeps ownership */
                first[j] = j;
                int32_t sl = items[i].item->state_len;
                row_sl[j] = sl < rows[i].prefix_len ? sl : rows[i].prefix_len;
            }
            first[cn] = cn;
            if ((rc = run_forward(r, citems, first, crows, cn, row_sl, e)) < 0) goto done;
        }
        s = t;
    }
done:
    if (rows)
        for (size_t i = 0; i < packed; i++) bs_row_free(&rows[i]);
    free(rows); free(crows); free(citems); free(order); free(start); free(first); free(lens); free(row_sl);
    return rc;
}

/* One engine step (04 §7 B1/B2) for the step items of every plan: round 1
 * of some plans and round 2 of others are packed together. */
static int run_decisions(bs_runner *r, bs_plan *const *plans, size_t n, bs_err *e) {
    size_t ni = 0;
    for (size_t i = 0; i < n; i++) {
        bs_item *its;
        ni += bs_plan_step_items(plans[i], &its);
        r->lc_rounds[0] += plans[i]->round == 1 ? (int64_t)plans[i]->n_lc : 0;
        r->lc_rounds[1] += plans[i]->round == 2 ? (int64_t)plans[i]->n_finals : 0;
    }
    if (ni == 0) return BS_OK;
    if (!r->m->has_weights) return bs_fail(e, BS_EINTERNAL, "forward: model loaded without weights");
    item_ref *items = malloc(ni * sizeof *items), *tmp = malloc(ni * sizeof *tmp);
    size_t *first = malloc((ni + 1) * sizeof *first);
    bs_row *rows = calloc(ni, sizeof *rows);
    int32_t *row_sl = malloc(ni * sizeof *row_sl), *lens = malloc(ni * BS_N_ORDERS * sizeof *lens);
    const int32_t **prompts = malloc(ni * BS_N_ORDERS * sizeof *prompts);
    bs_trie_counter tc;
    bs_tc_init(&tc);
    size_t nrows = 0;
    int rc = BS_OK;
    if (!items || !tmp || !first || !rows || !row_sl || !lens || !prompts) {
        rc = bs_fail(e, BS_ENOMEM, "out of memory");
        goto done;
    }
    /* F1 and F2: Polish items first, then English; within a language, stable
     * by the first appearance of the state text. All items of a request share
     * its state, so states are compared per request (not per item) and the
     * items then placed by a counting sort: linear in the items. */
    size_t k = 0;
    for (int lang = BS_LANG_PL; lang >= BS_LANG_EN; lang--) {
        size_t start = k, n_ranks = 0;
        for (size_t i = 0; i < n; i++) {
            size_t rank = SIZE_MAX;
            bs_item *its;
            size_t nits = bs_plan_step_items(plans[i], &its);
            for (size_t j = 0; j < nits; j++) {
                bs_item *it = &its[j];
                if ((int)plans[i]->req->questions[it->question].lang != lang) continue;
                if (rank == SIZE_MAX) { /* the request's state: seen in an earlier request of this language? */
                    for (size_t s = start; s < k && rank == SIZE_MAX; s++)
                        if (same_state(items[s].plan->req, plans[i]->req)) rank = items[s].state_rank;
                    if (rank == SIZE_MAX) rank = n_ranks++;
                }
                items[k++] = (item_ref){plans[i], it, lang, rank};
            }
        }
        size_t *at = calloc(n_ranks + 1, sizeof *at);
        if (!at) { rc = bs_fail(e, BS_ENOMEM, "out of memory"); goto done; }
        for (size_t s = start; s < k; s++) at[items[s].state_rank + 1]++;
        for (size_t r2 = 0; r2 < n_ranks; r2++) at[r2 + 1] += at[r2];
        for (size_t s = start; s < k; s++) tmp[start + at[items[s].state_rank]++] = items[s];
        free(at);
        memcpy(items + start, tmp + start, (k - start) * sizeof *items);
    }
    if (r->batching == BS_BATCH_BUDGET) {
        rc = run_budget(r, items, ni, e);
        goto done;
    }
    /* F3: greedy rows under tree_max_tokens (`single`: one item per row and per forward) */
    int single = r->batching == BS_BATCH_SINGLE;
    first[0] = 0;
    for (size_t i = 0; i < ni; i++) {
        const bs_item *it = items[i].item;
        const int32_t *pr[BS_N_ORDERS] = {it->orders[0].ids, it->orders[1].ids};
        int32_t ln[BS_N_ORDERS] = {it->orders[0].n_ids, it->orders[1].n_ids};
        size_t no = (size_t)it->n_orders;
        /* F1: a row never mixes languages */
        int lang_change = i > first[nrows] && items[i].lang != items[i - 1].lang;
        int64_t g = i > first[nrows] && !single && !lang_change ? bs_tc_growth(&tc, pr, ln, no) : 0;
        if (g < 0) { rc = bs_fail(e, (int)g, "out of memory"); goto done; }
        if (i > first[nrows] && (single || lang_change || tc.tokens + g > r->tree_max_tokens)) {
            first[++nrows] = i;
            bs_tc_reset(&tc);
        }
        if ((rc = bs_tc_insert(&tc, pr, ln, no)) < 0) { rc = bs_fail(e, rc, "out of memory"); goto done; }
    }
    first[++nrows] = ni;
    /* F4: pack each row; its state_len is the smallest of its items', capped */
    for (size_t ri = 0; ri < nrows; ri++) {
        size_t np = 0;
        int32_t sl = INT32_MAX;
        for (size_t i = first[ri]; i < first[ri + 1]; i++) {
            for (int o = 0; o < items[i].item->n_orders; o++) {
                prompts[np] = items[i].item->orders[o].ids;
                lens[np++] = items[i].item->orders[o].n_ids;
            }
            if (items[i].item->state_len < sl) sl = items[i].item->state_len;
        }
        if ((rc = bs_pack_row(&rows[ri], prompts, lens, (int32_t)np, e)) < 0) goto done;
        row_sl[ri] = sl < rows[ri].prefix_len ? sl : rows[ri].prefix_len;
    }
    /* F5: consecutive rows per forward under forward_max_tokens */
    for (size_t ri = 0; ri < nrows;) {
        size_t rj = ri + 1;
        int64_t total = rows[ri].len;
        /* F1: nor does a forward, so all its rows start with the same template */
        while (!single && rj < nrows && total + rows[rj].len <= r->forward_max_tokens &&
               items[first[rj]].lang == items[first[ri]].lang)
            total += rows[rj++].len;
        if ((rc = run_forward(r, items, first + ri, rows + ri, rj - ri, row_sl + ri, e)) < 0) goto done;
        ri = rj;
    }
done:
    if (rows)
        for (size_t ri = 0; ri < nrows; ri++) bs_row_free(&rows[ri]);
    bs_tc_free(&tc);
    free(items); free(tmp); free(first); free(rows); free(row_sl); free(lens); free(prompts);
    return rc;
}

int bs_runner_run(bs_runner *r, bs_plan *const *plans, size_t n, bs_err *e) {
    int rc = run_decisions(r, plans, n, e);
    /* 04 §7 B3: the evidence forwards follow the decisions */
    return rc < 0 ? rc : bs_ev_run(r, plans, n, e);
}

int bs_runner_run_all(bs_runner *r, bs_plan *const *plans, size_t n, bs_letter_cache *lc, bs_reply *const *reps,
                      bs_err *e) {
    /* live[j] is plans[at[j]]: every plan but those a request error took out */
    bs_plan **live = malloc((n ? n : 1) * sizeof *live);
    size_t *at = malloc((n ? n : 1) * sizeof *at), nl = n;
    int rc = live && at ? BS_OK : bs_fail(e, BS_ENOMEM, "out of memory");
    for (size_t i = 0; rc == BS_OK && i < n; i++) {
        live[i] = plans[i];
        at[i] = i;
    }
    while (rc == BS_OK && nl) {
        if ((rc = bs_runner_run(r, live, nl, e)) < 0) break;
        size_t kept = 0;
        int more = 0;
        for (size_t j = 0; rc == BS_OK && j < nl; j++) {
            bs_plan *p = live[j];
            int a = 0;
            if (p->round != 3) {
                bs_reply tmp;
                bs_reply_init(&tmp);
                bs_reply *rep = reps ? reps[at[j]] : &tmp;
                a = bs_plan_advance(p, r->m, lc, rep, e);
                if (a == BS_EINVAL && !reps)
                    bs_fail(e, BS_EINVAL, "%.*s", (int)tmp.body.len, tmp.body.data ? tmp.body.data : "");
                bs_reply_free(&tmp);
                if (a == BS_EINVAL && reps && rep->body.len) continue; /* this request alone fails (04 §3 P7) */
                if (a < 0) {
                    rc = a;
                    break;
                }
            }
            live[kept] = p;
            at[kept++] = at[j];
            more |= a;
        }
        nl = more ? kept : 0;
    }
    free(live);
    free(at);
    return rc;
}
