/* `basal init [PATH|--out FILE] [--model REF ...] [--force]`: writes a commented
 * basal-serve.yml (spec 06 §4.2) with every key the loader accepts. The
 * defaults come from the loader's own initialisers (server/config.h), so the
 * file states what `basal serve` does without it. Default lines are written
 * commented out as `#key: value` (no space after '#'): uncommenting one
 * changes nothing, and a later release with other defaults is not pinned to
 * these. Prose comments have a space after '#'. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli/cli.h"
#include "base/util.h"
#include "server/config.h"
#include "hub/hub.h"
#include "server/modelref.h"

const cli_doc cli_doc_init = {
    "init", "[PATH | --out FILE] [--model REF ...] [--force]",
    "write a commented basal-serve.yml with every key and its default",
    "PATH (or --out FILE) defaults to ./basal-serve.yml, which `basal serve` and `basal doctor`\n"
    "read when started in that directory without --model and --config; - writes to stdout. An\n"
    "existing PATH is left alone unless --force is given. One entry per --model (default\n"
    "Remek/basal-1.5-4.5B); the total size of their weights goes to stderr when known (a local\n"
    "directory or cache snapshot, or a published release). Lines `#key: value` show a default:\n"
    "remove the '#' to change it. Check the result with `basal doctor --config PATH`.\n",
};

/* A YAML double-quoted scalar; control characters are refused. */
static int put_quoted(FILE *f, const char *s) {
    for (const char *p = s; *p; p++)
        if ((unsigned char)*p < 0x20 || *p == 0x7f) return -1;
    fputc('"', f);
    for (const char *p = s; *p; p++) {
        if (*p == '"' || *p == '\\') fputc('\\', f);
        fputc(*p, f);
    }
    fputc('"', f);
    return 0;
}

/* The model entry: a local directory as an absolute path, else a repository
 * reference (owner/name[@revision] or a short name). */
static int put_model(FILE *f, const char *ref) {
    struct stat st;
    if (stat(ref, &st) == 0 && S_ISDIR(st.st_mode)) {
        char *abs = realpath(ref, NULL);
        fputs("  - path: ", f);
        int rc = put_quoted(f, abs ? abs : ref);
        free(abs);
        fputs("\n    # repo: Remek/basal-1.5-4.5B   (instead of path: owner/name, or mini, 4.5B, max, from the\n"
              "    #   Hugging Face cache, downloaded into it at the first start; `basal pull` downloads now)\n"
              "    # revision: main   (only with repo: a branch, a tag or a full commit)\n", f);
        return rc;
    }
    const char *at = strchr(ref, '@');
    char *repo = bs_strfmt("%.*s", (int)(at ? (size_t)(at - ref) : strlen(ref)), ref);
    if (!repo) return -1;
    fputs("  - repo: ", f);
    int rc = put_quoted(f, repo);
    free(repo);
    fputs("\n    #   owner/name, or mini, 4.5B, max; from the Hugging Face cache ($HF_HUB_CACHE, else\n"
          "    #   $HF_HOME/hub, else ~/.cache/huggingface/hub), downloaded into it at the first start\n"
          "    #   (`basal pull` downloads now).\n"
          "    # path: /a/local/model/directory   (instead of repo)\n", f);
    if (at) {
        fputs("    revision: ", f);
        rc |= put_quoted(f, at + 1);
        fputc('\n', f);
    } else {
        fputs("    # revision: main   (a commit, a unique commit prefix, or a name in refs/)\n", f);
    }
    return rc;
}

/* Bytes of the model's weights: its *.safetensors files when the reference
 * resolves to a local directory, else the published size of a release
 * (06 §10), else 0 (unknown). */
