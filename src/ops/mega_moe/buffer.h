/* SPDX-License-Identifier: Apache-2.0 */
/* ops/mega_moe/buffer.h: the MegaMoE buffer (buffer.c): its symmetric areas, the private workspace and
 * the record area of validation, kept across calls.
 *
 * Symmetric areas of a buffer (each rank holds the same sizes):
 *   recv   the rows routed to this rank's experts: `recv_capacity` slots, expert-major then source-major
 *          (block (j, s) holds the rows of source s for local expert j, in the source's token order),
 *          so each expert's rows are contiguous and each source writes contiguous blocks. A slot is
 *          [row data | MX scales | header(token, k, weight, int8 scale)].
 *   comb   this rank's home area: num_max_tokens_per_rank x K slots, slot (i, k) receives the output
 *          row of token i's k-th expert (combine mode 0: BF16, or MX bytes + scales with combine
 *          quantization), or in modes 1/2 the BF16 partial sum of the group whose first k is k.
 *   relay  combine mode 2 only (allocated on first use): per home domain, token and k, the BF16
 *          expert row and its weight with an epoch marker, reduced by the domain's relay rank. */
#ifndef MEGAMOE_OPS_MEGA_MOE_BUFFER_H
#define MEGAMOE_OPS_MEGA_MOE_BUFFER_H

#include <stddef.h>
#include <stdint.h>

#include "megamoe/mega_moe.h"

struct mm_mega_moe_buffer {
    mm_comm *comm;
    int rank, world;
    mm_mega_moe_sizing sizing;
    int64_t local_experts; /* E / R */
    int64_t recv_capacity; /* slots of the recv area */
    size_t recv_slot_bytes, recv_scale_offset, recv_header_offset;
    size_t comb_slot_bytes; /* BF16 row, or MX bytes + scales */
    size_t relay_slot_bytes;
    int64_t relay_slots;
    mm_symm *recv, *comb, *relay;
    uint64_t recv_epoch, comb_epoch, relay_epoch; /* signals raised on each area so far, per sender */
    void *workspace;
    size_t workspace_bytes;
    uint8_t *check_area; /* validation's allgather: world + 1 records (validate.c) */
    mm_mega_moe_stats stats;
};

/* Header of a received row (at recv_header_offset of its slot). */
typedef struct mm_moe_row_header {
    int32_t token;    /* row index of x on the source rank */
    int32_t k;        /* which of the token's K experts */
    float weight;     /* topk weight as F32 */
    float int8_scale; /* INT8 dispatch: the row's scale */
} mm_moe_row_header;

/* Header of a relay slot (combine mode 2), before the BF16 row. */
typedef struct mm_moe_relay_header {
    uint64_t epoch; /* relay_epoch of the call that wrote it */
    float weight;
    float pad;
} mm_moe_relay_header;

/* The workspace of at least `bytes` (grown, never shrunk; *out is its start). */
mm_status mm_moe_workspace(mm_mega_moe_buffer *buf, size_t bytes, void **out, mm_error *err);
/* The relay area of combine mode 2 (collective; allocated by the first call that needs it). */
mm_status mm_moe_relay_area(mm_mega_moe_buffer *buf, mm_error *err);

#endif
