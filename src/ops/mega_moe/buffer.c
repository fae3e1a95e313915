/* SPDX-License-Identifier: Apache-2.0 */
/* ops/mega_moe/buffer.c: the lifetime of a MegaMoE buffer: sizing checks, the symmetric areas, the
 * private workspace (grown on demand, kept across calls) and validation's record area. */
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "ops/common/exchange.h"
#include "ops/common/symm_area.h"
#include "ops/mega_moe/buffer.h"
#include "ops/mega_moe/plan.h"

static size_t round_up(size_t v, size_t a) {
    return (v + a - 1) / a * a;
}

/* Byte sizes of a buffer's symmetric areas. */
typedef struct area_sizes {
    size_t recv, comb, relay;
} area_sizes;

/* The slot sizes and capacities of a buffer's areas and their byte sizes: one computation for
 * check_sizing, mm_mega_moe_buffer_create and mm_mega_moe_buffer_bytes_for. -1 when a size overflows
 * (the caller has checked the sizing's other rules: hidden <= 2^24, world x local experts = E < 2^31). */
static int size_areas(mm_mega_moe_buffer *b, const mm_mega_moe_sizing *sizing, int world, area_sizes *out) {
    b->local_experts = sizing->moe_expert_num / world;
    int64_t H = sizing->hidden, K = sizing->topk, M = sizing->num_max_tokens_per_rank;
    int64_t per_source = K < b->local_experts ? K : b->local_experts;
    /* M < 2^31 and world x per_source <= E < 2^31: no int64 overflow */
    b->recv_capacity = sizing->max_recv_token_num > 0 ? sizing->max_recv_token_num : M * world * per_source;
    b->recv_scale_offset = round_up((size_t)(2 * H), 64);
    b->recv_header_offset = b->recv_scale_offset + round_up((size_t)((H + 31) / 32), 16);
    b->recv_slot_bytes = round_up(b->recv_header_offset + sizeof(mm_moe_row_header), 64);
    b->comb_slot_bytes = round_up((size_t)(2 * H), 64);
    b->relay_slot_bytes = round_up(sizeof(mm_moe_relay_header) + (size_t)(2 * H), 64);
    int64_t mk = M * K; /* both < 2^31 */
    if (__builtin_mul_overflow(mk, (int64_t)world, &b->relay_slots) ||
        __builtin_mul_overflow((size_t)b->recv_capacity, b->recv_slot_bytes, &out->recv) ||
        __builtin_mul_overflow((size_t)mk, b->comb_slot_bytes, &out->comb) ||
        __builtin_mul_overflow((size_t)b->relay_slots, b->relay_slot_bytes, &out->relay))
        return -1;
    return 0;
}

