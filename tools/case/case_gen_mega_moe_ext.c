/* SPDX-License-Identifier: Apache-2.0 */
/* tools/case/case_gen_mega_moe_ext.c: the weight tensors `megamoe case-gen mega-moe-ext` adds to those of a
 * mega_moe case (op mega_moe_ext, docs/weight_formats.md): F32 block scales (count, ceil(N/bn),
 * ceil(K/bk)) for FP8 E4M3 and UINT4 weights fed BF16 activations, U8 zero points of the same shape for
 * UINT4, and with --bias a bias1 / bias2 for every weight format. Magnitudes keep the outputs O(1) like
 * the seed generator's: w' = (q - z) s with |w'| about 1 / (3 sqrt(K)). */
#include <math.h>
#include <stdlib.h>

#include "case/case_gen_mega_moe_ext.h"
#include "common/demo_data.h"
#include "format/format_table.h"
#include "megamoe/formats.h"

static double uniform(uint64_t *s, double lo, double hi) {
    return lo + (hi - lo) * (double)(cli_rand_u64(s) >> 11) * (1.0 / 9007199254740992.0);
}

int case_gen_ext_group(const gen_options *o, const mm_moe_scenario_row *scenario, int64_t count, int which,
                       int64_t N, int64_t K, const case_gen_ext_buffers *b, uint64_t *s, mm_tensor *t,
                       int *has, void **keep, int *nkeep) {
    mm_dtype wt = scenario->weight_dtype;
    if (scenario->block_scales) {
        int64_t nb = (N + o->bn - 1) / o->bn, kb = (K + o->bk - 1) / o->bk, n = count * nb * kb;
        float *scales = malloc((size_t)n * 4 + 4);
        uint8_t *zeros = malloc((size_t)n + 1);
        if (!scales || !zeros) {
            free(scales);
            free(zeros);
            return 0;
        }
        keep[(*nkeep)++] = scales;
        keep[(*nkeep)++] = zeros;
        int uint4 = wt == MM_DTYPE_UINT4; /* codes 0..15 around zero points 4..11: |q - z| up to 11 */
        for (int64_t i = 0; i < n; i++) {
            scales[i] = (float)(uniform(s, 0.5, 1.5) / (sqrt((double)K) * (uint4 ? 5.0 : 3.0)));
            zeros[i] = (uint8_t)(uint4 ? 4 + cli_rand_u64(s) % 8 : 0);
        }
        int64_t shape[3] = {count, nb, kb};
        t[2 + which] = mm_tensor_make(MM_DTYPE_F32, 3, shape, scales);
        has[2 + which] = 1;
        if (uint4) {
            t[6 + which] = mm_tensor_make(MM_DTYPE_U8, 3, shape, zeros);
            has[6 + which] = 1;
        }
    } else if (mm_format_is_int_quant(wt)) {
        int64_t shape[2] = {count, N};
        t[2 + which] = mm_tensor_make(MM_DTYPE_F32, 2, shape, b->scales);
        has[2 + which] = 1;
    } else if (mm_format_is_mx(wt)) {
        int64_t shape[4] = {count, N, (K + 63) / 64, 2};
        t[2 + which] = mm_tensor_make(MM_DTYPE_E8M0, 4, shape, b->mx);
        has[2 + which] = 1;
    }
    if (scenario->bias || o->bias) {
        if (!scenario->bias) /* INT4 keeps the bias its formula needs; any other format: drawn */
            for (int64_t i = 0; i < count * N; i++) b->bias[i] = (float)uniform(s, -0.5, 0.5);
        int64_t shape[2] = {count, N};
        t[4 + which] = mm_tensor_make(MM_DTYPE_F32, 2, shape, b->bias);
        has[4 + which] = 1;
    }
    return 1;
}
