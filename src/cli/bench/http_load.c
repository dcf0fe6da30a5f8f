/* `basal benchmark` (spec 06 §7.5, the method and the report of basal-rs's
 * benchmark): HTTP load through the real server. It starts `basal serve` on a
 * loopback port (or measures --url: a running server or a load balancer),
 * checks the RAM against the weights, checks the workload files against their
 * manifest.json, plans every request with the model's tokenizer (requests
 * over the context limit are skipped whole), warms up, then runs each
 * workload as closed-loop phases over a concurrency sweep, sampling memory and
 * CPU every 200 ms, and writes a JSON report (schema_version 2), an HTML
 * report and basal-rs's text summary. */
#include <curl/curl.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/utsname.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "basal.h"
#include "cli/bench/http_report.h"
#include "cli/bench/http_workload.h"
#include "cli/cli.h"
#include "cli/client/client.h"
#include "protocol/respjson.h"
#include "base/sha256.h"
#include "engine/plan.h"
#include "model/basal_model.h"
#include "server/config.h"

#ifndef BS_BUILD_CFLAGS
#define BS_BUILD_CFLAGS "-O2 -ffp-contract=off -fno-fast-math"
#endif

#define SWAP_GROWTH_LIMIT (64.0 * 1048576.0) /* basal-rs's guard: global swap activity */

typedef struct {
    const char *model_dir, *url, *model_name, *out, *html, *scenario, *workload_dir, *requests, *schedule, *dtype;
    int warmup, timeout_ms, max_requests, json, no_prefix_cache;
    long long threads, max_inflight, max_batch_tokens, long_tokens, long_slice_ms, state_cache_mb, tree_max_tokens;
    int conc[32], n_conc;
    double ram_reserve_gib, gpu_reserve_gib;
} bm_opts;

static volatile sig_atomic_t g_stop;
static void on_sigint(int sig) {
    (void)sig;
    g_stop = 1;
}

