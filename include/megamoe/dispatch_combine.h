/* SPDX-License-Identifier: Apache-2.0 */
/* megamoe/dispatch_combine.h: MoE Distribute Dispatch V3 and Combine + Add + RMSNorm V2 (the unfused pair).
 *
 * Dispatch sends each token to the ranks of its experts and hands the caller expert-major rows
 * (expand_x) to run any FFN on; Combine sends the expert outputs back, takes their weighted sum, adds the
 * special experts, the shared-expert rows, shared_expert_x and the residual, and applies RMSNorm. The
 * semantics are those of docs/dispatch_combine.md; docs/dispatch_combine.md records the decisions.
 *
 * Both are collective over one communicator of ep_world_size x max(tp_world_size, 1) ranks, where the
 * rank of (ep_rank_id, tp_rank_id) is ep_rank_id x max(tp_world_size, 1) + tp_rank_id. Every rank of the
 * communicator that is alive calls; with elastic scale-in (elastic_info) only the survivors call, and
 * they must first have declared themselves with mm_comm_set_survivors so that nobody waits for the
 * removed ranks. Validation comes first on every rank and the ranks agree on its outcome: a broken rule
 * anywhere is the same error on every rank, no data moves and no output is written.
 *
 * A workspace holds the symmetric buffers a rank reuses across calls; it grows (collectively, during a
 * call) when a call needs more. Results are deterministic: same inputs, same bits, whatever the thread
 * count or backend. */
#ifndef MEGAMOE_DISPATCH_COMBINE_H
#define MEGAMOE_DISPATCH_COMBINE_H

#include <stddef.h>
#include <stdint.h>

#include "megamoe/comm.h"
#include "megamoe/dtype.h"
#include "megamoe/status.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Values of the integer modes of mm_dc_attrs (the original operators' numbers, docs/dispatch_combine.md). */
enum {
    MM_DC_QUANT_NONE = 0,          /* quant_mode: rows in x's dtype */
    MM_DC_QUANT_INT8_PER_TOKEN = 2 /* dynamic INT8 per token */
};
enum {
    MM_DC_TOKEN_NUMS_CUMULATIVE = 0, /* expert_token_nums_type: inclusive prefix sums */
    MM_DC_TOKEN_NUMS_COUNTS = 1      /* per-expert counts (default) */
};
enum { MM_DC_SHARD_SHARED_FIRST = 0 /* expert_shard_type: shared-expert ranks first (the only one) */ };

/* Attributes of both operators. They must be equal on every rank (checked), except ep_rank_id and
 * tp_rank_id. Reserved parameters of the original take their defaults and anything else is rejected. */
typedef struct mm_dc_attrs {
    int64_t ep_world_size;          /* R >= 1 */
    int64_t ep_rank_id;             /* [0, R) */
    int64_t moe_expert_num;         /* M >= 1, divisible by R - shared_expert_rank_num */
    int64_t tp_world_size;          /* 0, 1 (no TP) or 2 */
    int64_t tp_rank_id;             /* [0, max(tp_world_size, 1)) */
    int64_t expert_shard_type;      /* 0 only: shared-expert ranks first */
    int64_t shared_expert_num;      /* [0, 4] */
    int64_t shared_expert_rank_num; /* [0, R), a multiple of shared_expert_num (0 when that is 0) */
    int64_t quant_mode;             /* 0 none, 2 dynamic INT8 per token (mul-even, scale 1/m) */
    int64_t global_bs;              /* 0 (every rank has the same Bs) or max Bs over ranks x R */
    int64_t expert_token_nums_type; /* 0 cumulative, 1 counts (default) */
    int64_t zero_expert_num, copy_expert_num, const_expert_num; /* special experts, >= 0 */
    float norm_eps; /* Combine only: RMSNorm epsilon (default 1e-6), finite and >= 0 */
    /* Reserved (Combine): must stay 0 / NULL / "". */
    int64_t out_dtype, comm_quant_mode, group_list_type;
    const char *comm_alg; /* reserved (both): NULL or "" */
} mm_dc_attrs;

/* Defaults: R = 1, rank 0, M = 1, no TP, no shared experts, quant_mode 0, global_bs 0,
 * expert_token_nums_type 1, no special experts, norm_eps 1e-6, reserved at their defaults. */
