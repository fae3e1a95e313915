/* SPDX-License-Identifier: Apache-2.0 */
/* tests/test_tables.c: the invariants of the two fact tables every other part reads: the format table
 * (src/format/format_table.h, with the decode tables built from it) and the MegaMoE scenario table
 * (src/ops/mega_moe/scenario_table.h). Both are walked row by row, so a new format or scenario is
 * checked here without editing this file. */
#include <math.h>
#include <string.h>

#include "format/decode_tables.h"
#include "format/format_table.h"
#include "format/mx_code_table.h"
#include "megamoe/formats.h"
#include "ops/mega_moe/path.h"
#include "ops/mega_moe/tolerance.h"
#include "testlib.h"

static int same_f32(float a, float b) {
    return (isnan(a) && isnan(b)) || memcmp(&a, &b, sizeof a) == 0;
}

static void check_format_row(mm_dtype d) {
    const mm_format_traits *t = mm_format_traits_of(d);
    CHECK(t != NULL && t->name != NULL);
    if (!t || !t->name) return;
    /* names resolve back and are unique (the safetensors spellings too) */
    CHECK_EQ_INT(mm_dtype_from_name(t->name), d);
    if (t->safetensors) CHECK_EQ_INT(mm_dtype_from_name(t->safetensors), d);
    for (int e = MM_DTYPE_INVALID + 1; e < (int)d; e++) {
        CHECK(strcmp(mm_format_table[e].name, t->name) != 0);
        if (t->safetensors && mm_format_table[e].safetensors)
            CHECK(strcmp(mm_format_table[e].safetensors, t->safetensors) != 0);
    }
    /* size and packing */
    CHECK(t->bits == 4 || t->bits == 8 || t->bits == 16 || t->bits == 32 || t->bits == 64);
    CHECK_EQ_INT(t->per_byte, t->bits < 8 ? 8 / t->bits : 1);
    CHECK_EQ_INT(mm_format_is_nibble(d), t->bits == 4);
    CHECK_EQ_INT(mm_dtype_row_bytes(d, 7), t->bits < 8 ? 4 : 7 * t->bits / 8);
    /* scales: MX element types have 32-element E8M0 blocks, integer quantization an F32 per row */
    CHECK(t->scale_dtype == MM_DTYPE_INVALID || mm_format_traits_of(t->scale_dtype) != NULL);
    CHECK_EQ_INT(t->block_size, t->scale_dtype == MM_DTYPE_E8M0 ? MM_MX_BLOCK : 1);
    CHECK(!(mm_format_is_mx(d) && mm_format_is_int_quant(d)));
    CHECK(mm_format_is_mx(d) || t->mx_emax <= 0); /* only MX elements (and the carried E1M2: 0) have one */
    if (mm_format_is_mx(d)) {
        CHECK(t->to_f32 && t->from_f32);
        const mm_mx_code_table *code_table = mm_mx_code_table_of(d);
        CHECK(code_table != NULL);
        CHECK(t->mx_emax > 0 && t->mx_emax - t->mx_min_exp + 1 <= MM_MX_TABLE_MAX_EXPS);
        if (code_table) CHECK(code_table->min_exp == t->mx_min_exp && code_table->max_exp == t->mx_emax);
        /* the kernels' BF16 scale window: the smallest nonzero and largest finite magnitudes stay normal
         * BF16 inside it and leave the normal range one byte outside it */
        double lo = INFINITY, hi = 0.0;
        for (uint32_t code = 0; code < (uint32_t)t->decode_entries; code++) {
            double v = fabs((double)t->to_f32(code));
            if (v > 0.0 && isfinite(v) && v < lo) lo = v;
            if (isfinite(v) && v > hi) hi = v;
        }
        int s_lo = mm_format_mx_bf16_scale_lowest(d), s_hi = mm_format_mx_bf16_scale_highest(d);
        CHECK(ldexp(lo, s_lo - 127) >= 0x1p-126 && ldexp(lo, s_lo - 128) < 0x1p-126);
        CHECK(ldexp(hi, s_hi - 127) < 0x1p128 && ldexp(hi, s_hi - 126) >= 0x1p128);
        CHECK(mm_format_traits_of(MM_DTYPE_E8M0)->decode_entries == 256);
    }
    /* decode tables: one entry per code, the decoder's value; the process-wide tables agree */
    CHECK(t->decode_entries == 0 || t->decode_entries == (1 << t->bits));
    float table[MM_DECODE_TABLE_MAX];
    CHECK_EQ_INT(mm_format_decode_table(d, table), t->decode_entries);
    const float *lut = mm_format_lut_f32(d);
    const uint16_t *lut16 = mm_format_lut_bf16(d);
    CHECK((lut != NULL) == (t->decode_entries > 0));
    CHECK((lut16 != NULL) == mm_format_is_mx(d));
    if (!t->decode_entries) return;
    CHECK(t->to_f32 != NULL);
    for (int code = 0; code < 256; code++) {
        float v = t->to_f32((uint32_t)(code & (t->decode_entries - 1)));
        if (code < t->decode_entries) CHECK(same_f32(table[code], v));
        CHECK(same_f32(lut[code], v));
        if (lut16) CHECK(same_f32(mm_bf16_to_f32(lut16[code]), v)); /* exact in BF16 */
        if (mm_format_is_int_quant(d)) CHECK(v == floorf(v) && fabsf(v) <= 128.0f);
    }
}

