/* Attaching the backend chosen by --backend / --dtype / --gemm-table
 * (CLI_DEVICE_ROWS) to a loaded model, for decide, logits and bench
 * (device/device.h does the work). */
#include <stdio.h>
#include <stdlib.h>

#include "cli/cli.h"
#include "device/device.h"
#include "model/model.h"

int cli_int8_alpha_opt(void *dst, const char *flag, const char *value) {
    char *end = NULL;
    double a = strtod(value, &end);
    if (!*value || *end || !(a >= 0.0 && a <= 1.0)) {
        cli_error(NULL, "%s %s: a number in [0, 1] (0: no smoothing)", flag, value);
        return 2;
    }
    *(double *)dst = a > 0.0 ? a : -1.0;
    return 0;
}

void cli_device_apply(const cli_device *d, basal_options *o) {
    o->backend = d->device;
    o->dtype = d->dtype;
    o->gemm_table = d->gemm_table;
    o->int8_smooth_alpha = d->int8_alpha;
}

int cli_device_attach(const char *cmd, struct bs_model *m, const cli_device *d) {
    bs_err e = {0};
    m->int8_alpha = d->int8_alpha;
    if (bs_device_attach_ex(m, d->device ? d->device : "auto", d->dtype, d->gemm_table, &e) < 0) {
        cli_error(cmd, "%s", e.msg);
        return -1;
    }
    return 0;
}

void cli_decision_apply(const cli_decision *k, basal_options *o) {
    o->orders = k->orders ? k->orders : 2;
    o->calibration = k->calibration;
    o->no_calibration = k->no_calibration;
}
