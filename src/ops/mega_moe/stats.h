/* SPDX-License-Identifier: Apache-2.0 */
/* ops/mega_moe/stats.h: the timing of the last run of a buffer (stats.c). */
#ifndef MEGAMOE_OPS_MEGA_MOE_STATS_H
#define MEGAMOE_OPS_MEGA_MOE_STATS_H

#include "megamoe/mega_moe.h"

/* Adds [begin, end] to the stage's seconds and, while there is room, to the event list. */
void mm_moe_stats_event(mm_mega_moe_buffer *buf, mm_mega_moe_stage stage, double begin, double end);

#endif