/* every row of the scenario table */
static void check_scenario_row(int i) {
    const mm_moe_scenario_row *r = &mm_moe_scenario_table[i];
    CHECK(r->name && r->spec_name && r->label);
    /* names: unique over both spellings, and both resolve to the row */
    for (int j = 0; j < i; j++) {
        const mm_moe_scenario_row *o = &mm_moe_scenario_table[j];
        CHECK(strcmp(r->name, o->name) != 0 && strcmp(r->name, o->spec_name) != 0);
        CHECK(strcmp(r->spec_name, o->name) != 0 && strcmp(r->spec_name, o->spec_name) != 0);
        CHECK(r->weight_dtype != o->weight_dtype || r->dispatch_dtype != o->dispatch_dtype);
    }
    CHECK(mm_moe_scenario_by_name(r->name) == r);
    CHECK(mm_moe_scenario_by_name(r->spec_name) == r);
    const char *kind = mm_moe_scenario_name(r->kind);
    CHECK(strcmp(kind, "invalid") != 0 && strncmp(r->label, kind, strlen(kind)) == 0);
    /* dtypes: all in the format table, and consistent with the dispatch mode */
    CHECK(mm_format_traits_of(r->weight_dtype) != NULL);
    CHECK(mm_format_traits_of(r->gemm1_input) != NULL && mm_format_traits_of(r->gemm2_input) != NULL);
    CHECK(mm_format_is_mx(r->weight_dtype) || mm_format_is_int_quant(r->weight_dtype) ||
          r->weight_dtype == MM_DTYPE_BF16 || (r->block_scales && r->weight_dtype == MM_DTYPE_UINT4));
    /* block-scaled weights are the A16 weight-only rows: BF16 activations, FP8 E4M3 or UINT4 codes */
    if (r->block_scales)
        CHECK(r->dispatch_dtype == MM_DTYPE_INVALID &&
              (r->weight_dtype == MM_DTYPE_FP8_E4M3FN || r->weight_dtype == MM_DTYPE_UINT4));
    switch (r->dispatch_quant_mode) {
    case 0: CHECK_EQ_INT(r->dispatch_dtype, MM_DTYPE_INVALID); break;
    case 2: CHECK(mm_format_is_int_quant(r->dispatch_dtype)); break;
    case 4: CHECK(mm_format_is_mx(r->dispatch_dtype)); break;
    default: CHECK(0);
    }
    CHECK_EQ_INT(r->gemm1_input, r->dispatch_dtype == MM_DTYPE_INVALID ? MM_DTYPE_BF16 : r->dispatch_dtype);
    CHECK(mm_dtype_bits(r->gemm2_input) >= 8); /* the GEMM2 input is never 4-bit */
    CHECK(!r->bias || (mm_format_is_int_quant(r->weight_dtype) && mm_format_is_nibble(r->weight_dtype)));
    /* the library's lookups: the pair finds the row, the path is the row's */
    CHECK(mm_moe_scenario_find(r->weight_dtype, r->dispatch_dtype) == r);
    mm_moe_path p;
    mm_error err;
    mm_error_clear(&err);
    CHECK_OK(mm_moe_path_make(r->weight_dtype, r->dispatch_dtype, MM_DTYPE_INVALID, "routed", &p, &err),
             &err);
    CHECK(p.scenario == r->kind && p.input_dtype == r->gemm1_input && p.gemm2_dtype == r->gemm2_input);
    /* tolerances: positive, the test metric is what tolerance.h returns, quantized paths are looser than
     * A16W16, and for one weight dtype a narrower input is never held to a tighter bound */
    CHECK(r->test_tolerance > 0.0 && r->tolerance_relative > 0.0 && r->tolerance_rms > 0.0);
    CHECK(mm_mega_moe_tolerance_one(r->weight_dtype, r->dispatch_dtype) == r->test_tolerance);
    const mm_moe_scenario_row *base = mm_moe_scenario_by_name("a16w16");
    CHECK(base && r->test_tolerance >= base->test_tolerance && r->tolerance_rms >= base->tolerance_rms);
    for (int j = 0; j < mm_moe_scenario_count; j++) {
        const mm_moe_scenario_row *o = &mm_moe_scenario_table[j];
        if (o->weight_dtype == r->weight_dtype &&
            mm_dtype_bits(o->gemm1_input) < mm_dtype_bits(r->gemm1_input)) /* no dispatch dtype: BF16 */
            CHECK(o->test_tolerance >= r->test_tolerance);
    }
}

int main(void) {
    for (int d = MM_DTYPE_INVALID + 1; d < MM_DTYPE_COUNT; d++) check_format_row((mm_dtype)d);
    CHECK(mm_format_traits_of(MM_DTYPE_INVALID) == NULL && mm_format_traits_of(MM_DTYPE_COUNT) == NULL);
    CHECK(!mm_format_is_mx(MM_DTYPE_INVALID) && mm_format_lut_f32(MM_DTYPE_COUNT) == NULL);

    CHECK(mm_moe_scenario_count >= 1);
    for (int i = 0; i < mm_moe_scenario_count; i++) check_scenario_row(i);
    /* every weight x dispatch pair outside the table is refused by the library */
    for (int w = MM_DTYPE_INVALID; w < MM_DTYPE_COUNT; w++)
        for (int x = MM_DTYPE_INVALID; x < MM_DTYPE_COUNT; x++) {
            if (mm_moe_scenario_find((mm_dtype)w, (mm_dtype)x)) continue;
            mm_moe_path p;
            mm_error err;
            mm_error_clear(&err);
            CHECK_STATUS(mm_moe_path_make((mm_dtype)w, (mm_dtype)x, MM_DTYPE_INVALID, "routed", &p, &err),
                         MM_ERR_INVALID_ARGUMENT, &err);
        }
    CHECK(mm_moe_scenario_by_name("a8w8") == NULL && mm_moe_scenario_by_name(NULL) == NULL);
    return mm_test_finish("test_tables");
}
