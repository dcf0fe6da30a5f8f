/* Model references on the command line (06 §3): every command that takes
 * --model downloads a model that is not in the cache, as basal-rs and the
 * Python server do, with the progress of core/progress on stderr (a bar
 * with bytes, rate and time left on a terminal, timestamped lines
 * otherwise). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "base/progress.h"
#include "hub/hub.h"

static int on_progress(void *ud, const bs_hub_progress *hp) {
    cli_hub_bar *b = ud;
    if (!b->p && hp->total) {
        char what[256];
        snprintf(what, sizeof what, "%s%sdownloading %s", b->cmd ? b->cmd : "", b->cmd ? ": " : "", hp->repo);
        b->p = bs_progress_start(what, hp->total, "B");
    }
    if (b->p) {
        bs_progress_total(b->p, hp->total);
        bs_progress_base(b->p, hp->resumed);
        bs_progress_set(b->p, hp->done);
        if (hp->file && (!b->file || strcmp(b->file, hp->file))) {
            b->file = hp->file;
            bs_progress_note(b->p, "%s (file %d of %d)", hp->file, hp->files_done + 1, hp->files_total);
        }
    }
    return 0;
}

void cli_hub_bar_opts(cli_hub_bar *b, const char *cmd, bs_hub_opts *o) {
    memset(b, 0, sizeof *b);
    memset(o, 0, sizeof *o);
    b->cmd = cmd;
    o->progress = on_progress;
    o->ud = b;
}

void cli_hub_bar_end(cli_hub_bar *b) {
    bs_progress_end(b->p);
    b->p = NULL;
    b->file = NULL;
}

int cli_hub_resolve(const char *cmd, const char *ref, const char *revision, char **dir, bs_err *e) {
    cli_hub_bar bar;
    bs_hub_opts o;
    cli_hub_bar_opts(&bar, cmd, &o);
    int rc = bs_hub_resolve(ref, revision, BS_HUB_DOWNLOAD, &o, dir, e);
    cli_hub_bar_end(&bar);
    return rc;
}
