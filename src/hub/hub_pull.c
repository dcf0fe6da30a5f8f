/* Downloading a model from the Hub into the shared cache (hub.h): what the
 * Hub lists for a revision, which of those files a Basal model needs, and
 * each file brought into blobs/ whole, checked and resumable. */
#include "hub/hub_int.h"

#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <openssl/evp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "base/log.h"
#include "base/util.h"

#define DEFAULT_RETRIES 5
/* a connection cut after bytes arrived resets the retry count (as
 * huggingface_hub does), so this bounds the attempts of one file overall */
#define MAX_ATTEMPTS 100
/* redirects followed for one request (the Hub's relative ones, a CDN's) */
#define MAX_REDIRECTS 5

struct bs_hub {
    const bs_hub_env *env;
    bs_hub_http *http;
    bs_hub_opts opts;
    bs_hub_progress prog;
    int cancelled;
    int quick;      /* bs_hub_set_quick */
};

static int is_cancelled(void *ud) {
    bs_hub *h = ud;
    return h->cancelled;
}

static void report(bs_hub *h) {
    if (h->opts.progress && !h->cancelled && h->opts.progress(h->opts.ud, &h->prog)) h->cancelled = 1;
}

int bs_hub_open(bs_hub **out, const bs_hub_env *env, const bs_hub_opts *opts, bs_err *e) {
    *out = NULL;
    bs_hub *h = calloc(1, sizeof *h);
    if (!h) return bs_fail(e, BS_ENOMEM, "out of memory");
    h->env = env;
    if (opts) h->opts = *opts;
    if (h->opts.max_retries <= 0) h->opts.max_retries = DEFAULT_RETRIES;
    int rc = bs_hub_http_open(&h->http, env, is_cancelled, h, e);
    if (rc < 0) {
        free(h);
        return rc;
    }
    *out = h;
    return BS_OK;
}

void bs_hub_set_progress(bs_hub *h, bs_hub_progress_fn fn, void *ud) {
    h->opts.progress = fn;
    h->opts.ud = ud;
}

void bs_hub_set_quick(bs_hub *h, int quick) {
    h->quick = quick;
}

void bs_hub_close(bs_hub *h) {
    if (!h) return;
    bs_hub_http_close(h->http);
    free(h);
}

/* Sleeps s seconds unless cancelled meanwhile; 0 when it slept. */
static int nap(bs_hub *h, double s) {
    for (double left = s; left > 0; left -= 0.1) {
        if (h->cancelled) return -1;
        report(h);
        struct timespec ts = { 0, 100 * 1000000L };
        nanosleep(&ts, NULL);
    }
    return h->cancelled ? -1 : 0;
}

/* 1, 2, 4, 8, 8... seconds (huggingface_hub's backoff), or Retry-After. */
static double backoff(int attempt, long retry_after) {
    if (retry_after >= 0) return (double)retry_after;
    double s = 1;
    for (int i = 1; i < attempt && s < 8; i++) s *= 2;
    return s;
}

/* The wait an answer asks for: a 429's RateLimit reset (huggingface_hub
 * prefers it), else Retry-After; -1 when it asks none. */
static long asked_wait(const bs_hub_resp *resp) {
    if (resp->status == 429 && resp->ratelimit_reset >= 0) return resp->ratelimit_reset;
    return resp->retry_after;
}

static int retryable(long status) {
    return status == 408 || status == 429 || status == 500 || status == 502 || status == 503 || status == 504;
}

/* The Hub's reason for an error answer, as one sentence that says what to
 * do. what: "owner/name" or "owner/name@rev: file". */
static int hub_error(bs_hub *h, const bs_hub_ref *r, const char *what, const bs_hub_resp *resp, const char *url,
                     bs_err *e) {
    const char *code = resp->error_code;
    char msg[600] = "";
    if (resp->error_message[0]) snprintf(msg, sizeof msg, "%s", resp->error_message);
    else if (resp->body) {
        json_t *j = json_loadb(resp->body, resp->body_len, 0, NULL);
        const char *s = json_string_value(json_object_get(j, "error"));
        if (s) snprintf(msg, sizeof msg, "%s", s);
        json_decref(j);
    }
    const char *tok = h->env->token_from;
    /* huggingface_hub's hf_raise_for_status: the Hub's 401 for a stale token says so; any other 401 of a
     * repository's endpoint is a missing or private repository */
    int bad_token = resp->status == 401 && !strcmp(resp->error_message, "Invalid credentials in Authorization header");
    int repo_url = strstr(url, "/api/models/") || strstr(url, "/resolve/");
    if (bad_token)
        return bs_fail(e, BS_EIO, "the Hub refused the token from %s as invalid (HTTP 401: %s); set HF_TOKEN to a valid "
                       "token (%s/settings/tokens), or unset it for a public model", tok ? tok : "nowhere", msg,
                       h->env->endpoint);
    if (!strcmp(code, "DisabledRepo") || !strcmp(resp->error_message, "Access to this resource is disabled."))
        return bs_fail(e, BS_EIO, "%s has been disabled on the Hub%s%s%s; nothing can be downloaded from it: use another "
                       "repository or a local directory [HTTP %ld]", r->repo, msg[0] ? " (" : "", msg, msg[0] ? ")" : "",
                       resp->status);
    if (!strcmp(code, "GatedRepo"))
        return bs_fail(e, BS_EIO,
                       "%s is a gated model: accept its licence on %s/%s while logged in to the Hub, then set HF_TOKEN "
                       "to a token of that account (%s) [HTTP %ld]",
                       r->repo, h->env->endpoint, r->repo,
                       tok ? "the token now in use has no access yet" : "no token is set", resp->status);
    if (!strcmp(code, "RepoNotFound") || (resp->status == 404 && !code[0] && strstr(url, "/api/models/")) ||
        (resp->status == 401 && !code[0] && repo_url))
        return bs_fail(e, BS_EIO,
                       "%s: no such model repository on %s; check the name, or, if it is private, set HF_TOKEN to a "
                       "token that can read it (%s) [HTTP %ld]",
                       r->repo, h->env->endpoint, tok ? "the token now in use cannot" : "no token is set", resp->status);
    if (!strcmp(code, "RevisionNotFound"))
        return bs_fail(e, BS_EIO, "%s has no revision '%s' (a branch, a tag or a full commit) [HTTP %ld]", r->repo,
                       r->rev, resp->status);
    if (!strcmp(code, "EntryNotFound") || resp->status == 404)
        return bs_fail(e, BS_EIO, "%s: not found on the Hub [HTTP %ld]", what, resp->status);
    if (resp->status == 401 || resp->status == 403)
        return bs_fail(e, BS_EIO, "%s: access refused (HTTP %ld%s%s); set HF_TOKEN to a token that can read %s", what,
                       resp->status, msg[0] ? ": " : "", msg, r->repo);
    return bs_fail(e, BS_EIO, "%s: HTTP %ld from %s%s%s", what, resp->status, url, msg[0] ? ": " : "", msg);
}

