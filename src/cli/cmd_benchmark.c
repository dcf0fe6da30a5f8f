/* `basal benchmark` (spec 06 §7.5, the method of basal-rs's benchmark): HTTP
 * load through the real server. It starts `basal serve` on a loopback port
 * (or measures --url: a running server or a load balancer), checks the RAM
 * against the weights, warms up, then runs each workload as closed-loop
 * phases over a concurrency sweep, sampling memory and CPU every 200 ms, and
 * writes a JSON report, an HTML report and a text summary. */
#include <curl/curl.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/utsname.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "basal.h"
#include "cli/bench_report.h"
#include "cli/cli.h"
#include "cli/client.h"
#include "core/respjson.h"

#ifndef BS_BUILD_CFLAGS
#define BS_BUILD_CFLAGS "-O2 -ffp-contract=off -fno-fast-math"
#endif

typedef struct {
    char *id;
    int cls, questions;
    char *body;
    size_t len;
    int skipped;        /* over the context limit: left out of later phases */
    char *first_answer; /* "answers" of its first success */
} bm_request;

typedef struct {
    bm_request *r;
    size_t n;
} bm_requests;

typedef struct {
    const char *model_dir, *url, *model_name, *out, *html, *scenario, *workload_dir;
    const char *requests[8];
    int n_requests, warmup, timeout_ms, max_requests, threads, max_inflight, json;
    int conc[32], n_conc;
    double ram_reserve_gib;
} bm_opts;

static volatile sig_atomic_t g_stop;
static void on_sigint(int sig) {
    (void)sig;
    g_stop = 1;
}

static int usage_error(const char *msg) {
    fprintf(stderr, "basal benchmark: %s\n", msg);
    return 2;
}

/* ---- workloads ---- */

static int class_index(bm_workload *w, const char *name) {
    for (int i = 0; i < w->n_classes; i++)
        if (!strcmp(w->classes[i], name)) return i;
    if (w->n_classes == BM_MAX_CLASSES) return -1;
    w->classes[w->n_classes] = strdup(name);
    return w->classes[w->n_classes] ? w->n_classes++ : -1;
}

static int cmp_str(const void *a, const void *b) {
    const bm_request *x = a, *y = b;
    if (x->len != y->len) return x->len < y->len ? -1 : 1;
    return memcmp(x->body, y->body, x->len);
}

/* Reads a v2 workload file; the model goes where the request has none or null. */
static int load_workload(const char *path, const char *model, bm_workload *w, bm_requests *rq) {
    char *text;
    size_t len;
    bs_err e = {0};
    if (bs_read_file(path, &text, &len, &e) != 0) {
        fprintf(stderr, "basal benchmark: %s\n", e.msg);
        return -1;
    }
    const char *slash = strrchr(path, '/');
    const char *base = slash ? slash + 1 : path;
    size_t bl = strcspn(base, ".");
    w->name = strndup(base, bl);
    w->path = strdup(path);
    int rc = 0;
    size_t lineno = 0;
    for (char *p = text; *p && !rc;) {
        char *nl = strchr(p, '\n');
        size_t n = nl ? (size_t)(nl - p) : strlen(p);
        lineno++;
        bj_value *v = NULL;
        if (n && !(n == 1 && p[0] == '\r')) {
            if (bj_parse(p, n, NULL, &v, &e) != 0) {
                fprintf(stderr, "basal benchmark: %s:%zu: %s\n", path, lineno, e.msg);
                rc = -1;
                break;
            }
            const bj_value *req = bj_get(v, "request"), *id = bj_get(v, "id"), *cl = bj_get(v, "class");
            const bj_value *qs = req ? bj_get(req, "questions") : NULL;
            if (!req || req->type != BJ_OBJECT || !qs || qs->type != BJ_OBJECT) {
                fprintf(stderr, "basal benchmark: %s:%zu: a line needs \"request\" with \"questions\"\n", path, lineno);
                bj_free(v);
                rc = -1;
                break;
            }
            bm_request r = {0};
            bs_buf b;
            bs_buf_init(&b);
            bs_buf_putc(&b, '{');
            int have_model = 0;
            for (size_t i = 0; i < req->n; i++) {
                if (i) bs_buf_putc(&b, ',');
                bj_put_string(&b, req->keys[i], req->key_lens[i]);
                bs_buf_putc(&b, ':');
                if (req->key_lens[i] == 5 && !memcmp(req->keys[i], "model", 5)) {
                    have_model = 1;
                    if (req->items[i]->type == BJ_NULL) {
                        bj_put_string(&b, model, strlen(model));
                        continue;
                    }
                }
                bs_resp_value(&b, req->items[i]);
            }
            if (!have_model) {
                bs_buf_puts(&b, req->n ? ",\"model\":" : "\"model\":");
                bj_put_string(&b, model, strlen(model));
            }
            bs_buf_putc(&b, '}');
            r.body = b.data;
            r.len = b.len;
            r.questions = (int)qs->n;
            r.id = id && id->type == BJ_STRING ? strndup(id->str, id->len) : bs_strfmt("%zu", lineno);
            /* no class: by payload size, as basal-rs's sequential set */
            const char *cname = cl && cl->type == BJ_STRING ? cl->str
                              : b.len <= 2048 ? "payload-le-2k" : b.len <= 16384 ? "payload-2k-16k" : "payload-gt-16k";
            r.cls = class_index(w, cname);
            bj_free(v);
            if (b.oom || !r.id || r.cls < 0) {
                fprintf(stderr, "basal benchmark: %s:%zu: out of memory or more than %d classes\n", path, lineno,
                        BM_MAX_CLASSES);
                bs_buf_free(&b);
                free(r.id);
                rc = -1;
                break;
            }
            bm_request *grown = realloc(rq->r, (rq->n + 1) * sizeof *grown);
            if (!grown) {
                bs_buf_free(&b);
                free(r.id);
                rc = -1;
                break;
            }
            rq->r = grown;
            rq->r[rq->n++] = r;
            w->requests++;
            w->questions += (size_t)r.questions;
        }
        p = nl ? nl + 1 : p + n;
    }
    free(text);
    if (!rc && rq->n == 0) {
        fprintf(stderr, "basal benchmark: %s: no requests\n", path);
        rc = -1;
    }
    if (!rc) {
        bm_request *copy = malloc(rq->n * sizeof *copy);
        if (copy) {
            memcpy(copy, rq->r, rq->n * sizeof *copy);
            qsort(copy, rq->n, sizeof *copy, cmp_str);
            w->unique_payloads = rq->n ? 1 : 0;
            for (size_t i = 1; i < rq->n; i++) w->unique_payloads += cmp_str(&copy[i - 1], &copy[i]) != 0;
            free(copy);
        }
    }
    return rc;
}