mm_dc_attrs mm_dc_default_attrs(void);

/* ---- workspace ------------------------------------------------------------------------------- */

typedef struct mm_dc_workspace mm_dc_workspace;

/* Local (not collective): a workspace for calls on comm, whose buffers are allocated by the first call
 * (collectively) and grown when a call needs more. One per rank, used by one thread at a time. */
mm_status mm_dc_workspace_create(mm_comm *comm, mm_dc_workspace **out, mm_error *err);
/* Collective over the alive ranks when buffers were allocated (every alive rank frees its own
 * workspace); accepts NULL. */
mm_status mm_dc_workspace_free(mm_dc_workspace *ws, mm_error *err);
/* Collective: allocates the buffers for calls with up to max_bs tokens per rank, the given hidden size
 * and topk, and attrs' expert layout. Optional on the threads backend (calls grow the buffers as
 * needed); on the MPI backend symmetric buffers can only be allocated while every rank is alive, so a
 * job that may scale in reserves before its ranks can fail. */
mm_status mm_dc_workspace_reserve(mm_dc_workspace *ws, const mm_dc_attrs *attrs, int64_t max_bs,
                                  int64_t hidden, int64_t topk, mm_error *err);
/* Bytes of symmetric memory a workspace holds on each rank of a world of `world` ranks for calls of
 * these extents (what mm_dc_workspace_reserve allocates and the calls grow to), computed the same way
 * and without allocating, so a program can bound its memory first. 0 when attrs or the extents break a
 * rule of mm_dc_workspace_reserve. */
size_t mm_dc_workspace_bytes_for(const mm_dc_attrs *attrs, int world, int64_t max_bs, int64_t hidden,
                                 int64_t topk);
/* For a rank that leaves the group (elastic scale-in) instead of freeing collectively: releases this
 * rank's private memory only; the survivors' mm_dc_workspace_free frees the symmetric buffers. */
void mm_dc_workspace_abandon(mm_dc_workspace *ws);

/* ---- Dispatch V3 ----------------------------------------------------------------------------- */

typedef struct mm_dispatch_v3_inputs {
    const mm_tensor *x;             /* (Bs, H) BF16 or F16 */
    const mm_tensor *expert_ids;    /* (Bs, K) I32: routed [0, M') then zero, copy, const experts */
    const mm_tensor *scales;        /* optional (shared_expert_num + M, H) F32 smoothing; quant_mode 2 */
    const mm_tensor *x_active_mask; /* optional BOOL: (Bs,) true entries first, or (Bs, K) per pair */
    const mm_tensor *elastic_info;  /* optional (4 + 2R,) I32 */
} mm_dispatch_v3_inputs;

/* Outputs are caller-allocated. expand_x and its companions are sized for the most rows this rank can
 * receive (mm_dispatch_v3_shapes); the call reports how many arrived and writes only those rows. */
typedef struct mm_dispatch_v3_outputs {
    mm_tensor *expand_x;                /* (A, H): x's dtype, or I8 with quant_mode 2 */
    mm_tensor *dynamic_scales;          /* (A,) F32; quant_mode 2 only (ignored, may be NULL, otherwise) */
    mm_tensor *assist_info_for_combine; /* (A, 3) I32: (source rank, token, k) per row */
    mm_tensor *expert_token_nums;       /* (local_expert_num,) I64 */
    mm_tensor *ep_recv_counts;          /* (R x max(tp, 1) x local_expert_num,) I32 */
    mm_tensor *tp_recv_counts;          /* (tp_world_size,) I32; TP only (may be NULL otherwise) */
} mm_dispatch_v3_outputs;

/* What this rank's outputs must be: dtypes and shapes of the output descriptors (data left NULL), the
 * row capacity A and the local expert count. Validates everything that is local to the rank. */
typedef struct mm_dispatch_v3_shapes {
    int64_t max_rows;         /* A */
    int64_t local_expert_num; /* experts on this rank (1 on a shared-expert rank) */
    int is_shared_rank;
    mm_tensor expand_x, dynamic_scales, assist_info_for_combine, expert_token_nums, ep_recv_counts,
        tp_recv_counts;
} mm_dispatch_v3_shapes;

