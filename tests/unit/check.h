/* Minimal test harness: CHECK macros print both values on failure; each test
 * binary prints "N passed, N failed" and exits non-zero when anything failed. */
#ifndef BS_CHECK_H
#define BS_CHECK_H

#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int check_pass_, check_fail_;

#define CHECK(cond) do { \
    if (cond) check_pass_++; \
    else { check_fail_++; fprintf(stderr, "%s:%d: CHECK failed: %s\n", __FILE__, __LINE__, #cond); } \
} while (0)

#define CHECK_INT(a, b) do { \
    long long a_ = (long long)(a), b_ = (long long)(b); \
    if (a_ == b_) check_pass_++; \
    else { check_fail_++; fprintf(stderr, "%s:%d: %s == %s failed: %lld vs %lld\n", \
                                  __FILE__, __LINE__, #a, #b, a_, b_); } \
} while (0)

#define CHECK_STR(a, b) do { \
    const char *a_ = (a), *b_ = (b); \
    if (a_ && b_ && strcmp(a_, b_) == 0) check_pass_++; \
    else { check_fail_++; fprintf(stderr, "%s:%d: %s == %s failed:\n  got:      %s\n  expected: %s\n", \
                                  __FILE__, __LINE__, #a, #b, a_ ? a_ : "(null)", b_ ? b_ : "(null)"); } \
} while (0)

/* substring check, for error messages */
#define CHECK_CONTAINS(hay, needle) do { \
    const char *h_ = (hay), *n_ = (needle); \
    if (h_ && n_ && strstr(h_, n_)) check_pass_++; \
    else { check_fail_++; fprintf(stderr, "%s:%d: expected \"%s\" in \"%s\"\n", \
                                  __FILE__, __LINE__, n_ ? n_ : "(null)", h_ ? h_ : "(null)"); } \
} while (0)

#define CHECK_NEAR(a, b, tol) do { \
    double a_ = (double)(a), b_ = (double)(b); \
    if (fabs(a_ - b_) <= (tol)) check_pass_++; \
    else { check_fail_++; fprintf(stderr, "%s:%d: |%s - %s| <= %g failed: %.9g vs %.9g\n", \
                                  __FILE__, __LINE__, #a, #b, (double)(tol), a_, b_); } \
} while (0)

/* bitwise float equality (distinguishes -0.0 and NaN payloads) */
#define CHECK_BITS(a, b) do { \
    float a_ = (a), b_ = (b); \
    if (memcmp(&a_, &b_, sizeof a_) == 0) check_pass_++; \
    else { check_fail_++; fprintf(stderr, "%s:%d: %s and %s differ bitwise: %.9g vs %.9g\n", \
                                  __FILE__, __LINE__, #a, #b, a_, b_); } \
} while (0)

static inline int check_report(const char *name) {
    printf("%s: %d passed, %d failed\n", name, check_pass_, check_fail_);
    return check_fail_ ? 1 : 0;
}

/* Environment helpers for tests: fixture and shared-resource directories. */
static inline const char *check_env(const char *name, const char *dflt) {
    const char *v = getenv(name);
    return v && *v ? v : dflt;
}

#endif
