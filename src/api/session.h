/* The in-process session of include/basal.h, and what the command line's
 * tools need beyond the public API: the loaded model and its runner (a
 * forward's layer watch, the evidence counters). */
#ifndef BS_API_SESSION_H
#define BS_API_SESSION_H

#include "basal.h"
#include "engine/plan.h"
#include "engine/runner.h"
#include "model/basal_model.h"

const bs_basal_model *bs_session_model(const basal_session *s);
bs_runner *bs_session_runner(basal_session *s);

#endif
