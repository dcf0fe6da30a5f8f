/* `basal doctor` (spec 06 §8): checks the build, the machine and the serve
 * configuration without loading any weight data. Every check has an area, a
 * level (✓ ok, · info, ! warning, ✗ failure), what was found and, for
 * warnings and failures, a one-line fix. Text mode prints one line per check;
 * --json prints {"ok": bool, "checks": [{"area", "level", "what", "fix"}]}.
 * Exit 1 if any check failed, 2 on a usage error, else 0. Network checks of
 * basal-rs (Hugging Face reachability, update check) are not performed. */
#include <errno.h>
#include <jansson.h>
#include <netinet/in.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/utsname.h>
#include <unistd.h>

#include "basal.h"
#include "cli/cli.h"
#include "base/util.h"
#include "cpu/gemm.h"
#include "model/basal_model.h"
#include "model/smooth.h"
#include "device/device.h"
#include "model/evidence.h"
#include "model/safetensors.h"
#include "server/config.h"
#include "hub/hub.h"
#include "server/modelref.h"

/* What the Makefile's CUDA_ARCH compiles (SASS per architecture, PTX for the newest). */
#define DOCTOR_CUDA_ARCHS "sm_80, sm_89, sm_90 (SASS) + compute_90 (PTX)"
#define DEFAULT_ADDR "127.0.0.1:8000"
#define GIB (1024.0 * 1024.0 * 1024.0)
#define RESERVE_BYTES (2ull << 30)

/* ---- the list of checks ------------------------------------------------- */

enum { A_BUILD, A_CPU, A_MEMORY, A_GPU, A_CONFIG, A_MODELS, A_DISK, A_PORT };
static const char *const area_names[] = { "build", "os/cpu", "memory", "gpu", "configuration", "models", "disk", "port" };
enum { L_OK, L_INFO, L_WARN, L_FAIL };
static const char *const level_names[] = { "ok", "info", "warning", "failure" };
static const char *const level_marks[] = { "\u2713", "\u00b7", "!", "\u2717" };

typedef struct {
    int area, level;
    char *what, *fix; /* fix only for warnings and failures */
} check_t;

typedef struct {
    check_t *v;
    size_t n, cap;
    int oom;
} report_t;

static void add(report_t *r, int area, int level, const char *fix, const char *fmt, ...)
    __attribute__((format(printf, 5, 6)));

static void add(report_t *r, int area, int level, const char *fix, const char *fmt, ...) {
    if (r->n == r->cap) {
        size_t cap = r->cap ? 2 * r->cap : 32;
        check_t *v = realloc(r->v, cap * sizeof *v);
        if (!v) { r->oom = 1; return; }
        r->v = v;
        r->cap = cap;
    }
    va_list ap;
    va_start(ap, fmt);
    char *what = NULL;
    if (vasprintf(&what, fmt, ap) < 0) what = NULL;
    va_end(ap);
    char *f = level >= L_WARN && fix ? strdup(fix) : NULL;
    if (!what || (level >= L_WARN && fix && !f)) {
        free(what);
        free(f);
        r->oom = 1;
        return;
    }
    r->v[r->n++] = (check_t){ area, level, what, f };
}

static void report_free(report_t *r) {
    for (size_t i = 0; i < r->n; i++) {
        free(r->v[i].what);
        free(r->v[i].fix);
    }
    free(r->v);
}

/* Stable, so that the checks of one area keep the order they were made in. */
static void report_sort(report_t *r) {
    for (size_t i = 1; i < r->n; i++) {
        check_t c = r->v[i];
        size_t j = i;
        for (; j > 0 && r->v[j - 1].area > c.area; j--) r->v[j] = r->v[j - 1];
        r->v[j] = c;
    }
}

static int report_failed(const report_t *r) {
    for (size_t i = 0; i < r->n; i++)
        if (r->v[i].level == L_FAIL) return 1;
    return 0;
}

static int print_json(const report_t *r) {
    json_t *root = json_object(), *arr = json_array();
    int rc = -1;
    char *s = NULL;
    if (!root || !arr) goto done;
    for (size_t i = 0; i < r->n; i++) {
        const check_t *c = &r->v[i];
        json_t *o = json_pack("{s:s, s:s, s:s, s:o}", "area", area_names[c->area], "level", level_names[c->level],
                              "what", c->what, "fix", c->fix ? json_string(c->fix) : json_null());
        if (!o || json_array_append_new(arr, o) < 0) goto done;
    }
    if (json_object_set_new(root, "ok", json_boolean(!report_failed(r))) < 0) goto done;
    rc = json_object_set_new(root, "checks", arr);
    arr = NULL;
    if (rc < 0 || !(s = json_dumps(root, JSON_INDENT(2) | JSON_PRESERVE_ORDER))) { rc = -1; goto done; }
    printf("%s\n", s);
    rc = 0;
done:
    free(s);
    json_decref(arr);
    json_decref(root);
    return rc;
}

static void print_text(const report_t *r) {
    for (size_t i = 0; i < r->n; i++) {
        const check_t *c = &r->v[i];
        printf("%s %-13s %s", level_marks[c->level], area_names[c->area], c->what);
        if (c->fix) printf(" \u2014 fix: %s", c->fix);
        putchar('\n');
    }
}

/* ---- options ------------------------------------------------------------- */

typedef struct {
    const char *config, *addr;
    const char **models;
    size_t n_models;
    int json;
} opts_t;

