/* Model references (spec 06 §3 R1–R2): a local directory, a short name of a
 * Basal release, or owner/name[@revision] resolved only against an existing
 * Hugging Face cache — this build never downloads. */
#include "server/modelref.h"

#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "core/util.h"

static int is_dir(const char *p) {
    struct stat st;
    return stat(p, &st) == 0 && S_ISDIR(st.st_mode);
}

/* The pinned revisions of the published releases (06 §3 R1); the first two
 * are known by prefix only, which R2 accepts when it is unique. */
static const struct { const char *a, *b, *repo, *rev; } shorts[] = {
    { "mini", "basal-1.5-mini", "Remek/basal-1.5-mini", "1978d070" },
    { "4.5B", "basal-1.5-4.5B", "Remek/basal-1.5-4.5B", "784a683b" },
    { "max", "basal-1.5-max", "Remek/basal-1.5-max", "be1b5ee7e7a9755a931262fa7fab4f59be0fd03c" },
};

/* refs/<rev> holds a commit; else rev is a commit or a unique prefix of one. */
static int find_snapshot(const char *repo_dir, const char *rev, char **out) {
    char *refp = bs_strfmt("%s/refs/%s", repo_dir, rev);
    char *commit = NULL;
    size_t n = 0;
    if (!refp) return BS_ENOMEM;
    if (!strchr(rev, '/') && bs_read_file(refp, &commit, &n, NULL) == 0) {
        while (n && (commit[n - 1] == '\n' || commit[n - 1] == '\r' || commit[n - 1] == ' ')) commit[--n] = 0;
    }
    free(refp);
    const char *want = commit && *commit ? commit : rev;
    char *snaps = bs_strfmt("%s/snapshots", repo_dir);
    int rc = BS_EIO;
    DIR *d = snaps ? opendir(snaps) : NULL;
    char *found = NULL;
    int matches = 0;
    if (d) {
        struct dirent *de;
        size_t wl = strlen(want);
        while ((de = readdir(d))) {
            if (de->d_name[0] == '.' || strncmp(de->d_name, want, wl)) continue;
            if (++matches == 1) found = bs_strfmt("%s/%s", snaps, de->d_name);
        }
        closedir(d);
    }
    if (matches == 1 && found && is_dir(found)) {
        *out = found;
        found = NULL;
        rc = BS_OK;
    }
    free(found);
    free(snaps);
    free(commit);
    return rc;
}

int bs_model_ref_resolve(const char *ref, const char *revision, char **dir, bs_err *e) {
    *dir = NULL;
    if (!revision && is_dir(ref)) {
        if (!(*dir = bs_strfmt("%s", ref))) return bs_fail(e, BS_ENOMEM, "out of memory");
        return BS_OK;
    }
    char repo[512], rev[256];
    const char *r = ref, *pinned = NULL;
    for (size_t i = 0; i < sizeof shorts / sizeof *shorts; i++)
        if (!strcmp(ref, shorts[i].a) || !strcmp(ref, shorts[i].b)) {
            r = shorts[i].repo;
            pinned = shorts[i].rev;
        }
    const char *at = strchr(r, '@');
    size_t rl = at ? (size_t)(at - r) : strlen(r);
    const char *slash = memchr(r, '/', rl);
    if (rl >= sizeof repo || !slash || slash == r || slash + 1 == r + rl || memchr(slash + 1, '/', rl - (size_t)(slash + 1 - r)))
        return bs_fail(e, BS_EIO, "model %s: no such directory, and not a model reference (owner/name[@revision])", ref);
    memcpy(repo, r, rl);
    repo[rl] = 0;
    snprintf(rev, sizeof rev, "%s", revision ? revision : at ? at + 1 : pinned ? pinned : "main");
    if (!*rev || strstr(rev, "..")) return bs_fail(e, BS_EINVAL, "model %s: invalid revision", ref);
    const char *hf = getenv("HF_HOME");
    const char *home = getenv("HOME");
    char *root = hf && *hf ? bs_strfmt("%s/hub", hf) : bs_strfmt("%s/.cache/huggingface/hub", home ? home : "");
    if (!root) return bs_fail(e, BS_ENOMEM, "out of memory");
    size_t ol = (size_t)(slash - r);
    char *repo_dir = bs_strfmt("%s/models--%.*s--%s", root, (int)ol, repo, repo + ol + 1);
    free(root);
    if (!repo_dir) return bs_fail(e, BS_ENOMEM, "out of memory");
    int rc = find_snapshot(repo_dir, rev, dir);
    if (rc == BS_ENOMEM) rc = bs_fail(e, rc, "out of memory");
    else if (rc < 0)
        rc = bs_fail(e, BS_EIO, "model %s@%s is not available locally (looked in %s); pass a local directory", repo,
                     rev, repo_dir);
    free(repo_dir);
    return rc;
}

int bs_cache_dir(char **dir, const char **source, bs_err *e) {
    const char *bh = getenv("BASAL_HOME"), *xdg = getenv("XDG_CACHE_HOME"), *home = getenv("HOME");
    if (bh && *bh) *dir = bs_strfmt("%s/.cache", bh), *source = "BASAL_HOME";
    else if (xdg && xdg[0] == '/') *dir = bs_strfmt("%s/basal", xdg), *source = "XDG_CACHE_HOME";
    else *dir = bs_strfmt("%s/.cache/basal", home ? home : ""), *source = "HOME";
    return *dir ? BS_OK : bs_fail(e, BS_ENOMEM, "out of memory");
}
