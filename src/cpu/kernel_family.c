/* The CPU kernel family (cpu/kernel_family.h). */
#include "cpu/kernel_family.h"

#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#define BS_X86 1
#endif

static atomic_int chosen_kernel = -1;
static atomic_int have_f16c = 0;

int bs_gemm_have_f16c(void) {
    bs_gemm_kernel();
    return atomic_load(&have_f16c);
}

int bs_kernel_supported(bs_kernel k) {
    if (k == BS_KERNEL_GENERIC) return 1;
#ifdef BS_X86
    __builtin_cpu_init();
    int avx2 = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
    if (k == BS_KERNEL_AVX2) return avx2;
    /* __builtin_cpu_supports also checks that the OS saves the zmm state */
    if (k == BS_KERNEL_AVX512) return avx2 && __builtin_cpu_supports("avx512f");
#endif
    return 0;
}

/* BASAL_CPU=generic|avx2|avx512 caps the choice (a family the CPU lacks
 * falls back to the best one below it); unset or anything else: the best. */
static bs_kernel detect_kernel(void) {
    const char *env = getenv("BASAL_CPU");
#ifdef BS_X86
    __builtin_cpu_init();
    /* CPUID leaf 1, ECX bit 29 (clang 14's __builtin_cpu_supports has no "f16c") */
    unsigned a, b, c, d;
    atomic_store(&have_f16c, __get_cpuid(1, &a, &b, &c, &d) && (c >> 29 & 1) ? 1 : 0);
#endif
    bs_kernel cap = BS_KERNEL_AVX512;
    if (env && !strcmp(env, "generic")) cap = BS_KERNEL_GENERIC;
    else if (env && !strcmp(env, "avx2")) cap = BS_KERNEL_AVX2;
    for (int k = cap; k > BS_KERNEL_GENERIC; k--)
        if (bs_kernel_supported((bs_kernel)k)) return (bs_kernel)k;
    return BS_KERNEL_GENERIC;
}

bs_kernel bs_gemm_kernel(void) {
    int k = atomic_load(&chosen_kernel);
    if (k < 0) {
        int expected = -1;
        atomic_compare_exchange_strong(&chosen_kernel, &expected, (int)detect_kernel());
        k = atomic_load(&chosen_kernel);
    }
    return (bs_kernel)k;
}

bs_kernel bs_gemm_force_kernel(bs_kernel k) {
    bs_kernel old = bs_gemm_kernel(); /* also runs the CPU detection once */
    if (bs_kernel_supported(k)) atomic_store(&chosen_kernel, (int)k);
    return old;
}

const char *bs_gemm_kernel_name(bs_kernel k) {
    switch (k) {
    case BS_KERNEL_AVX512: return "avx512";
    case BS_KERNEL_AVX2: return "avx2-fma";
    default: return "generic";
    }
}
