/* Models from the Hugging Face Hub (spec 06 §3 R1–R2; issue 31).
 *
 * A model reference names a repository at a revision; its files live in the
 * cache layout of huggingface_hub, so that the Python and JavaScript tools
 * and basal-c share one cache:
 *
 *   <cache>/models--<owner>--<name>/blobs/<etag>          file contents
 *          /models--<owner>--<name>/snapshots/<commit>/F  -> ../../blobs/<etag>
 *          /models--<owner>--<name>/refs/<branch or tag>  the commit it named
 *   <cache>/.locks/models--<owner>--<name>/<etag>.lock    one writer per blob
 *
 * <etag> is the SHA-256 of an LFS file and the git blob SHA-1 of any other,
 * as the Hub reports them. Downloads go through libcurl and speak the Hub's
 * own protocol: the commit of a revision from /api/models/<repo>/revision/R,
 * the files from /api/models/<repo>/tree/<commit>?recursive=true, each file
 * from /<repo>/resolve/<commit>/<file> (LFS files redirect to a CDN). A blob
 * enters blobs/ only whole and checked against its etag; a snapshot is linked
 * only when every file of the model is there.
 *
 * Library code: returns BS_* codes with a message in bs_err, never exits,
 * logs retries and waits through core/log. */
#ifndef BS_HUB_H
#define BS_HUB_H

#include <stdint.h>

#include "basal.h"

/* ---- where things are (the environment huggingface_hub reads) ---- */

typedef struct bs_hub_env {
    char *cache;            /* HF_HUB_CACHE, else $HF_HOME/hub, else ~/.cache/huggingface/hub */
    const char *cache_from; /* "HF_HUB_CACHE", "HF_HOME" or "HOME" */
    char *endpoint;         /* HF_ENDPOINT without a trailing '/', else https://huggingface.co */
    char *token;            /* HF_TOKEN, else the file HF_TOKEN_PATH or $HF_HOME/token; NULL: none */
    char *token_from;       /* "HF_TOKEN" or the token file's path (the token itself is never shown) */
    int offline;            /* HF_HUB_OFFLINE set to 1, true, yes or on (any case) */
} bs_hub_env;

int bs_hub_env_load(bs_hub_env *env, bs_err *e);
void bs_hub_env_free(bs_hub_env *env);

/* ---- references (06 §3 R1) ---- */

typedef struct bs_hub_ref {
    char repo[160];   /* owner/name */
    char rev[256];    /* a branch, a tag, a full commit or a commit prefix */
    int pinned;       /* a published release at its pinned commit (short name) */
} bs_hub_ref;

/* ref is mini, 4.5B, max or basal-1.5-* (any case), owner/name, or name
 * (owner Remek), each optionally followed by @revision. The revision is
 * `revision` when not NULL (YAML revision:), else the one after '@', else the
 * pinned commit of a release named by its short name, else main. BS_EINVAL
 * with a message when ref is not of that form. */
int bs_hub_ref_parse(const char *ref, const char *revision, bs_hub_ref *out, bs_err *e);
/* The revision argument of bs_hub_ref_parse for a YAML model entry
 * (06 §4.2): revision: when given; else NULL for a repo: that names its
 * revision after '@' (06 §3 R1), main for an owner/name repo: (as basal-rs),
 * and NULL for a short name (mini, 4.5B, max: its pinned commit). */
const char *bs_hub_yaml_revision(const char *repo, const char *revision);
/* "owner/name@rev" with a 40-digit commit shortened to 8, for messages. */
void bs_hub_ref_show(const bs_hub_ref *r, char *out, size_t cap);
/* Whether s is a full commit id (40 lowercase hex digits). */
int bs_hub_is_commit(const char *s);

/* ---- the cache ---- */

/* Free bytes for an unprivileged writer on the filesystem of path (or of
 * its nearest existing parent); -1 when unknown. */
int64_t bs_hub_free_bytes(const char *path);

