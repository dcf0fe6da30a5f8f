/* basal models [list] | basal models rm REF (issue 31): what the Hugging
 * Face cache holds (every repository, each snapshot with the refs naming
 * it, its size and whether it is a whole Basal model), and removing one. */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "base/util.h"
#include "hub/hub.h"

const cli_doc cli_doc_models = {
    "models", "[list] [--json] | rm REF [--all-revisions]",
    "list the models in the Hugging Face cache, or remove one",
    "list (the default): one line per snapshot in the cache shared with the Hugging Face\n"
    "tools ($HF_HUB_CACHE, else $HF_HOME/hub, else ~/.cache/huggingface/hub): the repository,\n"
    "the commit, the refs (branches, tags) that name it, its size, whether it holds a whole\n"
    "Basal model (ready) or what it lacks, and its directory; --json prints the same as a JSON\n"
    "array. Nothing is downloaded.\n"
    "rm REF: removes the snapshot of REF's revision (mini, 4.5B, max at their pinned commits;\n"
    "owner/name is main; owner/name@REV), the refs naming it and the files no other snapshot\n"
    "uses; --all-revisions removes everything the cache holds of the repository. A repository\n"
    "that another process is downloading is left alone.\n"
    "Exit status: 0 done; 1 nothing matched or a file could not be removed; 2 usage error.\n",
};

static void size_text(uint64_t v, char *out, size_t cap) {
    if (v >= 1000000000ULL) snprintf(out, cap, "%.1f GB", (double)v / 1e9);
    else if (v >= 1000000ULL) snprintf(out, cap, "%.1f MB", (double)v / 1e6);
    else snprintf(out, cap, "%.1f kB", (double)v / 1e3);
}

static int list(const bs_hub_env *env, int as_json) {
    bs_hub_cached *v = NULL;
    size_t n = 0;
    bs_err e = { 0 };
    if (bs_hub_cache_list(env, &v, &n, &e) < 0) {
        cli_error("models", "%s", e.msg);
        return 1;
    }
    int rc = 0;
    if (as_json) {
        json_t *arr = json_array();
        for (size_t i = 0; arr && i < n; i++) {
            json_t *o = json_pack("{s:s, s:s, s:[], s:I, s:b, s:s?, s:s}", "repo", v[i].repo, "commit", v[i].commit, "refs",
                                  "bytes", (json_int_t)v[i].bytes, "complete", v[i].complete, "missing", v[i].missing,
                                  "path", v[i].dir);
            json_t *refs = json_object_get(o, "refs");
            for (char *s = v[i].refs, *end; o && s && *s; s = *end ? end + 1 : end) {
                end = s + strcspn(s, ",");
                json_array_append_new(refs, json_stringn(s, (size_t)(end - s)));
            }
            if (!o || json_array_append_new(arr, o) < 0) rc = 1;
        }
        char *text = arr && !rc ? json_dumps(arr, JSON_INDENT(2) | JSON_PRESERVE_ORDER) : NULL;
        if (text) printf("%s\n", text);
        else rc = 1;
        free(text);
        json_decref(arr);
        if (rc) cli_error("models", "out of memory");
    } else {
        int64_t free_b = bs_hub_free_bytes(env->cache);
        char fb[32] = "unknown";
        if (free_b >= 0) size_text((uint64_t)free_b, fb, sizeof fb);
        printf("# Hugging Face cache %s (from %s), %s free\n", env->cache, env->cache_from, fb);
        if (!n) printf("# empty: `basal pull REF` downloads a model\n");
        else printf("%-36s %-10s %-12s %9s  %-22s %s\n", "REPO", "REVISION", "REFS", "SIZE", "STATUS", "PATH");
        for (size_t i = 0; i < n; i++) {
            char sz[32], status[64];
            size_text(v[i].bytes, sz, sizeof sz);
            if (v[i].complete) snprintf(status, sizeof status, "ready");
            else snprintf(status, sizeof status, "lacks %s", v[i].missing ? v[i].missing : "?");
            printf("%-36s %-10.8s %-12s %9s  %-22s %s\n", v[i].repo, v[i].commit, *v[i].refs ? v[i].refs : "-", sz, status,
                   v[i].dir);
        }
    }
    bs_hub_cached_free(v, n);
    return rc;
}

int cmd_models(int argc, char **argv) {
    const char *pv[3] = { 0 };
    cli_pos pos = { pv, 0, 2 };
    int as_json = 0, all = 0;
    const cli_opt opts[] = {
        CLI_SW("--json", "list: print a JSON array", &as_json),
        CLI_SW("--all-revisions", "rm: remove every snapshot and file of the repository", &all),
    };
    int rc = cli_parse(&cli_doc_models, opts, CLI_N(opts), &pos, argc, argv);
    if (rc) return rc < 0 ? 0 : rc;
    const char *verb = pos.n ? pv[0] : "list";
    int is_list = !strcmp(verb, "list"), is_rm = !strcmp(verb, "rm") || !strcmp(verb, "remove");
    if (!is_list && !is_rm) {
        cli_error("models", "unknown action '%s': list or rm", verb);
        return 2;
    }
    if (is_list && (pos.n > 1 || all)) {
        cli_error("models", "list takes no REF and no --all-revisions");
        return 2;
    }
    if (is_rm && (pos.n != 2 || as_json)) {
        cli_error("models", "rm takes one REF (and no --json): basal models rm REF");
        return 2;
    }
    bs_hub_env env;
    bs_err e = { 0 };
    if (bs_hub_env_load(&env, &e) < 0) {
        cli_error("models", "%s", e.msg);
        return 1;
    }
    int status = 0;
    if (is_list) {
        status = list(&env, as_json);
    } else {
        bs_hub_ref r;
        uint64_t freed = 0;
        char shown[300], sz[32];
        if (bs_hub_ref_parse(pv[1], NULL, &r, &e) < 0) {
            cli_error("models", "%s", e.msg);
            status = 2;
        } else if (bs_hub_cache_remove(&env, &r, all, &freed, &e) < 0) {
            cli_error("models", "%s", e.msg);
            status = 1;
        } else {
            bs_hub_ref_show(&r, shown, sizeof shown);
            size_text(freed, sz, sizeof sz);
            printf("removed %s%s from %s (%s freed)\n", all ? r.repo : shown, all ? " (every revision)" : "", env.cache, sz);
        }
    }
    bs_hub_env_free(&env);
    return status;
}
