/* SPDX-License-Identifier: Apache-2.0 */
/* tests/test_dispatch_combine_elastic.c: the elastic scale-in proof on thread ranks.
 *
 * R ranks run one Dispatch + Combine together; then some ranks stop calling (they leave), the survivors
 * declare themselves to the communicator and run again with elastic_info. Their outputs must equal,
 * bit for bit, those of a fresh run on a world of the survivors only, where new rank n holds the data
 * of old rank elastic_info's table 2 [n], with the same tokens and experts. Both runs are also checked
 * against the independent expectations of test_dispatch_combine_scenarios.h. */
#include "test_dispatch_combine_scenarios.h"
#include "testlib.h"

typedef struct elastic_run {
    dct_world *full, *elastic;
} elastic_run;

static mm_status rank_fn(mm_comm *comm, void *arg, mm_error *err) {
    elastic_run *run = arg;
    int g = mm_comm_rank(comm);
    mm_comm_set_timeout(comm, 20.0, NULL);
    mm_dc_workspace *ws = NULL;
    mm_status st = mm_dc_workspace_create(comm, &ws, err);
    if (st) return st;
    if ((st = dct_run_rank(comm, run->full, ws, err))) goto fail;
    /* The failure happens between calls: a removed rank has finished its last call before the
     * survivors go on. (With ranks as threads, a "removed" thread still inside the previous call would
     * read buffers the survivors later free; a failed process or a dead thread reads nothing.) */
    if ((st = mm_comm_barrier(comm, err))) goto fail;
    const dct_world *w = run->elastic;
    if (w->cfg.removed[g]) { /* this rank fails: it simply stops calling */
        mm_dc_workspace_abandon(ws);
        return MM_OK;
    }
    int alive[DC_MAXR], n = 0;
    for (int r = 0; r < w->cfg.R; r++)
        if (!w->cfg.removed[r]) alive[n++] = r;
    if ((st = mm_comm_set_survivors(comm, alive, n, err))) goto fail;
    /* twice: the second call reuses the survivors' buffers and signals */
    if ((st = dct_run_rank(comm, run->elastic, ws, err))) goto fail;
    if ((st = dct_run_rank(comm, run->elastic, ws, err))) goto fail;
    return mm_dc_workspace_free(ws, err);
fail:
    mm_dc_workspace_abandon(ws);
    return st;
}

static void proof(const char *name, dct_cfg cfg, const int *removed, int n_removed) {
    dct_cfg el = cfg;
    el.elastic = 1;
    for (int i = 0; i < n_removed; i++) el.removed[removed[i]] = 1;
    dct_world full, elastic, fresh;
    dct_world_make(&elastic, &el);
    dct_world_make(&full, &cfg); /* the call before the failure: the whole world, its own data */
    elastic_run run = {&full, &elastic};
    mm_error err = {MM_OK, ""};
    mm_status st = mm_comm_run_threads(cfg.R, rank_fn, &run, NULL, NULL, &err);
    if (st) fprintf(stderr, "%s (elastic): %s\n", name, err.message);
    CHECK_OK(st, &err);

    dct_cfg fc = cfg;
    fc.R = elastic.R_eff;
    fc.shared_ranks = elastic.sh_eff;
    fc.M = elastic.M_eff;
    for (int n = 0; n < elastic.R_eff; n++) fc.data_id[n] = elastic.old_of_new[n] + 1;
    dct_world_make(&fresh, &fc);
    st = mm_comm_run_threads(fc.R, dct_rank_once, &fresh, NULL, NULL, &err);
    if (st) fprintf(stderr, "%s (fresh): %s\n", name, err.message);
    CHECK_OK(st, &err);
    for (int n = 0; n < elastic.R_eff && !st; n++) {
        mm_error e = {MM_OK, ""};
        mm_status cs = dct_compare(&elastic, elastic.old_of_new[n], &fresh, n, &e);
        if (cs) fprintf(stderr, "%s: %s\n", name, e.message);
        CHECK_OK(cs, &e);
    }
    dct_world_free(&full);
    dct_world_free(&elastic);
    dct_world_free(&fresh);
}

static dct_cfg base_cfg(int R, int M) {
    dct_cfg c;
    memset(&c, 0, sizeof c);
    c.R = R, c.M = M, c.bs = 6, c.h = 48, c.k = 2, c.eps = 1e-6f, c.ent_type = 1, c.seed = 3;
    return c;
}

int main(void) {
    dct_cfg c = base_cfg(4, 4);
    proof("remove one of 4", c, (int[]){2}, 1);
    c = base_cfg(8, 16); /* the page's example: ranks 2..5 of 8 removed (here two experts per rank) */
    c.k = 3, c.mask_kind = 2;
    proof("remove 2..5 of 8", c, (int[]){2, 3, 4, 5}, 4);
    c = base_cfg(6, 8); /* shared-expert ranks 0, 1; remove shared rank 1 and routed rank 4 */
    c.S = 1, c.shared_ranks = 2, c.quant = 1, c.smooth = 1, c.shared_x = 1;
    proof("remove a shared and a routed rank", c, (int[]){1, 4}, 2);
    c = base_cfg(5, 5); /* special experts (ids start at the smaller routed count), rank 0 removed */
    c.Z = 1, c.C = 1, c.N = 2, c.k = 3, c.alpha_2d = 1, c.mask_kind = 1, c.vary_bs = 1, c.ent_type = 0;
    proof("special experts, rank 0 removed", c, (int[]){0, 3}, 2);
    return mm_test_finish("test_dispatch_combine_elastic");
}