const cli_doc cli_doc_doctor = {
    "doctor", "[--config FILE | --model REF ...] [--addr IP:PORT] [--json]",
    "check the build, machine, configuration and models (no weight data is read)",
    "Checks the build, CPU, memory, GPUs, the serve configuration, the models (manifests,\n"
    "tokenizer and weight headers), disk space and the listen address. Without --config and\n"
    "--model the configuration comes from env BASAL_CONFIG, then ./basal-serve.yml, then the\n"
    "built-in default model, as for basal serve.\n"
    "exit status: 0 no check failed, 1 a check failed, 2 usage error\n",
};

/* 0 ok, -1 --help printed, 2 usage error. */
static int parse_opts(int argc, char **argv, opts_t *o) {
    memset(o, 0, sizeof *o);
    if (!(o->models = calloc((size_t)argc, sizeof *o->models))) {
        cli_error("doctor", "out of memory");
        return 2;
    }
    cli_list models = {o->models, 0};
    const cli_opt opts[] = {
        CLI_STR("--config", "FILE", "./basal-serve.yml if present", "BASAL_CONFIG", "serve configuration to check",
                &o->config),
        CLI_LIST("--model", "REF", BS_DEFAULT_MODEL_REF, NULL, "model directory or reference (repeatable)", &models),
        CLI_STR("--addr", "IP:PORT", "YAML addr, else " DEFAULT_ADDR, "BASAL_ADDR", "listen address to test", &o->addr),
        CLI_SW("--json", "one JSON object {\"ok\", \"checks\": [{\"area\", \"level\", \"what\", \"fix\"}]}", &o->json),
    };
    int rc = cli_parse(&cli_doc_doctor, opts, CLI_N(opts), NULL, argc, argv);
    o->n_models = models.n;
    if (rc) return rc;
    if (o->config && o->n_models) {
        cli_error("doctor", "--config cannot be combined with --model");
        return 2;
    }
    if (o->addr) {
        struct sockaddr_storage ss;
        socklen_t sl;
        bs_err e = { 0 };
        if (bs_parse_addr(o->addr, &ss, &sl, &e) < 0) {
            cli_error("doctor", "--addr: %s", e.msg);
            return 2;
        }
    }
    return 0;
}

/* ---- build, OS / CPU ----------------------------------------------------- */

static void check_build(report_t *r) {
    add(r, A_BUILD, L_OK, NULL, "basal %s (commit %s)", BASAL_VERSION, cli_git_commit());
    add(r, A_BUILD, L_OK, NULL, "backends compiled: %s", bs_device_has_cuda() ? "CPU, CUDA" : "CPU");
    if (bs_device_has_cuda()) add(r, A_BUILD, L_INFO, NULL, "CUDA architectures compiled: " DOCTOR_CUDA_ARCHS);
}

/* The value of the first "model name" line of /proc/cpuinfo, or NULL. */
static char *cpu_model_name(void) {
    FILE *f = fopen("/proc/cpuinfo", "r");
    if (!f) return NULL;
    char line[512], *out = NULL;
    while (!out && fgets(line, sizeof line, f)) {
        if (strncmp(line, "model name", 10)) continue;
        char *v = strchr(line, ':');
        if (!v) continue;
        for (v++; *v == ' ' || *v == '\t'; v++) {}
        size_t n = strcspn(v, "\r\n");
        out = strndup(v, n);
        if (!out) break;
    }
    fclose(f);
    return out;
}

static void check_cpu(report_t *r) {
    struct utsname u;
    if (uname(&u) == 0) add(r, A_CPU, L_INFO, NULL, "kernel %s %s %s", u.sysname, u.release, u.machine);
    else add(r, A_CPU, L_INFO, NULL, "kernel: uname failed (%s)", strerror(errno));
    char *model = cpu_model_name();
    long cores = sysconf(_SC_NPROCESSORS_ONLN);
    add(r, A_CPU, L_INFO, NULL, "CPU %s, %ld online cores", model ? model : "(model unknown)", cores);
    free(model);
#if defined(__x86_64__) || defined(__i386__)
    __builtin_cpu_init();
    int avx2 = __builtin_cpu_supports("avx2") != 0, fma = __builtin_cpu_supports("fma") != 0,
        f16c = __builtin_cpu_supports("f16c") != 0;
    add(r, A_CPU, avx2 && fma && f16c ? L_OK : L_INFO, NULL, "AVX2 %s, FMA %s, F16C %s", avx2 ? "yes" : "no",
        fma ? "yes" : "no", f16c ? "yes" : "no");
#else
    int avx2 = 0, fma = 0;
    add(r, A_CPU, L_INFO, NULL, "not an x86 CPU: no AVX2/FMA/F16C");
#endif
    bs_kernel k = bs_gemm_kernel();
    const char *env = getenv("BASAL_CPU");
    if (k != BS_KERNEL_GENERIC)
        add(r, A_CPU, L_OK, NULL, "CPU kernel: %s%s%s", bs_gemm_kernel_name(k), env ? "; BASAL_CPU=" : "", env ? env : "");
    else if (env && !strcmp(env, "generic"))
        add(r, A_CPU, L_INFO, NULL, "CPU kernel: %s (portable; forced by BASAL_CPU=generic)", bs_gemm_kernel_name(k));
    else
        add(r, A_CPU, L_INFO, NULL, "CPU kernel: %s (portable; %s)", bs_gemm_kernel_name(k),
            avx2 && fma ? "the vector kernel is not available" : "AVX2+FMA absent");
    /* The bf16 mode is opt-in, so its kernel is shown whatever the config says. */
    const char *bf = getenv("BASAL_BF16");
    add(r, A_CPU, L_INFO, NULL, "dtype bf16 (opt-in): kernel %s (AVX512-BF16 %s, AMX tiles %s)%s%s",
        bs_gemm_bf16_kernel_name(), bs_gemm_bf16_hw_supported() ? "yes" : "no",
        bs_gemm_amx_available() ? "granted" : "no", bf ? "; BASAL_BF16=" : "", bf ? bf : "");
    const char *i8 = getenv("BASAL_INT8");
    add(r, A_CPU, L_INFO, NULL,
        "dtype int8 (opt-in): kernel %s (AVX512-VNNI %s, AVX-VNNI %s, AMX-INT8 tiles %s; every kernel the same bits)%s%s",
        bs_gemm_i8_kernel_name(), bs_gemm_i8_supported(2) ? "yes" : "no", bs_gemm_i8_supported(1) ? "yes" : "no",
        bs_gemm_i8_supported(3) ? "granted" : "no", i8 ? "; BASAL_INT8=" : "", i8 ? i8 : "");
}