static uint64_t model_bytes(const char *ref) {
    static const struct { const char *name; uint64_t bytes; } published[] = {
        {"mini", 3200000000ull}, {"basal-1.5-mini", 3200000000ull}, {"Remek/basal-1.5-mini", 3200000000ull},
        {"4.5B", 9500000000ull}, {"basal-1.5-4.5B", 9500000000ull}, {"Remek/basal-1.5-4.5B", 9500000000ull},
        {"max", 22300000000ull}, {"basal-1.5-max", 22300000000ull}, {"Remek/basal-1.5-max", 22300000000ull},
    };
    char *dir = NULL;
    uint64_t total = 0;
    if (bs_hub_resolve(ref, NULL, BS_HUB_CACHED, NULL, &dir, NULL) == 0) {
        DIR *d = opendir(dir);
        struct dirent *de;
        while (d && (de = readdir(d))) {
            size_t n = strlen(de->d_name);
            if (n < 12 || strcmp(de->d_name + n - 12, ".safetensors")) continue;
            char *p = bs_path_join(dir, de->d_name);
            struct stat st;
            if (p && stat(p, &st) == 0) total += (uint64_t)st.st_size; /* cache snapshots hold links */
            free(p);
        }
        if (d) closedir(d);
        free(dir);
        if (total) return total;
    }
    size_t rl = strcspn(ref, "@");
    for (size_t i = 0; i < sizeof published / sizeof *published; i++)
        if (strlen(published[i].name) == rl && !strncmp(ref, published[i].name, rl)) return published[i].bytes;
    return 0;
}

/* The keys of the whole server, each commented with its default, up to "models:". */
static void put_server_keys(FILE *f, const bs_serve_config *c) {
    fprintf(f,
            "# basal-serve.yml: the configuration of `basal serve` (written by `basal init`).\n"
            "# basal serve reads it with --config FILE, or from env BASAL_CONFIG, or as ./basal-serve.yml\n"
            "# when started in this directory without --model and --config. Check it with\n"
            "#   basal doctor --config basal-serve.yml\n"
            "# Every key but models is optional. A line `#key: value` shows the default: remove the '#'\n"
            "# to change it. Unknown keys are refused.\n"
            "\n"
            "# Listen address, IP:port or [IPv6]:port (host names are refused; port 0 picks a free one).\n"
            "# --addr and env BASAL_ADDR win over this key.\n"
            "#addr: 127.0.0.1:8000\n"
            "\n"
            "# default_model: NAME   (a served name or alias; default: the first model below) for\n"
            "# requests whose \"model\" is missing or not a string.\n"
            "\n"
            "# Waiting + running requests of all models; more are answered 529 with Retry-After: 1.\n"
            "#max_inflight: %ld\n"
            "\n"
            "# Least work (ms) of a long lane between two hand-overs of the device.\n"
            "#long_slice_ms: %ld\n"
            "\n"
            "# Reported by GET /v1/models.\n"
            "#release_date: \"%s\"\n"
            "\n"
            "# One access-log line per request (time, request id, client, status, model, timings);\n"
            "# --access-log on|off and env BASAL_ACCESS_LOG win over this key.\n"
            "#access_log: %s\n"
            "\n"
            "# access_log_file: PATH   (default: stderr) append the access log to a file; SIGHUP reopens\n"
            "# it (for logrotate). Also --access-log-file, env BASAL_ACCESS_LOG_FILE.\n"
            "\n"
            "# Every log line as text or as one JSON object (also --log-format, env BASAL_LOG_FORMAT).\n"
            "#log_format: %s\n"
            "\n"
            "# cors_origins: [\"https://app.example\"]   (default: none, CORS off; \"*\" = any origin):\n"
            "# browser pages of these origins may call the API; OPTIONS preflights get 204. Also --cors,\n"
            "# env BASAL_CORS.\n"
            "\n"
            "# The playground page on GET / (false: / answers 404; also --no-ui).\n"
            "#ui: %s\n"
            "\n"
            "# Prometheus text on GET /metrics (also --metrics).\n"
            "#metrics: %s\n"
            "\n"
            "# decision_log: PATH   (default: off; \"-\" = stdout) one JSON line per answered request:\n"
            "# time, request id, model, revision, dtype, orders, calibration, the request's SHA-256, the\n"
            "# answers and usage as sent, latency. Appended by its own thread; SIGHUP reopens it. Also\n"
            "# --log-decisions. decision_log_state: true also records each request's state (privacy:\n"
            "# off by default; also --log-decisions-state).\n"
            "#decision_log_state: false\n"
            "\n"
            "# gemm_cache: DIR   (default: <cache dir>/gemm, the cache dir being $BASAL_HOME/.cache,\n"
            "# else $XDG_CACHE_HOME/basal, else ~/.cache/basal): generated CUDA GEMM tables.\n"
            "\n"
            "# api_key_env: BASAL_API_KEY   (default: none, no authentication): the environment variable\n"
            "# holding the key that requests must send as Authorization: Bearer KEY. Also --api-key-env.\n"
            "\n"
            "# Request body limit in bytes; larger bodies get 413.\n"
            "#max_body_bytes: %lld\n"
            "\n"
            "# Compute backend: auto (CUDA if built in and a GPU is present, else the CPU), cpu or cuda.\n"
            "#backend: %s\n"
            "\n"
            "# CPU compute threads, one pool for the process; 0 = the online CPUs.\n"
            "#threads: %ld\n"
            "\n"
            "# HTTP deadlines in seconds: the request headers, the request body, an idle keep-alive.\n"
            "#header_timeout_s: %ld\n"
            "#body_timeout_s: %ld\n"
            "#keepalive_timeout_s: %ld\n"
            "\n"
            "# Open connections at most (0 = max_inflight + 1024 within the descriptor limit), and per\n"
            "# client address.\n"
            "#max_connections: %ld\n"
            "#max_client_connections: %ld\n"
            "\n"
            "# The models served, one entry each (at least one). Served names come from each model's\n"
            "# basal.json; names and aliases must be unique together.\n"
            "models:\n",
            c->max_inflight, c->long_slice_ms, c->release_date, c->access_log ? "true" : "false",
            c->log_format, c->ui ? "true" : "false", c->metrics ? "true" : "false", c->max_body_bytes, c->backend, c->threads, c->header_timeout_s,
            c->body_timeout_s, c->keepalive_timeout_s, c->max_connections, c->max_client_connections);
}

