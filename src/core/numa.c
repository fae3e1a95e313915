/* SPDX-License-Identifier: Apache-2.0 */
/* core/numa.c: interleaving of large buffers over the NUMA nodes of the process's CPUs (numa.h). */
#include "core/numa.h"

#ifdef MEGAMOE_HAVE_NUMA
#include <numa.h>
#include <numaif.h>
#include <pthread.h>

static struct bitmask *interleave_nodes; /* the nodes of the process's CPUs, when more than one */
static int interleave_count = 1;
static pthread_once_t numa_once = PTHREAD_ONCE_INIT;

static void read_nodes(void) {
    if (numa_available() < 0 || numa_num_configured_nodes() < 2) return;
    struct bitmask *nodes = numa_get_run_node_mask();
    if (!nodes) return;
    int count = (int)numa_bitmask_weight(nodes);
    if (count < 2) {
        numa_bitmask_free(nodes);
        return;
    }
    interleave_nodes = nodes; /* kept for the process's life */
    interleave_count = count;
}

int mm_numa_interleave_nodes(void) {
    pthread_once(&numa_once, read_nodes);
    return interleave_count;
}

void mm_numa_interleave(void *p, size_t bytes) {
    if (mm_numa_interleave_nodes() < 2 || bytes == 0) return;
    /* mbind itself, not numa_interleave_memory: libnuma reports a refusal on stderr, the library never
     * prints. */
    (void)mbind(p, bytes, MPOL_INTERLEAVE, interleave_nodes->maskp, interleave_nodes->size + 1, 0);
}

#else

int mm_numa_interleave_nodes(void) {
    return 1;
}

void mm_numa_interleave(void *p, size_t bytes) {
    (void)p;
    (void)bytes;
}

#endif
