/* SPDX-License-Identifier: Apache-2.0 */
/* tools/common/cli_util.c: one-line diagnostics, exit statuses and strict option-value parsing. */
#include "common/cli_util.h"

#include <ctype.h>
#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "megamoe/comm.h"

/* Diagnostics must stay one line whatever the message holds, so control characters are flattened; the
 * line is composed first and written by one call, since stderr is unbuffered: written piece by piece,
 * the lines of the ranks under mpirun interleaved character by character. */
static void print_one_line(const char *command, const char *message, const char *suffix) {
    char line[2048];
    int n = snprintf(line, sizeof line, "megamoe: %s%s%s%s\n", command ? command : "", command ? ": " : "",
                     message, suffix ? suffix : "");
    size_t len = n < 0 ? 0 : (size_t)n < sizeof line ? (size_t)n : sizeof line - 1;
    for (size_t i = 0; i + 1 < len; i++)
        if (line[i] == '\n' || line[i] == '\r') line[i] = ' ';
    if (len > 0) line[len - 1] = '\n'; /* also when the line was cut */
    fwrite(line, 1, len, stderr);
}

void cli_error(const char *command, const char *fmt, ...) {
    char message[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(message, sizeof message, fmt, ap);
    va_end(ap);
    print_one_line(command, message, NULL);
}

mm_status cli_fail(mm_error *err, mm_status status, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    mm_status st = mm_failv(err, status, fmt, ap);
    va_end(ap);
    return st;
}

/* The command line whose --help a usage error points to: "run --op re-routing" rather than "run". */
static char help_command[96];

void cli_set_help_command(const char *command_line) {
    snprintf(help_command, sizeof help_command, "%s", command_line ? command_line : "");
}

int cli_usage_error(const char *command, const char *fmt, ...) {
    char message[1024], suffix[128];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(message, sizeof message, fmt, ap);
    va_end(ap);
    snprintf(suffix, sizeof suffix, " (see 'megamoe %s --help')",
             help_command[0] ? help_command
             : command       ? command
                             : "");
    print_one_line(command, message, suffix);
    return MM_CLI_EXIT_USAGE;
}

const char *cli_plural_s(int64_t n) {
    return n == 1 ? "" : "s";
}

int cli_exit_status(mm_status status) {
    if (status == MM_OK) return MM_CLI_EXIT_OK;
    return mm_status_is_input_error(status) ? MM_CLI_EXIT_USAGE : MM_CLI_EXIT_FAILURE;
}

int cli_report(const char *command, const mm_error *err) {
    const char *message = err->message[0] ? err->message : mm_status_name(err->status);
    print_one_line(command, message, NULL);
    return cli_exit_status(err->status);
}

int cli_parse_int64(const char *command, const char *option, const char *text, int64_t min, int64_t max,
                    int64_t *out) {
    char *end = NULL;
    errno = 0;
    long long v = strtoll(text, &end, 10);
    if (end == text || *end != '\0' || errno == ERANGE) {
        cli_usage_error(command, "%s '%s' is not an integer", option, text);
        return -1;
    }
    if (v < min || v > max) {
        cli_usage_error(command, "%s %lld is outside [%lld, %lld]", option, v, (long long)min,
                        (long long)max);
        return -1;
    }
    *out = (int64_t)v;
    return 0;
}

int cli_parse_int64_list(const char *command, const char *option, const char *text, int64_t min, int64_t max,
                         int64_t *out, int capacity, int *count, const char *noun) {
    char buf[256];
    snprintf(buf, sizeof buf, "%s", text);
    *count = 0;
    for (char *save = NULL, *tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
        if (*count == capacity) return cli_usage_error(command, "%s: at most %d %ss", option, capacity, noun);
        if (cli_parse_int64(command, option, tok, min, max, &out[*count])) return -1;
        (*count)++;
    }
    return *count > 0 ? 0 : cli_usage_error(command, "%s: no %s given", option, noun);
}

int cli_parse_double(const char *command, const char *option, const char *text, double min, double max,
                     double *out) {
    char *end = NULL;
    errno = 0;
    double v = strtod(text, &end);
    if (end == text || *end != '\0' || errno == ERANGE || !isfinite(v)) {
        cli_usage_error(command, "%s '%s' is not a number", option, text);
        return -1;
    }
    if (v < min || v > max) {
        cli_usage_error(command, "%s %g is outside [%g, %g]", option, v, min, max);
        return -1;
    }
    *out = v;
    return 0;
}

int cli_parse_backend(const char *command, const char *text, const char **backend) {
    /* A backend this build lacks is accepted here: running on it then fails with status 1 saying what
     * is missing (mm_comm_launch), as a build without MPI always did. */
    for (int i = 0; i < mm_comm_backend_count(); i++)
        if (strcmp(text, mm_comm_backend_name_at(i)) == 0) {
            *backend = mm_comm_backend_name_at(i);
            return 0;
        }
    char list[256];
    mm_comm_backend_list_available(list, sizeof list);
    cli_usage_error(command, "--backend '%s' is not a backend (available: %s)", text, list);
    return -1;
}

int cli_backend_is_threads(const char *backend) {
    return strcmp(backend, "threads") == 0;
}

int cli_parse_dtype(const char *command, const char *option, const char *text, mm_dtype *out) {
    mm_dtype d = mm_dtype_from_name(text);
    if (d == MM_DTYPE_INVALID) {
        /* Also the safetensors spellings in any case: i32, I32, f8_e4m3. */
        char upper[32];
        size_t n = strlen(text);
        if (n < sizeof upper) {
            for (size_t i = 0; i <= n; i++) upper[i] = (char)toupper((unsigned char)text[i]);
            d = mm_dtype_from_name(upper);
        }
    }
    if (d == MM_DTYPE_INVALID) {
        cli_usage_error(command, "%s '%s' is not a dtype name (e.g. bf16, f16, int8, fp8_e4m3fn)", option,
                        text);
        return -1;
    }
    *out = d;
    return 0;
}

int cli_option_error(const char *command, int opt, char **argv) {
    /* getopt_long leaves the offending word just before optind. */
    const char *word = optind > 0 ? argv[optind - 1] : "?";
    if (opt == ':') return cli_usage_error(command, "option '%s' needs a value", word);
    if (optopt && optopt != '?' && strncmp(word, "--", 2) != 0)
        return cli_usage_error(command, "unknown option '-%c'", optopt);
    return cli_usage_error(command, "unknown option '%s'", word);
}
