/* Helpers shared by the subcommands. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "basal.h"
#include "api/session.h"
#include "cli/cli.h"
#include "base/progress.h"
#include "protocol/respjson.h"
#include "base/sha256.h"
#include "engine/plan.h"
#include "model/safetensors.h"

void cli_fwd_progress_watch(void *ctx, int layers_done, int n_layers, int32_t tokens) {
    cli_fwd_progress *fp = ctx;
    if (fp->outer) {
        if (layers_done < n_layers) bs_progress_note(fp->outer, "forward of %d tokens: layer %d of %d", (int)tokens, layers_done + 1, n_layers);
        else bs_progress_note(fp->outer, "%s", "");
        return;
    }
    if (!fp->line) {
        char what[96];
        snprintf(what, sizeof what, "%s: forward of %d tokens", fp->cmd, (int)tokens);
        fp->line = bs_progress_start(what, (uint64_t)n_layers, "layers");
    }
    bs_progress_set(fp->line, (uint64_t)layers_done);
    if (layers_done >= n_layers) cli_fwd_progress_end(fp);
}

int cli_session_request(const char *cmd, basal_session *s, int lens, const char *data, size_t len, basal_result *r) {
    bs_err e = {0};
    bs_runner *run = bs_session_runner(s);
    cli_fwd_progress fwd_progress = {cmd, NULL, NULL};
    run->watch = cli_fwd_progress_watch;
    run->watch_ctx = &fwd_progress;
    int rc = (lens ? basal_lens : basal_decide)(s, data, len, r, &e);
    cli_fwd_progress_end(&fwd_progress);
    run->watch = NULL;
    run->watch_ctx = NULL;
    if (rc < 0) {
        cli_error(cmd, "%s", e.msg);
        return 1;
    }
    if (r->status != 200) {
        fwrite(r->json, 1, r->len, stdout);
        fputc('\n', stdout);
        return 2;
    }
    return 0;
}

void cli_fwd_progress_end(cli_fwd_progress *fp) {
    bs_progress_end(fp->line);
    fp->line = NULL;
    if (fp->outer) bs_progress_note(fp->outer, "%s", "");
}

/* Re-indents compact JSON with 2 spaces (as Python's json.dumps(indent=2) lays
 * it out); string contents are copied untouched, empty containers stay "{}". */
void cli_print_pretty(FILE *f, const char *s, size_t n) {
    int depth = 0, in_str = 0;
    for (size_t i = 0; i < n; i++) {
        char c = s[i];
        if (in_str) {
            fputc(c, f);
            if (c == '\\' && i + 1 < n) fputc(s[++i], f);
            else if (c == '"') in_str = 0;
            continue;
        }
        switch (c) {
        case '"': in_str = 1; fputc(c, f); break;
        case '{': case '[':
            if (i + 1 < n && (s[i + 1] == '}' || s[i + 1] == ']')) { fputc(c, f); fputc(s[++i], f); break; }
            fputc(c, f);
            depth++;
            fprintf(f, "\n%*s", depth * 2, "");
            break;
        case '}': case ']':
            depth--;
            fprintf(f, "\n%*s%c", depth * 2, "", c);
            break;
        case ',': fprintf(f, ",\n%*s", depth * 2, ""); break;
        case ':': fputs(": ", f); break;
        default: fputc(c, f);
        }
    }
    fputc('\n', f);
}

/* The directories of --model references, freed at exit (the option tables
 * hold plain pointers). */
static char *model_dirs[16];
static int n_model_dirs;

static void free_model_dirs(void) {
    for (int i = 0; i < n_model_dirs; i++) free(model_dirs[i]);
    n_model_dirs = 0;
}

int cli_model_ref(void *dst, const char *flag, const char *value) {
    (void)flag;
    bs_err e = {0};
    char *dir = NULL;
    if (n_model_dirs == (int)(sizeof model_dirs / sizeof *model_dirs)) {
        cli_error(NULL, "too many --model options");
        return 2;
    }
    if (cli_hub_resolve(NULL, value, NULL, &dir, &e) < 0) {
        cli_error(NULL, "%s", e.msg);
        return 1;
    }
    if (n_model_dirs == 0) atexit(free_model_dirs);
    model_dirs[n_model_dirs++] = dir;
    *(const char **)dst = dir;
    return 0;
}

void cli_put_order(bs_buf *b, const bs_item *it, const bs_order *od) {
    bs_buf_puts(b, "{\"perm\":[");
    for (size_t i = 0; i < it->k; i++) bs_buf_printf(b, i ? ",%zu" : "%zu", od->perm[i]);
    bs_buf_puts(b, "],\"prompt\":");
    bs_resp_string(b, od->prompt.data ? od->prompt.data : "", od->prompt.len);
    bs_buf_puts(b, ",\"input_ids\":");
    bs_resp_ids(b, od->ids, (size_t)od->n_ids);
    bs_buf_puts(b, ",\"letter_ids\":");
    bs_resp_ids(b, it->letter_ids, it->k);
}

int cli_weights_sha256(const char *model_dir, bs_buf *out, bs_err *e) {
    bs_weights w;
    int rc = bs_weights_open(&w, model_dir, e); /* the files, their headers checked */
    if (rc != BS_OK) return rc;
    uint64_t total = 0;
    for (int f = 0; f < w.n_files; f++) total += w.files[f].size;
    bs_progress *p = bs_progress_start("hashing weights (SHA-256)", total, "B");
    bs_buf_puts(out, "{");
    for (int f = 0; f < w.n_files && rc == BS_OK; f++) {
        uint8_t d[32];
        char hex[65];
        if ((rc = bs_sha256_file(w.files[f].path, d, p, e)) != BS_OK) break;
        bs_sha256_hex(d, hex);
        const char *slash = strrchr(w.files[f].path, '/');
        bs_buf_puts(out, f ? "," : "");
        bs_resp_cstr(out, slash ? slash + 1 : w.files[f].path);
        bs_buf_printf(out, ":\"%s\"", hex);
    }
    bs_buf_puts(out, "}");
    if (rc == BS_OK && out->oom) rc = bs_fail(e, BS_ENOMEM, "%s: out of memory for the weights' SHA-256", model_dir);
    bs_progress_end(p);
    bs_weights_close(&w);
    return rc;
}

int cli_read_request(const char *path, char **data, size_t *len) {
    bs_err e = {0};
    if (strcmp(path, "-")) {
        if (bs_read_file(path, data, len, &e) < 0) { cli_error(NULL, "%s", e.msg); return -1; }
        return 0;
    }
    bs_buf b;
    bs_buf_init(&b);
    char chunk[65536];
    size_t n;
    while ((n = fread(chunk, 1, sizeof chunk, stdin)) > 0) bs_buf_put(&b, chunk, n);
    if (b.oom) { bs_buf_free(&b); return -1; }
    if (!b.data) bs_buf_put(&b, "", 0);
    *data = b.data;
    *len = b.len;
    return 0;
}
