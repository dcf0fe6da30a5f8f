/* A model reference to a directory (hub.h bs_hub_resolve): a local
 * directory, the cache, or the Hub, with huggingface_hub's fallbacks — a
 * commit already cached needs no network; when the Hub cannot be reached or
 * refuses, a cached snapshot of the revision still serves (with a warning). */
#include "hub/hub_int.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "base/log.h"
#include "base/util.h"

struct bs_hub_pending {
    bs_hub_env env;
    bs_hub *h;
    bs_hub_plan plan;
    char *name_file;
};

static int is_dir(const char *p) {
    struct stat st;
    return stat(p, &st) == 0 && S_ISDIR(st.st_mode);
}

/* 06 §3 R2's error, then why: the reason is the last thing a user reads. */
static int not_available(const bs_hub_env *env, const bs_hub_ref *r, const char *why, bs_err *e) {
    char *repo_dir = bs_hub_repo_dir(env, r->repo);
    char reason[sizeof e->msg];
    snprintf(reason, sizeof reason, "%s", why);
    int rc = bs_fail(e, BS_EIO, "model %s@%s is not available locally (looked in %s); pass a local directory. %s",
                     r->repo, r->rev, repo_dir ? repo_dir : env->cache, reason);
    free(repo_dir);
    return rc;
}

const char *bs_hub_pending_name_file(const bs_hub_pending *p) {
    return p->name_file;
}

void bs_hub_pending_watch(bs_hub_pending *p, bs_hub_progress_fn fn, void *ud) {
    bs_hub_set_progress(p->h, fn, ud);
}

const bs_hub_plan *bs_hub_pending_plan(const bs_hub_pending *p) {
    return &p->plan;
}

void bs_hub_pending_free(bs_hub_pending *p) {
    if (!p) return;
    bs_hub_plan_free(&p->plan);
    bs_hub_close(p->h);
    bs_hub_env_free(&p->env);
    free(p->name_file);
    free(p);
}

/* A path-like reference (basal-rs: it exists, or starts with '/', '.' or
 * '~'): a directory or an error, never a repository. 1 when ref is one. */
static int as_path(const char *ref, char **dir, bs_err *e) {
    if (is_dir(ref)) {
        if (!(*dir = bs_strfmt("%s", ref))) return bs_fail(e, BS_ENOMEM, "out of memory");
        return 1;
    }
    if (ref[0] != '/' && ref[0] != '.' && ref[0] != '~') return 0;
    const char *home = getenv("HOME");
    char *p = ref[0] == '~' && (ref[1] == '/' || !ref[1]) && home ? bs_strfmt("%s%s", home, ref + 1) : bs_strfmt("%s", ref);
    if (!p) return bs_fail(e, BS_ENOMEM, "out of memory");
    if (is_dir(p)) {
        *dir = p;
        return 1;
    }
    bs_fail(e, BS_EIO, "model %s: no such directory", ref);
    free(p);
    return BS_EIO;
}

int bs_hub_would_download(const char *ref, const char *revision) {
    char *dir = NULL;
    bs_hub_ref r;
    bs_hub_env env;
    if (!revision) {
        int rc = as_path(ref, &dir, NULL);
        free(dir);
        if (rc != 0) return 0;
    }
    if (bs_hub_ref_parse(ref, revision, &r, NULL) < 0 || bs_hub_env_load(&env, NULL) < 0) return 0;
    int online = !env.offline;
    bs_hub_env_free(&env);
    return online;
}

/* The cached snapshot is the answer: *dir takes it. */
static int take_cached(char **dir, char **cached) {
    *dir = *cached;
    *cached = NULL;
    return BS_OK;
}