static int usage_error(const char *msg) {
    cli_error("benchmark", "%s", msg);
    return 2;
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

/* VmHWM: the process's lifetime peak RSS in bytes (basal-rs: getrusage's ru_maxrss) */
static double proc_peak_rss_bytes(pid_t pid) {
    char path[64], line[256];
    snprintf(path, sizeof path, "/proc/%d/status", (int)pid);
    FILE *f = fopen(path, "r");
    if (!f) return NAN;
    double v = NAN;
    while (fgets(line, sizeof line, f))
        if (!strncmp(line, "VmHWM:", 6)) {
            v = strtod(line + 6, NULL) * 1024.0;
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

/* pswpout (pages swapped out since boot) in bytes */
static double swap_out_bytes(void) {
    FILE *f = fopen("/proc/vmstat", "r");
    if (!f) return NAN;
    char line[128];
    double v = NAN;
    while (fgets(line, sizeof line, f))
        if (!strncmp(line, "pswpout ", 8)) {
            v = strtod(line + 8, NULL) * (double)sysconf(_SC_PAGESIZE);
            break;
        }
    fclose(f);
    return v;
}

static bm_host_memory host_memory(void) {
    bm_host_memory h;
    h.total_bytes = meminfo_kib("MemTotal") * 1024.0;
    h.available_bytes = meminfo_kib("MemAvailable") * 1024.0;
    h.swap_used_bytes = (meminfo_kib("SwapTotal") - meminfo_kib("SwapFree")) * 1024.0;
    h.swap_out_bytes = swap_out_bytes();
    return h;
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

static size_t on_body(char *p, size_t size, size_t n, void *ud) {
    bs_buf *b = ud;
    bs_buf_put(b, p, size * n);
    return b->oom ? 0 : size * n;
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
    if (fd < 0) return cli_error("benchmark", "temporary file: %s", strerror(errno)), -1;
    char nums[8][32];
    const char *argv[40];
    int n = 0, k = 0;
    argv[n++] = "basal";
    argv[n++] = "serve";
    argv[n++] = "--model";
    argv[n++] = o->model_dir;
    argv[n++] = "--addr";
    argv[n++] = "127.0.0.1:0";
    argv[n++] = "--metrics";
    argv[n++] = "--access-log";
    argv[n++] = "off";
    argv[n++] = "--log-format";
    argv[n++] = "text";
    /* every setting the report records is passed explicitly: no BASAL_* variable changes it */
    const char *flags[] = {"--threads", "--max-inflight", "--max-batch-tokens", "--long-tokens", "--long-slice-ms",
                           "--state-cache-mb", "--tree-max-tokens"};
    const long long vals[] = {o->threads, o->max_inflight, o->max_batch_tokens, o->long_tokens, o->long_slice_ms,
                         o->state_cache_mb, o->tree_max_tokens};
    for (int i = 0; i < 7; i++) {
        snprintf(nums[k], sizeof nums[k], "%lld", vals[i]);
        argv[n++] = flags[i];
        argv[n++] = nums[k++];
    }
    argv[n++] = "--schedule";
    argv[n++] = o->schedule;
    argv[n++] = "--dtype";
    argv[n++] = o->dtype;
    if (o->no_prefix_cache) argv[n++] = "--no-prefix-cache";
    argv[n] = NULL;
    bs_buf t;
    bs_buf_init(&t);
    for (int i = 0; i < n; i++) bs_buf_printf(&t, "%s%s", i ? " " : "", argv[i]);
    *argv_text = t.data;
    s->pid = fork();
    if (s->pid < 0) return close(fd), cli_error("benchmark", "fork: %s", strerror(errno)), -1;
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
            cli_error("benchmark", "the server exited before it was ready; its log (%s):", s->log);
            if (bs_read_file(s->log, &text, &len, &e) == 0) {
                fputs(text, stderr);
                free(text);
            }
            return -1;
        }
        usleep(20000);
    }
    cli_error("benchmark", "the server was not ready in time (log %s)", s->log);
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

/* Answers of a 2xx body, or NULL when they are not an object of the request's questions. */
static char *answers_of(const char *body, size_t len, int questions) {
    bj_value *v = NULL;
    bs_err e = {0};
    if (bj_parse(body, len, NULL, &v, &e) != 0) return NULL;
    const bj_value *a = bj_get(v, "answers");
    char *out = NULL;
    if (a && a->type == BJ_OBJECT && a->n == (size_t)questions) {
        bs_buf b;
        bs_buf_init(&b);
        bs_resp_value(&b, a);
        out = b.oom ? (bs_buf_free(&b), NULL) : b.data;
    }
    bj_free(v);
    return out;
}

typedef struct {
    bm_report *r;
    pid_t pid;
    double first_at, first_cpu, last_at, last_cpu;
} bm_monitor;

/* One resource sample into the phase's window and the report's guard (basal-rs's Guard::check
 * with no weights: available RAM at least the reserve, global swap growth under 64 MiB).
 * Returns -1 with the reason in p when the guard fails. */
static int sample_resources(bm_monitor *mon, bm_phase *p) {
    bm_report *r = mon->r;
    bm_host_memory h = host_memory();
    r->guard_checks++;
    if (isfinite(h.available_bytes)) {
        if (!(r->min_avail_bytes <= h.available_bytes)) r->min_avail_bytes = h.available_bytes;
        if (p->n_samples == 0 || h.available_bytes < p->min_avail_bytes) p->min_avail_bytes = h.available_bytes;
    }
    double grow = 0;
    if (isfinite(h.swap_used_bytes) && h.swap_used_bytes - r->before.swap_used_bytes > grow)
        grow = h.swap_used_bytes - r->before.swap_used_bytes;
    if (isfinite(h.swap_out_bytes) && h.swap_out_bytes - r->before.swap_out_bytes > grow)
        grow = h.swap_out_bytes - r->before.swap_out_bytes;
    if (!(r->max_swap_growth_bytes >= grow)) r->max_swap_growth_bytes = grow;
    p->n_samples++;
    double now = bs_now_ms() / 1000.0;
    if (mon->pid > 0) {
        double rss = proc_peak_rss_bytes(mon->pid), cpu = proc_cpu_s(mon->pid);
        if (isfinite(rss) && isfinite(cpu)) {
            if (!p->proc_known) {
                mon->first_at = now;
                mon->first_cpu = cpu;
            }
            p->proc_known = 1;
            if (rss > p->peak_rss_bytes) p->peak_rss_bytes = rss;
            p->cpu_window_s = now - mon->first_at;
            p->cpu_used_s = cpu - mon->first_cpu > 0 ? cpu - mon->first_cpu : 0;
        }
    }
    if (grow >= SWAP_GROWTH_LIMIT) {
        snprintf(p->reason, sizeof p->reason, "resource guard: global swap activity grew by at least 64 MiB");
        return -1;
    }
    if (isfinite(h.available_bytes) && h.available_bytes < r->ram_reserve_bytes) {
        snprintf(p->reason, sizeof p->reason, "resource guard: available RAM fell below the reserve");
        return -1;
    }
    return 0;
}

typedef struct {
    CURL *h;
    bs_buf resp;
    size_t req;
    double t0, queue_ms, compute_ms;
    int batch, busy;
    char errbuf[CURL_ERROR_SIZE];
} bm_conn;

static size_t on_header(char *p, size_t size, size_t n, void *ud) {
    bm_conn *c = ud;
    size_t len = size * n;
    char tmp[64];
    if (len < sizeof tmp) {
        memcpy(tmp, p, len);
        tmp[len] = 0;
        /* basal-rs takes finite, non-negative values only */
        if (!strncasecmp(tmp, "x-basal-queue-ms:", 17)) c->queue_ms = strtod(tmp + 17, NULL);
        else if (!strncasecmp(tmp, "x-basal-compute-ms:", 19)) c->compute_ms = strtod(tmp + 19, NULL);
        else if (!strncasecmp(tmp, "x-basal-batch-requests:", 23)) c->batch = atoi(tmp + 23);
        if (!isfinite(c->queue_ms)) c->queue_ms = -1;
        if (!isfinite(c->compute_ms)) c->compute_ms = -1;
    }
    return len;
}

/* Records one finished request; returns -1 (reason in p) on what stops basal-rs's load: a
 * timeout, a transport or body failure, an invalid response, a 5xx other than 529. */
static int finish_request(bm_phase *p, bm_workload *w, bm_requests *rq, bm_conn *c, CURLcode rc, int url_mode) {
    bm_request *r = &rq->r[c->req];
    double lat = bs_now_ms() - c->t0;
    long status = 0;
    curl_easy_getinfo(c->h, CURLINFO_RESPONSE_CODE, &status);
    if (p->n == p->cap) {
        size_t cap = p->cap ? p->cap * 2 : 256;
        bm_sample *s = realloc(p->s, cap * sizeof *s);
        if (!s) {
            snprintf(p->reason, sizeof p->reason, "out of memory");
            return -1;
        }
        p->s = s;
        p->cap = cap;
    }
    bm_sample *s = &p->s[p->n++];
    *s = (bm_sample){.id = r->id, .lat_ms = lat, .queue_ms = c->queue_ms, .compute_ms = c->compute_ms,
                     .status = (int)status, .batch = c->batch, .cls = r->cls, .questions = r->questions,
                     .input_tokens = r->input_tokens, .payload_bytes = r->len};
    if (rc != CURLE_OK) {
        s->error = rc == CURLE_OPERATION_TIMEDOUT ? BM_TIMEOUT : status ? BM_RESPONSE_BODY : BM_TRANSPORT;
        snprintf(p->reason, sizeof p->reason, "HTTP %s for %.60s: %.100s; stopping further load",
                 bm_error_names[s->error], r->id, c->errbuf[0] ? c->errbuf : curl_easy_strerror(rc));
        return -1;
    }
    if (status < 200 || status > 299) {
        s->error = BM_HTTP_STATUS;
        /* --url: no local tokenizer planned the workload; a request over the server's context
         * is an error here and is left out of the later phases */
        if (url_mode && status == 422 && c->resp.data && strstr(c->resp.data, "\"prompt_too_long\"") && !r->skipped) {
            r->skipped = 1;
            bm_skipped *k = &w->skipped[w->n_skipped++];
            k->id = strdup(r->id);
            k->cls = r->cls;
            k->detail = NULL;
        }
        if (status >= 500 && status != 529) {
            snprintf(p->reason, sizeof p->reason, "HTTP %ld for %.60s; stopping further load", status, r->id);
            return -1;
        }
        return 0;
    }
    char *ans = answers_of(c->resp.data ? c->resp.data : "", c->resp.len, r->questions);
    if (!ans) {
        s->error = BM_INVALID_RESPONSE;
        snprintf(p->reason, sizeof p->reason, "invalid response to %.60s; stopping further load", r->id);
        return -1;
    }
    if (!*r->first_answer) *r->first_answer = ans;
    else {
        s->answer_changed = strcmp(*r->first_answer, ans) != 0;
        free(ans);
    }
    return 0;
}

/* A closed loop: each of p->concurrency clients sends its next request when its previous one
 * has finished. order: the indices of the requests to send. Returns -1 when it stopped early. */
static int run_phase(const bm_opts *o, const char *base, bm_monitor *mon, bm_workload *w, bm_requests *rq,
                     const size_t *order, size_t total, bm_phase *p, int progress) {
    char *url = bs_strfmt("%s/v1/systemone", base);
    struct curl_slist *hd = curl_slist_append(NULL, "Content-Type: application/json");
    hd = curl_slist_append(hd, "Expect:");
    CURLM *multi = curl_multi_init();
    bm_conn *conns = calloc((size_t)p->concurrency, sizeof *conns);
    size_t next = 0;
    int failed = 0;
    p->planned = total;
    if (!url || !hd || !multi || !conns) {
        snprintf(p->reason, sizeof p->reason, "out of memory");
        failed = 1;
        goto done;
    }
    double tok_in0 = 0, tok_fw0 = 0, tok_in1, tok_fw1;
    p->tokens_known = scrape_tokens(base, &tok_in0, &tok_fw0) == 0;
    double t0 = bs_now_ms(), last_sample = t0, last_progress = 0;
    int in_flight = 0;
    mon->first_at = NAN;
    if (sample_resources(mon, p)) failed = 1;
    for (;;) {
        int stopping = failed || g_stop;
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
            p->submitted++;
        }
        /* basal-rs stops producing on a failure and cancels what is in flight */
        if (in_flight == 0 && (next >= total || stopping)) break;
        if (stopping && failed) break;
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
            if (!failed && finish_request(p, w, rq, c, rc, o->url != NULL)) failed = 1;
        }
        double now = bs_now_ms();
        if (now - last_sample >= 200) {
            if (!failed && sample_resources(mon, p)) failed = 1;
            last_sample = now;
        }
        if (progress && now - last_progress >= 500) {
            double el = (now - t0) / 1000;
            fprintf(stderr, "\r\033[Kbenchmark: %s c=%d: %zu/%zu  %.1f req/s", w->name, p->concurrency, p->n, total,
                    el > 0 ? p->n / el : 0);
            last_progress = now;
        }
        curl_multi_poll(multi, NULL, 0, 50, NULL);
    }
    p->wall_s = (bs_now_ms() - t0) / 1000.0;
    if (!failed && sample_resources(mon, p)) failed = 1;
    if (p->tokens_known && scrape_tokens(base, &tok_in1, &tok_fw1) == 0) {
        p->input_tokens = tok_in1 - tok_in0;
        p->forward_tokens = tok_fw1 - tok_fw0;
    } else {
        p->tokens_known = 0;
    }
    if (g_stop && !failed) {
        snprintf(p->reason, sizeof p->reason, "benchmark interrupted");
        failed = 1;
    }
    p->ended = 1;
done:
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
    free(url);
    return failed ? -1 : 0;
}

/* basal-rs's warm-up: the first request of each class (classes in name order), each sent
 * --warmup times by one client; not measured; a failure aborts the benchmark. With --url a
 * request over the server's context is left out and the class's next request is tried. */
static int warm_up(const bm_opts *o, const char *base, bm_monitor *mon, bm_workload *w, bm_requests *rq,
                   char *reason, size_t reason_size) {
    int idx[BM_MAX_CLASSES];
    bm_class_order(w, idx);
    for (int ci = 0; ci < w->n_classes && o->warmup > 0; ci++) {
        for (size_t i = 0; i < rq->n; i++) {
            if (rq->r[i].cls != idx[ci] || rq->r[i].skipped) continue;
            size_t *order = malloc((size_t)o->warmup * sizeof *order);
            if (!order) return -1;
            for (int k = 0; k < o->warmup; k++) order[k] = i;
            bm_phase p = {.concurrency = 1};
            int rc = run_phase(o, base, mon, w, rq, order, (size_t)o->warmup, &p, 0);
            free(order);
            const bm_sample *bad = NULL;
            for (size_t k = 0; k < p.n && !bad; k++)
                if (p.s[k].error) bad = &p.s[k];
            int retry = bad && rq->r[i].skipped; /* --url: over the context limit */
            if (!retry && (rc || bad || g_stop)) {
                if (bad)
                    snprintf(reason, reason_size, "warmup request %s failed (%s, HTTP %d)", bad->id,
                             bm_error_names[bad->error], bad->status);
                else
                    snprintf(reason, reason_size, "%s", p.reason[0] ? p.reason : "warm-up stopped");
                free(p.s);
                return -1;
            }
            free(p.s);
            if (!retry) break;
        }
    }
    return 0;
}
/* The server's own lines about the model: "loaded NAME in X s" (load_s) and
 * "serving NAME on DEVICE (batch ..." (the backend description); they follow the
 * readiness line within moments. */
static void server_describe(const bm_server *s, const char *name, bm_report *r) {
    char *want_load = bs_strfmt("loaded %s in ", name), *want_dev = bs_strfmt("serving %s on ", name);
    for (int tries = 0; tries < 100 && want_load && want_dev; tries++) {
        char *text;
        size_t len;
        bs_err e = {0};
        if (bs_read_file(s->log, &text, &len, &e) == 0) {
            const char *l = strstr(text, want_load), *d = strstr(text, want_dev);
            if (l) r->load_s = strtod(l + strlen(want_load), NULL);
            if (d) {
                d += strlen(want_dev);
                const char *end = strstr(d, " (batch ");
                const char *nl = strchr(d, '\n');
                if (end && (!nl || end < nl))
                    snprintf(r->backend, sizeof r->backend, "%.*s", (int)(end - d), d);
            }
            free(text);
            if (r->backend[0]) break;
        }
        usleep(20000);
    }
    free(want_load);
    free(want_dev);
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
    "With --model the server is `basal serve --model DIR` on a loopback port (with --metrics and\n"
    "the server settings below), and every request is planned first with the model's tokenizer:\n"
    "requests over the context limit are skipped whole. The workload files are checked against the\n"
    "manifest.json beside them. Output files must not exist. Progress goes to stderr; the text\n"
    "summary (or --json) to stdout. Exit status 0 when every phase completed, 1 otherwise.\n",
};

static int concurrency_opt(void *dst, const char *flag, const char *v) {
    (void)flag;
    bm_opts *o = dst;
    if (parse_list(v, o->conc, &o->n_conc, 32)) return usage_error("--concurrency: a list like 1,4,8 (1..4096)");
    return 0;
}

static int parse_args(int argc, char **argv, bm_opts *o) {
    o->warmup = 1;
    o->timeout_ms = 120000;
    o->ram_reserve_gib = 2;
    o->gpu_reserve_gib = 1;
    o->scenario = "all";
    o->workload_dir = "bench/workloads";
    o->schedule = "hrrn";
    o->dtype = "auto";
    /* the server's own defaults (server/config.c) */
    bs_serve_model dm;
    bs_serve_config dc;
    bs_err e = {0};
    if (bs_serve_model_init(&dm, &e) < 0 || bs_serve_config_init(&dc, &e) < 0) return usage_error(e.msg);
    o->max_batch_tokens = dm.max_batch_tokens;
    o->long_tokens = dm.long_tokens;
    o->tree_max_tokens = dm.tree_max_tokens;
    o->state_cache_mb = dm.state_cache_mb;
    o->max_inflight = dc.max_inflight;
    o->long_slice_ms = dc.long_slice_ms;
    free(dm.dtype);
    free(dm.gemm_table);
    bs_serve_config_free(&dc);
    static const int def[] = {1, 4, 8, 16, 32};
    memcpy(o->conc, def, sizeof def);
    o->n_conc = 5;
    const cli_opt opts[] = {
        CLI_STR("--model", "DIR", "", NULL, "start `basal serve --model DIR` on a loopback port", &o->model_dir),
        CLI_STR("--url", "URL", "", NULL, "measure a running server or load balancer instead", &o->url),
        CLI_STR("--model-name", "NAME", "the server's only model", NULL, "model sent in requests", &o->model_name),
        CLI_CHOICE("--scenario", NULL, NULL, "sequential requests, mixed concurrent traffic, or both", &o->scenario,
                   "all|sequential|mixed"),
        CLI_STR("--workloads", "DIR", NULL, NULL, "directory of sequential.jsonl, mixed.jsonl (and manifest.json)",
                &o->workload_dir),
        CLI_STR("--requests", "FILE", "", NULL,
                "replay your traffic: JSONL lines {id?, class?, request}; replaces both workloads", &o->requests),
        CLI_CALL("--concurrency", "LIST", "1,4,8,16,32", NULL,
                 "concurrent clients per mixed phase (the sequential workload runs at 1 only)", o, concurrency_opt),
        CLI_INT("--warmup", "N", NULL, NULL, "unmeasured requests per class before a workload's phases", &o->warmup, 0,
                10),
        CLI_INT("--max-requests", "N", "the whole workload", NULL, "at most N requests per phase", &o->max_requests, 1,
                100000000),
        CLI_INT("--timeout-ms", "N", NULL, NULL, "limit per request; a timeout stops the benchmark", &o->timeout_ms, 1,
                3600000),
        CLI_DOUBLE("--ram-reserve-gib", "X", NULL, NULL, "free RAM to retain besides the weights", &o->ram_reserve_gib,
                   0, 1048576),
        CLI_DOUBLE("--gpu-reserve-gib", "X", NULL, NULL, "GPU memory headroom (recorded; not sampled here)",
                   &o->gpu_reserve_gib, 0, 1048576),
        CLI_LLONG("--threads", "N", "0 = online CPUs", NULL, "server CPU threads", &o->threads, 0, 4096),
        CLI_LLONG("--max-inflight", "N", NULL, NULL, "server waiting + running request limit (529 above)",
                 &o->max_inflight, 1, 1000000),
        CLI_LLONG("--max-batch-tokens", "N", NULL, NULL, "packed tokens admitted per server batch",
                 &o->max_batch_tokens, 1, 1L << 30),
        CLI_CHOICE("--schedule", NULL, NULL, "server admission order", &o->schedule, "hrrn|fifo"),
        CLI_LLONG("--long-tokens", "N", NULL, NULL, "packed-token threshold of the long lane (0 = one lane)",
                 &o->long_tokens, 0, 1L << 30),
        CLI_LLONG("--long-slice-ms", "N", NULL, NULL, "least long-lane work between hand-overs", &o->long_slice_ms, 0,
                 1L << 30),
        CLI_LLONG("--state-cache-mb", "N", NULL, NULL, "server state K/V cache in MiB (0 = off)", &o->state_cache_mb, 0,
                 1L << 30),
        CLI_LLONG("--tree-max-tokens", "N", NULL, NULL, "longest packed tree row", &o->tree_max_tokens, 1, 1L << 30),
        CLI_SW("--no-prefix-cache", "the server does not precompute the template prefixes", &o->no_prefix_cache),
        CLI_CHOICE("--dtype", NULL, NULL, "server precision (auto = f32 on the CPU)", &o->dtype, "auto|f32|bf16|f16"),
        CLI_STR("--out", "FILE", "", NULL, "JSON report to a NEW file (schema bench/benchmark-report.schema.json)",
                &o->out),
        CLI_STR("--html", "FILE", "", NULL, "self-contained HTML report to a NEW file (inline SVG charts)", &o->html),
        CLI_SW("--json", "print the JSON report on stdout instead of the text summary", &o->json),
    };
    int rc = cli_parse(&cli_doc_benchmark, opts, CLI_N(opts), NULL, argc, argv);
    if (rc) return rc;
    if (!!o->model_dir == !!o->url) return usage_error("give one of --model DIR and --url URL");
    return 0;
}

/* --out and --html are created up front, never overwritten (basal-rs opens --out with create_new) */
static FILE *create_new(const char *path) {
    int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644); /* not inherited by serve */
    if (fd < 0) {
        cli_error("benchmark", "creating %s (must not exist): %s", path, strerror(errno));
        return NULL;
    }
    FILE *f = fdopen(fd, "w");
    if (!f) close(fd);
    return f;
}

