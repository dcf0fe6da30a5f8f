/* The --device / --dtype / --gemm-table options shared by decide, logits and
 * bench (device/device.h does the work). */
#include <stdio.h>
#include <string.h>

#include "cli/cli.h"
#include "device/device.h"

int cli_device_flag(int argc, char **argv, int *i, cli_device *d) {
    const char **slot = !strcmp(argv[*i], "--device")       ? &d->device
                        : !strcmp(argv[*i], "--dtype")      ? &d->dtype
                        : !strcmp(argv[*i], "--gemm-table") ? &d->gemm_table
                                                            : NULL;
    if (!slot) return 0;
    const char *opt = argv[*i], *v = cli_value(argc, argv, i);
    if (!v) return -1;
    int ok = slot == &d->gemm_table ||
             (slot == &d->device ? !strcmp(v, "cpu") || !strcmp(v, "cuda") || !strcmp(v, "auto")
                                 : !strcmp(v, "auto") || !strcmp(v, "f16") || !strcmp(v, "bf16") || !strcmp(v, "f32"));
    if (!ok) {
        fprintf(stderr, "basal: %s %s: expected %s\n", opt, v,
                slot == &d->device ? "cpu, cuda or auto" : "auto, f16, bf16 or f32");
        return -1;
    }
    *slot = v;
    return 1;
}

int cli_device_attach(const char *cmd, struct bs_model *m, const cli_device *d) {
    bs_err e = {0};
    if (bs_device_attach_ex(m, d->device, d->dtype, d->gemm_table, &e) < 0) {
        fprintf(stderr, "basal %s: %s\n", cmd, e.msg);
        return -1;
    }
    return 0;
}
