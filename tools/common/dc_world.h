/* SPDX-License-Identifier: Apache-2.0 */
/* tools/common/dc_world.h: a seeded Dispatch V3 / Combine V2 world (every rank's inputs) shared by
 * `megamoe case-gen dispatch-v3 / combine-v2`, `megamoe run --op dispatch-combine` and
 * `megamoe bench dispatch-combine`, with the command-line options that shape it. */
#ifndef MEGAMOE_TOOLS_DC_WORLD_H
#define MEGAMOE_TOOLS_DC_WORLD_H

#include <stdint.h>

#include "megamoe/comm.h"
#include "megamoe/dispatch_combine.h"

typedef struct cli_dc_opts {
    int64_t ranks, tp, experts, shared_experts, shared_ranks, tokens, hidden, topk;
    int64_t quant, smooth, mask, vary_bs, zero, copy, konst, ent_type, alpha_2d, shared_x;
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

/* getopt_long rows and help text of the world options; option codes from 600 up. */
#define CLI_DC_OPTIONS                                                                                       \
    {"ranks", required_argument, NULL, 600}, {"tp", required_argument, NULL, 601},                           \
        {"experts", required_argument, NULL, 602}, {"shared-experts", required_argument, NULL, 603},         \
        {"shared-ranks", required_argument, NULL, 604}, {"tokens", required_argument, NULL, 605},            \
        {"hidden", required_argument, NULL, 606}, {"topk", required_argument, NULL, 607},                    \
        {"quant-mode", required_argument, NULL, 608}, {"smooth", no_argument, NULL, 609},                    \
        {"mask", required_argument, NULL, 610}, {"uneven-bs", no_argument, NULL, 611},                       \
        {"zero-experts", required_argument, NULL, 612}, {"copy-experts", required_argument, NULL, 613},      \
        {"const-experts", required_argument, NULL, 614},                                                     \
        {"expert-token-nums-type", required_argument, NULL, 615}, {"alpha-2d", no_argument, NULL, 616},      \
        {"shared-x", no_argument, NULL, 617}, {"norm-eps", required_argument, NULL, 618},                    \
        {"seed", required_argument, NULL, 619}, {                                                            \
        "remove", required_argument, NULL, 620                                                               \
    }

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

/* Handles one world option: 1 handled, 0 not a world option, -1 bad value (already reported). */
int cli_dc_option(const char *cmd, int opt, const char *arg, cli_dc_opts *o);

/* Checks the options and builds the world; returns 0, or reports one line and returns the exit status. */
int cli_dc_world_make(const char *cmd, const cli_dc_opts *o, cli_dc_world *w);
void cli_dc_world_free(cli_dc_world *w);

/* Attributes of rank g (global numbering ep x max(tp, 1) + tp). */
mm_dc_attrs cli_dc_attrs(const cli_dc_world *w, int64_t g);

/* Tensor descriptors of rank g's dispatch inputs (the struct points into *t). */
typedef struct cli_dc_tensors {
    mm_tensor x, ids, scales, mask, elastic, weights, residual, gamma, shared_x, ori, a1, a2, v;
} cli_dc_tensors;
mm_dispatch_v3_inputs cli_dc_dispatch_inputs(const cli_dc_world *w, int64_t g, cli_dc_tensors *t);
/* Fills the combine inputs that come from the world (not the handoff tensors). */
void cli_dc_combine_inputs(const cli_dc_world *w, int64_t g, cli_dc_tensors *t, mm_combine_v2_inputs *in);

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

#endif
