/* SPDX-License-Identifier: Apache-2.0 */
/* tests/testlib.h: the small assertion kit shared by every test program.
 *
 * A test program is a main() that calls check macros; each failed check prints file:line and the
 * values, and the program exits non-zero at the end if anything failed. The closing line follows
 * the "N passed, N failed" convention so CI logs are easy to read. */
#ifndef MEGAMOE_TESTLIB_H
#define MEGAMOE_TESTLIB_H

#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "megamoe/status.h"

extern int mm_test_passed;
extern int mm_test_failed;

void mm_test_report_fail(const char *file, int line, const char *fmt, ...);
/* Prints "<name>: N passed, N failed" (and ", N skipped") and returns the process exit status. */
int mm_test_finish(const char *name);

/* A part of a test that this CPU (or MEGAMOE_ISA) cannot run, e.g. AMX kernels without AMX: prints
 * one line "SKIP: <what>" on stdout (CI collects these lines: scripts/isa-coverage.sh) and counts it.
 * Never silent: a skipped kernel is named. */
void mm_test_skip(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* Exit status CTest reads as "skipped" (SKIP_RETURN_CODE of tests/CMakeLists.txt). */
#define MM_TEST_SKIP_RETURN_CODE 77
/* For a test whose whole subject could not run here (it may still have checked what it could, e.g.
 * that the registry does not choose the missing kernels): like mm_test_finish, but returns
 * MM_TEST_SKIP_RETURN_CODE instead of 0 when nothing failed, so CTest reports the test as skipped. */
int mm_test_finish_skipped(const char *name);

#define CHECK(cond)                                                                                          \
    do {                                                                                                     \
        if (cond)                                                                                            \
            mm_test_passed++;                                                                                \
        else                                                                                                 \
            mm_test_report_fail(__FILE__, __LINE__, "CHECK(%s) failed", #cond);                              \
    } while (0)

#define CHECK_EQ_INT(a, b)                                                                                   \
    do {                                                                                                     \
        long long va_ = (long long)(a), vb_ = (long long)(b);                                                \
        if (va_ == vb_)                                                                                      \
            mm_test_passed++;                                                                                \
        else                                                                                                 \
            mm_test_report_fail(__FILE__, __LINE__, "%s = %lld, expected %s = %lld", #a, va_, #b, vb_);      \
    } while (0)

#define CHECK_EQ_HEX(a, b)                                                                                   \
    do {                                                                                                     \
        unsigned long long va_ = (unsigned long long)(a), vb_ = (unsigned long long)(b);                     \
        if (va_ == vb_)                                                                                      \
            mm_test_passed++;                                                                                \
        else                                                                                                 \
            mm_test_report_fail(__FILE__, __LINE__, "%s = 0x%llx, expected %s = 0x%llx", #a, va_, #b, vb_);  \
    } while (0)

#define CHECK_NEAR(a, b, tol)                                                                                \
    do {                                                                                                     \
        double va_ = (double)(a), vb_ = (double)(b), vt_ = (double)(tol);                                    \
        double d_ = va_ > vb_ ? va_ - vb_ : vb_ - va_;                                                       \
        if (d_ <= vt_)                                                                                       \
            mm_test_passed++;                                                                                \
        else                                                                                                 \
            mm_test_report_fail(__FILE__, __LINE__, "%s = %.9g, expected %s = %.9g (tol %g)", #a, va_, #b,   \
                                vb_, vt_);                                                                   \
    } while (0)

#define CHECK_STR_CONTAINS(haystack, needle)                                                                 \
    do {                                                                                                     \
        const char *h_ = (haystack), *n_ = (needle);                                                         \
        if (h_ && strstr(h_, n_))                                                                            \
            mm_test_passed++;                                                                                \
        else                                                                                                 \
            mm_test_report_fail(__FILE__, __LINE__, "\"%s\" does not contain \"%s\"", h_ ? h_ : "(null)",    \
                                n_);                                                                         \
    } while (0)

/* Checks a status; on mismatch prints the error message too. */
#define CHECK_STATUS(st, expected, errp)                                                                     \
    do {                                                                                                     \
        mm_status s_ = (st), e_ = (expected);                                                                \
        if (s_ == e_)                                                                                        \
            mm_test_passed++;                                                                                \
        else                                                                                                 \
            mm_test_report_fail(__FILE__, __LINE__, "%s returned %s, expected %s (%s)", #st,                 \
                                mm_status_name(s_), mm_status_name(e_), mm_test_error_text(errp));           \
    } while (0)

#define CHECK_OK(st, errp) CHECK_STATUS(st, MM_OK, errp)

/* For code running on several rank threads at once, where the CHECK counters (not thread-safe) cannot
 * be used: SCEN_FAIL fills the rank's mm_error with "file:line: message" and returns MM_ERR_INTERNAL
 * from the calling function; the test's main then reports the error per rank. */
#define SCEN_FAIL(err, ...)                                                                                  \
    do {                                                                                                     \
        snprintf((err)->message, sizeof(err)->message, "%s:%d: ", __FILE__, __LINE__);                       \
        size_t at_ = strlen((err)->message);                                                                 \
        snprintf((err)->message + at_, sizeof(err)->message - at_, __VA_ARGS__);                             \
        (err)->status = MM_ERR_INTERNAL;                                                                     \
        return MM_ERR_INTERNAL;                                                                              \
    } while (0)

#define SCEN_EXPECT(err, cond, ...)                                                                          \
    do {                                                                                                     \
        if (!(cond)) SCEN_FAIL(err, __VA_ARGS__);                                                            \
    } while (0)

/* The message of an error record, "" for NULL (a function so that `&err` arguments do not trip
 * -Waddress in the CHECK_STATUS macro). */
const char *mm_test_error_text(const mm_error *err);

/* The bits of an F32 and back (type punning through a union, which C defines). */
uint32_t mm_test_f32_bits(float value);
float mm_test_f32_from_bits(uint32_t bits);

/* The whole file in a malloc'ed buffer (one spare byte at the end), its size in *size; NULL when it
 * cannot be opened or read. */
unsigned char *mm_test_read_file(const char *path, size_t *size);

/* Creates a fresh directory /tmp/<prefix>_XXXXXX, its path in dir (size bytes); 0, with a perror line,
 * when it cannot. */
int mm_test_make_temp_dir(char *dir, size_t size, const char *prefix);

/* Deterministic pseudo-random numbers for test data (splitmix64). */
uint64_t mm_test_rand_u64(uint64_t *state);
/* Uniform in [lo, hi). */
double mm_test_rand_uniform(uint64_t *state, double lo, double hi);

#endif
