/* SPDX-License-Identifier: Apache-2.0 */
/* ops/mega_moe/stats.c: the timing of a buffer's last run: the phases record their stages as they
 * end, the expert scheduler which experts each batch computed and on how many rows, and
 * mm_mega_moe_last_stats hands the record out. */
#include "ops/mega_moe/stats.h"

#include "core/error.h"
#include "ops/mega_moe/buffer.h"

void mm_moe_stats_event_of_batch(mm_mega_moe_buffer *buf, mm_mega_moe_stage stage, int batch, double begin,
                                 double end) {
    mm_mega_moe_stats *s = &buf->stats;
    s->seconds[stage] += end - begin;
    if (s->event_count < MM_MEGA_MOE_MAX_EVENTS)
        s->events[s->event_count++] = (mm_mega_moe_event){stage, batch, begin, end};
}

void mm_moe_stats_event(mm_mega_moe_buffer *buf, mm_mega_moe_stage stage, double begin, double end) {
    mm_moe_stats_event_of_batch(buf, stage, -1, begin, end);
}

int mm_moe_stats_batch(mm_mega_moe_buffer *buf) {
    return buf->stats.batch_count++;
}

void mm_moe_stats_expert(mm_mega_moe_buffer *buf, int batch, int64_t expert, int64_t rows) {
    mm_mega_moe_stats *s = &buf->stats;
    if (s->expert_count < MM_MEGA_MOE_MAX_EXPERT_RECORDS)
        s->experts[s->expert_count++] = (mm_mega_moe_expert_record){batch, (int)expert, rows};
}

const char *mm_mega_moe_stage_name(mm_mega_moe_stage stage) {
    static const char *const names[] = {"dispatch", "gemm1", "activation", "gemm2", "shared", "combine"};
    if ((int)stage < 0 || stage >= MM_MEGA_MOE_STAGE_COUNT) return "invalid";
    return names[stage];
}

mm_status mm_mega_moe_last_stats(const mm_mega_moe_buffer *buffer, mm_mega_moe_stats *stats, mm_error *err) {
    if (!buffer || !stats) return mm_fail(err, MM_ERR_INVALID_ARGUMENT, "buffer and stats must not be NULL");
    *stats = buffer->stats;
    return MM_OK;
}
