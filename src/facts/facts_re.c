/* A small backtracking regex engine with Python `re` semantics for the facts
 * patterns (facts_re.h). Patterns compile to a program of the classic
 * backtracking VM (CHAR / CLASS / SPLIT / JMP / SAVE): SPLIT tries its first
 * branch first, which gives Python's leftmost-first alternation and greedy
 * quantifiers. The backtracking stack lives on the heap, so a long `\w*` run
 * in a hostile state costs memory, never C stack. */
#include "facts/facts_re.h"

#include <stdlib.h>
#include <string.h>
#include <utf8proc.h>

#include "base/utf8.h"

/* ---- Python's Unicode classes ------------------------------------------ */

int fx_is_digit(uint32_t c) {
    if (c < 0x80) return c >= '0' && c <= '9';
    return utf8proc_category((utf8proc_int32_t)c) == UTF8PROC_CATEGORY_ND;
}

/* str.isalnum(): isalpha() (L*) or isdecimal/isdigit/isnumeric (N* — every
 * character with a Numeric_Type outside N* is a letter, so L* ∪ N* is exact;
 * tests/unit/test_facts compares all code points with CPython). */
int fx_is_word(uint32_t c) {
    if (c < 0x80) return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_';
    if (c > 0x10FFFF) return 0;
    switch (utf8proc_category((utf8proc_int32_t)c)) {
    case UTF8PROC_CATEGORY_LU: case UTF8PROC_CATEGORY_LL: case UTF8PROC_CATEGORY_LT:
    case UTF8PROC_CATEGORY_LM: case UTF8PROC_CATEGORY_LO:
    case UTF8PROC_CATEGORY_ND: case UTF8PROC_CATEGORY_NL: case UTF8PROC_CATEGORY_NO:
        return 1;
    default:
        return 0;
    }
}

int fx_is_space(uint32_t c) {
    return (c >= 0x09 && c <= 0x0D) || (c >= 0x1C && c <= 0x20) || c == 0x85 || c == 0xA0 || c == 0x1680 ||
           (c >= 0x2000 && c <= 0x200A) || c == 0x2028 || c == 0x2029 || c == 0x202F || c == 0x205F || c == 0x3000;
}

int fx_digit_value(uint32_t c) {
    if (c < 0x80) return (int)(c - '0');
    uint32_t k = 0; /* distance to the start of the run of Nd characters */
    while (k < c && fx_is_digit(c - k - 1)) k++;
    return (int)(k % 10);
}

/* ---- pattern syntax tree ------------------------------------------------ */

enum { N_CHAR, N_CLASS, N_BOUND, N_CAT, N_ALT, N_GROUP, N_REPEAT, N_AHEAD, N_NBEHIND };

typedef struct node {
    int type;
    uint32_t c;      /* N_CHAR */
    int cls;         /* N_CLASS: index into the class table */
    int cap;         /* N_GROUP: group number, 0 for (?:...) */
    int min, max;    /* N_REPEAT: max -1 = unbounded */
    struct node **kids;
    size_t nk;
} node;

enum { CL_D = 1, CL_W = 2, CL_S = 4 };
typedef struct {
    uint32_t *r; /* inclusive lo, hi pairs */
    size_t nr;
    int flags;
    uint64_t ascii[2]; /* membership of U+0000..U+007F, filled after parsing */
} fx_class;

enum { I_CHAR, I_CLASS, I_BOUND, I_SPLIT, I_JMP, I_SAVE, I_AHEAD, I_NBEHIND, I_MATCH };
typedef struct {
    uint8_t op;
    uint32_t a; /* char, class, save slot or sub-program */
    int32_t x, y; /* jump targets; I_NBEHIND: y = width */
} inst;

typedef struct {
    inst *code;
    size_t n, cap;
} prog;

#define MAX_FIRST 48

struct fx_re {
    prog *progs; /* progs[0]: the pattern; the others: lookaround bodies */
    size_t nprog;
    fx_class *cls;
    size_t ncls;
    size_t groups;
    /* the CHAR/CLASS instructions that can consume a match's first character:
     * a start position whose character none of them accepts is skipped
     * without running the matcher (nfirst 0: no filter) */
    int32_t first[MAX_FIRST];
    size_t nfirst;
    uint64_t first_ascii[2]; /* the filter's answer for U+0000..U+007F */
};

