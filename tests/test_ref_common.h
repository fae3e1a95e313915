/* SPDX-License-Identifier: Apache-2.0 */
/* tests/test_ref_common.h: the float64 reference's attributes of a case of given sizes, shared by the
 * hand-made cases of the test_ref_* tests and the random ones of test_mega_moe_common.h (header-only:
 * the test glob compiles test_*.c files only). */
#ifndef MEGAMOE_TEST_REF_COMMON_H
#define MEGAMOE_TEST_REF_COMMON_H

#include "ref/mega_moe_ref.h"

/* E experts over R ranks, top-k, hidden size H and intermediate size I; every other attribute zero (no
 * dispatch quantization, no transposes, no bias); the caller initializes the activation. */
static inline mm_ref_attrs ref_attrs_sized(int64_t experts, int64_t ranks, int64_t topk, int64_t hidden,
                                           int64_t inter) {
    return (mm_ref_attrs){
        .expert_num = experts, .world_size = ranks, .topk = topk, .hidden = hidden, .inter = inter};
}

#endif