/* One request, retried on 408/429/5xx and on transport failures with
 * backoff (Retry-After honoured); any other answer is returned. No address
 * to connect to is retried once only (a machine without network learns it
 * in a second), nothing at all in quick mode. */
static int request(bs_hub *h, const bs_hub_req *rq, bs_hub_resp *resp, bs_err *e) {
    for (int attempt = 1;; attempt++) {
        int transport = 0;
        int rc = bs_hub_http_do(h->http, rq, resp, &transport, e);
        if (h->cancelled) return bs_fail(e, BS_EIO, "cancelled");
        int again = rc == BS_OK ? retryable(resp->status) : transport;
        if (!again) return rc;
        if (attempt > h->opts.max_retries || h->quick || (transport == 2 && attempt > 1)) {
            if (rc == BS_OK) return BS_OK; /* the caller reports the status */
            char why[sizeof e->msg]; /* (e->msg cannot be both bs_fail's argument and its output) */
            snprintf(why, sizeof why, "%s", e ? e->msg : "transport error");
            return bs_fail(e, BS_EIO, "%s (gave up after %d tries)", why, attempt);
        }
        double s = backoff(attempt, rc == BS_OK ? asked_wait(resp) : -1);
        if (rc == BS_OK)
            bs_log(BS_LOG_WARN, "hub", "%s %s: HTTP %ld; retrying in %.0f s (retry %d of %d)", rq->method, rq->url,
                   resp->status, s, attempt, h->opts.max_retries);
        else
            bs_log(BS_LOG_WARN, "hub", "%s; retrying in %.0f s (retry %d of %d)", e ? e->msg : "transport error", s, attempt,
                   h->opts.max_retries);
        if (nap(h, s) < 0) return bs_fail(e, BS_EIO, "cancelled");
    }
}

static char *api_url(bs_hub *h, const char *repo, const char *what, const char *rev, const char *query) {
    bs_buf b;
    bs_buf_init(&b);
    bs_buf_printf(&b, "%s/api/models/%s/%s/", h->env->endpoint, repo, what);
    bs_hub_url_segment(&b, rev, 0);
    if (query) bs_buf_puts(&b, query);
    if (b.oom) {
        bs_buf_free(&b);
        return NULL;
    }
    return b.data;
}

static char *resolve_url(bs_hub *h, const char *repo, const char *commit, const char *path) {
    bs_buf b;
    bs_buf_init(&b);
    bs_buf_printf(&b, "%s/%s/resolve/", h->env->endpoint, repo);
    bs_hub_url_segment(&b, commit, 0);
    bs_buf_putc(&b, '/');
    bs_hub_url_segment(&b, path, 1);
    if (b.oom) {
        bs_buf_free(&b);
        return NULL;
    }
    return b.data;
}

/* A Location this client goes to: a path on the same host, or an http(s) URL
 * (never file:, or a relative reference it would have to guess at). */
static int followable(const char *loc) {
    return loc[0] == '/' || !strncasecmp(loc, "http://", 7) || !strncasecmp(loc, "https://", 8);
}

static int too_many_redirects(const char *what, const char *url, bs_err *e) {
    char shown[600];
    bs_hub_url_shown(url, shown, sizeof shown);
    return bs_fail(e, BS_EIO, "%s: the Hub redirected more than %d times (a redirect loop?), last to %s; report it to "
                   "the Hub or the mirror", what, MAX_REDIRECTS, shown);
}

/* A GET of JSON from the API, following the Hub's relative redirects
 * (a renamed repository answers 307 with a path on the same origin). */
static int api_get(bs_hub *h, const bs_hub_ref *r, const char *url0, json_t **out, bs_hub_resp *resp, bs_err *e) {
    *out = NULL;
    char *url = bs_strfmt("%s", url0);
    int rc = BS_OK;
    if (!url) return bs_fail(e, BS_ENOMEM, "out of memory");
    for (int hops = 0;; hops++) {
        bs_hub_req rq = { .method = "GET", .url = url, .auth = 1 };
        if ((rc = request(h, &rq, resp, e)) < 0) goto done;
        if (resp->status / 100 == 3 && resp->location[0] == '/') {
            char *next = bs_hub_url_join(url, resp->location);
            if (!next) { rc = bs_fail(e, BS_ENOMEM, "out of memory"); goto done; }
            free(url);
            url = next;
            if (hops + 1 > MAX_REDIRECTS) {
                rc = too_many_redirects(r->repo, url, e);
                goto done;
            }
            continue;
        }
        break;
    }
    if (resp->status != 200) {
        rc = hub_error(h, r, r->repo, resp, url, e);
        goto done;
    }
    json_error_t je;
    if (!(*out = json_loadb(resp->body ? resp->body : "", resp->body_len, 0, &je)))
        rc = bs_fail(e, BS_EIO, "%s: the Hub's answer is not JSON (%s)", url, je.text);
done:
    free(url);
    return rc;
}

static int fill_unknown(bs_hub *h, bs_hub_plan *p, bs_hub_file *f, bs_err *e);

/* ---- which files a Basal model needs (05 §1; issue 31 item 3) ---- */

static int wanted_name(const char *p) {
    static const char *const names[] = { "config.json", "tokenizer.json", "tokenizer_config.json", "basal.json",
                                         "chat_template.jinja", "evidence_head.pt", "model.safetensors",
                                         "model.safetensors.index.json" };
    for (size_t i = 0; i < sizeof names / sizeof *names; i++)
        if (!strcmp(p, names[i])) return 1;
    size_t n = strlen(p); /* CALIBRATION.json and CALIBRATION.<engine>.json */
    return !strncmp(p, "CALIBRATION", 11) && n >= 16 && !strcmp(p + n - 5, ".json");
}

/* A file the index may name as a shard: a top-level .safetensors. */
static int shard_name(const char *p) {
    size_t n = strlen(p);
    return n > 12 && !strcmp(p + n - 12, ".safetensors");
}

/* Sizes come from the Hub: their sum saturates instead of wrapping round to
 * a small number that the free space check would let through. */
static uint64_t add_sat(uint64_t a, uint64_t b) {
    return a > UINT64_MAX - b ? UINT64_MAX : a + b;
}

static int hex_of(const char *s, size_t n) {
    if (strlen(s) != n) return 0;
    for (size_t i = 0; i < n; i++)
        if (!((s[i] >= '0' && s[i] <= '9') || (s[i] >= 'a' && s[i] <= 'f'))) return 0;
    return 1;
}

void bs_hub_files_free(bs_hub_files *f) {
    for (size_t i = 0; i < f->n; i++) {
        free(f->v[i].path);
        free(f->v[i].etag);
    }
    free(f->v);
    memset(f, 0, sizeof *f);
}

