/* SPDX-License-Identifier: Apache-2.0 */
/* ops/mega_moe/ffn_call.c: MegaMoE's use of the expert FFN module (ffn/ffn.h): the job of a group of
 * experts from its scenario path, the compute gate around it (gate.c), and the timing callback that
 * records the FFN's stages into the buffer's stats (the module itself knows no buffer). */
#include "core/error.h"
#include "ops/mega_moe/buffer.h"
#include "ops/mega_moe/ffn_call.h"
#include "ops/mega_moe/gate.h"
#include "ops/mega_moe/stats.h"

/* Timing is asked for the routed experts only, whose batch the scheduler opened just before the job. */
static void record_stage(void *ctx, mm_ffn_stage stage, double begin, double end) {
    static const mm_mega_moe_stage stages[] = {MM_MEGA_MOE_STAGE_GEMM1, MM_MEGA_MOE_STAGE_ACTIVATION,
                                               MM_MEGA_MOE_STAGE_GEMM2};
    mm_mega_moe_buffer *buf = ctx;
    mm_moe_stats_event_of_batch(buf, stages[stage], buf->stats.batch_count - 1, begin, end);
}

void mm_moe_ffn_job_init(mm_ffn_job *job, const mm_moe_path *path, const mm_ffn_act *act,
                         const mm_moe_expert_set *set, int64_t hidden, int64_t inter,
                         mm_mega_moe_buffer *timing) {
    *job = (mm_ffn_job){0};
    job->input_dtype = path->input_dtype;
    job->gemm2_dtype = path->gemm2_dtype;
    /* spec step 3: H in BF16 for A16W16, and for the A16 weight-only scenarios, which are A16W16 on the
     * dequantized weights (docs/weight_formats.md) */
    job->round_h_bf16 = path->input_dtype == MM_DTYPE_BF16;
    job->act = act;
    job->hidden = hidden;
    job->inter = inter;
    job->k2 = set->k2;
    job->timing = timing ? record_stage : NULL;
    job->timing_ctx = timing;
}

mm_ffn_group mm_moe_expert_group(const mm_moe_expert_set *set, int64_t e, int64_t row0, int64_t rows,
                                 const uint8_t *a, int64_t stride, int64_t mx_offset,
                                 const float *row_scales) {
    return (mm_ffn_group){.row0 = row0,
                          .rows = rows,
                          .a = a,
                          .a_stride = stride,
                          .a_row_scales = row_scales,
                          .a_mx = a + mx_offset,
                          .a_mx_stride = stride,
                          .w1 = set->w1[e],
                          .w2 = set->w2[e],
                          .bias1 = mm_moe_expert_bias(set, 1, e),
                          .bias2 = mm_moe_expert_bias(set, 2, e)};
}

mm_status mm_moe_ffn_run(const mm_ffn_job *job, int gate_held, mm_error *err) {
    if (!gate_held) mm_moe_gate_enter();
    mm_status st = mm_ffn_run(job, err);
    if (!gate_held) mm_moe_gate_leave();
    return st;
}