/* The pre-flight check ("plan", as for every operator): needs no communicator and moves nothing. */
mm_status mm_dispatch_v3_plan(const mm_dispatch_v3_inputs *in, const mm_dc_attrs *attrs,
                              mm_dispatch_v3_shapes *shapes, mm_error *err);
/* Deprecated: the former name of mm_dispatch_v3_plan, kept as an alias. */
mm_status mm_dispatch_v3_shapes_of(const mm_dispatch_v3_inputs *in, const mm_dc_attrs *attrs,
                                   mm_dispatch_v3_shapes *shapes, mm_error *err);

/* Collective. *rows_out (may be NULL) receives the rows that arrived (the first rows of expand_x,
 * dynamic_scales and assist_info_for_combine; the rest are left untouched). */
mm_status mm_dispatch_v3(mm_dc_workspace *ws, const mm_dispatch_v3_inputs *in, const mm_dc_attrs *attrs,
                         const mm_dispatch_v3_outputs *out, int64_t *rows_out, mm_error *err);

/* ---- Combine + Add + RMSNorm V2 ---------------------------------------------------------------- */

typedef struct mm_combine_v2_inputs {
    const mm_tensor *expand_x;                /* (rows >= ep_send_counts' total, H) BF16: expert outputs */
    const mm_tensor *expert_ids;              /* (Bs, K) I32, as given to Dispatch */
    const mm_tensor *assist_info_for_combine; /* (rows, 3) I32 from Dispatch */
    const mm_tensor *ep_send_counts;          /* Dispatch's ep_recv_counts */
    const mm_tensor *expert_scales;           /* (Bs, K) F32 */
    const mm_tensor *residual_x;              /* (Bs, 1, H) or (Bs, H) BF16 */
    const mm_tensor *gamma;                   /* (H,) BF16 */
    const mm_tensor *tp_send_counts;          /* Dispatch's tp_recv_counts; required with TP */
    const mm_tensor *x_active_mask;           /* optional, as given to Dispatch */
    const mm_tensor *shared_expert_x;         /* optional (Bs, H) or (Bs, 1, H) BF16 */
    const mm_tensor *elastic_info;            /* optional, as given to Dispatch */
    const mm_tensor *ori_x;                   /* (Bs, H) BF16; required with copy or const experts */
    const mm_tensor *const_expert_alpha_1;    /* (N,) or (N, H), F32 or BF16; required with const experts */
    const mm_tensor *const_expert_alpha_2;    /* same form as alpha_1 */
    const mm_tensor *const_expert_v;          /* (N, H) BF16 */
    /* Reserved inputs of the original: must be NULL. */
    const mm_tensor *activation_scale, *weight_scale, *group_list, *expand_scales;
} mm_combine_v2_inputs;

typedef struct mm_combine_v2_outputs {
    mm_tensor *y;    /* (Bs, 1, H) or (Bs, H) BF16 */
    mm_tensor *rstd; /* (Bs, 1, 1) or (Bs,) F32 */
    mm_tensor *x;    /* (Bs, 1, H) or (Bs, H) BF16 */
} mm_combine_v2_outputs;

/* The pre-flight check ("plan"): local validation; fills the output descriptors (shape (Bs, 1, H),
 * (Bs, 1, 1), (Bs, 1, H)). Any of y, rstd, x may be NULL. */
mm_status mm_combine_v2_plan(const mm_combine_v2_inputs *in, const mm_dc_attrs *attrs, mm_tensor *y,
                             mm_tensor *rstd, mm_tensor *x, mm_error *err);
/* Deprecated: the former name of mm_combine_v2_plan, kept as an alias. */
mm_status mm_combine_v2_shapes_of(const mm_combine_v2_inputs *in, const mm_dc_attrs *attrs, mm_tensor *y,
                                  mm_tensor *rstd, mm_tensor *x, mm_error *err);

/* Collective. */
mm_status mm_combine_v2(mm_dc_workspace *ws, const mm_combine_v2_inputs *in, const mm_dc_attrs *attrs,
                        const mm_combine_v2_outputs *out, mm_error *err);

#ifdef __cplusplus
}
#endif
#endif
