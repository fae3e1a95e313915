/* SPDX-License-Identifier: Apache-2.0 */
/* comm/backend.h: the table of communication backends (backends.c) and what one row provides.
 *
 * A backend is a folder src/comm/<name>/ that moves bytes (its mm_comm_vtable) plus one provider, a row
 * of the table: how to get the world and how to start ranks on it. Adding a backend (UCX, a transport of
 * the user's) is that folder and one row in backends.c. A backend compiled only when its dependency is
 * found still has its row in every build: a stub provider outside its folder (e.g. mpi_absent.c) stands
 * in, marked unavailable, so `--backend mpi` in a build without MPI says what is missing instead of
 * "unknown backend". */
#ifndef MEGAMOE_COMM_BACKEND_H
#define MEGAMOE_COMM_BACKEND_H

#include "megamoe/comm.h"

typedef struct mm_comm_provider {
    const char *name;
    int available; /* compiled into this build */
    /* For an unavailable backend: the line that says so and how to get it. */
    const char *unavailable_reason;
    /* The world a launch of nranks (0: the backend's own count) would have and which of its ranks run
     * in this process; no side effect (does not initialize a runtime). */
    mm_status (*world)(int nranks, mm_comm_world *out, mm_error *err);
    /* Starts the ranks, runs fn on each of this process's ranks, agrees on the outcome (every process
     * returns the status of the lowest failing rank with its message as written). */
    mm_status (*launch)(int nranks, mm_comm_rank_fn fn, void *arg, mm_error *err);
} mm_comm_provider;

extern const mm_comm_provider mm_comm_threads_provider; /* threads/threads_launch.c */
extern const mm_comm_provider mm_comm_mpi_provider;     /* mpi/mpi_launch.c, or mpi_absent.c */

/* The row named name, or NULL. */
const mm_comm_provider *mm_comm_provider_find(const char *name);

#endif
