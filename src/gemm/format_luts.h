/* gemm/format_luts.h: F32 decode tables for the GEMM's narrow formats, built once per process from
 * the exact scalar decoders of megamoe/formats.h (so there is one set of decoders, not two). */
#ifndef MEGAMOE_GEMM_FORMAT_LUTS_H
#define MEGAMOE_GEMM_FORMAT_LUTS_H

#include "megamoe/dtype.h"

/* 256 entries indexed by the element code (FP8 E4M3FN, FP8 E5M2, E8M0; FP4 E2M1 uses entries 0..15),
 * or NULL for other dtypes. */
const float *mm_gemm_lut(mm_dtype dtype);

#endif
