/* The huggingface_hub cache on disk (hub.h): finding a snapshot without the
 * network, checking that it holds a whole model, linking and refs written so
 * that a reader never sees a half-written one, the per-blob locks shared with
 * the Python tools, listing and removing. */
#include "hub/hub_int.h"

#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <time.h>
#include <unistd.h>

#include "base/log.h"
#include "base/util.h"

/* mkdir -p that another process may be running at the same moment. */
int bs_hub_mkdir_p(const char *path, bs_err *e) {
    char *buf = bs_strfmt("%s", path);
    if (!buf) return bs_fail(e, BS_ENOMEM, "out of memory");
    int rc = BS_OK;
    for (char *p = buf + 1;; p++) {
        if (*p && *p != '/') continue;
        char c = *p;
        *p = 0;
        if (mkdir(buf, 0755) != 0 && errno != EEXIST) {
            rc = bs_fail(e, BS_EIO, "%s: cannot create the directory: %s", buf, strerror(errno));
            break;
        }
        struct stat st;
        if (stat(buf, &st) != 0 || !S_ISDIR(st.st_mode)) {
            rc = bs_fail(e, BS_EIO, "%s: not a directory", buf);
            break;
        }
        *p = c;
        if (!c) break;
    }
    free(buf);
    return rc;
}

static int exists_resolved(const char *dir, const char *name) {
    char *p = bs_path_join(dir, name);
    struct stat st;
    int ok = p && stat(p, &st) == 0 && S_ISREG(st.st_mode);
    free(p);
    return ok;
}

/* The shards model.safetensors.index.json names, or NULL when it cannot be
 * read as an index (the loader then names the problem). */
static json_t *index_shards(const char *dir) {
    char *p = bs_path_join(dir, "model.safetensors.index.json"), *text = NULL;
    size_t len = 0;
    json_t *out = NULL;
    if (p && bs_read_regular_file(p, &text, &len, BS_MODEL_FILE_MAX, NULL) == 0) {
        json_t *root = json_loadb(text, len, JSON_ALLOW_NUL, NULL);
        json_t *map = json_object_get(root, "weight_map");
        if (json_is_object(map) && (out = json_array())) {
            const char *k;
            json_t *v;
            json_object_foreach(map, k, v) {
                if (!json_is_string(v)) continue;
                int seen = 0;
                for (size_t i = 0; i < json_array_size(out) && !seen; i++)
                    seen = !strcmp(json_string_value(json_array_get(out, i)), json_string_value(v));
                if (!seen) json_array_append(out, v);
            }
        }
        json_decref(root);
    }
    free(p);
    free(text);
    return out;
}

/* The files every Basal model directory holds (05 §1), weights apart. */
static const char *const required[] = { "config.json", "basal.json", "tokenizer.json", "tokenizer_config.json",
                                        "chat_template.jinja" };

char *bs_hub_snapshot_missing(const char *dir, int *oom) {
    *oom = 0;
    const char *miss_first = NULL;
    for (size_t i = 0; i < sizeof required / sizeof *required && !miss_first; i++)
        if (!exists_resolved(dir, required[i])) miss_first = required[i];
    if (!miss_first && exists_resolved(dir, "model.safetensors")) return NULL;
    if (!miss_first && !exists_resolved(dir, "model.safetensors.index.json")) miss_first = "model.safetensors";
    if (miss_first) {
        char *m = bs_strfmt("%s", miss_first);
        if (!m) *oom = 1;
        return m;
    }
    json_t *shards = index_shards(dir);
    char *miss = NULL;
    for (size_t i = 0; shards && i < json_array_size(shards) && !miss; i++) {
        const char *s = json_string_value(json_array_get(shards, i));
        if (!strchr(s, '/') && !exists_resolved(dir, s) && !(miss = bs_strfmt("%s", s))) *oom = 1;
    }
    json_decref(shards);
    return miss;
}

