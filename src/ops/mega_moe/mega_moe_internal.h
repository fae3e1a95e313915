/* ops/mega_moe/mega_moe_internal.h: the private state of MegaMoE shared by its files.
 *
 *   scenario_table.c  the scenario table (one row per precision scenario; tools read it too)
 *   scenario.c  the scenario path of a weight group (the activations are the table of ffn/activation.h)
 *   weights.c   mm_mega_moe_weights_create: checks and packs expert weights
 *   buffer.c    the buffer (symmetric areas, workspace, timing)
 *   validate.c  mm_mega_moe_plan: every rule of the spec, agreed on all ranks
 *   ffn_call.c  the expert FFN module (ffn/ffn.h) on a group of experts: job, compute gate, stats
 *   run.c       mm_mega_moe_run: dispatch, shared experts, the call
 *   experts.c   routed experts scheduled as their rows complete, combine sends per finished expert
 *   combine.c   combine: relay reduction (mode 2), the home rank's final sums
 *   gate.c      the compute gate: rank-threads of one process take turns on the pool
 *   compute_only.c  the expert FFN alone on pre-placed rows (the baseline of `megamoe bench layer`)
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
#ifndef MEGAMOE_OPS_MEGA_MOE_INTERNAL_H
#define MEGAMOE_OPS_MEGA_MOE_INTERNAL_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "ffn/ffn.h"
#include "format/bf16_inline.h"
#include "format/format_table.h"
#include "gemm/gemm.h"
#include "megamoe/formats.h"
#include "megamoe/mega_moe.h"
#include "ops/mega_moe/scenario_table.h"

/* How one group of experts computes. input_dtype is the GEMM1 activation type (BF16 for A16W16). */
typedef struct mm_moe_path {
    mm_moe_scenario scenario;
    mm_dtype input_dtype; /* BF16, I8 or an MX element type */
    mm_dtype gemm2_dtype; /* BF16, I8 or an MX element type */
} mm_moe_path;

/* Path of weights of weight_dtype fed with input_dtype (MM_DTYPE_INVALID = unquantized BF16); fails
 * naming `what` when the pair is not in the scenario table or activation_out_dtype does not fit. */
mm_status mm_moe_path_make(mm_dtype weight_dtype, mm_dtype input_dtype, mm_dtype activation_out_dtype,
                           const char *what, mm_moe_path *path, mm_error *err);

/* Packed weights of one group of experts. */
typedef struct mm_moe_expert_set {
    int64_t count;
    mm_dtype dtype;
    int64_t k2; /* GEMM2 reduction length: I, or 2I for gelu weights */
    mm_gemm_packed_weights **w1, **w2;
} mm_moe_expert_set;

/* mm_mega_moe_weights_create with a choice: fuse_activation 1 (what the public function does) packs
 * gated GEMM1 weights gate/up interleaved so the activation runs in GEMM1's epilogue; 0 keeps the plain
 * layout and the separate activation pass (the unfused path, kept for gelu and as the tests' baseline). */
mm_status mm_moe_weights_create_with(const mm_mega_moe_buffer *buffer,
                                     const mm_mega_moe_expert_weights *routed,
                                     const mm_mega_moe_expert_weights *shared, int fuse_activation,
                                     mm_mega_moe_weights **out, mm_error *err);

struct mm_mega_moe_weights {
    int64_t hidden, inter, local_experts;
    mm_moe_expert_set routed, shared;
};

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

/* Everything a validated call needs (validate.c fills it; run.c uses it). */
typedef struct mm_moe_call {
    mm_moe_path routed, shared;
    int has_shared;
    mm_ffn_act act;
    int prequantized;        /* x arrives as MX bytes + scales */
    mm_dtype dispatch_dtype; /* BF16, I8 or MX */
    mm_dtype shared_input_dtype;
    int64_t bs, active_rows;
    const uint8_t *mask; /* NULL = all active (BOOL / I8 bytes) */
    int bf16_weights;    /* topk_weights is BF16 */
    int layered;
    int64_t group_size; /* combine modes 1/2: ranks per reduction group (1 or rank_num_per_server) */
    /* from the allgather: counts[s * (E + 2) + e] rows source s sends to expert e; then BS_s, active_s */
    int64_t *counts;
    int64_t recv_rows, max_recv_rows;
    int workspace_grows; /* some rank's workspace must grow for this call (run.c then agrees on it) */
} mm_moe_call;

/* Bytes of one rank's record in validation's allgather, for E routed experts (validate.c). */
size_t mm_moe_check_record_bytes(int64_t E);

/* How many received rows the current workspace of buf holds for this call's local layout (run.c). */
typedef int64_t (*mm_moe_ws_rows_fn)(const mm_mega_moe_buffer *buf, const mm_mega_moe_weights *w,
                                     const mm_moe_call *call);

/* validate.c: the whole plan; on success call->counts is allocated (free it). ws_rows (NULL: plan)
 * reports this rank's workspace in rows, so that every rank learns whether any workspace grows. */
mm_status mm_moe_validate(mm_mega_moe_buffer *buf, const mm_mega_moe_weights *weights,
                          const mm_mega_moe_attrs *attrs, const mm_mega_moe_inputs *in,
                          const mm_mega_moe_outputs *out, mm_moe_call *call, mm_moe_ws_rows_fn ws_rows,
                          mm_error *err);
#define MM_MOE_COUNT_STRIDE(E) ((E) + 2)

/* buffer.c */
mm_status mm_moe_workspace(mm_mega_moe_buffer *buf, size_t bytes, void **out, mm_error *err);
mm_status mm_moe_relay_area(mm_mega_moe_buffer *buf, mm_error *err);
void mm_moe_stats_event(mm_mega_moe_buffer *buf, mm_mega_moe_stage stage, double begin, double end);
size_t mm_moe_run_workspace_bytes(const mm_mega_moe_buffer *buf, const mm_mega_moe_weights *w,
                                  const mm_moe_call *call);

/* ffn_call.c: MegaMoE's use of the expert FFN module (ffn/ffn.h). A job for the experts of `set` on
 * path (dtypes, BF16 rounding of A16W16's GEMM1 output) with the call's activation; the other fields
 * (groups, row weights, scratch, outputs) are the caller's. timing: the buffer whose stats receive the
 * GEMM1 / activation / GEMM2 stages (NULL = none). */
void mm_moe_ffn_job_init(mm_ffn_job *job, const mm_moe_path *path, const mm_ffn_act *act,
                         const mm_moe_expert_set *set, int64_t hidden, int64_t inter,
                         mm_mega_moe_buffer *timing);
/* mm_ffn_run inside the compute gate (gate.c), unless the caller already holds it. */
mm_status mm_moe_ffn_run(const mm_ffn_job *job, int gate_held, mm_error *err);

/* gate.c: at most cores / pool threads ranks of this process run FFN batches at once (the others
 * sleep); enter and leave around each batch. */
void mm_moe_gate_enter(void);
void mm_moe_gate_leave(void);

#endif
