/* tools/cmd_run.c: `megamoe run`, the main job: picks the operator (--op) and hands over to its main.
 *
 * The default is the MegaMoE layer (run_moe_main.c). Other operators' demos are rows of run_ops_table;
 * --op is removed from argv before the operator's main parses the rest, so each main keeps its own
 * getopt table and help text. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli_util.h"
#include "commands.h"
#include "run_ops.h"

typedef struct run_op {
    const char *name;
    const char *summary;
    int (*main)(int argc, char **argv);
} run_op;

/* The first row is the default. */
static const run_op run_ops_table[] = {
    {"mega-moe", "MegaMoE layer of a real model's shape on R ranks (default)", cli_run_mega_moe_main},
    {"re-routing", "MoeReRouting of a realistic received-token block, against memcpy",
     cli_run_rerouting_main},
    {"dispatch-combine", "Dispatch V3 -> expert FFN -> Combine + RMSNorm V2, per-stage timings",
     cli_run_dispatch_combine_main},
};
static const size_t run_op_count = sizeof run_ops_table / sizeof run_ops_table[0];

static const run_op *find_op(const char *name) {
    for (size_t i = 0; i < run_op_count; i++)
        if (strcmp(name, run_ops_table[i].name) == 0) return &run_ops_table[i];
    return NULL;
}

static int unknown_op(const char *name) {
    char list[256] = "";
    for (size_t i = 0; i < run_op_count; i++) {
        if (i) strncat(list, ", ", sizeof list - strlen(list) - 1);
        strncat(list, run_ops_table[i].name, sizeof list - strlen(list) - 1);
    }
    return cli_usage_error("run", "--op '%s' is not an operator (one of: %s)", name, list);
}

void cli_run_print_ops(FILE *out) {
    fprintf(out, "operators (--op NAME; `megamoe run --op NAME --help` for each):\n");
    for (size_t i = 0; i < run_op_count; i++)
        fprintf(out, "  %-18s %s\n", run_ops_table[i].name, run_ops_table[i].summary);
}

int mm_cli_run_main(int argc, char **argv) {
    const run_op *op = &run_ops_table[0];
    char **rest = malloc(((size_t)argc + 1) * sizeof *rest);
    if (!rest) {
        cli_error("run", "out of memory");
        return MM_CLI_EXIT_FAILURE;
    }
    int n = 0;
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
        } else if (strcmp(argv[i], "--") == 0) {
            /* everything after -- belongs to the operator */
            while (i < argc) rest[n++] = argv[i++];
            break;
        }
        if (name) {
            op = find_op(name);
            if (!op) {
                free(rest);
                return unknown_op(name);
            }
        } else {
            rest[n++] = argv[i];
        }
    }
    rest[n] = NULL;
    int rc = op->main(n, rest);
    free(rest);
    return rc;
}
