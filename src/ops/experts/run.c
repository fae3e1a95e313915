/* SPDX-License-Identifier: Apache-2.0 */
/* ops/experts/run.c: mm_experts_run: MegaMoE's data flow on one process without its communication.
 *
 *   1. Each active token's row is rounded to BF16 when x is F16 / F32, then quantized once to the
 *      dispatch dtype (and to the shared experts' dtype when it differs), as MegaMoE's dispatch does.
 *   2. The rows are gathered per local expert (token order), so each expert runs as one group of the
 *      FFN module (ffn/ffn.h) and all experts as one grouped GEMM1 / activation / GEMM2 job; with
 *      topk_weights_type 1 the gating weight scales the activation output (row_weights).
 *   3. The shared experts run on all active rows, one job (as MegaMoE's shared.c).
 *   4. Combine quantization (modes 3 / 4) encodes each BF16 expert row to MX FP8 as MegaMoE's combine
 *      does; then each token's sum in MegaMoE's order (ops/mega_moe/combine_sum.c), rounded once to BF16.
 * Each row's result depends only on that row, so grouping never changes bits: y equals MegaMoE's on a
 * one-rank world. Skipped ids and other processes' experts add no term. */
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "core/parallel.h"
#include "ffn/ffn.h"
#include "megamoe/formats.h"
#include "ops/experts/experts_internal.h"
#include "ops/mega_moe/combine_sum.h"
#include "ops/mega_moe/ffn_call.h"

/* Rows per pool task of the row loops: as MegaMoE's (ops/mega_moe/layout.h). */
#define ROWS_PER_TASK 16

typedef struct call {
    const mm_experts *ex;
    const mm_experts_plan *p;
    const mm_experts_inputs *in;
    const mm_mega_moe_attrs *attrs;
    const mm_rowops *ops;
    int64_t H, K, S;
    size_t slot, mx_off, comb_slot; /* quantized row | MX scales; combine slot */
    int separate_shared;            /* shared experts read their own quantization of x */
    /* workspace arrays */
    int64_t *active; /* A: token of active row a */
    int32_t *dest;   /* T x K: routed row of (i, k), or -1 */
    int32_t *src;    /* N: active row a of routed row r */
    uint8_t *stage, *shared_stage, *rows, *comb;
    float *stage_scale, *shared_scale, *row_scale, *row_weight, *task_f32;
    uint16_t *task_bf16, *routed_out, *shared_out, *y_bf16;
    mm_ffn_scratch routed_scratch, shared_scratch;
} call;

static size_t round_up(size_t v, size_t a) {
    return (v + a - 1) / a * a;
}

static int64_t tasks_of(int64_t n) {
    return (n + ROWS_PER_TASK - 1) / ROWS_PER_TASK;
}

static float topk_weight(const call *c, int64_t i, int64_t k) {
    const mm_tensor *t = c->in->topk_weights;
    if (c->p->c.bf16_weights) return mm_bf16_to_f32(((const uint16_t *)t->data)[i * c->K + k]);
    return ((const float *)t->data)[i * c->K + k];
}

/* Token i of x as BF16: x itself, or rounded (RNE) into tmp. */
static const uint16_t *x_row_bf16(const call *c, int64_t i, uint16_t *tmp) {
    const mm_tensor *x = c->in->x;
    switch (c->p->x_dtype) {
    case MM_DTYPE_F32: c->ops->to_bf16(tmp, (const float *)x->data + i * c->H, c->H); return tmp;
    case MM_DTYPE_F16: {
        const uint16_t *h = (const uint16_t *)x->data + i * c->H;
        for (int64_t q = 0; q < c->H; q++) tmp[q] = mm_f32_to_bf16(mm_f16_to_f32(h[q]));
        return tmp;
    }
    default: return (const uint16_t *)x->data + i * c->H;
    }
}

