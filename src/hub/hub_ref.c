/* Model references and the Hub environment (spec 06 §3 R1–R2): the same
 * variables, defaults and precedence as huggingface_hub's constants, so that
 * basal-c finds the cache and the token where the Hugging Face tools put
 * them; the reference grammar of basal-rs (config.rs model_ref). */
#include "hub/hub_int.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "base/util.h"

static const char *env(const char *name) {
    const char *v = getenv(name);
    return v && *v ? v : NULL;
}

/* huggingface_hub's truthy set: 1, ON, YES, TRUE in any case. */
static int truthy(const char *v) {
    static const char *const yes[] = { "1", "on", "yes", "true" };
    if (!v) return 0;
    for (size_t i = 0; i < sizeof yes / sizeof *yes; i++)
        if (!strcasecmp(v, yes[i])) return 1;
    return 0;
}

/* A leading ~ or ~/ is the home directory, as Python's expanduser. */
static char *expand_home(const char *p) {
    const char *home = getenv("HOME");
    if (p[0] == '~' && (p[1] == '/' || !p[1]) && home) return bs_strfmt("%s%s", home, p + 1);
    return bs_strfmt("%s", p);
}

/* text without CR, LF or surrounding blanks (huggingface_hub's
 * _clean_token), malloc'd; NULL when that leaves nothing (or out of memory:
 * *oom is then set). text is wiped. */
static char *clean_token(char *text, size_t len, int *oom) {
    size_t w = 0;
    for (size_t i = 0; i < len; i++)
        if (text[i] != '\r' && text[i] != '\n') text[w++] = text[i];
    text[w] = 0;
    char *s = text;
    while (*s && isspace((unsigned char)*s)) s++;
    size_t n = strlen(s);
    while (n && isspace((unsigned char)s[n - 1])) s[--n] = 0;
    char *out = n ? bs_strfmt("%s", s) : NULL;
    if (n && !out) *oom = 1;
    bs_hub_wipe(text);
    return out;
}

/* The token file's contents, cleaned. NULL when missing or empty. */
static char *read_token(const char *path, int *oom) {
    char *text = NULL;
    size_t len = 0;
    if (bs_read_regular_file(path, &text, &len, 1 << 16, NULL) < 0) return NULL;
    char *out = clean_token(text, len, oom);
    free(text);
    return out;
}

/* HF_TOKEN (else HUGGING_FACE_HUB_TOKEN), cleaned; NULL when unset or blank. */
static char *env_token(const char **from, int *oom) {
    static const char *const names[] = { "HF_TOKEN", "HUGGING_FACE_HUB_TOKEN" };
    for (size_t i = 0; i < sizeof names / sizeof *names; i++) {
        const char *v = env(names[i]);
        char *copy = v ? bs_strfmt("%s", v) : NULL;
        if (v && !copy) {
            *oom = 1;
            return NULL;
        }
        char *t = copy ? clean_token(copy, strlen(copy), oom) : NULL;
        free(copy);
        if (t || *oom) {
            *from = names[i];
            return t;
        }
    }
    return NULL;
}

