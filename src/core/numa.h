/* SPDX-License-Identifier: Apache-2.0 */
/* core/numa.h: where packed weights live on a NUMA machine.
 *
 * With libnuma in the build (MEGAMOE_HAVE_NUMA) and the process's CPUs spanning more than one node, the
 * pages of a large buffer are interleaved over those nodes before anything touches them: the pool's
 * workers on every node then stream weights from local and remote memory alike, instead of all of them
 * from the one node whose thread happened to pack (first touch). Elsewhere both calls do nothing. Pages
 * only move between nodes, never change contents: results do not depend on it. */
#ifndef MEGAMOE_CORE_NUMA_H
#define MEGAMOE_CORE_NUMA_H

#include <stddef.h>

/* Nodes large buffers are interleaved over: >= 2 when interleaving is on, else 1. */
int mm_numa_interleave_nodes(void);

/* Interleaves the untouched pages of [p, p + bytes) (p page-aligned) over those nodes; no-op otherwise.
 * Advice only: a refusal leaves first-touch placement. */
void mm_numa_interleave(void *p, size_t bytes);

#endif
