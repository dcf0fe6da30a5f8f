/* basal-c's own cache directory (spec 06 §3 R3). */
#include "server/modelref.h"

#include <stdlib.h>

#include "base/util.h"

int bs_cache_dir(char **dir, const char **source, bs_err *e) {
    const char *bh = getenv("BASAL_HOME"), *xdg = getenv("XDG_CACHE_HOME"), *home = getenv("HOME");
    if (bh && *bh) *dir = bs_strfmt("%s/.cache", bh), *source = "BASAL_HOME";
    else if (xdg && xdg[0] == '/') *dir = bs_strfmt("%s/basal", xdg), *source = "XDG_CACHE_HOME";
    else *dir = bs_strfmt("%s/.cache/basal", home ? home : ""), *source = "HOME";
    return *dir ? BS_OK : bs_fail(e, BS_ENOMEM, "out of memory");
}