/* ---- machine and process sampling ---- */

static double meminfo_kib(const char *key) {
    FILE *f = fopen("/proc/meminfo", "r");
    if (!f) return NAN;
    char line[256];
    double v = NAN;
    size_t kl = strlen(key);
    while (fgets(line, sizeof line, f))
        if (!strncmp(line, key, kl) && line[kl] == ':') {
            v = strtod(line + kl + 1, NULL);
            break;
        }
    fclose(f);
    return v;
}

static double proc_rss_mib(pid_t pid) {
    char path[64], line[256];
    snprintf(path, sizeof path, "/proc/%d/status", (int)pid);
    FILE *f = fopen(path, "r");
    if (!f) return NAN;
    double v = NAN;
    while (fgets(line, sizeof line, f))
        if (!strncmp(line, "VmRSS:", 6)) {
            v = strtod(line + 6, NULL) / 1024.0;
            break;
        }
    fclose(f);
    return v;
}

/* user + system CPU seconds of a process */
static double proc_cpu_s(pid_t pid) {
    char path[64], buf[1024];
    snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
    FILE *f = fopen(path, "r");
    if (!f) return NAN;
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = 0;
    char *p = strrchr(buf, ')');  /* the command name may hold spaces */
    if (!p) return NAN;
    unsigned long long ut = 0, st = 0;
    /* after ") ": state(3) ... utime is field 14, stime 15 */
    if (sscanf(p + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %llu %llu", &ut, &st) != 2) return NAN;
    return (double)(ut + st) / (double)sysconf(_SC_CLK_TCK);
}

static void machine_info(bm_report *r) {
    FILE *f = fopen("/proc/cpuinfo", "r");
    char line[512];
    snprintf(r->cpu_model, sizeof r->cpu_model, "unknown");
    if (f) {
        while (fgets(line, sizeof line, f))
            if (!strncmp(line, "model name", 10)) {
                char *c = strchr(line, ':');
                if (c) {
                    c += 1 + (c[1] == ' ');
                    c[strcspn(c, "\n")] = 0;
                    snprintf(r->cpu_model, sizeof r->cpu_model, "%s", c);
                }
                break;
            }
        fclose(f);
    }
    r->cpus = (int)sysconf(_SC_NPROCESSORS_ONLN);
    r->mem_total_gib = meminfo_kib("MemTotal") / 1048576.0;
    struct utsname u;
    if (uname(&u) == 0) snprintf(r->kernel, sizeof r->kernel, "%.30s %.60s %.20s", u.sysname, u.release, u.machine);
    r->version = BASAL_VERSION;
#ifdef __VERSION__
    r->compiler = "cc " __VERSION__;
#else
    r->compiler = "cc";
#endif
    r->cflags = BS_BUILD_CFLAGS;
    time_t now = time(NULL);
    struct tm tm;
    gmtime_r(&now, &tm);
    strftime(r->started_at, sizeof r->started_at, "%Y-%m-%dT%H:%M:%SZ", &tm);
}

static double checkpoint_bytes(const char *dir) {
    DIR *d = opendir(dir);
    if (!d) return 0;
    double total = 0;
    struct dirent *de;
    while ((de = readdir(d))) {
        size_t n = strlen(de->d_name);
        if (n < 12 || strcmp(de->d_name + n - 12, ".safetensors")) continue;
        char *p = bs_path_join(dir, de->d_name);
        struct stat st;
        if (p && stat(p, &st) == 0) total += (double)st.st_size;
        free(p);
    }
    closedir(d);
    return total;
}

/* ---- HTTP helpers ---- */

typedef struct {
    CURL *h;
    bs_buf resp;
    size_t req;
    double t0, queue_ms, compute_ms;
    int batch, busy;
    char errbuf[CURL_ERROR_SIZE];
} bm_conn;

static size_t on_body(char *p, size_t size, size_t n, void *ud) {
    bs_buf *b = ud;
    bs_buf_put(b, p, size * n);
    return b->oom ? 0 : size * n;
}

static size_t on_header(char *p, size_t size, size_t n, void *ud) {
    bm_conn *c = ud;
    size_t len = size * n;
    char tmp[64];
    if (len < sizeof tmp) {
        memcpy(tmp, p, len);
        tmp[len] = 0;
        if (!strncasecmp(tmp, "x-basal-queue-ms:", 17)) c->queue_ms = strtod(tmp + 17, NULL);
        else if (!strncasecmp(tmp, "x-basal-compute-ms:", 19)) c->compute_ms = strtod(tmp + 19, NULL);
        else if (!strncasecmp(tmp, "x-basal-batch-requests:", 23)) c->batch = atoi(tmp + 23);
    }
    return len;
}

/* A blocking GET or POST; returns the status (0 on a transport error), body in *out. */
static long http_once(const char *url, const char *body, size_t len, long timeout_ms, bs_buf *out) {
    CURL *h = curl_easy_init();
    if (!h) return 0;
    struct curl_slist *hd = curl_slist_append(NULL, "Content-Type: application/json");
    curl_easy_setopt(h, CURLOPT_URL, url);
    curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(h, CURLOPT_TIMEOUT_MS, timeout_ms);
    curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, on_body);
    curl_easy_setopt(h, CURLOPT_WRITEDATA, out);
    if (body) {
        curl_easy_setopt(h, CURLOPT_HTTPHEADER, hd);
        curl_easy_setopt(h, CURLOPT_POSTFIELDS, body);
        curl_easy_setopt(h, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)len);
    }
    long status = 0;
    if (curl_easy_perform(h) == CURLE_OK) curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &status);
    curl_slist_free_all(hd);
    curl_easy_cleanup(h);
    return status;
}

