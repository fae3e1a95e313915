/* SPDX-License-Identifier: Apache-2.0 */
/* format/mx_code_table.c: builds the MX element code tables once per process (see mx_code_table.h). */
#include "format/mx_code_table.h"

#include <pthread.h>

#include "format/convert.h"
#include "format/format_table.h"

/* One table per MX element type of the format table, in table order (slot_of maps a dtype to it). */
#define MAX_MX_ELEMS 4
static mm_mx_code_table tables[MAX_MX_ELEMS];
static signed char slot_of[MM_DTYPE_COUNT];
static pthread_once_t tables_once = PTHREAD_ONCE_INIT;

static void build_tables(void) {
    int n = 0;
    for (int d = 0; d < MM_DTYPE_COUNT; d++) {
        slot_of[d] = -1;
        if (!mm_format_is_mx((mm_dtype)d) || n == MAX_MX_ELEMS) continue;
        const mm_format_traits *f = mm_format_traits_of((mm_dtype)d);
        mm_mx_code_table *table = &tables[n];
        slot_of[d] = (signed char)n++;
        table->min_exp = f->mx_min_exp;
        table->max_exp = f->mx_emax;
        table->sign_bit = mm_format_is_nibble((mm_dtype)d) ? 0x08 : 0x80;
        for (int e = table->min_exp; e <= table->max_exp; e++)
            for (uint32_t m = 0; m < 128; m++)
                table->code[e - table->min_exp][m] =
                    mm_encode_scaled((mm_dtype)d, ((uint32_t)(e + 127) << 23) | (m << 16), 0);
    }
}

const mm_mx_code_table *mm_mx_code_table_of(mm_dtype elem) {
    if (!mm_format_is_mx(elem)) return NULL;
    pthread_once(&tables_once, build_tables);
    return slot_of[elem] >= 0 ? &tables[slot_of[elem]] : NULL;
}

uint8_t mm_mx_encode_element(mm_dtype elem, const mm_mx_code_table *table, uint16_t v, int b) {
    uint8_t sign = (v & 0x8000u) ? table->sign_bit : 0;
    int ev = (v >> 7) & 0xFF;
    /* BF16 subnormals have no implicit bit: exact encoder (rare) */
    if (ev == 0) return mm_encode_scaled(elem, (uint32_t)v << 16, 127 - b);
    int scaled = ev - b; /* unbiased exponent of v * 2^(127 - b) */
    if (scaled < table->min_exp) return sign;
    if (scaled > table->max_exp) return mm_encode_scaled(elem, (uint32_t)v << 16, 127 - b);
    return (uint8_t)(sign | table->code[scaled - table->min_exp][v & 0x7F]);
}
