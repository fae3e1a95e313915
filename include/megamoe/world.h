/* SPDX-License-Identifier: Apache-2.0 */
/* megamoe/world.h: a persistent world of R ranks running as threads of this process, created once and
 * used for many calls from the caller's own control flow (an inference engine's serving loop).
 *
 * mm_comm_run_threads starts R threads per call and frees their group on return; a world keeps them:
 *
 *   mm_world_create     starts R rank threads (parked, no CPU use between calls) and their communicators;
 *                       with MM_WORLD_CALLER_THREADS it starts none: the caller's own threads act as
 *                       the ranks, each using mm_world_comm(world, r) for the collectives.
 *   mm_world_run        runs fn on every rank's parked thread and returns when all returned (no thread
 *                       is started). Same result rules as mm_comm_run_threads.
 *   mm_mega_moe_world_* one host thread drives MegaMoE on all ranks of the world in one call, each rank's
 *                       inputs and outputs given (arrays of R).
 *   mm_world_free       ends the rank threads and frees the communicators.
 *
 * Buffers and weights created on a world's communicators stay valid across calls until the world is
 * freed (free them first). A world is driven by one thread at a time: mm_world_run and the
 * mm_mega_moe_world_* calls are not reentrant on the same world (MM_ERR_INVALID_ARGUMENT "busy"). A rank
 * that times out poisons its communicator as usual (comm.h); the world stays usable for
 * mm_comm_set_survivors or must be freed. */
#ifndef MEGAMOE_WORLD_H
#define MEGAMOE_WORLD_H

#include "megamoe/comm.h"
#include "megamoe/mega_moe.h"
#include "megamoe/status.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct mm_world mm_world;

enum {
    MM_WORLD_DEFAULT = 0,
    MM_WORLD_CALLER_THREADS = 1 /* start no rank threads; mm_world_run is then MM_ERR_INVALID_ARGUMENT */
};

/* nranks in [1, MM_COMM_MAX_RANKS]. */
mm_status mm_world_create(int nranks, int flags, mm_world **out, mm_error *err);
/* Waits for nothing: call it when no call is running on the world. Accepts NULL. */
mm_status mm_world_free(mm_world *world, mm_error *err);
int mm_world_size(const mm_world *world);
/* Rank r's communicator (threads backend), owned by the world. NULL for r out of range. */
mm_comm *mm_world_comm(mm_world *world, int rank);

/* Runs fn(mm_world_comm(world, r), arg, ...) on rank r's thread for every r; per_rank_status and
 * per_rank_err (nranks entries each) may be NULL. Returns like mm_comm_run_threads. */
mm_status mm_world_run(mm_world *world, mm_comm_rank_fn fn, void *arg, mm_status *per_rank_status,
                       mm_error *per_rank_err, mm_error *err);

/* ---- MegaMoE driven from one host thread --------------------------------------------------------- */

/* Creates one buffer per rank (mm_mega_moe_buffer_create on every rank's thread): buffers[R]. */
mm_status mm_mega_moe_world_buffers_create(mm_world *world, const mm_mega_moe_sizing *sizing,
                                           mm_mega_moe_buffer **buffers, mm_error *err);
/* Frees buffers[R] (collective on the world's threads). Accepts NULL entries. */
mm_status mm_mega_moe_world_buffers_free(mm_world *world, mm_mega_moe_buffer **buffers, mm_error *err);
/* One MegaMoE call on every rank: weights[r], inputs[r], outputs[r] are rank r's (as mm_mega_moe_run).
 * Errors as mm_mega_moe_run's agreed error ("rank N: ..."). */
mm_status mm_mega_moe_world_run(mm_world *world, mm_mega_moe_buffer *const *buffers,
                                const mm_mega_moe_weights *const *weights, const mm_mega_moe_attrs *attrs,
                                const mm_mega_moe_inputs *inputs, const mm_mega_moe_outputs *outputs,
                                mm_error *err);

#ifdef __cplusplus
}
#endif
#endif
