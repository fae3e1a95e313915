/* SPDX-License-Identifier: Apache-2.0 */
/* ops/common/exchange.c: one allgather carries every rank's verdict and attribute record (see
 * exchange.h). It replaces mm_comm_agree followed by further collectives: on rank-threads sharing few
 * cores each collective can wait a time slice for a peer, so one is cheaper than three. */
#include "ops/common/exchange.h"

#include <stdlib.h>
#include <string.h>

#include "core/error.h"

typedef struct record_head {
    int64_t status;
    char message[MM_ERROR_MESSAGE_MAX];
} record_head;

static size_t align8(size_t n) {
    return (n + 7) & ~(size_t)7;
}

size_t mm_op_exchange_record_bytes(int nfields, size_t payload_bytes) {
    return sizeof(record_head) + (size_t)nfields * sizeof(int64_t) + align8(payload_bytes);
}

static uint8_t *record_of(const mm_op_exchange *x, int r) {
    return (uint8_t *)x->area + (size_t)r * x->record_bytes;
}

const int64_t *mm_op_exchange_fields_of(const mm_op_exchange *x, int r) {
    return (const int64_t *)(record_of(x, r) + sizeof(record_head));
}

const void *mm_op_exchange_payload_of(const mm_op_exchange *x, int r) {
    return record_of(x, r) + sizeof(record_head) + (size_t)x->nfields * sizeof(int64_t);
}

void mm_op_exchange_done(mm_op_exchange *x) {
    if (x->owns_area) free(x->area);
    x->area = NULL;
    x->owns_area = 0;
}

mm_status mm_op_exchange_run(mm_comm *comm, mm_op_exchange *x, mm_error *err) {
    if (x->nfields < 0 || x->nfields > MM_OP_EXCHANGE_MAX_FIELDS || x->ncompare > x->nfields)
        return mm_fail(err, MM_ERR_INVALID_ARGUMENT, "exchange: %d fields (%d compared), at most %d",
                       x->nfields, x->ncompare, MM_OP_EXCHANGE_MAX_FIELDS);
    x->comm = comm;
    x->failed_rank = -1;
    x->size = mm_comm_size(comm);
    x->record_bytes = mm_op_exchange_record_bytes(x->nfields, x->payload_bytes);
    if (!x->area) {
        x->area = malloc((size_t)(x->size + 1) * x->record_bytes);
        if (!x->area)
            return mm_fail(err, MM_ERR_OUT_OF_MEMORY, "exchange: no memory for %d records", x->size + 1);
        x->owns_area = 1;
    }
    uint8_t *mine = record_of(x, x->size);
    memset(mine, 0, x->record_bytes);
    record_head head;
    memset(&head, 0, sizeof head);
    head.status = x->local;
    if (x->local != MM_OK && x->message) strncpy(head.message, x->message, sizeof head.message - 1);
    memcpy(mine, &head, sizeof head);
    if (x->local == MM_OK || x->fields) {
        if (x->fields) memcpy(mine + sizeof head, x->fields, (size_t)x->nfields * sizeof(int64_t));
        if (x->payload && x->payload_bytes)
            memcpy(mine + sizeof head + (size_t)x->nfields * sizeof(int64_t), x->payload, x->payload_bytes);
    }
    /* Records of ranks removed from the communicator stay untouched: they read as this rank's. */
    for (int r = 0; r < x->size; r++) memcpy(record_of(x, r), mine, x->record_bytes);
    mm_status st = mm_comm_allgather(comm, mine, x->record_bytes, x->area, err);
    if (st != MM_OK) return st;
    x->ref = -1;
    for (int r = 0; r < x->size; r++) {
        if (!mm_comm_is_alive(comm, r)) continue;
        if (x->ref < 0) x->ref = r;
        memcpy(&head, record_of(x, r), sizeof head);
        if (head.status == MM_OK) continue;
        head.message[sizeof head.message - 1] = '\0';
        x->failed_rank = r;
        return mm_fail(err, (mm_status)head.status, "rank %d: %s", r, head.message);
    }
    const int64_t *ref = mm_op_exchange_fields_of(x, x->ref);
    for (int i = 0; i < x->nfields; i++) {
        x->lo[i] = x->hi[i] = ref[i];
        x->differ_rank[i] = -1;
    }
    for (int r = x->ref + 1; r < x->size; r++) {
        if (!mm_comm_is_alive(comm, r)) continue;
        const int64_t *f = mm_op_exchange_fields_of(x, r);
        for (int i = 0; i < x->nfields; i++) {
            if (f[i] < x->lo[i]) x->lo[i] = f[i];
            if (f[i] > x->hi[i]) x->hi[i] = f[i];
            if (f[i] != ref[i] && x->differ_rank[i] < 0) x->differ_rank[i] = r;
        }
    }
    return MM_OK;
}

int mm_op_exchange_differing(const mm_op_exchange *x, int rank_major) {
    int best = -1;
    for (int i = 0; i < x->ncompare; i++) {
        if (x->differ_rank[i] < 0) continue;
        if (!rank_major) return i;
        if (best < 0 || x->differ_rank[i] < x->differ_rank[best]) best = i;
    }
    return best;
}
