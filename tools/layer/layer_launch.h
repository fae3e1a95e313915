/* SPDX-License-Identifier: Apache-2.0 */
/* tools/layer/layer_launch.h: what the commands that launch a checkpoint's layer on R ranks share
 * (`megamoe layer`, `megamoe run --model`): which process speaks, and how a failed launch is reported. */
#ifndef MEGAMOE_TOOLS_LAYER_LAUNCH_H
#define MEGAMOE_TOOLS_LAYER_LAUNCH_H

#include <stdint.h>

#include "common/cli_options.h"
#include "layer/layer_weights.h"
#include "megamoe/comm.h"
#include "megamoe/model.h"

/* The options both commands take. */
typedef struct layer_launch_options {
    const char *model_dir;              /* --model DIR (required) */
    int64_t layer;                      /* --layer N; -1 when not given */
    int64_t ranks;                      /* --ranks R; 0 when not given */
    const char *backend;                /* --backend NAME */
    double timeout;                     /* --timeout SECONDS; 0: the library's */
    mm_moe_layer_options layer_options; /* --weights native|bf16 */
} layer_launch_options;

#define LAYER_LAUNCH_DEFAULTS                                                                                \
    {                                                                                                        \
        NULL, -1, 0, "threads", 0.0, {                                                                       \
            0                                                                                                \
        }                                                                                                    \
    }

/* Their option rows (cli_options.h), into the layer_launch_options *L. */
#define LAYER_LAUNCH_OPTIONS(L)                                                                              \
    CLI_TEXT_OPTION("model", &(L)->model_dir), CLI_INT64_OPTION("layer", &(L)->layer, 0, INT64_MAX),         \
        CLI_INT64_OPTION("ranks", &(L)->ranks, 1, MM_COMM_MAX_RANKS), CLI_BACKEND_OPTION(&(L)->backend),     \
        CLI_REAL_OPTION("timeout", &(L)->timeout, 0, 1000000000),                                            \
        CLI_CUSTOM_OPTION("weights", cli_parse_weights, &(L)->layer_options)

/* The world of this process on `backend`: *ranks 0 (not given) becomes 1 on the threads backend (a
 * launcher's backend brings its own count). Returns 1 when this process speaks: its first rank is rank 0
 * (every process fails alike before and at the launch, so one of them reports). */
int layer_launch_world(const char *backend, int64_t *ranks, mm_comm_world *world);

/* The exit status of a launch that ended with st: MM_CLI_EXIT_OK for MM_OK; else err (status st) is
 * reported by the speaker, and by every process when it timed out or lost a peer (each says which). */
int layer_launch_status(const char *command, mm_status st, mm_error *err, int speaker);

#endif
