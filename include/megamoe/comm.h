/* SPDX-License-Identifier: Apache-2.0 */
/* megamoe/comm.h: the communicator every megamoe operator runs on.
 *
 * A communicator is a group of ranks that call the same collectives in the same order (SPMD). A rank
 * is either a thread of this process (mm_comm_run_threads: the default, no setup) or an MPI process
 * (mm_comm_from_mpi in megamoe/comm_mpi.h). mm_comm_launch starts ranks on a backend named at run time
 * ("threads", "mpi": the table of backends) and agrees on their outcome. The model follows NVSHMEM as used by
 * GPU MoE libraries:
 *
 *   - symmetric buffers: allocated collectively, same size on every rank, reusable across calls;
 *   - put: copy bytes into a peer's buffer at an offset (or store through a direct pointer when the
 *     peer's memory is load/store reachable, see mm_symm_peer_ptr);
 *   - signals: 64-bit counters, one per (receiver, sender) pair and buffer. A sender raises the
 *     receiver's counter after its data has landed (release); the receiver waits until the counter
 *     reaches a value (acquire), so it may start computing on a peer's rows as soon as they arrived;
 *   - collectives: barrier, alltoallv, allgather, small allreduce, and agree (an error found by one
 *     rank becomes the result on all ranks).
 *
 * No wait is unbounded. Every wait gives up after the communicator's timeout (MEGAMOE_COMM_TIMEOUT
 * seconds, default 60, or mm_comm_set_timeout) and returns MM_ERR_TIMEOUT with a message naming the
 * missing ranks, e.g. "barrier: rank 3 did not arrive within 0.2 s". After a timeout the communicator
 * is poisoned: later calls fail at once with MM_ERR_PEER, until the survivors are declared with
 * mm_comm_set_survivors (elastic continuation). From then on operations involve only survivors and
 * never wait for removed ranks; ranks keep their numbers and buffers are not rebuilt.
 *
 * Every function returns an mm_status and fills the caller-owned err (may be NULL). A rank's mm_comm
 * handle belongs to that rank: ranks never share handles. */
#ifndef MEGAMOE_COMM_H
#define MEGAMOE_COMM_H

#include <stddef.h>
#include <stdint.h>

#include "megamoe/status.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct mm_comm mm_comm;
typedef struct mm_symm mm_symm; /* one rank's handle on a symmetric buffer */

typedef enum mm_comm_backend { MM_COMM_THREADS = 0, MM_COMM_MPI = 1 } mm_comm_backend;

/* ---- threads backend ------------------------------------------------------------------------- */

/* The work of one rank. err is this rank's own error record (never NULL). */
typedef mm_status (*mm_comm_rank_fn)(mm_comm *comm, void *arg, mm_error *err);

/* Runs fn on nranks ranks (threads of this process, 1 <= nranks <= MM_COMM_MAX_RANKS) and returns
 * when all have returned. per_rank_status (nranks entries) and per_rank_err (nranks records) may be
 * NULL; they receive each rank's result. The return value is MM_OK when every rank returned MM_OK,
 * else the status of the lowest failing rank, whose message goes into err prefixed "rank N: " --
 * except when every rank failed with the same status and message (a collective error agreed with
 * mm_comm_agree, whose message already names the rank at fault): then that message is passed on as is.
 * A rank may return early (e.g. a rank removed by the elastic API): nobody blocks on it beyond the
 * communicator timeout. */
#define MM_COMM_MAX_RANKS 64
mm_status mm_comm_run_threads(int nranks, mm_comm_rank_fn fn, void *arg, mm_status *per_rank_status,
                              mm_error *per_rank_err, mm_error *err);

/* ---- MPI backend (see also megamoe/comm_mpi.h) ----------------------------------------------- */

/* 1 when this build has the MPI backend, else 0. Without it the functions below return
 * MM_ERR_UNSUPPORTED with a message saying so. */
int mm_comm_mpi_available(void);
/* Collective over MPI_COMM_WORLD (MPI must be initialized by the caller): one rank per process.
 * Free with mm_comm_free (collective) before MPI_Finalize. */
mm_status mm_comm_mpi_world(mm_comm **out, mm_error *err);
/* Same over the MPI_Comm that mpi_comm points to (use mm_comm_from_mpi in megamoe/comm_mpi.h). The
 * caller keeps ownership of its MPI_Comm; megamoe works on a duplicate. */
mm_status mm_comm_from_mpi_ptr(const void *mpi_comm, mm_comm **out, mm_error *err);

/* ---- the table of backends and the launcher -------------------------------------------------- */

