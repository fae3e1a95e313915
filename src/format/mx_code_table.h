/* SPDX-License-Identifier: Apache-2.0 */
/* format/mx_code_table.h: table-driven element encoding for MX quantization (the hot path).
 *
 * Inside a finite MX group every element is a BF16 value v and the code of v * 2^(127 - b) depends only
 * on v's sign, its 7 mantissa bits and its scaled exponent ev - b. For the few exponents where the
 * result is neither 0 nor impossible, a 128-entry row per exponent holds the code, filled once per
 * process (pthread_once) from mm_encode_scaled itself, so the table path is bit-identical to the
 * exact encoder by construction (and tests/test_format_mx.c checks it exhaustively). */
#ifndef MEGAMOE_FORMAT_MX_CODE_TABLE_H
#define MEGAMOE_FORMAT_MX_CODE_TABLE_H

#include <stdint.h>

#include "megamoe/dtype.h"

#define MM_MX_TABLE_MAX_EXPS 34 /* E5M2: scaled exponents -17 .. 15 */

typedef struct mm_mx_code_table {
    int min_exp;      /* scaled unbiased exponents below this round to (signed) zero */
    int max_exp;      /* = emax: no element of a finite group is scaled above it */
    uint8_t sign_bit; /* 0x80 for FP8, 0x08 for FP4 */
    uint8_t code[MM_MX_TABLE_MAX_EXPS][128];
} mm_mx_code_table;

/* The table of an MX element type (FP8 E4M3FN, FP8 E5M2, FP4 E2M1), or NULL for any other dtype. */
const mm_mx_code_table *mm_mx_code_table_of(mm_dtype elem);

/* Code of BF16 v in a finite group with scale byte b (b <= 254); the same as
 * mm_encode_scaled(elem, v << 16, 127 - b). */
uint8_t mm_mx_encode_element(mm_dtype elem, const mm_mx_code_table *table, uint16_t v, int b);

#endif
