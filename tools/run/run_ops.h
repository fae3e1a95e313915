/* SPDX-License-Identifier: Apache-2.0 */
/* tools/run/run_ops.h: the operators `megamoe run --op NAME` can run, one main function each.
 *
 * Each main receives argv with argv[0] = "run" and the --op option removed, parses its own options and
 * returns the process exit status (common/cli_util.h). Their names are rows of the operator table
 * (common/operators.c). */
#ifndef MEGAMOE_TOOLS_RUN_OPS_H
#define MEGAMOE_TOOLS_RUN_OPS_H

#include <stdio.h>

int cli_run_mega_moe_main(int argc, char **argv);   /* run_moe_main.c: the MegaMoE layer (default) */
int cli_run_re_routing_main(int argc, char **argv); /* run_re_routing.c: MoeReRouting demo */
int cli_run_model_main(int argc, char **argv);      /* run_model.c: a checkpoint's layer (--model DIR) */
/* run_dispatch_combine.c: Dispatch V3 + expert FFN + Combine V2 */
int cli_run_dispatch_combine_main(int argc, char **argv);

/* Lists the operators `run` takes (for the default operator's --help). */
void cli_run_print_ops(FILE *out);

#endif