/* The snapshot directory of a full commit or of a unique prefix of one. */
static int find_commit(const char *repo_dir, const char *want, char **commit) {
    char *snaps = bs_path_join(repo_dir, "snapshots");
    DIR *d = snaps ? opendir(snaps) : NULL;
    int matches = 0;
    size_t wl = strlen(want);
    if (d) {
        struct dirent *de;
        while ((de = readdir(d))) {
            if (de->d_name[0] == '.' || strncmp(de->d_name, want, wl)) continue;
            if (++matches == 1) *commit = bs_strfmt("%s", de->d_name);
        }
        closedir(d);
    }
    free(snaps);
    if (matches != 1) {
        free(*commit);
        *commit = NULL;
    }
    return matches;
}

char *bs_hub_read_ref(const char *repo_dir, const char *rev) {
    char *p = bs_strfmt("%s/refs/%s", repo_dir, rev), *text = NULL;
    size_t n = 0;
    if (p && bs_read_regular_file(p, &text, &n, 4096, NULL) == 0) {
        while (n && (text[n - 1] == '\n' || text[n - 1] == '\r' || text[n - 1] == ' ')) text[--n] = 0;
        /* it names a folder of snapshots/: letters and digits only (a commit id) */
        int ok = n > 0;
        for (size_t i = 0; i < n && ok; i++) ok = isalnum((unsigned char)text[i]) != 0;
        if (!ok) {
            free(text);
            text = NULL;
        }
    }
    free(p);
    return text;
}

int bs_hub_find_cached(const bs_hub_env *env, const bs_hub_ref *r, char **dir, char **commit, bs_err *e) {
    *dir = *commit = NULL;
    char *repo_dir = bs_hub_repo_dir(env, r->repo), *c = NULL, *snap = NULL, *miss = NULL;
    int rc = BS_OK, oom = 0;
    if (!repo_dir) return bs_fail(e, BS_ENOMEM, "out of memory");
    struct stat st;
    if (stat(repo_dir, &st) != 0) {
        rc = bs_fail(e, BS_EIO, "the cache has no copy of %s", r->repo);
        goto done;
    }
    if (!(c = bs_hub_read_ref(repo_dir, r->rev))) {
        int m = find_commit(repo_dir, r->rev, &c);
        if (m > 1) {
            rc = bs_fail(e, BS_EIO, "revision %s matches %d snapshots in the cache; give more of the commit", r->rev, m);
            goto done;
        }
        if (!c) {
            rc = bs_fail(e, BS_EIO, "the cache holds %s but no snapshot of revision %s", r->repo, r->rev);
            goto done;
        }
    }
    if (!(snap = bs_strfmt("%s/snapshots/%s", repo_dir, c))) goto oom;
    if (stat(snap, &st) != 0 || !S_ISDIR(st.st_mode)) {
        rc = bs_fail(e, BS_EIO, "the cache's refs/%s names commit %.8s, whose snapshot is missing", r->rev, c);
        goto done;
    }
    if ((miss = bs_hub_snapshot_missing(snap, &oom))) {
        rc = bs_fail(e, BS_EIO, "the cached snapshot %s lacks %s (an interrupted download?)", snap, miss);
        goto done;
    }
    if (oom) goto oom;
    *dir = snap;
    *commit = c;
    snap = c = NULL;
    goto done;
oom:
    rc = bs_fail(e, BS_ENOMEM, "out of memory");
done:
    free(repo_dir);
    free(c);
    free(snap);
    free(miss);
    return rc;
}

/* Replaces dst by a new file or link made at a temporary name beside it:
 * rename(2) is atomic, so a reader sees the old entry or the new one. */
static char *temp_beside(const char *dst) {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return bs_strfmt("%s.%ld.%lx.tmp", dst, (long)getpid(), (unsigned long)ts.tv_nsec);
}