/* Sums of basal_input_tokens_total and basal_forward_tokens_total; 0 if /metrics answered. */
static int scrape_tokens(const char *base, double *input, double *forward) {
    char *url = bs_strfmt("%s/metrics", base);
    bs_buf b;
    bs_buf_init(&b);
    long st = url ? http_once(url, NULL, 0, 10000, &b) : 0;
    free(url);
    *input = *forward = 0;
    if (st != 200 || !b.data) {
        bs_buf_free(&b);
        return -1;
    }
    for (char *line = b.data; line && *line;) {
        char *nl = strchr(line, '\n');
        const char *names[] = {"basal_input_tokens_total", "basal_forward_tokens_total"};
        for (int k = 0; k < 2; k++) {
            size_t n = strlen(names[k]);
            if (!strncmp(line, names[k], n) && (line[n] == '{' || line[n] == ' ')) {
                char *sp = nl ? memrchr(line, ' ', (size_t)(nl - line)) : strrchr(line, ' ');
                if (sp) *(k ? forward : input) += strtod(sp + 1, NULL);
            }
        }
        line = nl ? nl + 1 : NULL;
    }
    bs_buf_free(&b);
    return 0;
}

/* ---- server ---- */

typedef struct {
    pid_t pid;
    char log[64];
    int port;
    double ready_s;
} bm_server;

