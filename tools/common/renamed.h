/* SPDX-License-Identifier: Apache-2.0 */
/* tools/common/renamed.h: the spellings the CLI no longer accepts, each with the one that replaced it.
 *
 * docs/cli.md "Option vocabulary" gives the rule the new spellings follow. An old spelling is rejected
 * before any option is parsed, with one line naming its replacement ("megamoe: run: --inter was renamed
 * --intermediate", exit 2), so scripts written for the old names fail loudly and say how to fix them.
 * `megamoe case` keeps its interface and is not checked. */
#ifndef MEGAMOE_TOOLS_COMMON_RENAMED_H
#define MEGAMOE_TOOLS_COMMON_RENAMED_H

typedef struct cli_renamed {
    const char *option; /* NULL: `old` is an option ("--inter") or a name (operator, benchmark) */
    const char *old;    /* with option: a value of that option ("a8w8-fp8" of --scenario) */
    const char *now;    /* what to write instead */
} cli_renamed;

extern const cli_renamed cli_renamed_table[];
extern const int cli_renamed_count;

/* Looks at every option of argv[1..] (up to "--") and at the value of each renamed-value option; on the
 * first old spelling prints one line for `command` and returns MM_CLI_EXIT_USAGE, else returns 0. */
int cli_reject_renamed(const char *command, int argc, char **argv);

/* For a name given where an operator or benchmark name is expected: MM_CLI_EXIT_USAGE after one line
 * when `name` is an old spelling, else 0. */
int cli_reject_renamed_name(const char *command, const char *name);

#endif
