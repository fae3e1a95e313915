/* SPDX-License-Identifier: Apache-2.0 */
/* tests/mpi/test_dispatch_combine.c: Dispatch V3 + Combine V2 with one rank per MPI process (run by
 * CTest with 2, 3 and 4 processes): the scenarios of test_dispatch_combine_scenarios.h (routed and
 * shared-expert ranks, several experts per rank, quant mode 2, masks, special experts, TP pairs,
 * global_bs), each checked against the independent expectations, and each process's outputs compared
 * bit for bit with the same world run on the threads backend inside the process. Then the elastic
 * proof: the last rank (3 and 4 processes), then ranks 0 and 2 (4 processes) stop calling, the survivors
 * run with elastic_info and must equal a fresh smaller world; and an invalid input on one rank that
 * every process must see. */
#include <mpi.h>
#include <stdlib.h>

#include "megamoe/comm_mpi.h"
#include "test_dispatch_combine_scenarios.h"
#include "testlib.h"

static int world_rank, world_size;

/* MPI_COMM_WORLD as a communicator with a timeout (no test can hang), and a workspace on it. */
static mm_comm *world_comm(mm_dc_workspace **ws) {
    mm_comm *c = NULL;
    mm_error err = {MM_OK, ""};
    CHECK_OK(mm_comm_from_mpi(MPI_COMM_WORLD, &c, &err), &err);
    mm_comm_set_timeout(c, 20.0, NULL);
    *ws = NULL;
    CHECK_OK(mm_dc_workspace_create(c, ws, &err), &err);
    return c;
}

static void run_mpi(const char *name, const dct_cfg *cfg) {
    dct_world w, t;
    dct_world_make(&w, cfg);
    mm_error err = {MM_OK, ""};
    mm_dc_workspace *ws;
    mm_comm *c = world_comm(&ws);
    mm_status st = dct_run_rank(c, &w, ws, &err);
    if (!st) st = dct_run_rank(c, &w, ws, &err); /* reuse of buffers and signals */
    if (st) fprintf(stderr, "%s, process %d: %s\n", name, world_rank, err.message);
    CHECK_OK(st, &err);
    CHECK_OK(mm_dc_workspace_free(ws, &err), &err);
    CHECK_OK(mm_comm_free(c, &err), &err);
    /* the threads backend on the same world gives the same bits */
    dct_world_make(&t, cfg);
    mm_error terr = {MM_OK, ""};
    st = mm_comm_run_threads(t.ranks, dct_rank_once, &t, NULL, NULL, &terr);
    CHECK_OK(st, &terr);
    if (!st) {
        mm_error e = {MM_OK, ""};
        mm_status cs = dct_compare(&w, world_rank, &t, world_rank, &e);
        if (cs) fprintf(stderr, "%s: mpi vs threads: %s\n", name, e.message);
        CHECK_OK(cs, &e);
    }
    dct_world_free(&w);
    dct_world_free(&t);
    MPI_Barrier(MPI_COMM_WORLD);
}

static dct_cfg base_cfg(int R, int M) {
    return dct_base_cfg(R, M, 21);
}

static void scenarios(void) {
    int n = world_size;
    dct_cfg c = base_cfg(n, n);
    run_mpi("plain", &c);
    c = base_cfg(n, 2 * n);
    c.quant = 1, c.smooth = 1, c.mask_kind = 2, c.ent_type = 0;
    run_mpi("two experts per rank, quant 2, 2-D mask", &c);
    c = base_cfg(n, 2 * n);
    c.Z = 1, c.C = 1, c.N = 2, c.k = 4, c.alpha_2d = 1, c.vary_bs = 1, c.mask_kind = 1, c.shared_x = 1;
    run_mpi("special experts, global_bs, 1-D mask", &c);
    if (n >= 3) {
        c = base_cfg(n, 2 * (n - 1));
        c.S = 1, c.shared_ranks = 1, c.quant = 1, c.smooth = 1;
        run_mpi("shared-expert rank", &c);
    }
    if (n % 2 == 0) {
        c = base_cfg(n / 2, n / 2);
        c.tp = 2, c.k = 1, c.N = 1, c.k = 2;
        run_mpi("TP pairs", &c);
    }
}

/* The ranks in `removed` leave after one call (they simply stop calling); the survivors go on with
 * elastic_info and must equal a fresh smaller world, run on threads in each survivor's process. */