static int start_server(const bm_opts *o, bm_server *s, char **argv_text) {
    snprintf(s->log, sizeof s->log, "/tmp/basal-benchmark-XXXXXX");
    int fd = mkstemp(s->log);
    if (fd < 0) return fprintf(stderr, "basal benchmark: temporary file: %s\n", strerror(errno)), -1;
    char threads[32], inflight[32];
    const char *argv[16];
    int n = 0;
    argv[n++] = "basal";
    argv[n++] = "serve";
    argv[n++] = "--model";
    argv[n++] = o->model_dir;
    argv[n++] = "--addr";
    argv[n++] = "127.0.0.1:0";
    argv[n++] = "--metrics";
    if (o->threads > 0) {
        snprintf(threads, sizeof threads, "%d", o->threads);
        argv[n++] = "--threads";
        argv[n++] = threads;
    }
    if (o->max_inflight > 0) {
        snprintf(inflight, sizeof inflight, "%d", o->max_inflight);
        argv[n++] = "--max-inflight";
        argv[n++] = inflight;
    }
    argv[n] = NULL;
    bs_buf t;
    bs_buf_init(&t);
    for (int i = 0; i < n; i++) bs_buf_printf(&t, "%s%s", i ? " " : "", argv[i]);
    *argv_text = t.data;
    s->pid = fork();
    if (s->pid < 0) return close(fd), fprintf(stderr, "basal benchmark: fork: %s\n", strerror(errno)), -1;
    if (s->pid == 0) {
        int null = open("/dev/null", O_RDWR);
        dup2(null, 0);
        dup2(null, 1);
        dup2(fd, 2);
        signal(SIGINT, SIG_IGN);  /* the benchmark stops its server itself */
        execv("/proc/self/exe", (char **)argv);
        _exit(127);
    }
    close(fd);
    double t0 = bs_now_ms();
    while (bs_now_ms() - t0 < 600000 && !g_stop) {
        char *text;
        size_t len;
        bs_err e = {0};
        if (bs_read_file(s->log, &text, &len, &e) == 0) {
            const char *m = strstr(text, "serving on http://127.0.0.1:");
            if (m && strchr(m, '\n')) {
                s->port = atoi(m + 28);
                const char *r = strstr(m, "(ready ");
                s->ready_s = r ? strtod(r + 7, NULL) : NAN;
                free(text);
                return 0;
            }
            free(text);
        }
        int status;
        if (waitpid(s->pid, &status, WNOHANG) == s->pid) {
            s->pid = 0;
            fprintf(stderr, "basal benchmark: the server exited before it was ready; its log (%s):\n", s->log);
            if (bs_read_file(s->log, &text, &len, &e) == 0) {
                fputs(text, stderr);
                free(text);
            }
            return -1;
        }
        usleep(20000);
    }
    fprintf(stderr, "basal benchmark: the server was not ready in time (log %s)\n", s->log);
    return -1;
}

static void stop_server(bm_server *s) {
    if (s->pid > 0) {
        kill(s->pid, SIGTERM);
        for (int i = 0; i < 600; i++) {
            if (waitpid(s->pid, NULL, WNOHANG) == s->pid) {
                s->pid = 0;
                break;
            }
            usleep(50000);
        }
        if (s->pid > 0) {
            kill(s->pid, SIGKILL);
            waitpid(s->pid, NULL, 0);
        }
    }
    if (s->log[0]) unlink(s->log);
}

/* ---- phases ---- */

static void add_status(bm_phase *p, int code) {
    for (int i = 0; i < p->n_codes; i++)
        if (p->codes[i] == code) {
            p->code_counts[i]++;
            return;
        }
    if (p->n_codes < BM_MAX_STATUS) {
        p->codes[p->n_codes] = code;
        p->code_counts[p->n_codes++] = 1;
    }
}

static char *answers_of(const char *body, size_t len) {
    bj_value *v = NULL;
    bs_err e = {0};
    if (bj_parse(body, len, NULL, &v, &e) != 0) return NULL;
    const bj_value *a = bj_get(v, "answers");
    char *out = NULL;
    if (a && a->type == BJ_OBJECT) {
        bs_buf b;
        bs_buf_init(&b);
        bs_resp_value(&b, a);
        out = b.oom ? (bs_buf_free(&b), NULL) : b.data;
    }
    bj_free(v);
    return out;
}

/* Records one finished request into the phase; sets stop_reason on a stopping error. */
static void finish_request(bm_phase *p, bm_workload *w, bm_requests *rq, bm_conn *c, CURLcode rc) {
    bm_request *r = &rq->r[c->req];
    double lat = bs_now_ms() - c->t0;
    long status = 0;
    if (rc == CURLE_OK) curl_easy_getinfo(c->h, CURLINFO_RESPONSE_CODE, &status);
    if (status == 422 && c->resp.data && strstr(c->resp.data, "\"prompt_too_long\"")) {
        /* over the model's context: skipped whole, reported, never truncated */
        if (!r->skipped) w->skipped_too_long++;
        r->skipped = 1;
        p->skipped_too_long++;
        return;
    }
    if (p->n == p->cap) {
        size_t cap = p->cap ? p->cap * 2 : 256;
        bm_sample *s = realloc(p->s, cap * sizeof *s);
        if (!s) {
            snprintf(p->stop_reason, sizeof p->stop_reason, "out of memory");
            return;
        }
        p->s = s;
        p->cap = cap;
    }
    bm_sample *s = &p->s[p->n++];
    *s = (bm_sample){.lat_ms = lat, .queue_ms = c->queue_ms, .compute_ms = c->compute_ms, .status = (int)status,
                     .batch = c->batch, .cls = r->cls, .payload_bytes = (int)r->len};
    add_status(p, (int)status);
    if (rc != CURLE_OK) {
        p->errors++;
        p->transport++;
        snprintf(p->stop_reason, sizeof p->stop_reason, "transport error: %.120s",
                 c->errbuf[0] ? c->errbuf : curl_easy_strerror(rc));
        return;
    }
    if (status == 200) {
        char *ans = answers_of(c->resp.data ? c->resp.data : "", c->resp.len);
        if (!ans) {
            p->errors++;
            p->invalid++;
            snprintf(p->stop_reason, sizeof p->stop_reason, "invalid response to %s", r->id);
            return;
        }
        p->completed++;
        s->questions = r->questions;
        if (!r->first_answer) r->first_answer = ans;
        else {
            p->answer_changes += strcmp(r->first_answer, ans) != 0;
            free(ans);
        }
        return;
    }
    p->errors++;
    if (status == 529) p->overloaded++;
    else if (status >= 500) snprintf(p->stop_reason, sizeof p->stop_reason, "HTTP %ld for %s", status, r->id);
}

