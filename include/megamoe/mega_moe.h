/* SPDX-License-Identifier: Apache-2.0 */
/* megamoe/mega_moe.h: MegaMoE, the fused dispatch + expert FFN + combine collective (docs/mega_moe.md).
 *
 * Every rank of a communicator calls the operator together (SPMD) with its own tokens x, their top-k
 * expert ids and gating weights; every rank holds E / R routed experts and 0..4 shared experts. One call
 * sends each active token to its K experts, runs the experts' FFN (GEMM1, activation, GEMM2) and returns
 * on the token's home rank y = sum_k w_k * expert_k(x) + sum_s shared_s(x), rounded once to BF16.
 *
 * Lifecycle (docs/mega_moe.md has a complete example):
 *
 *   mm_mega_moe_buffer_create   collective, once per communicator and sizing (the original's symmetric
 *                               buffer): capacity for num_max_tokens_per_rank tokens per rank and the
 *                               receive area. Reused by every later call and every layer of that sizing.
 *   mm_mega_moe_weights_create  local, once per layer and rank: checks and packs this rank's routed and
 *                               shared expert weights (stacked tensors or per-expert lists, either
 *                               layout) for the grouped GEMM. The caller's weight memory is not needed
 *                               afterwards.
 *   mm_mega_moe_plan            collective, optional: validates one call completely (every rule of the
 *                               spec's "Validation" list, attributes equal on all ranks, received rows
 *                               vs max_recv_token_num) and reports what it needs, without moving data.
 *   mm_mega_moe_run             collective: validates exactly as mm_mega_moe_plan, then computes.
 *
 * Errors: every function returns an mm_status and fills err (may be NULL) with one line naming the
 * parameter, its value and the rule, e.g. "topk_ids[17][3] = 70 is outside [0, 64)". Collective
 * functions agree on the outcome: when any rank finds a problem, every rank returns the status of the
 * lowest failing rank with its message prefixed "rank N: ", nothing is written to any output, and no
 * rank waits for another beyond the communicator's timeout.
 *
 * Threads: each rank uses its own buffer and weights handles (a handle belongs to one rank); the ranks
 * of one process share the process-wide worker pool (MEGAMOE_NUM_THREADS). Results do not depend on the
 * number of pool threads, nor on the communicator backend (threads or MPI): same inputs, same bits.
 *
 * Numerics: exactly the data flow and rounding points of docs/reference.md; accumulation is F32 (exact
 * INT32 for the INT scenarios). See docs/mega_moe.md for the per-scenario rules and measured errors. */
#ifndef MEGAMOE_MEGA_MOE_H
#define MEGAMOE_MEGA_MOE_H

#include <stddef.h>
#include <stdint.h>

#include "megamoe/comm.h"
#include "megamoe/dtype.h"
#include "megamoe/status.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- attributes ------------------------------------------------------------------------------ */

typedef enum mm_mega_moe_activation {
    MM_MEGA_MOE_SWIGLU = 0,     /* a = silu(min(g, c)) * clip(u, -c, c) */
    MM_MEGA_MOE_SWIGLUSTEP = 1, /* a = min(silu(g), c) * clip(u, -c, c) */
    MM_MEGA_MOE_SWIGLUOAI = 2,  /* g' = min(g, c); a = g' * sigmoid(alpha g') * (clip(u, -c, c) + beta) */
    MM_MEGA_MOE_SITUGLU = 3,    /* a = beta tanh(g / beta) sigmoid(g) L(u) */
    MM_MEGA_MOE_GELU = 4        /* tanh-form GELU on all 2I columns of GEMM1 (GEMM2 then has K = 2I) */
} mm_mega_moe_activation;

/* "swiglu", ...; "invalid" for other values. */
const char *mm_mega_moe_activation_name(mm_mega_moe_activation activation);
/* Parses a name; returns -1 when unknown. */
int mm_mega_moe_activation_from_name(const char *name);

#define MM_MEGA_MOE_MAX_ACTIVATION_PARAMS 3
#define MM_MEGA_MOE_MAX_SHARED_EXPERTS    4