static mm_status check_sizing(const mm_mega_moe_sizing *s, int world, mm_error *err) {
    if (s->moe_expert_num < 1 || s->moe_expert_num % world != 0)
        return mm_fail(err, MM_ERR_INVALID_ARGUMENT,
                       "moe_expert_num = %" PRId64 " must be a positive multiple of ep_world_size = %d",
                       s->moe_expert_num, world);
    if (s->moe_expert_num > INT32_MAX)
        return mm_fail(err, MM_ERR_INVALID_ARGUMENT, "moe_expert_num = %" PRId64 " exceeds INT32_MAX",
                       s->moe_expert_num);
    if (s->num_max_tokens_per_rank < 1 || s->num_max_tokens_per_rank > INT32_MAX)
        return mm_fail(err, MM_ERR_INVALID_ARGUMENT,
                       "num_max_tokens_per_rank = %" PRId64 " is outside [1, %d]", s->num_max_tokens_per_rank,
                       INT32_MAX);
    if (s->topk < 1 || s->topk > s->moe_expert_num)
        return mm_fail(err, MM_ERR_INVALID_ARGUMENT,
                       "topk = %" PRId64 " is outside [1, moe_expert_num = %" PRId64 "]", s->topk,
                       s->moe_expert_num);
    if (s->hidden < 1 || s->hidden > (INT64_C(1) << 24))
        return mm_fail(err, MM_ERR_INVALID_ARGUMENT, "hidden = %" PRId64 " is outside [1, 2^24]", s->hidden);
    if (s->intermediate_hidden < 2 || s->intermediate_hidden % 2 != 0 ||
        s->intermediate_hidden > (INT64_C(1) << 24))
        return mm_fail(err, MM_ERR_INVALID_ARGUMENT,
                       "intermediate_hidden = %" PRId64 " must be even and in [2, 2^24]",
                       s->intermediate_hidden);
    if (s->max_recv_token_num < 0)
        return mm_fail(err, MM_ERR_INVALID_ARGUMENT, "max_recv_token_num = %" PRId64 " is negative",
                       s->max_recv_token_num);
    mm_mega_moe_buffer b;
    area_sizes bytes = {0, 0, 0};
    if (size_areas(&b, s, world, &bytes) != 0)
        return mm_fail(err, MM_ERR_INVALID_ARGUMENT,
                       "the symmetric areas of this sizing (max_recv_token_num = %" PRId64
                       ", num_max_tokens_per_rank = %" PRId64 ", topk = %" PRId64 ", hidden = %" PRId64
                       ", %d ranks) overflow the address space",
                       s->max_recv_token_num, s->num_max_tokens_per_rank, s->topk, s->hidden, world);
    return MM_OK;
}

size_t mm_mega_moe_buffer_bytes_for(const mm_mega_moe_sizing *sizing, int world, int with_relay) {
    if (!sizing || world < 1 || world > MM_COMM_MAX_RANKS || check_sizing(sizing, world, NULL) != MM_OK)
        return 0;
    mm_mega_moe_buffer b;
    area_sizes bytes = {0, 0, 0};
    size_areas(&b, sizing, world, &bytes); /* checked by check_sizing */
    size_t total;
    if (__builtin_add_overflow(bytes.recv, bytes.comb, &total) ||
        (with_relay && __builtin_add_overflow(total, bytes.relay, &total)))
        return 0;
    return total;
}

/* One exchange (ops/common/exchange.h): every rank learns the lowest failing rank's verdict, else
 * whether every sizing field is equal on all ranks. */
static mm_status agree_sizing(mm_comm *comm, mm_status local, const mm_mega_moe_sizing *s, mm_error *err) {
    static const char *const names[] = {"moe_expert_num", "num_max_tokens_per_rank", "topk",
                                        "hidden",         "intermediate_hidden",     "max_recv_token_num"};
    int64_t fields[6] = {s->moe_expert_num, s->num_max_tokens_per_rank, s->topk,
                         s->hidden,         s->intermediate_hidden,     s->max_recv_token_num};
    mm_op_exchange x = {
        .local = local, .message = err->message, .fields = fields, .nfields = 6, .ncompare = 6};
    mm_status st = mm_op_exchange_run(comm, &x, err);
    if (st != MM_OK && x.failed_rank < 0) mm_error_prefix(err, "agree"); /* a communication failure */
    int i = st == MM_OK ? mm_op_exchange_differing(&x, 0) : -1;
    if (i >= 0) /* the range first (as before), then the first pair of ranks that differ */
        st = mm_fail(err, MM_ERR_INVALID_ARGUMENT,
                     "sizing %s differs between ranks (from %" PRId64 " to %" PRId64
                     "): it must be equal (rank %d has %" PRId64 ", rank %d has %" PRId64 ")",
                     names[i], x.lo[i], x.hi[i], x.ref, mm_op_exchange_fields_of(&x, x.ref)[i],
                     x.differ_rank[i], mm_op_exchange_fields_of(&x, x.differ_rank[i])[i]);
    mm_op_exchange_done(&x);
    return st;
}