typedef struct {
    const uint32_t *p;
    size_t n, i;
    int bad;
    int groups;
    fx_re *re;
} parser;

static void node_free(node *nd) {
    if (!nd) return;
    for (size_t i = 0; i < nd->nk; i++) node_free(nd->kids[i]);
    free(nd->kids);
    free(nd);
}

static node *node_new(parser *ps, int type) {
    node *nd = calloc(1, sizeof *nd);
    if (!nd) ps->bad = 1;
    else nd->type = type;
    return nd;
}

static int node_add(parser *ps, node *nd, node *kid) {
    if (!kid) { ps->bad = 1; return -1; }
    node **k = realloc(nd->kids, (nd->nk + 1) * sizeof *k);
    if (!k) { node_free(kid); ps->bad = 1; return -1; }
    nd->kids = k;
    nd->kids[nd->nk++] = kid;
    return 0;
}

static int hexval(uint32_t c) {
    if (c >= '0' && c <= '9') return (int)(c - '0');
    if (c >= 'a' && c <= 'f') return (int)(c - 'a' + 10);
    if (c >= 'A' && c <= 'F') return (int)(c - 'A' + 10);
    return -1;
}

/* \uXXXX after the backslash and 'u'; returns the code point or -1. */
static long parse_hex4(parser *ps) {
    if (ps->i + 4 > ps->n) return -1;
    long v = 0;
    for (int k = 0; k < 4; k++) {
        int h = hexval(ps->p[ps->i + k]);
        if (h < 0) return -1;
        v = v * 16 + h;
    }
    ps->i += 4;
    return v;
}

static int class_new(parser *ps, int flags) {
    fx_re *re = ps->re;
    fx_class *c = realloc(re->cls, (re->ncls + 1) * sizeof *c);
    if (!c) { ps->bad = 1; return -1; }
    re->cls = c;
    memset(&c[re->ncls], 0, sizeof *c);
    c[re->ncls].flags = flags;
    return (int)re->ncls++;
}

static int class_range(parser *ps, int ci, uint32_t lo, uint32_t hi) {
    fx_class *c = &ps->re->cls[ci];
    uint32_t *r = realloc(c->r, (c->nr + 1) * 2 * sizeof *r);
    if (!r) { ps->bad = 1; return -1; }
    c->r = r;
    c->r[2 * c->nr] = lo;
    c->r[2 * c->nr + 1] = hi;
    c->nr++;
    return 0;
}

static int escape_flag(uint32_t c) {
    return c == 'd' ? CL_D : c == 'w' ? CL_W : c == 's' ? CL_S : 0;
}

static node *parse_alt(parser *ps);

static node *parse_class(parser *ps) {
    int ci = class_new(ps, 0);
    if (ci < 0) return NULL;
    int first = 1;
    while (ps->i < ps->n && (ps->p[ps->i] != ']' || first)) {
        first = 0;
        uint32_t c = ps->p[ps->i++];
        if (c == '^' && ps->p[ps->i - 2] == '[') { ps->bad = 1; return NULL; } /* negation is not in the subset */
        if (c == '\\') {
            if (ps->i >= ps->n) { ps->bad = 1; return NULL; }
            uint32_t e = ps->p[ps->i++];
            int f = escape_flag(e);
            if (f) { ps->re->cls[ci].flags |= f; continue; }
            if (e == 'u') {
                long v = parse_hex4(ps);
                if (v < 0) { ps->bad = 1; return NULL; }
                c = (uint32_t)v;
            } else {
                c = e;
            }
        }
        uint32_t hi = c;
        if (ps->i + 1 < ps->n && ps->p[ps->i] == '-' && ps->p[ps->i + 1] != ']') {
            hi = ps->p[ps->i + 1];
            ps->i += 2;
            if (hi == '\\' || hi < c) { ps->bad = 1; return NULL; }
        }
        if (class_range(ps, ci, c, hi) < 0) return NULL;
    }
    if (ps->i >= ps->n) { ps->bad = 1; return NULL; }
    ps->i++; /* ] */
    node *nd = node_new(ps, N_CLASS);
    if (nd) nd->cls = ci;
    return nd;
}

