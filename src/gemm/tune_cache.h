/* SPDX-License-Identifier: Apache-2.0 */
/* gemm/tune_cache.h: the cache file that `megamoe tune` writes and the kernel registry reads at its
 * first choice: per format class, the kernel kind measured fastest from each row count on.
 *
 * Text, one item per line ('#' starts a comment line):
 *     megamoe-tune 1
 *     cpu AuthenticAMD 26 2 AMD EPYC 9575F       (vendor, family, model, brand: mm_tune_cache_cpu_key)
 *     version 0.1.0                               (the library's version)
 *     mxfp8 1:avx512 16:avx512                    (class, then rows:kind steps, rows increasing)
 * A file whose cpu or version line differs from this process's is ignored (a new CPU or library wants
 * a new measurement), as is a file that does not parse; nothing here prints or aborts.
 * Where: MEGAMOE_TUNE_FILE, else $XDG_CACHE_HOME/megamoe/kernels.txt, else ~/.cache/megamoe/kernels.txt;
 * MEGAMOE_TUNE=0 switches reading off. */
#ifndef MEGAMOE_GEMM_TUNE_CACHE_H
#define MEGAMOE_GEMM_TUNE_CACHE_H

#include <stddef.h>

#include "gemm/kernel_profiles.h"
#include "megamoe/status.h"

/* Largest cache file read (bigger: ignored as corrupt). */
#define MM_TUNE_CACHE_MAX_BYTES 16384

/* The cache's path into buf: 0, or -1 when there is none (no MEGAMOE_TUNE_FILE, XDG_CACHE_HOME or HOME,
 * or the path does not fit). */
int mm_tune_cache_path(char *buf, size_t size);
/* 0 when MEGAMOE_TUNE=0 switches the cache off, else 1. */
int mm_tune_cache_enabled(void);
/* This CPU's key line value: "vendor family model brand". */
void mm_tune_cache_cpu_key(char *buf, size_t size);

/* Parses a cache text: per class, have[c] = 1 and rules[c] with its steps (thresholds zero) when the
 * file has a line for it. 0, or -1 with the reason in why (the line and what is wrong). */
int mm_tune_cache_parse(const char *text, const char *cpu_key, const char *version,
                        mm_kernel_rule rules[MM_KCLASS_COUNT], int have[MM_KCLASS_COUNT], char *why,
                        size_t why_size);
/* Reads and parses the file: 0; 1 when it does not exist; -1 with why when it cannot be read or parsed. */
int mm_tune_cache_read(const char *path, const char *cpu_key, const char *version,
                       mm_kernel_rule rules[MM_KCLASS_COUNT], int have[MM_KCLASS_COUNT], char *why,
                       size_t why_size);
/* The text of a cache (the classes with have[c]); the length, or -1 when it does not fit. */
int mm_tune_cache_format(char *buf, size_t size, const char *cpu_key, const char *version,
                         const mm_kernel_rule rules[MM_KCLASS_COUNT], const int have[MM_KCLASS_COUNT]);
/* Writes the text to path (its directory created when missing; written to a temporary file, then
 * renamed, so a reader never sees half a file). */
mm_status mm_tune_cache_write(const char *path, const char *text, mm_error *err);

#endif
