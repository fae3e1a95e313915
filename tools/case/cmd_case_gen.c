/* SPDX-License-Identifier: Apache-2.0 */
/* tools/case/cmd_case_gen.c: `megamoe case-gen OP -o FILE`: write a random, seeded case file for an operator.
 *
 * Users make starting points for their own cases with it, and the CLI tests make their inputs with it.
 * The operators are the rows of the operator table (common/operators.h) with a case-gen entry. */
#include <stdio.h>
#include <string.h>

#include "common/cli_util.h"
#include "common/commands.h"
#include "common/operators.h"
#include "common/renamed.h"

static void print_case_gen_usage(FILE *out) {
    fprintf(out, "usage: megamoe case-gen OP -o FILE [options]\n"
                 "       megamoe case-gen OP --help\n\n"
                 "Writes a random but seeded case file (docs/case_files.md) for operator OP:\n");
    cli_operator_print(out, CLI_ENTRY_CASE_GEN, 12);
}

int mm_cli_case_gen_main(int argc, char **argv) {
    if (argc < 2) return cli_usage_error("case-gen", "missing operator name");
    if (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0) {
        print_case_gen_usage(stdout);
        return MM_CLI_EXIT_OK;
    }
    const cli_operator *op = cli_operator_find(argv[1], CLI_ENTRY_CASE_GEN);
    if (!op) {
        if (cli_reject_renamed_name("case-gen", argv[1])) return MM_CLI_EXIT_USAGE;
        char names[256];
        cli_operator_names(CLI_ENTRY_CASE_GEN, names, sizeof names);
        return cli_usage_error("case-gen", "unknown operator '%s' (one of: %s)", argv[1], names);
    }
    char help[64];
    snprintf(help, sizeof help, "case-gen %s", op->name);
    cli_set_help_command(help);
    if (cli_reject_renamed("case-gen", argc - 1, argv + 1)) return MM_CLI_EXIT_USAGE;
    return op->case_gen(argc - 1, argv + 1);
}
