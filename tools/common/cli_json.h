/* SPDX-License-Identifier: Apache-2.0 */
/* tools/common/cli_json.h: `--json` output (JSON Lines): one flat object per line, written key by key, so
 * that a command prints the same row data it would print as a table cell, as a number. Strings are
 * escaped; a non-finite number is written as null (JSON has no NaN or infinity). */
#ifndef MEGAMOE_TOOLS_CLI_JSON_H
#define MEGAMOE_TOOLS_CLI_JSON_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "common/timing.h"

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
void cli_json_bool(cli_json *j, const char *key, int value);
/* The CPU's model name (/proc/cpuinfo, x86); "" when there is none. */
void cli_cpu_model(char *buf, size_t size);
/* "cpu": the model name, else the machine type from uname. */
void cli_json_cpu(cli_json *j);
/* Ends the object and the line, and flushes (a reader sees each row as soon as it is measured). */
void cli_json_end(cli_json *j);

/* --json on a command whose tables are printed with printf all along (the benchmarks, `run --op`,
 * `layer`): from this call on, stdout goes to /dev/null and the JSON lines to the original standard
 * output (cli_json_out), so that no table line, note or header can mix into the JSON stream and the
 * table code needs no branch. 0, or -1 after one error line naming `command`. */
int cli_json_redirect(const char *command);
/* The JSON stream after cli_json_redirect, else NULL (the command prints its tables). */
FILE *cli_json_out(void);
/* Starts an object of `type` on cli_json_out() (call only when it is not NULL). */
cli_json cli_json_row(const char *type);
/* The header object a command's --json starts with: {"type":"header","command":<command>,<key>:<name>,
 * "cpu":..., "threads":<the worker-pool line>}; the caller adds its options and ends it. */
cli_json cli_json_header(const char *command, const char *key, const char *name);
/* A timed method's row: {"type":"row",<key>:<name>,"median_ms","min_ms","max_ms","gb_per_s"} where GB/s
 * is `gigabytes` over the median. */
void cli_json_time_row(const char *key, const char *name, cli_time_stats t, double gigabytes);

#endif