static node *parse_atom(parser *ps) {
    uint32_t c = ps->p[ps->i++];
    if (c == '(') {
        int type = N_GROUP, cap = 0;
        if (ps->i < ps->n && ps->p[ps->i] == '?') {
            if (ps->i + 1 < ps->n && ps->p[ps->i + 1] == ':') { ps->i += 2; }
            else if (ps->i + 1 < ps->n && ps->p[ps->i + 1] == '=') { type = N_AHEAD; ps->i += 2; }
            else if (ps->i + 2 < ps->n && ps->p[ps->i + 1] == '<' && ps->p[ps->i + 2] == '!') {
                type = N_NBEHIND;
                ps->i += 3;
            } else {
                ps->bad = 1;
                return NULL;
            }
        } else {
            cap = ++ps->groups;
        }
        node *nd = node_new(ps, type);
        if (!nd) return NULL;
        nd->cap = cap;
        if (node_add(ps, nd, parse_alt(ps)) < 0 || ps->i >= ps->n || ps->p[ps->i] != ')') {
            ps->bad = 1;
            node_free(nd);
            return NULL;
        }
        ps->i++;
        return nd;
    }
    if (c == '[') return parse_class(ps);
    if (c == '.' || c == '^' || c == '$' || c == ')' || c == '*' || c == '+' || c == '?' || c == '{') {
        ps->bad = 1;
        return NULL;
    }
    if (c == '\\') {
        if (ps->i >= ps->n) { ps->bad = 1; return NULL; }
        uint32_t e = ps->p[ps->i++];
        int f = escape_flag(e);
        if (f) {
            int ci = class_new(ps, f);
            node *nd = ci < 0 ? NULL : node_new(ps, N_CLASS);
            if (nd) nd->cls = ci;
            return nd;
        }
        if (e == 'b') return node_new(ps, N_BOUND);
        if (e == 'n') {
            c = '\n';
        } else if (e == 'u') {
            long v = parse_hex4(ps);
            if (v < 0) { ps->bad = 1; return NULL; }
            c = (uint32_t)v;
        } else if ((e >= 'a' && e <= 'z') || (e >= 'A' && e <= 'Z') || (e >= '0' && e <= '9')) {
            ps->bad = 1; /* other letter escapes are not in the subset */
            return NULL;
        } else {
            c = e;
        }
    }
    node *nd = node_new(ps, N_CHAR);
    if (nd) nd->c = c;
    return nd;
}

static int parse_int(parser *ps) {
    int v = -1;
    while (ps->i < ps->n && ps->p[ps->i] >= '0' && ps->p[ps->i] <= '9' && v < 100000)
        v = (v < 0 ? 0 : v * 10) + (int)(ps->p[ps->i++] - '0');
    return v;
}

static node *parse_repeat(parser *ps) {
    node *atom = parse_atom(ps);
    while (atom && ps->i < ps->n) {
        uint32_t c = ps->p[ps->i];
        int min, max;
        if (c == '?') { min = 0; max = 1; }
        else if (c == '*') { min = 0; max = -1; }
        else if (c == '+') { min = 1; max = -1; }
        else if (c == '{') {
            ps->i++;
            min = parse_int(ps);
            max = min;
            if (ps->i < ps->n && ps->p[ps->i] == ',') { ps->i++; max = parse_int(ps); }
            if (min < 0 || max < min || ps->i >= ps->n || ps->p[ps->i] != '}') {
                ps->bad = 1;
                node_free(atom);
                return NULL;
            }
        } else {
            break;
        }
        ps->i++;
        if (ps->i < ps->n && (ps->p[ps->i] == '?' || ps->p[ps->i] == '+')) { /* lazy/possessive: not in the subset */
            ps->bad = 1;
            node_free(atom);
            return NULL;
        }
        node *r = node_new(ps, N_REPEAT);
        if (!r || node_add(ps, r, atom) < 0) { node_free(r); if (!r) node_free(atom); return NULL; }
        r->min = min;
        r->max = max;
        atom = r;
    }
    return atom;
}

static node *parse_cat(parser *ps) {
    node *cat = node_new(ps, N_CAT);
    while (cat && ps->i < ps->n && ps->p[ps->i] != '|' && ps->p[ps->i] != ')')
        if (node_add(ps, cat, parse_repeat(ps)) < 0) { node_free(cat); return NULL; }
    return cat;
}

