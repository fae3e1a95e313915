/* SPDX-License-Identifier: Apache-2.0 */
/* tests/comm_launch_rank.h: the rank body the launcher tests run on every backend
 * (tests/test_comm_backends.c on threads, tests/mpi/test_comm_launch.c under mpirun): meet the others,
 * then ranks >= fail_from fail with their own status and message, so the caller can check that the
 * lowest failing rank's reaches it. */
#ifndef MEGAMOE_TESTS_COMM_LAUNCH_RANK_H
#define MEGAMOE_TESTS_COMM_LAUNCH_RANK_H

#include <stdio.h>

#include "megamoe/comm.h"

/* The first failing rank returns MM_ERR_INVALID_FILE, later ones MM_ERR_IO: "rank N could not go on". */
static inline mm_status launch_rank_body(mm_comm *comm, int fail_from, mm_error *err) {
    mm_status st = mm_comm_barrier(comm, err);
    if (st) return st;
    int r = mm_comm_rank(comm);
    if (r < fail_from) return MM_OK;
    snprintf(err->message, sizeof err->message, "rank %d could not go on", r);
    return r == fail_from ? MM_ERR_INVALID_FILE : MM_ERR_IO;
}

#endif
