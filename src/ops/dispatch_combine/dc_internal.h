/* SPDX-License-Identifier: Apache-2.0 */
/* ops/dispatch_combine/dc_internal.h: what Dispatch V3 and Combine V2 share: the rank/expert topology
 * (shared-expert ranks, elastic renumbering, special experts), the checks both operators make, the
 * cross-rank call summary and the workspace with its symmetric buffers. */
#ifndef MEGAMOE_OPS_DC_INTERNAL_H
#define MEGAMOE_OPS_DC_INTERNAL_H

#include <stdint.h>
#include <string.h>

#include "format/bf16_inline.h"
#include "megamoe/dispatch_combine.h"
#include "ops/common/symm_area.h"
#include "ops/common/tensor_check.h"

#define DC_MAX_RANKS MM_COMM_MAX_RANKS
#define DC_MAX_K     64
#define DC_MAX_BS    (1 << 20)
#define DC_MAX_H     (1 << 20)

/* The ranks and experts of one call, in the numbering after elastic scale-in (identical to the
 * original numbering without it). "EP rank" below means the rank inside the EP group (the TP rank is
 * apart); "global" means the communicator rank ep x tpw + tp. */
typedef struct dc_topology {
    int64_t R;   /* ep_world_size */
    int64_t tpw; /* max(tp_world_size, 1) */
    int64_t ep_rank, tp_rank;
    int64_t L;                        /* local_expert_num of a routed-expert rank */
    int64_t S;                        /* shared_expert_num */
    int elastic;                      /* elastic_info[0] == 1 */
    int64_t R_eff;                    /* ranks after scale-in */
    int64_t shared_ranks;             /* shared-expert ranks after scale-in */
    int64_t routed_experts;           /* routed experts after scale-in (special ids start here) */
    int64_t Z, C, N;                  /* zero, copy, const experts */
    int32_t new_of_old[DC_MAX_RANKS]; /* -1 for removed ranks */
    int32_t old_of_new[DC_MAX_RANKS];
    int64_t my_new; /* this rank's EP rank after scale-in */
    int is_shared;  /* this rank hosts a shared expert */
    int64_t my_L;   /* local experts on this rank */
} dc_topology;

typedef enum dc_expert_kind { DC_ROUTED, DC_ZERO, DC_COPY, DC_CONST } dc_expert_kind;

static inline dc_expert_kind dc_kind(const dc_topology *t, int64_t e) {
    if (e < t->routed_experts) return DC_ROUTED;
    if (e < t->routed_experts + t->Z) return DC_ZERO;
    if (e < t->routed_experts + t->Z + t->C) return DC_COPY;
    return DC_CONST;
}
/* Original EP rank hosting routed expert e, and e's index there. */
static inline int64_t dc_routed_rank(const dc_topology *t, int64_t e) {
    return t->old_of_new[e / t->L + t->shared_ranks];
}
/* Original EP rank hosting shared expert s for tokens of new EP rank src_new. */
static inline int64_t dc_shared_rank(const dc_topology *t, int64_t src_new, int64_t s) {
    int64_t per = t->shared_ranks / t->S;
    return t->old_of_new[src_new % per + s * per];
}
/* Local experts of original EP rank o. */
static inline int64_t dc_rank_local_experts(const dc_topology *t, int64_t o) {
    return t->new_of_old[o] < t->shared_ranks ? 1 : t->L;
}

/* Dynamic INT8 per token, mul-even (docs/numerics.md: mm_int8_quantize_row_mul_even with
 * MM_INT8_SCALE_INV_MUL, NaN/Inf rows included): m = 127 / amax, q = round_half_even(x * m) clamped to
 * [-127, 127], scale = 1 / m. The shared row kernel of ffn/rowops.h (its AVX-512 twin when the CPU has
 * it): Dispatch quantizes every copy of a token on its own. */
void mm_dc_int8_quantize_row(const float *x, int64_t n, int8_t *q, float *scale);

/* Mask helpers. The kind's numbers enter the exchanged call summary and its mismatch message. */
enum { DC_MASK_NONE = 0, DC_MASK_PER_TOKEN = 1, DC_MASK_PER_PAIR = 2 };
typedef struct dc_mask {
    int kind;
    const uint8_t *data;
    int64_t K;
} dc_mask;
static inline int dc_pair_active(const dc_mask *m, int64_t i, int64_t k) {
    if (m->kind == DC_MASK_PER_TOKEN) return m->data[i] != 0;
    if (m->kind == DC_MASK_PER_PAIR) return m->data[i * m->K + k] != 0;
    return 1;
}
int mm_dc_token_active(const dc_mask *m, int64_t i);

/* ---- checks shared by both operators (dc_check.c) ---- */

/* Attributes alone; fills the parts of t that need no tensors. `combine` enables the combine-only
 * attributes. */
mm_status mm_dc_check_attrs(const mm_dc_attrs *a, int combine, dc_topology *t, mm_error *err);
/* elastic_info (may be NULL) and the communicator's survivors; completes t. */
mm_status mm_dc_check_elastic(const mm_tensor *info, const mm_dc_attrs *a, mm_comm *comm, dc_topology *t,
                              mm_error *err);
