/* See local_decide.h. */
#include "cli/local_decide.h"

#include <stdio.h>
#include <string.h>

int cli_local_open(cli_local *l, const char *cmd, const char *dir, int threads, const cli_device *dev,
                   int prefix_cache) {
    return cli_local_open_ex(l, cmd, dir, threads, dev, prefix_cache, 0);
}

int cli_local_open_ex(cli_local *l, const char *cmd, const char *dir, int threads, const cli_device *dev,
                      int prefix_cache, int tree_max_tokens) {
    memset(l, 0, sizeof *l);
    l->cmd = cmd;
    l->prefix_cache = prefix_cache;
    bs_letter_cache_init(&l->lc);
    bs_err e = {0};
    if (!(l->pool = bs_pool_create(threads))) {
        fprintf(stderr, "basal %s: out of memory\n", cmd);
        return -1;
    }
    if (bs_basal_load(&l->m, dir, l->pool, 1, &e) < 0) {
        fprintf(stderr, "basal %s: %s\n", cmd, e.msg);
        return -1;
    }
    l->loaded = 1;
    if (cli_device_attach(cmd, &l->m.model, dev) < 0) return -1;
    if (prefix_cache && bs_prefix_set_build(&l->pinned, &l->m, NULL, &e) < 0) {
        fprintf(stderr, "basal %s: %s\n", cmd, e.msg);
        return -1;
    }
    bs_engine_opts eo;
    bs_engine_opts_default(&eo);
    if (tree_max_tokens > 0) eo.tree_max_tokens = tree_max_tokens;
    bs_runner_init(&l->run, &l->m, eo.tree_max_tokens, eo.forward_max_tokens, &l->pinned, 0, NULL, 0);
    l->run_ready = 1;
    return 0;
}

void cli_local_close(cli_local *l) {
    if (l->run_ready) bs_runner_free(&l->run);
    bs_prefix_set_free(&l->pinned);
    if (l->loaded) bs_basal_free(&l->m);
    bs_letter_cache_free(&l->lc);
    bs_pool_destroy(l->pool);
    memset(l, 0, sizeof *l);
}

int cli_local_decide(cli_local *l, const char *data, size_t len, bs_buf *out, bs_reply *rep,
                     cli_local_times *times, bs_err *e) {
    bs_plan plan = {0};
    bs_reply_free(rep);
    bs_reply_init(rep);
    out->len = 0;
    int rc = bs_plan_text(&plan, data, len, BS_DIALECT_SYSTEMONE, &l->m, &l->lc, rep, e);
    if (rc == BS_EINVAL && rep->body.len) goto refused;
    if (rc < 0) goto failed;
    if (times) times->planned = bs_now_ms();
    bs_plan *pp = &plan;
    /* both steps of a request with large choices (03 §5.4): round 1, then the
     * finalists; a finalist prompt over the model's limit fails only this
     * request (04 §3 P7) with rep filled */
    rc = bs_runner_run_all(&l->run, &pp, 1, &l->lc, rep, e);
    if (rc == BS_EINVAL && rep->body.len) goto refused;
    if (rc < 0) goto failed;
    bs_reply_free(rep);
    bs_reply_init(rep);
    /* 03 §2.5: an act refusal without a defer action is the request's error body */
    if ((rc = bs_plan_refusal(&plan, &l->m, rep, e)) > 0) goto refused;
    if (rc < 0) goto failed;
    if ((rc = bs_plan_answer(&plan, &l->m, -1, out, e)) < 0) goto failed;
    if (out->oom) {
        rc = bs_fail(e, BS_ENOMEM, "out of memory");
        goto failed;
    }
    if (times) times->answered = bs_now_ms();
    bs_plan_free(&plan);
    return 0;
refused:
    bs_plan_free(&plan);
    return 1;
failed:
    if (!e->msg[0]) bs_fail(e, rc, "%s", bs_strerror(rc));
    bs_reply_free(rep);
    bs_reply_init(rep);
    bs_plan_free(&plan);
    return rc;
}
