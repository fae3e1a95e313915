/* SPDX-License-Identifier: Apache-2.0 */
/* comm/allreduce.c: small allreduce (at most MM_COMM_ALLREDUCE_MAX values) by allgather, then a local
 * reduction in ascending rank order.
 *
 * Cost: one allgather of n * 8 bytes, plus n * alive operations per rank. Every rank reduces the same
 * values in the same order, so all ranks get identical bits, also for doubles (a tree or ring would
 * need a final broadcast for that). Meant for agreeing on validation results and sizes, not for
 * tensors. */
#include <string.h>

#include "comm/comm_internal.h"
#include "core/error.h"

static mm_status allreduce_bytes(mm_comm *comm, void *values, int n, int is_double, mm_reduce_op op,
                                 mm_error *err) {
    const char *op_name = is_double ? "allreduce_f64" : "allreduce_i64";
    mm_status st = mm_comm_enter(comm, op_name, err);
    if (st) return st;
    if (n < 1 || n > MM_COMM_ALLREDUCE_MAX)
        return mm_fail(err, MM_ERR_INVALID_ARGUMENT, "%s: n = %d is outside [1, %d]", op_name, n,
                       MM_COMM_ALLREDUCE_MAX);
    if (!values) return mm_fail(err, MM_ERR_INVALID_ARGUMENT, "%s: values is NULL", op_name);
    if (op != MM_REDUCE_SUM && op != MM_REDUCE_MIN && op != MM_REDUCE_MAX)
        return mm_fail(err, MM_ERR_INVALID_ARGUMENT, "%s: op = %d is not a mm_reduce_op", op_name, (int)op);
    uint64_t gathered[MM_COMM_MAX_RANKS * MM_COMM_ALLREDUCE_MAX];
    size_t bytes = (size_t)n * 8;
    st = mm_comm_allgather(comm, values, bytes, gathered, err);
    if (st) return mm_error_prefix(err, "%s", op_name), st;
    for (int i = 0; i < n; i++) {
        int first = 1;
        int64_t acc_i = 0;
        double acc_d = 0;
        for (int r = 0; r < comm->size; r++) {
            if (!comm->alive[r]) continue;
            uint64_t bits = gathered[(size_t)r * (size_t)n + (size_t)i];
            if (is_double) {
                double v;
                memcpy(&v, &bits, 8);
                if (first)
                    acc_d = v;
                else if (op == MM_REDUCE_SUM)
                    acc_d += v;
                else if (op == MM_REDUCE_MIN)
                    acc_d = v < acc_d ? v : acc_d;
                else
                    acc_d = v > acc_d ? v : acc_d;
            } else {
                int64_t v = (int64_t)bits;
                /* Sum wraps like the two's complement hardware would, without signed-overflow UB. */
                if (first)
                    acc_i = v;
                else if (op == MM_REDUCE_SUM)
                    acc_i = (int64_t)((uint64_t)acc_i + (uint64_t)v);
                else if (op == MM_REDUCE_MIN)
                    acc_i = v < acc_i ? v : acc_i;
                else
                    acc_i = v > acc_i ? v : acc_i;
            }
            first = 0;
        }
        if (is_double)
            ((double *)values)[i] = acc_d;
        else
            ((int64_t *)values)[i] = acc_i;
    }
    return MM_OK;
}

mm_status mm_comm_allreduce_i64(mm_comm *comm, int64_t *values, int n, mm_reduce_op op, mm_error *err) {
    return allreduce_bytes(comm, values, n, 0, op, err);
}

mm_status mm_comm_allreduce_f64(mm_comm *comm, double *values, int n, mm_reduce_op op, mm_error *err) {
    return allreduce_bytes(comm, values, n, 1, op, err);
}
