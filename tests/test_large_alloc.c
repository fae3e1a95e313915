/* SPDX-License-Identifier: Apache-2.0 */
/* tests/test_large_alloc.c: mm_alloc_large (core/large_alloc.h) hands out blocks whose pages are not yet
 * faulted in, even when the C library serves the request from memory the process touched before (glibc
 * does so under its dynamic mmap threshold, which grows to the largest block freed): the huge-page advice
 * and the NUMA policy act only at a page's first touch. Also: alignment, and the block is usable. */
#define _DEFAULT_SOURCE /* mincore */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#if defined(__linux__)
#include <sys/mman.h>
#endif

#include "core/large_alloc.h"
#include "testlib.h"

enum { MIB = 1 << 20 };

/* Fills a block through a volatile pointer: the compiler may not drop the stores before free(). */
static void touch(uint8_t *p, size_t bytes, uint8_t v) {
    volatile uint8_t *q = p;
    for (size_t i = 0; i < bytes; i += 512) q[i] = v;
}

#if defined(__linux__)
/* Resident pages of [p, p + bytes) (whole pages inside the range only). */
static long resident_pages(void *p, size_t bytes) {
    long page = sysconf(_SC_PAGESIZE);
    uintptr_t begin = ((uintptr_t)p + (uintptr_t)page - 1) / (uintptr_t)page * (uintptr_t)page;
    uintptr_t end = ((uintptr_t)p + bytes) / (uintptr_t)page * (uintptr_t)page;
    if (end <= begin) return 0;
    size_t n = (end - begin) / (size_t)page;
    unsigned char *vec = malloc(n);
    if (!vec || mincore((void *)begin, end - begin, vec) != 0) {
        free(vec);
        return -1;
    }
    long count = 0;
    for (size_t i = 0; i < n; i++) count += vec[i] & 1;
    free(vec);
    return count;
}
#endif

int main(void) {
    /* Make the C library hand out touched heap memory: a large freed block raises glibc's mmap threshold,
     * then a smaller block comes from the heap, is touched and freed. */
    uint8_t *big = malloc(14 * MIB);
    CHECK(big != NULL);
    touch(big, 14 * MIB, 1);
    free(big);
    uint8_t *used = malloc(9 * MIB);
    CHECK(used != NULL);
    touch(used, 9 * MIB, 2);
    free(used);

    size_t bytes = 7 * MIB + 192;
    uint8_t *p = mm_alloc_large(bytes);
    CHECK(p != NULL);
    CHECK((uintptr_t)p % (2 * MIB) == 0);
#if defined(__linux__)
    long resident = resident_pages(p, bytes);
    CHECK_EQ_INT(resident, 0); /* pages of the fresh block already faulted in */
#endif
    memset(p, 3, bytes);
    CHECK(p[0] == 3 && p[bytes - 1] == 3);
#if defined(__linux__)
    long page = sysconf(_SC_PAGESIZE);
    CHECK(resident_pages(p, bytes) == (long)(bytes / (size_t)page));
#endif
    free(p);

    /* Below 2 MiB: an ordinary 64-byte aligned block. */
    uint8_t *small = mm_alloc_large(1000);
    CHECK(small != NULL && (uintptr_t)small % 64 == 0);
    memset(small, 4, 1000);
    free(small);
    return mm_test_finish("test_large_alloc");
}
