/* Model references of `basal serve --model REF` and the YAML repo key
 * (spec 06 §3). */
#ifndef BS_MODELREF_H
#define BS_MODELREF_H

#include "basal.h"

/* An existing directory (when no revision is given) is used as is; else ref
 * is a short name (mini, 4.5B, max, basal-1.5-*) or owner/name[@revision],
 * looked up in $HF_HOME/hub (default ~/.cache/huggingface/hub). revision, if
 * not NULL, overrides the one in ref. *dir is malloc'd. */
int bs_model_ref_resolve(const char *ref, const char *revision, char **dir, bs_err *e);

/* The cache directory of 06 §3 R3: $BASAL_HOME/.cache when BASAL_HOME is set
 * and not empty, else $XDG_CACHE_HOME/basal when that is absolute, else
 * $HOME/.cache/basal. *dir is malloc'd; *source names the rule that chose it. */
int bs_cache_dir(char **dir, const char **source, bs_err *e);

/* The model served (and checked by doctor) when nothing names one (06 §3). */
#define BS_DEFAULT_MODEL_REF "Remek/basal-1.5-4.5B"

#endif
