/* ops/mega_moe/compute_only.h: this rank's expert FFN alone on rows placed beforehand (x cycled,
 * quantized as the dispatch would), no communication: the baseline of `megamoe bench layer`
 * (compute_only.c). rows_per_expert has E / R entries (e.g. a call's expert_token_nums); shared_rows
 * rows go through each shared expert. */
#ifndef MEGAMOE_OPS_MEGA_MOE_COMPUTE_ONLY_H
#define MEGAMOE_OPS_MEGA_MOE_COMPUTE_ONLY_H

#include <stdint.h>

#include "megamoe/mega_moe.h"

typedef struct mm_moe_compute_only mm_moe_compute_only;
mm_status mm_moe_compute_only_create(const mm_mega_moe_buffer *b, const mm_mega_moe_weights *w,
                                     const mm_mega_moe_attrs *attrs, const int64_t *rows_per_expert,
                                     int64_t shared_rows, const uint16_t *x, int64_t x_rows,
                                     mm_moe_compute_only **out, mm_error *err);
mm_status mm_moe_compute_only_run(mm_moe_compute_only *co, mm_error *err);
void mm_moe_compute_only_free(mm_moe_compute_only *co);

#endif
