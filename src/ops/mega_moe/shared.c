/* SPDX-License-Identifier: Apache-2.0 */
/* ops/mega_moe/shared.c: the shared experts of a call: one FFN job over every shared expert on the
 * call's active rows, read from the dispatch's local stage (or the shared experts' own quantization of x
 * when its dtype differs), through the compute gate. */
#include "ops/mega_moe/shared.h"

#include "core/clock.h"
#include "ops/mega_moe/ffn_call.h"
#include "ops/mega_moe/stats.h"

mm_status mm_moe_shared_experts(run_state *s, mm_error *err) {
    const mm_moe_call *c = s->c;
    int64_t S = s->w->shared.count, A = c->active_rows;
    if (!c->has_shared || A == 0) return MM_OK;
    double t0 = mm_now_seconds();
    int sep = mm_moe_separate_shared_stage(c);
    const uint8_t *base = sep ? s->shared_stage : s->stage;
    const float *scales = sep ? s->shared_stage_scale : s->stage_scale;
    mm_ffn_group groups[MM_MEGA_MOE_MAX_SHARED_EXPERTS];
    for (int64_t e = 0; e < S; e++)
        groups[e] = mm_moe_expert_group(&s->w->shared, e, e * A, A, base, (int64_t)s->b->recv_slot_bytes,
                                        s->b->recv_scale_offset, scales);
    mm_ffn_job job;
    mm_moe_ffn_job_init(&job, &c->shared, &c->act, &s->w->shared, s->H, s->b->sizing.intermediate_hidden,
                        NULL);
    job.n_groups = S;
    job.groups = groups;
    job.scratch = &s->shared_scratch;
    job.out = s->shared_out;
    mm_status st = mm_moe_ffn_run(&job, 0, err);
    mm_moe_stats_event(s->b, MM_MEGA_MOE_STAGE_SHARED, t0, mm_now_seconds());
    return st;
}
