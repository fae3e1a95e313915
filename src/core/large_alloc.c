/* SPDX-License-Identifier: Apache-2.0 */
/* core/large_alloc.c: 2 MiB-aligned allocations advised as huge pages (large_alloc.h). */
#define _DEFAULT_SOURCE /* madvise, posix_memalign */
#include "core/large_alloc.h"

#include "core/numa.h"

#include <stdint.h>
#include <stdlib.h>
#if defined(__linux__)
#include <sys/mman.h>
#endif

enum { HUGE_PAGE_BYTES = 2 << 20 };

void *mm_alloc_large(size_t bytes) {
    if (bytes < HUGE_PAGE_BYTES) return aligned_alloc(64, (bytes + 63) / 64 * 64);
    /* The size is not rounded up: the last partial 2 MiB stays on small pages, and nothing beyond the
     * request is ever touched (a per-expert round-up would cost up to 2 MiB per matrix). */
    size_t rounded = (bytes + 63) / 64 * 64;
    void *p = NULL; /* posix_memalign: C11 aligned_alloc wants the size a multiple of the alignment */
    if (posix_memalign(&p, HUGE_PAGE_BYTES, rounded) != 0) return NULL;
#if defined(__linux__) && defined(MADV_HUGEPAGE)
    if (p) (void)madvise(p, rounded / 4096 * 4096, MADV_HUGEPAGE); /* advice only: small pages work too */
#endif
    /* Before the first touch (the packing writes), so the pages land interleaved. */
    if (p) mm_numa_interleave(p, rounded / 4096 * 4096);
    return p;
}