mm_status mm_mega_moe_buffer_create(mm_comm *comm, const mm_mega_moe_sizing *sizing, mm_mega_moe_buffer **out,
                                    mm_error *err) {
    if (!comm || !sizing || !out)
        return mm_fail(err, MM_ERR_INVALID_ARGUMENT, "comm, sizing and out must not be NULL");
    *out = NULL;
    mm_error local;
    mm_error_clear(&local);
    mm_mega_moe_buffer *b = NULL;
    int world = mm_comm_size(comm);
    mm_status st = check_sizing(sizing, world, &local);
    if (st == MM_OK) {
        b = calloc(1, sizeof *b);
        if (b)
            b->check_area = malloc((size_t)(world + 1) * mm_moe_check_record_bytes(sizing->moe_expert_num));
        if (!b || !b->check_area)
            st = mm_fail(&local, MM_ERR_OUT_OF_MEMORY, "mega_moe buffer: out of memory");
    }
    st = agree_sizing(comm, st, sizing, &local);
    if (st != MM_OK) goto fail;
    b->comm = comm;
    b->rank = mm_comm_rank(comm);
    b->world = world;
    b->sizing = *sizing;
    area_sizes bytes = {0, 0, 0};
    size_areas(b, sizing, world, &bytes); /* checked by check_sizing */
    st = mm_op_symm_grow(comm, &b->recv, bytes.recv, MM_OP_GROW_EXACT, NULL, &local);
    if (st == MM_OK) st = mm_op_symm_grow(comm, &b->comb, bytes.comb, MM_OP_GROW_EXACT, NULL, &local);
    if (st != MM_OK) goto fail;
    *out = b;
    return MM_OK;
fail:
    if (b) {
        mm_symm_free(b->comb, NULL);
        mm_symm_free(b->recv, NULL);
        free(b->check_area);
        free(b);
    }
    return mm_fail(err, st, "%s", local.message);
}

mm_status mm_moe_relay_area(mm_mega_moe_buffer *buf, mm_error *err) {
    /* Collective: every rank reaches this in the same call (the attributes were checked equal). Its
     * size never changes, so the area is allocated once and its epoch never restarts. */
    return mm_op_symm_grow(buf->comm, &buf->relay, (size_t)buf->relay_slots * buf->relay_slot_bytes,
                           MM_OP_GROW_EXACT, NULL, err);
}

mm_status mm_mega_moe_buffer_free(mm_mega_moe_buffer *buffer, mm_error *err) {
    if (!buffer) return MM_OK;
    mm_status st = mm_symm_free(buffer->relay, err);
    mm_status s2 = mm_symm_free(buffer->comb, st == MM_OK ? err : NULL);
    mm_status s3 = mm_symm_free(buffer->recv, st == MM_OK && s2 == MM_OK ? err : NULL);
    free(buffer->workspace);
    free(buffer->check_area);
    free(buffer);
    if (st != MM_OK) return st;
    return s2 != MM_OK ? s2 : s3;
}

const mm_mega_moe_sizing *mm_mega_moe_buffer_sizing(const mm_mega_moe_buffer *buffer) {
    return buffer ? &buffer->sizing : NULL;
}

size_t mm_mega_moe_buffer_symmetric_bytes(const mm_mega_moe_buffer *buffer) {
    if (!buffer) return 0;
    size_t n = mm_symm_size(buffer->recv) + mm_symm_size(buffer->comb);
    if (buffer->relay) n += mm_symm_size(buffer->relay);
    return n;
}

mm_status mm_moe_workspace(mm_mega_moe_buffer *buf, size_t bytes, void **out, mm_error *err) {
    if (bytes > buf->workspace_bytes) {
        void *p = malloc(bytes);
        if (!p)
            return mm_fail(err, MM_ERR_OUT_OF_MEMORY, "mega_moe workspace of %zu bytes: out of memory",
                           bytes);
        free(buf->workspace);
        buf->workspace = p;
        buf->workspace_bytes = bytes;
    }
    *out = buf->workspace;
    return MM_OK;
}