static char *settings_json(const bm_opts *o, int cpus) {
    if (o->url) {
        return strdup("{\"dtype\":null,\"kernels\":null,\"readout\":null,\"prefix_cache\":null,\"state_cache_mb\":null,"
                      "\"gemm_table\":null,\"tree_max_tokens\":null,\"max_batch_tokens\":null,\"max_inflight\":null,"
                      "\"schedule\":null,\"long_tokens\":null,\"long_slice_ms\":null,\"threads\":null}");
    }
    return bs_strfmt("{\"dtype\":\"%s\",\"kernels\":\"fused\",\"readout\":\"f32\",\"prefix_cache\":%s,"
                     "\"state_cache_mb\":%lld,\"gemm_table\":null,\"tree_max_tokens\":%lld,\"max_batch_tokens\":%lld,"
                     "\"max_inflight\":%lld,\"schedule\":\"%s\",\"long_tokens\":%lld,\"long_slice_ms\":%lld,\"threads\":%lld}",
                     o->dtype, o->no_prefix_cache ? "false" : "true", o->state_cache_mb, o->tree_max_tokens,
                     o->max_batch_tokens, o->max_inflight, strcmp(o->schedule, "fifo") ? "Hrrn" : "Fifo",
                     o->long_tokens, o->long_slice_ms, o->threads > 0 ? o->threads : (long long)cpus);
}