static int files_push(bs_hub_files *f, const char *path, const char *etag, uint64_t size, int lfs, bs_err *e) {
    if (f->n == f->cap) {
        size_t nc = f->cap ? f->cap * 2 : 16;
        bs_hub_file *nv = realloc(f->v, nc * sizeof *nv);
        if (!nv) return bs_fail(e, BS_ENOMEM, "out of memory");
        f->v = nv;
        f->cap = nc;
    }
    bs_hub_file *x = &f->v[f->n];
    memset(x, 0, sizeof *x);
    x->path = bs_strfmt("%s", path);
    x->etag = etag ? bs_strfmt("%s", etag) : NULL;
    x->size = size;
    x->lfs = lfs;
    if (!x->path || (etag && !x->etag)) {
        free(x->path);
        free(x->etag);
        return bs_fail(e, BS_ENOMEM, "out of memory");
    }
    f->n++;
    return BS_OK;
}

/* One entry of the listing: a top-level file, its etag checked to be what
 * the Hub gives (it becomes a file name in blobs/); folders and files in
 * folders are not a Basal model's (a name with '/' never becomes a path in
 * the cache: "../x", "/abs", "a/../b" are dropped here). A malformed entry
 * of a file a Basal model never reads is dropped too; of one it may read, it
 * is an error. */
static int files_add(bs_hub_files *f, const json_t *entry, const char *url, bs_err *e) {
    const char *type = json_string_value(json_object_get(entry, "type"));
    const char *path = json_string_value(json_object_get(entry, "path"));
    if (!type || !path || strcmp(type, "file") || !path[0] || strchr(path, '/')) return BS_OK;
    const json_t *lfs = json_object_get(entry, "lfs");
    const json_t *size = json_object_get(lfs ? lfs : entry, "size");
    const char *oid = json_string_value(json_object_get(lfs ? lfs : entry, "oid"));
    if (!json_is_integer(size) || json_integer_value(size) < 0 || !oid || !hex_of(oid, lfs ? 64 : 40)) {
        if (!wanted_name(path) && !shard_name(path)) return BS_OK;
        return bs_fail(e, BS_EIO, "%s: the entry of %s has no valid size or %s", url, path, lfs ? "LFS sha256" : "oid");
    }
    return files_push(f, path, oid, (uint64_t)json_integer_value(size), lfs != NULL, e);
}

/* The files of /api/models/<repo>/revision/<commit>?blobs=true, for a Hub
 * without the tree listing (huggingface_hub's older snapshot_download read
 * these siblings): a sibling without a usable etag and size gets them from
 * its headers later (fill_unknown). */
static int siblings(bs_hub *h, const bs_hub_ref *r, const char *commit, bs_hub_files *f, bs_err *e) {
    char *url = api_url(h, r->repo, "revision", commit, "?blobs=true");
    json_t *info = NULL;
    bs_hub_resp resp = { 0 };
    if (!url) return bs_fail(e, BS_ENOMEM, "out of memory");
    int rc = api_get(h, r, url, &info, &resp, e);
    bs_hub_resp_free(&resp);
    json_t *sib = json_object_get(info, "siblings");
    if (rc == BS_OK && !json_is_array(sib)) rc = bs_fail(e, BS_EIO, "%s: the Hub lists no files (no siblings)", url);
    for (size_t i = 0; rc == BS_OK && i < json_array_size(sib); i++) {
        const json_t *s = json_array_get(sib, i), *lfs = json_object_get(s, "lfs");
        const char *path = json_string_value(json_object_get(s, "rfilename"));
        if (!path || strchr(path, '/')) continue;
        const char *sha = json_string_value(json_object_get(lfs, "sha256"));
        const char *blob = json_string_value(json_object_get(s, "blobId"));
        const json_t *size = json_object_get(lfs && sha ? lfs : s, "size");
        int ok_size = json_is_integer(size) && json_integer_value(size) >= 0;
        if (sha && hex_of(sha, 64) && ok_size)
            rc = files_push(f, path, sha, (uint64_t)json_integer_value(size), 1, e);
        else if (!lfs && blob && hex_of(blob, 40) && ok_size)
            rc = files_push(f, path, blob, (uint64_t)json_integer_value(size), 0, e);
        else
            rc = files_push(f, path, NULL, 0, 0, e);
    }
    json_decref(info);
    free(url);
    return rc;
}

static int listing_page(bs_hub_files *f, const json_t *list, const char *url, bs_err *e) {
    if (!json_is_array(list)) return bs_fail(e, BS_EIO, "%s: the listing is not a JSON array", url);
    int rc = BS_OK;
    for (size_t i = 0; rc == BS_OK && i < json_array_size(list); i++) rc = files_add(f, json_array_get(list, i), url, e);
    return rc;
}

int bs_hub_listing_page(bs_hub_files *f, const char *json, size_t len, const char *url, bs_err *e) {
    json_error_t je;
    json_t *list = json_loadb(json, len, 0, &je);
    if (!list) return bs_fail(e, BS_EIO, "%s: the Hub's answer is not JSON (%s)", url, je.text);
    int rc = listing_page(f, list, url, e);
    json_decref(list);
    return rc;
}

/* The whole listing of the commit (recursive, as huggingface_hub asks for
 * it), page after page through Link: rel="next". */
static int list_files(bs_hub *h, const bs_hub_ref *r, const char *commit, bs_hub_files *f, bs_err *e) {
    char *url = api_url(h, r->repo, "tree", commit, "?recursive=true&expand=false");
    int rc = url ? BS_OK : bs_fail(e, BS_ENOMEM, "out of memory");
    bs_hub_resp resp = { 0 };
    for (int page = 0; rc == BS_OK && url; page++) {
        json_t *list = NULL;
        if (page > 10000) {
            rc = bs_fail(e, BS_EIO, "%s: the listing does not end", r->repo);
            break;
        }
        if ((rc = api_get(h, r, url, &list, &resp, e)) < 0) {
            /* no such endpoint (a 404 that is not the Hub's own, 405, 501): the older listing */
            if (page == 0 && ((resp.status == 404 && !resp.error_code[0]) || resp.status == 405 || resp.status == 501)) {
                bs_log(BS_LOG_INFO, "hub", "%s: the Hub has no tree listing (HTTP %ld); using the revision's siblings",
                       r->repo, resp.status);
                rc = siblings(h, r, commit, f, e);
            }
            break;
        }
        rc = listing_page(f, list, url, e);
        json_decref(list);
        free(url);
        url = NULL;
        if (rc == BS_OK && resp.next[0]) {
            if (!bs_hub_http_same_origin(h->http, resp.next) && strncmp(resp.next, "/", 1))
                rc = bs_fail(e, BS_EIO, "%s: the next page of the listing is on another site (%s)", r->repo, resp.next);
            else if (!(url = resp.next[0] == '/' ? bs_hub_url_join(h->env->endpoint, resp.next) : bs_strfmt("%s", resp.next)))
                rc = bs_fail(e, BS_ENOMEM, "out of memory");
        }
    }
    free(url);
    bs_hub_resp_free(&resp);
    return rc;
}

static bs_hub_file *find_file(bs_hub_plan *p, const char *path) {
    for (size_t i = 0; i < p->n_files; i++)
        if (!strcmp(p->files[i].path, path)) return &p->files[i];
    return NULL;
}