/* The sizing of a buffer: fixed for its lifetime, equal on all ranks (checked by buffer_create). */
typedef struct mm_mega_moe_sizing {
    int64_t moe_expert_num;          /* E, routed experts in total; a multiple of the communicator size R */
    int64_t num_max_tokens_per_rank; /* >= 1: the largest BS any rank may pass to a call */
    int64_t topk;                    /* K in [1, E]: top-k of every call (topk_ids has K columns) */
    int64_t hidden;                  /* H >= 1 */
    int64_t intermediate_hidden;     /* I >= 2, even */
    /* 0: automatic, room for every row that can arrive (num_max_tokens_per_rank x R x min(K, E / R)).
     * > 0: at most this many rows may arrive at one rank in one call; a call in which a rank would
     * receive more fails (all ranks, nothing written); never a silent drop. */
    int64_t max_recv_token_num;
} mm_mega_moe_sizing;

/* Values of the integer modes of mm_mega_moe_attrs (the original operator's numbers, docs/mega_moe.md). */
enum {
    MM_MEGA_MOE_DISPATCH_QUANT_NONE = 0, /* dispatch_quant_mode: A16W16, or pre-quantized MX x passed on */
    MM_MEGA_MOE_DISPATCH_QUANT_INT8 = 2, /* INT8 per token */
    MM_MEGA_MOE_DISPATCH_QUANT_MX = 4    /* MX block-32 */
};
enum {
    MM_MEGA_MOE_COMBINE_QUANT_NONE = 0,    /* combine_quant_mode: BF16 rows */
    MM_MEGA_MOE_COMBINE_QUANT_MX_E5M2 = 3, /* MX FP8 E5M2 (routed rows only) */
    MM_MEGA_MOE_COMBINE_QUANT_MX_E4M3 = 4  /* MX FP8 E4M3 (routed rows only) */
};
enum {
    MM_MEGA_MOE_WEIGHTS_AT_COMBINE = 0,      /* topk_weights_type: weights applied at combine */
    MM_MEGA_MOE_WEIGHTS_AFTER_ACTIVATION = 1 /* weights applied after the activation */
};
enum {
    MM_MEGA_MOE_COMBINE_COMM_DIRECT = 0, /* combine_comm_mode: every row to its home rank */
    MM_MEGA_MOE_COMBINE_COMM_FLAT = 1,   /* flat topology, rows summed per source rank first */
    MM_MEGA_MOE_COMBINE_COMM_LAYERED = 2 /* layered topology, rows summed per domain */
};

/* Per-call attributes, equal on all ranks (checked). mm_mega_moe_default_attrs gives the original's
 * defaults: no quantization (A16W16), swiglu without clamp, everything else 0 / off. */
typedef struct mm_mega_moe_attrs {
    /* 0: none (A16W16), or pass-through of pre-quantized x when dispatch_quant_out_dtype is an MX type;
     * 2: INT8 per-token (dtype I8); 4: MX block-32 (dtype FP8_E4M3FN, FP8_E5M2 or FP4_E2M1). */
    int dispatch_quant_mode;
    mm_dtype dispatch_quant_out_dtype;      /* MM_DTYPE_INVALID = undefined (BF16 is read the same) */
    mm_dtype shared_expert_quant_out_dtype; /* MM_DTYPE_INVALID = same as dispatch_quant_out_dtype */
    int combine_quant_mode;                 /* 0 none, 3 MX FP8 E5M2, 4 MX FP8 E4M3 (routed rows only) */
    mm_mega_moe_activation activation;
    int activation_param_count; /* 0..3; see the spec: swiglu/swiglustep [] or [clamp]; swigluoai [] or
                                   [clamp, alpha, beta]; situglu [] or [beta] or [beta, linear_beta];
                                   gelu [] or [FLT_MAX] (placeholder, ignored) */
    float activation_params[MM_MEGA_MOE_MAX_ACTIVATION_PARAMS];
    mm_dtype activation_out_dtype; /* MM_DTYPE_INVALID, or FP8_E4M3FN / FP8_E5M2 in the FP scenarios */
    int topk_weights_type;         /* 0: weights applied at combine; 1: after the activation */
    int combine_comm_mode;         /* 0; 1 (flat topology, per-rank reduction); 2 (layered, per domain) */
    /* Domain size of the layered topology: layered when 0 < value < R (must divide R); 0 or >= R: flat. */
    int64_t rank_num_per_server;
} mm_mega_moe_attrs;

