/* SPDX-License-Identifier: Apache-2.0 */
/* tools/common/commands.h: the table of `megamoe` sub-commands.
 *
 * Adding a command is one row here plus one file defining its main function. Each main receives its
 * own argv with argv[0] = the command name, and returns the process exit status (cli_util.h). */
#ifndef MEGAMOE_TOOLS_COMMANDS_H
#define MEGAMOE_TOOLS_COMMANDS_H

#include <stddef.h>

typedef int (*mm_cli_main_fn)(int argc, char **argv);

typedef struct mm_cli_command {
    const char *name;
    const char *summary; /* one line for `megamoe --help` */
    mm_cli_main_fn main;
} mm_cli_command;

int mm_cli_run_main(int argc, char **argv);
int mm_cli_case_main(int argc, char **argv);
int mm_cli_case_gen_main(int argc, char **argv);
int mm_cli_bench_main(int argc, char **argv);
int mm_cli_layer_main(int argc, char **argv);
int mm_cli_version_main(int argc, char **argv);
int mm_cli_tune_main(int argc, char **argv);

/* Defined in main.c, in the order `megamoe --help` lists them. */
extern const mm_cli_command mm_cli_commands[];
extern const size_t mm_cli_command_count;

#endif
