/* SPDX-License-Identifier: Apache-2.0 */
/* tools/layer/layer_trace.h: `megamoe layer --trace FILE`: the command's phases as a Chrome/Perfetto JSON
 * trace (common/cli_trace.h), kept apart from cmd_layer.c's loading logic. */
#ifndef MEGAMOE_TOOLS_LAYER_TRACE_H
#define MEGAMOE_TOOLS_LAYER_TRACE_H

#include <stdint.h>

/* Writes the phases: reading (checkpoint config and index, x) from begin to read, the launch (every rank
 * loading its experts, running the block, rank 0 writing OUT) from read to end. 0, or -1 after one error
 * line. */
int layer_trace_write(const char *path, int64_t tokens, int64_t ranks, double begin, double read, double end);

#endif