static void elastic_proof(const char *name, const int *removed, int n_removed) {
    int n = world_size;
    dct_cfg c = base_cfg(n, 2 * n);
    c.k = 2, c.quant = 1, c.smooth = 1;
    dct_cfg el = c;
    el.elastic = 1;
    for (int i = 0; i < n_removed; i++) el.removed[removed[i]] = 1;
    dct_world full, w, fresh;
    dct_world_make(&full, &c);
    dct_world_make(&w, &el);
    mm_error err = {MM_OK, ""};
    mm_dc_workspace *ws;
    mm_comm *comm = world_comm(&ws);
    mm_status st = dct_run_rank(comm, &full, ws, &err);
    CHECK_OK(st, &err);
    if (el.removed[world_rank]) {
        mm_dc_workspace_abandon(ws);
    } else {
        int alive[DC_MAXR];
        for (int r = 0; r < w.R_eff; r++) alive[r] = w.old_of_new[r];
        CHECK_OK(mm_comm_set_survivors(comm, alive, w.R_eff, &err), &err);
        st = dct_run_rank(comm, &w, ws, &err);
        if (st) fprintf(stderr, "%s, process %d: %s\n", name, world_rank, err.message);
        CHECK_OK(st, &err);
        CHECK_OK(mm_dc_workspace_free(ws, &err), &err);
        dct_cfg fc = c;
        fc.R = w.R_eff, fc.M = w.M_eff;
        for (int r = 0; r < w.R_eff; r++) fc.data_id[r] = w.old_of_new[r] + 1;
        dct_world_make(&fresh, &fc);
        mm_error terr = {MM_OK, ""};
        CHECK_OK(mm_comm_run_threads(w.R_eff, dct_rank_once, &fresh, NULL, NULL, &terr), &terr);
        mm_error e = {MM_OK, ""};
        mm_status cs = dct_compare(&w, world_rank, &fresh, w.new_of_old[world_rank], &e);
        if (cs) fprintf(stderr, "%s: elastic vs fresh: %s\n", name, e.message);
        CHECK_OK(cs, &e);
        dct_world_free(&fresh);
    }
    mm_comm_free(comm, NULL);
    dct_world_free(&full);
    dct_world_free(&w);
    MPI_Barrier(MPI_COMM_WORLD);
}

/* A broken id on the last process: every process gets the same error, nothing hangs. */
static void invalid_everywhere(void) {
    dct_cfg c = base_cfg(world_size, world_size);
    dct_world w;
    dct_world_make(&w, &c);
    if (world_rank == world_size - 1) w.rd[world_rank].ids[0] = 1000;
    mm_error err = {MM_OK, ""};
    mm_dc_workspace *ws;
    mm_comm *comm = world_comm(&ws);
    mm_status st = dct_run_rank(comm, &w, ws, &err);
    CHECK(st != MM_OK);
    char want[96];
    snprintf(want, sizeof want, "rank %d: expert_ids[0][0] = 1000 is outside", world_size - 1);
    CHECK_STR_CONTAINS(err.message, want);
    CHECK_OK(mm_dc_workspace_free(ws, &err), &err);
    mm_comm_free(comm, NULL);
    dct_world_free(&w);
    MPI_Barrier(MPI_COMM_WORLD);
}

#ifndef DC_TEST_NAME
#define DC_TEST_NAME "mpi_test_dispatch_combine"
#endif

int main(int argc, char **argv) {
#ifdef DC_MPI_NO_SHM
    setenv("MEGAMOE_COMM_MPI_NO_SHM", "1", 1); /* symmetric buffers in RMA windows: the staged put path */
#endif
    int provided = 0;
    MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
    MPI_Comm_rank(MPI_COMM_WORLD, &world_rank);
    MPI_Comm_size(MPI_COMM_WORLD, &world_size);
    scenarios();
    if (world_size >= 3) elastic_proof("the last rank leaves", (int[]){world_size - 1}, 1);
    if (world_size >= 4) elastic_proof("ranks 0 and 2 leave", (int[]){0, 2}, 2);
    invalid_everywhere();
    MPI_Barrier(MPI_COMM_WORLD);
    int rc = mm_test_finish(DC_TEST_NAME);
    MPI_Finalize();
    return rc;
}