/* <cache>/models--<owner>--<name>, malloc'd (NULL: out of memory). */
char *bs_hub_repo_dir(const bs_hub_env *env, const char *repo);

/* The snapshot of r in the cache, without any network: rev resolved through
 * refs/<rev>, as a full commit, or as a unique prefix of a snapshot's commit;
 * and it must hold a whole model (config, tokenizer files, basal.json, the
 * chat template and every weight file, each link resolving). *dir and
 * *commit are malloc'd. BS_EIO when there is none, e->msg saying why (no
 * such repository in the cache, no snapshot for the revision, or the first
 * file the snapshot lacks). */
int bs_hub_find_cached(const bs_hub_env *env, const bs_hub_ref *r, char **dir, char **commit, bs_err *e);

/* One repository, or one revision of it, in the cache (basal models). */
typedef struct bs_hub_cached {
    char *repo;       /* owner/name */
    char *commit;     /* the snapshot's commit */
    char *refs;       /* the refs naming it, comma-separated ("" when none) */
    char *dir;        /* the snapshot directory */
    uint64_t bytes;   /* the blobs its links point to */
    int complete;     /* holds a whole model */
    char *missing;    /* when not complete: the first file missing */
} bs_hub_cached;

/* Every snapshot under the cache (all repositories), sorted by repo then
 * commit. *out is malloc'd; free it with bs_hub_cached_free. */
int bs_hub_cache_list(const bs_hub_env *env, bs_hub_cached **out, size_t *n, bs_err *e);
void bs_hub_cached_free(bs_hub_cached *v, size_t n);

/* Removes a repository's snapshot for r->rev (its links, the refs naming it,
 * and the blobs no other snapshot of the repository uses), or the whole
 * repository folder when whole is set. *freed: bytes of blobs removed.
 * Refuses while another process downloads into the repository (its locks
 * are held). BS_EIO when nothing matches. */
int bs_hub_cache_remove(const bs_hub_env *env, const bs_hub_ref *r, int whole, uint64_t *freed, bs_err *e);

/* ---- downloads ---- */

/* What a download reports as it goes (bytes of the files still to fetch). */
typedef struct bs_hub_progress {
    const char *repo;     /* owner/name */
    const char *file;     /* the file being fetched, NULL before the first */
    uint64_t done, total; /* bytes fetched so far and to fetch, over the whole plan */
    uint64_t resumed;     /* of done: bytes found from an earlier, interrupted run */
    int files_done, files_total;
} bs_hub_progress;
/* Return nonzero to stop the download (it then fails with BS_EIO, "cancelled"). */
typedef int (*bs_hub_progress_fn)(void *ud, const bs_hub_progress *p);

typedef struct bs_hub_opts {
    bs_hub_progress_fn progress; /* may be NULL */
    void *ud;
    int max_retries;             /* per request, for 408/429/5xx and cut connections; 0 = 5 */
} bs_hub_opts;

typedef struct bs_hub_file {
    char *path;       /* in the repository (top level) */
    char *etag;       /* SHA-256 (LFS) or git blob SHA-1 */
    uint64_t size;
    int lfs;
    int have;         /* its blob is already in the cache */
} bs_hub_file;

/* The files of a model at one commit, as the Hub lists them. */
typedef struct bs_hub_plan {
    bs_hub_ref ref;
    char *commit;
    char *repo_dir;
    bs_hub_file *files;
    size_t n_files;
    uint64_t bytes_total, bytes_missing;
    int pull_lock; /* the repository's pull lock (hub_int.h) as its descriptor + 1 while held, else 0 */
} bs_hub_plan;

typedef struct bs_hub bs_hub;

/* A client for env's endpoint; env must outlive it. */
int bs_hub_open(bs_hub **out, const bs_hub_env *env, const bs_hub_opts *opts, bs_err *e);
void bs_hub_close(bs_hub *h);

