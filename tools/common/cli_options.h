/* SPDX-License-Identifier: Apache-2.0 */
/* tools/common/cli_options.h: a command's options as a table. Each row names a long option, the kind of
 * value it takes and where the value goes; cli_options_parse runs getopt_long over the rows, checks each
 * value (one usage line naming the option when it is not valid), answers -h / --help and refuses
 * arguments the command does not take. A command keeps only the checks that join several options. */
#ifndef MEGAMOE_TOOLS_CLI_OPTIONS_H
#define MEGAMOE_TOOLS_CLI_OPTIONS_H

#include <stddef.h>
#include <stdint.h>

typedef enum cli_value {
    CLI_VALUE_FLAG,    /* int *: 1 when given; the option takes no value */
    CLI_VALUE_TEXT,    /* const char **: the value as given */
    CLI_VALUE_INT64,   /* int64_t *: an integer in [min, max] */
    CLI_VALUE_INT,     /* int *: an integer in [min, max] */
    CLI_VALUE_UINT64,  /* uint64_t *: an integer in [min, max], min >= 0 (a seed) */
    CLI_VALUE_REAL,    /* double *: a number in [min, max] */
    CLI_VALUE_DTYPE,   /* mm_dtype *: a dtype name (cli_parse_dtype) */
    CLI_VALUE_BACKEND, /* const char **: a communicator backend (cli_parse_backend) */
    CLI_VALUE_THREADS, /* the worker pool's --threads (cli_parse_threads); a non-NULL int64_t * target also
                          gets the number, which must then be in [min, max] first */
    CLI_VALUE_CUSTOM   /* parse(command, "--name", value, target): 0, or -1 after one line */
} cli_value;

typedef int (*cli_option_parse_fn)(const char *command, const char *option, const char *text, void *target);

typedef struct cli_option {
    const char *name; /* the long name without its dashes: "hidden" for --hidden */
    cli_value value;
    void *target;
    int64_t min, max;          /* the accepted range of the number kinds */
    cli_option_parse_fn parse; /* CLI_VALUE_CUSTOM */
    char short_name;           /* 'o' for -o; 0 for none */
} cli_option;

/* Rows of the common kinds. */
#define CLI_FLAG_OPTION(NAME, TARGET)                                                                        \
    { .name = NAME, .value = CLI_VALUE_FLAG, .target = (TARGET) }
#define CLI_TEXT_OPTION(NAME, TARGET)                                                                        \
    { .name = NAME, .value = CLI_VALUE_TEXT, .target = (TARGET) }
#define CLI_INT64_OPTION(NAME, TARGET, MIN, MAX)                                                             \
    { .name = NAME, .value = CLI_VALUE_INT64, .target = (TARGET), .min = (MIN), .max = (MAX) }
#define CLI_INT_OPTION(NAME, TARGET, MIN, MAX)                                                               \
    { .name = NAME, .value = CLI_VALUE_INT, .target = (TARGET), .min = (MIN), .max = (MAX) }
#define CLI_REAL_OPTION(NAME, TARGET, MIN, MAX)                                                              \
    { .name = NAME, .value = CLI_VALUE_REAL, .target = (TARGET), .min = (MIN), .max = (MAX) }
#define CLI_DTYPE_OPTION(NAME, TARGET)                                                                       \
    { .name = NAME, .value = CLI_VALUE_DTYPE, .target = (TARGET) }
#define CLI_CUSTOM_OPTION(NAME, PARSE, TARGET)                                                               \
    { .name = NAME, .value = CLI_VALUE_CUSTOM, .target = (TARGET), .parse = (PARSE) }
/* --seed S: any integer in [0, INT64_MAX] into a uint64_t. */
#define CLI_SEED_OPTION(TARGET)                                                                              \
    { .name = "seed", .value = CLI_VALUE_UINT64, .target = (TARGET), .max = INT64_MAX }
/* --threads N: the pool's size alone. */
#define CLI_THREADS_OPTION                                                                                   \
    { .name = "threads", .value = CLI_VALUE_THREADS }
/* --threads N, the number also kept in the int64_t *TARGET (a benchmark's own threads), in [MIN, MAX]. */
#define CLI_THREADS_COUNT_OPTION(TARGET, MIN, MAX)                                                           \
    { .name = "threads", .value = CLI_VALUE_THREADS, .target = (TARGET), .min = (MIN), .max = (MAX) }
#define CLI_BACKEND_OPTION(TARGET)                                                                           \
    { .name = "backend", .value = CLI_VALUE_BACKEND, .target = (TARGET) }
/* -o FILE, --output FILE */
#define CLI_OUTPUT_OPTION(TARGET)                                                                            \
    { .name = "output", .value = CLI_VALUE_TEXT, .target = (TARGET), .short_name = 'o' }

/* The most rows one command has. */
#define CLI_OPTIONS_MAX 64

/* What cli_options_parse returns when every option was applied: the command goes on with its `operands`
 * arguments (at most) in argv[optind..argc). Any other value is the exit status the command returns at
 * once: MM_CLI_EXIT_OK after printing `usage` for -h / --help, MM_CLI_EXIT_USAGE after one usage line. */
#define CLI_OPTIONS_PARSED (-1)

/* Parses argv[1..] (argv permuted the way getopt_long does: the other arguments end up last). */
int cli_options_parse(const char *command, const char *usage, int operands, const cli_option *rows,
                      size_t count, int argc, char **argv);

#endif
