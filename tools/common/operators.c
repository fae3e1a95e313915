/* SPDX-License-Identifier: Apache-2.0 */
/* tools/common/operators.c: the rows of the operator table (operators.h). */
#include "common/operators.h"

#include <string.h>

#include "bench/bench.h"
#include "case/case_gen_dispatch_combine.h"
#include "case/case_gen_mega_moe.h"
#include "case/case_gen_re_routing.h"
#include "run/run_ops.h"

/* The first row with a run entry is `megamoe run`'s default. */
const cli_operator cli_operators[] = {
    {.name = "mega-moe",
     .case_ops = {"mega_moe"},
     .case_gen = mm_cli_case_gen_mega_moe,
     .case_gen_summary = "every scenario, ranks, shared experts, masks, all attributes",
     .run = cli_run_mega_moe_main,
     .run_summary = "MegaMoE layer of a real model's shape on R ranks (default)",
     .bench = mm_bench_mega_moe_main,
     .bench_summary = "whole MegaMoE layer (prefill, decode) vs its expert compute alone"},
    {.name = "mega-moe-ext",
     .case_ops = {"mega_moe_ext"},
     .case_gen = mm_cli_case_gen_mega_moe_ext,
     .case_gen_summary = "mega-moe with checkpoint weight formats (FP8 blocks, MXFP4, UINT4), biases"},
    {.name = "dispatch-combine",
     .case_ops = {"moe_distribute_dispatch_v3", "moe_distribute_combine_add_rms_norm_v2"},
     .run = cli_run_dispatch_combine_main,
     .run_summary = "Dispatch V3 -> expert FFN -> Combine + RMSNorm V2, per-stage timings",
     .bench = mm_bench_dispatch_combine_main,
     .bench_summary = "Dispatch V3 / Combine V2 latency and bandwidth vs an alltoallv"},
    {.name = "dispatch-v3",
     .case_ops = {"moe_distribute_dispatch_v3"},
     .case_gen = mm_cli_case_gen_dispatch_v3,
     .case_gen_summary = "shared ranks, TP, quant 2, masks, special and removed ranks"},
    {.name = "combine-v2",
     .case_ops = {"moe_distribute_combine_add_rms_norm_v2"},
     .case_gen = mm_cli_case_gen_combine_v2,
     .case_gen_summary = "the handoff of a real dispatch run, all inputs"},
    {.name = "re-routing",
     .case_ops = {"moe_re_routing"},
     .case_gen = mm_cli_case_gen_re_routing,
     .case_gen_summary = "skewed counts (N, E), random tokens (A, H), optional scales",
     .run = cli_run_re_routing_main,
     .run_summary = "MoeReRouting of a realistic received-token block, against memcpy",
     .bench = mm_bench_re_routing_main,
     .bench_summary = "mm_re_routing vs memcpy (1 thread and N threads) of the same bytes"},
};
const int cli_operator_count = (int)(sizeof cli_operators / sizeof cli_operators[0]);

mm_cli_main_fn cli_operator_entry(const cli_operator *op, cli_entry entry) {
    switch (entry) {
    case CLI_ENTRY_CASE_GEN: return op->case_gen;
    case CLI_ENTRY_RUN: return op->run;
    default: return op->bench;
    }
}

const char *cli_operator_summary(const cli_operator *op, cli_entry entry) {
    switch (entry) {
    case CLI_ENTRY_CASE_GEN: return op->case_gen_summary;
    case CLI_ENTRY_RUN: return op->run_summary;
    default: return op->bench_summary;
    }
}

const cli_operator *cli_operator_find(const char *name, cli_entry entry) {
    for (int i = 0; i < cli_operator_count; i++)
        if (strcmp(name, cli_operators[i].name) == 0 && cli_operator_entry(&cli_operators[i], entry))
            return &cli_operators[i];
    return NULL;
}

void cli_operator_print(FILE *out, cli_entry entry, int width) {
    for (int i = 0; i < cli_operator_count; i++) {
        const cli_operator *op = &cli_operators[i];
        if (!cli_operator_entry(op, entry)) continue;
        fprintf(out, "  %-*s %s", width, op->name, cli_operator_summary(op, entry));
        /* case-gen writes case files: name the op they hold */
        if (entry == CLI_ENTRY_CASE_GEN) fprintf(out, " (op %s)", op->case_ops[0]);
        fputc('\n', out);
    }
}

void cli_operator_names(cli_entry entry, char *buf, size_t size) {
    buf[0] = '\0';
    for (int i = 0; i < cli_operator_count; i++) {
        if (!cli_operator_entry(&cli_operators[i], entry)) continue;
        if (buf[0]) strncat(buf, ", ", size - strlen(buf) - 1);
        strncat(buf, cli_operators[i].name, size - strlen(buf) - 1);
    }
}