/* The backends this library knows, available in this build or not ("threads", "mpi"). */
int mm_comm_backend_count(void);
const char *mm_comm_backend_name_at(int index); /* NULL outside [0, count) */
/* 1 when name is a backend available in this build. */
int mm_comm_backend_available(const char *name);
/* The available backends' names, ", "-separated (truncated to cap). */
void mm_comm_backend_list_available(char *buf, size_t cap);
/* MM_OK when name is available; else one line naming it and the available ones:
 * MM_ERR_INVALID_ARGUMENT for an unknown name, MM_ERR_UNSUPPORTED for a backend this build lacks. */
mm_status mm_comm_backend_check(const char *name, mm_error *err);

/* The world a launch would have: size ranks, of which this process runs ranks
 * [first_rank, first_rank + local_ranks). */
typedef struct mm_comm_world {
    int size, first_rank, local_ranks;
} mm_comm_world;
/* Without side effects (MPI is not initialized): threads: nranks ranks, all here; mpi: one rank per
 * process of MPI_COMM_WORLD (or of the launcher's environment before MPI_Init). nranks = 0 asks for
 * the backend's own count (mpi: the world size; threads has none). Fails as mm_comm_launch would. */
mm_status mm_comm_backend_world(const char *backend, int nranks, mm_comm_world *out, mm_error *err);

/* Starts nranks ranks on the backend named `backend` and runs fn on each of them (0 <= nranks <=
 * MM_COMM_MAX_RANKS; 0: the backend's own count):
 *   threads: nranks threads of this process (nranks >= 1);
 *   mpi:     this process is one rank of MPI_COMM_WORLD, whose size must equal nranks (unless 0). MPI is
 *            initialized when the caller has not done it, and then finalized before returning (such a
 *            process can launch on MPI once). Asking for more than 1 rank in a process not started by an
 *            MPI launcher (mpirun) fails with a message saying how to start it.
 * Every process returns the same result: MM_OK when every rank returned MM_OK, else the status of the
 * lowest failing rank with its message as that rank wrote it (not prefixed). An unknown or unavailable
 * backend fails as mm_comm_backend_check. */
mm_status mm_comm_launch(const char *backend, int nranks, mm_comm_rank_fn fn, void *arg, mm_error *err);

/* A launch that cannot end cleanly. When a rank's communicator timed out or saw a peer fail
 * (MM_ERR_TIMEOUT, MM_ERR_PEER) in a process whose MPI mm_comm_launch initialized, the launch returns
 * that status at once (prefixed "process P: ") and leaves MPI initialized: agreeing on the outcome or
 * MPI_Finalize would wait forever for the stopped or dead peer. Such a process must end the whole job:
 * after reporting the error, call mm_comm_end_broken_job, which then calls
 * MPI_Abort(MPI_COMM_WORLD, exit_code) and does not return. In every other case (threads, a clean
 * launch, MPI initialized by the caller, a build without MPI) it does nothing and returns 0, so a
 * program can call it unconditionally as its last step on failure (the megamoe CLI does). */
int mm_comm_end_broken_job(int exit_code);

/* ---- identity, settings ---------------------------------------------------------------------- */

int mm_comm_rank(const mm_comm *comm);
int mm_comm_size(const mm_comm *comm); /* ranks at creation, removed ones included */
mm_comm_backend mm_comm_backend_of(const mm_comm *comm);
const char *mm_comm_backend_name(const mm_comm *comm); /* "threads" or "mpi" */

/* Per-rank timeout of every wait, in seconds (> 0, finite). */
mm_status mm_comm_set_timeout(mm_comm *comm, double seconds, mm_error *err);
double mm_comm_timeout(const mm_comm *comm);

/* ---- elastic continuation -------------------------------------------------------------------- */

/* Every survivor calls this with the same strictly increasing list of ranks that go on (which must
 * include the caller). Local: it does not communicate (the removed ranks are gone). It clears the
 * poisoned state; later operations involve only these ranks. Symmetric buffers stay valid. */
mm_status mm_comm_set_survivors(mm_comm *comm, const int *alive_ranks, int n_alive, mm_error *err);
int mm_comm_is_alive(const mm_comm *comm, int rank);
int mm_comm_alive_count(const mm_comm *comm);

/* ---- sub-groups ------------------------------------------------------------------------------ */

/* Collective over the alive ranks: ranks with equal color form one new communicator, ordered by
 * (key, old rank). color must be >= 0. The new communicator uses the same backend and timeout. */
mm_status mm_comm_split(mm_comm *comm, int color, int key, mm_comm **out, mm_error *err);
/* Domains of ranks_per_domain consecutive ranks (which must divide the size): color = rank / n. */
mm_status mm_comm_split_domains(mm_comm *comm, int ranks_per_domain, mm_comm **out, mm_error *err);
/* The ranks that share this machine's memory (threads: all of them; MPI: MPI_COMM_TYPE_SHARED). */
mm_status mm_comm_split_node(mm_comm *comm, mm_comm **out, mm_error *err);
/* Collective over the alive ranks of a communicator made by split. Accepts NULL. */
mm_status mm_comm_free(mm_comm *comm, mm_error *err);

