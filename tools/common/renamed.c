/* SPDX-License-Identifier: Apache-2.0 */
/* tools/common/renamed.c: the table of old spellings (renamed.h) and the check every command runs. */
#include "common/renamed.h"

#include <stdio.h>
#include <string.h>

#include "common/cli_util.h"

/* clang-format off */
const cli_renamed cli_renamed_table[] = {
    /* sizes are full words */
    {NULL, "--inter", "--intermediate"},
    {NULL, "--shared", "--shared-experts"},
    /* repetition counts are --iterations */
    {NULL, "--repetitions", "--iterations"},
    {NULL, "--repeat", "--iterations"},
    /* an option that sets a spec attribute is spelled like the attribute, with its values */
    {NULL, "--combine-quant", "--combine-quant-mode (none 0, e5m2 3, e4m3 4)"},
    {NULL, "--combine-comm", "--combine-comm-mode"},
    {NULL, "--ranks-per-server", "--rank-num-per-server"},
    /* scenario names are the spec's */
    {"--scenario", "a8w8-fp8", "a8w8-fp-e4m3"},
    {"--scenario", "a8w8-fp8-e5m2", "a8w8-fp-e5m2"},
    /* one spelling per operator (operators.h); benchmarks of an operator are named after it */
    {NULL, "re_routing", "re-routing"},
    {NULL, "rerouting", "re-routing"},
    {NULL, "moe_re_routing", "re-routing"},
    {NULL, "mega_moe", "mega-moe"},
    {NULL, "dispatch_v3", "dispatch-v3"},
    {NULL, "combine_v2", "combine-v2"},
    {NULL, "layer", "mega-moe"},
};
/* clang-format on */
const int cli_renamed_count = (int)(sizeof cli_renamed_table / sizeof cli_renamed_table[0]);

static int renamed_error(const char *command, const char *old, const char *now) {
    cli_error(command, "%s was renamed %s", old, now);
    return MM_CLI_EXIT_USAGE;
}

int cli_reject_renamed(const char *command, int argc, char **argv) {
    for (int i = 1; i < argc; i++) {
        const char *arg = argv[i];
        if (strcmp(arg, "--") == 0) break;
        if (strncmp(arg, "--", 2) != 0) continue;
        const char *eq = strchr(arg, '=');
        size_t len = eq ? (size_t)(eq - arg) : strlen(arg);
        for (int r = 0; r < cli_renamed_count; r++) {
            const cli_renamed *row = &cli_renamed_table[r];
            if (!row->option) {
                if (strlen(row->old) == len && strncmp(arg, row->old, len) == 0)
                    return renamed_error(command, row->old, row->now);
                continue;
            }
            if (strlen(row->option) != len || strncmp(arg, row->option, len) != 0) continue;
            const char *value = eq ? eq + 1 : (i + 1 < argc ? argv[i + 1] : "");
            if (strcmp(value, row->old) == 0) {
                char old[128];
                snprintf(old, sizeof old, "%s %s", row->option, row->old);
                return renamed_error(command, old, row->now);
            }
        }
    }
    return 0;
}

int cli_reject_renamed_name(const char *command, const char *name) {
    for (int r = 0; r < cli_renamed_count; r++)
        if (!cli_renamed_table[r].option && cli_renamed_table[r].old[0] != '-' &&
            strcmp(name, cli_renamed_table[r].old) == 0)
            return renamed_error(command, name, cli_renamed_table[r].now);
    return 0;
}
