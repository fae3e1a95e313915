/* SPDX-License-Identifier: Apache-2.0 */
/* gemm/kernel.h: the one micro-kernel signature and the kernel descriptor.
 *
 * A micro-kernel computes one register tile: up to MR rows of activations times one packed panel of
 * MM_GEMM_NR weight columns, reduced over one block [k_begin, k_end) of K. The framework walks K in
 * blocks of the kernel's kc (MM_GEMM_KC by default, a multiple of it for AMX kernels) so that the
 * panel's slice stays in cache while the M tiles stream past; between
 * blocks the running accumulators (F32 or INT32, the kernel's choice) live in `partial`. The first
 * block starts from zero, the last one applies the format's scalars and writes the F32 results to C
 * (the kernel never reads C). A float kernel continues the same chain of additions from `partial`, so
 * its summation order does not depend on the block size.
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
#define MM_GEMM_MR_MAX 32
/* K per block: a multiple of every k_group and of the MX block (32); 256 BF16 x 32 columns = 16 KiB of
 * panel, half of L1. */
#define MM_GEMM_KC 256

typedef struct mm_ukernel_args {
    int64_t k;                   /* logical reduction length (the panel is padded beyond it with zeros) */
    int64_t k_begin, k_end;      /* this call's block of K; k_begin is a multiple of MM_GEMM_KC */
    int first, last;             /* first / last block of K for this tile */
    void *partial;               /* MR x NR 32-bit accumulators carried between blocks (row-major) */
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
    const uint8_t *b_block;      /* with prepare_panel: the prepared K block [k_begin, k_end), else NULL */
    const float *col_scale;      /* I8/INT4: NR scales of the panel's columns */
    const float *col_offset;     /* INT4: NR offsets */
    const int32_t *col_sum_x128; /* I8/INT4: NR corrections */
    const float *b_mx_scale;     /* MX: [k_block][NR] F32 scales of the panel */
    const uint8_t *b_mx_e8m0;    /* MX: the same scales as E8M0 bytes */
    const float *b_block_scale;  /* weight-only block scales: [k / block_k][NR] F32 scales of the panel */
    const uint8_t *b_block_zero; /* UINT4: the zero points, same layout */
    int64_t block_k;             /* K per block scale */
    float *c;                    /* output element (row 0, column 0) of the tile */
    int64_t ldc;                 /* floats between output rows */
    /* Hints, never needed for the result. prefetch: cache lines of the panel's next K block (in the last
     * K block, of the next panel's first one when the task goes on to it) for this tile to fetch into L2
     * while it computes (grouped.c splits the block among an M-block's tiles, so that the weights stream
     * from memory while the tiles after the first compute; 0 lines: none).
     * streams_weights: 1 when the task has one M tile, so that its prepare_panel or kernel is the loop
     * that streams the weights (nobody fetches the next block for it). */
    const uint8_t *prefetch;
    int64_t prefetch_lines;
    int streams_weights;
    /* With a kernel's pairs_panels (below): the arguments of the next panel for the same rows and K
     * block, which this call computes too (NULL: this panel alone). */
    const struct mm_ukernel_args *next_panel;
} mm_ukernel_args;

typedef void (*mm_ukernel_fn)(const mm_ukernel_args *args);

/* Optional preparation steps, for kernels whose formats are cheaper to decode once than per tile
 * (BLIS packs both operands; here only formats that need decoding are prepared):
 * - prepare_rows converts one activation row into BF16 (K padded with zeros to an even count) before
 *   any tile runs; the kernel then sees a_dtype BF16 and no activation scales. A kernel may prepare
 *   another layout of its own (prepared_row_bytes below), which only it reads.
 * - prepare_panel converts the K block [k_begin, k_end) of the panel (args->b) into `block`, once per
 *   (panel, K block) of a task, before the M tiles run over it; the kernel reads it as args->b_block. */
typedef void (*mm_gemm_prepare_rows_fn)(mm_dtype a_dtype, const uint8_t *row, const uint8_t *mx_scales,
                                        int64_t k, uint16_t *out);
typedef void (*mm_gemm_prepare_panel_fn)(const mm_ukernel_args *args, uint8_t *block);

/* Bytes of the prepared block buffer the framework provides for a kernel: kc x NR elements of at most
 * 2 bytes (BF16). Blocks up to MM_GEMM_KC live on the task's stack, larger ones in the thread's scratch
 * buffer (core/thread_scratch.h). */
#define MM_GEMM_PREPARED_BLOCK_BYTES (MM_GEMM_KC * MM_GEMM_NR * 2)

typedef struct mm_gemm_kernel {
    const char *name; /* format pair, ISA and tile, e.g. "bf16xbf16_avx512_8x32" */
    mm_isa isa;
    int mr; /* rows per tile; NR is always MM_GEMM_NR */
    mm_ukernel_fn fn;
    mm_gemm_prepare_rows_fn prepare_rows;   /* NULL: the kernel reads the activations as given */
    mm_gemm_prepare_panel_fn prepare_panel; /* NULL: the kernel reads the packed panel directly */
    /* K per kernel call, a multiple of MM_GEMM_KC (0: MM_GEMM_KC). Larger blocks amortize a kernel's
     * per-call cost (AMX: tile configuration, C tiles through `partial`) while the panel's block stays
     * in L2. The framework may fall back to MM_GEMM_KC (prepared blocks, when the thread's scratch
     * cannot grow), so a kernel's results must not depend on it: every kernel continues its chains of
     * additions from `partial` exactly. */
    int kc;
    /* With prepare_rows: bytes of one prepared row for K = k (NULL: BF16, K rounded up to even). A kernel
     * whose prepared rows are not BF16 (fp4_int_small_avx512.c) says how large they are. */
    int64_t (*prepared_row_bytes)(int64_t k);
    /* > 0: for tasks of at most this many rows (one tile), the kernel computes two neighbouring panels
     * in one call (args->next_panel), so that a decode-sized group has twice the independent accumulator
     * chains (each column's sum keeps its order: the results do not change). 0: one panel per call. */
    int pairs_panels;
    /* 1: the kernel fetches args->prefetch (the general AVX-512 kernels that read the packed panel
     * directly), so grouped.c may give a task of several tiles adjacent panels, each prefetching the next
     * one's first K block. 0: one panel per task of several tiles (one-tile tasks take adjacent panels
     * either way: grouped.c, panels_per_task). */
    int takes_prefetch;
} mm_gemm_kernel;

#endif
