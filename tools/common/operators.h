/* SPDX-License-Identifier: Apache-2.0 */
/* tools/common/operators.h: the operators of the CLI, one row each, shared by `case-gen`, `run` and
 * `bench` (and listed by their help texts from here).
 *
 * A row names the operator once for the command line (`name`, e.g. "re-routing"), gives the op names a
 * case file uses for it (`case_ops`, fixed by the spec: "moe_re_routing"; `megamoe case` reads them
 * from the file and the library runs the op), and the entry points of the commands that have one (NULL
 * when a command has none: the dispatch-combine pair is one demo and one benchmark, while case-gen
 * writes each half, dispatch-v3 and combine-v2, as its own case). Each entry receives argv with
 * argv[0] = the operator's name and returns the exit status. Adding an operator to the CLI is one row
 * here plus its entry points. */
#ifndef MEGAMOE_TOOLS_COMMON_OPERATORS_H
#define MEGAMOE_TOOLS_COMMON_OPERATORS_H

#include <stdio.h>

#include "common/commands.h"

typedef struct cli_operator {
    const char *name;        /* the one command-line spelling */
    const char *case_ops[2]; /* case-file op names (docs/case_files.md); unused entries NULL */
    mm_cli_main_fn case_gen; /* `megamoe case-gen NAME` */
    const char *case_gen_summary;
    mm_cli_main_fn run; /* `megamoe run --op NAME` */
    const char *run_summary;
    mm_cli_main_fn bench; /* `megamoe bench NAME` */
    const char *bench_summary;
} cli_operator;

extern const cli_operator cli_operators[];
extern const int cli_operator_count;

/* Which entry point a command uses. */
typedef enum cli_entry { CLI_ENTRY_CASE_GEN, CLI_ENTRY_RUN, CLI_ENTRY_BENCH } cli_entry;

/* The row called `name` that has an entry for `entry`, or NULL. */
const cli_operator *cli_operator_find(const char *name, cli_entry entry);
mm_cli_main_fn cli_operator_entry(const cli_operator *op, cli_entry entry);
const char *cli_operator_summary(const cli_operator *op, cli_entry entry);

/* One line per operator with an entry for `entry`: "  NAME  summary", names padded to `width`. */
void cli_operator_print(FILE *out, cli_entry entry, int width);
/* "a, b, c": the names with an entry for `entry` (for "not an operator (one of: ...)" lines). */
void cli_operator_names(cli_entry entry, char *buf, size_t size);

#endif
