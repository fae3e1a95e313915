/* SPDX-License-Identifier: Apache-2.0 */
/* core/large_alloc.h: allocation of large, long-lived, streamed buffers (packed expert weights).
 *
 * Buffers of 2 MiB or more are aligned to 2 MiB and advised as transparent huge pages (Linux
 * MADV_HUGEPAGE; most distributions, Debian included, enable THP only on request): the GEMM kernels
 * stream weights at DRAM speed, and with 4 KiB pages every 4 KiB costs a TLB walk and stops the hardware
 * prefetchers at the page boundary. Where the advice is refused the buffer simply stays on small pages.
 * On a NUMA machine (with libnuma in the build) they are also interleaved over the nodes of the
 * process's CPUs (core/numa.h). Both take effect at a page's first touch, so the block's pages are
 * dropped before it is returned (the C library may hand out heap memory the process touched before):
 * its contents are undefined, as malloc's, and the first write faults it in afresh.
 * Free with free().
 *
 * Internal API for tools: `megamoe bench ffn` (tools/bench/bench_ffn.c) allocates its streamed buffers so;
 * not part of include/megamoe/. */
#ifndef MEGAMOE_CORE_LARGE_ALLOC_H
#define MEGAMOE_CORE_LARGE_ALLOC_H

#include <stddef.h>

/* At least `bytes` bytes, 64-byte aligned (2 MiB aligned from 2 MiB on); NULL when out of memory. */
void *mm_alloc_large(size_t bytes);

#endif
