/* SPDX-License-Identifier: Apache-2.0 */
/* ops/mega_moe/stats.h: the timing of the last run of a buffer (stats.c). */
#ifndef MEGAMOE_OPS_MEGA_MOE_STATS_H
#define MEGAMOE_OPS_MEGA_MOE_STATS_H

#include <stdint.h>

#include "megamoe/mega_moe.h"

/* Adds [begin, end] to the stage's seconds and, while there is room, to the event list. */
void mm_moe_stats_event(mm_mega_moe_buffer *buf, mm_mega_moe_stage stage, double begin, double end);
/* The same for an event of a batch of routed experts (mm_moe_stats_batch's number). */
void mm_moe_stats_event_of_batch(mm_mega_moe_buffer *buf, mm_mega_moe_stage stage, int batch, double begin,
                                 double end);
/* Opens the call's next batch of routed experts; returns its number. */
int mm_moe_stats_batch(mm_mega_moe_buffer *buf);
/* Records that the batch computes `rows` rows of the expert (global id), while there is room. */
void mm_moe_stats_expert(mm_mega_moe_buffer *buf, int batch, int64_t expert, int64_t rows);

#endif
