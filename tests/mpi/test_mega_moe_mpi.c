/* SPDX-License-Identifier: Apache-2.0 */
/* tests/mpi/test_mega_moe_mpi.c: MegaMoE with one rank per MPI process (2, 3 and 4 processes): every
 * scenario with shared experts, masks, an idle rank and the combine modes, against the float64
 * reference and bit for bit against the threads backend run in the same process; a validation
 * failure raised on one process reaches every process. Every process builds the same case (same seed)
 * and checks its own rank. */
#include <mpi.h>
#include <stdio.h>

#include "../test_mega_moe_common.h"
#include "megamoe/comm_mpi.h"

static moe_spec spec_for(int ranks, mm_dtype w, int mode, mm_dtype d, uint64_t seed) {
    return moe_spec_make((moe_dims){ranks, 2 * ranks, 3, 64, 32, 3, 2}, w, mode, d, seed);
}

static void break_id(mm_mega_moe_attrs *a, mm_tensor *ids, mm_tensor *x, int64_t *m) {
    (void)a, (void)x, (void)m;
    ((int32_t *)ids->data)[0] = 1000;
}

/* Runs sp on MPI (this process = one rank) and on threads; checks this rank. */
static void run_one(mm_comm *comm, const moe_spec *sp, const char *label, int break_rank) {
    int me = mm_comm_rank(comm);
    moe_case c, t;
    if (!moe_case_build(&c, sp) || !moe_case_build(&t, sp)) return;
    moe_run_arg arg;
    memset(&arg, 0, sizeof arg);
    arg.c = &c;
    arg.break_rank = break_rank;
    arg.breaker = break_rank >= 0 ? break_id : NULL;
    mm_error err;
    mm_error_clear(&err);
    mm_status st = moe_rank_fn(comm, &arg, &err);
    if (break_rank >= 0) {
        CHECK_EQ_INT(st, MM_ERR_INVALID_ARGUMENT);
        CHECK_STR_CONTAINS(err.message, "topk_ids[0][0] = 1000 is outside");
    } else {
        CHECK_OK(st, &err);
        double e = moe_case_check_rank(&c, me, label);
        moe_run_arg targ;
        memset(&targ, 0, sizeof targ);
        targ.break_rank = -1;
        CHECK_OK(moe_case_run(&t, &targ), &targ.err[0]);
        CHECK(memcmp(c.y[me], t.y[me], (size_t)(c.ref.ranks[me].bs * sp->hidden) * 2) == 0);
        if (me == 0) printf("  %-40s error %.3g, threads == mpi\n", label, e);
    }
    moe_case_free(&c);
    moe_case_free(&t);
}

int main(int argc, char **argv) {
    int provided = 0;
    MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
    int size = 1;
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    mm_comm *comm = NULL;
    mm_error err;
    mm_error_clear(&err);
    mm_status st = mm_comm_from_mpi(MPI_COMM_WORLD, &comm, &err);
    CHECK_OK(st, &err);
    if (st == MM_OK && size <= 8) {
        static const struct {
            const char *name;
            mm_dtype w, d;
            int mode;
        } sc[] = {{"A16W16", MM_DTYPE_BF16, MM_DTYPE_INVALID, 0},
                  {"A8W8-INT", MM_DTYPE_I8, MM_DTYPE_I8, 2},
                  {"A8W4-INT", MM_DTYPE_INT4, MM_DTYPE_I8, 2},
                  {"A8W8-FP e4m3", MM_DTYPE_FP8_E4M3FN, MM_DTYPE_FP8_E4M3FN, 4},
                  {"A8W8-FP e5m2", MM_DTYPE_FP8_E5M2, MM_DTYPE_FP8_E5M2, 4},
                  {"A8W4-FP", MM_DTYPE_FP4_E2M1, MM_DTYPE_FP8_E4M3FN, 4},
                  {"A4W4-FP", MM_DTYPE_FP4_E2M1, MM_DTYPE_FP4_E2M1, 4}};
        for (size_t q = 0; q < sizeof sc / sizeof sc[0]; q++) {
            moe_spec sp = spec_for(size, sc[q].w, sc[q].mode, sc[q].d, 100 + q);
            run_one(comm, &sp, sc[q].name, -1);
            sp.shared_count = 2;
            sp.masked = 1;
            sp.bs[size - 1] = 0;
            sp.attrs.topk_weights_type = 1;
            sp.attrs.combine_quant_mode = q % 2 ? 3 : 0;
            char label[96];
            snprintf(label, sizeof label, "%s shared mask bs0 type1 cq%d", sc[q].name,
                     sp.attrs.combine_quant_mode);
            run_one(comm, &sp, label, -1);
        }
        moe_spec sp = spec_for(size, MM_DTYPE_BF16, 0, MM_DTYPE_INVALID, 7);
        sp.attrs.combine_comm_mode = 1;
        sp.hot = 1;
        run_one(comm, &sp, "combine_comm_mode 1 hot", -1);
        if (size == 4) {
            sp = spec_for(size, MM_DTYPE_BF16, 0, MM_DTYPE_INVALID, 8);
            sp.attrs.combine_comm_mode = 2;
            sp.attrs.rank_num_per_server = 2;
            run_one(comm, &sp, "combine_comm_mode 2 domains of 2", -1);
        }
        sp = spec_for(size, MM_DTYPE_BF16, 0, MM_DTYPE_INVALID, 9);
        run_one(comm, &sp, "bad id on the last rank", size - 1);
    }
    mm_comm_free(comm, NULL);
    MPI_Barrier(MPI_COMM_WORLD);
    int rc = mm_test_finish("test_mega_moe_mpi");
    MPI_Finalize();
    return rc;
}