static node *parse_alt(parser *ps) {
    node *alt = node_new(ps, N_ALT);
    if (!alt || node_add(ps, alt, parse_cat(ps)) < 0) { node_free(alt); return NULL; }
    while (ps->i < ps->n && ps->p[ps->i] == '|') {
        ps->i++;
        if (node_add(ps, alt, parse_cat(ps)) < 0) { node_free(alt); return NULL; }
    }
    return alt;
}

/* ---- compilation -------------------------------------------------------- */

static int emit(prog *pg, int op, uint32_t a, int32_t x, int32_t y) {
    if (pg->n == pg->cap) {
        size_t cap = pg->cap ? pg->cap * 2 : 64;
        inst *c = realloc(pg->code, cap * sizeof *c);
        if (!c) return -1;
        pg->code = c;
        pg->cap = cap;
    }
    pg->code[pg->n] = (inst){(uint8_t)op, a, x, y};
    return (int)pg->n++;
}

/* Fixed width of a lookbehind body, or -1. */
static int width(const node *nd) {
    switch (nd->type) {
    case N_CHAR: case N_CLASS: return 1;
    case N_BOUND: case N_AHEAD: case N_NBEHIND: return 0;
    case N_CAT: {
        int w = 0;
        for (size_t i = 0; i < nd->nk; i++) {
            int k = width(nd->kids[i]);
            if (k < 0) return -1;
            w += k;
        }
        return w;
    }
    case N_ALT: {
        int w = nd->nk ? width(nd->kids[0]) : 0;
        for (size_t i = 1; i < nd->nk; i++)
            if (width(nd->kids[i]) != w) return -1;
        return w;
    }
    case N_GROUP: return width(nd->kids[0]);
    case N_REPEAT: {
        int k = width(nd->kids[0]);
        return (k < 0 || nd->min != nd->max) ? -1 : k * nd->min;
    }
    }
    return -1;
}

static int compile_sub(fx_re *re, const node *body, int lookbehind);

static int gen(fx_re *re, size_t pi, const node *nd) {
#define PG (&re->progs[pi])
    switch (nd->type) {
    case N_CHAR: return emit(PG, I_CHAR, nd->c, 0, 0) < 0 ? -1 : 0;
    case N_CLASS: return emit(PG, I_CLASS, (uint32_t)nd->cls, 0, 0) < 0 ? -1 : 0;
    case N_BOUND: return emit(PG, I_BOUND, 0, 0, 0) < 0 ? -1 : 0;
    case N_CAT:
        for (size_t i = 0; i < nd->nk; i++)
            if (gen(re, pi, nd->kids[i]) < 0) return -1;
        return 0;
    case N_ALT: {
        if (nd->nk == 1) return gen(re, pi, nd->kids[0]);
        int32_t *jumps = calloc(nd->nk, sizeof *jumps);
        if (!jumps) return -1;
        int rc = 0;
        for (size_t i = 0; i < nd->nk && rc == 0; i++) {
            int split = -1;
            if (i + 1 < nd->nk && (split = emit(PG, I_SPLIT, 0, 0, 0)) < 0) { rc = -1; break; }
            if (split >= 0) PG->code[split].x = (int32_t)PG->n;
            if (gen(re, pi, nd->kids[i]) < 0) { rc = -1; break; }
            if (i + 1 < nd->nk) {
                if ((jumps[i] = emit(PG, I_JMP, 0, 0, 0)) < 0) { rc = -1; break; }
                PG->code[split].y = (int32_t)PG->n;
            }
        }
        for (size_t i = 0; rc == 0 && i + 1 < nd->nk; i++) PG->code[jumps[i]].x = (int32_t)PG->n;
        free(jumps);
        return rc;
    }
    case N_GROUP:
        if (nd->cap && emit(PG, I_SAVE, (uint32_t)(2 * nd->cap), 0, 0) < 0) return -1;
        if (gen(re, pi, nd->kids[0]) < 0) return -1;
        if (nd->cap && emit(PG, I_SAVE, (uint32_t)(2 * nd->cap + 1), 0, 0) < 0) return -1;
        return 0;
    case N_REPEAT: {
        const node *k = nd->kids[0];
        for (int i = 0; i < nd->min; i++)
            if (gen(re, pi, k) < 0) return -1;
        if (nd->max < 0) { /* L: SPLIT body, end; body; JMP L */
            int l = emit(PG, I_SPLIT, 0, 0, 0);
            if (l < 0) return -1;
            PG->code[l].x = l + 1;
            if (gen(re, pi, k) < 0 || emit(PG, I_JMP, 0, l, 0) < 0) return -1;
            PG->code[l].y = (int32_t)PG->n;
            return 0;
        }
        int n_opt = nd->max - nd->min;
        int32_t *splits = calloc(n_opt ? (size_t)n_opt : 1, sizeof *splits);
        if (!splits) return -1;
        for (int i = 0; i < n_opt; i++) {
            if ((splits[i] = emit(PG, I_SPLIT, 0, 0, 0)) < 0 || gen(re, pi, k) < 0) { free(splits); return -1; }
            PG->code[splits[i]].x = splits[i] + 1;
        }
        for (int i = 0; i < n_opt; i++) PG->code[splits[i]].y = (int32_t)PG->n;
        free(splits);
        return 0;
    }
    case N_AHEAD:
    case N_NBEHIND: {
        int w = nd->type == N_NBEHIND ? width(nd->kids[0]) : 0;
        if (w < 0) return -1;
        int sub = compile_sub(re, nd->kids[0], nd->type == N_NBEHIND);
        if (sub < 0) return -1;
        return emit(PG, nd->type == N_AHEAD ? I_AHEAD : I_NBEHIND, (uint32_t)sub, 0, w) < 0 ? -1 : 0;
    }
    }
    return -1;
#undef PG
}