/* ---- collectives (over the alive ranks) ------------------------------------------------------ */

mm_status mm_comm_barrier(mm_comm *comm, mm_error *err);

/* Each rank contributes `local` and, when it is not MM_OK, the message in *err. Every rank returns
 * the same result: MM_OK if all were, else the status of the lowest failing rank with its message
 * prefixed "rank N: ". err may be NULL only when local is MM_OK. */
mm_status mm_comm_agree(mm_comm *comm, mm_status local, mm_error *err);
/* The same, with the lowest failing rank's message passed on as it wrote it (no "rank N: " prefix):
 * for messages that already say where they come from (a file, a rank), as mm_comm_launch reports. */
mm_status mm_comm_agree_as_written(mm_comm *comm, mm_status local, mm_error *err);

/* Byte alltoallv. send_counts/send_displs/recv_counts/recv_displs have size() entries, in bytes.
 * What rank p sends to me must equal recv_counts[p]: a mismatch is MM_ERR_INVALID_ARGUMENT on the
 * receiver naming the sender (other ranks may return MM_OK: follow with mm_comm_agree to make it
 * everyone's result). Entries for removed ranks are ignored and their receive blocks left untouched.
 * Send and receive buffers must not overlap. */
mm_status mm_comm_alltoallv(mm_comm *comm, const void *send, const size_t *send_counts,
                            const size_t *send_displs, void *recv, const size_t *recv_counts,
                            const size_t *recv_displs, mm_error *err);

/* Every rank contributes `bytes` bytes; recv (size() * bytes) gets rank p's block at p * bytes.
 * Blocks of removed ranks are left untouched. */
mm_status mm_comm_allgather(mm_comm *comm, const void *send, size_t bytes, void *recv, mm_error *err);

typedef enum mm_reduce_op { MM_REDUCE_SUM = 0, MM_REDUCE_MIN = 1, MM_REDUCE_MAX = 2 } mm_reduce_op;
#define MM_COMM_ALLREDUCE_MAX 64 /* small allreduce: at most this many values */
/* In place; the reduction runs in ascending rank order on every rank, so every rank gets the same
 * bits (also for doubles). */
mm_status mm_comm_allreduce_i64(mm_comm *comm, int64_t *values, int n, mm_reduce_op op, mm_error *err);
mm_status mm_comm_allreduce_f64(mm_comm *comm, double *values, int n, mm_reduce_op op, mm_error *err);

/* ---- symmetric buffers, put, signals --------------------------------------------------------- */

/* Collective: every alive rank gets `bytes` bytes (zeroed) plus one signal counter per sender
 * (zero). Reusable across any number of calls. Every rank must pass the same `bytes`: different
 * values fail on every rank with MM_ERR_INVALID_ARGUMENT naming the range asked for. */
mm_status mm_symm_alloc(mm_comm *comm, size_t bytes, mm_symm **out, mm_error *err);
/* Collective over the alive ranks. Accepts NULL. */
mm_status mm_symm_free(mm_symm *symm, mm_error *err);

size_t mm_symm_size(const mm_symm *symm);
void *mm_symm_local(mm_symm *symm); /* this rank's part */
/* Direct pointer to rank peer's part when it is load/store reachable from here (threads; MPI ranks
 * on one node), else NULL. Stores through it must be followed by mm_symm_signal to be visible. */
void *mm_symm_peer_ptr(mm_symm *symm, int peer);

/* Copies bytes from src into rank peer's part at offset. Complete (visible to the peer after a
 * following mm_symm_signal) when it returns. peer may be the caller itself. */
mm_status mm_symm_put(mm_symm *symm, int peer, size_t offset, const void *src, size_t bytes, mm_error *err);
/* Adds `add` to peer's counter for me, after all my earlier puts to peer have landed (release). */
mm_status mm_symm_signal(mm_symm *symm, int peer, uint64_t add, mm_error *err);
/* Waits until my counter for sender `peer` is >= value (acquire), or the timeout. */
mm_status mm_symm_wait(mm_symm *symm, int peer, uint64_t value, mm_error *err);
/* Waits until my counters of all alive ranks (myself included) are >= value; a timeout names every
 * rank still missing. */
mm_status mm_symm_wait_all(mm_symm *symm, uint64_t value, mm_error *err);
/* Current value of my counter for sender peer (acquire), no waiting. */
uint64_t mm_symm_signal_value(mm_symm *symm, int peer);

#ifdef __cplusplus
}
#endif
#endif
