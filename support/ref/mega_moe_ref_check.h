/* SPDX-License-Identifier: Apache-2.0 */
/* ref/mega_moe_ref_check.h: input checks of the reference (what its math and memory safety need). */
#ifndef MEGAMOE_REF_MEGA_MOE_REF_CHECK_H
#define MEGAMOE_REF_MEGA_MOE_REF_CHECK_H

#include "ref/expert_ref.h"

/* Checks attrs, every rank's inputs and outputs; fills the plans of the routed and shared experts
 * (shared is left zeroed when no rank has shared experts). */
mm_status mm_ref_check(const mm_ref_attrs *attrs, const mm_ref_rank_input *inputs,
                       const mm_ref_rank_output *outputs, mm_ref_plan *routed, mm_ref_plan *shared,
                       mm_error *err);

/* The dtype the shared experts quantize their input to (shared_quant_dtype, else dispatch_dtype). */
mm_dtype mm_ref_shared_input_dtype(const mm_ref_attrs *attrs);

/* True when the topology is layered: 0 < rank_num_per_server < world_size. */
int mm_ref_is_layered(const mm_ref_attrs *attrs);

#endif