int bs_hub_link(const char *repo_dir, const char *commit, const char *path, const char *etag, bs_err *e) {
    char *link = bs_strfmt("%s/snapshots/%s/%s", repo_dir, commit, path), *tmp = NULL;
    bs_buf target;
    bs_buf_init(&target);
    int rc = BS_OK;
    if (!link) return bs_fail(e, BS_ENOMEM, "out of memory");
    /* ../../blobs/<etag>, one more ../ per folder of path */
    bs_buf_puts(&target, "../../");
    for (const char *p = path; (p = strchr(p, '/')); p++) bs_buf_puts(&target, "../");
    bs_buf_printf(&target, "blobs/%s", etag);
    char *slash = strrchr(link, '/');
    *slash = 0;
    rc = bs_hub_mkdir_p(link, e);
    *slash = '/';
    if (rc < 0 || target.oom) {
        if (target.oom) rc = bs_fail(e, BS_ENOMEM, "out of memory");
        goto done;
    }
    char have[4096];
    ssize_t n = readlink(link, have, sizeof have - 1);
    if (n >= 0) {
        have[n] = 0;
        if (!strcmp(have, target.data)) goto done;
    }
    if (!(tmp = temp_beside(link))) {
        rc = bs_fail(e, BS_ENOMEM, "out of memory");
        goto done;
    }
    if (symlink(target.data, tmp) != 0 || rename(tmp, link) != 0) {
        rc = bs_fail(e, BS_EIO, "%s: cannot link it to %s: %s", link, target.data, strerror(errno));
        unlink(tmp);
    }
done:
    free(link);
    free(tmp);
    bs_buf_free(&target);
    return rc;
}

int bs_hub_write_ref(const char *repo_dir, const char *rev, const char *commit, bs_err *e) {
    char *have = bs_hub_read_ref(repo_dir, rev);
    int same = have && !strcmp(have, commit);
    free(have);
    if (same) return BS_OK; /* a read-only cache that is already right stays usable */
    char *path = bs_strfmt("%s/refs/%s", repo_dir, rev), *tmp = NULL;
    int rc = BS_OK;
    if (!path) return bs_fail(e, BS_ENOMEM, "out of memory");
    char *slash = strrchr(path, '/');
    *slash = 0;
    rc = bs_hub_mkdir_p(path, e);
    *slash = '/';
    if (rc < 0) goto done;
    if (!(tmp = temp_beside(path))) {
        rc = bs_fail(e, BS_ENOMEM, "out of memory");
        goto done;
    }
    if ((rc = bs_write_file(tmp, commit, strlen(commit), e)) < 0) goto done;
    if (rename(tmp, path) != 0) rc = bs_fail(e, BS_EIO, "%s: %s", path, strerror(errno));
done:
    if (rc < 0 && tmp) unlink(tmp);
    free(tmp);
    free(path);
    return rc;
}

/* <cache>/.locks/models--o--n, where every lock of repository o/n lives. */
static char *lock_dir(const bs_hub_env *env, const char *repo) {
    const char *slash = strchr(repo, '/');
    return bs_strfmt("%s/.locks/models--%.*s--%s", env->cache, (int)(slash - repo), repo, slash + 1);
}

/* Opens (creating it and its directory) the lock file `name` of repo;
 * group-writable whatever the umask, as huggingface_hub's WeakFileLock makes
 * them: users sharing a cache can all take it (refused for another user's
 * file: no harm). *path: its path, for messages (the caller frees it). */
static int open_lock(const bs_hub_env *env, const char *repo, const char *name, char **path, int *fd, bs_err *e) {
    *fd = -1;
    char *dir = lock_dir(env, repo);
    *path = dir ? bs_path_join(dir, name) : NULL;
    int rc = *path ? bs_hub_mkdir_p(dir, e) : bs_fail(e, BS_ENOMEM, "out of memory");
    free(dir);
    if (rc < 0) return rc;
    if ((*fd = open(*path, O_RDWR | O_CREAT | O_CLOEXEC, 0664)) < 0)
        return bs_fail(e, BS_EIO, "%s: cannot open the lock file: %s", *path, strerror(errno));
    (void)fchmod(*fd, 0664);
    return BS_OK;
}

