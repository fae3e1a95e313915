/* SPDX-License-Identifier: Apache-2.0 */
/* tools/case/cmd_case.c: `megamoe case IN -o OUT`: run one operator call from a case file (docs/cli.md). */
#include <getopt.h>
#include <stdio.h>
#include <string.h>

#include "common/cli_util.h"
#include "common/commands.h"
#include "megamoe/case.h"

static const char case_usage[] =
    "usage: megamoe case IN.safetensors -o OUT.safetensors [--backend threads|mpi] [--timeout SECONDS]\n"
    "\n"
    "Runs the operator call described by the case file IN (docs/case_files.md) and writes every rank's\n"
    "outputs to OUT. OUT is written through a temporary file and renamed: on any error it is left as it\n"
    "was (or not created).\n"
    "\n"
    "options:\n"
    "  -o, --output FILE      output file (required)\n"
    "      --backend NAME     threads (default: all ranks as threads of this process) or mpi (one rank\n"
    "                         per MPI process: mpirun -n RANKS megamoe case IN -o OUT --backend mpi)\n"
    "      --timeout SECONDS  how long a rank waits for its peers before failing (0 = library default)\n"
    "      --memory-budget GB memory the case may take for inputs, outputs and the operator's\n"
    "                         workspaces (default 3/4 of physical memory); a case that needs more\n"
    "                         exits 2 naming both figures\n"
    "  -h, --help             show this help\n"
    "\n"
    "Exit status: 0 success; 2 the case file is broken or breaks an operator rule (one line on stderr\n"
    "names the tensor or attribute and the rule); 1 any other failure (I/O, memory).\n";

int mm_cli_case_main(int argc, char **argv) {
    static const struct option long_options[] = {
        {"output", required_argument, NULL, 'o'},  {"backend", required_argument, NULL, 'b'},
        {"timeout", required_argument, NULL, 't'}, {"memory-budget", required_argument, NULL, 'm'},
        {"help", no_argument, NULL, 'h'},          {NULL, 0, NULL, 0}};
    const char *out_path = NULL;
    mm_case_options options = {MM_CASE_BACKEND_THREADS, 0.0, 0};
    int opt;
    optind = 0;
    opterr = 0;
    while ((opt = getopt_long(argc, argv, ":o:h", long_options, NULL)) != -1) {
        switch (opt) {
        case 'o': out_path = optarg; break;
        case 'b': {
            const char *backend;
            if (cli_parse_backend("case", optarg, &backend) != 0) return MM_CLI_EXIT_USAGE;
            options.backend = cli_backend_is_threads(backend) ? MM_CASE_BACKEND_THREADS : MM_CASE_BACKEND_MPI;
            break;
        }
        case 't':
            if (cli_parse_double("case", "--timeout", optarg, 0.0, 1e9, &options.timeout_seconds) != 0)
                return MM_CLI_EXIT_USAGE;
            break;
        case 'm': {
            double gb;
            if (cli_parse_double("case", "--memory-budget", optarg, 1e-6, 1e9, &gb) != 0)
                return MM_CLI_EXIT_USAGE;
            options.memory_budget_bytes = (uint64_t)(gb * 1e9);
            break;
        }
        case 'h': fputs(case_usage, stdout); return MM_CLI_EXIT_OK;
        default: return cli_option_error("case", opt, argv);
        }
    }
    if (optind >= argc) return cli_usage_error("case", "missing input file IN");
    if (optind + 1 < argc) return cli_usage_error("case", "unexpected argument '%s'", argv[optind + 1]);
    if (!out_path) return cli_usage_error("case", "missing output file (-o OUT)");

    mm_error err;
    mm_error_clear(&err);
    mm_status st = mm_case_run(argv[optind], out_path, &options, &err);
    if (st != MM_OK) {
        err.status = st;
        return cli_report("case", &err);
    }
    return MM_CLI_EXIT_OK;
}