static void sample_resources(bm_phase *p, pid_t pid, double swap0) {
    double avail = meminfo_kib("MemAvailable") / 1024.0;
    double swap = (meminfo_kib("SwapTotal") - meminfo_kib("SwapFree")) / 1024.0;
    if (isfinite(avail) && (p->n_samples == 0 || avail < p->min_avail_mib)) p->min_avail_mib = avail;
    if (isfinite(swap) && swap - swap0 > p->swap_growth_mib) p->swap_growth_mib = swap - swap0;
    if (pid > 0) {
        double rss = proc_rss_mib(pid);
        if (isfinite(rss)) {
            p->rss_known = 1;
            if (rss > p->peak_rss_mib) p->peak_rss_mib = rss;
        }
    }
    p->n_samples++;
}

static void run_phase(const bm_opts *o, const char *base, pid_t pid, bm_workload *w, bm_requests *rq, bm_phase *p,
                      int progress) {
    char *url = bs_strfmt("%s/v1/systemone", base);
    struct curl_slist *hd = curl_slist_append(NULL, "Content-Type: application/json");
    hd = curl_slist_append(hd, "Expect:");
    CURLM *multi = curl_multi_init();
    bm_conn *conns = calloc((size_t)p->concurrency, sizeof *conns);
    size_t *order = malloc(rq->n * sizeof *order), total = 0, next = 0;
    if (!url || !hd || !multi || !conns || !order) {
        snprintf(p->stop_reason, sizeof p->stop_reason, "out of memory");
        goto out;
    }
    for (size_t i = 0; i < rq->n; i++)
        if (!rq->r[i].skipped) order[total++] = i;
    if (o->max_requests > 0 && total > (size_t)o->max_requests) total = (size_t)o->max_requests;
    double tok_in0 = 0, tok_fw0 = 0, tok_in1, tok_fw1;
    p->tokens_known = scrape_tokens(base, &tok_in0, &tok_fw0) == 0;
    double swap0 = (meminfo_kib("SwapTotal") - meminfo_kib("SwapFree")) / 1024.0;
    double cpu0 = pid > 0 ? proc_cpu_s(pid) : NAN;
    double t0 = bs_now_ms(), last_sample = 0, last_progress = 0;
    int in_flight = 0;
    sample_resources(p, pid, swap0);
    for (;;) {
        int stopping = p->stop_reason[0] || g_stop;
        for (int i = 0; i < p->concurrency && !stopping && next < total; i++) {
            bm_conn *c = &conns[i];
            if (c->busy) continue;
            if (!c->h) {
                c->h = curl_easy_init();
                bs_buf_init(&c->resp);
                curl_easy_setopt(c->h, CURLOPT_URL, url);
                curl_easy_setopt(c->h, CURLOPT_HTTPHEADER, hd);
                curl_easy_setopt(c->h, CURLOPT_NOSIGNAL, 1L);
                curl_easy_setopt(c->h, CURLOPT_TIMEOUT_MS, (long)o->timeout_ms);
                curl_easy_setopt(c->h, CURLOPT_WRITEFUNCTION, on_body);
                curl_easy_setopt(c->h, CURLOPT_WRITEDATA, &c->resp);
                curl_easy_setopt(c->h, CURLOPT_HEADERFUNCTION, on_header);
                curl_easy_setopt(c->h, CURLOPT_HEADERDATA, c);
                curl_easy_setopt(c->h, CURLOPT_ERRORBUFFER, c->errbuf);
                curl_easy_setopt(c->h, CURLOPT_PRIVATE, c);
            }
            c->req = order[next++];
            curl_easy_setopt(c->h, CURLOPT_POSTFIELDS, rq->r[c->req].body);
            curl_easy_setopt(c->h, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)rq->r[c->req].len);
            c->resp.len = 0;
            c->queue_ms = c->compute_ms = -1;
            c->batch = 0;
            c->errbuf[0] = 0;
            c->t0 = bs_now_ms();
            c->busy = 1;
            curl_multi_add_handle(multi, c->h);
            in_flight++;
        }
        if (in_flight == 0 && (next >= total || stopping)) break;
        int running;
        curl_multi_perform(multi, &running);
        CURLMsg *m;
        int left;
        while ((m = curl_multi_info_read(multi, &left))) {
            if (m->msg != CURLMSG_DONE) continue;
            bm_conn *c = NULL;
            curl_easy_getinfo(m->easy_handle, CURLINFO_PRIVATE, (char **)&c);
            CURLcode rc = m->data.result;
            curl_multi_remove_handle(multi, c->h);
            c->busy = 0;
            in_flight--;
            finish_request(p, w, rq, c, rc);
        }
        double now = bs_now_ms();
        if (now - last_sample >= 200) {
            sample_resources(p, pid, swap0);
            last_sample = now;
        }
        if (progress && now - last_progress >= 500) {
            double el = (now - t0) / 1000;
            fprintf(stderr, "\r\033[Kbenchmark: %s c=%d: %zu/%zu  %.1f req/s", w->name, p->concurrency, p->n, total,
                    el > 0 ? p->completed / el : 0);
            last_progress = now;
        }
        curl_multi_poll(multi, NULL, 0, 50, NULL);
    }
    p->wall_s = (bs_now_ms() - t0) / 1000.0;
    sample_resources(p, pid, swap0);
    if (pid > 0 && isfinite(cpu0)) {
        double cpu1 = proc_cpu_s(pid);
        p->mean_cpu_cores = p->wall_s > 0 && isfinite(cpu1) ? (cpu1 - cpu0) / p->wall_s : NAN;
    }
    if (p->tokens_known && scrape_tokens(base, &tok_in1, &tok_fw1) == 0) {
        p->input_tokens = tok_in1 - tok_in0;
        p->forward_tokens = tok_fw1 - tok_fw0;
    } else {
        p->tokens_known = 0;
    }
    if (g_stop && !p->stop_reason[0]) snprintf(p->stop_reason, sizeof p->stop_reason, "interrupted");
