/* SPDX-License-Identifier: Apache-2.0 */
/* tools/bench/bench_ffn.h: the pieces of `megamoe bench ffn` that live in their own files: the peak loops
 * (AVX-512 and AMX instructions, compiled with those flags and called only after run-time detection),
 * the streaming-read loop, and the optional oneDNN baseline. */
#ifndef MEGAMOE_TOOLS_BENCH_FFN_H
#define MEGAMOE_TOOLS_BENCH_FFN_H

#include <stddef.h>
#include <stdint.h>

#include "megamoe/dtype.h"

/* A peak loop: runs `iterations` iterations of independent dependency chains of one instruction on
 * registers (or tiles) and returns the operations done (multiply and add counted separately). */
typedef double (*bench_ffn_peak_fn)(int64_t iterations);

/* AVX-512 (call only when mm_cpu_supports(MM_ISA_AVX512)). */
double bench_ffn_peak_vdpbf16ps(int64_t iterations);
double bench_ffn_peak_vpdpbusd(int64_t iterations);
double bench_ffn_peak_fma_f32(int64_t iterations);
/* Reads `bytes` (a multiple of 256, 64-byte aligned) with 64-byte loads; returns a checksum. */
uint64_t bench_ffn_stream_read_avx512(const void *buf, size_t bytes);

/* AMX (call only when mm_cpu_supports(MM_ISA_AMX)). */
double bench_ffn_peak_tdpbf16ps(int64_t iterations);
double bench_ffn_peak_tdpbusd(int64_t iterations);

/* oneDNN matmul with pre-packed weights, for the per-expert GEMMs of the FFN. */
typedef enum bench_dnnl_kind { BENCH_DNNL_BF16, BENCH_DNNL_U8S8S32 } bench_dnnl_kind;

/* 1 when the build found oneDNN. */
int bench_dnnl_available(void);
/* GEMM1 (rows x hidden . hidden x 2I) and GEMM2 (rows x I . I x hidden) of `experts` experts as oneDNN
 * matmuls, weights reordered once into oneDNN's preferred layout, on `threads` OpenMP threads. NULL (with
 * a reason in why) when oneDNN is missing or fails. */
typedef struct bench_dnnl_ffn bench_dnnl_ffn;
bench_dnnl_ffn *bench_dnnl_ffn_create(bench_dnnl_kind kind, int64_t rows, int64_t hidden, int64_t inter,
                                      int64_t experts, int threads, char *why, size_t why_size);
/* Runs the two GEMMs of expert e (modulo the count) and returns their seconds; 0, or -1 with why. */
int bench_dnnl_ffn_run(bench_dnnl_ffn *d, int64_t e, double *seconds, char *why, size_t why_size);
void bench_dnnl_ffn_free(bench_dnnl_ffn *d);

#endif

/* ---- baselines (bench_ffn_baselines.c) ---- */

/* Best operations per second of `fn` run by `threads` threads at once (each its own chains), over
 * `samples` runs of about `seconds` each. */
double bench_ffn_peak_rate(bench_ffn_peak_fn fn, int threads, double seconds, int samples);
/* Median bytes per second of reading `bytes` of `buf` with `threads` threads (contiguous slices). */
double bench_ffn_stream_rate(const void *buf, size_t bytes, int threads, int samples);

/* ---- the expert FFN (bench_ffn_expert.c) ---- */

/* The formats of the FFN: activation dtype x weight dtype, the same for both GEMMs. */
typedef enum bench_ffn_format {
    FFN_BF16,
    FFN_INT8,
    FFN_INT8_INT4,
    FFN_MXFP8,
    FFN_MXFP8_MXFP4,
    FFN_MXFP4,
    FFN_A16_FP8B,  /* BF16 activations x FP8 E4M3 with 128 x 128 F32 block scales (DeepSeek-V3) */
    FFN_A16_MXFP4, /* BF16 activations x MXFP4 (gpt-oss experts) */
    FFN_A16_UINT4, /* BF16 activations x UINT4 with group-128 scales and zeros (AWQ / GPTQ) */
    FFN_FORMAT_COUNT
} bench_ffn_format;