static int blob_present(const char *repo_dir, const bs_hub_file *f) {
    char *b = bs_strfmt("%s/blobs/%s", repo_dir, f->etag);
    struct stat st;
    int ok = b && stat(b, &st) == 0 && S_ISREG(st.st_mode) && (uint64_t)st.st_size == f->size;
    free(b);
    return ok;
}

static int by_size(const void *a, const void *b) {
    const bs_hub_file *x = a, *y = b;
    return x->size < y->size ? -1 : x->size > y->size ? 1 : strcmp(x->path, y->path);
}

/* The shards the index names: each must be a top-level file of the listing. */
static int add_shards(bs_hub *h, bs_hub_plan *p, bs_hub_files *all, bs_err *e) {
    char *blob = NULL, *text = NULL;
    size_t len = 0;
    int rc = bs_hub_fetch_blob(h, p, "model.safetensors.index.json", &blob, e);
    if (rc == BS_OK) rc = bs_read_regular_file(blob, &text, &len, BS_MODEL_FILE_MAX, e);
    free(blob);
    if (rc < 0) return rc;
    json_error_t je;
    json_t *root = json_loadb(text, len, 0, &je), *map = json_object_get(root, "weight_map");
    free(text);
    if (!json_is_object(map)) {
        json_decref(root);
        return bs_fail(e, BS_EFORMAT, "%s@%s: model.safetensors.index.json has no weight_map object", p->ref.repo,
                       p->commit);
    }
    const char *k;
    json_t *v;
    json_object_foreach(map, k, v) {
        const char *shard = json_string_value(v);
        if (!shard) continue; /* the loader names a malformed entry */
        if (!shard_name(shard) || strchr(shard, '/')) {
            rc = bs_fail(e, BS_EFORMAT, "%s@%.8s: the index names %s as a shard, which is not a .safetensors file of "
                         "the repository's top level; nothing of it is downloaded", p->ref.repo, p->commit, shard);
            break;
        }
        if (find_file(p, shard)) continue;
        bs_hub_file *src = NULL;
        for (size_t i = 0; i < all->n && !src; i++) /* (a path moved into the plan is NULL) */
            if (all->v[i].path && !strcmp(all->v[i].path, shard)) src = &all->v[i];
        if (!src) {
            rc = bs_fail(e, BS_EFORMAT, "%s@%.8s: the index names %s, which the repository does not hold", p->ref.repo,
                         p->commit, shard);
            break;
        }
        p->files[p->n_files++] = *src; /* moved: the listing gives it up */
        src->path = src->etag = NULL;
    }
    json_decref(root);
    return rc;
}

/* The commit a revision names: itself when it is one, else the Hub's
 * answer (/api/models/<repo>/revision/<rev>, its "sha"). */
static int commit_of(bs_hub *h, const bs_hub_ref *r, char **commit, bs_err *e) {
    *commit = NULL;
    if (bs_hub_is_commit(r->rev)) return (*commit = bs_strfmt("%s", r->rev)) ? BS_OK : bs_fail(e, BS_ENOMEM, "out of memory");
    char *url = api_url(h, r->repo, "revision", r->rev, NULL);
    json_t *info = NULL;
    bs_hub_resp resp = { 0 };
    if (!url) return bs_fail(e, BS_ENOMEM, "out of memory");
    int rc = api_get(h, r, url, &info, &resp, e);
    free(url);
    bs_hub_resp_free(&resp);
    if (rc == BS_OK) {
        const char *sha = json_string_value(json_object_get(info, "sha"));
        if (!sha || !bs_hub_is_commit(sha))
            rc = bs_fail(e, BS_EIO, "%s: the Hub's answer about revision %s has no commit (sha)", r->repo, r->rev);
        else if (!(*commit = bs_strfmt("%s", sha)))
            rc = bs_fail(e, BS_ENOMEM, "out of memory");
    }
    json_decref(info);
    return rc;
}

int bs_hub_probe(bs_hub *h, const bs_hub_ref *r, char **commit, uint64_t *bytes, bs_err *e) {
    *bytes = 0;
    bs_hub_files all = { 0 };
    int rc = commit_of(h, r, commit, e);
    if (rc == BS_OK) rc = list_files(h, r, *commit, &all, e);
    int single = 0;
    for (size_t i = 0; rc == BS_OK && i < all.n; i++) single |= !strcmp(all.v[i].path, "model.safetensors");
    for (size_t i = 0; rc == BS_OK && i < all.n; i++) {
        const char *p = all.v[i].path;
        size_t n = strlen(p);
        if ((wanted_name(p) && !(single && !strcmp(p, "model.safetensors.index.json"))) ||
            (!single && n > 12 && !strcmp(p + n - 12, ".safetensors")))
            *bytes = add_sat(*bytes, all.v[i].size);
    }
    bs_hub_files_free(&all);
    if (rc < 0) {
        free(*commit);
        *commit = NULL;
    }
    return rc;
}

/* A file of the plan that the listing names twice (two etags for one name:
 * which one is the file cannot be known). */
static int listed_twice(const bs_hub_plan *p, const bs_hub_files *all, bs_err *e) {
    for (size_t i = 0; i < p->n_files; i++) {
        int twice = 0;
        for (size_t j = i + 1; j < p->n_files && !twice; j++) twice = !strcmp(p->files[i].path, p->files[j].path);
        for (size_t j = 0; j < all->n && !twice; j++) twice = all->v[j].path && !strcmp(p->files[i].path, all->v[j].path);
        if (twice)
            return bs_fail(e, BS_EIO, "%s@%.8s: the Hub's listing names %s twice; it cannot be told which is the file",
                           p->ref.repo, p->commit, p->files[i].path);
    }
    return BS_OK;
}

