/* SPDX-License-Identifier: Apache-2.0 */
/* tools/run/run_moe.h: `megamoe run` for MegaMoE: presets, scenarios, synthetic data, the per-rank job,
 * the reference check and the trace, shared by the run_moe_*.c files.
 *
 *   run_moe_presets.c  model presets (the scenarios are the rows of ops/mega_moe/scenario_table.h)
 *   run_moe_data.c     seeded weights (per expert, so any rank can rebuild any expert), tokens, routing
 *   run_moe_blocks.c   block-scaled quantization of those weights (FP8 E4M3 / UINT4 with zero points)
 *   run_moe_rank.c     the work of one rank: buffer, weights, timed iterations, the checked sample
 *   run_moe_check.c    the samples against the float64 reference (support/ref), on two threads; metrics
 *   run_moe_trace.c    Chrome / Perfetto JSON trace: setup, stage events, expert batches, flows
 *   run_moe_report.c   the banner, the table rows, the notes
 *   run_moe_mpi.c      the launched driver (mpi: one rank per process; rank 0 gathers and reports)
 *   run_moe_main.c     options, the threads driver */
#ifndef MEGAMOE_TOOLS_RUN_MOE_H
#define MEGAMOE_TOOLS_RUN_MOE_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "common/cli_moe_trace.h"
#include "megamoe/comm.h"
#include "megamoe/dtype.h"
#include "megamoe/mega_moe.h"
#include "megamoe/status.h"
#include "ops/mega_moe/scenario_table.h"

/* ---- presets and scenarios ------------------------------------------------------------------- */

typedef struct run_moe_preset {
    const char *name;
    const char *model;
    int64_t hidden, inter;
    int64_t experts;       /* routed experts loaded (scaled down from model_experts when too big) */
    int64_t model_experts; /* the model's routed experts */
    int64_t topk;
    int64_t shared_experts; /* per rank (replicated: every rank holds the same shared weights) */
    mm_mega_moe_activation activation;
    int activation_param_count;
    float activation_params[MM_MEGA_MOE_MAX_ACTIVATION_PARAMS];
    const char *default_scenario;
    int64_t default_tokens;       /* per rank, chosen so that one iteration takes well under a second */
    int64_t default_check_tokens; /* per rank; the reference decodes every expert it touches */
} run_moe_preset;

extern const run_moe_preset run_moe_presets[];
extern const size_t run_moe_preset_count;
const run_moe_preset *run_moe_find_preset(const char *name);

/* A scenario is a row of the library's scenario table (src/ops/mega_moe/scenario_table.h): its
 * `spec_name` is the --scenario spelling (docs/cli.md: the spec's names), `label` the report's, with the
 * dtypes and the check's tolerances. */
typedef mm_moe_scenario_row run_moe_scenario;
struct run_moe_config;

/* The row whose --scenario spelling (`spec_name`) is name, or NULL. */
const run_moe_scenario *run_moe_find_scenario(const char *name);
/* The block sizes the weights of sc carry (scale_block_n, scale_block_k): 0 x 0 for a row without F32
 * block scales; else the configured ones, or the checkpoints' defaults where not configured (FP8 128 x
 * 128 as DeepSeek-V3, UINT4 1 x 128 as AWQ/GPTQ group size 128). cfg may be NULL (the defaults). */
void run_moe_scale_blocks(const struct run_moe_config *cfg, const run_moe_scenario *sc, int64_t *bn,
                          int64_t *bk);
/* --scenario NAME of the benchmarks (a cli_options.h parser): a name run_moe_find_scenario knows goes to
 * *(const char **)target; another is one usage line "unknown --scenario 'NAME'". */
int run_moe_parse_scenario(const char *command, const char *option, const char *text, void *target);

/* ---- configuration of one run ---------------------------------------------------------------- */