/* One run of `basal benchmark`: the report and what it is made from;
 * bm_run_free releases it. */
typedef struct {
    bm_opts o;
    bm_report r;
    FILE *out_f, *html_f; /* --out and --html, created up front */
    bm_server srv;
    char *base;           /* the server's URL (owned; r.url points to it) */
    bm_requests *rqs;     /* per workload, its planned requests */
    bm_raw_file raws[2];  /* the workload files as read */
    const char *names[2];
    int shuffle[2], nw, model_loaded;
    bs_basal_model model; /* the tokenizer and manifests of --model */
    bs_letter_cache lc;
} bm_run;

/* --out and --html, each a new file. 0, else 1 (reported; none is left). */
static int open_outputs(bm_run *b) {
    const bm_opts *o = &b->o;
    if (o->out && !(b->out_f = create_new(o->out))) return 1;
    if (o->html && !(b->html_f = create_new(o->html))) {
        fclose(b->out_f);
        if (o->out) unlink(o->out);
        return 1;
    }
    return 0;
}

/* The report's settings, the machine and its memory before the run. */
static void report_init(bm_run *b) {
    bm_opts *o = &b->o; /* the report points to its concurrency list */
    bm_report *r = &b->r;
    memset(r, 0, sizeof *r);
    machine_info(r);
    r->status = "not_run";
    r->concurrency = o->conc;
    r->n_concurrency = o->n_conc;
    r->warmup = o->warmup;
    r->timeout_ms = o->timeout_ms;
    r->max_requests = o->max_requests;
    r->ram_reserve_bytes = floor(o->ram_reserve_gib * 1073741824.0);
    r->gpu_reserve_bytes = floor(o->gpu_reserve_gib * 1073741824.0);
    r->swap_limit_bytes = SWAP_GROWTH_LIMIT;
    r->load_s = NAN;
    r->min_avail_bytes = NAN;
    r->settings_json = settings_json(o, r->cpus);
    r->before = host_memory();
    r->guard_checks = 1;
    r->min_avail_bytes = r->before.available_bytes;
    r->max_swap_growth_bytes = 0;
}

