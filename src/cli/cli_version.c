/* `basal --version` (spec 06 §2): the version, the git commit the binary was
 * built from (the Makefile passes BASAL_GIT_COMMIT), and the backends: the
 * CPU kernel families this machine can run and the CUDA architectures
 * compiled in. */
#include <stdio.h>

#include "basal.h"
#include "cli/cli_opts.h"
#include "cpu/gemm.h"
#include "cpu/gemm_impl.h"

#ifndef BASAL_GIT_COMMIT
#define BASAL_GIT_COMMIT "unknown"
#endif
#ifndef BASAL_CUDA_ARCHS
#define BASAL_CUDA_ARCHS ""
#endif

const char *cli_git_commit(void) { return BASAL_GIT_COMMIT; }

void cli_print_version(FILE *f) {
    /* the families are found at run time: the same binary runs on CPUs
     * without AVX-512 with the narrower kernels */
    const char *cpu[8];
    int n = 0;
    if (bs_kernel_supported(BS_KERNEL_AVX2)) cpu[n++] = "avx2";
    if (bs_kernel_supported(BS_KERNEL_AVX512)) cpu[n++] = "avx512";
    if (bs_kernel_supported(BS_KERNEL_AVX512) && bs_gemm_bf16_hw_supported()) cpu[n++] = "avx512-bf16";
    if (bs_gemm_bf16_hw_supported() && bs_gemm_amx_available()) cpu[n++] = "amx";
    /* the int8 mode's kernels (issue 34) */
    if (bs_gemm_i8_supported(1)) cpu[n++] = "avx-vnni";
    if (bs_gemm_i8_supported(2)) cpu[n++] = "avx512-vnni";
    if (bs_gemm_i8_supported(3)) cpu[n++] = "amx-int8";
    fprintf(f, "%s (%s, CPU(", BASAL_VERSION, BASAL_GIT_COMMIT);
    if (!n) fputs("generic", f);
    for (int i = 0; i < n; i++) fprintf(f, "%s%s", i ? "," : "", cpu[i]);
    fputc(')', f);
#ifdef BS_HAVE_CUDA
    fprintf(f, "+CUDA(%s)", BASAL_CUDA_ARCHS);
#endif
    fputs(")\n", f);
}
