/* SPDX-License-Identifier: Apache-2.0 */
/* tools/layer/layer_trace.c: the phases of `megamoe layer --trace` (layer_trace.h). */
#include "layer/layer_trace.h"

#include <stdio.h>

#include "common/cli_trace.h"

int layer_trace_write(const char *path, int64_t tokens, int64_t ranks, double begin, double read,
                      double end) {
    cli_trace t;
    if (cli_trace_start(&t, "layer", path, "megamoe layer") != 0) return -1;
    char args[64];
    snprintf(args, sizeof args, "\"tokens\":%lld,\"ranks\":%lld", (long long)tokens, (long long)ranks);
    cli_trace_slice(&t, 0, "read config, index and x", "setup", begin, read, args);
    cli_trace_slice(&t, 0, "load experts, run, write", "run", read, end, args);
    return cli_trace_close(&t, "layer", path);
}
