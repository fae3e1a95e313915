/* gemm/format_luts.h: F32 decode tables for the GEMM's narrow formats, built once per process from
 * the exact scalar decoders of megamoe/formats.h (so there is one set of decoders, not two). */
#ifndef MEGAMOE_GEMM_FORMAT_LUTS_H
#define MEGAMOE_GEMM_FORMAT_LUTS_H

#include <stdint.h>

#include "megamoe/dtype.h"

/* 256 entries indexed by the element code (FP8 E4M3FN, FP8 E5M2, E8M0; FP4 E2M1 uses entries 0..15),
 * or NULL for other dtypes. */
const float *mm_gemm_lut(mm_dtype dtype);
/* The same values as BF16 bit patterns (exact: every FP8/FP4 value is a BF16 value), for FP8 E4M3FN,
 * FP8 E5M2 and FP4 E2M1 (entries 0..15 repeated to 256), or NULL. */
const uint16_t *mm_gemm_lut_bf16(mm_dtype dtype);

#endif
