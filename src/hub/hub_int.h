/* Internals shared by the files of src/hub (not part of hub.h's contract). */
#ifndef BS_HUB_INT_H
#define BS_HUB_INT_H

#include <stddef.h>
#include <stdint.h>

#include "basal.h"
#include "hub/hub.h"

/* ---- hub_ref.c ---- */

/* Overwrites the NUL-terminated s (a token, or a header holding one) with
 * zeros before it is freed; NULL is fine. */
void bs_hub_wipe(char *s);

/* ---- hub_pull.c ---- */

/* The files of a listing (/api/models/<repo>/tree/<commit>). */
typedef struct bs_hub_files {
    bs_hub_file *v;
    size_t n, cap;
} bs_hub_files;
/* Adds the top-level files of one page of the listing (a JSON array) to f;
 * an entry without a valid size or etag (40 hex, 64 for LFS) is an error
 * naming url. */
int bs_hub_listing_page(bs_hub_files *f, const char *json, size_t len, const char *url, bs_err *e);
void bs_hub_files_free(bs_hub_files *f);
void bs_hub_set_progress(bs_hub *h, bs_hub_progress_fn fn, void *ud);
/* Questions to the Hub about a revision (not file downloads) are not
 * retried when quick is set: a cached copy is then used at once, as
 * huggingface_hub falls back to its cache without retrying. */
void bs_hub_set_quick(bs_hub *h, int quick);

/* ---- hub_cache.c ---- */

/* mkdir -p that another process may be running at the same moment. */
int bs_hub_mkdir_p(const char *path, bs_err *e);

/* The first file a snapshot directory lacks for a whole model (a dangling
 * link counts as missing), malloc'd; NULL when it lacks none (or out of
 * memory: *oom is then set). */
char *bs_hub_snapshot_missing(const char *dir, int *oom);
/* snapshots/<commit>/<path> -> ../../blobs/<etag>, replacing atomically
 * whatever link was there. */
int bs_hub_link(const char *repo_dir, const char *commit, const char *path, const char *etag, bs_err *e);
/* refs/<rev> = commit, written atomically (a temporary file renamed). */
int bs_hub_write_ref(const char *repo_dir, const char *rev, const char *commit, bs_err *e);
/* The commit refs/<rev> holds, malloc'd; NULL when none. */
char *bs_hub_read_ref(const char *repo_dir, const char *rev);

/* An exclusive lock on <cache>/.locks/models--o--n/<etag>.lock, the file
 * huggingface_hub locks for the same blob (flock), so that basal-c and the
 * Python tools never write one blob at once. Waits (polling, so that
 * cancel() can stop the wait) and says once that it waits. */
typedef int (*bs_hub_cancel_fn)(void *ud);
int bs_hub_lock(const bs_hub_env *env, const char *repo, const char *etag, const char *what, bs_hub_cancel_fn cancel,
                void *ud, int *fd, bs_err *e);
void bs_hub_unlock(int fd);
/* The repository's pull lock, <cache>/.locks/models--o--n/.pull.lock (a dot
 * name: not a blob's). A pull holds it shared from its first write to the
 * end of its plan (bs_hub_plan_free), between blobs too; `models rm` takes
 * it exclusive without waiting, so that it never removes a repository under
 * a pull, and holds it while it removes. 1 with *fd held; 0 (exclusive only)
 * when a pull holds it; BS_EIO. */
int bs_hub_repo_lock(const bs_hub_env *env, const char *repo, int exclusive, int *fd, bs_err *e);


/* ---- hub_http.c ---- */

typedef struct bs_hub_http bs_hub_http;

/* The headers of an answer that the Hub's protocol gives meaning to. */
typedef struct bs_hub_resp {
    long status;
    char error_code[64];      /* X-Error-Code */
    char error_message[512];  /* X-Error-Message */
    char repo_commit[64];     /* X-Repo-Commit */
    char etag[160];           /* ETag, normalised (W/ and quotes removed) */
    char linked_etag[160];    /* X-Linked-Etag, normalised */
    long long linked_size;    /* X-Linked-Size, -1 when absent */
    long long content_length; /* -1 when absent */
    long long range_start, range_total; /* Content-Range: bytes a-b/N (-1 when absent) */
    char location[8192];      /* empty when it does not fit: never a URL cut short (a CDN's signed */
    char next[8192];          /* URLs run past 1 kB); Link: <...>; rel="next", the same */
    long retry_after;         /* seconds, -1 when absent */
    long ratelimit_reset;     /* RateLimit: "...";r=0;t=N (none left, N seconds to wait); -1 otherwise */
    char *body;               /* the body of a request made with bs_hub_http_get, NUL-terminated */
    size_t body_len;
} bs_hub_resp;

/* A sink for a download's body: called with each piece; nonzero stops. */
typedef int (*bs_hub_sink)(void *ud, const char *data, size_t n);

typedef struct bs_hub_req {
    const char *method;       /* "GET" or "HEAD" */
    const char *url;
    int auth;                 /* send the token (only ever to the endpoint's origin) */
    long long range_from;     /* > 0: Range: bytes=N- */
    bs_hub_sink sink;         /* NULL: the body is kept in resp.body (API answers; at most 64 MiB) */
    void *sink_ud;
} bs_hub_req;

int bs_hub_http_open(bs_hub_http **out, const bs_hub_env *env, bs_hub_cancel_fn cancel, void *ud, bs_err *e);
void bs_hub_http_close(bs_hub_http *h);
/* One request, no retry and no redirect followed. Returns BS_OK when an
 * answer arrived (any status; resp filled), or BS_EIO for a transport
 * failure (*transport: 2 no connection could be made, 1 cut or stalled; e
 * says what). */
int bs_hub_http_do(bs_hub_http *h, const bs_hub_req *rq, bs_hub_resp *resp, int *transport, bs_err *e);
void bs_hub_resp_free(bs_hub_resp *r);
/* One header line of an answer (or its status line) into r: what the
 * Hub's protocol reads from it; anything else is ignored. */
void bs_hub_header_line(bs_hub_resp *r, const char *line, size_t n);
/* Empties r's fields, keeping its body. */
void bs_hub_resp_reset(bs_hub_resp *r);
/* Whether url is on the endpoint's origin (scheme, host and port). */
int bs_hub_http_same_origin(const bs_hub_http *h, const char *url);
/* url without its query (a CDN's signed URL carries credentials there),
 * for messages. */
void bs_hub_url_shown(const char *url, char *out, size_t cap);
/* A Location or Link that is an absolute path ('/'...), on the scheme, host
 * and port of the request's url (huggingface_hub's relative redirects: the
 * endpoint's own path, e.g. a mirror's /prefix, is not kept); malloc'd. */
char *bs_hub_url_join(const char *url, const char *path);
/* url percent-encoded as a path segment (safe=""), appended to b. */
struct bs_buf;
void bs_hub_url_segment(struct bs_buf *b, const char *s, int keep_slash);

#endif
