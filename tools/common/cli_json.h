/* SPDX-License-Identifier: Apache-2.0 */
/* tools/common/cli_json.h: `--json` output (JSON Lines): one flat object per line, written key by key, so
 * that a command prints the same row data it would print as a table cell, as a number. Strings are
 * escaped; a non-finite number is written as null (JSON has no NaN or infinity). */
#ifndef MEGAMOE_TOOLS_CLI_JSON_H
#define MEGAMOE_TOOLS_CLI_JSON_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

/* One object being written; `fields` counts the keys written so far (for the commas). */
typedef struct cli_json {
    FILE *out;
    int fields;
} cli_json;

/* Starts an object with {"type":"<type>"} (header, row, ...). */
cli_json cli_json_begin(FILE *out, const char *type);
void cli_json_str(cli_json *j, const char *key, const char *value); /* value NULL: null */
void cli_json_num(cli_json *j, const char *key, double value);      /* non-finite: null */
void cli_json_int(cli_json *j, const char *key, int64_t value);
void cli_json_null(cli_json *j, const char *key);
/* The CPU's model name (/proc/cpuinfo, x86); "" when there is none. */
void cli_cpu_model(char *buf, size_t size);
/* "cpu": the model name, else the machine type from uname. */
void cli_json_cpu(cli_json *j);
/* Ends the object and the line, and flushes (a reader sees each row as soon as it is measured). */
void cli_json_end(cli_json *j);

#endif