/* The commented keys of one models entry, after its path or repo line. */
static void put_model_keys(FILE *f, const bs_serve_model *m) {
    fprintf(f,
            "    # Precision: auto (f16 on CUDA, f32 compute on the CPU), f16 (CUDA only), bf16, f32,\n"
            "    # int8w (int8 weights, CPU) or int8 (int8 weights and activations, CPU).\n"
            "    #dtype: %s\n"
            "    # dtype int8: SmoothQuant's alpha in (0, 1]; 0 turns the smoothing off (also --int8-smooth-alpha).\n"
            "    #int8_smooth_alpha: 0.5\n"
            "    # CUDA GEMM table: auto, none, or a file from `basal gemm-search` (ignored on the CPU).\n"
            "    #gemm_table: %s\n"
            "    # Packed tokens admitted per batch.\n"
            "    #max_batch_tokens: %ld\n"
            "    # Admission order: hrrn (highest response ratio next) or fifo.\n"
            "    #schedule: %s\n"
            "    # Requests above this many packed tokens use the long lane; 0 = no long lane.\n"
            "    #long_tokens: %ld\n"
            "    # State K/V cache budget of this model's engine, MiB (0 = off).\n"
            "    #state_cache_mb: %ld\n"
            "    # Longest packed tree row, tokens.\n"
            "    #tree_max_tokens: %ld\n"
            "    # Questions per request, and distinct prompt tokens per request.\n"
            "    #max_questions: %ld\n"
            "    #max_request_tokens: %ld\n"
            "    # Do not precompute the template prefixes.\n"
            "    #no_prefix_cache: %s\n"
            "    # Extra names routed to this model (responses report the served name).\n"
            "    #aliases: []\n"
            "    # name: NAME   (default: basal.json's name) the served name (also --name).\n"
            "    # Option orders per question: 2 = original and reversed, averaged; 1 = the original\n"
            "    # order only (about half the compute, less accurate). Also --orders.\n"
            "    #orders: %ld\n"
            "    # calibration: FILE   (default: the model's CALIBRATION.json) per-type temperatures\n"
            "    # and max_error thresholds from another file (also --calibration).\n"
            "    # No calibration at all: temperature 1 for every type (also --no-calibration).\n"
            "    #no_calibration: %s\n",
            m->dtype, m->gemm_table, m->max_batch_tokens, m->schedule_fifo ? "fifo" : "hrrn", m->long_tokens,
            m->state_cache_mb, m->tree_max_tokens, m->max_questions, m->max_request_tokens,
            m->no_prefix_cache ? "true" : "false", m->orders, m->no_calibration ? "true" : "false");
}