/* ---- configuration and models -------------------------------------------- */

typedef struct {
    char *dir;       /* resolved directory, or NULL */
    char *name;      /* served name when the model passed, else NULL */
    uint64_t wbytes; /* weights as stored */
    uint64_t download; /* not in the cache: bytes the Hub would send */
} model_t;

/* Where the model set comes from (06 §4.1), applied onto c. Returns 0 when c
 * holds a model list; -1 when the configuration did not load (reported). */
static int load_config(report_t *r, const opts_t *o, bs_serve_config *c) {
    bs_err e = { 0 };
    const char *file = o->config, *src = "--config";
    if (!o->n_models && !file) {
        const char *env = getenv("BASAL_CONFIG");
        if (env && *env) file = env, src = "BASAL_CONFIG";
        else if (bs_file_exists("basal-serve.yml")) file = "basal-serve.yml", src = "./basal-serve.yml";
    }
    if (file) {
        add(r, A_CONFIG, L_INFO, NULL, "configuration file %s (from %s)", file, src);
        if (bs_serve_config_load(c, file, &e) < 0) {
            add(r, A_CONFIG, L_FAIL, "fix the file (spec 06 \u00a74.2 lists the keys), or pass --model REF", "%s", e.msg);
            return -1;
        }
        add(r, A_CONFIG, L_OK, NULL, "%s: valid YAML, %zu model%s", file, c->n_models, c->n_models == 1 ? "" : "s");
        return 0;
    }
    static const char *const refs_default[] = { BS_DEFAULT_MODEL_REF };
    const char *const *refs = o->n_models ? o->models : refs_default;
    size_t n = o->n_models ? o->n_models : 1;
    if (o->n_models) add(r, A_CONFIG, L_INFO, NULL, "model set from --model (%zu model%s)", n, n == 1 ? "" : "s");
    else
        add(r, A_CONFIG, L_INFO, NULL,
            "no --model, --config, BASAL_CONFIG or ./basal-serve.yml: the built-in default model " BS_DEFAULT_MODEL_REF);
    for (size_t i = 0; i < n; i++) {
        bs_serve_model m;
        if (bs_serve_model_init(&m, &e) < 0 || !(m.path = strdup(refs[i])) ||
            bs_serve_config_add_model(c, &m, &e) < 0) {
            free(m.path);
            free(m.dtype);
            free(m.gemm_table);
            r->oom = 1;
            return -1;
        }
    }
    return 0;
}

/* The backend serve would pick (06 §4.2 backend): 1 CUDA, 0 CPU. */
static int check_backend(report_t *r, const bs_serve_config *c, int gpus) {
    const char *b = c->backend ? c->backend : "auto";
    if (!strcmp(b, "cuda")) {
        if (!bs_device_has_cuda())
            add(r, A_CONFIG, L_FAIL, "set backend auto or cpu, or use a build made with nvcc",
                "backend cuda: this build has no CUDA backend");
        else if (!gpus)
            add(r, A_CONFIG, L_FAIL, "set backend auto or cpu, or check the GPU and its driver",
                "backend cuda: no usable GPU (compute capability 8.0 or newer)");
        else add(r, A_CONFIG, L_OK, NULL, "backend cuda (%d usable GPU%s)", gpus, gpus == 1 ? "" : "s");
        return 1;
    }
    int cuda = !strcmp(b, "auto") && bs_device_has_cuda() && gpus > 0;
    add(r, A_CONFIG, L_INFO, NULL, "backend %s: the %s backend will serve", b, cuda ? "CUDA" : "CPU");
    return cuda;
}

/* A model not in the cache: what serve would download, asked of the Hub
 * (nothing is written); the free space of the cache against it. */