typedef struct run_moe_config {
    const run_moe_preset *preset;
    int64_t hidden, inter, experts, topk, shared_experts; /* preset values, after overrides */
    int64_t ranks;
    int64_t tokens; /* per rank */
    int64_t iterations;
    int64_t check_tokens; /* per rank; 0 = no check */
    uint64_t seed;
    double skew;            /* routing skew: spread of the per-expert logit bias */
    const char *trace_path; /* NULL: no trace */
    /* Combine knobs (mm_mega_moe_attrs; the library validates them against the topology). */
    int combine_quant_mode;      /* 0, 3 (MX E5M2), 4 (MX E4M3) */
    int combine_comm_mode;       /* 0, 1, 2 */
    int64_t rank_num_per_server; /* domain size for combine_comm_mode 2 (0: flat) */
    int topk_weights_type;       /* 0: weights at combine, 1: after the activation */
    int json;                    /* --json: JSON Lines on stdout instead of the banner, table and notes */
    /* Checkpoint-format knobs (docs/weight_formats.md), for every scenario: */
    int bias;               /* --bias: bias1 / bias2 on every expert (A8W4-INT has its own) */
    int weight1_interleave; /* --weight1-interleave: weight1's gate/up channels stored alternating */
    int64_t scale_block_n, scale_block_k; /* --scale-block-n/-k of block-scaled rows (0: the default) */
} run_moe_config;

/* ---- synthetic data (run_moe_data.c) ---------------------------------------------------------- */

/* The stacked weights of `count` experts in the scenario's storage, transposed layout: weight1
 * (count, 2I, H), weight2 (count, H, I) (each output channel a contiguous row over the reduction
 * dimension, 4-bit types packed along it). Scales: INT (count, N) F32, MX (count, N, ceil(K/64), 2),
 * block-scaled (count, ceil(N/bn), ceil(K/bk)) F32 with U8 zero points for UINT4 (run_moe_blocks.c).
 * With weight1_interleave, weight1's stored channel 2i is gate i and 2i + 1 up i (scales, bias alike). */
typedef struct run_moe_expert_data {
    mm_dtype dtype;
    int64_t count, hidden, inter;
    int64_t block_n, block_k; /* F32 block scales (0 x 0: none) */
    int weight1_interleave;
    void *weight1, *weight2;
    float *scales1, *scales2;         /* INT8 / INT4 per channel, or the block scales */
    uint8_t *mx_scales1, *mx_scales2; /* MX */
    uint8_t *zeros1, *zeros2;         /* UINT4 zero points, the block scales' shape */
    float *bias1, *bias2; /* INT4 (the standard MSD bias 8 * s * column sum), or --bias for any dtype */
    mm_tensor t_w1, t_w2, t_s1, t_s2, t_b1, t_b2, t_z1, t_z2; /* descriptors of the above */
} run_moe_expert_data;

/* Builds experts first_id .. first_id + count - 1 (ids of the seed stream: routed experts use their
 * global id, shared experts ids from RUN_MOE_SHARED_ID_BASE so that every rank gets the same ones). The
 * BF16 master values depend only on (seed, id), not on the scenario, so scenarios quantize the same
 * weights. ids may be a list (count entries) instead of a range when not NULL. */
#define RUN_MOE_SHARED_ID_BASE 1000000
mm_status run_moe_expert_data_make(const run_moe_config *cfg, const run_moe_scenario *sc, int64_t first_id,
                                   const int64_t *ids, int64_t count, run_moe_expert_data *out,
                                   mm_error *err);
void run_moe_expert_data_free(run_moe_expert_data *d);
/* Quantizes one expert's matrix, n stored rows of k values level * step (levels n x k, each value exact
 * in BF16), to FP8 E4M3 or UINT4 with F32 scales per block of bn rows x bk columns (ceil(n/bn) x
 * ceil(k/bk), row-major) and for UINT4 U8 zero points of the same shape; data gets n stored rows. */
void run_moe_block_quantize(mm_dtype dtype, const int8_t *levels, int64_t n, int64_t k, float step,
                            int64_t bn, int64_t bk, uint8_t *data, float *scales, uint8_t *zeros);
