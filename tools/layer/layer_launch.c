/* SPDX-License-Identifier: Apache-2.0 */
/* tools/layer/layer_launch.c: the speaker and the failure report of a checkpoint layer's launch
 * (layer_launch.h). */
#include "layer/layer_launch.h"

#include "common/cli_util.h"

int layer_launch_world(const char *backend, int64_t *ranks, mm_comm_world *world) {
    if (*ranks == 0 && cli_backend_is_threads(backend)) *ranks = 1;
    *world = (mm_comm_world){1, 0, 1};
    (void)mm_comm_backend_world(backend, (int)*ranks, world, NULL);
    return world->first_rank == 0;
}

int layer_launch_status(const char *command, mm_status st, mm_error *err, int speaker) {
    if (st == MM_OK) return MM_CLI_EXIT_OK;
    err->status = st;
    if (speaker || st == MM_ERR_TIMEOUT || st == MM_ERR_PEER) cli_report(command, err);
    return cli_exit_status(st);
}
