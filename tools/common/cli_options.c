/* SPDX-License-Identifier: Apache-2.0 */
/* tools/common/cli_options.c: getopt_long over a table of option rows (cli_options.h). */
#include "common/cli_options.h"

#include <getopt.h>
#include <stdio.h>
#include <string.h>

#include "common/cli_threads.h"
#include "common/cli_util.h"

/* getopt_long's value of row i; a row with a short name returns that character instead. */
enum { ROW_CODE_BASE = 256 };

/* Applies one value to its row's target: 0, or -1 after one line naming the option. */
static int apply(const char *command, const cli_option *row, const char *text) {
    char option[64];
    snprintf(option, sizeof option, "--%s", row->name);
    int64_t v = 0;
    switch (row->value) {
    case CLI_VALUE_FLAG: *(int *)row->target = 1; return 0;
    case CLI_VALUE_TEXT: *(const char **)row->target = text; return 0;
    case CLI_VALUE_INT64: return cli_parse_int64(command, option, text, row->min, row->max, row->target);
    case CLI_VALUE_INT:
        if (cli_parse_int64(command, option, text, row->min, row->max, &v)) return -1;
        *(int *)row->target = (int)v;
        return 0;
    case CLI_VALUE_UINT64:
        if (cli_parse_int64(command, option, text, row->min, row->max, &v)) return -1;
        *(uint64_t *)row->target = (uint64_t)v;
        return 0;
    case CLI_VALUE_REAL:
        return cli_parse_double(command, option, text, (double)row->min, (double)row->max, row->target);
    case CLI_VALUE_DTYPE: return cli_parse_dtype(command, option, text, row->target);
    case CLI_VALUE_BACKEND: return cli_parse_backend(command, text, row->target) != 0 ? -1 : 0;
    case CLI_VALUE_THREADS:
        if (row->target && cli_parse_int64(command, option, text, row->min, row->max, row->target)) return -1;
        return cli_parse_threads(command, text);
    case CLI_VALUE_CUSTOM: return row->parse(command, option, text, row->target) != 0 ? -1 : 0;
    }
    return -1;
}

int cli_options_parse(const char *command, const char *usage, int operands, const cli_option *rows,
                      size_t count, int argc, char **argv) {
    if (count > CLI_OPTIONS_MAX) {
        cli_error(command, "internal: %zu option rows, at most %d", count, CLI_OPTIONS_MAX);
        return MM_CLI_EXIT_FAILURE;
    }
    struct option longs[CLI_OPTIONS_MAX + 2];
    char shorts[2 * CLI_OPTIONS_MAX + 3] = ":h";
    size_t n_shorts = 2;
    for (size_t i = 0; i < count; i++) {
        int has_arg = rows[i].value == CLI_VALUE_FLAG ? no_argument : required_argument;
        int code = rows[i].short_name ? rows[i].short_name : ROW_CODE_BASE + (int)i;
        longs[i] = (struct option){rows[i].name, has_arg, NULL, code};
        if (rows[i].short_name) {
            shorts[n_shorts++] = rows[i].short_name;
            if (has_arg == required_argument) shorts[n_shorts++] = ':';
            shorts[n_shorts] = '\0';
        }
    }
    longs[count] = (struct option){"help", no_argument, NULL, 'h'};
    longs[count + 1] = (struct option){NULL, 0, NULL, 0};
    optind = 0; /* a fresh scan, whatever parsed before */
    opterr = 0;
    int opt;
    while ((opt = getopt_long(argc, argv, shorts, longs, NULL)) != -1) {
        if (opt == 'h') {
            fputs(usage, stdout);
            return MM_CLI_EXIT_OK;
        }
        const cli_option *row = NULL;
        if (opt >= ROW_CODE_BASE && opt < ROW_CODE_BASE + (int)count) row = &rows[opt - ROW_CODE_BASE];
        for (size_t i = 0; !row && opt != '?' && opt != ':' && i < count; i++)
            if (rows[i].short_name == opt) row = &rows[i];
        if (!row) return cli_option_error(command, opt, argv);
        if (apply(command, row, optarg) != 0) return MM_CLI_EXIT_USAGE;
    }
    if (optind + operands < argc)
        return cli_usage_error(command, "unexpected argument '%s'", argv[optind + operands]);
    return CLI_OPTIONS_PARSED;
}
