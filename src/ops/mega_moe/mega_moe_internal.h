/* ops/mega_moe/mega_moe_internal.h: the private state of MegaMoE shared by its files.
 *
 *   scenario_table.c  the scenario table (one row per precision scenario; tools read it too)
 *   scenario.c  the scenario path of a weight group, activation parameters and the fast F32 activations
 *   weights.c   mm_mega_moe_weights_create: checks and packs expert weights
 *   buffer.c    the buffer (symmetric areas, workspace, timing)
 *   validate.c  mm_mega_moe_plan: every rule of the spec, agreed on all ranks
 *   ffn.c       one group of experts on its rows: GEMM1, activation, GEMM2 (routed and shared)
 *   rowops.c    row loops of the hot paths (BF16 <-> F32, weighted sums), AVX-512 in rowops_avx512.c
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

/* An activation with its parameters resolved. */
typedef struct mm_moe_act {
    mm_mega_moe_activation kind;
    float clamp; /* 0 = none */
    float alpha, beta;
    int has_linear_beta;
    float linear_beta;
} mm_moe_act;

mm_status mm_moe_act_resolve(const mm_mega_moe_attrs *attrs, mm_moe_act *act, mm_error *err);

/* exp in F32 for the activations, written so that a vector version (rowops_avx512.c) repeats it
 * operation for operation and gives the same bits: x clamped to [-87, 88] (the sigmoids saturate long
 * before: beyond it 1 + e^x is exactly 1 or e^x alone), x = k ln2 + r with k = round(x / ln2) (the
 * 1.5 * 2^23 trick) and ln2 in two parts (k * LN2_HI exact), e^r by its degree-7 Taylor polynomial
 * (|r| <= ln2 / 2: truncation below 0.1 ulp), times 2^k built from the exponent bits. NaN stays NaN.
 * Every product and sum is one rounded F32 operation (no contraction in ISO C mode). */
#define MM_MOE_EXP_HI     88.0f
#define MM_MOE_EXP_LO     (-87.0f)
#define MM_MOE_EXP_LOG2E  1.44269504f
#define MM_MOE_EXP_MAGIC  12582912.0f /* 1.5 * 2^23, bits 0x4B400000 */
#define MM_MOE_EXP_LN2_HI 0.693359375f
#define MM_MOE_EXP_LN2_LO (-2.12194440e-4f)
#define MM_MOE_EXP_C7     1.98412701e-4f /* 1/5040 */
#define MM_MOE_EXP_C6     1.38888892e-3f /* 1/720 */
#define MM_MOE_EXP_C5     8.33333377e-3f /* 1/120 */
#define MM_MOE_EXP_C4     4.16666679e-2f /* 1/24 */
#define MM_MOE_EXP_C3     1.66666672e-1f /* 1/6 */
#define MM_MOE_EXP_C2     0.5f

static inline float mm_moe_exp_f32(float x) {
    x = x > MM_MOE_EXP_HI ? MM_MOE_EXP_HI : x;
    x = x < MM_MOE_EXP_LO ? MM_MOE_EXP_LO : x;
    float t = x * MM_MOE_EXP_LOG2E;
    t = t + MM_MOE_EXP_MAGIC;
    float kf = t - MM_MOE_EXP_MAGIC;
    uint32_t tb;
    memcpy(&tb, &t, 4);
    uint32_t sb = (tb - 0x4B400000u + 127u) << 23; /* 2^k, k in [-126, 127] */
    float r = x - kf * MM_MOE_EXP_LN2_HI;
    r = r - kf * MM_MOE_EXP_LN2_LO;
    float p = MM_MOE_EXP_C7;
    p = p * r + MM_MOE_EXP_C6;
    p = p * r + MM_MOE_EXP_C5;
    p = p * r + MM_MOE_EXP_C4;
    p = p * r + MM_MOE_EXP_C3;
    p = p * r + MM_MOE_EXP_C2;
    p = p * r + 1.0f;
    p = p * r + 1.0f;
    float scale;
    memcpy(&scale, &sb, 4);
    return p * scale;
}

static inline float mm_moe_sigmoid_f32(float z) {
    return 1.0f / (1.0f + mm_moe_exp_f32(-z));
}
/* One row: h holds 2I F32 values; out receives I values (2I for gelu). F32 arithmetic. */
void mm_moe_act_row(const mm_moe_act *act, const float *h, int64_t inter, float *out);
float mm_moe_act_gated(const mm_moe_act *act, float gate, float up);
float mm_moe_act_gelu(float z);

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
    mm_moe_act act;
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

/* ffn.c: rows of several experts through GEMM1, activation, GEMM2. Row r (global index in
 * [0, total_rows)) has its F32 / quantized intermediates at index r of the scratch arrays. */
typedef struct mm_moe_ffn_group {
    int64_t row0, rows;
    const uint8_t *a;
    int64_t a_stride;
    const float *a_row_scales; /* I8: rows scales, contiguous */
    const uint8_t *a_mx;
    int64_t a_mx_stride;
    const mm_gemm_packed_weights *w1, *w2;
} mm_moe_ffn_group;