int bs_hub_env_load(bs_hub_env *h, bs_err *e) {
    memset(h, 0, sizeof *h);
    char *hf_home = NULL;
    const char *home = getenv("HOME");
    if (env("HF_HOME")) hf_home = expand_home(env("HF_HOME"));
    else if (env("XDG_CACHE_HOME")) hf_home = bs_strfmt("%s/huggingface", env("XDG_CACHE_HOME"));
    else hf_home = bs_strfmt("%s/.cache/huggingface", home ? home : "");
    if (!hf_home) goto oom;
    if (env("HF_HUB_CACHE")) {
        h->cache = expand_home(env("HF_HUB_CACHE"));
        h->cache_from = "HF_HUB_CACHE";
    } else if (env("HUGGINGFACE_HUB_CACHE")) { /* the older name huggingface_hub still reads */
        h->cache = expand_home(env("HUGGINGFACE_HUB_CACHE"));
        h->cache_from = "HUGGINGFACE_HUB_CACHE";
    } else {
        h->cache = bs_strfmt("%s/hub", hf_home);
        h->cache_from = env("HF_HOME") ? "HF_HOME" : env("XDG_CACHE_HOME") ? "XDG_CACHE_HOME" : "HOME";
    }
    if (!h->cache) goto oom;
    const char *ep = env("HF_ENDPOINT") ? env("HF_ENDPOINT") : "https://huggingface.co";
    if (!(h->endpoint = bs_strfmt("%s", ep))) goto oom;
    for (size_t n = strlen(h->endpoint); n && h->endpoint[n - 1] == '/';) h->endpoint[--n] = 0;
    const char *from = NULL;
    int oom = 0;
    if ((h->token = env_token(&from, &oom))) {
        h->token_from = bs_strfmt("%s", from);
    } else if (!oom) { /* as huggingface_hub: a blank HF_TOKEN is none, and the file is read */
        char *path = env("HF_TOKEN_PATH") ? expand_home(env("HF_TOKEN_PATH")) : bs_strfmt("%s/token", hf_home);
        if (!path) goto oom;
        if ((h->token = read_token(path, &oom))) h->token_from = path;
        else free(path);
    }
    if (oom || (h->token && !h->token_from)) goto oom;
    h->offline = truthy(env("HF_HUB_OFFLINE")) || truthy(env("TRANSFORMERS_OFFLINE"));
    free(hf_home);
    return BS_OK;
oom:
    free(hf_home);
    bs_hub_env_free(h);
    return bs_fail(e, BS_ENOMEM, "out of memory");
}

void bs_hub_wipe(char *s) {
    if (s) /* volatile: the stores are not dropped as dead before free */
        for (volatile char *p = s; *p; p++) *p = 0;
}

void bs_hub_env_free(bs_hub_env *h) {
    free(h->cache);
    free(h->endpoint);
    bs_hub_wipe(h->token); /* the token does not outlive its use in freed memory */
    free(h->token);
    free(h->token_from);
    memset(h, 0, sizeof *h);
}

/* The published releases and their pinned commits (06 §3 R1). */
static const struct { const char *shortname, *repo, *commit; } releases[] = {
    { "mini", "Remek/basal-1.5-mini", "1978d0705ce09cd2d7d8d3e87b304468121e7255" },
    { "4.5B", "Remek/basal-1.5-4.5B", "784a683bfadcc8865238fc0fc74a83b4000269bc" },
    { "max", "Remek/basal-1.5-max", "be1b5ee7e7a9755a931262fa7fab4f59be0fd03c" },
};

int bs_hub_is_commit(const char *s) {
    size_t n = 0;
    for (; s[n]; n++)
        if (!isdigit((unsigned char)s[n]) && !(s[n] >= 'a' && s[n] <= 'f')) return 0;
    return n == 40;
}

/* The Hub's rule for an owner or a repository name: letters, digits, '-',
 * '_' and '.', not starting or ending with '-' or '.', no "--" or "..", at
 * most 96 characters (huggingface_hub validate_repo_id). */
static int name_ok(const char *s, size_t n) {
    if (!n || n > 96 || s[0] == '-' || s[0] == '.' || s[n - 1] == '-' || s[n - 1] == '.') return 0;
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        if (!isalnum(c) && c != '-' && c != '_' && c != '.') return 0;
        if (i && (c == '-' || c == '.') && s[i - 1] == c) return 0;
    }
    return 1;
}

/* A revision goes into URLs (percent-encoded) and into refs/<rev> as a path:
 * no empty segment, no "." or "..", no control bytes or backslashes. */
static int rev_ok(const char *r) {
    size_t n = strlen(r);
    if (!n || n >= sizeof ((bs_hub_ref *)0)->rev || r[0] == '/' || r[n - 1] == '/') return 0;
    for (const char *p = r; *p; p++) {
        if ((unsigned char)*p < 0x20 || *p == 0x7f || *p == '\\') return 0;
        if (*p == '/' && p[1] == '/') return 0;
    }
    for (const char *seg = r; seg;) {
        const char *end = strchr(seg, '/');
        size_t len = end ? (size_t)(end - seg) : strlen(seg);
        if ((len == 1 && seg[0] == '.') || (len == 2 && seg[0] == '.' && seg[1] == '.')) return 0;
        seg = end ? end + 1 : NULL;
    }
    return 1;
}

