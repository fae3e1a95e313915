/* SPDX-License-Identifier: Apache-2.0 */
/* gemm/kernels/amx/amx_tiles.h: the AMX tile configuration shared by the AMX micro-kernels (included
 * only by *_avx512.c files, which enable the AMX instructions with a target pragma).
 *
 * Every AMX kernel uses the same five tiles: tmm0 and tmm1 hold the C tile (m rows x 16 F32/INT32
 * columns each, 32 columns together), tmm2 the activations (m rows x 64 bytes), tmm3 and tmm4 the two
 * 16-column halves of the panel slice (16 rows of K pairs or quads x 64 bytes). Configuring the tiles
 * with exactly m rows makes the tile loads read only the tile's valid activation rows. The configuration
 * is loaded at the start of every kernel call, so no state is kept between calls or threads. */
#ifndef MEGAMOE_GEMM_AMX_TILES_H
#define MEGAMOE_GEMM_AMX_TILES_H

#include <immintrin.h>
#include <stdint.h>
#include <string.h>

#include "gemm/kernels/kernels.h"

typedef struct amx_tile_config {
    uint8_t palette;
    uint8_t start_row;
    uint8_t reserved[14];
    uint16_t bytes_per_row[16];
    uint8_t rows[16];
} amx_tile_config;

_Static_assert(sizeof(amx_tile_config) == 64, "the AMX tile configuration is 64 bytes");

/* The short last K step of an AMX kernel, through zero-padded copies of both operands (NaN garbage times
 * a zero weight would not vanish): the m activation rows' a_bytes from a (a_stride apart) into a_tail
 * (64 bytes per row, a_tail_bytes in all), and the panel's b_bytes from b into b_tail (one 16 x 128-byte
 * step of the panel). */
static inline void amx_pad_last_step(const uint8_t *a, int64_t a_stride, int m, size_t a_bytes,
                                     uint8_t *a_tail, size_t a_tail_bytes, const uint8_t *b, size_t b_bytes,
                                     uint8_t b_tail[16 * 128]) {
    memset(a_tail, 0, a_tail_bytes);
    memset(b_tail, 0, 16 * 128);
    for (int r = 0; r < m; r++) memcpy(a_tail + 64 * r, a + r * a_stride, a_bytes);
    memcpy(b_tail, b, b_bytes);
}

/* Tile numbers: macros, not an enum, because the tile intrinsics paste the number into the asm text. */
#define AMX_C0 0
#define AMX_C1 1
#define AMX_A  2
#define AMX_B0 3
#define AMX_B1 4

static inline void amx_tile_config_make(amx_tile_config *cfg, int m) {
    memset(cfg, 0, sizeof *cfg);
    cfg->palette = 1;
    for (int t = AMX_C0; t <= AMX_B1; t++) {
        cfg->bytes_per_row[t] = 64;
        cfg->rows[t] = (uint8_t)(t == AMX_B0 || t == AMX_B1 ? 16 : m);
    }
}

/* Tiles of the 17..32-row (2 x 2) shape: C of rows 0..15 / 16..m-1 times columns 0..15 / 16..31, the two
 * A row halves and the two B column halves (all eight AMX tiles). */
#define T_C00 0
#define T_C01 1
#define T_C10 2
#define T_C11 3
#define T_A0  4
#define T_A1  5
#define T_B0  6
#define T_B1  7

/* Configures the 2 x 2 shape for m rows (17..32) and zeroes its C tiles, or loads them from the
 * partial sums (32 rows x MM_GEMM_NR 4-byte values, F32 or INT32) of the previous K block. The tile
 * intrinsics take literal tile numbers, which these inline bodies supply. */
static inline void amx_tile32_begin(int m, int first, const void *partial) {
    amx_tile_config cfg;
    memset(&cfg, 0, sizeof cfg);
    cfg.palette = 1;
    for (int t = T_C00; t <= T_B1; t++) {
        cfg.bytes_per_row[t] = 64;
        cfg.rows[t] = (uint8_t)(t == T_C10 || t == T_C11 || t == T_A1 ? m - 16 : 16);
    }
    _tile_loadconfig(&cfg);
    if (first) {
        _tile_zero(T_C00);
        _tile_zero(T_C01);
        _tile_zero(T_C10);
        _tile_zero(T_C11);
    } else {
        const char *at = partial;
        const int stride = MM_GEMM_NR * 4;
        _tile_loadd(T_C00, at, stride);
        _tile_loadd(T_C01, at + 64, stride);
        _tile_loadd(T_C10, at + 16 * stride, stride);
        _tile_loadd(T_C11, at + 16 * stride + 64, stride);
    }
}

/* Stores the four C tiles of the 2 x 2 shape at dst, whose rows are row_bytes apart. */
static inline void amx_tile32_store(void *dst, int64_t row_bytes) {
    char *at = dst;
    _tile_stored(T_C00, at, row_bytes);
    _tile_stored(T_C01, at + 64, row_bytes);
    _tile_stored(T_C10, at + 16 * row_bytes, row_bytes);
    _tile_stored(T_C11, at + 16 * row_bytes + 64, row_bytes);
}

#endif
