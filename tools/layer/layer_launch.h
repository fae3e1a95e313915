/* SPDX-License-Identifier: Apache-2.0 */
/* tools/layer/layer_launch.h: what the commands that launch a checkpoint's layer on R ranks share
 * (`megamoe layer`, `megamoe run --model`): which process speaks, and how a failed launch is reported. */
#ifndef MEGAMOE_TOOLS_LAYER_LAUNCH_H
#define MEGAMOE_TOOLS_LAYER_LAUNCH_H

#include <stdint.h>

#include "megamoe/comm.h"

/* The world of this process on `backend`: *ranks 0 (not given) becomes 1 on the threads backend (a
 * launcher's backend brings its own count). Returns 1 when this process speaks: its first rank is rank 0
 * (every process fails alike before and at the launch, so one of them reports). */
int layer_launch_world(const char *backend, int64_t *ranks, mm_comm_world *world);

/* The exit status of a launch that ended with st: MM_CLI_EXIT_OK for MM_OK; else err (status st) is
 * reported by the speaker, and by every process when it timed out or lost a peer (each says which). */
int layer_launch_status(const char *command, mm_status st, mm_error *err, int speaker);

#endif