int bs_hub_plan_make(bs_hub *h, const bs_hub_ref *r, bs_hub_plan *p, bs_err *e) {
    memset(p, 0, sizeof *p);
    p->ref = *r;
    bs_hub_files all = { 0 };
    int rc = BS_OK;
    if (!(p->repo_dir = bs_hub_repo_dir(h->env, r->repo))) goto oom;
    if ((rc = commit_of(h, r, &p->commit, e)) < 0) goto fail;
    if ((rc = list_files(h, r, p->commit, &all, e)) < 0) goto fail;
    if (!(p->files = calloc(all.n + 1, sizeof *p->files))) goto oom;
    int single = 0;
    for (size_t i = 0; i < all.n; i++) single |= !strcmp(all.v[i].path, "model.safetensors");
    for (size_t i = 0; i < all.n; i++) {
        const char *path = all.v[i].path;
        /* one set of weights: model.safetensors when the repository has it (the loader refuses both) */
        if (!wanted_name(path) || (single && !strcmp(path, "model.safetensors.index.json"))) continue;
        p->files[p->n_files++] = all.v[i];
        all.v[i].path = all.v[i].etag = NULL;
    }
    if ((rc = listed_twice(p, &all, e)) < 0) goto fail;
    for (size_t i = 0; i < p->n_files; i++)
        if (!p->files[i].etag && (rc = fill_unknown(h, p, &p->files[i], e)) < 0) goto fail;
    const char *need[] = { "config.json", "basal.json", "tokenizer.json", "tokenizer_config.json", "chat_template.jinja" };
    for (size_t i = 0; i < sizeof need / sizeof *need; i++)
        if (!find_file(p, need[i])) {
            rc = bs_fail(e, BS_EFORMAT, "%s@%.8s is not a Basal model directory: it has no %s (05 §1)", r->repo, p->commit,
                         need[i]);
            goto fail;
        }
    if (!single) {
        if (!find_file(p, "model.safetensors.index.json")) {
            rc = bs_fail(e, BS_EFORMAT, "%s@%.8s has no weights: neither model.safetensors nor model.safetensors.index.json",
                         r->repo, p->commit);
            goto fail;
        }
        bs_hub_file *grown = realloc(p->files, (p->n_files + all.n + 1) * sizeof *grown);
        if (!grown) goto oom;
        p->files = grown;
        if ((rc = add_shards(h, p, &all, e)) < 0 || (rc = listed_twice(p, &all, e)) < 0) goto fail;
        for (size_t i = 0; i < p->n_files; i++)
            if (!p->files[i].etag && (rc = fill_unknown(h, p, &p->files[i], e)) < 0) goto fail;
    }
    qsort(p->files, p->n_files, sizeof *p->files, by_size);
    for (size_t i = 0; i < p->n_files; i++) {
        p->files[i].have = blob_present(p->repo_dir, &p->files[i]);
        p->bytes_total = add_sat(p->bytes_total, p->files[i].size);
        if (!p->files[i].have) p->bytes_missing = add_sat(p->bytes_missing, p->files[i].size);
    }
    goto done;
oom:
    rc = bs_fail(e, BS_ENOMEM, "out of memory");
fail:
    bs_hub_plan_free(p);
done:
    bs_hub_files_free(&all);
    return rc;
}

void bs_hub_plan_free(bs_hub_plan *p) {
    if (p->pull_lock > 0) bs_hub_unlock(p->pull_lock - 1);
    for (size_t i = 0; p->files && i < p->n_files; i++) {
        free(p->files[i].path);
        free(p->files[i].etag);
    }
    free(p->files);
    free(p->commit);
    free(p->repo_dir);
    memset(p, 0, sizeof *p);
}

/* ---- one file ---- */

typedef struct {
    bs_hub *h;
    int fd;
    EVP_MD_CTX *md;
    const bs_hub_file *f;
    const bs_hub_resp *resp;
    uint64_t off;          /* bytes in the file */
    uint64_t asked_from;   /* the Range of this request */
    uint64_t got;          /* bytes of this request */
    int restarted;         /* the server ignored the Range: started again from 0 */
    bs_err *e;
    const char *tmp;
} sink_t;

static int hash_start(sink_t *s) {
    if (EVP_DigestInit_ex(s->md, s->f->lfs ? EVP_sha256() : EVP_sha1(), NULL) != 1) return -1;
    if (s->f->lfs) return 0;
    char hdr[40]; /* a git blob's id covers "blob <size>\0" and the content */
    int n = snprintf(hdr, sizeof hdr, "blob %llu", (unsigned long long)s->f->size);
    return EVP_DigestUpdate(s->md, hdr, (size_t)n + 1) == 1 ? 0 : -1;
}

static int write_all(sink_t *s, const char *data, size_t n) {
    while (n) {
        ssize_t w = write(s->fd, data, n);
        if (w < 0 && errno == EINTR) continue;
        if (w < 0) {
            int err = errno;
            if (err == ENOSPC || err == EDQUOT)
                bs_fail(s->e, BS_EIO,
                        "disk full while downloading %s into %s (%s); free some space or set HF_HUB_CACHE to a larger "
                        "disk, then run the command again: the %llu bytes already fetched are kept and the download "
                        "resumes from there",
                        s->f->path, s->tmp, strerror(err), (unsigned long long)s->off);
            else bs_fail(s->e, BS_EIO, "%s: cannot write: %s", s->tmp, strerror(err));
            return -1;
        }
        data += w;
        n -= (size_t)w;
        s->off += (uint64_t)w;
    }
    return 0;
}

static int on_data(void *ud, const char *data, size_t n) {
    sink_t *s = ud;
    if (s->got == 0 && s->asked_from > 0 && s->resp->status == 200) {
        /* the Range was ignored: the whole file comes, from its first byte */
        if (ftruncate(s->fd, 0) != 0 || lseek(s->fd, 0, SEEK_SET) != 0 || hash_start(s) < 0) {
            bs_fail(s->e, BS_EIO, "%s: cannot start again: %s", s->tmp, strerror(errno));
            return 1;
        }
        s->h->prog.done -= s->off < s->h->prog.done ? s->off : s->h->prog.done;
        s->off = 0;
        s->restarted = 1;
    }
    if (s->got == 0 && s->resp->status == 206 && s->resp->range_start != (long long)s->asked_from) {
        bs_fail(s->e, BS_EIO, "%s: the server sent bytes from %lld, %llu were asked for", s->f->path,
                s->resp->range_start, (unsigned long long)s->asked_from);
        return 1;
    }
    if (s->off + n > s->f->size) {
        bs_fail(s->e, BS_EIO, "%s: the server sent more than the %llu bytes the Hub lists for it; the download was "
                "stopped (run the command again to resume it)", s->f->path, (unsigned long long)s->f->size);
        return 1;
    }
    if (write_all(s, data, n) < 0) return 1;
    if (EVP_DigestUpdate(s->md, data, n) != 1) {
        bs_fail(s->e, BS_ENOMEM, "out of memory");
        return 1;
    }
    s->got += n;
    s->h->prog.done += n;
    report(s->h);
    return s->h->cancelled;
}

/* Hashes the bytes an earlier run left in the .incomplete file, so that the
 * check covers the whole file when the rest arrives. */
static int hash_existing(sink_t *s) {
    char *buf = malloc(1 << 20);
    if (!buf) return bs_fail(s->e, BS_ENOMEM, "out of memory");
    uint64_t left = s->off;
    int rc = BS_OK;
    if (lseek(s->fd, 0, SEEK_SET) != 0) rc = bs_fail(s->e, BS_EIO, "%s: %s", s->tmp, strerror(errno));
    while (rc == BS_OK && left) {
        ssize_t r = read(s->fd, buf, left < (1 << 20) ? (size_t)left : (1 << 20));
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) {
            rc = bs_fail(s->e, BS_EIO, "%s: cannot read back: %s", s->tmp, r < 0 ? strerror(errno) : "short file");
            break;
        }
        if (EVP_DigestUpdate(s->md, buf, (size_t)r) != 1) rc = bs_fail(s->e, BS_ENOMEM, "out of memory");
        left -= (uint64_t)r;
    }
    free(buf);
    if (rc == BS_OK && lseek(s->fd, 0, SEEK_END) < 0) rc = bs_fail(s->e, BS_EIO, "%s: %s", s->tmp, strerror(errno));
    return rc;
}

