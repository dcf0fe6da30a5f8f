#include "engine/pack.h"

#include <stdlib.h>
#include <string.h>

typedef struct {
    const int32_t *const *prompts;
    const int32_t *lens;
    bs_row *row;
    int32_t cap_blocks;
} pack_ctx;

static int new_block(pack_ctx *c, int32_t parent, int32_t *out) {
    bs_row *r = c->row;
    if (r->n_blocks == c->cap_blocks) {
        int32_t ncap = c->cap_blocks ? c->cap_blocks * 2 : 16;
        int32_t *p = realloc(r->parent, (size_t)ncap * sizeof *p);
        if (!p) return BS_ENOMEM;
        r->parent = p;
        int32_t *s = realloc(r->blk_start, (size_t)ncap * sizeof *s);
        if (!s) return BS_ENOMEM;
        r->blk_start = s;
        int32_t *l = realloc(r->blk_len, (size_t)ncap * sizeof *l);
        if (!l) return BS_ENOMEM;
        r->blk_len = l;
        c->cap_blocks = ncap;
    }
    int32_t b = r->n_blocks++;
    r->parent[b] = parent;
    r->blk_start[b] = r->len;
    r->blk_len[b] = 0;
    *out = b;
    return BS_OK;
}

/* Appends tokens [from, to) of prompt p to block b (the row's current end). */
static void emit(pack_ctx *c, int32_t b, int32_t p, int32_t from, int32_t to) {
    bs_row *r = c->row;
    for (int32_t i = from; i < to; i++) {
        r->ids[r->len] = c->prompts[p][i];
        r->pos[r->len] = i;
        r->node[r->len] = b;
        r->len++;
    }
    r->blk_len[b] += to - from;
}

/* R2 of spec 04 §5: members share tokens [0, start); depth counts blocks above. */
static int trie(pack_ctx *c, int32_t *members, int32_t nm, int32_t start, int32_t parent, int depth) {
    int rc;
    int32_t b;
    if (nm == 1 || depth + 1 >= BS_MAX_TREE_DEPTH) {
        for (int32_t i = 0; i < nm; i++) {
            int32_t p = members[i];
            if ((rc = new_block(c, parent, &b)) < 0) return rc;
            emit(c, b, p, start, c->lens[p]);
            c->row->last[p] = c->row->len - 1;
        }
        return BS_OK;
    }
    int32_t end = start;
    for (;;) {
        int agree = 1;
        for (int32_t i = 0; i < nm && agree; i++) {
            int32_t p = members[i];
            if (end >= c->lens[p] || c->prompts[p][end] != c->prompts[members[0]][end]) agree = 0;
        }
        if (!agree) break;
        end++;
    }
    if ((rc = new_block(c, parent, &b)) < 0) return rc;
    emit(c, b, members[0], start, end);
    /* Members ending here read out at the last token emitted so far. */
    int32_t rest = 0;
    for (int32_t i = 0; i < nm; i++) {
        int32_t p = members[i];
        if (c->lens[p] == end) c->row->last[p] = c->row->len - 1;
        else members[rest++] = p;
    }
    /* Group the rest by their token at `end`, groups in order of first appearance;
     * members is reordered in place group by group (stable within a group). */
    int32_t *tmp = malloc((size_t)(rest ? rest : 1) * sizeof *tmp);
    if (!tmp) return BS_ENOMEM;
    int32_t done = 0;
    while (done < rest) {
        int32_t tok = c->prompts[members[done]][end], ng = 0, nr = 0;
        for (int32_t i = done; i < rest; i++) {
            int32_t p = members[i];
            if (c->prompts[p][end] == tok) members[done + ng++] = p;
            else tmp[nr++] = p;
        }
        memcpy(members + done + ng, tmp, (size_t)nr * sizeof *tmp);
        rc = trie(c, members + done, ng, end, b, depth + 1);
        if (rc < 0) { free(tmp); return rc; }
        done += ng;
    }
    free(tmp);
    return BS_OK;
}

int bs_pack_row(bs_row *row, const int32_t *const *prompts, const int32_t *lens, int32_t n, bs_err *e) {
    memset(row, 0, sizeof *row);
    if (n <= 0) return bs_fail(e, BS_EINVAL, "pack: no prompts");
    int64_t total = 0;
    for (int32_t i = 0; i < n; i++) {
        if (lens[i] <= 0) return bs_fail(e, BS_EINVAL, "pack: prompt %d is empty", i);
        total += lens[i];
    }
    if (total > INT32_MAX / 2) return bs_fail(e, BS_ERANGE, "pack: too many tokens");
    pack_ctx c = {prompts, lens, row, 0};
    int32_t *members = malloc((size_t)n * sizeof *members);
    row->ids = malloc((size_t)total * sizeof(int32_t));
    row->pos = malloc((size_t)total * sizeof(int32_t));
    row->node = malloc((size_t)total * sizeof(int32_t));
    row->last = malloc((size_t)n * sizeof(int32_t));
    row->n_prompts = n;
    int rc = BS_OK;
    if (!members || !row->ids || !row->pos || !row->node || !row->last) { rc = BS_ENOMEM; goto done; }
    for (int32_t i = 0; i < n; i++) members[i] = i;
    if (n == 1) { /* R1: an empty root, the prompt in block 1 */
        int32_t root, b;
        if ((rc = new_block(&c, -1, &root)) < 0 || (rc = new_block(&c, root, &b)) < 0) goto done;
        emit(&c, b, 0, 0, lens[0]);
        row->last[0] = row->len - 1;
    } else {
        rc = trie(&c, members, n, 0, -1, 0);
    }
    if (rc < 0) goto done;
    row->prefix_len = row->blk_len[0];
done:
    free(members);
    if (rc < 0) {
        bs_row_free(row);
        return bs_fail(e, rc, "pack: out of memory");
    }
    return BS_OK;
}