/* 1. Active rows [t * ROWS_PER_TASK, ...) quantized once per input dtype. */
static void stage_task(void *ctx, int64_t t) {
    call *c = ctx;
    int64_t end = (t + 1) * ROWS_PER_TASK < c->p->A ? (t + 1) * ROWS_PER_TASK : c->p->A;
    float *f32 = c->task_f32 + t * 2 * c->H;
    uint16_t *tmp = c->task_bf16 + t * c->H;
    for (int64_t a = t * ROWS_PER_TASK; a < end; a++) {
        const uint16_t *x = x_row_bf16(c, c->active[a], tmp);
        uint8_t *slot = c->stage + a * c->slot;
        mm_ffn_quantize_input(c->p->c.dispatch_dtype, x, c->H, slot, slot + c->mx_off, &c->stage_scale[a],
                              f32);
        if (c->separate_shared) {
            uint8_t *sh = c->shared_stage + a * c->slot;
            mm_ffn_quantize_input(c->p->c.shared_input_dtype, x, c->H, sh, sh + c->mx_off,
                                  &c->shared_scale[a], f32);
        }
    }
}

/* 2. Routed rows [t * ROWS_PER_TASK, ...): their token's quantized row, scale and gating weight. */
static void gather_task(void *ctx, int64_t t) {
    call *c = ctx;
    int64_t end = (t + 1) * ROWS_PER_TASK < c->p->N ? (t + 1) * ROWS_PER_TASK : c->p->N;
    for (int64_t r = t * ROWS_PER_TASK; r < end; r++) {
        int64_t a = c->src[r];
        memcpy(c->rows + r * c->slot, c->stage + a * c->slot, c->slot);
        c->row_scale[r] = c->stage_scale[a];
    }
}

/* 4. Combine quantization of routed rows [t * ROWS_PER_TASK, ...) (MegaMoE's combine encoding). */
static void encode_task(void *ctx, int64_t t) {
    call *c = ctx;
    int64_t end = (t + 1) * ROWS_PER_TASK < c->p->N ? (t + 1) * ROWS_PER_TASK : c->p->N;
    mm_dtype q = c->attrs->combine_quant_mode == 3 ? MM_DTYPE_FP8_E5M2 : MM_DTYPE_FP8_E4M3FN;
    for (int64_t r = t * ROWS_PER_TASK; r < end; r++) {
        uint8_t *dst = c->comb + r * c->comb_slot;
        mm_mx_quantize_row_bf16(c->routed_out + r * c->H, c->H, q, dst, dst + c->H, NULL);
    }
}

/* 4. y of active rows [t * ROWS_PER_TASK, ...). */
static void sum_task(void *ctx, int64_t t) {
    call *c = ctx;
    const mm_experts_plan *p = c->p;
    int64_t end = (t + 1) * ROWS_PER_TASK < p->A ? (t + 1) * ROWS_PER_TASK : p->A;
    float *acc = c->task_f32 + t * 2 * c->H, *deq = acc + c->H;
    uint16_t *tmp = c->task_bf16 + t * c->H;
    int cq = c->attrs->combine_quant_mode;
    mm_moe_sum_rule rule = {c->ops,
                            c->H,
                            c->K,
                            cq ? c->comb_slot : (size_t)(2 * c->H),
                            cq,
                            c->attrs->topk_weights_type == 0,
                            p->c.bf16_weights};
    const uint8_t *base = cq ? c->comb : (const uint8_t *)c->routed_out;
    size_t wbytes = p->c.bf16_weights ? 2 : 4;
    for (int64_t a = t * ROWS_PER_TASK; a < end; a++) {
        int64_t i = c->active[a];
        const uint8_t *w = (const uint8_t *)c->in->topk_weights->data + (size_t)(i * c->K) * wbytes;
        mm_moe_sum_routed(&rule, base, c->dest + i * c->K, w, acc, deq);
        uint16_t *y = p->y_f32 ? tmp : c->y_bf16 + i * c->H;
        mm_moe_sum_finish(c->ops, c->H, acc, c->shared_out + a * c->H, p->A * c->H, c->S, y);
        if (p->y_f32) c->ops->from_bf16((float *)c->y_bf16 + i * c->H, tmp, c->H);
    }
}