/* expert_ids (Bs, K) I32 in range, no routed id twice in a row. */
mm_status mm_dc_check_expert_ids(const mm_tensor *ids, const dc_topology *t, int64_t *bs, int64_t *k,
                                 mm_error *err);
/* x_active_mask (may be NULL): BOOL (Bs,) true before false, or (Bs, K). */
mm_status mm_dc_check_mask(const mm_tensor *mask, int64_t bs, int64_t k, dc_mask *m, mm_error *err);
/* Largest Bs of any rank as far as this rank can know it: global_bs / R, or Bs. */
int64_t mm_dc_bs_bound(const mm_dc_attrs *a, int64_t bs);

/* ---- the cross-rank summary: one allgather per call checks attributes are equal everywhere ---- */

/* The fields every rank contributes, in the order mismatches are reported: which operator, the
 * attributes, then the shapes; Bs last, as ranks may differ there. */
enum {
    DC_SUM_OP,    /* which operator the rank called (mm_dc_call_begin's op) */
    DC_SUM_ATTR0, /* attributes from here */
    DC_SUM_ATTRS = 14,
    DC_SUM_H = DC_SUM_ATTR0 + DC_SUM_ATTRS,
    DC_SUM_K,
    DC_SUM_DTYPE,
    DC_SUM_MASK,
    DC_SUM_ELASTIC,
    DC_SUM_COMPARED, /* the fields above must be equal on every rank */
    DC_SUM_BS = DC_SUM_COMPARED,
    DC_SUM_COUNT
};
typedef struct dc_summary {
    int64_t v[DC_SUM_COUNT];
} dc_summary;

typedef struct dc_call {
    mm_comm *comm;
    int64_t bs_max; /* max Bs over the alive ranks */
} dc_call;

/* The start of every call of both operators, collective: exchanges this rank's summary (its
 * attributes only when its local checks passed) and verdict (ops/common/exchange.h). When any rank
 * failed locally (local != MM_OK, its message in local_err), every rank returns that failure (the
 * lowest failing rank's message). Otherwise checks that the ranks agree on attributes and shapes and
 * fills call->bs_max. */
mm_status mm_dc_call_begin(mm_comm *comm, mm_status local, const mm_error *local_err, const mm_dc_attrs *a,
                           int64_t bs, int64_t h, int64_t k, int64_t dtype, int64_t mask_kind,
                           const mm_tensor *elastic_info, const char *op, dc_call *call, mm_error *err);

/* Runs fn over n tasks: on the pool when the work (bytes) is worth waking it, else in this thread (a
 * decode-sized call moves a few rows, and a pool round trip costs more than copying them). */
#define DC_INLINE_BYTES ((size_t)256 * 1024)
void mm_dc_run_tasks(int64_t n, void (*fn)(void *, int64_t), void *ctx, size_t bytes);

/* ---- workspace (dc_workspace.c) ---- */

struct mm_dc_workspace {
    mm_comm *comm;
    mm_op_symm_area dispatch, combine; /* grown by half again when a call needs more */
    void *staging;                     /* for peers without a direct pointer */
    size_t staging_bytes;
    float *scratch; /* per-task F32 rows */
    size_t scratch_floats;
};

/* Local scratch buffers (grown on demand). */
mm_status mm_dc_staging_ensure(mm_dc_workspace *ws, size_t bytes, mm_error *err);
mm_status mm_dc_scratch_ensure(mm_dc_workspace *ws, size_t floats, mm_error *err);

static inline size_t dc_align64(size_t n) {
    return (n + 63) & ~(size_t)63;
}

/* One source's region in a destination's dispatch buffer (the buffer has one per communicator rank). */
typedef struct dc_region_layout {
    int64_t cap; /* rows one source can send to one rank: bs_max x min(K, L) */
    size_t hdr, assist_off, scale_off, rows_off, bytes;
} dc_region_layout;

static inline dc_region_layout dc_region_of(int64_t L, int64_t k, int64_t bs_max, size_t row_bytes) {
    dc_region_layout r;
    r.cap = bs_max * (k < L ? k : L);
    r.hdr = dc_align64((size_t)L * sizeof(int32_t));
    r.assist_off = r.hdr;
    r.scale_off = r.assist_off + dc_align64((size_t)r.cap * 3 * sizeof(int32_t));
    r.rows_off = r.scale_off + dc_align64((size_t)r.cap * sizeof(float));
    r.bytes = r.rows_off + dc_align64((size_t)r.cap * row_bytes);
    return r;
}
/* Combine buffer: per TP part, bs_max x (K + S) BF16 rows. */
static inline size_t dc_combine_bytes(int64_t tpw, int64_t bs_max, int64_t k, int64_t s, int64_t h) {
    return (size_t)tpw * (size_t)bs_max * (size_t)(k + s) * (size_t)h * 2;
}

#endif
