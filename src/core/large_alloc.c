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
    if (!p) return NULL;
    size_t pages = rounded / 4096 * 4096; /* whole pages of the block only: not the next chunk's header */
#if defined(__linux__) && defined(MADV_HUGEPAGE)
    (void)madvise(p, pages, MADV_HUGEPAGE); /* advice only: small pages work too */
#endif
    /* Before the first touch (the packing writes), so the pages land interleaved. */
    mm_numa_interleave(p, pages);
#if defined(__linux__) && defined(MADV_DONTNEED)
    /* Huge pages and the NUMA policy take effect only when a page is first touched, but glibc serves
     * requests under its dynamic mmap threshold (which grows to the largest block freed, up to 32 MiB:
     * a 14 MiB temporary freed before, say) from its heap, whose pages the process may have touched
     * already, on 4 KiB pages: packed GEMM2 weights of 7 MiB came back 0 % huge pages. Dropping the
     * block's pages makes the next touch fault them in fresh (contents are undefined anyway). */
    (void)madvise(p, pages, MADV_DONTNEED);
#endif
    return p;
}
