/* SPDX-License-Identifier: Apache-2.0 */
/* ops/mega_moe/compute_only.c: this rank's expert FFN alone, on rows placed in memory beforehand, with
 * no communication: the baseline `megamoe bench mega-moe` compares the whole layer with ("expert compute
 * alone"). It runs exactly the FFN batches of a call (the same packed weights, kernels, fused
 * epilogues and compute gate): every local expert with its row count as one batch, then the shared
 * experts on the active rows. Not part of the public API. */
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "core/free_all.h"
#include "ops/mega_moe/buffer.h"
#include "ops/mega_moe/compute_only.h"
#include "ops/mega_moe/ffn_call.h"
#include "ops/mega_moe/path.h"
#include "ops/mega_moe/weights.h"

struct mm_moe_compute_only {
    const mm_mega_moe_weights *w;
    mm_moe_path routed, shared;
    mm_ffn_act act;
    int64_t hidden, inter, n_routed, n_shared, shared_rows;
    mm_ffn_group *groups; /* routed groups, then shared */
    uint8_t *rows, *shared_rows_mem;
    float *scales, *shared_scales;
    void *scratch_mem, *shared_scratch_mem;
    mm_ffn_scratch scratch, shared_scratch;
    uint16_t *out, *shared_out;
};

/* The dispatch rounding of the attributes (as mm_moe_validate decides it; the attrs are trusted). */
static mm_dtype input_dtype_of(const mm_mega_moe_attrs *a, int shared) {
    mm_dtype d = a->dispatch_quant_out_dtype;
    if (d == MM_DTYPE_BF16) d = MM_DTYPE_INVALID;
    if (a->dispatch_quant_mode == 2 && d == MM_DTYPE_INVALID) d = MM_DTYPE_I8;
    if (shared) {
        mm_dtype s = a->shared_expert_quant_out_dtype;
        if (s == MM_DTYPE_BF16) s = MM_DTYPE_INVALID;
        if (s != MM_DTYPE_INVALID) d = s;
    }
    return d;
}

/* n rows quantized from the BF16 rows x (cycled), in the recv slot layout of the buffer. */
static mm_status place_rows(const mm_mega_moe_buffer *b, mm_dtype dtype, const uint16_t *x, int64_t x_rows,
                            int64_t n, uint8_t **rows, float **scales, mm_error *err) {
    int64_t H = b->sizing.hidden;
    *rows = calloc((size_t)(n > 0 ? n : 1), b->recv_slot_bytes);
    *scales = calloc((size_t)(n > 0 ? n : 1), sizeof **scales);
    float *f32 = malloc((size_t)H * sizeof *f32);
    mm_status st = MM_OK;
    if (!*rows || !*scales || !f32) {
        st = mm_fail(err, MM_ERR_OUT_OF_MEMORY, "compute-only rows (%lld): out of memory", (long long)n);
        goto done;
    }
    for (int64_t r = 0; r < n; r++) {
        uint8_t *slot = *rows + r * b->recv_slot_bytes;
        mm_ffn_quantize_input(dtype == MM_DTYPE_INVALID ? MM_DTYPE_BF16 : dtype, x + (r % x_rows) * H, H,
                              slot, slot + b->recv_scale_offset, &(*scales)[r], f32);
    }
done:
    free(f32);
    return st;
}

