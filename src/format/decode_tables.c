/* SPDX-License-Identifier: Apache-2.0 */
/* format/decode_tables.c: the decode tables of format/decode_tables.h, filled from the format table's
 * exact scalar decoders (one set of decoders, so a table is never a second source of values). */
#include "format/decode_tables.h"

#include <pthread.h>

#include "format/format_table.h"
#include "megamoe/formats.h"

int mm_format_decode_table(mm_dtype dtype, float *table) {
    const mm_format_traits *t = mm_format_traits_of(dtype);
    if (!t || !t->decode_entries || !table) return 0;
    for (int code = 0; code < t->decode_entries; code++) table[code] = t->to_f32((uint32_t)code);
    return t->decode_entries;
}

static pthread_once_t luts_once = PTHREAD_ONCE_INIT;
static float lut_f32[MM_DTYPE_COUNT][256];
static uint16_t lut_bf16[MM_DTYPE_COUNT][256];

static void build_luts(void) {
    for (int d = MM_DTYPE_INVALID + 1; d < MM_DTYPE_COUNT; d++) {
        const mm_format_traits *t = &mm_format_table[d];
        if (!t->decode_entries) continue;
        for (int code = 0; code < 256; code++) {
            lut_f32[d][code] = t->to_f32((uint32_t)(code & (t->decode_entries - 1)));
            lut_bf16[d][code] = mm_f32_to_bf16(lut_f32[d][code]);
        }
    }
}

const float *mm_format_lut_f32(mm_dtype dtype) {
    const mm_format_traits *t = mm_format_traits_of(dtype);
    if (!t || !t->decode_entries) return NULL;
    pthread_once(&luts_once, build_luts);
    return lut_f32[dtype];
}

const uint16_t *mm_format_lut_bf16(mm_dtype dtype) {
    if (!mm_format_is_mx(dtype)) return NULL;
    pthread_once(&luts_once, build_luts);
    return lut_bf16[dtype];
}
