/* The model served when nothing names one (the cache directory of spec 06
 * §3 R3 is base/util.h's bs_cache_dir; model references are hub/hub.h's). */
#ifndef BS_MODELREF_H
#define BS_MODELREF_H

#include "basal.h"

#include "base/util.h" /* bs_cache_dir */

/* The model served (and checked by doctor) when nothing names one (06 §3). */
#define BS_DEFAULT_MODEL_REF "Remek/basal-1.5-4.5B"

#endif
