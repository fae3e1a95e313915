/* gemm/format_luts.c: decode tables filled with pthread_once (read-only afterwards, so threads share them).
 */
#include "gemm/format_luts.h"

#include <pthread.h>
#include <stdint.h>

#include "megamoe/formats.h"

static pthread_once_t luts_once = PTHREAD_ONCE_INIT;
static float lut_e4m3[256], lut_e5m2[256], lut_e8m0[256], lut_fp4[256];
static uint16_t bf16_e4m3[256], bf16_e5m2[256], bf16_fp4[256];

static void build_luts(void) {
    for (int code = 0; code < 256; code++) {
        lut_e4m3[code] = mm_fp8_e4m3fn_to_f32((uint8_t)code);
        lut_e5m2[code] = mm_fp8_e5m2_to_f32((uint8_t)code);
        lut_e8m0[code] = mm_e8m0_to_f32((uint8_t)code);
        lut_fp4[code] = mm_fp4_e2m1_to_f32((uint8_t)(code & 0x0F));
        bf16_e4m3[code] = mm_f32_to_bf16(lut_e4m3[code]);
        bf16_e5m2[code] = mm_f32_to_bf16(lut_e5m2[code]);
        bf16_fp4[code] = mm_f32_to_bf16(lut_fp4[code]);
    }
}

const float *mm_gemm_lut(mm_dtype dtype) {
    pthread_once(&luts_once, build_luts);
    switch (dtype) {
    case MM_DTYPE_FP8_E4M3FN: return lut_e4m3;
    case MM_DTYPE_FP8_E5M2: return lut_e5m2;
    case MM_DTYPE_E8M0: return lut_e8m0;
    case MM_DTYPE_FP4_E2M1: return lut_fp4;
    default: return NULL;
    }
}

const uint16_t *mm_gemm_lut_bf16(mm_dtype dtype) {
    pthread_once(&luts_once, build_luts);
    switch (dtype) {
    case MM_DTYPE_FP8_E4M3FN: return bf16_e4m3;
    case MM_DTYPE_FP8_E5M2: return bf16_e5m2;
    case MM_DTYPE_FP4_E2M1: return bf16_fp4;
    default: return NULL;
    }
}
