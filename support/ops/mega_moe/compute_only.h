/* SPDX-License-Identifier: Apache-2.0 */
/* ops/mega_moe/compute_only.h: this rank's expert FFN alone, on rows placed beforehand: the baseline of
 * `megamoe bench mega-moe`.
 *
 * Internal API for tools: not part of include/megamoe/, but the CLI (tools/bench/bench_mega_moe.c) may
 * include it; it needs only public types. The rows are x cycled and quantized as the dispatch would;
 * there is no communication. rows_per_expert has E / R entries (e.g. a call's expert_token_nums);
 * shared_rows rows go through each shared expert. */
#ifndef MEGAMOE_OPS_MEGA_MOE_COMPUTE_ONLY_H
#define MEGAMOE_OPS_MEGA_MOE_COMPUTE_ONLY_H

#include <stdint.h>

#include "megamoe/mega_moe.h"
#include "megamoe/status.h"

typedef struct mm_moe_compute_only mm_moe_compute_only;
mm_status mm_moe_compute_only_create(const mm_mega_moe_buffer *b, const mm_mega_moe_weights *w,
                                     const mm_mega_moe_attrs *attrs, const int64_t *rows_per_expert,
                                     int64_t shared_rows, const uint16_t *x, int64_t x_rows,
                                     mm_moe_compute_only **out, mm_error *err);
mm_status mm_moe_compute_only_run(mm_moe_compute_only *co, mm_error *err);
void mm_moe_compute_only_free(mm_moe_compute_only *co);

#endif
