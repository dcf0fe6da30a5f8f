/* Attaching the backend chosen by --backend / --dtype / --gemm-table
 * (CLI_DEVICE_ROWS) to a loaded model, for decide, logits and bench
 * (device/device.h does the work). */
#include <stdio.h>

#include "cli/cli.h"
#include "device/device.h"

int cli_device_attach(const char *cmd, struct bs_model *m, const cli_device *d) {
    bs_err e = {0};
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
