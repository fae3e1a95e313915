/* format/mx_code_table.c: builds the MX element code tables once per process (see mx_code_table.h). */
#include "format/mx_code_table.h"

#include <pthread.h>

#include "format/convert.h"

static mm_mx_code_table tables[3];
static pthread_once_t tables_once = PTHREAD_ONCE_INIT;

static const mm_dtype table_elems[3] = {MM_DTYPE_FP8_E4M3FN, MM_DTYPE_FP8_E5M2, MM_DTYPE_FP4_E2M1};
/* min_exp: the exponent of half the smallest subnormal; anything below rounds to 0. */
static const int table_min_exp[3] = {-10, -17, -2};
static const int table_max_exp[3] = {8, 15, 2};

static void build_tables(void) {
    for (int t = 0; t < 3; t++) {
        mm_mx_code_table *table = &tables[t];
        table->min_exp = table_min_exp[t];
        table->max_exp = table_max_exp[t];
        table->sign_bit = table_elems[t] == MM_DTYPE_FP4_E2M1 ? 0x08 : 0x80;
        for (int e = table->min_exp; e <= table->max_exp; e++)
            for (uint32_t m = 0; m < 128; m++)
                table->code[e - table->min_exp][m] =
                    mm_encode_scaled(table_elems[t], ((uint32_t)(e + 127) << 23) | (m << 16), 0);
    }
}

const mm_mx_code_table *mm_mx_code_table_of(mm_dtype elem) {
    int t;
    switch (elem) {
    case MM_DTYPE_FP8_E4M3FN: t = 0; break;
    case MM_DTYPE_FP8_E5M2: t = 1; break;
    case MM_DTYPE_FP4_E2M1: t = 2; break;
    default: return NULL;
    }
    pthread_once(&tables_once, build_tables);
    return &tables[t];
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
