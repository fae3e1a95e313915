/* SPDX-License-Identifier: Apache-2.0 */
/* tools/common/dc_world.h: a seeded Dispatch V3 / Combine V2 world (every rank's inputs) shared by
 * `megamoe case-gen dispatch-v3 / combine-v2`, `megamoe run --op dispatch-combine` and
 * `megamoe bench dispatch-combine`, with the command-line options that shape it. */
#ifndef MEGAMOE_TOOLS_DC_WORLD_H
#define MEGAMOE_TOOLS_DC_WORLD_H

#include <stdint.h>

#include "common/cli_options.h"
#include "megamoe/comm.h"
#include "megamoe/dispatch_combine.h"

typedef struct cli_dc_opts {
    int64_t ranks, tp, experts, shared_experts, shared_ranks, tokens, hidden, topk;
    int64_t quant, mask, zero, copy, konst, ent_type;
    int smooth, vary_bs, alpha_2d, shared_x;
    double eps;
    uint64_t seed;
    unsigned char removed[MM_COMM_MAX_RANKS]; /* elastic scale-in: ranks removed before the call */
    int n_removed;
} cli_dc_opts;

typedef struct cli_dc_rank {
    int alive;
    int64_t bs;
    uint16_t *x, *residual, *ori, *shared_x;
    int32_t *ids;
    uint8_t *mask;
    float *weights;
} cli_dc_rank;

typedef struct cli_dc_world {
    cli_dc_opts o;
    int64_t nranks, tpw, L, R_eff, sh_eff, M_eff;
    int32_t *elastic;       /* (4 + 2R) or NULL */
    float *smooth;          /* (S + M, H) */
    uint16_t *gamma;        /* (H) */
    float *alpha1, *alpha2; /* (N) or (N, H) */
    uint16_t *const_v;      /* (N, H) */
    cli_dc_rank rank[MM_COMM_MAX_RANKS];
} cli_dc_world;

cli_dc_opts cli_dc_default_opts(void);

/* --mask KIND and --remove LIST (parsers of cli_options.h rows): into the int64_t mask, and into `removed`
 * of the cli_dc_opts target. */
int cli_dc_parse_mask(const char *command, const char *option, const char *text, void *mask);
int cli_dc_parse_removed(const char *command, const char *option, const char *text, void *opts);

/* Option rows (cli_options.h) of the world options, into the cli_dc_opts *O. */
#define CLI_DC_OPTIONS(O)                                                                                    \
    CLI_INT64_OPTION("ranks", &(O)->ranks, 1, MM_COMM_MAX_RANKS), CLI_INT64_OPTION("tp", &(O)->tp, 0, 2),    \
        CLI_INT64_OPTION("experts", &(O)->experts, 1, 1 << 20),                                              \
        CLI_INT64_OPTION("shared-experts", &(O)->shared_experts, 0, 4),                                      \
        CLI_INT64_OPTION("shared-ranks", &(O)->shared_ranks, 0, MM_COMM_MAX_RANKS),                          \
        CLI_INT64_OPTION("tokens", &(O)->tokens, 0, 1 << 16),                                                \
        CLI_INT64_OPTION("hidden", &(O)->hidden, 1, 1 << 16), CLI_INT64_OPTION("topk", &(O)->topk, 1, 64),   \
        CLI_INT64_OPTION("quant-mode", &(O)->quant, 0, 2), CLI_FLAG_OPTION("smooth", &(O)->smooth),          \
        CLI_CUSTOM_OPTION("mask", cli_dc_parse_mask, &(O)->mask),                                            \
        CLI_FLAG_OPTION("uneven-bs", &(O)->vary_bs),                                                         \
        CLI_INT64_OPTION("zero-experts", &(O)->zero, 0, 1 << 16),                                            \
        CLI_INT64_OPTION("copy-experts", &(O)->copy, 0, 1 << 16),                                            \
        CLI_INT64_OPTION("const-experts", &(O)->konst, 0, 1 << 16),                                          \
        CLI_INT64_OPTION("expert-token-nums-type", &(O)->ent_type, 0, 1),                                    \
        CLI_FLAG_OPTION("alpha-2d", &(O)->alpha_2d), CLI_FLAG_OPTION("shared-x", &(O)->shared_x),            \
        CLI_REAL_OPTION("norm-eps", &(O)->eps, 0, 1), CLI_SEED_OPTION(&(O)->seed),                           \
        CLI_CUSTOM_OPTION("remove", cli_dc_parse_removed, (O))