int bs_hub_resolve_begin(const char *ref, const char *revision, bs_hub_mode mode, const bs_hub_opts *opts, char **dir,
                         bs_hub_pending **pending, bs_err *e) {
    *dir = NULL;
    *pending = NULL;
    if (!revision) {
        int rc = as_path(ref, dir, e);
        if (rc != 0) return rc < 0 ? rc : BS_OK;
    }
    bs_hub_pending *p = calloc(1, sizeof *p);
    if (!p) return bs_fail(e, BS_ENOMEM, "out of memory");
    bs_hub_ref r;
    char *cached = NULL, *commit = NULL;
    bs_err ce = { 0 }, ne = { 0 };
    int rc = bs_hub_ref_parse(ref, revision, &r, e);
    if (rc < 0 || (rc = bs_hub_env_load(&p->env, e)) < 0) goto done;
    int have = bs_hub_find_cached(&p->env, &r, &cached, &commit, &ce) == BS_OK;
    if (mode == BS_HUB_CACHED || p->env.offline) {
        if (have) {
            rc = take_cached(dir, &cached);
            goto done;
        }
        rc = not_available(&p->env, &r, p->env.offline ?
                           "HF_HUB_OFFLINE is set, so nothing is downloaded: unset it (or run `basal pull` where the Hub "
                           "can be reached) to download the model" : ce.msg, e);
        goto done;
    }
    if (have && bs_hub_is_commit(r.rev)) { /* a commit never changes: no need to ask */
        rc = take_cached(dir, &cached);
        goto done;
    }
    if ((rc = bs_hub_open(&p->h, &p->env, opts, e)) < 0) goto done;
    bs_hub_set_quick(p->h, have); /* with a copy at hand, a Hub that does not answer is not waited for */
    rc = bs_hub_plan_make(p->h, &r, &p->plan, &ne);
    bs_hub_set_quick(p->h, 0);
    if (rc < 0) {
        if (!strcmp(ne.msg, "cancelled")) {
            rc = bs_fail(e, BS_EIO, "cancelled");
            goto done;
        }
        if (have) {
            char shown[300];
            bs_hub_ref_show(&r, shown, sizeof shown);
            bs_log(BS_LOG_WARN, "hub", "%s: the Hub could not be asked about the revision (%s); using the cached "
                   "snapshot %.8s", shown, ne.msg, commit);
            rc = take_cached(dir, &cached);
            goto done;
        }
        char why[sizeof ne.msg + 32];
        snprintf(why, sizeof why, "Download failed: %s", ne.msg);
        rc = not_available(&p->env, &r, why, e);
        goto done;
    }
    if (p->plan.bytes_missing == 0) /* the blobs are all there: link, write the ref, done */
        rc = bs_hub_fetch(p->h, &p->plan, dir, &ne);
    else /* the served name, before the rest */
        rc = bs_hub_fetch_blob(p->h, &p->plan, "basal.json", &p->name_file, &ne);
    if (rc < 0) { /* 06 §3 R2's message and the reason, as bs_hub_resolve_finish gives it */
        if (!strcmp(ne.msg, "cancelled")) {
            rc = bs_fail(e, BS_EIO, "cancelled");
            goto done;
        }
        char why[sizeof ne.msg + 32];
        snprintf(why, sizeof why, "Download failed: %s", ne.msg);
        rc = not_available(&p->env, &r, why, e);
        goto done;
    }
    if (!*dir) { /* the rest is downloaded by bs_hub_resolve_finish */
        *pending = p;
        p = NULL;
    }
    rc = BS_OK;
done:
    free(cached);
    free(commit);
    bs_hub_pending_free(p);
    return rc;
}

int bs_hub_resolve_finish(bs_hub_pending *p, char **dir, bs_err *e) {
    bs_err fe = { 0 };
    int rc = bs_hub_fetch(p->h, &p->plan, dir, &fe);
    if (rc == BS_OK) return BS_OK;
    if (!strcmp(fe.msg, "cancelled")) return bs_fail(e, rc, "cancelled");
    char why[sizeof fe.msg + 32];
    snprintf(why, sizeof why, "Download failed: %s", fe.msg);
    return not_available(&p->env, &p->plan.ref, why, e);
}

int bs_hub_resolve(const char *ref, const char *revision, bs_hub_mode mode, const bs_hub_opts *opts, char **dir,
                   bs_err *e) {
    bs_hub_pending *p = NULL;
    int rc = bs_hub_resolve_begin(ref, revision, mode, opts, dir, &p, e);
    if (rc < 0 || !p) return rc;
    rc = bs_hub_resolve_finish(p, dir, e);
    bs_hub_pending_free(p);
    return rc;
}
