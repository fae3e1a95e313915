/* SPDX-License-Identifier: Apache-2.0 */
/* tools/bench/bench_ffn_amx_avx512.c: the AMX peak loops of `bench ffn` (tdpbf16ps, tdpbusd), compiled with
 * the AVX-512 flags plus a target pragma for the tile instructions; called only after
 * mm_cpu_supports(MM_ISA_AMX), which also obtained Linux's tile permission for the process.
 *
 * Four accumulator tiles (tmm0..3) fed by two A tiles (tmm4, 5) and two B tiles (tmm6, 7), all 16 rows
 * x 64 bytes, the largest shape: each instruction is 16 x 16 x 32 BF16 (or 16 x 16 x 64 INT8) products
 * that do not depend on the previous instruction's result. */
#pragma GCC target("amx-tile,amx-bf16,amx-int8")
#include <immintrin.h>
#include <stdint.h>
#include <string.h>

#include "bench/bench_ffn.h"

typedef struct tile_config {
    uint8_t palette, start_row, reserved[14];
    uint16_t bytes_per_row[16];
    uint8_t rows[16];
} tile_config;

static volatile float sink;

static void configure_tiles(void) {
    tile_config cfg;
    memset(&cfg, 0, sizeof cfg);
    cfg.palette = 1;
    for (int t = 0; t < 8; t++) cfg.bytes_per_row[t] = 64, cfg.rows[t] = 16;
    /* GCC's ldtilecfg asm declares an 8-byte operand only: without this barrier the stores to the rest
     * of the constant configuration are dropped as dead and ldtilecfg faults on the invalid tiles. */
    __asm__ volatile("" : : "r"(&cfg) : "memory");
    _tile_loadconfig(&cfg);
}

/* Operands: small values so that nothing overflows; their content does not change the speed. */
static void load_operands(uint8_t *buf) {
    memset(buf, 0x01, 1024);
    _tile_loadd(4, buf, 64);
    _tile_loadd(5, buf, 64);
    _tile_loadd(6, buf, 64);
    _tile_loadd(7, buf, 64);
    _tile_zero(0);
    _tile_zero(1);
    _tile_zero(2);
    _tile_zero(3);
}

static void finish(uint8_t *buf) {
    _tile_stored(0, buf, 64);
    _tile_release();
    float v;
    memcpy(&v, buf, sizeof v);
    sink = v;
}

/* `iterations` rounds of the four independent tile instructions, tdpbf16ps (16 x 16 x 32 BF16 products
 * each) or, with int8, tdpbusd (16 x 16 x 64 INT8 products); returns the operations done. */
static double tile_peak(int64_t iterations, int int8) {
    _Alignas(64) uint8_t buf[1024];
    configure_tiles();
    load_operands(buf);
    if (int8)
        for (int64_t i = 0; i < iterations; i++) {
            _tile_dpbusd(0, 4, 6);
            _tile_dpbusd(1, 4, 7);
            _tile_dpbusd(2, 5, 6);
            _tile_dpbusd(3, 5, 7);
        }
    else
        for (int64_t i = 0; i < iterations; i++) {
            _tile_dpbf16ps(0, 4, 6);
            _tile_dpbf16ps(1, 4, 7);
            _tile_dpbf16ps(2, 5, 6);
            _tile_dpbf16ps(3, 5, 7);
        }
    finish(buf);
    return (double)iterations * 4 * 16 * 16 * (int8 ? 64 : 32) * 2;
}

double bench_ffn_peak_tdpbf16ps(int64_t iterations) {
    return tile_peak(iterations, 0);
}

double bench_ffn_peak_tdpbusd(int64_t iterations) {
    return tile_peak(iterations, 1);
}