static int write_config(FILE *f, const cli_list *models, const bs_serve_config *c, const bs_serve_model *m) {
    put_server_keys(f, c);
    for (size_t i = 0; i < models->n; i++) {
        if (put_model(f, models->v[i]) < 0) return -1;
        put_model_keys(f, m);
    }
    return ferror(f) ? -1 : 0;
}

int cmd_init(int argc, char **argv) {
    const char *pos_v[1] = {"basal-serve.yml"}, *out = NULL;
    int force = 0;
    cli_pos pos = {pos_v, 0, 1};
    const char **mv = calloc((size_t)argc + 1, sizeof *mv);
    cli_list models = {mv, 0};
    if (!mv) return 1;
    const cli_opt opts[] = {
        CLI_LIST("--model", "REF", BS_DEFAULT_MODEL_REF, NULL,
                 "a model entry, repeatable: a directory (written as an absolute path) or a reference", &models),
        CLI_STR("--out", "FILE", "./basal-serve.yml", NULL, "the file to write (the same as PATH; - = stdout)", &out),
        CLI_SW("--force", "overwrite PATH if it exists", &force),
    };
    int rc = cli_parse(&cli_doc_init, opts, CLI_N(opts), &pos, argc, argv);
    if (!rc && out && pos.n) {
        cli_error("init", "give the output as PATH or as --out FILE, not both");
        rc = 2;
    }
    if (rc) {
        free(mv);
        return rc < 0 ? 0 : rc;
    }
    if (!models.n) models.v[models.n++] = BS_DEFAULT_MODEL_REF;
    const char *path = out ? out : pos_v[0];
    int to_stdout = !strcmp(path, "-");

    bs_serve_config c;
    bs_serve_model m;
    bs_err e = {0};
    if (bs_serve_config_init(&c, &e) < 0) {
        cli_error("init", "%s", e.msg);
        return 1;
    }
    if (bs_serve_model_init(&m, &e) < 0) {
        cli_error("init", "%s", e.msg);
        bs_serve_config_free(&c);
        return 1;
    }
    int status = 1;
    FILE *f = stdout;
    if (!to_stdout) {
        /* O_EXCL: the existence check and the creation are one step */
        int fd = open(path, O_WRONLY | O_CREAT | O_CLOEXEC | (force ? O_TRUNC : O_EXCL), 0644);
        if (fd < 0 && errno == EEXIST) {
            cli_error("init", "%s exists; choose a new output path (or --force to overwrite it)", path);
            goto done;
        }
        if (fd < 0 || !(f = fdopen(fd, "w"))) {
            cli_error("init", "%s: %s", path, strerror(errno));
            if (fd >= 0) close(fd);
            goto done;
        }
    }
    int wrc = write_config(f, &models, &c, &m);
    if (!to_stdout && fclose(f) != 0) wrc = -1;
    else if (to_stdout && fflush(f) != 0) wrc = -1;
    if (wrc < 0) {
        cli_error("init", "%s: cannot write the file (or the model reference has control characters)", path);
        goto done;
    }
    if (!to_stdout)
        cli_error("init", "wrote %s\ncheck it with: basal doctor --config %s\nserve it with: basal serve --config %s",
                path, path, path);
    {
        uint64_t total = 0;
        int unknown = 0;
        for (size_t i = 0; i < models.n; i++) {
            uint64_t b = model_bytes(models.v[i]);
            total += b;
            unknown += !b;
        }
        if (total)
            cli_error("init", "the weights of the %s take %.1f GB%s", models.n > 1 ? "models" : "model",
                    (double)total / 1e9, unknown ? " (plus models of unknown size)" : "");
    }
    status = 0;
done:
    free(mv);
    bs_serve_config_free(&c);
    free(m.dtype);
    free(m.gemm_table);
    return status;
}