/* The API's view of the data (stacked tensors, transpose flags set); pointers into d. */
mm_mega_moe_expert_weights run_moe_expert_weights_view(const run_moe_expert_data *d);
/* This rank's packed weights (its routed experts and the shared ones) from freshly generated experts;
 * the generated copies are freed before returning (the packed weights are all the operator keeps).
 * generated_at (may be NULL) gets the time (cli_now_seconds) generating ended and packing began. */
mm_status run_moe_weights_make(mm_comm *comm, const run_moe_config *cfg, const run_moe_scenario *sc,
                               mm_mega_moe_buffer *buffer, mm_mega_moe_weights **out, double *generated_at,
                               mm_error *err);

/* One rank's tokens and routing: x (T, H) BF16, topk_ids (T, K) I32, topk_weights (T, K) F32:
 * softmax over all experts of logits = expert bias (skewed popularity, equal on all ranks) + token
 * noise, top-k, renormalized. Depends on (seed, rank) only. */
typedef struct run_moe_tokens {
    int64_t count;
    uint16_t *x;
    int32_t *ids;
    float *weights;
} run_moe_tokens;
mm_status run_moe_tokens_make(const run_moe_config *cfg, int64_t rank, run_moe_tokens *out, mm_error *err);
void run_moe_tokens_free(run_moe_tokens *t);

/* The attributes of a scenario under a preset (activation and its parameters, quantization modes). */
mm_mega_moe_attrs run_moe_attrs(const run_moe_config *cfg, const run_moe_scenario *sc);

/* ---- the per-rank job (run_moe_rank.c) -------------------------------------------------------- */

/* When a rank's phases began and ended (cli_now_seconds: CLOCK_MONOTONIC, shared by the ranks of one
 * machine). Setup is tokens, buffer, weights; the weights are generating then packing. */
typedef struct run_moe_rank_spans {
    double setup_begin, generate_begin, generate_end, pack_end, setup_end;
    double warmup_begin, warmup_end; /* the untimed first call */
} run_moe_rank_spans;

/* What one rank brings back. Filled by the rank; in MPI runs, rank 0 receives the others' copies. */
typedef struct run_moe_rank_result {
    mm_mega_moe_stats *stats;  /* cfg.iterations entries: the timed runs (the warm-up is not kept) */
    run_moe_rank_spans *spans; /* one */
    int64_t *routed;           /* cfg.experts entries: rows this rank's tokens route to each expert */
    /* the checked sample: rows spread over the rank's tokens */
    int64_t sample_count;
    int64_t *sample_rows;
    uint16_t *sample_x; /* (n, H) */
    int32_t *sample_ids;
    float *sample_weights; /* (n, K) */
    uint16_t *sample_y;    /* (n, H): the operator's output */
} run_moe_rank_result;

mm_status run_moe_result_alloc(const run_moe_config *cfg, run_moe_rank_result *r, mm_error *err);
void run_moe_result_free(run_moe_rank_result *r);

/* Runs the scenario on this rank of comm: one warm-up call, then cfg->iterations timed calls. */
mm_status run_moe_rank(mm_comm *comm, const run_moe_config *cfg, const run_moe_scenario *sc,
                       run_moe_rank_result *result, mm_error *err);

/* ---- the check (run_moe_check.c) -------------------------------------------------------------- */

typedef struct run_moe_errors {
    int64_t values;          /* outputs compared */
    double max_abs_over_rms; /* max |y - y_ref| / rms(y_ref) */
    double rms_ref;
    double within_ulp;       /* fraction of BF16 outputs at most 1 ulp from the reference */
    double within_tolerance; /* fraction within the scenario tolerance */
} run_moe_errors;

/* The relative part of the check's tolerance: the scenario's, widened for a quantized combine. */
double run_moe_check_tolerance_relative(const run_moe_config *cfg, const run_moe_scenario *sc);
/* Recomputes the samples of all ranks with the float64 reference (experts rebuilt from the seed). */
mm_status run_moe_check(const run_moe_config *cfg, const run_moe_scenario *sc,
                        const run_moe_rank_result *results, run_moe_errors *out, mm_error *err);