/* Workspace: one 64-byte aligned array after the other; with mem NULL only the size is computed. */
static size_t lay_out(call *c, const mm_experts *ex, const mm_experts_plan *p, uint8_t *mem) {
    int64_t T = p->T, K = p->K, A = p->A, N = p->N, H = c->H, S = c->S;
    int64_t tasks = tasks_of(A > N ? A : N);
    size_t at = 0;
#define PLACE(ptr, type, bytes)                                                                              \
    do {                                                                                                     \
        if (mem) c->ptr = (type)(void *)(mem + at);                                                          \
        at += round_up((size_t)(bytes), 64);                                                                 \
    } while (0)
    PLACE(active, int64_t *, (size_t)A * sizeof(int64_t));
    PLACE(dest, int32_t *, (size_t)(T * K) * sizeof(int32_t));
    PLACE(src, int32_t *, (size_t)N * sizeof(int32_t));
    PLACE(stage, uint8_t *, (size_t)A * c->slot);
    PLACE(stage_scale, float *, (size_t)A * sizeof(float));
    PLACE(shared_stage, uint8_t *, c->separate_shared ? (size_t)A * c->slot : 0);
    PLACE(shared_scale, float *, (size_t)A * sizeof(float));
    PLACE(rows, uint8_t *, (size_t)N * c->slot);
    PLACE(row_scale, float *, (size_t)N * sizeof(float));
    PLACE(row_weight, float *, (size_t)N * sizeof(float));
    PLACE(routed_out, uint16_t *, (size_t)(N * H) * sizeof(uint16_t));
    PLACE(comb, uint8_t *, c->attrs->combine_quant_mode ? (size_t)N * c->comb_slot : 0);
    PLACE(shared_out, uint16_t *, (size_t)(S * A * H) * sizeof(uint16_t));
    PLACE(task_f32, float *, (size_t)(tasks * 2 * H) * sizeof(float));
    PLACE(task_bf16, uint16_t *, (size_t)(tasks * H) * sizeof(uint16_t));
    size_t routed_scratch = at;
    at += round_up(mm_ffn_scratch_bytes(N, H, ex->I, ex->routed.k2), 64);
    size_t shared_scratch = at;
    at += S ? round_up(mm_ffn_scratch_bytes(S * A, H, ex->I, ex->shared.k2), 64) : 0;
#undef PLACE
    if (mem) {
        mm_ffn_scratch_init(&c->routed_scratch, mem + routed_scratch, N, H, ex->I, ex->routed.k2);
        if (S) mm_ffn_scratch_init(&c->shared_scratch, mem + shared_scratch, S * A, H, ex->I, ex->shared.k2);
    }
    return at + 64;
}

/* Routed rows in expert-major, token order: dest, src and the gating weights. */
static void route(call *c, const mm_experts *ex, int64_t *next) {
    const mm_experts_plan *p = c->p;
    int64_t off = 0;
    for (int64_t j = 0; j < ex->local; j++) {
        next[j] = off;
        off += p->counts[j];
    }
    int64_t a = 0;
    for (int64_t i = 0; i < p->T; i++) {
        int active = !p->mask || p->mask[i];
        if (active) c->active[a] = i;
        for (int64_t k = 0; k < c->K; k++) {
            int64_t slot = active ? mm_experts_slot_of(ex, p, c->in->topk_ids->data, i, k) : -1;
            int64_t r = slot >= 0 ? next[slot]++ : -1;
            c->dest[i * c->K + k] = (int32_t)r;
            if (r < 0) continue;
            c->src[r] = (int32_t)a;
            c->row_weight[r] = topk_weight(c, i, k);
        }
        a += active;
    }
}

