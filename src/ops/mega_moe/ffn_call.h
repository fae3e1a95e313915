/* SPDX-License-Identifier: Apache-2.0 */
/* ops/mega_moe/ffn_call.h: MegaMoE's use of the expert FFN module (ffn/ffn.h), in ffn_call.c. */
#ifndef MEGAMOE_OPS_MEGA_MOE_FFN_CALL_H
#define MEGAMOE_OPS_MEGA_MOE_FFN_CALL_H

#include "ffn/ffn.h"
#include "megamoe/mega_moe.h"
#include "ops/mega_moe/path.h"
#include "ops/mega_moe/weights.h"

/* A job for the experts of `set` on path (dtypes, BF16 rounding of A16W16's GEMM1 output) with the
 * call's activation; the other fields (groups, row weights, scratch, outputs) are the caller's.
 * timing: the buffer whose stats receive the GEMM1 / activation / GEMM2 stages, as events of the
 * call's last opened batch (mm_moe_stats_batch; NULL = none). */
void mm_moe_ffn_job_init(mm_ffn_job *job, const mm_moe_path *path, const mm_ffn_act *act,
                         const mm_moe_expert_set *set, int64_t hidden, int64_t inter,
                         mm_mega_moe_buffer *timing);
/* The FFN group of expert e of set: rows [row0, row0 + rows), the first at a and one every stride bytes,
 * each slot's MX scales mx_offset bytes into it, their I8 row scales from row_scales. */
mm_ffn_group mm_moe_expert_group(const mm_moe_expert_set *set, int64_t e, int64_t row0, int64_t rows,
                                 const uint8_t *a, int64_t stride, int64_t mx_offset,
                                 const float *row_scales);
/* mm_ffn_run inside the compute gate (gate.c), unless the caller already holds it. */
mm_status mm_moe_ffn_run(const mm_ffn_job *job, int gate_held, mm_error *err);

#endif