static void check_download(report_t *r, const char *ref, const char *rev, model_t *out) {
    bs_hub_env env;
    bs_hub_ref hr;
    bs_hub *h = NULL;
    bs_err e = { 0 };
    char *commit = NULL, shown[300];
    uint64_t bytes = 0;
    bs_hub_opts o = { .max_retries = 1 };
    memset(&hr, 0, sizeof hr);
    if (bs_hub_env_load(&env, &e) < 0) { r->oom = 1; return; }
    if (bs_hub_ref_parse(ref, rev, &hr, &e) < 0 || bs_hub_open(&h, &env, &o, &e) < 0 ||
        bs_hub_probe(h, &hr, &commit, &bytes, &e) < 0) {
        char *rd = hr.repo[0] ? bs_hub_repo_dir(&env, hr.repo) : NULL;
        add(r, A_MODELS, L_FAIL, "check the reference, the network (HF_ENDPOINT, HTTPS_PROXY) and HF_TOKEN",
            "model %s@%s is not available locally (looked in %s), and the Hub cannot provide it: %s", hr.repo, hr.rev,
            rd ? rd : env.cache, e.msg);
        free(rd);
        goto done;
    }
    bs_hub_ref_show(&hr, shown, sizeof shown);
    out->download = bytes;
    add(r, A_MODELS, L_INFO, "`basal pull REF` downloads it now; `basal serve` downloads it at the start",
        "%s: not in the Hugging Face cache yet; %.2f GB to download (commit %.8s) from %s", shown, (double)bytes / 1e9,
        commit, env.endpoint);
    int64_t free_b = bs_hub_free_bytes(env.cache);
    if (free_b >= 0 && (uint64_t)free_b < bytes)
        add(r, A_DISK, L_FAIL, "free disk space, or set HF_HUB_CACHE (or HF_HOME) to a larger disk",
            "%s: %.2f GB to download, %.2f GB free for %s", shown, (double)bytes / 1e9, (double)free_b / 1e9, env.cache);
done:
    free(commit);
    bs_hub_close(h);
    bs_hub_env_free(&env);
}

/* The decision knobs of a model entry (issue 33): served name, option
 * orders, and the calibration that will apply (a bad file fails here as it
 * would fail the start). */
static void check_knobs(report_t *r, const bs_serve_model *mc, bs_basal_model *b) {
    if (mc->name) add(r, A_MODELS, L_INFO, NULL, "%s: served as %s (name:)", b->name, mc->name);
    const char *who = mc->name ? mc->name : b->name;
    add(r, A_MODELS, L_INFO, NULL, "%s: %ld option order%s per question%s", who, mc->orders, mc->orders == 1 ? "" : "s",
        mc->orders == 1 ? " (the original order only: about half the compute, less accurate)" : "");
    bs_err e = { 0 };
    if ((mc->no_calibration || mc->calibration) &&
        bs_basal_set_calibration(b, mc->no_calibration ? NULL : mc->calibration, &e) < 0) {
        add(r, A_MODELS, L_FAIL, "fix the calibration file, or set no_calibration: true", "%s: %s", who, e.msg);
        return;
    }
    const bs_calibration *c = &b->calib;
    if (!c->calibrated) {
        add(r, A_MODELS, L_INFO, NULL, "%s: calibration %s: temperature 1 for every question type", who,
            b->calib_source);
        return;
    }
    add(r, A_MODELS, L_INFO, NULL, "%s: calibration %s: temperatures choice %g, noul %g, score %g", who,
        b->calib_source, bs_calibration_temp(c, BS_TYPE_CHOICE), bs_calibration_temp(c, BS_TYPE_NOUL),
        bs_calibration_temp(c, BS_TYPE_SCORE));
}

/* The decision log: its directory exists and is writable, with free space. */
static void check_decision_log(report_t *r, const bs_serve_config *c) {
    if (!c->decision_log) {
        add(r, A_DISK, L_INFO, NULL, "decision log off (decision_log: PATH or --log-decisions to record decisions)");
        return;
    }
    if (!strcmp(c->decision_log, "-")) {
        add(r, A_DISK, L_INFO, NULL, "decision log on standard output%s",
            c->decision_log_state ? ", with the state texts" : "");
        return;
    }
    char *dir = strdup(c->decision_log);
    if (!dir) { r->oom = 1; return; }
    char *slash = strrchr(dir, '/');
    if (!slash) strcpy(dir, ".");
    else if (slash == dir) slash[1] = 0;
    else *slash = 0;
    struct statvfs sv;
    if (access(dir, W_OK) != 0 || statvfs(dir, &sv) != 0) {
        add(r, A_DISK, L_FAIL, "create the directory or choose a writable path", "decision log %s: %s: %s",
            c->decision_log, dir, strerror(errno));
    } else {
        add(r, A_DISK, L_OK, NULL, "decision log %s (%s; %.2f GiB free)", c->decision_log,
            c->decision_log_state ? "with the state texts" : "without the state texts",
            (double)sv.f_bavail * (double)sv.f_frsize / GIB);
    }
    free(dir);
}

static long long mem_available(void);

/* Issue 34: the resident weights of each CPU mode, against the memory
 * available now. The projections are what a mode keeps in memory (f32: as
 * stored, the kernels widen them; bf16: a bf16 copy; int8w: int8 and a
 * scale per row; int8: int8 in 32-row strips, K padded to 64, a scale and
 * a row sum per row, down_proj as int8w); the embeddings and lm_head are
 * read a few rows at a time. */