/* HEAD <repo>/resolve/<commit>/<path>, following the Hub's relative
 * redirects (a renamed repository, the resolve cache of small files); *url
 * (malloc'd) is the address the last answer came from. */
static int head(bs_hub *h, const bs_hub_plan *p, const char *path, bs_hub_resp *resp, char **url_out, bs_err *e) {
    char *url = resolve_url(h, p->ref.repo, p->commit, path);
    int rc = BS_OK;
    *url_out = NULL;
    if (!url) return bs_fail(e, BS_ENOMEM, "out of memory");
    for (int hops = 0;; hops++) {
        bs_hub_req rq = { .method = "HEAD", .url = url, .auth = 1 };
        if ((rc = request(h, &rq, resp, e)) < 0) break;
        if (resp->status / 100 == 3 && resp->location[0] == '/') {
            char *next = bs_hub_url_join(url, resp->location);
            if (!next) { rc = bs_fail(e, BS_ENOMEM, "out of memory"); break; }
            free(url);
            url = next;
            if (hops + 1 > MAX_REDIRECTS) {
                rc = too_many_redirects(path, url, e);
                break;
            }
            continue;
        }
        break;
    }
    if (rc < 0) free(url);
    else *url_out = url;
    return rc;
}

/* A file the listing gave without its etag or size (an older Hub's
 * siblings): both from its headers, as huggingface_hub learns them. */
static int fill_unknown(bs_hub *h, bs_hub_plan *p, bs_hub_file *f, bs_err *e) {
    bs_hub_resp resp = { 0 };
    char *url = NULL, what[400];
    snprintf(what, sizeof what, "%s@%.8s: %s", p->ref.repo, p->commit, f->path);
    int rc = head(h, p, f->path, &resp, &url, e);
    if (rc == BS_OK && resp.status / 100 != 2 && resp.status / 100 != 3) rc = hub_error(h, &p->ref, what, &resp, url, e);
    if (rc == BS_OK) {
        const char *etag = resp.linked_etag[0] ? resp.linked_etag : resp.etag;
        long long size = resp.linked_size >= 0 ? resp.linked_size : resp.status == 200 ? resp.content_length : -1;
        int lfs = hex_of(etag, 64);
        if ((!lfs && !hex_of(etag, 40)) || size < 0)
            rc = bs_fail(e, BS_EIO, "%s: the Hub gives neither a SHA-256 / git SHA-1 etag nor a size for it (etag '%s', "
                         "size %lld); it cannot be checked", what, etag, size);
        else if (!(f->etag = bs_strfmt("%s", etag)))
            rc = bs_fail(e, BS_ENOMEM, "out of memory");
        else
            f->size = (uint64_t)size, f->lfs = lfs;
    }
    free(url);
    bs_hub_resp_free(&resp);
    return rc;
}

/* Where the content of f comes from: the resolve URL, or for an LFS file
 * the CDN address its 302 names. The headers must agree with the listing. */
static int locate(bs_hub *h, bs_hub_plan *p, const bs_hub_file *f, char **dl, int *auth, bs_err *e) {
    char *url = NULL, what[400];
    bs_hub_resp resp = { 0 };
    snprintf(what, sizeof what, "%s@%.8s: %s", p->ref.repo, p->commit, f->path);
    *dl = NULL;
    *auth = 1;
    int rc = head(h, p, f->path, &resp, &url, e);
    if (rc < 0) goto done;
    const char *etag = resp.linked_etag[0] ? resp.linked_etag : resp.etag;
    long long size = resp.linked_size >= 0 ? resp.linked_size : resp.status == 200 ? resp.content_length : -1;
    if (resp.status / 100 == 3 && followable(resp.location)) {
        *dl = bs_strfmt("%s", resp.location);
        *auth = bs_hub_http_same_origin(h->http, resp.location);
    } else if (resp.status == 200) {
        *dl = url;
        url = NULL;
    } else if (resp.status / 100 == 3) {
        rc = bs_fail(e, BS_EIO, "%s: the Hub redirected (HTTP %ld) without a Location this client can follow (none, "
                     "not an http(s) address, or longer than %zu bytes); report it with the repository's name", what, resp.status,
                     sizeof resp.location - 1);
        goto done;
    } else {
        rc = hub_error(h, &p->ref, what, &resp, url, e);
        goto done;
    }
    if (!*dl) { rc = bs_fail(e, BS_ENOMEM, "out of memory"); goto done; }
    if (resp.repo_commit[0] && strcmp(resp.repo_commit, p->commit))
        rc = bs_fail(e, BS_EIO, "%s: the Hub answers for commit %s, the listing was of %s", what, resp.repo_commit,
                     p->commit);
    else if (etag[0] && strcmp(etag, f->etag))
        rc = bs_fail(e, BS_EIO, "%s: the Hub's listing gives etag %s, the file's headers %s", what, f->etag, etag);
    else if (size >= 0 && (uint64_t)size != f->size)
        rc = bs_fail(e, BS_EIO, "%s: the Hub's listing gives %llu bytes, the file's headers %lld", what,
                     (unsigned long long)f->size, size);
    if (rc < 0) {
        free(*dl);
        *dl = NULL;
    }
done:
    free(url);
    bs_hub_resp_free(&resp);
    return rc;
}

static void hex_digest(const unsigned char *d, unsigned n, char *out) {
    for (unsigned i = 0; i < n; i++) sprintf(out + 2 * i, "%02x", d[i]);
}

/* Downloads url into tmp (resuming what is there) until it holds f's
 * bytes; then checks them against f's etag. 1 when they differ (the
 * file was removed), 0 when whole and right. */