/* --model: the RAM guard, the weights' SHA-256, then the tokenizer and
 * manifests (to plan the workload as the server will). 0 on success; 1 when
 * the run is aborted before it starts (r.reason; the report is still
 * written); negative on a failure (reported). */
static int check_model(bm_run *b) {
    const bm_opts *o = &b->o;
    bm_report *r = &b->r;
    r->model_ref = strdup(o->model_dir);
    r->checkpoint_bytes = checkpoint_bytes(o->model_dir);
    double need = r->ram_reserve_bytes + r->checkpoint_bytes;
    if (!(r->before.available_bytes >= need)) {
        snprintf(r->reason, sizeof r->reason, "resource guard: not enough RAM: %.2f GiB available, %.2f GiB needed "
                 "(weights %.2f GiB + --ram-reserve-gib %.2f)", r->before.available_bytes / 1073741824.0,
                 need / 1073741824.0, r->checkpoint_bytes / 1073741824.0, o->ram_reserve_gib);
        r->status = "aborted";
        cli_error("benchmark", "%s", r->reason);
        return 1;
    }
    bs_err e = {0};
    bs_buf sha;
    bs_buf_init(&sha);
    if (cli_weights_sha256(o->model_dir, &sha, &e) != BS_OK || sha.oom) {
        snprintf(r->reason, sizeof r->reason, "%.299s", sha.oom ? "out of memory" : e.msg);
        bs_buf_free(&sha);
        r->status = "aborted";
        cli_error("benchmark", "%s", r->reason);
        return 1;
    }
    r->weights_sha256 = sha.data; /* owned by r now */
    /* the tokenizer and manifests only: plans the workload as the server will */
    if (bs_basal_load(&b->model, o->model_dir, NULL, 0, &e) < 0) {
        cli_error("benchmark", "%s", e.msg);
        return -1;
    }
    b->model_loaded = 1;
    r->model_name = strdup(b->model.name);
    if (o->model_name && strcmp(o->model_name, b->model.name)) {
        cli_error("benchmark", "--model-name %s, but %s serves %s", o->model_name, o->model_dir, b->model.name);
        return -1;
    }
    return 0;
}