int bs_hub_lock(const bs_hub_env *env, const char *repo, const char *etag, const char *what, bs_hub_cancel_fn cancel,
                void *ud, int *fd_out, bs_err *e) {
    *fd_out = -1;
    char name[300], *path = NULL;
    int fd = -1, said = 0;
    snprintf(name, sizeof name, "%s.lock", etag);
    int rc = open_lock(env, repo, name, &path, &fd, e);
    if (rc < 0) goto done;
    while (flock(fd, LOCK_EX | LOCK_NB) != 0) {
        if (errno != EWOULDBLOCK && errno != EINTR) {
            rc = bs_fail(e, BS_EIO, "%s: cannot lock: %s", path, strerror(errno));
            goto done;
        }
        if (!said++) bs_log(BS_LOG_INFO, "hub", "waiting for another download of %s (%s)", what, path);
        if (cancel && cancel(ud)) {
            rc = bs_fail(e, BS_EIO, "cancelled");
            goto done;
        }
        struct timespec ts = { 0, 200 * 1000000L };
        nanosleep(&ts, NULL);
    }
    *fd_out = fd;
    fd = -1;
done:
    if (fd >= 0) close(fd);
    free(path);
    return rc;
}

int bs_hub_repo_lock(const bs_hub_env *env, const char *repo, int exclusive, int *fd_out, bs_err *e) {
    *fd_out = -1;
    char *path = NULL;
    int fd = -1, rc = open_lock(env, repo, ".pull.lock", &path, &fd, e);
    if (rc < 0) goto done;
    int got;
    while ((got = flock(fd, exclusive ? LOCK_EX | LOCK_NB : LOCK_SH)) != 0 && errno == EINTR) {}
    if (got != 0 && exclusive && errno == EWOULDBLOCK) {
        rc = 0;
        goto done;
    }
    if (got != 0) {
        rc = bs_fail(e, BS_EIO, "%s: cannot lock: %s", path, strerror(errno));
        goto done;
    }
    *fd_out = fd;
    fd = -1;
    rc = 1;
done:
    if (fd >= 0) close(fd);
    free(path);
    return rc;
}

void bs_hub_unlock(int fd) {
    if (fd >= 0) close(fd); /* closing the descriptor releases the flock */
}

int64_t bs_hub_free_bytes(const char *path) {
    char *p = bs_strfmt("%s", path);
    int64_t out = -1;
    while (p) {
        struct statvfs sv;
        if (statvfs(*p ? p : "/", &sv) == 0) {
            out = (int64_t)sv.f_bavail * (int64_t)sv.f_frsize;
            break;
        }
        char *slash = strrchr(p, '/');
        if (!*p) break;
        if (!slash) { /* a relative path: its nearest existing parent is the working directory */
            if (statvfs(".", &sv) == 0) out = (int64_t)sv.f_bavail * (int64_t)sv.f_frsize;
            break;
        }
        *slash = 0;
    }
    free(p);
    return out;
}

/* ---- listing and removing ---- */

static int cmp_cached(const void *a, const void *b) {
    const bs_hub_cached *x = a, *y = b;
    int c = strcmp(x->repo, y->repo);
    return c ? c : strcmp(x->commit, y->commit);
}

/* Calls fn for each ref of refs/<sub> (recursively: names may hold '/')
 * that names commit; with prune, folders left empty are removed. */
typedef void (*ref_fn)(void *ud, const char *name, const char *path);

static void each_ref(const char *repo_dir, const char *sub, const char *commit, ref_fn fn, void *ud, int prune) {
    char *dirp = *sub ? bs_strfmt("%s/refs/%s", repo_dir, sub) : bs_strfmt("%s/refs", repo_dir);
    DIR *d = dirp ? opendir(dirp) : NULL;
    struct dirent *de;
    while (d && (de = readdir(d))) {
        if (de->d_name[0] == '.' || strstr(de->d_name, ".tmp")) continue;
        char *name = *sub ? bs_strfmt("%s/%s", sub, de->d_name) : bs_strfmt("%s", de->d_name);
        char *full = name ? bs_strfmt("%s/refs/%s", repo_dir, name) : NULL;
        struct stat st;
        if (full && stat(full, &st) == 0) {
            if (S_ISDIR(st.st_mode)) {
                each_ref(repo_dir, name, commit, fn, ud, prune);
                if (prune) rmdir(full); /* only when it became empty */
            } else {
                char *c = bs_hub_read_ref(repo_dir, name);
                if (c && !strcmp(c, commit)) fn(ud, name, full);
                free(c);
            }
        }
        free(full);
        free(name);
    }
    if (d) closedir(d);
    free(dirp);
}