/* ---- the trace (run_moe_trace.c) -------------------------------------------------------------- */

typedef cli_moe_trace run_moe_trace; /* common/cli_moe_trace.h */

int run_moe_trace_open(run_moe_trace *t, const char *path, int64_t ranks);
/* Appends the scenario to an open trace: every rank's setup and warm-up, its timed calls with their
 * stage events, the flows from each dispatch to the expert batches its rows reach, and the host's
 * check from check_begin to check_end (none when check_end <= check_begin). */
void run_moe_trace_scenario(run_moe_trace *t, const run_moe_config *cfg, const run_moe_scenario *sc,
                            const run_moe_rank_result *results, double check_begin, double check_end);
int run_moe_trace_close(run_moe_trace *t);

/* ---- the drivers (run_moe_main.c, run_moe_mpi.c) and the report (run_moe_report.c) ------------ */

typedef struct run_moe_options {
    run_moe_config cfg;
    const char *scenario; /* NULL: the preset's */
    const char *backend;  /* a name of the table of backends (megamoe/comm.h) */
    int ranks_given;      /* --ranks was on the command line (a launched backend must match it) */
    int64_t tokens, experts, check_tokens, hidden, inter; /* -1: the preset's */
    int no_check;
} run_moe_options;

/* Applies the preset and the overrides once the rank count is known (mpi: the process count); prints
 * a usage error (when speak) and returns -1 when they do not fit. */
int run_moe_finish_config(run_moe_options *o, int speak);
/* 0 when the scenario's weights fit in this machine's memory; else -1 (after a usage error when speak). */
int run_moe_memory_fits(const run_moe_config *cfg, const run_moe_scenario *sc, int speak);
/* The scenarios to run (one, or all of them); list has room for mm_moe_scenario_count entries. */
size_t run_moe_scenario_list(const run_moe_options *o, const run_moe_scenario **list);
/* Runs every scenario with one rank per process of o->backend (mm_comm_launch: mpi under mpirun);
 * returns the exit status. */
int run_moe_run_launched(run_moe_options *o);

/* Per-rank results of one scenario (n entries), or NULL when out of memory. */
run_moe_rank_result *run_moe_results_alloc(const run_moe_config *cfg, int64_t n, mm_error *err);
void run_moe_results_free(run_moe_rank_result *res, int64_t n);

/* What the report keeps across the scenarios of one command. */
typedef struct run_moe_report {
    char notes[16][160]; /* per scenario: setup and check times, printed under the table */
    uint16_t *a16w16_y;  /* the A16W16 outputs of the samples, when that scenario ran first */
    int64_t a16w16_values;
} run_moe_report;

/* The banner (--json: the header object) and the table header (nothing with --json). */
/* The text banner also names the GEMM kernels the registry chooses for each of the count scenarios. */
void run_moe_print_banner(const run_moe_config *cfg, const char *backend, const run_moe_scenario *const *list,
                          size_t count);
void run_moe_print_header(const run_moe_config *cfg);
/* The line of a scenario that failed to run (--json: a row object with "error"). */
void run_moe_print_not_run(const run_moe_config *cfg, const char *scenario, const char *message);
/* Checks the scenario's samples, prints its row, adds its note and its trace slices; returns the exit
 * status (1 when a checked output is outside the tolerance). */
int run_moe_report_scenario(const run_moe_config *cfg, const run_moe_scenario *sc, run_moe_rank_result *res,
                            run_moe_trace *trace, run_moe_report *report, size_t index);
/* The banner's kernel line of one scenario (cli_kernels_describe), shared with the benchmarks' headers. */
void run_moe_print_kernels(const run_moe_scenario *sc);
/* Prints the notes of the count scenarios (nothing with --json: they are in the rows). */
void run_moe_print_notes(const run_moe_config *cfg, char notes[][160], size_t count);

#endif
