/* SPDX-License-Identifier: Apache-2.0 */
/* tools/main.c: entry point of the `megamoe` command; global options and dispatch to the sub-commands.
 *
 * Exit status: 0 success, 1 failure of the system or of megamoe, 2 bad usage or bad input file. */
#include <stdio.h>
#include <string.h>

#include "common/cli_util.h"
#include "common/commands.h"
#include "megamoe/comm.h"
#include "megamoe/version.h"

const mm_cli_command mm_cli_commands[] = {
    {"run", "run the main job: a MegaMoE layer of a real model's shape, timed and checked", mm_cli_run_main},
    {"case", "run one operator call from a case file and write its outputs", mm_cli_case_main},
    {"case-gen", "write a random (seeded) case file for an operator", mm_cli_case_gen_main},
    {"bench", "run a benchmark (no name: list them)", mm_cli_bench_main},
    {"layer",
     "run the MoE layer of a Hugging Face checkpoint (mixtral, qwen3_moe, qwen2_moe) on x from a file",
     mm_cli_layer_main},
    {"tune", "measure the GEMM kernels on this CPU and cache the fastest choice per format and rows",
     mm_cli_tune_main},
    {"version", "print the version", mm_cli_version_main},
};
const size_t mm_cli_command_count = sizeof mm_cli_commands / sizeof mm_cli_commands[0];

static void print_usage(FILE *out) {
    fprintf(out, "usage: megamoe <command> [options]\n"
                 "       megamoe <command> --help\n"
                 "       megamoe --version\n\n"
                 "Expert-parallel Mixture-of-Experts operators for CPUs.\n\n"
                 "commands:\n");
    for (size_t i = 0; i < mm_cli_command_count; i++)
        fprintf(out, "  %-10s %s\n", mm_cli_commands[i].name, mm_cli_commands[i].summary);
    fprintf(out, "\nExit status: 0 success, 1 failure, 2 bad usage or bad input.\n");
}

int main(int argc, char **argv) {
    if (argc < 2) {
        cli_error(NULL, "no command given (see 'megamoe --help')");
        return MM_CLI_EXIT_USAGE;
    }
    const char *name = argv[1];
    if (strcmp(name, "--help") == 0 || strcmp(name, "-h") == 0 || strcmp(name, "help") == 0) {
        if (strcmp(name, "help") == 0 && argc >= 3) {
            /* `megamoe help CMD` is `megamoe CMD --help`. */
            for (size_t i = 0; i < mm_cli_command_count; i++)
                if (strcmp(argv[2], mm_cli_commands[i].name) == 0) {
                    char *sub_argv[] = {argv[2], "--help", NULL};
                    return mm_cli_commands[i].main(2, sub_argv);
                }
            cli_error(NULL, "unknown command '%s' (see 'megamoe --help')", argv[2]);
            return MM_CLI_EXIT_USAGE;
        }
        print_usage(stdout);
        return MM_CLI_EXIT_OK;
    }
    if (strcmp(name, "--version") == 0 || strcmp(name, "-V") == 0) {
        printf("megamoe %s\n", mm_version());
        return MM_CLI_EXIT_OK;
    }
    for (size_t i = 0; i < mm_cli_command_count; i++)
        if (strcmp(name, mm_cli_commands[i].name) == 0) {
            int rc = mm_cli_commands[i].main(argc - 1, argv + 1);
            /* The error is printed; an MPI job whose peer stopped or died can only end by aborting. */
            if (rc != MM_CLI_EXIT_OK) mm_comm_end_broken_job(rc);
            return rc;
        }
    if (name[0] == '-')
        cli_error(NULL, "unknown option '%s' (see 'megamoe --help')", name);
    else
        cli_error(NULL, "unknown command '%s' (see 'megamoe --help')", name);
    return MM_CLI_EXIT_USAGE;
}