/* Help rows of the world options; the four defaults that differ between commands are string literals. */
#define CLI_DC_OPTIONS_HELP_WITH(EXPERTS, TOKENS, HIDDEN, TOPK)                                              \
    "      --ranks R                  EP ranks (default 4)\n"                                                \
    "      --tp T                     tp_world_size 0, 1 or 2 (default 0; 2 doubles the ranks)\n"            \
    "      --experts M                routed experts, moe_expert_num (default: " EXPERTS ")\n"               \
    "      --shared-experts S         shared_expert_num 0..4 (default 0)\n"                                  \
    "      --shared-ranks N           shared_expert_rank_num (default 0)\n"                                  \
    "      --tokens BS                tokens per rank (default " TOKENS ")\n"                                \
    "      --hidden H                 hidden size (default " HIDDEN ")\n"                                    \
    "      --topk K                   experts per token (default " TOPK ")\n"                                \
    "      --quant-mode Q             0 none, 2 dynamic INT8 per token (default 0)\n"                        \
    "      --smooth                   give smoothing scales (quant mode 2)\n"                                \
    "      --mask KIND                none, 1d or 2d (default none)\n"                                       \
    "      --uneven-bs                ranks get different Bs (global_bs set)\n"                              \
    "      --zero-experts Z, --copy-experts C, --const-experts N   special experts (default 0)\n"            \
    "      --alpha-2d                 const-expert alphas of shape (N, H) (default (N,))\n"                  \
    "      --shared-x                 give shared_expert_x (combine)\n"                                      \
    "      --expert-token-nums-type T 0 cumulative, 1 counts (default 1)\n"                                  \
    "      --norm-eps E               RMSNorm epsilon (default 1e-6)\n"                                      \
    "      --remove LIST              elastic scale-in: comma-separated EP ranks removed (e.g. 2,3)\n"       \
    "      --seed S                   random seed (default 1)\n"

#define CLI_DC_OPTIONS_HELP CLI_DC_OPTIONS_HELP_WITH("one per routed rank", "8", "256", "min(4, experts)")

/* Checks the options and builds the world; returns 0, or reports one line and returns the exit status. */
int cli_dc_world_make(const char *cmd, const cli_dc_opts *o, cli_dc_world *w);
void cli_dc_world_free(cli_dc_world *w);

/* Rank fn's first step in an elastic world (after --remove): the communicator keeps the surviving ranks
 * only (mm_comm_set_survivors); nothing in a full world. */
mm_status cli_dc_set_survivors(mm_comm *comm, const cli_dc_world *w, mm_error *err);

/* Attributes of rank g (global numbering ep x max(tp, 1) + tp). */
mm_dc_attrs cli_dc_attrs(const cli_dc_world *w, int64_t g);

/* Tensor descriptors of rank g's dispatch inputs (the struct points into *t). */
typedef struct cli_dc_tensors {
    mm_tensor x, ids, scales, mask, elastic, weights, residual, gamma, shared_x, ori, a1, a2, v;
    mm_tensor expand_x, assist, ep_counts, tp_counts; /* Dispatch's hand-off */
    mm_tensor y, x_out, rstd;                         /* Combine's outputs (cli_dc_combine_outputs) */
} cli_dc_tensors;
mm_dispatch_v3_inputs cli_dc_dispatch_inputs(const cli_dc_world *w, int64_t g, cli_dc_tensors *t);

/* One rank's dispatch results (malloc'd, exact rows). */
typedef struct cli_dc_dispatch_out {
    int64_t rows, local_experts, n_ep;
    void *expand_x; /* rows x H, BF16 or I8 */
    float *dyn;
    int32_t *assist, *ep_counts, tp_counts[2];
    int64_t *token_nums;
} cli_dc_dispatch_out;
void cli_dc_dispatch_out_free(cli_dc_dispatch_out *d);
/* Allocates outputs for rank g and runs mm_dispatch_v3 on ws. */
mm_status cli_dc_dispatch(mm_dc_workspace *ws, const cli_dc_world *w, int64_t g, cli_dc_dispatch_out *d,
                          mm_error *err);
/* Rank g's combine inputs: the world's, and those Dispatch hands over (d's assist info and send counts,
 * expert_out (d->rows x H, BF16) as expand_x); the tensors live in *t. */
void cli_dc_combine_inputs(const cli_dc_world *w, int64_t g, const cli_dc_dispatch_out *d, void *expert_out,
                           cli_dc_tensors *t, mm_combine_v2_inputs *in);
/* Rank g's combine outputs: y and x (Bs, 1, H) BF16, rstd (Bs, 1, 1) F32; the tensors live in *t. */
mm_combine_v2_outputs cli_dc_combine_outputs(const cli_dc_world *w, int64_t g, uint16_t *y, uint16_t *x,
                                             float *rstd, cli_dc_tensors *t);

#endif