/* --url: the base URL, and the model's name (--model-name, else the only
 * model GET /v1/models lists). Negative on a failure (reported). */
static int url_model(bm_run *b) {
    const bm_opts *o = &b->o;
    bm_report *r = &b->r;
    size_t n = strlen(o->url);
    while (n && o->url[n - 1] == '/') n--;
    b->base = strndup(o->url, n);
    r->url = b->base;
    if (o->model_name) {
        r->model_name = strdup(o->model_name);
        return 0;
    }
    char *url = bs_strfmt("%s/v1/models", b->base);
    bs_buf buf;
    bs_buf_init(&buf);
    long st = url ? http_once(url, NULL, 0, 10000, &buf) : 0;
    free(url);
    bj_value *v = NULL;
    bs_err e = {0};
    if (st == 200 && bj_parse(buf.data, buf.len, NULL, &v, &e) == 0) {
        const bj_value *m = bj_get(v, "models");
        const bj_value *name = m && m->type == BJ_ARRAY && m->n == 1 ? bj_get(m->items[0], "name") : NULL;
        if (name && name->type == BJ_STRING) r->model_name = strndup(name->str, name->len);
    }
    bj_free(v);
    bs_buf_free(&buf);
    if (!r->model_name) {
        cli_error("benchmark", "%s/v1/models did not list exactly one model (HTTP %ld); use --model-name", b->base,
                  st);
        return -1;
    }
    return 0;
}

/* --requests: the one file as both workloads (as the scenario selects).
 * Negative on a failure (reported by the reader). */
static int read_replay(bm_run *b) {
    const bm_opts *o = &b->o;
    if (bm_read_workload(o->requests, b->r.model_name, &b->raws[0]) != 0) return -1;
    char hex[65];
    bs_sha256_hex(b->raws[0].file_sha, hex);
    bs_buf sb;
    bs_buf_init(&sb);
    bs_buf_printf(&sb, "{\"kind\":\"request_replay\",\"path\":");
    bj_put_string(&sb, o->requests, strlen(o->requests));
    bs_buf_printf(&sb, ",\"sha256\":\"%s\",\"requests\":%zu}", hex, b->raws[0].n);
    b->r.source_json = sb.data;
    if (strcmp(o->scenario, "mixed")) b->names[b->nw] = "sequential", b->shuffle[b->nw++] = 0;
    if (strcmp(o->scenario, "sequential")) b->names[b->nw] = "mixed", b->shuffle[b->nw++] = 1;
    return 0;
}