static void check_fit(report_t *r, const char *name, const bs_weights *w) {
    uint64_t proj_stored = 0, proj_params = 0, rows = 0, w8a8 = 0;
    for (int i = 0; i < w->n_tensors; i++) {
        const bs_tensor *t = &w->tensors[i];
        size_t nl = strlen(t->name);
        if (!strstr(t->name, ".layers.") || nl < 12 || strcmp(t->name + nl - 12, "_proj.weight") || t->ndim != 2)
            continue;
        proj_stored += t->nbytes;
        proj_params += (uint64_t)t->numel;
        rows += (uint64_t)t->shape[0];
        /* dtype int8 (its default plan, model/smooth.h): down_proj as int8w, the rest in the W8A8 strips */
        w8a8 += strstr(t->name, "mlp.down_proj") ? (uint64_t)t->numel + (uint64_t)t->shape[0] * 4u
                                                 : bs_gemm_w8a8_bytes((int)t->shape[0], (int)t->shape[1]);
    }
    enum { MODES = 4 };
    double need[MODES] = { (double)proj_stored, (double)proj_params * 2.0, (double)proj_params + (double)rows * 4.0,
                           (double)w8a8 };
    static const char *const mode[MODES] = { "f32", "bf16", "int8w", "int8" };
    long long avail = mem_available();
    char fits[200] = "";
    for (int m = 0; m < MODES && avail >= 0; m++)
        snprintf(fits + strlen(fits), sizeof fits - strlen(fits), "%s%s %s", m ? ", " : "", mode[m],
                 need[m] + (double)RESERVE_BYTES <= (double)avail ? "fits" : "does not fit");
    char sz[MODES][32];
    for (int m = 0; m < MODES; m++) { /* MiB for the small models of tests and demos */
        if (need[m] >= GIB / 10) snprintf(sz[m], sizeof sz[m], "%.2f GiB", need[m] / GIB);
        else snprintf(sz[m], sizeof sz[m], "%.1f MiB", need[m] / (1024.0 * 1024.0));
    }
    add(r, A_MODELS, L_INFO, NULL, "%s: resident weights f32 %s, bf16 %s, int8w %s, int8 %s%s%s%s", name, sz[0], sz[1],
        sz[2], sz[3], avail >= 0 ? " (" : "", fits, avail >= 0 ? " here)" : "");
}

static void check_model(report_t *r, const bs_serve_model *mc, int cuda, model_t *out) {
    const char *ref = mc->path ? mc->path : mc->repo;
    bs_err e = { 0 };
    bs_basal_model b;
    bs_weights w;
    int loaded = 0, opened = 0;
    memset(&w, 0, sizeof w);
    const char *rev = mc->repo ? bs_hub_yaml_revision(mc->repo, mc->revision) : NULL;
    if (bs_hub_resolve(ref, rev, BS_HUB_CACHED, NULL, &out->dir, &e) < 0) {
        if (bs_hub_would_download(ref, rev)) check_download(r, ref, rev, out);
        else
            add(r, A_MODELS, L_FAIL,
                "pass a local model directory, or unset HF_HUB_OFFLINE so that `basal pull REF` (or serve) can "
                "download the model", "%s", e.msg);
        return;
    }
    const char *fix_load = "repair or re-download the model directory (the message names the file and the problem)";
    if (bs_basal_load(&b, out->dir, NULL, 0, &e) < 0) {
        add(r, A_MODELS, L_FAIL, fix_load, "%s", e.msg);
        goto done;
    }
    loaded = 1;
    if (bs_weights_open(&w, out->dir, &e) < 0) {
        add(r, A_MODELS, L_FAIL, fix_load, "%s", e.msg);
        goto done;
    }
    opened = 1;
    if (bs_weights_check_llama(&w, &b.cfg, &e) < 0) {
        add(r, A_MODELS, L_FAIL, fix_load, "%s", e.msg);
        goto done;
    }
    uint64_t bytes = 0;
    unsigned seen = 0; /* bit per bs_dtype */
    for (int i = 0; i < w.n_tensors; i++) {
        bytes += w.tensors[i].nbytes;
        seen |= 1u << w.tensors[i].dtype;
    }
    char dtypes[32] = "";
    for (int d = BS_F32; d <= BS_BF16; d++)
        if (seen & (1u << d))
            snprintf(dtypes + strlen(dtypes), sizeof dtypes - strlen(dtypes), "%s%s", *dtypes ? "+" : "",
                     bs_dtype_name((bs_dtype)d));
    if (!cuda && mc->dtype && !strcmp(mc->dtype, "f16")) {
        add(r, A_MODELS, L_FAIL, "use dtype auto, bf16 or f32 (f16 needs the CUDA backend)",
            "%s: dtype f16 needs the CUDA backend, and the CPU backend will serve", b.name);
        goto done;
    }
    if (!(out->name = strdup(mc->name ? mc->name : b.name))) { r->oom = 1; goto done; }
    out->wbytes = bytes;
    add(r, A_MODELS, L_OK, NULL, "%s: %s (%d layers, %d hidden, %s, %.2f GiB weights)", b.name, out->dir,
        b.cfg.n_layers, b.cfg.hidden, dtypes, (double)bytes / GIB);
    char int8_desc[160];
    if (mc->int8_smooth_alpha < 0)
        snprintf(int8_desc, sizeof int8_desc, "int8 weights and activations without smoothing, exact int32 sums; "
                 "attention as in bf16");
    else
        snprintf(int8_desc, sizeof int8_desc, "int8 weights and activations smoothed with alpha %g, exact int32 sums; "
                 "attention as in bf16", mc->int8_smooth_alpha > 0 ? mc->int8_smooth_alpha : BS_INT8_ALPHA_DEFAULT);
    if (!cuda) /* spec 05 §5 as amended by issue 16: the CPU compute mode of this model */
        add(r, A_MODELS, L_INFO, NULL, "%s: dtype %s: %s on the CPU (kernel %s)", b.name, mc->dtype ? mc->dtype : "auto",
            mc->dtype && !strcmp(mc->dtype, "bf16")    ? "bf16 inputs to the GEMMs and attention, f32 accumulation"
            : mc->dtype && !strcmp(mc->dtype, "int8w") ? "int8 weights (per-row scales) in the bf16 mode's compute"
            : mc->dtype && !strcmp(mc->dtype, "int8")  ? int8_desc
                                                       : "f32 compute",
            mc->dtype && !strcmp(mc->dtype, "int8") ? bs_gemm_i8_kernel_name()
            : mc->dtype && (!strcmp(mc->dtype, "bf16") || !strcmp(mc->dtype, "int8w")) ? bs_gemm_bf16_kernel_name()
                                                                                      : bs_gemm_kernel_name(bs_gemm_kernel()));
    check_knobs(r, mc, &b);
    check_fit(r, mc->name ? mc->name : b.name, &w);
    /* 03 §4: evidence spans need evidence_head.pt (a broken one already failed the load above) */
    if (b.evidence)
        add(r, A_MODELS, L_OK, NULL, "%s: evidence head %s (d %d, k %d): \"evidence\": true is answered", b.name,
            BS_EVIDENCE_FILE, b.evidence->d, b.evidence->k);
    else
        add(r, A_MODELS, L_INFO, NULL, "%s: no %s: questions with \"evidence\": true get a 422", b.name,
            BS_EVIDENCE_FILE);
    if (b.cfg.decoy_rope_theta)
        add(r, A_MODELS, L_INFO, NULL,
            "%s: config.json has a top-level rope_theta that differs from rope_parameters.rope_theta; "
            "it is ignored", b.name);
done:
    if (opened) bs_weights_close(&w);
    if (loaded) bs_basal_free(&b);
}

