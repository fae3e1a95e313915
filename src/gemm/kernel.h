/* gemm/kernel.h: the one micro-kernel signature and the kernel descriptor.
 *
 * A micro-kernel computes one register tile: up to MR rows of activations times one packed panel of
 * MM_GEMM_NR weight columns, reduced over the whole K, and writes the F32 results (it never reads C).
 * It handles partial tiles itself (m < MR rows, n < NR columns): it must not read activation rows at or
 * beyond m, and must not write outside the m x n corner of C. It contains no loop over tiles, groups or
 * experts: those belong to the framework (grouped.c). Which scalars it applies after the reduction is
 * fixed by the format pair (docs/gemm.md), so all kernels of one pair agree: bit for bit for INT pairs,
 * within the documented tolerance for float pairs. */
#ifndef MEGAMOE_GEMM_KERNEL_H
#define MEGAMOE_GEMM_KERNEL_H

#include <stdint.h>

#include "core/cpu.h"
#include "gemm/packed.h"

/* Largest MR of any kernel (sizes the framework's scratch tile). */
#define MM_GEMM_MR_MAX 16

typedef struct mm_ukernel_args {
    int64_t k;                   /* logical reduction length (the panel is padded beyond it with zeros) */
    int m;                       /* valid rows, 1..MR */
    int n;                       /* valid columns, 1..NR */
    mm_dtype a_dtype;            /* activation element type */
    const uint8_t *a;            /* first activation row of the tile */
    int64_t a_stride;            /* bytes between activation rows */
    const float *a_row_scales;   /* I8: the tile's m row scales */
    const uint8_t *a_mx_scales;  /* MX: E8M0 scales of the tile's first row, ceil(k/32) per row */
    int64_t a_mx_stride;         /* bytes between scale rows */
    mm_dtype w_dtype;            /* weight element type */
    const uint8_t *b;            /* the packed panel */
    const float *col_scale;      /* I8/INT4: NR scales of the panel's columns */
    const float *col_offset;     /* INT4: NR offsets */
    const int32_t *col_sum_x128; /* I8/INT4: NR corrections */
    const float *b_mx_scale;     /* MX: [k_block][NR] F32 scales of the panel */
    float *c;                    /* output element (row 0, column 0) of the tile */
    int64_t ldc;                 /* floats between output rows */
} mm_ukernel_args;

typedef void (*mm_ukernel_fn)(const mm_ukernel_args *args);

typedef struct mm_gemm_kernel {
    const char *name; /* format pair, ISA and tile, e.g. "bf16xbf16_avx512_8x32" */
    mm_isa isa;
    int mr; /* rows per tile; NR is always MM_GEMM_NR */
    mm_ukernel_fn fn;
} mm_gemm_kernel;

#endif
