/* SPDX-License-Identifier: Apache-2.0 */
/* fuzz_case.c: libFuzzer target for the case runner (mm_case_run, megamoe/case.h), threads backend.
 *
 * The input is the bytes of a case file, for any operator (the seed corpora are generated per operator
 * with `megamoe case-gen OP`, so mutations start from valid cases of each). The outputs go to /dev/null.
 * A refused case must come with a message and never be MM_ERR_INTERNAL; anything else (a crash, a
 * sanitizer report, a leak, a hang past libFuzzer's -timeout) is a finding.
 *
 * Resource cap: a case may legitimately ask for many ranks (threads) whose inputs are tiny; such inputs
 * are skipped so the fuzzer spends its time on parsing and validation bugs, not on thread exhaustion.
 * Big tensors cannot appear (the data must be inside the input, which -max_len bounds), and CI passes
 * -rss_limit_mb / -malloc_limit_mb for what a small header still makes the runner allocate. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "input_file.h"
#include "megamoe/case.h"
#include "megamoe/safetensors.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

enum { FUZZ_CASE_MAX_RANKS = 16 };

/* True when the case asks for more ranks than the harness runs (see the resource cap above). */
static int too_many_ranks(const uint8_t *data, size_t size) {
    mm_st_reader *reader = NULL;
    if (mm_st_open_memory(data, size, &reader, NULL) != MM_OK) return 0; /* the runner refuses it */
    const char *ranks = mm_st_metadata(reader, "ranks");
    int too_many = ranks && strtoll(ranks, NULL, 10) > FUZZ_CASE_MAX_RANKS;
    mm_st_close(reader);
    return too_many;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (too_many_ranks(data, size)) return 0;
    const char *path = fuzz_input_path(data, size);
    if (!path) return 0;
    /* Below libFuzzer's -timeout (10 s in CI), so a rank stuck in a collective is reported by the
     * library as a timeout rather than by libFuzzer as a hang. */
    mm_case_options options = {MM_CASE_BACKEND_THREADS, 5.0, 0};
    mm_error err;
    mm_error_clear(&err);
    mm_status st = mm_case_run(path, "/dev/null", &options, &err);
    if (st != MM_OK && (st == MM_ERR_INTERNAL || err.message[0] == '\0')) {
        fprintf(stderr, "fuzz_case: mm_case_run returned %s: \"%s\"\n", mm_status_name(st), err.message);
        abort();
    }
    return 0;
}
