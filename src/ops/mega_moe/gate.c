/* SPDX-License-Identifier: Apache-2.0 */
/* ops/mega_moe/gate.c: the compute gate of ranks running as threads of one process.
 *
 * Every rank hands its GEMM work to the one process-wide pool, whose caller thread plus workers
 * already fill every core. When 4 rank-threads do that at once on 2 cores, 4 callers and the workers
 * all run: each GEMM task is preempted half-way (AMX tile state saved and restored, the expert's weight
 * panel evicted by another rank's), and the pool's short spin-waits burn the time slices others need.
 * The gate lets only as many ranks compute at a time as the cores allow for pool-sized jobs
 * (the process's CPU budget / pool threads, at least 1: core/cpu_budget.h); the others sleep on a condition
 * variable, not on a core. It is a ticket lock, so ranks get in in arrival order and none starves. With MPI
 * (one rank per process) the gate is never contended. The gate only orders whole FFN batches; results do not
 * depend on it. */
#include <pthread.h>

#include "core/cpu_budget.h"
#include "core/parallel.h"
#include "ops/mega_moe/gate.h"

static struct {
    pthread_mutex_t mutex;
    pthread_cond_t cond;
    uint64_t next_ticket, admitted; /* tickets below `admitted` got in (in ticket order) */
    int inside;                     /* ranks inside now */
} gate = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, 0, 0, 0};

static int gate_capacity(void) {
    int cap = mm_cpu_budget_cpus() / mm_parallel_num_threads();
    return cap >= 1 ? cap : 1;
}

void mm_moe_gate_enter(void) {
    int cap = gate_capacity();
    pthread_mutex_lock(&gate.mutex);
    uint64_t ticket = gate.next_ticket++;
    /* In when every earlier ticket got in and there is room. */
    while (ticket != gate.admitted || gate.inside >= cap) pthread_cond_wait(&gate.cond, &gate.mutex);
    gate.admitted++;
    gate.inside++;
    pthread_cond_broadcast(&gate.cond); /* the next ticket may fit too */
    pthread_mutex_unlock(&gate.mutex);
}

void mm_moe_gate_leave(void) {
    pthread_mutex_lock(&gate.mutex);
    gate.inside--;
    pthread_cond_broadcast(&gate.cond);
    pthread_mutex_unlock(&gate.mutex);
}