static mm_status run_experts(call *c, const mm_experts *ex, mm_error *err) {
    const mm_experts_plan *p = c->p;
    mm_status st = MM_OK;
    if (p->N > 0) {
        mm_ffn_group *groups = malloc((size_t)ex->local * sizeof *groups);
        if (!groups) return mm_fail(err, MM_ERR_OUT_OF_MEMORY, "expert groups: out of memory");
        int64_t n = 0, r0 = 0;
        for (int64_t j = 0; j < ex->local; j++) {
            int64_t cnt = p->counts[j];
            const uint8_t *a = c->rows + r0 * c->slot;
            if (cnt > 0)
                groups[n++] = mm_moe_expert_group(&ex->routed, j, r0, cnt, a, (int64_t)c->slot, c->mx_off,
                                                  c->row_scale + r0);
            r0 += cnt;
        }
        mm_ffn_job job;
        mm_moe_ffn_job_init(&job, &p->c.routed, &p->c.act, &ex->routed, c->H, ex->I, NULL);
        job.n_groups = n;
        job.groups = groups;
        job.row_weights = c->attrs->topk_weights_type == 1 ? c->row_weight : NULL;
        job.scratch = &c->routed_scratch;
        job.out = c->routed_out;
        st = mm_ffn_run(&job, err);
        free(groups);
    }
    if (st != MM_OK || c->S == 0 || p->A == 0) return st;
    const uint8_t *base = c->separate_shared ? c->shared_stage : c->stage;
    const float *scales = c->separate_shared ? c->shared_scale : c->stage_scale;
    mm_ffn_group groups[MM_MEGA_MOE_MAX_SHARED_EXPERTS];
    for (int64_t e = 0; e < c->S; e++)
        groups[e] =
            mm_moe_expert_group(&ex->shared, e, e * p->A, p->A, base, (int64_t)c->slot, c->mx_off, scales);
    mm_ffn_job job;
    mm_moe_ffn_job_init(&job, &p->c.shared, &p->c.act, &ex->shared, c->H, ex->I, NULL);
    job.n_groups = c->S;
    job.groups = groups;
    job.scratch = &c->shared_scratch;
    job.out = c->shared_out;
    return mm_ffn_run(&job, err);
}

mm_status mm_experts_run(const mm_experts *ex, const mm_mega_moe_attrs *attrs,
                         const mm_experts_inputs *inputs, mm_tensor *y, mm_error *err) {
    mm_experts_plan p;
    mm_status st = mm_experts_plan_make(ex, attrs, inputs, y, &p, err);
    if (st != MM_OK) return st;
    call c;
    memset(&c, 0, sizeof c);
    c.ex = ex;
    c.p = &p;
    c.in = inputs;
    c.attrs = attrs;
    c.ops = mm_rowops_get();
    c.H = ex->H;
    c.K = p.K;
    c.S = p.c.has_shared ? ex->shared.count : 0;
    c.separate_shared = mm_moe_separate_shared_stage(&p.c);
    size_t data = 0;
    mm_dtype in_types[2] = {p.c.dispatch_dtype, p.c.shared_input_dtype};
    for (int q = 0; q < 2; q++)
        if (in_types[q] > MM_DTYPE_INVALID) {
            size_t b = (size_t)mm_dtype_row_bytes(in_types[q], c.H);
            if (b > data) data = b;
        }
    c.mx_off = round_up(data, 64);
    c.slot = c.mx_off + round_up((size_t)(c.H + 31) / 32, 64);
    c.comb_slot = round_up((size_t)(c.H + (c.H + 31) / 32), 64);
    c.y_bf16 = y->data;
    size_t bytes = lay_out(&c, ex, &p, NULL);
    int owned = 0;
    uint8_t *mem = mm_experts_ws_acquire(ex, bytes, &owned);
    int64_t *next = malloc(((size_t)ex->local + 1) * sizeof *next);
    if (!mem || !next) {
        st = mm_fail(err, MM_ERR_OUT_OF_MEMORY, "experts call workspace (%zu bytes): out of memory", bytes);
        goto done;
    }
    lay_out(&c, ex, &p, mem);
    route(&c, ex, next);
    mm_parallel_for(tasks_of(p.A), stage_task, &c);
    mm_parallel_for(tasks_of(p.N), gather_task, &c);
    if ((st = run_experts(&c, ex, err)) != MM_OK) goto done;
    if (attrs->combine_quant_mode) mm_parallel_for(tasks_of(p.N), encode_task, &c);
    mm_parallel_for(tasks_of(p.A), sum_task, &c);
    size_t ybytes = p.y_f32 ? 4 : 2;
    for (int64_t i = 0; i < p.T; i++)
        if (p.mask && !p.mask[i])
            memset((uint8_t *)y->data + (size_t)(i * c.H) * ybytes, 0, (size_t)c.H * ybytes);
done:
    free(next);
    if (mem) mm_experts_ws_release(ex, mem, owned);
    free(p.counts);
    return st;
}
