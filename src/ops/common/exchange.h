/* SPDX-License-Identifier: Apache-2.0 */
/* ops/common/exchange.h: the one collective an operator call starts with: every rank's verdict and a
 * record of the attributes that must be equal on every rank, in one allgather.
 *
 * Each rank contributes its local status and message, a few int64 fields and an optional payload (data
 * the operator needs from every rank, such as MegaMoE's per-expert counts). All ranks learn the same
 * thing: the lowest failing rank's message ("rank N: ...", as mm_comm_agree words it), or, when no rank
 * failed, each field's minimum and maximum and the first rank whose value differs from the lowest
 * rank's. Operators word the mismatch themselves, naming the field and the ranks. Ranks removed from
 * the communicator (elastic scale-in) take no part in the verdict or the comparison. */
#ifndef MEGAMOE_OPS_COMMON_EXCHANGE_H
#define MEGAMOE_OPS_COMMON_EXCHANGE_H

#include <stddef.h>
#include <stdint.h>

#include "megamoe/comm.h"
#include "megamoe/status.h"

#define MM_OP_EXCHANGE_MAX_FIELDS 32

typedef struct mm_op_exchange {
    /* ---- set by the caller ---- */
    mm_status local;       /* this rank's verdict */
    const char *message;   /* its message when local != MM_OK (may be NULL) */
    const int64_t *fields; /* nfields values; may be NULL when local != MM_OK */
    int nfields;           /* at most MM_OP_EXCHANGE_MAX_FIELDS */
    int ncompare;          /* the first ncompare fields must be equal (mm_op_exchange_differing) */
    const void *payload;   /* payload_bytes of per-rank data, or NULL */
    size_t payload_bytes;
    void *area; /* (comm size + 1) x mm_op_exchange_record_bytes(); NULL: allocated and freed by
                   mm_op_exchange_done (a caller that must report even out of memory passes its own) */
    /* ---- filled when every rank's verdict is MM_OK ---- */
    int failed_rank;                            /* the lowest failing rank; -1 (also on a comm failure) */
    int size;                                   /* communicator size */
    int ref;                                    /* the lowest alive rank */
    int64_t lo[MM_OP_EXCHANGE_MAX_FIELDS];      /* minimum of each field over the alive ranks */
    int64_t hi[MM_OP_EXCHANGE_MAX_FIELDS];      /* maximum */
    int differ_rank[MM_OP_EXCHANGE_MAX_FIELDS]; /* first alive rank whose value differs from ref's, or -1 */
    /* private */
    size_t record_bytes;
    int owns_area;
    const mm_comm *comm;
} mm_op_exchange;

/* Bytes of one rank's record (status, message, fields, payload). */
size_t mm_op_exchange_record_bytes(int nfields, size_t payload_bytes);

/* Collective. Returns a communication failure (its message in err), the lowest failing rank's status
 * with "rank N: message" in err, or MM_OK with the comparison filled in. */
mm_status mm_op_exchange_run(mm_comm *comm, mm_op_exchange *x, mm_error *err);

/* The first of the ncompare fields that differs between alive ranks, or -1 when the records agree.
 * rank_major: the lowest differing rank first, then its first differing field; otherwise the first
 * differing field, then its lowest differing rank (x->differ_rank[field]). */
int mm_op_exchange_differing(const mm_op_exchange *x, int rank_major);

/* After a successful run: rank r's fields and payload. */
const int64_t *mm_op_exchange_fields_of(const mm_op_exchange *x, int r);
const void *mm_op_exchange_payload_of(const mm_op_exchange *x, int r);

/* Frees the area when the exchange allocated it. */
void mm_op_exchange_done(mm_op_exchange *x);

#endif