static int download(bs_hub *h, const bs_hub_file *f, const char *url0, int auth, const char *tmp, bs_err *e) {
    sink_t s = { .h = h, .fd = -1, .f = f, .e = e, .tmp = tmp };
    bs_hub_resp resp = { 0 };
    int rc = BS_OK, tries = 0, hops = 0;
    char *url = bs_strfmt("%s", url0); /* the address a redirect of the CDN leads to */
    s.resp = &resp;
    if (!url) return bs_fail(e, BS_ENOMEM, "out of memory");
    if (!(s.md = EVP_MD_CTX_new())) {
        free(url);
        return bs_fail(e, BS_ENOMEM, "out of memory");
    }
    /* never through a link or into a file with another name (a symlink or a
     * hard link planted in blobs/ would have the download truncate and
     * overwrite its target): such an entry is replaced by a new file */
    s.fd = open(tmp, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK, 0644);
    struct stat st;
    if ((s.fd < 0 && errno == ELOOP) ||
        (s.fd >= 0 && fstat(s.fd, &st) == 0 && (!S_ISREG(st.st_mode) || st.st_nlink > 1))) {
        if (s.fd >= 0) close(s.fd);
        bs_log(BS_LOG_WARN, "hub", "%s is not a plain file; replaced by a new one", tmp);
        s.fd = unlink(tmp) == 0 || errno == ENOENT ? open(tmp, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0644)
                                                     : -1;
    }
    if (s.fd < 0) {
        rc = bs_fail(e, BS_EIO, "%s: cannot create: %s", tmp, strerror(errno));
        goto done;
    }
    if (fcntl(s.fd, F_SETFL, 0) != 0 || fstat(s.fd, &st) != 0) { rc = bs_fail(e, BS_EIO, "%s: %s", tmp, strerror(errno)); goto done; }
    s.off = (uint64_t)st.st_size;
    if (s.off > f->size && ftruncate(s.fd, 0) == 0) s.off = 0;
    if (hash_start(&s) < 0) { rc = bs_fail(e, BS_ENOMEM, "out of memory"); goto done; }
    if (s.off) {
        bs_log(BS_LOG_INFO, "hub", "%s: resuming at byte %llu of %llu", f->path, (unsigned long long)s.off,
               (unsigned long long)f->size);
        if ((rc = hash_existing(&s)) < 0) goto done;
        h->prog.done += s.off;
        h->prog.resumed += s.off;
    }
    for (int attempt = 1; s.off < f->size; attempt++) {
        s.asked_from = s.off;
        s.got = 0;
        bs_hub_req rq = { .method = "GET", .url = url, .auth = auth, .range_from = (long long)s.off, .sink = on_data,
                          .sink_ud = &s };
        int transport = 0;
        rc = bs_hub_http_do(h->http, &rq, &resp, &transport, e);
        if (h->cancelled) { rc = bs_fail(e, BS_EIO, "cancelled"); goto done; }
        if (rc < 0 && !transport) goto done; /* the disk, a bad answer: said by the sink */
        if (s.got) tries = 0;
        if (rc == BS_OK && resp.status == 416) { /* the file changed under its name: start again */
            if (ftruncate(s.fd, 0) != 0 || lseek(s.fd, 0, SEEK_SET) != 0 || hash_start(&s) < 0) {
                rc = bs_fail(e, BS_EIO, "%s: cannot start again: %s", tmp, strerror(errno));
                goto done;
            }
            h->prog.done -= s.off < h->prog.done ? s.off : h->prog.done;
            s.off = 0;
        } else if (rc == BS_OK && resp.status / 100 == 3 && followable(resp.location)) {
            /* a CDN that sends elsewhere (as requests and fetch follow it); the token never follows
             * a redirect off the endpoint's origin */
            char *next = resp.location[0] == '/' ? bs_hub_url_join(url, resp.location) : bs_strfmt("%s", resp.location);
            if (!next) { rc = bs_fail(e, BS_ENOMEM, "out of memory"); goto done; }
            free(url);
            url = next;
            auth = auth && bs_hub_http_same_origin(h->http, url);
            if (++hops > MAX_REDIRECTS) {
                char shown[600];
                bs_hub_url_shown(url, shown, sizeof shown);
                rc = bs_fail(e, BS_EIO, "%s: redirected more than %d times (a redirect loop?), last to %s; report it "
                             "to the Hub or the mirror", f->path, MAX_REDIRECTS, shown);
                goto done;
            }
            attempt--;
            continue;
        } else if (rc == BS_OK && resp.status / 100 != 2 && !retryable(resp.status)) {
            char shown[600];
            bs_hub_url_shown(url, shown, sizeof shown);
            rc = bs_fail(e, BS_EIO, "%s: HTTP %ld from %s", f->path, resp.status, shown);
            goto done;
        } else if (s.off >= f->size) {
            break;
        }
        /* cut, stalled, 5xx/429, or an answer that ended early: try again from where it stopped */
        if (++tries > h->opts.max_retries || attempt >= MAX_ATTEMPTS) {
            char why[sizeof e->msg]; /* (e->msg cannot be both bs_fail's argument and its output) */
            snprintf(why, sizeof why, "%s", rc < 0 ? e->msg : "the server ended the answer early");
            rc = bs_fail(e, BS_EIO,
                         "downloading %s failed after %d tries (%s); run the command again to resume from byte %llu",
                         f->path, attempt, why, (unsigned long long)s.off);
            goto done;
        }
        double wait = backoff(tries, rc == BS_OK ? asked_wait(&resp) : -1);
        bs_log(BS_LOG_WARN, "hub", "%s: %s at byte %llu of %llu; resuming in %.0f s (retry %d of %d)", f->path,
               rc < 0 ? e->msg : resp.status / 100 != 2 ? "the server answered an error" : "the connection ended early",
               (unsigned long long)s.off, (unsigned long long)f->size, wait, tries, h->opts.max_retries);
        if (rc == BS_OK && resp.status / 100 != 2)
            bs_log(BS_LOG_WARN, "hub", "%s: HTTP %ld", f->path, resp.status);
        if (nap(h, wait) < 0) { rc = bs_fail(e, BS_EIO, "cancelled"); goto done; }
        rc = BS_OK;
    }
    unsigned char d[EVP_MAX_MD_SIZE];
    unsigned dn = 0;
    char hex[2 * EVP_MAX_MD_SIZE + 1];
    if (EVP_DigestFinal_ex(s.md, d, &dn) != 1) { rc = bs_fail(e, BS_ENOMEM, "out of memory"); goto done; }
    hex_digest(d, dn, hex);
    if (strcmp(hex, f->etag)) {
        bs_fail(e, BS_EIO, "%s: %s mismatch (expected %s, got %s); the download was discarded", f->path,
                f->lfs ? "SHA-256" : "git blob SHA-1", f->etag, hex);
        if (ftruncate(s.fd, 0) == 0) unlink(tmp);
        h->prog.done -= f->size < h->prog.done ? f->size : h->prog.done;
        rc = 1;
        goto done;
    }
    if (fsync(s.fd) != 0) rc = bs_fail(e, BS_EIO, "%s: %s", tmp, strerror(errno));
done:
    if (s.fd >= 0) close(s.fd);
    EVP_MD_CTX_free(s.md);
    bs_hub_resp_free(&resp);
    free(url);
    return rc;
}

/* The repository's pull lock, taken before the plan's first write and held
 * until bs_hub_plan_free: `models rm` never removes what a pull is writing. */
static void hold_repo(bs_hub *h, bs_hub_plan *p) {
    if (p->pull_lock > 0) return;
    bs_err le = { 0 };
    int fd = -1;
    /* a cache where no lock can be made (read-only) cannot be written either:
     * the write that needs it fails with its own reason */
    if (bs_hub_repo_lock(h->env, p->ref.repo, 0, &fd, &le) == 1) p->pull_lock = fd + 1;
    else bs_log(BS_LOG_DEBUG, "hub", "%s: no pull lock: %s", p->ref.repo, le.msg);
}