static int compile_sub(fx_re *re, const node *body, int lookbehind) {
    prog *p = realloc(re->progs, (re->nprog + 1) * sizeof *p);
    if (!p) return -1;
    re->progs = p;
    memset(&p[re->nprog], 0, sizeof *p);
    size_t pi = re->nprog++;
    if (gen(re, pi, body) < 0 || emit(&re->progs[pi], I_MATCH, 0, 0, 0) < 0) return -1;
    (void)lookbehind;
    return (int)pi;
}

void fx_re_free(fx_re *re) {
    if (!re) return;
    for (size_t i = 0; i < re->nprog; i++) free(re->progs[i].code);
    free(re->progs);
    for (size_t i = 0; i < re->ncls; i++) free(re->cls[i].r);
    free(re->cls);
    free(re);
}

static void compute_first(fx_re *re);
static int class_has_slow(const fx_class *c, uint32_t ch);
static int first_ok(const fx_re *re, uint32_t c);

fx_re *fx_re_compile(const char *pattern) {
    uint32_t *cps = NULL;
    size_t n = 0;
    if (bs_utf8_decode(pattern, strlen(pattern), &cps, &n, NULL) < 0) return NULL;
    fx_re *re = calloc(1, sizeof *re);
    parser ps = {cps, n, 0, 0, 0, re};
    node *root = re ? parse_alt(&ps) : NULL;
    int ok = root && !ps.bad && ps.i == n;
    if (ok) {
        re->groups = (size_t)ps.groups;
        ok = compile_sub(re, root, 0) == 0;
        if (ok) compute_first(re);
    }
    node_free(root);
    free(cps);
    if (!ok) {
        fx_re_free(re);
        return NULL;
    }
    return re;
}

size_t fx_re_groups(const fx_re *re) { return re->groups; }

/* Collects the consuming instructions reachable from pc without consuming;
 * -1 when the program could match without consuming (no filter then). */
static int collect_first(fx_re *re, int32_t pc, uint8_t *seen) {
    const inst *code = re->progs[0].code;
    while (!seen[pc]) {
        seen[pc] = 1;
        switch (code[pc].op) {
        case I_CHAR: case I_CLASS:
            if (re->nfirst == MAX_FIRST) return -1;
            re->first[re->nfirst++] = pc;
            return 0;
        case I_SPLIT:
            if (collect_first(re, code[pc].x, seen) < 0) return -1;
            pc = code[pc].y;
            break;
        case I_JMP: pc = code[pc].x; break;
        case I_MATCH: return -1;
        default: pc++; break; /* assertions and saves consume nothing */
        }
    }
    return 0;
}

static void compute_first(fx_re *re) {
    for (size_t i = 0; i < re->ncls; i++)
        for (uint32_t c = 0; c < 128; c++)
            if (class_has_slow(&re->cls[i], c)) re->cls[i].ascii[c >> 6] |= (uint64_t)1 << (c & 63);
    uint8_t *seen = calloc(re->progs[0].n, 1);
    re->nfirst = 0;
    if (!seen || collect_first(re, 0, seen) < 0) re->nfirst = 0;
    free(seen);
    for (uint32_t c = 0; c < 128; c++)
        if (first_ok(re, c)) re->first_ascii[c >> 6] |= (uint64_t)1 << (c & 63);
}