mm_mega_moe_attrs mm_mega_moe_default_attrs(void);

/* ---- weights --------------------------------------------------------------------------------- */

/* One group of experts (the E / R routed experts of this rank, or its S shared experts). Each of the
 * six tensors is given either stacked (a tensor with a leading expert dimension) or as a per-expert
 * list (`count` 2-D / 1-D tensors, the same shapes without the leading dimension); not both.
 *
 *   weight1          (count, H, 2I), or (count, 2I, H) with transpose_weight1; gate = first I columns
 *   weight2          (count, I, H), or (count, H, I) with transpose_weight2 (I -> 2I for gelu)
 *                    dtype (both): BF16, I8, INT4, FP8_E4M3FN, FP8_E5M2, FP4_E2M1 (4-bit packed along
 *                    the stored last dimension)
 *   weight_scales1/2 INT8 / INT4: (count, N) F32, or U64 (Ascend's packed form: high 32 bits 0);
 *                    MX: (count, N, ceil(K/64), 2) E8M0 (N, K of that GEMM); BF16: none
 *   bias1 / bias2    (count, 2I) / (count, H) F32, exactly for INT4 weights (A8W4-INT)
 */
typedef struct mm_mega_moe_expert_weights {
    int64_t count; /* routed: E / R; shared: 0..4 (0 = none, every pointer below NULL) */
    int transpose_weight1, transpose_weight2;
    const mm_tensor *weight1, *weight2;
    const mm_tensor *weight_scales1, *weight_scales2;
    const mm_tensor *bias1, *bias2;
    /* per-expert lists, `count` descriptors each (NULL when the stacked form is used) */
    const mm_tensor *weight1_list, *weight2_list;
    const mm_tensor *weight_scales1_list, *weight_scales2_list;
    const mm_tensor *bias1_list, *bias2_list;

    /* ---- extensions for checkpoint formats (docs/weight_formats.md); 0 / NULL for the seed's use ----
     * The A16 weight-only scenarios (BF16 activations, dispatch_quant_mode 0) take weights in
     * FP8_E4M3FN with F32 block scales, FP4_E2M1 with E8M0 scales (the MX layout above) or UINT4 with
     * F32 group scales and zero points; each weight element is dequantized to BF16 as
     * w' = BF16(F32(decode(q) - zero) * scale) and the GEMM is then the A16W16 one.
     *   weight_scales1/2 FP8_E4M3FN / UINT4 (A16): (count, ceil(N / scale_block_n), ceil(K / scale_block_k))
     * F32 weight_zeros1/2  UINT4: the same shape as the scales, U8 values 0..15 bias1 / bias2: accepted for
     * every weight format (added in F32 to GEMM1's / GEMM2's output before any rounding; for A8W4-INT they
     * keep the seed's meaning). */
    int64_t scale_block_n, scale_block_k; /* FP8_E4M3FN / UINT4 with BF16 activations: >= 1 */
    const mm_tensor *weight_zeros1, *weight_zeros2;
    const mm_tensor *weight_zeros1_list, *weight_zeros2_list;
    /* 1: weight1's 2I gate/up channels (and bias1's, scales1's, zeros1's) alternate: gate channel i is
     * 2i, up channel i is 2i + 1 (gpt-oss's gate_up_proj; the seed's weight1Interleave); 0: gate channels
     * [0, I), up channels [I, 2I). */
    int weight1_interleave;
} mm_mega_moe_expert_weights;

typedef struct mm_mega_moe_buffer mm_mega_moe_buffer;
typedef struct mm_mega_moe_weights mm_mega_moe_weights;

/* Local (not collective). Checks shapes and dtypes against the buffer's sizing and packs the weights;
 * shared may be NULL (no shared experts). UINT64 scales are converted (high bits must be 0). The
 * activation decides GEMM2's K: the weights record their K2 (I or 2I) and mm_mega_moe_run checks it
 * against the call's activation. Free with mm_mega_moe_weights_free. */