int bs_hub_ref_parse(const char *ref, const char *revision, bs_hub_ref *out, bs_err *e) {
    memset(out, 0, sizeof *out);
    if (!ref || !*ref) return bs_fail(e, BS_EINVAL, "empty model reference");
    const char *at = strchr(ref, '@');
    size_t rl = at ? (size_t)(at - ref) : strlen(ref);
    if (at && !at[1]) return bs_fail(e, BS_EINVAL, "model %s: empty revision after @", ref);
    const char *pinned = NULL;
    char repo[sizeof out->repo];
    repo[0] = 0;
    for (size_t i = 0; i < sizeof releases / sizeof *releases; i++) {
        const char *full = releases[i].repo, *name = strchr(full, '/') + 1;
        if ((strlen(releases[i].shortname) == rl && !strncasecmp(ref, releases[i].shortname, rl)) ||
            (strlen(full) == rl && !strncasecmp(ref, full, rl)) || (strlen(name) == rl && !strncasecmp(ref, name, rl))) {
            snprintf(repo, sizeof repo, "%s", full);
            pinned = releases[i].commit;
        }
    }
    if (!repo[0]) {
        const char *slash = memchr(ref, '/', rl);
        if (!slash) { /* a bare name is one of Remek's (basal-rs DEFAULT_OWNER) */
            if (!name_ok(ref, rl))
                return bs_fail(e, BS_EINVAL, "model %s: no such directory, and not a model reference (mini, 4.5B, max, "
                               "owner/name or owner/name@revision)", ref);
            snprintf(repo, sizeof repo, "Remek/%.*s", (int)rl, ref);
        } else {
            size_t ol = (size_t)(slash - ref), nl = rl - ol - 1;
            if (rl >= sizeof repo) /* two names of 96 do not fit: refused, never cut to another repository */
                return bs_fail(e, BS_EINVAL, "model %s: the repository id is longer than %zu characters", ref,
                               sizeof repo - 1);
            if (!name_ok(ref, ol) || !name_ok(slash + 1, nl))
                return bs_fail(e, BS_EINVAL, "model %s: no such directory, and not a model reference (owner/name"
                               "[@revision], names of letters, digits, '-', '_' and '.')", ref);
            snprintf(repo, sizeof repo, "%.*s", (int)rl, ref);
        }
    }
    const char *rev = revision ? revision : at ? at + 1 : pinned ? pinned : "main";
    if (!rev_ok(rev)) return bs_fail(e, BS_EINVAL, "model %s: invalid revision '%s'", ref, rev);
    snprintf(out->repo, sizeof out->repo, "%s", repo);
    snprintf(out->rev, sizeof out->rev, "%s", rev);
    out->pinned = pinned && !strcmp(rev, pinned);
    return BS_OK;
}

const char *bs_hub_yaml_revision(const char *repo, const char *revision) {
    if (revision) return revision;
    if (strchr(repo, '@')) return NULL; /* repo: owner/name@rev names its revision (06 §3 R1) */
    return strchr(repo, '/') ? "main" : NULL;
}

void bs_hub_ref_show(const bs_hub_ref *r, char *out, size_t cap) {
    if (bs_hub_is_commit(r->rev)) snprintf(out, cap, "%s@%.8s", r->repo, r->rev);
    else snprintf(out, cap, "%s@%s", r->repo, r->rev);
}

char *bs_hub_repo_dir(const bs_hub_env *env, const char *repo) {
    const char *slash = strchr(repo, '/');
    if (!slash) return NULL;
    return bs_strfmt("%s/models--%.*s--%s", env->cache, (int)(slash - repo), repo, slash + 1);
}