/* Served names and aliases unique together; default_model served (06 §4.2). */
static void check_names(report_t *r, const bs_serve_config *c, const model_t *mods, size_t n_ok) {
    size_t n = c->n_models, total = 0, dups = 0;
    for (size_t i = 0; i < n; i++) {
        if (!mods[i].name) continue;
        for (size_t a = 0; a <= c->models[i].n_aliases; a++) {
            const char *nm = a ? c->models[i].aliases[a - 1] : mods[i].name;
            int dup = 0;
            /* every earlier name: earlier models, then this model's own earlier names */
            for (size_t j = 0; j <= i && !dup; j++) {
                if (!mods[j].name) continue;
                size_t upto = j < i ? c->models[j].n_aliases + 1 : a;
                for (size_t b = 0; b < upto && !dup; b++)
                    dup = !strcmp(nm, b ? c->models[j].aliases[b - 1] : mods[j].name);
            }
            total++;
            if (dup) {
                dups++;
                add(r, A_CONFIG, L_FAIL, "give each model a distinct basal.json name, or remove the duplicate model or alias",
                    "model %s configured twice", nm);
            }
        }
    }
    if (n_ok && !dups) add(r, A_CONFIG, L_OK, NULL, "served names and aliases unique (%zu)", total);
    if (!c->default_model) {
        if (n && mods[0].name) add(r, A_CONFIG, L_OK, NULL, "default model: %s (the first model)", mods[0].name);
        return;
    }
    int served = 0;
    for (size_t i = 0; i < n && !served; i++) {
        if (!mods[i].name) continue;
        served = !strcmp(mods[i].name, c->default_model);
        for (size_t a = 0; a < c->models[i].n_aliases && !served; a++)
            served = !strcmp(c->models[i].aliases[a], c->default_model);
    }
    if (served) {
        add(r, A_CONFIG, L_OK, NULL, "default_model %s is served", c->default_model);
        return;
    }
    if (n_ok < n) {
        add(r, A_CONFIG, L_INFO, NULL, "default_model %s: not among the models that passed (not every model did)",
            c->default_model);
        return;
    }
    bs_buf b;
    bs_buf_init(&b);
    for (size_t i = 0; i < n; i++) bs_buf_printf(&b, "%s\"%s\"", i ? ", " : "", mods[i].name);
    if (b.oom) r->oom = 1;
    add(r, A_CONFIG, L_FAIL, "set default_model to one of the served names or aliases",
        "default model %s is not served ([%s])", c->default_model, b.data && !b.oom ? b.data : "");
    bs_buf_free(&b);
}

/* The checks `basal serve` makes before loading (server/config_check.c), run
 * as serve runs them, so that doctor fails exactly when serve would refuse
 * to start. */
static void check_serve_accepts(report_t *r, bs_serve_config *c, const opts_t *o) {
    bs_err e = { 0 };
    bs_serve_checked k;
    const char *fix = "correct what the message names (basal serve makes this same check before loading)";
    if (bs_serve_config_apply_env(c, o->addr, NULL, NULL, NULL, &e) < 0 || bs_serve_config_check(c, BS_HUB_CACHED, &k, &e) < 0) {
        add(r, A_CONFIG, L_FAIL, fix, "basal serve would refuse this configuration: %s", e.msg);
        return;
    }
    add(r, A_CONFIG, L_OK, NULL, "basal serve accepts this configuration (%s%s, %zu model%s%s)",
        c->api_key_env ? "API key from " : "no API key", c->api_key_env ? c->api_key_env : "", k.n, k.n == 1 ? "" : "s",
        k.n_uncached ? "; the names of models still to download are checked when serve has them" : "");
    bs_serve_checked_free(&k);
}

/* ---- memory, GPU, disk, port ---------------------------------------------- */