static void ref_append(void *ud, const char *name, const char *path) {
    bs_buf *out = ud;
    bs_buf_printf(out, "%s%s", out->len ? "," : "", name);
}

static void ref_unlink(void *ud, const char *name, const char *path) {
    unlink(path);
}

/* The bytes of the distinct blobs the links of one snapshot point to. */
static uint64_t snapshot_bytes(const char *snap) {
    DIR *d = opendir(snap);
    struct dirent *de;
    uint64_t total = 0;
    while (d && (de = readdir(d))) {
        if (de->d_name[0] == '.') continue;
        char *p = bs_path_join(snap, de->d_name);
        struct stat st;
        if (p && stat(p, &st) == 0 && S_ISREG(st.st_mode)) total += (uint64_t)st.st_size;
        free(p);
    }
    if (d) closedir(d);
    return total;
}

/* models--owner--name -> owner/name (names hold no "--", 06 §3 R1). */
static char *repo_of_folder(const char *folder) {
    if (strncmp(folder, "models--", 8)) return NULL;
    const char *rest = folder + 8, *sep = strstr(rest, "--");
    if (!sep || sep == rest || !sep[2]) return NULL;
    return bs_strfmt("%.*s/%s", (int)(sep - rest), rest, sep + 2);
}

static int list_repo(const bs_hub_env *env, const char *folder, bs_hub_cached **v, size_t *n, size_t *cap) {
    char *repo = repo_of_folder(folder);
    if (!repo) return BS_OK;
    char *repo_dir = bs_path_join(env->cache, folder), *snaps = repo_dir ? bs_path_join(repo_dir, "snapshots") : NULL;
    DIR *d = snaps ? opendir(snaps) : NULL;
    struct dirent *de;
    int rc = repo_dir && snaps ? BS_OK : BS_ENOMEM;
    while (rc == BS_OK && d && (de = readdir(d))) {
        if (de->d_name[0] == '.') continue;
        if (*n == *cap) {
            size_t nc = *cap ? *cap * 2 : 8;
            bs_hub_cached *nv = realloc(*v, nc * sizeof *nv);
            if (!nv) { rc = BS_ENOMEM; break; }
            *v = nv;
            *cap = nc;
        }
        bs_hub_cached *c = &(*v)[*n];
        memset(c, 0, sizeof *c);
        (*n)++;
        bs_buf refs;
        bs_buf_init(&refs);
        bs_buf_puts(&refs, "");
        each_ref(repo_dir, "", de->d_name, ref_append, &refs, 0);
        int oom = 0;
        c->repo = bs_strfmt("%s", repo);
        c->commit = bs_strfmt("%s", de->d_name);
        c->dir = bs_path_join(snaps, de->d_name);
        c->refs = refs.oom ? NULL : refs.data;
        if (refs.oom) bs_buf_free(&refs);
        if (c->dir) {
            c->missing = bs_hub_snapshot_missing(c->dir, &oom);
            c->complete = !c->missing && !oom;
            c->bytes = snapshot_bytes(c->dir);
        }
        if (!c->repo || !c->commit || !c->dir || !c->refs || oom) rc = BS_ENOMEM;
    }
    if (d) closedir(d);
    free(repo);
    free(repo_dir);
    free(snaps);
    return rc;
}