out:
    if (conns) {
        for (int i = 0; i < p->concurrency; i++) {
            if (conns[i].h) {
                if (conns[i].busy) curl_multi_remove_handle(multi, conns[i].h);
                curl_easy_cleanup(conns[i].h);
            }
            bs_buf_free(&conns[i].resp);
        }
        free(conns);
    }
    if (multi) curl_multi_cleanup(multi);
    curl_slist_free_all(hd);
    free(order);
    free(url);
}

/* Unmeasured: the first `warmup` requests of each class, one at a time. */
static void warm_up(const bm_opts *o, const char *base, bm_workload *w, bm_requests *rq) {
    char *url = bs_strfmt("%s/v1/systemone", base);
    if (!url) return;
    for (int c = 0; c < w->n_classes && !g_stop; c++) {
        int done = 0;
        for (size_t i = 0; i < rq->n && done < o->warmup; i++) {
            if (rq->r[i].cls != c) continue;
            bs_buf b;
            bs_buf_init(&b);
            long st = http_once(url, rq->r[i].body, rq->r[i].len, o->timeout_ms, &b);
            if (st == 422 && b.data && strstr(b.data, "\"prompt_too_long\"")) {
                if (!rq->r[i].skipped) w->skipped_too_long++;
                rq->r[i].skipped = 1;
            } else {
                done++;
            }
            bs_buf_free(&b);
        }
    }
    free(url);
}

/* ---- options and main ---- */

static int parse_list(const char *s, int *out, int *n, int max) {
    *n = 0;
    while (*s) {
        char *end;
        long v = strtol(s, &end, 10);
        if (end == s || v < 1 || v > 4096 || *n == max) return -1;
        out[(*n)++] = (int)v;
        s = end;
        if (*s == ',') s++;
        else if (*s) return -1;
    }
    return *n ? 0 : -1;
}

const cli_doc cli_doc_benchmark = {
    "benchmark", "(--model DIR | --url URL) [options]",
    "HTTP load through the real server: warm-up, closed-loop phases over a concurrency sweep, reports",
    "With --model the server is `basal serve --model DIR` on a loopback port (with --metrics).\n"
    "Output files must not exist. Progress goes to stderr; the text summary (or --json) to stdout.\n",
};

static int requests_opt(void *dst, const char *flag, const char *v) {
    bm_opts *o = dst;
    if (o->n_requests == 8) return usage_error("at most 8 --requests files");
    o->requests[o->n_requests++] = v;
    return 0;
}

static int concurrency_opt(void *dst, const char *flag, const char *v) {
    bm_opts *o = dst;
    if (parse_list(v, o->conc, &o->n_conc, 32)) return usage_error("--concurrency: a list like 1,4,8 (1..4096)");
    return 0;
}

