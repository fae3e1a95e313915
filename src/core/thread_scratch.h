/* SPDX-License-Identifier: Apache-2.0 */
/* core/thread_scratch.h: one growable scratch buffer per thread, for kernels whose working set is too
 * large for the stack of an arbitrary caller's thread (e.g. a decoded weight block of 128 KiB).
 *
 * The buffer belongs to the calling thread, lives until the thread exits (freed by a thread-specific
 * data destructor) and is reused by every later call on that thread, so the hot path never allocates.
 * Nothing may hold the pointer across a call that can itself ask for the scratch (the buffer may move
 * when it grows). */
#ifndef MEGAMOE_CORE_THREAD_SCRATCH_H
#define MEGAMOE_CORE_THREAD_SCRATCH_H

#include <stddef.h>

/* At least `bytes` bytes, 64-byte aligned, owned by the calling thread; NULL when it cannot be
 * allocated (callers keep a smaller fallback path, nothing is reported). */
void *mm_thread_scratch(size_t bytes);

#endif