/* MemAvailable in bytes, or -1. */
static long long mem_available(void) {
    FILE *f = fopen("/proc/meminfo", "r");
    if (!f) return -1;
    char line[256];
    long long kb = -1;
    while (fgets(line, sizeof line, f))
        if (sscanf(line, "MemAvailable: %lld kB", &kb) == 1) break;
    fclose(f);
    return kb < 0 ? -1 : kb * 1024;
}

static void check_memory(report_t *r, uint64_t weights, size_t n_ok) {
    long long avail = mem_available();
    if (avail < 0) {
        add(r, A_MEMORY, L_INFO, NULL, "MemAvailable not found in /proc/meminfo; not checked");
        return;
    }
    double a = (double)avail / GIB, w = (double)weights / GIB, res = (double)RESERVE_BYTES / GIB;
    if (!n_ok) {
        add(r, A_MEMORY, L_INFO, NULL, "%.2f GiB available; no model passed, so no weights to compare", a);
        return;
    }
    const char *fix = "free memory, or serve fewer or smaller models";
    if ((uint64_t)avail >= weights + RESERVE_BYTES)
        add(r, A_MEMORY, L_OK, NULL, "%.2f GiB available for %.2f GiB of weights + %.0f GiB reserve", a, w, res);
    else if ((uint64_t)avail >= weights)
        add(r, A_MEMORY, L_WARN, fix, "%.2f GiB available: %.2f GiB of weights fit, but less than the %.0f GiB reserve remains",
            a, w, res);
    else
        add(r, A_MEMORY, L_FAIL, fix, "%.2f GiB available, less than the %.2f GiB of weights (+ %.0f GiB reserve)", a, w,
            res);
}

static void check_gpu(report_t *r, int gpus) {
    if (!bs_device_has_cuda()) return;
    if (gpus > 0) add(r, A_GPU, L_OK, NULL, "%d usable GPU%s (compute capability 8.0 or newer)", gpus, gpus == 1 ? "" : "s");
    else add(r, A_GPU, L_INFO, NULL, "no usable GPU, the CPU backend will serve");
    /* cuBLAS is loaded only when the CUDA backend starts: try it now */
    long v = 0;
    bs_err e = {0};
    if (bs_device_cublas_version(&v, &e) == BS_OK)
        add(r, A_GPU, L_OK, NULL, "cuBLASLt %ld.%ld.%ld loads (the CUDA backend's GEMMs)", v / 10000, v / 100 % 100, v % 100);
    else if (gpus > 0)
        add(r, A_GPU, L_FAIL, "install the cuBLAS of this CUDA version, or serve with backend cpu", "%s", e.msg);
    else
        add(r, A_GPU, L_INFO, NULL, "%s", e.msg);
}

/* 06 §8: free space in the cache directory (§3 R3), measured on its nearest
 * existing ancestor when it does not exist yet. */
static void check_cache_disk(report_t *r) {
    char *dir = NULL;
    const char *src = NULL;
    bs_err e = {0};
    if (bs_cache_dir(&dir, &src, &e) < 0) {
        r->oom = 1;
        return;
    }
    char *at = bs_strfmt("%s", dir);
    struct statvfs sv;
    while (at && statvfs(at, &sv) != 0) {
        char *slash = strrchr(at, '/');
        if (!slash || slash == at) { /* reached the root or a relative start */
            snprintf(at, strlen(at) + 1, "%s", slash == at ? "/" : ".");
            if (statvfs(at, &sv) != 0) { free(at); at = NULL; }
            break;
        }
        *slash = 0;
    }
    if (!at) {
        add(r, A_DISK, L_WARN, "check the filesystem of the cache directory", "cache directory %s (from %s): %s", dir,
            src, strerror(errno));
    } else {
        double free_b = (double)sv.f_bavail * (double)sv.f_frsize;
        const char *note = strcmp(at, dir) ? ", not created yet" : "";
        if (free_b < GIB)
            add(r, A_DISK, L_WARN, "free space there, or point BASAL_HOME or XDG_CACHE_HOME elsewhere",
                "%.2f GiB free for the cache directory %s (from %s%s; under 1 GiB)", free_b / GIB, dir, src, note);
        else add(r, A_DISK, L_OK, NULL, "%.2f GiB free for the cache directory %s (from %s%s)", free_b / GIB, dir, src, note);
    }
    free(at);
    free(dir);
}

/* The Hugging Face cache (06 §3 R2): where it is, its free space, where
 * downloads come from and with which token (never shown). */
static void check_hf_cache(report_t *r) {
    bs_hub_env env;
    bs_err e = { 0 };
    if (bs_hub_env_load(&env, &e) < 0) { r->oom = 1; return; }
    int64_t free_b = bs_hub_free_bytes(env.cache);
    struct stat st;
    const char *note = stat(env.cache, &st) == 0 ? "" : ", not created yet";
    if (free_b < 0)
        add(r, A_DISK, L_WARN, "check the filesystem of the cache", "Hugging Face cache %s (from %s%s): free space unknown",
            env.cache, env.cache_from, note);
    else
        add(r, A_DISK, free_b < (int64_t)GIB ? L_WARN : L_OK,
            free_b < (int64_t)GIB ? "free space there, or set HF_HUB_CACHE (or HF_HOME) to a larger disk" : NULL,
            "%.2f GiB free for the Hugging Face cache %s (from %s%s)", (double)free_b / GIB, env.cache, env.cache_from,
            note);
    if (env.offline)
        add(r, A_DISK, L_INFO, NULL, "HF_HUB_OFFLINE is set: models come from the cache only, nothing is downloaded");
    else
        add(r, A_DISK, L_INFO, NULL, "models missing from the cache are downloaded from %s (%s%s)", env.endpoint,
            env.token ? "token from " : "no token", env.token ? env.token_from : "");
    bs_hub_env_free(&env);
}

