/* basal-c's own directories (spec 06 §3 R3) and the model served when
 * nothing names one. Model references themselves are hub/hub.h's. */
#ifndef BS_MODELREF_H
#define BS_MODELREF_H

#include "basal.h"

/* The cache directory of 06 §3 R3: $BASAL_HOME/.cache when BASAL_HOME is set
 * and not empty, else $XDG_CACHE_HOME/basal when that is absolute, else
 * $HOME/.cache/basal. *dir is malloc'd; *source names the rule that chose it. */
int bs_cache_dir(char **dir, const char **source, bs_err *e);

/* The model served (and checked by doctor) when nothing names one (06 §3). */
#define BS_DEFAULT_MODEL_REF "Remek/basal-1.5-4.5B"

#endif
