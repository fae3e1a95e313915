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

#include <stdint.h>
#include <string.h>

typedef struct amx_tile_config {
    uint8_t palette;
    uint8_t start_row;
    uint8_t reserved[14];
    uint16_t bytes_per_row[16];
    uint8_t rows[16];
} amx_tile_config;

_Static_assert(sizeof(amx_tile_config) == 64, "the AMX tile configuration is 64 bytes");

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

#endif
