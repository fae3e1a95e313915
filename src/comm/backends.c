/* SPDX-License-Identifier: Apache-2.0 */
/* comm/backends.c: the table of communication backends and the backend-neutral launcher.
 *
 * Callers name a backend ("threads", "mpi") instead of calling its constructor, so the CLI, the case
 * runner and the benchmarks have one way to start ranks on any backend, and a new backend is one row
 * here plus its folder (see comm/backend.h). */
#include <stdio.h>
#include <string.h>

#include "comm/backend.h"
#include "core/error.h"

static const mm_comm_provider *const table[] = {&mm_comm_threads_provider, &mm_comm_mpi_provider};
enum { TABLE_SIZE = (int)(sizeof table / sizeof table[0]) };

int mm_comm_backend_count(void) {
    return TABLE_SIZE;
}

const char *mm_comm_backend_name_at(int index) {
    return index >= 0 && index < TABLE_SIZE ? table[index]->name : NULL;
}

const mm_comm_provider *mm_comm_provider_find(const char *name) {
    for (int i = 0; name && i < TABLE_SIZE; i++)
        if (strcmp(table[i]->name, name) == 0) return table[i];
    return NULL;
}

int mm_comm_backend_available(const char *name) {
    const mm_comm_provider *p = mm_comm_provider_find(name);
    return p && p->available;
}

void mm_comm_backend_list_available(char *buf, size_t cap) {
    size_t at = 0;
    if (!buf || cap == 0) return;
    buf[0] = '\0';
    for (int i = 0; i < TABLE_SIZE && at < cap; i++) {
        if (!table[i]->available) continue;
        int n = snprintf(buf + at, cap - at, "%s%s", at ? ", " : "", table[i]->name);
        if (n < 0) break;
        at += (size_t)n;
    }
}

/* The row for name when it is available; else a one-line error naming it and the available ones. */
static mm_status usable(const char *name, const mm_comm_provider **out, mm_error *err) {
    char list[256];
    mm_comm_backend_list_available(list, sizeof list);
    *out = NULL;
    if (!name) return mm_fail(err, MM_ERR_INVALID_ARGUMENT, "backend is NULL (available: %s)", list);
    const mm_comm_provider *p = mm_comm_provider_find(name);
    if (!p)
        return mm_fail(err, MM_ERR_INVALID_ARGUMENT, "backend '%s' is not a backend (available: %s)", name,
                       list);
    if (!p->available)
        return mm_fail(err, MM_ERR_UNSUPPORTED, "backend %s: %s (available: %s)", name, p->unavailable_reason,
                       list);
    *out = p;
    return MM_OK;
}

/* usable, and a rank count the backend can be asked for (0: its own). */
static mm_status usable_for(const char *name, int nranks, const mm_comm_provider **out, mm_error *err) {
    mm_status st = usable(name, out, err);
    if (st) return st;
    if (nranks < 0 || nranks > MM_COMM_MAX_RANKS)
        return mm_fail(err, MM_ERR_INVALID_ARGUMENT, "backend %s: nranks = %d is outside [0, %d]", name,
                       nranks, MM_COMM_MAX_RANKS);
    return MM_OK;
}

mm_status mm_comm_backend_check(const char *name, mm_error *err) {
    const mm_comm_provider *p;
    return usable(name, &p, err);
}

mm_status mm_comm_backend_world(const char *backend, int nranks, mm_comm_world *out, mm_error *err) {
    const mm_comm_provider *p;
    if (!out) return mm_fail(err, MM_ERR_INVALID_ARGUMENT, "mm_comm_backend_world: out is NULL");
    memset(out, 0, sizeof *out);
    mm_status st = usable_for(backend, nranks, &p, err);
    if (st) return st;
    return p->world(nranks, out, err);
}

mm_status mm_comm_launch(const char *backend, int nranks, mm_comm_rank_fn fn, void *arg, mm_error *err) {
    const mm_comm_provider *p;
    mm_status st = usable_for(backend, nranks, &p, err);
    if (st) return st;
    if (!fn) return mm_fail(err, MM_ERR_INVALID_ARGUMENT, "mm_comm_launch: fn is NULL");
    return p->launch(nranks, fn, arg, err);
}