typedef struct mm_moe_ffn_scratch {
    float *h;    /* rows x 2I */
    uint8_t *a2; /* rows x a2_stride: GEMM2 input */
    int64_t a2_stride;
    float *a2_scales;
    uint8_t *a2_mx;
    int64_t a2_mx_stride;
    float *o;                  /* rows x H */
    _Atomic int32_t *row_done; /* fused quantization: activation outputs of each row written so far */
} mm_moe_ffn_scratch;

size_t mm_moe_ffn_scratch_bytes(int64_t rows, int64_t hidden, int64_t inter, int64_t k2);
/* Lays the scratch out in mem (mm_moe_ffn_scratch_bytes bytes). */
void mm_moe_ffn_scratch_init(mm_moe_ffn_scratch *s, void *mem, int64_t rows, int64_t hidden, int64_t inter,
                             int64_t k2);

typedef struct mm_moe_ffn_job {
    const mm_moe_path *path;
    const mm_moe_act *act;
    int64_t hidden, inter, k2;
    int64_t n_groups;
    const mm_moe_ffn_group *groups;
    const float *row_weights; /* topk_weights_type 1: multiply the activation output (NULL = none) */
    mm_moe_ffn_scratch *scratch;
    uint16_t *out;              /* BF16 rows x H at the global row index */
    uint16_t *const *row_dst;   /* NULL, or per global row: where its BF16 output goes instead of out
                                   (a home rank's combine slot), NULL entries use out */
    mm_mega_moe_buffer *timing; /* stage events go here (NULL = none) */
    int gate_held;              /* the caller already holds the compute gate (gate.c) */
} mm_moe_ffn_job;

mm_status mm_moe_ffn_run(const mm_moe_ffn_job *job, mm_error *err);

/* Dispatch rounding of one row: quantizes H BF16 values to dtype (BF16: a copy) into data, with the MX
 * scales into mx or the INT8 scale into *int8_scale. f32_row: H floats of scratch (INT8). */
void mm_moe_quantize_input(mm_dtype dtype, const uint16_t *x, int64_t hidden, uint8_t *data, uint8_t *mx,
                           float *int8_scale, float *f32_row);

/* compute_only.c: this rank's expert FFN alone on rows placed beforehand (x cycled, quantized as the
 * dispatch would), no communication: the baseline of `megamoe bench layer`. rows_per_expert has E / R
 * entries (e.g. a call's expert_token_nums); shared_rows rows go through each shared expert. */
typedef struct mm_moe_compute_only mm_moe_compute_only;
mm_status mm_moe_compute_only_create(const mm_mega_moe_buffer *b, const mm_mega_moe_weights *w,
                                     const mm_mega_moe_attrs *attrs, const int64_t *rows_per_expert,
                                     int64_t shared_rows, const uint16_t *x, int64_t x_rows,
                                     mm_moe_compute_only **out, mm_error *err);
mm_status mm_moe_compute_only_run(mm_moe_compute_only *co, mm_error *err);
void mm_moe_compute_only_free(mm_moe_compute_only *co);

/* gate.c: at most cores / pool threads ranks of this process run FFN batches at once (the others
 * sleep); enter and leave around each batch. */
void mm_moe_gate_enter(void);
void mm_moe_gate_leave(void);

/* rowops.c: row loops with an AVX-512 version chosen at run time; every version gives the same bits
 * (products and sums are separately rounded F32 operations in index order, BF16 rounding is RNE). */
typedef struct mm_moe_rowops {
    void (*axpy_bf16)(float *acc, float w, const uint16_t *o, int64_t n); /* acc += F32(w * o) */
    void (*add_bf16)(float *acc, const uint16_t *o, int64_t n);           /* acc += o */
    void (*to_bf16)(uint16_t *dst, const float *src, int64_t n);          /* RNE, NaN as mm_f32_to_bf16 */
    void (*round_bf16)(float *v, int64_t n);                              /* v = F32(BF16(v)), in place */
    /* out[j] = mm_moe_act_gated(act, g[j], u[j]) (out may be g) */
    void (*act_gated)(const mm_moe_act *act, const float *g, const float *u, float *out, int64_t n);
    void (*from_bf16)(float *dst, const uint16_t *src, int64_t n); /* exact */
    /* INT8 per-row quantization of formats.h: half_even 0 is mm_int8_quantize_row_div_away, 1 is
     * mm_int8_quantize_row_mul_even with MM_INT8_SCALE_AMAX_DIV_127 (same bits, also for NaN / Inf) */
    void (*int8_quantize)(const float *x, int64_t n, int half_even, int8_t *q, float *scale);
} mm_moe_rowops;

/* The fastest table the CPU allows (MEGAMOE_ISA=ref: the portable one). */
const mm_moe_rowops *mm_moe_rowops_get(void);
const mm_moe_rowops *mm_moe_rowops_portable(void);
/* rowops_avx512.c: use only after mm_cpu_isa() >= MM_ISA_AVX512 (data, so reading it is safe). */
extern const mm_moe_rowops mm_moe_rowops_avx512_table;

#endif