int bs_hub_cache_list(const bs_hub_env *env, bs_hub_cached **out, size_t *n_out, bs_err *e) {
    *out = NULL;
    *n_out = 0;
    DIR *d = opendir(env->cache);
    if (!d) {
        if (errno == ENOENT) return BS_OK; /* an empty cache */
        return bs_fail(e, BS_EIO, "%s: %s", env->cache, strerror(errno));
    }
    bs_hub_cached *v = NULL;
    size_t n = 0, cap = 0;
    int rc = BS_OK;
    struct dirent *de;
    while (rc == BS_OK && (de = readdir(d))) rc = list_repo(env, de->d_name, &v, &n, &cap);
    closedir(d);
    if (rc < 0) {
        bs_hub_cached_free(v, n);
        return bs_fail(e, rc, "out of memory");
    }
    if (n) qsort(v, n, sizeof *v, cmp_cached);
    *out = v;
    *n_out = n;
    return BS_OK;
}

void bs_hub_cached_free(bs_hub_cached *v, size_t n) {
    for (size_t i = 0; v && i < n; i++) {
        free(v[i].repo);
        free(v[i].commit);
        free(v[i].refs);
        free(v[i].dir);
        free(v[i].missing);
    }
    free(v);
}

/* rm -r of a tree that holds files, links and folders only. */
static int remove_tree(const char *path) {
    struct stat st;
    if (lstat(path, &st) != 0) return errno == ENOENT ? 0 : -1;
    if (!S_ISDIR(st.st_mode)) return unlink(path);
    DIR *d = opendir(path);
    struct dirent *de;
    int rc = d ? 0 : -1;
    while (d && (de = readdir(d))) {
        if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, "..")) continue;
        char *p = bs_path_join(path, de->d_name);
        if (!p || remove_tree(p) != 0) rc = -1;
        free(p);
    }
    if (d) closedir(d);
    return rmdir(path) == 0 ? rc : -1;
}

/* Whether another process holds a blob lock of the repository (downloading;
 * the pull lock, a dot name, is bs_hub_repo_lock's). */
static int repo_busy(const bs_hub_env *env, const char *repo) {
    char *dirp = lock_dir(env, repo);
    DIR *d = dirp ? opendir(dirp) : NULL;
    struct dirent *de;
    int busy = 0;
    while (d && !busy && (de = readdir(d))) {
        if (de->d_name[0] == '.') continue;
        char *p = bs_path_join(dirp, de->d_name);
        int fd = p ? open(p, O_RDWR | O_CLOEXEC) : -1;
        if (fd >= 0) {
            if (flock(fd, LOCK_EX | LOCK_NB) != 0) busy = 1;
            close(fd);
        }
        free(p);
    }
    if (d) closedir(d);
    free(dirp);
    return busy;
}

/* Adds the blob names (etags) the links of snapshots other than `except`
 * point to. */
static void blobs_in_use(const char *repo_dir, const char *except, json_t *used) {
    char *snaps = bs_path_join(repo_dir, "snapshots");
    DIR *d = snaps ? opendir(snaps) : NULL;
    struct dirent *de;
    while (d && (de = readdir(d))) {
        if (de->d_name[0] == '.' || (except && !strcmp(de->d_name, except))) continue;
        char *snap = bs_path_join(snaps, de->d_name);
        DIR *s = snap ? opendir(snap) : NULL;
        struct dirent *fe;
        while (s && (fe = readdir(s))) {
            char *lp = bs_path_join(snap, fe->d_name), have[4096];
            ssize_t n = lp ? readlink(lp, have, sizeof have - 1) : -1;
            if (n > 0) {
                have[n] = 0;
                const char *b = strrchr(have, '/');
                json_object_set_new(used, b ? b + 1 : have, json_true());
            }
            free(lp);
        }
        if (s) closedir(s);
        free(snap);
    }
    if (d) closedir(d);
    free(snaps);
}

static uint64_t tree_bytes(const char *path) {
    struct stat st;
    if (lstat(path, &st) != 0) return 0;
    if (!S_ISDIR(st.st_mode)) return S_ISREG(st.st_mode) ? (uint64_t)st.st_size : 0;
    uint64_t total = 0;
    DIR *d = opendir(path);
    struct dirent *de;
    while (d && (de = readdir(d))) {
        if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, "..")) continue;
        char *p = bs_path_join(path, de->d_name);
        if (p) total += tree_bytes(p);
        free(p);
    }
    if (d) closedir(d);
    return total;
}