void bs_row_free(bs_row *row) {
    free(row->ids); free(row->pos); free(row->node); free(row->parent);
    free(row->blk_start); free(row->blk_len); free(row->last);
    memset(row, 0, sizeof *row);
}

int bs_packed_build(bs_packed *p, const bs_row *rows, int32_t n_rows, const bs_kv *const *prefixes,
                    const int32_t *out_ids, int32_t n_out_ids, bs_err *e) {
    memset(p, 0, sizeof *p);
    int64_t M = 0, nb = 0, np = 0;
    for (int32_t r = 0; r < n_rows; r++) {
        int32_t skip = prefixes && prefixes[r] ? prefixes[r]->n_tokens : 0;
        if (skip < 0 || skip >= rows[r].len) return bs_fail(e, BS_EINTERNAL, "pack: prefix covers the whole row");
        for (int32_t k = 0; k < rows[r].n_prompts; k++)
            if (rows[r].last[k] < skip) return bs_fail(e, BS_EINTERNAL, "pack: a readout lies inside the cached prefix");
        M += rows[r].len - skip;
        nb += rows[r].n_blocks;
        np += rows[r].n_prompts;
    }
    if (M <= 0 || M > INT32_MAX / 2) return bs_fail(e, BS_EINVAL, "pack: bad token count");
    p->ids = malloc((size_t)M * sizeof *p->ids);
    p->pos = malloc((size_t)M * sizeof *p->pos);
    p->units = malloc((size_t)(nb ? nb : 1) * sizeof *p->units);
    p->readouts = malloc((size_t)np * sizeof *p->readouts);
    p->readout_of = malloc((size_t)np * sizeof *p->readout_of);
    if (!p->ids || !p->pos || !p->units || !p->readouts || !p->readout_of) {
        bs_packed_free(p);
        return bs_fail(e, BS_ENOMEM, "pack: out of memory");
    }
    int32_t off = 0, nu = 0, nr = 0, pi = 0;
    for (int32_t r = 0; r < n_rows; r++) {
        const bs_row *row = &rows[r];
        const bs_kv *px = prefixes ? prefixes[r] : NULL;
        int32_t skip = px ? px->n_tokens : 0, n = row->len - skip;
        /* row column c >= skip lands at compact index off + c - skip */
        memcpy(p->ids + off, row->ids + skip, (size_t)n * sizeof *p->ids);
        memcpy(p->pos + off, row->pos + skip, (size_t)n * sizeof *p->pos);
        for (int32_t b = 0; b < row->n_blocks; b++) {
            int32_t b0 = row->blk_start[b] > skip ? row->blk_start[b] : skip;
            int32_t b1 = row->blk_start[b] + row->blk_len[b];
            if (b1 <= b0) continue; /* empty, or wholly inside the prefix */
            /* ancestors root-down, then the block itself */
            int32_t chain[BS_MAX_TREE_DEPTH + 1], depth = 0;
            for (int32_t a = b; a >= 0; a = row->parent[a]) {
                if (depth > BS_MAX_TREE_DEPTH) {
                    bs_packed_free(p);
                    return bs_fail(e, BS_EINTERNAL, "pack: tree deeper than %d blocks", BS_MAX_TREE_DEPTH);
                }
                chain[depth++] = a;
            }
            bs_unit *u = &p->units[nu++];
            memset(u, 0, sizeof *u);
            u->prefix = px;
            for (int32_t d = depth - 1; d >= 0; d--) {
                int32_t a = chain[d];
                int32_t a0 = row->blk_start[a] > skip ? row->blk_start[a] : skip;
                int32_t a1 = row->blk_start[a] + row->blk_len[a];
                if (a1 <= a0) continue;
                if (u->n_ranges == BS_MAX_TREE_DEPTH) {
                    bs_packed_free(p);
                    return bs_fail(e, BS_EINTERNAL, "pack: tree deeper than %d blocks", BS_MAX_TREE_DEPTH);
                }
                u->r_start[u->n_ranges] = off + a0 - skip;
                u->r_len[u->n_ranges] = a1 - a0;
                u->n_ranges++;
            }
            u->q_start = off + b0 - skip;
            u->q_len = b1 - b0;
        }
        for (int32_t k = 0; k < row->n_prompts; k++, pi++) {
            int32_t col = off + row->last[k] - skip, found = -1;
            for (int32_t j = 0; j < nr; j++)
                if (p->readouts[j] == col) { found = j; break; }
            if (found < 0) { found = nr; p->readouts[nr++] = col; }
            p->readout_of[pi] = found;
        }
        off += n;
    }
    p->n_prompts = (int32_t)np;
    p->in.n_tokens = (int32_t)M;
    p->in.ids = p->ids;
    p->in.pos = p->pos;
    p->in.n_units = nu;
    p->in.units = p->units;
    p->in.n_readouts = nr;
    p->in.readouts = p->readouts;
    p->in.n_out_ids = n_out_ids;
    p->in.out_ids = out_ids;
    return BS_OK;
}

void bs_packed_free(bs_packed *p) {
    free(p->ids); free(p->pos); free(p->units); free(p->readouts); free(p->readout_of);
    memset(p, 0, sizeof *p);
}