mm_status mm_mega_moe_weights_create(const mm_mega_moe_buffer *buffer,
                                     const mm_mega_moe_expert_weights *routed,
                                     const mm_mega_moe_expert_weights *shared, mm_mega_moe_weights **out,
                                     mm_error *err);
void mm_mega_moe_weights_free(mm_mega_moe_weights *weights);

/* ---- buffer ---------------------------------------------------------------------------------- */

/* Collective over comm: checks the sizing (equal on all ranks, E % R == 0, K <= E, ...) and allocates
 * the symmetric areas. The buffer keeps a pointer to comm, which must outlive it. */
mm_status mm_mega_moe_buffer_create(mm_comm *comm, const mm_mega_moe_sizing *sizing, mm_mega_moe_buffer **out,
                                    mm_error *err);
/* Collective. Accepts NULL. */
mm_status mm_mega_moe_buffer_free(mm_mega_moe_buffer *buffer, mm_error *err);
const mm_mega_moe_sizing *mm_mega_moe_buffer_sizing(const mm_mega_moe_buffer *buffer);
/* Bytes of symmetric memory this rank holds for the buffer. */
size_t mm_mega_moe_buffer_symmetric_bytes(const mm_mega_moe_buffer *buffer);
/* Bytes of symmetric memory mm_mega_moe_buffer_create allocates on each rank of a world of `world`
 * ranks for this sizing (the receive and combine areas), computed the same way and without allocating,
 * so a program can bound its memory first. combine_comm_mode 2 adds a relay area at its first call:
 * counted when with_relay is 1. 0 when the sizing breaks a rule of mm_mega_moe_buffer_create (which
 * also refuses a sizing whose areas would overflow the address space). */
size_t mm_mega_moe_buffer_bytes_for(const mm_mega_moe_sizing *sizing, int world, int with_relay);

/* ---- one call -------------------------------------------------------------------------------- */

/* This rank's tensors of one call. BS = x->shape[0] may differ per rank and may be 0. */
typedef struct mm_mega_moe_inputs {
    const mm_tensor *x;             /* (BS, H) BF16; pre-quantized pass-through: dispatch dtype bytes */
    const mm_tensor *scales;        /* pre-quantized only: (BS, ceil(H/32)) E8M0; else NULL */
    const mm_tensor *topk_ids;      /* (BS, K) I32, in [0, E), unique per row (active rows) */
    const mm_tensor *topk_weights;  /* (BS, K) F32 or BF16, any sign */
    const mm_tensor *x_active_mask; /* optional (BS,) BOOL or I8, nonzero = active; inactive rows are not
                                       sent, get no shared expert, their y row is +0 and their ids are
                                       not checked */
} mm_mega_moe_inputs;

/* Caller-allocated outputs. */
typedef struct mm_mega_moe_outputs {
    mm_tensor *y;                 /* (BS, H) BF16 */
    mm_tensor *expert_token_nums; /* (E / R,) I32: rows each local expert received, over all sources */
} mm_mega_moe_outputs;

/* What mm_mega_moe_plan found (this rank's view). */
typedef struct mm_mega_moe_plan_info {
    const char *scenario;        /* "A16W16", "A8W8-INT", "A8W4-INT", "A8W8-FP", "A8W4-FP", "A4W4-FP" */
    const char *shared_scenario; /* of the shared experts; "none" without */
    int64_t bs;                  /* this rank's BS */
    int64_t active_rows;         /* rows of x this rank dispatches (x_active_mask) */
    int64_t recv_rows;           /* rows that will arrive at this rank's experts */
    int64_t max_recv_rows;       /* the largest recv_rows of all ranks */
    int64_t recv_capacity;       /* rows the buffer's receive area holds */
    size_t workspace_bytes;      /* private scratch the run needs on this rank (held by the buffer) */
} mm_mega_moe_plan_info;

/* Collective: validates the call completely and fills info (may be NULL) on success. Moves no token
 * data and writes nothing but info. Costs two small collectives (agreement, attribute check) and an
 * allgather of the per-expert row counts (R x E integers). */
