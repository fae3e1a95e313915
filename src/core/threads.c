/* SPDX-License-Identifier: Apache-2.0 */
/* core/threads.c: the public thread control of include/megamoe/threads.h, over the pool
 * (core/parallel.h), the CPU budget (core/cpu_budget.h) and NUMA placement (core/numa.h). */
#include "megamoe/threads.h"

#include <errno.h>
#include <string.h>

#include "core/error.h"
#include "core/numa.h"
#include "core/parallel.h"

enum { MM_THREADS_MAX = 1024 };

int mm_threads_count(void) {
    return mm_parallel_num_threads();
}

mm_status mm_threads_set_count(int n, mm_error *err) {
    if (n < 1 || n > MM_THREADS_MAX)
        return mm_fail(err, MM_ERR_INVALID_ARGUMENT,
                       "n = %d is outside [1, %d] (threads of the pool, the calling thread included)", n,
                       MM_THREADS_MAX);
    mm_parallel_set_num_threads(n);
    return MM_OK;
}

int mm_threads_default_count(void) {
    return mm_parallel_default_threads();
}

mm_status mm_threads_set_pinning(int on, mm_error *err) {
    if (on != 0 && on != 1) return mm_fail(err, MM_ERR_INVALID_ARGUMENT, "on = %d is not 0 or 1", on);
    int rc = mm_parallel_set_pinning(on);
    if (rc == ENOSYS)
        return mm_fail(err, MM_ERR_UNSUPPORTED, "on = %d: this system has no thread affinity call", on);
    if (rc != 0)
        return mm_fail(err, MM_ERR_IO, "on = %d: the system refused a worker's CPU affinity: %s", on,
                       strerror(rc));
    return MM_OK;
}

int mm_threads_pinning(void) {
    return mm_parallel_pinning();
}

int mm_threads_numa_nodes(void) {
    return mm_numa_interleave_nodes();
}