/* --workloads: sequential.jsonl and mixed.jsonl (as the scenario selects),
 * each checked against manifest.json. Negative on a failure (reported by the
 * reader). */
static int read_workload_files(bm_run *b) {
    const bm_opts *o = &b->o;
    bs_buf sb;
    bs_buf_init(&sb);
    bs_buf_puts(&sb, "{\"kind\":\"workload_files\",\"dir\":");
    bj_put_string(&sb, o->workload_dir, strlen(o->workload_dir));
    bs_buf_puts(&sb, ",\"workloads\":{");
    int k = 0;
    for (int i = 0; i < 2; i++) {
        const char *name = i ? "mixed" : "sequential";
        if (!strcmp(o->scenario, i ? "sequential" : "mixed")) continue;
        char file[32];
        snprintf(file, sizeof file, "%s.jsonl", name);
        char *path = bs_path_join(o->workload_dir, file);
        int checked = 0;
        if (!path || bm_read_workload(path, b->r.model_name, &b->raws[k]) != 0 ||
            bm_check_manifest(o->workload_dir, file, &b->raws[k], &checked) != 0) {
            free(path);
            bs_buf_free(&sb);
            return -1;
        }
        free(path);
        char hex[65];
        bs_sha256_hex(b->raws[k].file_sha, hex);
        bs_buf_printf(&sb, "%s\"%s\":{\"sha256\":\"%s\",\"requests\":%zu,\"checked_against_manifest\":%s}",
                      k ? "," : "", file, hex, b->raws[k].n, checked ? "true" : "false");
        b->names[k] = name;
        b->shuffle[k++] = i == 1;
    }
    bs_buf_puts(&sb, "}}");
    b->r.source_json = sb.data;
    b->nw = k;
    return 0;
}

/* Every workload planned (requests over the context limit skipped), and the
 * answers linked. Negative on a failure (reported, but for out of memory). */
static int prepare_workloads(bm_run *b) {
    bm_report *r = &b->r;
    int nw = b->nw;
    r->workloads = calloc((size_t)nw, sizeof *r->workloads);
    b->rqs = calloc((size_t)nw, sizeof *b->rqs);
    if (!r->workloads || !b->rqs) return -1;
    for (int i = 0; i < nw; i++) {
        r->n_workloads++;
        const bm_raw_file *f = b->o.requests ? &b->raws[0] : &b->raws[i];
        if (bm_prepare_workload(f, b->names[i], b->shuffle[i], b->model_loaded ? &b->model : NULL, &b->lc,
                                &r->workloads[i], &b->rqs[i])) {
            cli_error("benchmark", "workload %s could not be prepared", b->names[i]);
            return -1;
        }
        if (!b->rqs[i].n) {
            cli_error("benchmark", "workload %s: no requests within the model context limit", b->names[i]);
            return -1;
        }
        if (r->workloads[i].n_skipped)
            fprintf(stderr, "benchmark: %s: %zu requests over the model's context limit skipped\n", b->names[i],
                    r->workloads[i].n_skipped);
    }
    if (bm_link_answers(b->rqs, nw)) return -1;
    return 0;
}

/* --model: `basal serve` on a loopback port, and what it says about the
 * model. Negative on a failure. */
static int start_local_server(bm_run *b) {
    if (!b->o.model_dir) return 0;
    fprintf(stderr, "benchmark: starting basal serve --model %s\n", b->o.model_dir);
    if (start_server(&b->o, &b->srv, &b->r.server_argv) != 0) return -1;
    b->base = bs_strfmt("http://127.0.0.1:%d", b->srv.port);
    b->r.url = b->base;
    b->r.started_server = 1;
    server_describe(&b->srv, b->r.model_name, &b->r);
    return 0;
}

/* Workload wi: its warm-up, then a phase per concurrency (the sequential
 * workload at 1 only). 1 when the benchmark stops (r.reason says why). */
static int run_workload(bm_run *b, int wi, bm_monitor *mon, int progress) {
    const bm_opts *o = &b->o;
    bm_report *r = &b->r;
    bm_workload *w = &r->workloads[wi];
    bm_requests *rq = &b->rqs[wi];
    fprintf(stderr, "benchmark: %s: %zu requests, %d classes; warm-up\n", w->name, rq->n, w->n_classes);
    if (warm_up(o, b->base, mon, w, rq, r->reason, sizeof r->reason)) return 1;
    int sequential = !strcmp(w->name, "sequential"), failed = 0;
    for (int ci = 0; ci < o->n_conc && !failed; ci++) {
        if (sequential && ci > 0) break;
        bm_phase *p = &r->phases[r->n_phases++];
        p->workload = wi;
        p->concurrency = sequential ? 1 : o->conc[ci];
        size_t *order = malloc((rq->n ? rq->n : 1) * sizeof *order), total = 0;
        if (!order) {
            snprintf(r->reason, sizeof r->reason, "out of memory");
            return 1;
        }
        for (size_t i = 0; i < rq->n; i++)
            if (!rq->r[i].skipped) order[total++] = i;
        if (o->max_requests > 0 && total > (size_t)o->max_requests) total = (size_t)o->max_requests;
        fprintf(stderr, "benchmark %s: %zu requests, concurrency %d\n", w->name, total, p->concurrency);
        if (run_phase(o, b->base, mon, w, rq, order, total, p, progress)) {
            failed = 1;
            snprintf(r->reason, sizeof r->reason, "%s", p->reason);
        }
        free(order);
        if (progress) fputs("\r\033[K", stderr);
    }
    return failed;
}