static void check_disk(report_t *r, const char *dir) {
    check_cache_disk(r);
    check_hf_cache(r);
    if (!dir) {
        add(r, A_DISK, L_INFO, NULL, "not checked (no model directory was found)");
        return;
    }
    struct statvfs sv;
    if (statvfs(dir, &sv) != 0) {
        add(r, A_DISK, L_WARN, "check the directory's filesystem", "statvfs %s: %s", dir, strerror(errno));
        return;
    }
    double free_b = (double)sv.f_bavail * (double)sv.f_frsize;
    if (free_b < GIB)
        add(r, A_DISK, L_WARN, "free space on that filesystem",
            "%.2f GiB free on the filesystem of %s (under 1 GiB)", free_b / GIB, dir);
    else add(r, A_DISK, L_OK, NULL, "%.2f GiB free on the filesystem of %s", free_b / GIB, dir);
}

/* yaml_addr: the configuration file's addr, or NULL. */
static void check_port(report_t *r, const opts_t *o, const char *yaml_addr) {
    const char *env = getenv("BASAL_ADDR"), *addr, *src;
    if (o->addr) addr = o->addr, src = "--addr";
    else if (env && *env) addr = env, src = "BASAL_ADDR";
    else if (yaml_addr) addr = yaml_addr, src = "YAML addr";
    else addr = DEFAULT_ADDR, src = "default";
    struct sockaddr_storage ss;
    socklen_t sl;
    bs_err e = { 0 };
    if (bs_parse_addr(addr, &ss, &sl, &e) < 0) {
        add(r, A_PORT, L_FAIL, "use IP:PORT or [IPv6]:PORT", "%s (from %s)", e.msg, src);
        return;
    }
    const char *fix = "choose another --addr or stop the other server";
    int fd = socket(ss.ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) {
        add(r, A_PORT, L_FAIL, fix, "%s: socket: %s", addr, strerror(errno));
        return;
    }
    int one = 1; /* as serve binds it */
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    if (ss.ss_family == AF_INET6) setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &one, sizeof one);
    if (bind(fd, (struct sockaddr *)&ss, sl) < 0 || listen(fd, 1) < 0) {
        int err = errno;
        const char *why = err == EADDRINUSE      ? "address in use"
                          : err == EACCES        ? "permission denied (ports below 1024 need privileges)"
                          : err == EADDRNOTAVAIL ? "address not available on this host"
                                                 : strerror(err);
        add(r, A_PORT, L_FAIL, fix, "%s (from %s): cannot bind: %s", addr, src, why);
    } else {
        add(r, A_PORT, L_OK, NULL, "%s (from %s) can be bound", addr, src);
    }
    close(fd);
}

/* ---- the command ------------------------------------------------------------ */

int cmd_doctor(int argc, char **argv) {
    opts_t o;
    int status = parse_opts(argc, argv, &o);
    if (status) {
        free(o.models);
        return status < 0 ? 0 : status;
    }
    status = 1;
    report_t r = { 0 };
    bs_serve_config c;
    bs_err e = { 0 };
    model_t *mods = NULL;
    size_t n_ok = 0;
    uint64_t weights = 0;
    int cfg_ok = 0;
    char *yaml_addr = NULL; /* the file's addr, before the environment and the flags */
    if (bs_serve_config_init(&c, &e) < 0) {
        cli_error("doctor", "%s", e.msg);
        free(o.models);
        return 1;
    }
    int gpus = bs_device_cuda_count();

    check_build(&r);
    check_cpu(&r);
    if (load_config(&r, &o, &c) == 0) {
        cfg_ok = 1;
        if (!(mods = calloc(c.n_models ? c.n_models : 1, sizeof *mods))) { r.oom = 1; goto done; }
        int cuda = check_backend(&r, &c, gpus);
        for (size_t i = 0; i < c.n_models; i++) {
            check_model(&r, &c.models[i], cuda, &mods[i]);
            if (mods[i].name) n_ok++, weights += mods[i].wbytes;
        }
        check_names(&r, &c, mods, n_ok);
        if (c.addr && !(yaml_addr = strdup(c.addr))) { r.oom = 1; goto done; }
        check_serve_accepts(&r, &c, &o);
    } else {
        add(&r, A_MODELS, L_INFO, NULL, "not checked (the configuration did not load)");
    }
    check_memory(&r, weights, n_ok);
    check_gpu(&r, gpus);
    const char *first_dir = NULL; /* of the first model that resolved */
    for (size_t i = 0; cfg_ok && i < c.n_models && !first_dir; i++) first_dir = mods[i].dir;
    check_disk(&r, first_dir);
    if (cfg_ok) check_decision_log(&r, &c);
    check_port(&r, &o, cfg_ok ? yaml_addr : NULL);
done:
    if (r.oom) {
        cli_error("doctor", "out of memory");
    } else {
        report_sort(&r);
        if (o.json) {
            if (print_json(&r) < 0) cli_error("doctor", "out of memory");
            else status = report_failed(&r);
        } else {
            print_text(&r);
            status = report_failed(&r);
        }
    }
    for (size_t i = 0; mods && i < c.n_models; i++) {
        free(mods[i].dir);
        free(mods[i].name);
    }
    free(mods);
    free(yaml_addr);
    bs_serve_config_free(&c);
    report_free(&r);
    free(o.models);
    return status;
}