/* Brings f into blobs/<etag>, under the blob's lock. */
static int fetch_file(bs_hub *h, bs_hub_plan *p, bs_hub_file *f, bs_err *e) {
    if (f->have && blob_present(p->repo_dir, f)) return BS_OK;
    char *blob = bs_strfmt("%s/blobs/%s", p->repo_dir, f->etag), *tmp = NULL, *url = NULL;
    int rc = BS_OK, fd = -1, auth = 1;
    if (!blob || !(tmp = bs_strfmt("%s.incomplete", blob))) { rc = bs_fail(e, BS_ENOMEM, "out of memory"); goto done; }
    hold_repo(h, p);
    char *blobs_dir = bs_strfmt("%s/blobs", p->repo_dir);
    if (!blobs_dir) { rc = bs_fail(e, BS_ENOMEM, "out of memory"); goto done; }
    rc = bs_hub_mkdir_p(blobs_dir, e);
    free(blobs_dir);
    if (rc < 0) goto done;
    if ((rc = bs_hub_lock(h->env, p->ref.repo, f->etag, f->path, is_cancelled, h, &fd, e)) < 0) goto done;
    if (blob_present(p->repo_dir, f)) { /* another process brought it meanwhile */
        h->prog.done += f->size;
        goto done;
    }
    h->prog.file = f->path;
    report(h);
    if ((rc = locate(h, p, f, &url, &auth, e)) < 0) goto done;
    for (int round = 0;; round++) {
        rc = download(h, f, url, auth, tmp, e);
        if (rc != 1) break;
        if (round == 1) { rc = BS_EIO; goto done; } /* twice wrong: e says how */
        bs_log(BS_LOG_WARN, "hub", "%s; downloading it once more", e->msg);
    }
    if (rc < 0) goto done;
    if (rename(tmp, blob) != 0) rc = bs_fail(e, BS_EIO, "%s: cannot move it into place: %s", blob, strerror(errno));
done:
    if (rc == BS_OK) f->have = 1;
    bs_hub_unlock(fd);
    free(url);
    free(tmp);
    free(blob);
    return rc;
}

int bs_hub_fetch_blob(bs_hub *h, bs_hub_plan *p, const char *path, char **blob, bs_err *e) {
    *blob = NULL;
    bs_hub_file *f = find_file(p, path);
    if (!f) return bs_fail(e, BS_EIO, "%s@%.8s: no file %s", p->ref.repo, p->commit, path);
    uint64_t done = h->prog.done;
    int rc = fetch_file(h, p, f, e);
    h->prog.done = done; /* counted again when the whole model is fetched */
    h->prog.file = NULL;
    if (rc < 0) return rc;
    if (!(*blob = bs_strfmt("%s/blobs/%s", p->repo_dir, f->etag))) return bs_fail(e, BS_ENOMEM, "out of memory");
    return BS_OK;
}

/* Bytes still to write: each missing file less what an earlier run left. */
static uint64_t bytes_to_write(const bs_hub_plan *p) {
    uint64_t need = 0;
    for (size_t i = 0; i < p->n_files; i++) {
        const bs_hub_file *f = &p->files[i];
        if (f->have) continue;
        char *tmp = bs_strfmt("%s/blobs/%s.incomplete", p->repo_dir, f->etag);
        struct stat st;
        uint64_t part = tmp && stat(tmp, &st) == 0 && (uint64_t)st.st_size <= f->size ? (uint64_t)st.st_size : 0;
        need = add_sat(need, f->size - part);
        free(tmp);
    }
    return need;
}

static void show_bytes(uint64_t v, char *out, size_t cap) {
    if (v >= 1000000000ULL) snprintf(out, cap, "%.2f GB", (double)v / 1e9);
    else if (v >= 1000000ULL) snprintf(out, cap, "%.1f MB", (double)v / 1e6);
    else snprintf(out, cap, "%.1f kB", (double)v / 1e3);
}

int bs_hub_fetch(bs_hub *h, bs_hub_plan *p, char **dir, bs_err *e) {
    *dir = NULL;
    int rc = BS_OK;
    char shown[300], a[32], b[32];
    bs_hub_ref_show(&p->ref, shown, sizeof shown);
    hold_repo(h, p);
    for (size_t i = 0; i < p->n_files; i++) p->files[i].have = blob_present(p->repo_dir, &p->files[i]);
    uint64_t need = bytes_to_write(p), missing = 0;
    int n_missing = 0;
    for (size_t i = 0; i < p->n_files; i++)
        if (!p->files[i].have) missing = add_sat(missing, p->files[i].size), n_missing++;
    if (need) {
        const char *skip = getenv("BASAL_SKIP_DISK_CHECK");
        int64_t free_b = bs_hub_free_bytes(p->repo_dir);
        if (!(skip && !strcmp(skip, "1")) && free_b >= 0 && (uint64_t)free_b < need) {
            show_bytes(need, a, sizeof a);
            show_bytes((uint64_t)free_b, b, sizeof b);
            return bs_fail(e, BS_EIO,
                           "not enough disk space for %s: %s to download, %s free in %s; free some space or set "
                           "HF_HUB_CACHE to a larger disk (nothing was downloaded)",
                           shown, a, b, h->env->cache);
        }
        show_bytes(missing, a, sizeof a);
        bs_log(BS_LOG_INFO, "hub", "%s: %d of %zu files, %s to download from %s into %s", shown, n_missing, p->n_files, a,
               h->env->endpoint, p->repo_dir);
    }
    memset(&h->prog, 0, sizeof h->prog);
    h->prog.repo = p->ref.repo;
    h->prog.total = missing;
    h->prog.files_total = n_missing;
    double t0 = bs_now_ms();
    report(h);
    for (size_t i = 0; i < p->n_files && rc == BS_OK; i++) {
        if (p->files[i].have) continue;
        rc = fetch_file(h, p, &p->files[i], e);
        if (rc == BS_OK) h->prog.files_done++;
        report(h);
    }
    h->prog.file = NULL;
    if (rc < 0) return rc;
    /* every blob is there: only now the snapshot is linked, then the ref;
     * refs/ exists even when no ref is written (@huggingface/hub's
     * scanCacheDir skips a repository without it) */
    char *refs = bs_strfmt("%s/refs", p->repo_dir);
    rc = refs ? bs_hub_mkdir_p(refs, e) : bs_fail(e, BS_ENOMEM, "out of memory");
    free(refs);
    for (size_t i = 0; i < p->n_files && rc == BS_OK; i++)
        rc = bs_hub_link(p->repo_dir, p->commit, p->files[i].path, p->files[i].etag, e);
    if (rc == BS_OK && strcmp(p->ref.rev, p->commit) && strncmp(p->commit, p->ref.rev, strlen(p->ref.rev)))
        rc = bs_hub_write_ref(p->repo_dir, p->ref.rev, p->commit, e);
    if (rc < 0) return rc;
    if (!(*dir = bs_strfmt("%s/snapshots/%s", p->repo_dir, p->commit))) return bs_fail(e, BS_ENOMEM, "out of memory");
    if (missing) {
        double s = (bs_now_ms() - t0) / 1e3;
        uint64_t fresh = h->prog.done > h->prog.resumed ? h->prog.done - h->prog.resumed : 0;
        show_bytes(fresh, a, sizeof a);
        show_bytes(s > 0 ? (uint64_t)((double)fresh / s) : 0, b, sizeof b);
        bs_log(BS_LOG_INFO, "hub", "%s: downloaded %s in %.1f s (%s/s) into %s", shown, a, s, b, *dir);
    }
    return BS_OK;
}