const char *bench_ffn_format_name(bench_ffn_format f);
/* 1 for INT formats (compared with vpdpbusd), 0 for BF16 and MX (compared with vdpbf16ps). */
int bench_ffn_format_is_int(bench_ffn_format f);
/* The format's activation and weight dtypes (both GEMMs), for the kernel lines of the header. */
void bench_ffn_format_dtypes(bench_ffn_format f, mm_dtype *activation, mm_dtype *weight);

typedef struct bench_ffn_expert bench_ffn_expert;

/* `experts` experts of one format (hidden H, intermediate I), weights of random codes packed for the
 * gemm layer (GEMM1 gate/up interleaved), and inputs for up to max_rows rows. NULL when out of memory. */
bench_ffn_expert *bench_ffn_expert_create(bench_ffn_format format, int64_t hidden, int64_t inter,
                                          int64_t experts, int64_t max_rows, uint64_t seed);
void bench_ffn_expert_free(bench_ffn_expert *x);
/* Bytes of weights one FFN reads (both packed matrices, with their scales). */
double bench_ffn_expert_weight_bytes(const bench_ffn_expert *x);
/* Experts a rotation needs so that `bytes` of weights lie between two uses of one expert. */
int64_t bench_ffn_experts_for_bytes(bench_ffn_format format, int64_t hidden, int64_t inter, double bytes);

/* Kernel choice for one FFN run: the registry's (isa < 0) or one kernel forced on both GEMMs. */
typedef struct bench_ffn_choice {
    int isa;
    const struct mm_gemm_kernel *k1, *k2; /* NULL with isa < 0 */
} bench_ffn_choice;

/* Levels: -1 the registry's choice (auto), else a kernel kind (mm_kernel_kind of gemm/kernel_profiles.h:
 * ref, avx512, avx512-few, amx, amx-few). The kernel a level has for this format (0), or -1 when the
 * hardware lacks it or the format has no such kernel. */
int bench_ffn_choose(const bench_ffn_expert *x, int level, bench_ffn_choice *out);
/* The ISA level of a kind. */
int bench_ffn_level_isa(int level);
/* Name of the kernel GEMM1 uses with `rows` rows under the choice. */
const char *bench_ffn_kernel_name(const bench_ffn_expert *x, const bench_ffn_choice *c, int64_t rows);

/* One FFN on expert `e`: GEMM1, SwiGLU + quantization to the activation format, GEMM2. Fills the
 * seconds spent in the two GEMMs. Returns 0, or -1 with the library's message in why. */
int bench_ffn_expert_run(bench_ffn_expert *x, int64_t e, int64_t rows, const bench_ffn_choice *c,
                         double *total_seconds, double *gemm_seconds, char *why, size_t why_size);

/* ---- the roofline of --plot (bench_ffn_plot.c) ---- */

/* One measured (format, hidden, rows) point of the registry's kernels, N threads. */
typedef struct bench_ffn_point {
    bench_ffn_format format;
    int64_t hidden, rows;
    double intensity; /* FLOPs per weight byte */
    double flops;     /* achieved FLOP/s */
} bench_ffn_point;

typedef struct bench_ffn_plot {
    const char *path;
    int threads;
    double peak_bf16, peak_int8, bandwidth; /* N threads: ops/s, ops/s, bytes/s; 0 when not measured */
    int n_hidden;                           /* markers name H when several were measured */
    bench_ffn_point points[512];
    int count;
} bench_ffn_plot;

/* Adds a point (ignored when the table is full). */
void bench_ffn_plot_add(bench_ffn_plot *p, bench_ffn_point point);
/* Writes the roofline SVG; 0, or -1 after one error line. */
int bench_ffn_plot_write(const bench_ffn_plot *p);
