/* SPDX-License-Identifier: Apache-2.0 */
/* input_file.h: the harnesses' shared helper: the fuzz input as a file path (an unnamed memfd reached
 * through /proc/self/fd), for the entry points that take a path (mm_st_open, mm_case_run). A memfd
 * keeps the per-input cost at a pwrite and leaves no files behind when the fuzzer is killed. */
#ifndef MEGAMOE_FUZZ_INPUT_FILE_H
#define MEGAMOE_FUZZ_INPUT_FILE_H

#include <stddef.h>
#include <stdint.h>

/* Replaces the content of the process's input file with data[0..size) and returns its path (static
 * storage), or NULL when the system refuses (the harness then skips the input). */
const char *fuzz_input_path(const uint8_t *data, size_t size);

#endif