mm_status mm_moe_compute_only_create(const mm_mega_moe_buffer *b, const mm_mega_moe_weights *w,
                                     const mm_mega_moe_attrs *attrs, const int64_t *rows_per_expert,
                                     int64_t shared_rows, const uint16_t *x, int64_t x_rows,
                                     mm_moe_compute_only **out, mm_error *err) {
    mm_status st;
    *out = NULL;
    if (x_rows < 1)
        return mm_fail(err, MM_ERR_INVALID_ARGUMENT, "x_rows = %lld must be >= 1", (long long)x_rows);
    mm_moe_compute_only *co = calloc(1, sizeof *co);
    if (!co) return mm_fail(err, MM_ERR_OUT_OF_MEMORY, "compute-only state: out of memory");
    co->w = w;
    co->hidden = b->sizing.hidden;
    co->inter = b->sizing.intermediate_hidden;
    co->n_routed = w->local_experts;
    co->n_shared = shared_rows > 0 ? w->shared.count : 0;
    co->shared_rows = shared_rows;
    if ((st = mm_ffn_act_resolve(attrs->activation, attrs->activation_params, attrs->activation_param_count,
                                 &co->act, err)) != MM_OK)
        goto fail;
    st = mm_moe_path_make(w->routed.dtype, input_dtype_of(attrs, 0), attrs->activation_out_dtype, "routed",
                          &co->routed, err);
    if (st == MM_OK && co->n_shared)
        st = mm_moe_path_make(w->shared.dtype, input_dtype_of(attrs, 1), attrs->activation_out_dtype,
                              "shared", &co->shared, err);
    if (st != MM_OK) goto fail;
    int64_t total = 0;
    for (int64_t j = 0; j < co->n_routed; j++) total += rows_per_expert[j];
    co->groups = calloc((size_t)(co->n_routed + co->n_shared + 1), sizeof *co->groups);
    co->scratch_mem = malloc(mm_ffn_scratch_bytes(total, co->hidden, co->inter, w->routed.k2));
    co->out = malloc((size_t)(total * co->hidden + 1) * sizeof *co->out);
    if (!co->groups || !co->scratch_mem || !co->out) {
        st = mm_fail(err, MM_ERR_OUT_OF_MEMORY, "compute-only scratch: out of memory");
        goto fail;
    }
    mm_ffn_scratch_init(&co->scratch, co->scratch_mem, total, co->hidden, co->inter, w->routed.k2);
    if ((st = place_rows(b, co->routed.input_dtype, x, x_rows, total, &co->rows, &co->scales, err)) != MM_OK)
        goto fail;
    int64_t r0 = 0;
    for (int64_t j = 0; j < co->n_routed; j++) {
        const uint8_t *a = co->rows + r0 * b->recv_slot_bytes;
        co->groups[j] =
            mm_moe_expert_group(&w->routed, j, r0, rows_per_expert[j], a, (int64_t)b->recv_slot_bytes,
                                b->recv_scale_offset, co->scales + r0);
        r0 += rows_per_expert[j];
    }
    if (co->n_shared) {
        int64_t n = co->n_shared * shared_rows;
        co->shared_scratch_mem = malloc(mm_ffn_scratch_bytes(n, co->hidden, co->inter, w->shared.k2));
        co->shared_out = malloc((size_t)(n * co->hidden) * sizeof *co->shared_out);
        if (!co->shared_scratch_mem || !co->shared_out) {
            st = mm_fail(err, MM_ERR_OUT_OF_MEMORY, "compute-only shared scratch: out of memory");
            goto fail;
        }
        mm_ffn_scratch_init(&co->shared_scratch, co->shared_scratch_mem, n, co->hidden, co->inter,
                            w->shared.k2);
        st = place_rows(b, co->shared.input_dtype, x, x_rows, shared_rows, &co->shared_rows_mem,
                        &co->shared_scales, err);
        if (st != MM_OK) goto fail;
        for (int64_t e = 0; e < co->n_shared; e++)
            co->groups[co->n_routed + e] =
                mm_moe_expert_group(&w->shared, e, e * shared_rows, shared_rows, co->shared_rows_mem,
                                    (int64_t)b->recv_slot_bytes, b->recv_scale_offset, co->shared_scales);
    }
    *out = co;
    return MM_OK;
fail:
    mm_moe_compute_only_free(co);
    return st;
}

mm_status mm_moe_compute_only_run(mm_moe_compute_only *co, mm_error *err) {
    /* Experts without rows are left out, as the scheduler does. */
    mm_ffn_group *active = malloc((size_t)(co->n_routed + 1) * sizeof *active);
    if (!active) return mm_fail(err, MM_ERR_OUT_OF_MEMORY, "compute-only groups: out of memory");
    int64_t n = 0;
    for (int64_t j = 0; j < co->n_routed; j++)
        if (co->groups[j].rows > 0) active[n++] = co->groups[j];
    mm_status st = MM_OK;
    if (n > 0) {
        mm_ffn_job job;
        mm_moe_ffn_job_init(&job, &co->routed, &co->act, &co->w->routed, co->hidden, co->inter, NULL);
        job.n_groups = n;
        job.groups = active;
        job.scratch = &co->scratch;
        job.out = co->out;
        st = mm_moe_ffn_run(&job, 0, err);
    }
    if (st == MM_OK && co->n_shared) {
        mm_ffn_job job;
        mm_moe_ffn_job_init(&job, &co->shared, &co->act, &co->w->shared, co->hidden, co->inter, NULL);
        job.n_groups = co->n_shared;
        job.groups = co->groups + co->n_routed;
        job.scratch = &co->shared_scratch;
        job.out = co->shared_out;
        st = mm_moe_ffn_run(&job, 0, err);
    }
    free(active);
    return st;
}

void mm_moe_compute_only_free(mm_moe_compute_only *co) {
    if (!co) return;
    MM_FREE_ALL(co->groups, co->rows, co->scales, co->shared_rows_mem, co->shared_scales, co->scratch_mem,
                co->shared_scratch_mem, co->out, co->shared_out, co);
}
