/* SPDX-License-Identifier: Apache-2.0 */
/* tools/run/cmd_run.c: `megamoe run`, the main job: picks the operator (--op) and hands over to its main.
 *
 * The operators are the rows of the operator table (common/operators.h) with a run entry; the first,
 * the MegaMoE layer (run_moe_main.c), is the default. --op is removed from argv before the operator's main
 * parses the rest, so each main keeps its own getopt table and help text. `--model DIR` (without --op)
 * runs a checkpoint's MoE layer instead of the synthetic MegaMoE layer (run_model.c). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/cli_util.h"
#include "common/commands.h"
#include "common/operators.h"
#include "common/renamed.h"
#include "run/run_ops.h"

static int unknown_op(const char *name) {
    if (cli_reject_renamed_name("run", name)) return MM_CLI_EXIT_USAGE;
    char list[256];
    cli_operator_names(CLI_ENTRY_RUN, list, sizeof list);
    return cli_usage_error("run", "--op '%s' is not an operator (one of: %s)", name, list);
}

void cli_run_print_ops(FILE *out) {
    fprintf(out, "operators (--op NAME; `megamoe run --op NAME --help` for each):\n");
    cli_operator_print(out, CLI_ENTRY_RUN, 18);
}

int mm_cli_run_main(int argc, char **argv) {
    const cli_operator *def = NULL;
    for (int i = 0; i < cli_operator_count && !def; i++)
        if (cli_operators[i].run) def = &cli_operators[i]; /* the default: the first row with a run */
    const cli_operator *op = def;
    char **rest = malloc(((size_t)argc + 1) * sizeof *rest);
    if (!rest) {
        cli_error("run", "out of memory");
        return MM_CLI_EXIT_FAILURE;
    }
    int n = 0, model = 0;
    rest[n++] = argv[0];
    for (int i = 1; i < argc; i++) {
        const char *name = NULL;
        if (strcmp(argv[i], "--op") == 0) {
            if (i + 1 >= argc) {
                free(rest);
                return cli_usage_error("run", "option '--op' needs a value");
            }
            name = argv[++i];
        } else if (strncmp(argv[i], "--op=", 5) == 0) {
            name = argv[i] + 5;
        } else if (strcmp(argv[i], "--model") == 0 || strncmp(argv[i], "--model=", 8) == 0) {
            model = 1; /* a checkpoint's layer instead of synthetic weights (run_model.c) */
        } else if (strcmp(argv[i], "--") == 0) {
            /* everything after -- belongs to the operator */
            while (i < argc) rest[n++] = argv[i++];
            break;
        }
        if (name) {
            op = cli_operator_find(name, CLI_ENTRY_RUN);
            if (!op) {
                free(rest);
                return unknown_op(name);
            }
        } else {
            rest[n++] = argv[i];
        }
    }
    rest[n] = NULL;
    if (op != def) {
        char help[64];
        snprintf(help, sizeof help, "run --op %s", op->name);
        cli_set_help_command(help);
    }
    int rc = cli_reject_renamed("run", n, rest);
    if (rc == 0) rc = model && op == def ? cli_run_model_main(n, rest) : op->run(n, rest);
    free(rest);
    return rc;
}