/* ---- execution ---------------------------------------------------------- */

static int class_has_slow(const fx_class *c, uint32_t ch) {
    for (size_t i = 0; i < c->nr; i++)
        if (ch >= c->r[2 * i] && ch <= c->r[2 * i + 1]) return 1;
    if ((c->flags & CL_D) && fx_is_digit(ch)) return 1;
    if ((c->flags & CL_W) && fx_is_word(ch)) return 1;
    if ((c->flags & CL_S) && fx_is_space(ch)) return 1;
    return 0;
}

static int class_has(const fx_class *c, uint32_t ch) {
    if (ch < 128) return (int)((c->ascii[ch >> 6] >> (ch & 63)) & 1);
    return class_has_slow(c, ch);
}

/* A backtrack entry: a thread (pc >= 0, sp) or the restore of a capture slot
 * (pc = -1 - slot, sp = the old value). */
typedef struct {
    int32_t pc;
    size_t sp;
} bt_entry;

typedef struct {
    bt_entry *e;
    size_t n, cap;
    bt_entry local[64];
} bt_stack;

static int bt_push(bt_stack *s, int32_t pc, size_t sp) {
    if (s->n == s->cap) {
        size_t cap = s->cap * 2;
        bt_entry *e = s->e == s->local ? malloc(cap * sizeof *e) : realloc(s->e, cap * sizeof *e);
        if (!e) return -1;
        if (s->e == s->local) memcpy(e, s->local, sizeof s->local);
        s->e = e;
        s->cap = cap;
    }
    s->e[s->n++] = (bt_entry){pc, sp};
    return 0;
}

/* The guard against backtracking blow-up (a long run of "123 123 …" makes
 * every start position re-walk the run: quadratic, as in CPython). A thread
 * state (pc, sp) explored once needs no second exploration: if it had led to
 * a match, the search would have stopped with that (higher-priority) match,
 * so a later arrival can only fail — the visited-bitmap argument of RE2's
 * BitState, which keeps leftmost-first results and captures. The bitmap
 * spans the searched positions [base, n] and is only built once a search
 * has run STEP_BUDGET steps per position, so ordinary texts never pay for it. */
typedef struct {
    uint64_t *bits; /* NULL: not in use */
    size_t base, ninst;
    size_t steps, budget; /* steps run without the bitmap, and the limit */
} memo;

#define MEMO_MAX_BYTES ((size_t)64 << 20)
static size_t g_step_budget = 64; /* per searched position; 0: the bitmap from the start */

void fx_re_set_step_budget(size_t per_position) { g_step_budget = per_position; }

/* 1 when (pc, sp) was already explored (and marks it otherwise). */
static int memo_seen(memo *mm, int32_t pc, size_t sp) {
    size_t bit = (sp - mm->base) * mm->ninst + (size_t)pc;
    uint64_t m = (uint64_t)1 << (bit & 63);
    if (mm->bits[bit >> 6] & m) return 1;
    mm->bits[bit >> 6] |= m;
    return 0;
}

/* Runs program pi anchored at `at`; 1 matched (caps filled when not NULL),
 * 0 not, -1 out of memory, 2 the step budget of mm ran out (mm without a
 * bitmap and a nonzero budget). */
