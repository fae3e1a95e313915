/* SPDX-License-Identifier: Apache-2.0 */
/* core/free_all.h: MM_FREE_ALL(p, q, ...) frees every pointer given (NULL ones too, as free() allows).
 * For the destructors of structs that own several arrays: one statement names what the struct owns,
 * instead of a column of free() calls. The pointers are read before any is freed, so the struct
 * itself may come last: MM_FREE_ALL(w->rows, w->scales, w). */
#ifndef MEGAMOE_CORE_FREE_ALL_H
#define MEGAMOE_CORE_FREE_ALL_H

#include <stddef.h>
#include <stdlib.h>

static inline void mm_free_n(void *const *pointers, size_t n) {
    for (size_t i = 0; i < n; i++) free(pointers[i]);
}

#define MM_FREE_ALL(...)                                                                                     \
    mm_free_n((void *const[]){__VA_ARGS__}, sizeof((void *[]){__VA_ARGS__}) / sizeof(void *))

#endif