static int parse_args(int argc, char **argv, bm_opts *o) {
    o->warmup = 1;
    o->timeout_ms = 120000;
    o->ram_reserve_gib = 2;
    o->scenario = "all";
    o->workload_dir = "bench/workloads";
    static const int def[] = {1, 4, 8, 16, 32};
    memcpy(o->conc, def, sizeof def);
    o->n_conc = 5;
    const cli_opt opts[] = {
        CLI_STR("--model", "DIR", "", NULL, "start `basal serve --model DIR` on a loopback port", &o->model_dir),
        CLI_STR("--url", "URL", "", NULL, "measure a running server or load balancer instead", &o->url),
        CLI_STR("--model-name", "NAME", "the server's only model", NULL, "model sent in requests", &o->model_name),
        CLI_CHOICE("--scenario", NULL, NULL, "workloads from --workloads DIR", &o->scenario, "all|sequential|mixed"),
        CLI_STR("--workloads", "DIR", NULL, NULL, "directory of sequential.jsonl and mixed.jsonl", &o->workload_dir),
        CLI_CALL("--requests", "FILE", "", NULL, "a workload file in the v2 line format instead (repeatable, up to 8)",
                 o, requests_opt),
        CLI_CALL("--concurrency", "LIST", "1,4,8,16,32", NULL,
                 "concurrent clients per phase (the sequential workload runs at 1 only)", o, concurrency_opt),
        CLI_INT("--warmup", "N", NULL, NULL, "unmeasured requests per class before a workload's phases", &o->warmup, 0,
                1000),
        CLI_INT("--max-requests", "N", "the whole workload", NULL, "at most N requests per phase", &o->max_requests, 1,
                100000000),
        CLI_INT("--timeout-ms", "N", NULL, NULL, "limit per request", &o->timeout_ms, 1, 86400000),
        CLI_DOUBLE("--ram-reserve-gib", "X", NULL, NULL, "free RAM required besides the weights", &o->ram_reserve_gib, 0,
                   1e9),
        CLI_INT("--threads", "N", "the server's: all CPUs", NULL, "server CPU threads", &o->threads, 1, 4096),
        CLI_INT("--max-inflight", "N", "the server's", NULL, "server admission limit", &o->max_inflight, 1, 1000000),
        CLI_STR("--out", "FILE", "", NULL, "JSON report (schema bench/benchmark-report.schema.json)", &o->out),
        CLI_STR("--html", "FILE", "", NULL, "self-contained HTML report (inline SVG charts)", &o->html),
        CLI_SW("--json", "print the JSON report on stdout instead of the text summary", &o->json),
    };
    int rc = cli_parse(&cli_doc_benchmark, opts, CLI_N(opts), NULL, argc, argv);
    if (rc) return rc;
    if (!!o->model_dir == !!o->url) return usage_error("give one of --model DIR and --url URL");
    if (o->n_requests && strcmp(o->scenario, "all")) return usage_error("--requests excludes --scenario");
    return 0;
}

static int write_out(const char *path, const bs_buf *b) {
    bs_err e = {0};
    if (bs_write_file(path, b->data, b->len, &e) != 0) {
        fprintf(stderr, "basal benchmark: %s\n", e.msg);
        return -1;
    }
    return 0;
}

