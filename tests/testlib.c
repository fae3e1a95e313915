/* SPDX-License-Identifier: Apache-2.0 */
/* tests/testlib.c: failure reporting, the closing summary line and deterministic random data. */
#define _POSIX_C_SOURCE 200809L /* mkdtemp */
#include "testlib.h"

#include <stdarg.h>
#include <stdlib.h>

int mm_test_passed = 0;
int mm_test_failed = 0;

void mm_test_report_fail(const char *file, int line, const char *fmt, ...) {
    mm_test_failed++;
    if (mm_test_failed > 50) return; /* keep logs readable when a whole loop fails */
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "%s:%d: ", file, line);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
}

static int test_skipped = 0;

void mm_test_skip(const char *fmt, ...) {
    test_skipped++;
    va_list ap;
    va_start(ap, fmt);
    fputs("SKIP: ", stdout);
    vprintf(fmt, ap);
    fputc('\n', stdout);
    va_end(ap);
}

int mm_test_finish(const char *name) {
    if (test_skipped)
        printf("%s: %d passed, %d failed, %d skipped (SKIP lines above)\n", name, mm_test_passed,
               mm_test_failed, test_skipped);
    else
        printf("%s: %d passed, %d failed\n", name, mm_test_passed, mm_test_failed);
    return mm_test_failed == 0 && mm_test_passed > 0 ? 0 : 1;
}

int mm_test_finish_skipped(const char *name) {
    int rc = mm_test_finish(name);
    return rc == 0 ? MM_TEST_SKIP_RETURN_CODE : rc;
}

const char *mm_test_error_text(const mm_error *err) {
    return err ? err->message : "";
}

uint64_t mm_test_rand_u64(uint64_t *state) {
    uint64_t z = (*state += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

double mm_test_rand_uniform(uint64_t *state, double lo, double hi) {
    double u = (double)(mm_test_rand_u64(state) >> 11) * (1.0 / 9007199254740992.0);
    return lo + (hi - lo) * u;
}

/* Through a union (defined in C): the test's own conversion, not the library's. */
typedef union f32_view {
    float value;
    uint32_t bits;
} f32_view;

uint32_t mm_test_f32_bits(float value) {
    return (f32_view){.value = value}.bits;
}

float mm_test_f32_from_bits(uint32_t bits) {
    return (f32_view){.bits = bits}.value;
}

int mm_test_make_temp_dir(char *dir, size_t size, const char *prefix) {
    snprintf(dir, size, "/tmp/%s_XXXXXX", prefix);
    if (mkdtemp(dir)) return 1;
    perror("mkdtemp");
    return 0;
}

unsigned char *mm_test_read_file(const char *path, size_t *size) {
    unsigned char *data = NULL;
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    long n = fseek(f, 0, SEEK_END) == 0 ? ftell(f) : -1;
    if (n < 0 || fseek(f, 0, SEEK_SET) != 0) goto done;
    data = malloc((size_t)n + 1);
    if (!data) goto done;
    *size = fread(data, 1, (size_t)n, f);
    if (*size != (size_t)n) {
        free(data);
        data = NULL;
    }
done:
    fclose(f);
    return data;
}