mm_status mm_mega_moe_plan(mm_mega_moe_buffer *buffer, const mm_mega_moe_weights *weights,
                           const mm_mega_moe_attrs *attrs, const mm_mega_moe_inputs *inputs,
                           mm_mega_moe_plan_info *info, mm_error *err);

/* Collective: validates as mm_mega_moe_plan, then runs dispatch, experts, shared experts and combine,
 * and writes y and expert_token_nums. On any failure the outputs are untouched (validation) or
 * unspecified (a peer timing out mid-call; the communicator is then poisoned, see comm.h). */
mm_status mm_mega_moe_run(mm_mega_moe_buffer *buffer, const mm_mega_moe_weights *weights,
                          const mm_mega_moe_attrs *attrs, const mm_mega_moe_inputs *inputs,
                          const mm_mega_moe_outputs *outputs, mm_error *err);

/* ---- timing of the last run (for `megamoe run`, benchmarks and traces) ------------------------ */

typedef enum mm_mega_moe_stage {
    MM_MEGA_MOE_STAGE_DISPATCH = 0, /* counting, quantizing and sending the rows, waiting for arrivals */
    MM_MEGA_MOE_STAGE_GEMM1,        /* GEMM1 of routed experts */
    MM_MEGA_MOE_STAGE_ACTIVATION,   /* activation + GEMM2-input rounding / quantization */
    MM_MEGA_MOE_STAGE_GEMM2,        /* GEMM2 of routed experts */
    MM_MEGA_MOE_STAGE_SHARED,       /* the whole FFN of the shared experts */
    MM_MEGA_MOE_STAGE_COMBINE,      /* sending expert rows home, waiting, the final sums */
    MM_MEGA_MOE_STAGE_COUNT
} mm_mega_moe_stage;

const char *mm_mega_moe_stage_name(mm_mega_moe_stage stage); /* "dispatch", "gemm1", ... */

#define MM_MEGA_MOE_MAX_EVENTS         128 /* events kept per call */
#define MM_MEGA_MOE_MAX_EXPERT_RECORDS 256 /* expert records kept per call */

/* One interval of work on this rank: seconds on CLOCK_MONOTONIC (comparable across the ranks of one
 * machine, so a trace can show overlap). The first event of a call is always the dispatch of this
 * rank's rows (counting, quantizing, sending, signalling); later dispatch events are waits for other
 * ranks' rows. */
typedef struct mm_mega_moe_event {
    mm_mega_moe_stage stage;
    int batch; /* gemm1, activation, gemm2 of routed experts: the batch they computed (expert records
                  with this batch); -1 for every other event */
    double begin, end;
} mm_mega_moe_event;

/* A routed expert computed on this rank by one batch of a call: the experts that became complete
 * together run as one grouped GEMM1, activation and GEMM2, so a batch, not an expert, has a time. */
typedef struct mm_mega_moe_expert_record {
    int batch;    /* 0, 1, ... in the order the call ran its batches */
    int expert;   /* global expert id */
    int64_t rows; /* rows it computed (from every source rank) */
} mm_mega_moe_expert_record;

typedef struct mm_mega_moe_stats {
    double seconds[MM_MEGA_MOE_STAGE_COUNT]; /* summed duration of each stage's events */
    double total_begin, total_end;           /* the whole mm_mega_moe_run (after validation) */
    int event_count;                         /* events in order of their begin; extra ones are dropped */
    mm_mega_moe_event events[MM_MEGA_MOE_MAX_EVENTS];
    int batch_count;  /* batches of routed experts the call ran (all of them, even past the records) */
    int expert_count; /* expert records in batch order (experts without rows run no batch and have
                         none); extra ones are dropped */
    mm_mega_moe_expert_record experts[MM_MEGA_MOE_MAX_EXPERT_RECORDS];
} mm_mega_moe_stats;

/* Copies the timing of this rank's last successful mm_mega_moe_run (zeroed before the first). */
mm_status mm_mega_moe_last_stats(const mm_mega_moe_buffer *buffer, mm_mega_moe_stats *stats, mm_error *err);

#ifdef __cplusplus
}
#endif
#endif
