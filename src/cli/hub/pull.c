/* basal pull REF... (issue 31): download models from the Hugging Face Hub
 * into the cache the Hugging Face tools share, check them, and print where
 * they are; without REF, the models `basal serve` would serve here. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "base/util.h"
#include "hub/hub.h"
#include "server/config.h"
#include "server/modelref.h"

const cli_doc cli_doc_pull = {
    "pull", "[REF ...] [--revision REV] [--config FILE] [--offline]",
    "download models from the Hugging Face Hub into the shared cache",
    "REF: mini, 4.5B, max (the published releases at their pinned commits), owner/name or\n"
    "owner/name@revision (a branch, tag or full commit; a bare name is one of Remek's). Without\n"
    "REF: the models `basal serve` would serve here (--config FILE, else BASAL_CONFIG, else\n"
    "./basal-serve.yml, else Remek/basal-1.5-4.5B).\n"
    "Only the files a Basal model reads are fetched (config, tokenizer files, basal.json,\n"
    "chat_template.jinja, CALIBRATION*.json, the weights, evidence_head.pt); each is checked\n"
    "against the Hub's SHA-256 (git SHA-1 for small files) before it enters the cache, and an\n"
    "interrupted download resumes where it stopped. A model already in the cache at a full\n"
    "commit needs no network. Prints one line per model on stdout: owner/name@commit and the\n"
    "snapshot directory.\n"
    "The cache is huggingface_hub's: $HF_HUB_CACHE, else $HF_HOME/hub, else\n"
    "~/.cache/huggingface/hub. Environment: HF_ENDPOINT (default https://huggingface.co),\n"
    "HF_TOKEN (else the file HF_TOKEN_PATH, default $HF_HOME/token; never shown) for gated or\n"
    "private models, HF_HUB_OFFLINE=1 (as --offline: the cache only), HTTPS_PROXY, NO_PROXY.\n"
    "Progress on stderr: a bar with the bytes, the rate and the time left on a terminal,\n"
    "else a timestamped line every 5 s (BASAL_PROGRESS_INTERVAL_MS; BASAL_PROGRESS=off: none).\n"
    "Exit status: 0 every model is in the cache; 1 one or more failed (the others are still\n"
    "fetched); 2 usage error.\n",
};

/* The references of the serve configuration (06 §4.1) into refs/revs
 * (sized for c's models); path entries are directories, nothing to pull. */
static int config_refs(const char *config, const char **refs, const char **revs, size_t cap, size_t *n,
                       bs_serve_config *c) {
    bs_err e = { 0 };
    const char *file = config, *env = getenv("BASAL_CONFIG");
    if (!file && env && *env) file = env;
    if (!file && bs_file_exists("basal-serve.yml")) file = "basal-serve.yml";
    *n = 0;
    if (!file) {
        cli_warn("pull", "no REF, --config, BASAL_CONFIG or ./basal-serve.yml: pulling the default model %s",
                 BS_DEFAULT_MODEL_REF);
        refs[(*n)++] = BS_DEFAULT_MODEL_REF;
        return 0;
    }
    if (bs_serve_config_load(c, file, &e) < 0) {
        cli_error("pull", "%s", e.msg);
        return 1;
    }
    for (size_t i = 0; i < c->n_models && *n < cap; i++) {
        const bs_serve_model *m = &c->models[i];
        if (m->path) {
            cli_error("pull", "%s: a local directory, nothing to download", m->path);
            continue;
        }
        refs[*n] = m->repo;
        revs[(*n)++] = bs_hub_yaml_revision(m->repo, m->revision);
    }
    return 0;
}

/* A config file holds at most this many models for pull (more are refused by nothing else, but a
 * serve.yml with thousands of models is not a use this command serves). */
#define MAX_CONFIG_MODELS 4096

int cmd_pull(int argc, char **argv) {
    const char **pv = calloc((size_t)argc + 1, sizeof *pv);
    const char *revision = NULL, *config = NULL;
    const char **refs = NULL, **revs = NULL;
    int offline = 0, status = 0;
    bs_serve_config c;
    if (!pv || bs_serve_config_init(&c, NULL) < 0) {
        free(pv);
        return 1;
    }
    cli_pos pos = { pv, 0, argc };
    const cli_opt opts[] = {
        CLI_STR("--revision", "REV", "the pinned commit of a release, else main", NULL,
                "the revision to pull (one REF only): a branch, tag or full commit", &revision),
        CLI_STR("--config", "FILE", "", "BASAL_CONFIG", "without REF: pull the models of this serve.yml", &config),
        CLI_SW("--offline", "use the cache only, never the network (as HF_HUB_OFFLINE=1)", &offline),
    };
    int rc = cli_parse(&cli_doc_pull, opts, CLI_N(opts), &pos, argc, argv);
    if (!rc && revision && pos.n != 1) {
        cli_error("pull", "--revision needs exactly one REF");
        rc = 2;
    }
    if (!rc && config && pos.n) {
        cli_error("pull", "give REFs or --config, not both");
        rc = 2;
    }
    if (rc) {
        bs_serve_config_free(&c);
        free(pv);
        return rc < 0 ? 0 : rc;
    }
    if (offline) setenv("HF_HUB_OFFLINE", "1", 1);
    size_t n = (size_t)pos.n, cap = n > MAX_CONFIG_MODELS ? n : MAX_CONFIG_MODELS;
    if (!(refs = calloc(cap + 1, sizeof *refs)) || !(revs = calloc(cap + 1, sizeof *revs))) {
        cli_error("pull", "out of memory");
        status = 1;
        goto done;
    }
    if (n) {
        memcpy(refs, pv, n * sizeof *refs);
        revs[0] = revision;
    } else if ((status = config_refs(config, refs, revs, cap, &n, &c)) != 0) {
        goto done;
    }
    /* every reference is checked before anything is downloaded: a typo is a usage error */
    for (size_t i = 0; i < n; i++) {
        bs_hub_ref r;
        bs_err e = { 0 };
        int is_dir = !revs[i] && bs_file_exists(refs[i]);
        if (!is_dir && (refs[i][0] == '/' || refs[i][0] == '.' || refs[i][0] == '~')) {
            cli_error("pull", "%s: no such directory", refs[i]);
            status = 2;
        } else if (!is_dir && bs_hub_ref_parse(refs[i], revs[i], &r, &e) < 0) {
            cli_error("pull", "%s", e.msg);
            status = 2;
        }
    }
    if (status) goto done;
    for (size_t i = 0; i < n; i++) {
        char *dir = NULL;
        bs_err e = { 0 };
        if (cli_hub_resolve("pull", refs[i], revs[i], &dir, &e) < 0) {
            cli_error("pull", "%s", e.msg);
            status = 1;
            continue;
        }
        /* the snapshot directory's name is the commit */
        const char *slash = strrchr(dir, '/'), *commit = slash ? slash + 1 : dir;
        bs_hub_ref r;
        if (bs_hub_ref_parse(refs[i], revs[i], &r, NULL) == 0 && bs_hub_is_commit(commit) && !bs_file_exists(refs[i]))
            printf("%s@%s %s\n", r.repo, commit, dir);
        else
            printf("%s %s\n", refs[i], dir);
        fflush(stdout);
        free(dir);
    }
done:
    free(refs);
    free(revs);
    bs_serve_config_free(&c);
    free(pv);
    return status;
}