int cmd_benchmark(int argc, char **argv) {
    bm_opts o;
    memset(&o, 0, sizeof o);
    int rc = parse_args(argc, argv, &o);
    if (rc) return rc < 0 ? 0 : rc;
    const char *outs[] = {o.out, o.html};
    for (int i = 0; i < 2; i++)
        if (outs[i] && access(outs[i], F_OK) == 0) {
            fprintf(stderr, "basal benchmark: %s exists; choose a new output path\n", outs[i]);
            return 1;
        }
    bm_report r;
    memset(&r, 0, sizeof r);
    machine_info(&r);
    r.concurrency = o.conc;
    r.n_concurrency = o.n_conc;
    r.warmup = o.warmup;
    r.timeout_ms = o.timeout_ms;
    r.max_requests = o.max_requests;
    r.ram_reserve_gib = o.ram_reserve_gib;
    bm_server srv = {0};
    char *base = NULL;
    bm_requests *rqs = NULL;
    const char *files[8];
    char *owned[2] = {NULL, NULL};
    int nf = 0;
    rc = 1;
    if (curl_global_init(CURL_GLOBAL_DEFAULT) != 0) return 1;
    struct sigaction sa, old;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_sigint;
    sigaction(SIGINT, &sa, &old);
    g_stop = 0;
    if (o.model_dir) {
        r.model_path = strdup(o.model_dir);
        r.checkpoint_bytes = checkpoint_bytes(o.model_dir);
        double avail = meminfo_kib("MemAvailable") * 1024.0, need = o.ram_reserve_gib * 1073741824.0 + r.checkpoint_bytes;
        if (!(avail >= need)) {
            fprintf(stderr, "basal benchmark: not enough RAM: %.2f GiB available, %.2f GiB needed (weights %.2f GiB + "
                            "--ram-reserve-gib %.2f)\n", avail / 1073741824.0, need / 1073741824.0,
                    r.checkpoint_bytes / 1073741824.0, o.ram_reserve_gib);
            goto out;
        }
        fprintf(stderr, "benchmark: starting basal serve --model %s\n", o.model_dir);
        if (start_server(&o, &srv, &r.server_argv) != 0) goto out;
        base = bs_strfmt("http://127.0.0.1:%d", srv.port);
        r.started_server = 1;
        r.load_s = srv.ready_s;
    } else {
        size_t n = strlen(o.url);
        while (n && o.url[n - 1] == '/') n--;
        base = strndup(o.url, n);
    }
    r.url = base;
    if (o.model_name) {
        r.model_name = strdup(o.model_name);
    } else {
        char *url = bs_strfmt("%s/v1/models", base);
        bs_buf b;
        bs_buf_init(&b);
        long st = url ? http_once(url, NULL, 0, 10000, &b) : 0;
        free(url);
        bj_value *v = NULL;
        bs_err e = {0};
        if (st == 200 && bj_parse(b.data, b.len, NULL, &v, &e) == 0) {
            const bj_value *m = bj_get(v, "models");
            const bj_value *name = m && m->type == BJ_ARRAY && m->n == 1 ? bj_get(m->items[0], "name") : NULL;
            if (name && name->type == BJ_STRING) r.model_name = strndup(name->str, name->len);
        }
        bj_free(v);
        bs_buf_free(&b);
        if (!r.model_name) {
            fprintf(stderr, "basal benchmark: %s/v1/models did not list exactly one model (HTTP %ld); use --model-name\n",
                    base, st);
            goto out;
        }
    }
    /* workloads */
    if (o.n_requests) {
        for (int i = 0; i < o.n_requests; i++) files[nf++] = o.requests[i];
    } else {
        if (strcmp(o.scenario, "mixed")) files[nf++] = owned[0] = bs_path_join(o.workload_dir, "sequential.jsonl");
        if (strcmp(o.scenario, "sequential")) files[nf++] = owned[1] = bs_path_join(o.workload_dir, "mixed.jsonl");
    }
    r.workloads = calloc((size_t)nf, sizeof *r.workloads);
    rqs = calloc((size_t)nf, sizeof *rqs);
    if (!r.workloads || !rqs) goto out_files;
    for (int i = 0; i < nf; i++) {
        if (!files[i] || load_workload(files[i], r.model_name, &r.workloads[i], &rqs[i]) != 0) goto out_files;
        r.n_workloads++;
    }
    int max_phases = nf * o.n_conc;
    r.phases = calloc((size_t)max_phases, sizeof *r.phases);
    if (!r.phases) goto out_files;
    int progress = isatty(2);
    for (int wi = 0; wi < nf && !g_stop; wi++) {
        bm_workload *w = &r.workloads[wi];
        fprintf(stderr, "benchmark: %s: %zu requests, %d classes; warm-up\n", w->name, w->requests, w->n_classes);
        warm_up(&o, base, w, &rqs[wi]);
        int sequential = !strcmp(w->name, "sequential");
        for (int ci = 0; ci < o.n_conc && !g_stop; ci++) {
            if (sequential && o.conc[ci] != 1) continue;
            bm_phase *p = &r.phases[r.n_phases++];
            p->workload = wi;
            p->concurrency = o.conc[ci];
            run_phase(&o, base, srv.pid, w, &rqs[wi], p, progress);
            fprintf(stderr, "%sbenchmark: %s c=%d: %zu requests, %ld ok, %ld errors, %.1f s%s%s\n", progress ? "\r\033[K" : "",
                    w->name, p->concurrency, p->n, p->completed, p->errors, p->wall_s,
                    p->stop_reason[0] ? "; stopped: " : "", p->stop_reason);
        }
    }
    bs_buf b;
    bs_buf_init(&b);
    if (o.json) bm_write_json(&r, &b);
    else bm_write_text(&r, &b);
    fwrite(b.data, 1, b.len, stdout);
    bs_buf_free(&b);
    rc = g_stop ? 130 : 0;
    if (o.out) {
        bs_buf_init(&b);
        bm_write_json(&r, &b);
        if (b.oom || write_out(o.out, &b)) rc = 1;
        bs_buf_free(&b);
    }
    if (o.html) {
        bs_buf_init(&b);
        bm_write_html(&r, &b);
        if (b.oom || write_out(o.html, &b)) rc = 1;
        bs_buf_free(&b);
    }
    for (int i = 0; i < r.n_phases; i++)
        if (r.phases[i].stop_reason[0] && rc == 0) rc = 1;
out_files:
out:
    free(owned[0]);
    free(owned[1]);
    stop_server(&srv);
    sigaction(SIGINT, &old, NULL);
    if (rqs) {
        for (int i = 0; i < nf; i++) {
            for (size_t k = 0; k < rqs[i].n; k++) {
                free(rqs[i].r[k].id);
                free(rqs[i].r[k].body);
                free(rqs[i].r[k].first_answer);
            }
            free(rqs[i].r);
        }
        free(rqs);
    }
    if (r.workloads) {
        for (int i = 0; i < nf; i++) {
            free(r.workloads[i].name);
            free(r.workloads[i].path);
            for (int c = 0; c < r.workloads[i].n_classes; c++) free(r.workloads[i].classes[c]);
        }
        free(r.workloads);
    }
    if (r.phases) {
        for (int i = 0; i < r.n_phases; i++) free(r.phases[i].s);
        free(r.phases);
    }
    free(r.server_argv);
    free(r.model_name);
    free(r.model_path);
    free(base);
    curl_global_cleanup();
    return rc;
}
