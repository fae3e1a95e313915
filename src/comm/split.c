/* SPDX-License-Identifier: Apache-2.0 */
/* comm/split.c: sub-communicators (EP x TP pairs, domains of consecutive ranks, the ranks of a node).
 *
 * Algorithm: allgather of (color, key, argument check) from every alive rank, so that one rank's bad
 * argument fails the split on all ranks instead of leaving them waiting; then each rank lists the
 * alive ranks of its color ordered by (key, old rank), and the backend builds the groups (threads: the
 * first member allocates the shared state and publishes it through one more allgather). Cost: two
 * allgathers of a few bytes. */
#include "comm/comm_internal.h"
#include "core/error.h"

mm_status mm_comm_split(mm_comm *comm, int color, int key, mm_comm **out, mm_error *err) {
    if (out) *out = NULL;
    mm_status st = mm_comm_enter(comm, "split", err);
    if (st) return st;
    int mine[3] = {color, key, color >= 0 && out != NULL};
    int all[MM_COMM_MAX_RANKS][3];
    st = mm_comm_allgather(comm, mine, sizeof mine, all, err);
    if (st) return mm_error_prefix(err, "split"), st;
    for (int r = 0; r < comm->size; r++) {
        if (!comm->alive[r] || all[r][2]) continue;
        if (all[r][0] < 0)
            return mm_fail(err, MM_ERR_INVALID_ARGUMENT,
                           "split: rank %d passed color = %d, which is negative", r, all[r][0]);
        return mm_fail(err, MM_ERR_INVALID_ARGUMENT, "split: rank %d passed out = NULL", r);
    }
    int members[MM_COMM_MAX_RANKS];
    int n = 0, my_new_rank = -1;
    /* Insertion by (key, old rank): ranks are few. */
    for (int r = 0; r < comm->size; r++) {
        if (!comm->alive[r] || all[r][0] != color) continue;
        int at = n;
        while (at > 0 && all[members[at - 1]][1] > all[r][1]) {
            members[at] = members[at - 1];
            at--;
        }
        members[at] = r;
        n++;
    }
    for (int i = 0; i < n; i++)
        if (members[i] == comm->rank) my_new_rank = i;
    mm_error local = {MM_OK, ""};
    st = comm->vt->create_group(comm, members, n, my_new_rank, out, &local);
    if (st) mm_error_prefix(&local, "split");
    return mm_comm_leave(comm, st, &local, err);
}

mm_status mm_comm_split_domains(mm_comm *comm, int ranks_per_domain, mm_comm **out, mm_error *err) {
    if (out) *out = NULL;
    if (!comm) return mm_fail(err, MM_ERR_INVALID_ARGUMENT, "split_domains: comm is NULL");
    if (ranks_per_domain < 1 || comm->size % ranks_per_domain != 0)
        return mm_fail(err, MM_ERR_INVALID_ARGUMENT,
                       "split_domains: ranks_per_domain = %d must be positive and divide the rank count %d",
                       ranks_per_domain, comm->size);
    return mm_comm_split(comm, comm->rank / ranks_per_domain, comm->rank, out, err);
}
