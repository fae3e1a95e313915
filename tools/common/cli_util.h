/* SPDX-License-Identifier: Apache-2.0 */
/* tools/common/cli_util.h: what every sub-command shares: exit statuses, one-line diagnostics, option values.
 *
 * Diagnostics go to stderr as exactly one line "megamoe: <command>: <message>" so that scripts (and
 * the external case-file test suites) can rely on one line per error. */
#ifndef MEGAMOE_TOOLS_CLI_UTIL_H
#define MEGAMOE_TOOLS_CLI_UTIL_H

#include <stdint.h>

#include "megamoe/dtype.h"
#include "megamoe/status.h"

#if defined(__GNUC__)
#define MM_CLI_PRINTF(fmt_idx, arg_idx) __attribute__((format(printf, fmt_idx, arg_idx)))
#else
#define MM_CLI_PRINTF(fmt_idx, arg_idx)
#endif

enum {
    MM_CLI_EXIT_OK = 0,
    MM_CLI_EXIT_FAILURE = 1, /* the system or megamoe failed (I/O, memory, internal) */
    MM_CLI_EXIT_USAGE = 2    /* bad command line or bad input file */
};

/* Prints "megamoe: <command>: <message>" on one line (newlines in the message become spaces). */
void cli_error(const char *command, const char *fmt, ...) MM_CLI_PRINTF(2, 3);

/* Fills err (may be NULL) with status and a formatted message through the library's internal mm_failv
 * (core/error.h; cli_util.c alone sees src/, the other tools only this); returns status. For the
 * tools' own failures: memory, a benchmark's check. */
mm_status cli_fail(mm_error *err, mm_status status, const char *fmt, ...) MM_CLI_PRINTF(3, 4);

/* Exit status for a library status: 2 for input errors, 1 for the others, 0 for MM_OK. */
int cli_exit_status(mm_status status);

/* Reports a library failure as one line and returns its exit status. */
int cli_report(const char *command, const mm_error *err);

/* "s" unless n is 1: "%lld rank%s" reads "1 rank", "2 ranks" (counts in headers and messages). */
const char *cli_plural_s(int64_t n);

/* Option values. Each prints one line naming the option and returns -1 when the text is not valid. */
int cli_parse_int64(const char *command, const char *option, const char *text, int64_t min, int64_t max,
                    int64_t *out);
/* A comma-separated list of at most `capacity` integers in [min, max] into out[0 .. *count) (each value
 * as cli_parse_int64 says it); too many is "<option>: at most <capacity> <noun>s", none "<option>: no
 * <noun> given". */
int cli_parse_int64_list(const char *command, const char *option, const char *text, int64_t min, int64_t max,
                         int64_t *out, int capacity, int *count, const char *noun);
int cli_parse_double(const char *command, const char *option, const char *text, double min, double max,
                     double *out);
int cli_parse_dtype(const char *command, const char *option, const char *text, mm_dtype *out);
/* --backend NAME: a name of the table of backends (megamoe/comm.h), available in this build or not;
 * *backend points to the table's copy. An unknown name is a usage error naming the available ones. */
int cli_parse_backend(const char *command, const char *text, const char **backend);
/* 1 for "threads": every rank a thread of this process (the drivers' own path). */
int cli_backend_is_threads(const char *backend);

/* Reports what getopt_long returned for an unknown option or a missing value ('?' or ':'); the
 * optstring must start with ':'. Returns MM_CLI_EXIT_USAGE. */
int cli_option_error(const char *command, int opt, char **argv);

/* Reports a usage error as one line ending "(see 'megamoe <command> --help')". Returns MM_CLI_EXIT_USAGE. */
int cli_usage_error(const char *command, const char *fmt, ...) MM_CLI_PRINTF(2, 3);
/* Makes usage errors point to the help of `command_line` ("run --op re-routing", "case-gen mega-moe"):
 * set once by a command that hands over to an operator or benchmark. */
void cli_set_help_command(const char *command_line);

#endif
