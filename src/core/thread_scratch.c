/* SPDX-License-Identifier: Apache-2.0 */
/* core/thread_scratch.c: the per-thread scratch buffer (thread_scratch.h).
 *
 * The pointer lives in a _Thread_local slot (read without a call on the hot path); a pthread key whose
 * destructor frees the buffer is attached the first time a thread allocates, so threads that exit
 * (rank threads of mm_comm_run_threads, callers' own threads) give their buffer back. */
#include "core/thread_scratch.h"

#include <pthread.h>
#include <stdlib.h>

typedef struct scratch_slot {
    void *data;
    size_t bytes;
} scratch_slot;

static _Thread_local scratch_slot slot;
static pthread_key_t free_key;
static pthread_once_t key_once = PTHREAD_ONCE_INIT;
static int key_ok;

static void free_on_exit(void *data) {
    free(data);
}

static void make_key(void) {
    key_ok = pthread_key_create(&free_key, free_on_exit) == 0;
}

void *mm_thread_scratch(size_t bytes) {
    if (slot.bytes >= bytes && slot.data) return slot.data;
    pthread_once(&key_once, make_key);
    if (!key_ok) return NULL;
    size_t rounded = (bytes + 63) / 64 * 64;
    void *fresh = aligned_alloc(64, rounded);
    if (!fresh) return NULL;
    if (pthread_setspecific(free_key, fresh) != 0) {
        free(fresh);
        return NULL;
    }
    free(slot.data);
    slot.data = fresh;
    slot.bytes = rounded;
    return fresh;
}