/* Asks the Hub for the commit of r->rev and the files of the model in it
 * (the index's shards included): only the files a Basal model reads. Fails
 * with the Hub's reason (unknown repository, revision, gated or private
 * repository, no network) or when the repository is not a Basal model.
 * Nothing is written. */
int bs_hub_plan_make(bs_hub *h, const bs_hub_ref *r, bs_hub_plan *p, bs_err *e);
void bs_hub_plan_free(bs_hub_plan *p);

/* What a download of r would take, asked of the Hub without writing
 * anything: its commit (malloc'd) and the bytes of the files a Basal model
 * reads (the shards of an index counted as every top-level .safetensors). */
int bs_hub_probe(bs_hub *h, const bs_hub_ref *r, char **commit, uint64_t *bytes, bs_err *e);

/* Brings one file of the plan into blobs/ (downloaded and checked unless
 * there) without linking it; *blob (malloc'd) is its path. For reading a
 * small file (basal.json) before the whole model is fetched. */
int bs_hub_fetch_blob(bs_hub *h, bs_hub_plan *p, const char *path, char **blob, bs_err *e);

/* Downloads every missing file of the plan (after checking the free disk
 * space against their sizes), then links snapshots/<commit>/ and writes
 * refs/<rev> when rev is a branch or tag. *dir (malloc'd) is the snapshot. */
int bs_hub_fetch(bs_hub *h, bs_hub_plan *p, char **dir, bs_err *e);

/* ---- one call for a command line's --model, and serve's two steps ---- */

typedef enum {
    BS_HUB_CACHED,   /* the cache only, never the network (doctor) */
    BS_HUB_DOWNLOAD, /* download what is missing, unless offline (serve, pull, decide, ...) */
} bs_hub_mode;

/* The directory of a model reference (06 §3): an existing directory as it
 * is (when revision is NULL); else the snapshot in the cache, which with
 * BS_HUB_DOWNLOAD is first brought up to date with the Hub (a revision that
 * is a full commit and is cached needs no network). When the Hub cannot be
 * reached or refuses, a cached snapshot of the revision is used with a
 * warning; without one, the error is 06 §3 R2's "model <repo>@<rev> is not
 * available locally (looked in <path>); pass a local directory" and the
 * reason. opts may be NULL. *dir is malloc'd. */
int bs_hub_resolve(const char *ref, const char *revision, bs_hub_mode mode, const bs_hub_opts *opts, char **dir,
                   bs_err *e);

/* Whether bs_hub_resolve with BS_HUB_DOWNLOAD would go to the Hub for ref:
 * it names a repository (not a directory) and HF_HUB_OFFLINE is not set. */
int bs_hub_would_download(const char *ref, const char *revision);

/* bs_hub_resolve in two steps, for `basal serve`: the first (before the
 * address is bound) finds the model or learns from the Hub what to download,
 * and fetches basal.json so that the served name is known; the second (while
 * /health answers 503 with the progress) downloads the rest. begin sets
 * either *dir (nothing to download) or *pending, with *name_file the path of
 * the model's basal.json in the cache. finish downloads and sets *dir. */
typedef struct bs_hub_pending bs_hub_pending;
int bs_hub_resolve_begin(const char *ref, const char *revision, bs_hub_mode mode, const bs_hub_opts *opts, char **dir,
                         bs_hub_pending **pending, bs_err *e);
const char *bs_hub_pending_name_file(const bs_hub_pending *p);
/* The plan a pending download carries (its repository, commit and sizes). */
const bs_hub_plan *bs_hub_pending_plan(const bs_hub_pending *p);
int bs_hub_resolve_finish(bs_hub_pending *p, char **dir, bs_err *e);
/* Where finish reports its progress (replacing the opts given to begin). */
void bs_hub_pending_watch(bs_hub_pending *p, bs_hub_progress_fn fn, void *ud);
void bs_hub_pending_free(bs_hub_pending *p);

#endif