/* Every workload until one stops the benchmark; the report's status.
 * Negative when the phases cannot be allocated. */
static int run_workloads(bm_run *b) {
    bm_report *r = &b->r;
    r->phases = calloc((size_t)(b->nw * b->o.n_conc), sizeof *r->phases);
    if (!r->phases) return -1;
    r->status = "running";
    int progress = isatty(2), failed = 0;
    bm_monitor mon = {.r = r, .pid = b->srv.pid};
    for (int wi = 0; wi < b->nw && !failed; wi++) failed = run_workload(b, wi, &mon, progress);
    r->complete = !failed;
    int errors = 0;
    for (int i = 0; i < r->n_phases; i++)
        for (size_t k = 0; k < r->phases[i].n; k++) errors |= r->phases[i].s[k].error != BM_OK;
    r->status = failed ? "aborted" : errors ? "completed_with_errors" : "completed";
    return 0;
}

/* The text summary (or --json) on stdout, the JSON to --out, the HTML to
 * --html. The exit status: 0 when every phase completed, 130 after SIGINT,
 * else 1. */
static int write_reports(bm_run *b) {
    const bm_report *r = &b->r;
    bs_buf buf;
    bs_buf_init(&buf);
    if (b->o.json) bm_write_json(r, &buf);
    else bm_write_text(r, &buf);
    fwrite(buf.data, 1, buf.len, stdout);
    fflush(stdout);
    bs_buf_free(&buf);
    int rc = r->complete ? 0 : g_stop ? 130 : 1;
    if (b->out_f) {
        bs_buf_init(&buf);
        bm_write_json(r, &buf);
        if (buf.oom || fwrite(buf.data, 1, buf.len, b->out_f) != buf.len) rc = 1;
        bs_buf_free(&buf);
    }
    if (b->html_f) {
        bs_buf_init(&buf);
        bm_write_html(r, &buf);
        if (buf.oom || fwrite(buf.data, 1, buf.len, b->html_f) != buf.len) rc = 1;
        bs_buf_free(&buf);
    }
    return rc;
}

/* Closes --out and --html; unless the report was written, removes them (a
 * rerun may create them). Negative when a file could not be closed. */
static int close_outputs(bm_run *b, int reported) {
    int rc = 0;
    if (b->out_f && fclose(b->out_f) != 0) rc = -1;
    if (b->html_f && fclose(b->html_f) != 0) rc = -1;
    if (!reported && b->out_f) unlink(b->o.out);
    if (!reported && b->html_f) unlink(b->o.html);
    return rc;
}

static void bm_run_free(bm_run *b) {
    bm_report *r = &b->r;
    if (b->rqs) {
        for (int i = 0; i < b->nw; i++) {
            for (size_t k = 0; k < b->rqs[i].n; k++) free(b->rqs[i].r[k].answer);
            free(b->rqs[i].r);
        }
        free(b->rqs);
    }
    for (int i = 0; i < 2; i++) bm_raw_free(&b->raws[i]);
    if (r->workloads) {
        for (int i = 0; i < r->n_workloads; i++) {
            bm_workload *w = &r->workloads[i];
            free(w->name);
            for (int c = 0; c < w->n_classes; c++) free(w->classes[c]);
            for (size_t k = 0; k < w->n_skipped; k++) {
                free(w->skipped[k].id);
                free(w->skipped[k].detail);
            }
            free(w->skipped);
            free(w->payload_bytes);
            free(w->input_tokens);
        }
        free(r->workloads);
    }
    if (r->phases) {
        for (int i = 0; i < r->n_phases; i++) free(r->phases[i].s);
        free(r->phases);
    }
    if (b->model_loaded) bs_basal_free(&b->model);
    bs_letter_cache_free(&b->lc);
    free(r->source_json);
    free(r->settings_json);
    free(r->server_argv);
    free(r->model_name);
    free(r->model_ref);
    free(r->weights_sha256);
    free(b->base);
}

int cmd_benchmark(int argc, char **argv) {
    bm_run b;
    memset(&b, 0, sizeof b);
    int rc = parse_args(argc, argv, &b.o);
    if (rc) return rc < 0 ? 0 : rc;
    int reported = 0; /* the report files were written; else they are removed (a rerun may create them) */
    if (open_outputs(&b)) return 1;
    report_init(&b);
    bs_letter_cache_init(&b.lc);
    rc = 1;
    if (curl_global_init(CURL_GLOBAL_DEFAULT) != 0) return 1;
    struct sigaction sa, old;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_sigint;
    sigaction(SIGINT, &sa, &old);
    g_stop = 0;
    int model = b.o.model_dir ? check_model(&b) : url_model(&b);
    if (model < 0) goto done;
    /* workloads: read, checked against manifest.json, planned, before any load;
     * model > 0: aborted before the start, the report says why */
    if (model == 0 && ((b.o.requests ? read_replay(&b) : read_workload_files(&b)) < 0 || prepare_workloads(&b) < 0 ||
                       start_local_server(&b) < 0 || run_workloads(&b) < 0))
        goto done;
    reported = 1;
    rc = write_reports(&b);
done:
    if (close_outputs(&b, reported) < 0) rc = 1;
    stop_server(&b.srv);
    sigaction(SIGINT, &old, NULL);
    bm_run_free(&b);
    curl_global_cleanup();
    return rc;
}