static int run(const fx_re *re, size_t pi, const uint32_t *t, size_t n, size_t at, size_t *caps, memo *mm) {
    const inst *code = re->progs[pi].code;
    bt_stack s;
    s.e = s.local;
    s.n = 0;
    s.cap = sizeof s.local / sizeof s.local[0];
    int result = 0;
    if (bt_push(&s, 0, at) < 0) return -1;
    while (s.n && result == 0) {
        bt_entry cur = s.e[--s.n];
        if (cur.pc < 0) {
            caps[-1 - cur.pc] = cur.sp;
            continue;
        }
        int32_t pc = cur.pc;
        size_t sp = cur.sp;
        for (;;) {
            const inst *in = &code[pc];
            int ok = 1;
            if (mm) {
                if (mm->bits) {
                    if (memo_seen(mm, pc, sp)) break;
                } else if (mm->budget && ++mm->steps > mm->budget) {
                    result = 2;
                    goto done;
                }
            }
            switch (in->op) {
            case I_CHAR:
                ok = sp < n && t[sp] == in->a;
                if (ok) { sp++; pc++; }
                break;
            case I_CLASS:
                ok = sp < n && class_has(&re->cls[in->a], t[sp]);
                if (ok) { sp++; pc++; }
                break;
            case I_BOUND: {
                int before = sp > 0 && fx_is_word(t[sp - 1]);
                int after = sp < n && fx_is_word(t[sp]);
                ok = before != after;
                pc++;
                break;
            }
            case I_SPLIT:
                if (bt_push(&s, in->y, sp) < 0) { result = -1; goto done; }
                pc = in->x;
                break;
            case I_JMP:
                pc = in->x;
                break;
            case I_SAVE:
                if (caps) {
                    if (bt_push(&s, -1 - (int32_t)in->a, caps[in->a]) < 0) { result = -1; goto done; }
                    caps[in->a] = sp;
                }
                pc++;
                break;
            case I_AHEAD: {
                int r = run(re, in->a, t, n, sp, NULL, NULL);
                if (r < 0) { result = -1; goto done; }
                ok = r == 1;
                pc++;
                break;
            }
            case I_NBEHIND: {
                size_t w = (size_t)in->y;
                if (sp >= w) {
                    /* the body on t[sp-w .. sp) as a whole: its fixed width ends it at sp */
                    int r = run(re, in->a, t, sp, sp - w, NULL, NULL);
                    if (r < 0) { result = -1; goto done; }
                    ok = r == 0;
                }
                pc++;
                break;
            }
            case I_MATCH:
                if (caps) caps[1] = sp;
                result = 1;
                goto done;
            }
            if (!ok) break;
        }
    }
done:
    if (s.e != s.local) free(s.e);
    return result;
}

static int match_at(const fx_re *re, const uint32_t *t, size_t n, size_t at, size_t *caps, memo *mm) {
    size_t nslots = 2 * (re->groups + 1);
    for (size_t i = 0; i < nslots; i++) caps[i] = FX_NOPOS;
    caps[0] = at;
    int r = run(re, 0, t, n, at, caps, mm);
    if (r != 1)
        for (size_t i = 0; i < nslots; i++) caps[i] = FX_NOPOS;
    return r;
}

int fx_re_match(const fx_re *re, const uint32_t *t, size_t n, size_t at, size_t *caps) {
    return match_at(re, t, n, at, caps, NULL);
}

static int first_ok(const fx_re *re, uint32_t c) {
    const inst *code = re->progs[0].code;
    for (size_t i = 0; i < re->nfirst; i++) {
        const inst *in = &code[re->first[i]];
        if (in->op == I_CHAR ? in->a == c : class_has(&re->cls[in->a], c)) return 1;
    }
    return 0;
}

static int search_from(const fx_re *re, const uint32_t *t, size_t n, size_t from, size_t *caps, memo *mm) {
    for (size_t at = from; at <= n; at++) {
        if (re->nfirst) {
            if (at == n) continue;
            uint32_t c = t[at];
            if (c < 128 ? !((re->first_ascii[c >> 6] >> (c & 63)) & 1) : !first_ok(re, c)) continue;
        }
        int r = match_at(re, t, n, at, caps, mm);
        if (r != 0) return r;
    }
    return 0;
}

int fx_re_search(const fx_re *re, const uint32_t *t, size_t n, size_t from, size_t *caps) {
    if (from > n) return 0;
    size_t width = n - from + 1, ninst = re->progs[0].n;
    memo mm = {NULL, from, ninst, 0, 0};
    /* the bitmap is affordable: give the plain search a budget first */
    int affordable = ninst && width <= MEMO_MAX_BYTES * 8 / ninst, r = 2;
    if (affordable && g_step_budget) mm.budget = g_step_budget * width + 4096;
    if (!affordable || g_step_budget) r = search_from(re, t, n, from, caps, &mm);
    if (r != 2) return r;
    /* the budget ran out: the same search again, each state explored once */
    size_t words = (width * ninst + 63) / 64;
    mm.bits = calloc(words, sizeof *mm.bits);
    if (!mm.bits) return -1;
    r = search_from(re, t, n, from, caps, &mm);
    free(mm.bits);
    return r;
}