int bs_hub_cache_remove(const bs_hub_env *env, const bs_hub_ref *r, int whole, uint64_t *freed, bs_err *e) {
    *freed = 0;
    char *repo_dir = bs_hub_repo_dir(env, r->repo), *commit = NULL, *snap = NULL, *blobs = NULL;
    json_t *used = NULL;
    int rc = BS_OK, pull_lock = -1;
    struct stat st;
    if (!repo_dir) return bs_fail(e, BS_ENOMEM, "out of memory");
    if (stat(repo_dir, &st) != 0) {
        rc = bs_fail(e, BS_EIO, "the cache (%s) has no copy of %s", env->cache, r->repo);
        goto done;
    }
    /* a pull between two blobs holds only the repository's lock; one of another tool, only a blob's */
    int held = bs_hub_repo_lock(env, r->repo, 1, &pull_lock, e);
    if (held < 0) {
        rc = held;
        goto done;
    }
    if (!held || repo_busy(env, r->repo)) {
        rc = bs_fail(e, BS_EIO, "%s is being downloaded by another process; remove it when that is done", r->repo);
        goto done;
    }
    if (whole) {
        uint64_t bytes = tree_bytes(repo_dir);
        if (remove_tree(repo_dir) != 0) {
            rc = bs_fail(e, BS_EIO, "%s: cannot remove it all: %s", repo_dir, strerror(errno));
            goto done;
        }
        *freed = bytes;
        goto done;
    }
    if (!(commit = bs_hub_read_ref(repo_dir, r->rev))) {
        int m = find_commit(repo_dir, r->rev, &commit);
        if (m != 1) {
            rc = bs_fail(e, BS_EIO, m ? "revision %s of %s matches %d snapshots; give more of the commit"
                                      : "the cache holds no snapshot of %s at revision %s",
                         m ? r->rev : r->repo, m ? r->repo : r->rev, m);
            goto done;
        }
    }
    if (!(snap = bs_strfmt("%s/snapshots/%s", repo_dir, commit)) || !(used = json_object()) ||
        !(blobs = bs_path_join(repo_dir, "blobs"))) {
        rc = bs_fail(e, BS_ENOMEM, "out of memory");
        goto done;
    }
    blobs_in_use(repo_dir, commit, used);
    /* the blobs this snapshot alone uses go with it */
    DIR *d = opendir(snap);
    struct dirent *de;
    while (d && (de = readdir(d))) {
        char *lp = bs_path_join(snap, de->d_name), have[4096];
        ssize_t n = lp ? readlink(lp, have, sizeof have - 1) : -1;
        if (n > 0) {
            have[n] = 0;
            const char *b = strrchr(have, '/');
            b = b ? b + 1 : have;
            char *bp = json_object_get(used, b) ? NULL : bs_path_join(blobs, b);
            struct stat bs;
            if (bp && lstat(bp, &bs) == 0 && unlink(bp) == 0) *freed += (uint64_t)bs.st_size;
            free(bp);
        }
        free(lp);
    }
    if (d) closedir(d);
    if (remove_tree(snap) != 0) {
        rc = bs_fail(e, BS_EIO, "%s: cannot remove it: %s", snap, strerror(errno));
        goto done;
    }
    each_ref(repo_dir, "", commit, ref_unlink, NULL, 1);
    /* nothing left of the repository: its folder goes too */
    json_object_clear(used);
    blobs_in_use(repo_dir, NULL, used);
    char *snaps = bs_path_join(repo_dir, "snapshots");
    if (snaps && rmdir(snaps) == 0) {
        *freed += tree_bytes(repo_dir);
        remove_tree(repo_dir);
    }
    free(snaps);
done:
    bs_hub_unlock(pull_lock);
    json_decref(used);
    free(repo_dir);
    free(commit);
    free(snap);
    free(blobs);
    return rc;
}
