/* SPDX-License-Identifier: Apache-2.0 */
/* ops/dispatch_combine/dc_check.c: the validation rules Dispatch V3 and Combine V2 share (attributes,
 * elastic_info, expert ids, masks) and the cross-rank check that every rank called with the same
 * attributes. Messages name the parameter, its value and the rule. */
#include <inttypes.h>
#include <math.h>
#include <stddef.h>
#include <string.h>

#include "core/error.h"
#include "ops/common/exchange.h"
#include "ops/dispatch_combine/dc_internal.h"

mm_dc_attrs mm_dc_default_attrs(void) {
    mm_dc_attrs a;
    memset(&a, 0, sizeof a);
    a.ep_world_size = 1;
    a.moe_expert_num = 1;
    a.expert_token_nums_type = MM_DC_TOKEN_NUMS_COUNTS;
    a.norm_eps = 1e-6f;
    return a;
}

int mm_dc_token_active(const dc_mask *m, int64_t i) {
    if (m->kind == DC_MASK_PER_TOKEN) return m->data[i] != 0;
    if (m->kind == DC_MASK_PER_PAIR) {
        for (int64_t k = 0; k < m->K; k++)
            if (m->data[i * m->K + k]) return 1;
        return 0;
    }
    return 1;
}

int64_t mm_dc_bs_bound(const mm_dc_attrs *a, int64_t bs) {
    return a->global_bs ? a->global_bs / a->ep_world_size : bs;
}

#define RANGE(name, v, lo, hi)                                                                               \
    do {                                                                                                     \
        if ((v) < (lo) || (v) > (hi))                                                                        \
            return mm_fail(err, MM_ERR_INVALID_ARGUMENT,                                                     \
                           "%s = %" PRId64 " is outside [%" PRId64 ", %" PRId64 "]", name, (int64_t)(v),     \
                           (int64_t)(lo), (int64_t)(hi));                                                    \
    } while (0)

mm_status mm_dc_check_attrs(const mm_dc_attrs *a, int combine, dc_topology *t, mm_error *err) {
    if (!a) return mm_fail(err, MM_ERR_INVALID_ARGUMENT, "attrs is NULL");
    memset(t, 0, sizeof *t);
    RANGE("ep_world_size", a->ep_world_size, 1, DC_MAX_RANKS);
    RANGE("tp_world_size", a->tp_world_size, 0, 2);
    int64_t tpw = a->tp_world_size > 1 ? a->tp_world_size : 1;
    if (a->ep_world_size * tpw > DC_MAX_RANKS)
        return mm_fail(err, MM_ERR_INVALID_ARGUMENT,
                       "ep_world_size x tp_world_size = %" PRId64 " exceeds the %d ranks a communicator has",
                       a->ep_world_size * tpw, DC_MAX_RANKS);
    RANGE("ep_rank_id", a->ep_rank_id, 0, a->ep_world_size - 1);
    RANGE("tp_rank_id", a->tp_rank_id, 0, tpw - 1);
    if (a->expert_shard_type != MM_DC_SHARD_SHARED_FIRST)
        return mm_fail(err, MM_ERR_INVALID_ARGUMENT,
                       "expert_shard_type = %" PRId64 " is not supported (only 0: shared-expert ranks first)",
                       a->expert_shard_type);
    RANGE("shared_expert_num", a->shared_expert_num, 0, 4);
    RANGE("shared_expert_rank_num", a->shared_expert_rank_num, 0, a->ep_world_size - 1);
    if (a->shared_expert_num == 0 && a->shared_expert_rank_num != 0)
        return mm_fail(err, MM_ERR_INVALID_ARGUMENT,
                       "shared_expert_rank_num = %" PRId64 " needs shared_expert_num > 0 (it is 0)",
                       a->shared_expert_rank_num);
    if (a->shared_expert_num > 0 &&
        (a->shared_expert_rank_num == 0 || a->shared_expert_rank_num % a->shared_expert_num != 0))
        return mm_fail(err, MM_ERR_INVALID_ARGUMENT,
                       "shared_expert_rank_num = %" PRId64
                       " must be a positive multiple of shared_expert_num = %" PRId64,
                       a->shared_expert_rank_num, a->shared_expert_num);
    int64_t moe_ranks = a->ep_world_size - a->shared_expert_rank_num;
    RANGE("moe_expert_num", a->moe_expert_num, 1, INT32_MAX);
    if (a->moe_expert_num % moe_ranks != 0)
        return mm_fail(err, MM_ERR_INVALID_ARGUMENT,
                       "moe_expert_num = %" PRId64 " is not divisible by the %" PRId64
                       " routed-expert ranks (ep_world_size - shared_expert_rank_num)",
                       a->moe_expert_num, moe_ranks);
    if (a->quant_mode != MM_DC_QUANT_NONE && a->quant_mode != MM_DC_QUANT_INT8_PER_TOKEN)
        return mm_fail(err, MM_ERR_INVALID_ARGUMENT,
                       "quant_mode = %" PRId64 " is not supported (0: none, 2: dynamic INT8 per token)",
                       a->quant_mode);
    if (a->global_bs < 0 || (a->global_bs > 0 && a->global_bs % a->ep_world_size != 0))
        return mm_fail(err, MM_ERR_INVALID_ARGUMENT,
                       "global_bs = %" PRId64 " must be 0 or a positive multiple of ep_world_size = %" PRId64,
                       a->global_bs, a->ep_world_size);
    if (a->expert_token_nums_type != MM_DC_TOKEN_NUMS_CUMULATIVE &&
        a->expert_token_nums_type != MM_DC_TOKEN_NUMS_COUNTS)
        return mm_fail(err, MM_ERR_INVALID_ARGUMENT,
                       "expert_token_nums_type = %" PRId64 " is not 0 (cumulative) or 1 (counts)",
                       a->expert_token_nums_type);
    RANGE("zero_expert_num", a->zero_expert_num, 0, INT32_MAX);
    RANGE("copy_expert_num", a->copy_expert_num, 0, INT32_MAX);
    RANGE("const_expert_num", a->const_expert_num, 0, INT32_MAX);
    if (a->moe_expert_num + a->zero_expert_num + a->copy_expert_num + a->const_expert_num >= INT32_MAX)
        return mm_fail(err, MM_ERR_INVALID_ARGUMENT,
                       "moe_expert_num + zero_expert_num + copy_expert_num + const_expert_num = %" PRId64
                       " must be below 2147483647",
                       a->moe_expert_num + a->zero_expert_num + a->copy_expert_num + a->const_expert_num);
    if (a->comm_alg && a->comm_alg[0])
        return mm_fail(err, MM_ERR_INVALID_ARGUMENT,
                       "comm_alg = \"%.64s\" is reserved and must be empty or absent", a->comm_alg);
    t->R = a->ep_world_size;
    t->tpw = tpw;
    t->ep_rank = a->ep_rank_id;
    t->tp_rank = a->tp_rank_id;
    t->L = a->moe_expert_num / moe_ranks;
    t->S = a->shared_expert_num;
    t->Z = a->zero_expert_num;
    t->C = a->copy_expert_num;
    t->N = a->const_expert_num;
    if (tpw > 1 && t->L != 1)
        return mm_fail(
            err, MM_ERR_INVALID_ARGUMENT,
            "tp_world_size = 2 needs one expert per routed-expert rank, but local_expert_num = %" PRId64
            " (moe_expert_num / routed-expert ranks)",
            t->L);
    if (combine) {
        if (!isfinite(a->norm_eps) || a->norm_eps < 0.0f)
            return mm_fail(err, MM_ERR_INVALID_ARGUMENT, "norm_eps = %g must be finite and >= 0",
                           (double)a->norm_eps);
        if (a->out_dtype != 0)
            return mm_fail(err, MM_ERR_INVALID_ARGUMENT, "out_dtype = %" PRId64 " is reserved and must be 0",
                           a->out_dtype);
        if (a->comm_quant_mode != 0)
            return mm_fail(err, MM_ERR_INVALID_ARGUMENT,
                           "comm_quant_mode = %" PRId64 " is reserved and must be 0", a->comm_quant_mode);
        if (a->group_list_type != 0)
            return mm_fail(err, MM_ERR_INVALID_ARGUMENT,
                           "group_list_type = %" PRId64 " is reserved and must be 0", a->group_list_type);
    }
    /* Without scale-in: identity numbering. */
    t->R_eff = t->R;
    t->shared_ranks = a->shared_expert_rank_num;
    t->routed_experts = a->moe_expert_num;
    for (int64_t r = 0; r < t->R; r++) t->new_of_old[r] = t->old_of_new[r] = (int32_t)r;
    return MM_OK;
}

static mm_status check_elastic_tables(const int32_t *v, const mm_dc_attrs *a, dc_topology *t, mm_error *err) {
    int64_t R = t->R;
    if (t->tpw > 1)
        return mm_fail(err, MM_ERR_INVALID_ARGUMENT,
                       "elastic_info[0] = 1 (scale-in) is not allowed with tp_world_size = 2");
    if (v[1] < 1 || v[1] > R)
        return mm_fail(err, MM_ERR_INVALID_ARGUMENT,
                       "elastic_info[1] = %d (ranks after scale-in) is outside [1, %" PRId64 "]", v[1], R);
    int64_t R2 = v[1], sh = v[2];
    if (sh < 0 || sh >= R2)
        return mm_fail(err, MM_ERR_INVALID_ARGUMENT,
                       "elastic_info[2] = %d (shared-expert ranks after scale-in) is outside [0, %" PRId64
                       ")",
                       v[2], R2);
    if ((t->S == 0 && sh != 0) || (t->S > 0 && (sh == 0 || sh % t->S != 0)))
        return mm_fail(err, MM_ERR_INVALID_ARGUMENT,
                       "elastic_info[2] = %d must be %s shared_expert_num = %" PRId64, v[2],
                       t->S ? "a positive multiple of" : "0 with", t->S);
    if ((int64_t)v[3] != t->L * (R2 - sh))
        return mm_fail(
            err, MM_ERR_INVALID_ARGUMENT,
            "elastic_info[3] = %d (routed experts after scale-in) must be local_expert_num %" PRId64
            " x routed-expert ranks %" PRId64 " = %" PRId64 " (each rank keeps its experts)",
            v[3], t->L, R2 - sh, t->L * (R2 - sh));
    const int32_t *t1 = v + 4, *t2 = v + 4 + R;
    int64_t alive = 0;
    for (int64_t r = 0; r < R; r++) {
        if (t1[r] < -1 || t1[r] >= R2)
            return mm_fail(err, MM_ERR_INVALID_ARGUMENT,
                           "elastic_info[%" PRId64 "] = %d (new rank of rank %" PRId64
                           ") must be -1 or in [0, %" PRId64 ")",
                           4 + r, t1[r], r, R2);
        alive += t1[r] >= 0;
    }
    if (alive != R2)
        return mm_fail(err, MM_ERR_INVALID_ARGUMENT,
                       "elastic_info table 1 keeps %" PRId64 " ranks but elastic_info[1] = %" PRId64, alive,
                       R2);
    for (int64_t n = 0; n < R; n++) {
        int32_t o = t2[n];
        if (n >= R2) {
            if (o != -1)
                return mm_fail(err, MM_ERR_INVALID_ARGUMENT,
                               "elastic_info[%" PRId64 "] = %d must be -1 (padding after %" PRId64
                               " survivors)",
                               4 + R + n, o, R2);
            continue;
        }
        if (o < 0 || o >= R || t1[o] != n)
            return mm_fail(err, MM_ERR_INVALID_ARGUMENT,
                           "elastic_info[%" PRId64 "] = %d (old rank of new rank %" PRId64
                           ") does not invert table 1 (the tables must be a bijection between survivors)",
                           4 + R + n, o, n);
    }
    for (int64_t r = 0; r < R; r++) {
        t->new_of_old[r] = t1[r];
        t->old_of_new[r] = t2[r];
        if (t1[r] >= 0 && t->L != 1 && ((r < a->shared_expert_rank_num) != (t1[r] < sh)))
            return mm_fail(err, MM_ERR_INVALID_ARGUMENT,
                           "elastic_info makes rank %" PRId64
                           " a %s rank but it was a %s rank (each rank keeps "
                           "its experts)",
                           r, t1[r] < sh ? "shared-expert" : "routed-expert",
                           r < a->shared_expert_rank_num ? "shared-expert" : "routed-expert");
    }
    if (t1[t->ep_rank] < 0)
        return mm_fail(err, MM_ERR_INVALID_ARGUMENT,
                       "ep_rank_id = %" PRId64 " is removed by elastic_info but called the operator",
                       t->ep_rank);
    t->elastic = 1;
    t->R_eff = R2;
    t->shared_ranks = sh;
    t->routed_experts = v[3];
    return MM_OK;
}

mm_status mm_dc_check_elastic(const mm_tensor *info, const mm_dc_attrs *a, mm_comm *comm, dc_topology *t,
                              mm_error *err) {
    if (info) {
        mm_status st = mm_op_check_tensor(info, "elastic_info", MM_DTYPE_I32, 1, err);
        if (st) return st;
        if (info->shape[0] != 4 + 2 * t->R)
            return mm_fail(err, MM_ERR_INVALID_ARGUMENT,
                           "elastic_info has %" PRId64 " entries, expected 4 + 2 x ep_world_size = %" PRId64,
                           info->shape[0], 4 + 2 * t->R);
        const int32_t *v = info->data;
        if (v[0] != 0 && v[0] != 1)
            return mm_fail(err, MM_ERR_INVALID_ARGUMENT, "elastic_info[0] = %d is not 0 or 1", v[0]);
        if (v[0] == 1 && (st = check_elastic_tables(v, a, t, err)) != MM_OK) return st;
    }
    t->my_new = t->new_of_old[t->ep_rank];
    t->is_shared = t->my_new < t->shared_ranks;
    t->my_L = t->is_shared ? 1 : t->L;
    if (!comm) return MM_OK; /* shape queries: no communicator yet */
    if (mm_comm_size(comm) != t->R * t->tpw)
        return mm_fail(
            err, MM_ERR_INVALID_ARGUMENT,
            "the communicator has %d ranks, expected ep_world_size x max(tp_world_size, 1) = %" PRId64,
            mm_comm_size(comm), t->R * t->tpw);
    if (mm_comm_rank(comm) != t->ep_rank * t->tpw + t->tp_rank)
        return mm_fail(
            err, MM_ERR_INVALID_ARGUMENT,
            "communicator rank %d is not ep_rank_id x max(tp_world_size, 1) + tp_rank_id = %" PRId64,
            mm_comm_rank(comm), t->ep_rank * t->tpw + t->tp_rank);
    /* With TP = 2 there is no scale-in (check_elastic_tables refuses it): every rank of the
     * communicator, TP rank 1 included, must be alive, or a peer's buffers would be missing. */
    for (int64_t q = 0; t->tpw > 1 && q < t->R * t->tpw; q++)
        if (!mm_comm_is_alive(comm, (int)q))
            return mm_fail(err, MM_ERR_INVALID_ARGUMENT,
                           "rank %" PRId64 " (ep_rank %" PRId64 ", tp_rank %" PRId64
                           ") was removed from the communicator, but tp_world_size = 2 allows no elastic "
                           "scale-in (every rank must call)",
                           q, q / t->tpw, q % t->tpw);
    for (int64_t r = 0; r < t->R; r++) {
        int kept = t->new_of_old[r] >= 0, alive = mm_comm_is_alive(comm, (int)(r * t->tpw));
        if (kept && !alive)
            return mm_fail(err, MM_ERR_INVALID_ARGUMENT,
                           "rank %" PRId64 " was removed from the communicator but %s", r,
                           t->elastic ? "elastic_info keeps it" : "no elastic_info says so");
        if (!kept && alive)
            return mm_fail(err, MM_ERR_INVALID_ARGUMENT,
                           "elastic_info removes rank %" PRId64
                           " but the communicator still counts it alive (declare the survivors with "
                           "mm_comm_set_survivors first)",
                           r);
    }
    return MM_OK;
}

mm_status mm_dc_check_expert_ids(const mm_tensor *ids, const dc_topology *t, int64_t *bs, int64_t *k,
                                 mm_error *err) {
    mm_status st = mm_op_check_tensor(ids, "expert_ids", MM_DTYPE_I32, 2, err);
    if (st) return st;
    int64_t B = ids->shape[0], K = ids->shape[1];
    int64_t total = t->routed_experts + t->Z + t->C + t->N;
    if (B > DC_MAX_BS)
        return mm_fail(err, MM_ERR_INVALID_ARGUMENT, "expert_ids.shape[0] = Bs = %" PRId64 " exceeds %d", B,
                       DC_MAX_BS);
    if (K < 1 || K > DC_MAX_K || K > total)
        return mm_fail(err, MM_ERR_INVALID_ARGUMENT,
                       "expert_ids.shape[1] = K = %" PRId64 " is outside [1, min(%d, %" PRId64
                       " experts incl. special)]",
                       K, DC_MAX_K, total);
    const int32_t *v = ids->data;
    for (int64_t i = 0; i < B; i++)
        for (int64_t j = 0; j < K; j++) {
            int64_t e = v[i * K + j];
            if (e < 0 || e >= total)
                return mm_fail(err, MM_ERR_INVALID_ARGUMENT,
                               "expert_ids[%" PRId64 "][%" PRId64 "] = %" PRId64 " is outside [0, %" PRId64
                               ") (routed %" PRId64 " + zero %" PRId64 " + copy %" PRId64 " + const %" PRId64
                               ")",
                               i, j, e, total, t->routed_experts, t->Z, t->C, t->N);
            if (e >= t->routed_experts) continue;
            for (int64_t j2 = 0; j2 < j; j2++)
                if (v[i * K + j2] == e)
                    return mm_fail(err, MM_ERR_INVALID_ARGUMENT,
                                   "expert_ids[%" PRId64 "][%" PRId64 "] = %" PRId64
                                   " repeats expert_ids[%" PRId64 "][%" PRId64
                                   "] (a routed expert appears at most once per token)",
                                   i, j, e, i, j2);
        }
    *bs = B;
    *k = K;
    return MM_OK;
}

mm_status mm_dc_check_mask(const mm_tensor *mask, int64_t bs, int64_t k, dc_mask *m, mm_error *err) {
    memset(m, 0, sizeof *m);
    m->K = k;
    if (!mask) return MM_OK;
    if (mask->dtype != MM_DTYPE_BOOL)
        return mm_fail(err, MM_ERR_INVALID_ARGUMENT, "x_active_mask has dtype %s, expected bool",
                       mm_dtype_name(mask->dtype));
    if (mask->ndim == 1 && mask->shape[0] == bs) {
        m->kind = DC_MASK_PER_TOKEN;
    } else if (mask->ndim == 2 && mask->shape[0] == bs && mask->shape[1] == k) {
        m->kind = DC_MASK_PER_PAIR;
    } else {
        return mm_fail(err, MM_ERR_INVALID_ARGUMENT,
                       "x_active_mask must have shape (Bs,) = (%" PRId64 ") or (Bs, K) = (%" PRId64
                       ", %" PRId64 ")",
                       bs, bs, k);
    }
    if (!mask->data && bs > 0) return mm_fail(err, MM_ERR_INVALID_ARGUMENT, "x_active_mask data is NULL");
    m->data = mask->data;
    int64_t n = m->kind == DC_MASK_PER_TOKEN ? bs : bs * k;
    for (int64_t i = 0; i < n; i++)
        if (m->data[i] > 1)
            return mm_fail(err, MM_ERR_INVALID_ARGUMENT,
                           "x_active_mask element %" PRId64 " = %u is not 0 or 1", i, m->data[i]);
    if (m->kind == DC_MASK_PER_TOKEN)
        for (int64_t i = 1; i < bs; i++)
            if (m->data[i] && !m->data[i - 1])
                return mm_fail(err, MM_ERR_INVALID_ARGUMENT,
                               "x_active_mask[%" PRId64 "] = true follows x_active_mask[%" PRId64
                               "] = false (a 1-D mask has all true entries first)",
                               i, i - 1);
    return MM_OK;
}

/* ---- summary ---- */

/* The attributes every rank must agree on, in summary order: the integer ones by offset, then the two
 * that are summarized (norm_eps by its bits, comm_alg by whether it is set). compare() names them. */
#define INT_ATTR(field)                                                                                      \
    { #field, offsetof(mm_dc_attrs, field) }
static const struct {
    const char *name;
    size_t offset; /* of an int64_t field of mm_dc_attrs */
} int_attrs[] = {INT_ATTR(ep_world_size),     INT_ATTR(moe_expert_num),    INT_ATTR(tp_world_size),
                 INT_ATTR(expert_shard_type), INT_ATTR(shared_expert_num), INT_ATTR(shared_expert_rank_num),
                 INT_ATTR(quant_mode),        INT_ATTR(global_bs),         INT_ATTR(expert_token_nums_type),
                 INT_ATTR(zero_expert_num),   INT_ATTR(copy_expert_num),   INT_ATTR(const_expert_num)};
#undef INT_ATTR
enum { INT_ATTRS = sizeof int_attrs / sizeof int_attrs[0] };
_Static_assert(INT_ATTRS + 2 == DC_SUM_ATTRS,
               "the summary holds the integer attributes, norm_eps and comm_alg");

static const char *attr_name(int i) {
    return i < INT_ATTRS ? int_attrs[i].name : i == INT_ATTRS ? "norm_eps (bits)" : "comm_alg (set)";
}

static void summary_fill(dc_summary *s, const mm_dc_attrs *a, int64_t bs, int64_t h, int64_t k, int64_t dtype,
                         int64_t mask_kind, const mm_tensor *elastic_info) {
    memset(s, 0, sizeof *s);
    s->v[DC_SUM_BS] = bs;
    s->v[DC_SUM_H] = h;
    s->v[DC_SUM_K] = k;
    s->v[DC_SUM_DTYPE] = dtype;
    s->v[DC_SUM_MASK] = mask_kind;
    uint64_t hash = 1469598103934665603ull; /* FNV-1a over the elastic_info values */
    if (elastic_info && elastic_info->data && elastic_info->dtype == MM_DTYPE_I32) {
        const int32_t *v = elastic_info->data;
        for (int64_t i = 0; i < elastic_info->shape[0]; i++)
            hash = (hash ^ (uint32_t)v[i]) * 1099511628211ull;
    }
    s->v[DC_SUM_ELASTIC] = (int64_t)(hash >> 1);
    if (!a) return;
    int64_t *p = s->v + DC_SUM_ATTR0;
    for (int i = 0; i < INT_ATTRS; i++) memcpy(&p[i], (const char *)a + int_attrs[i].offset, sizeof p[i]);
    uint32_t eps_bits;
    memcpy(&eps_bits, &a->norm_eps, 4);
    p[INT_ATTRS] = eps_bits;
    p[INT_ATTRS + 1] = a->comm_alg && a->comm_alg[0];
}

/* The operators that share the summary exchange: a rank that calls the other one is caught here,
 * before the two would pair their different collectives. */
static const char *const op_names[] = {"dispatch_v3", "combine_add_rms_norm_v2"};

/* The cross-rank rules, from the exchanged records: every rank sees the same records, so every rank
 * reaches the same verdict and message. */
static mm_status compare(const mm_op_exchange *x, const char *op, dc_call *call, mm_error *err) {
    int ref = x->ref, i = mm_op_exchange_differing(x, 1);
    if (i >= 0) {
        int r = x->differ_rank[i];
        int64_t a = mm_op_exchange_fields_of(x, ref)[i], b = mm_op_exchange_fields_of(x, r)[i];
        if (i == DC_SUM_OP)
            return mm_fail(err, MM_ERR_INVALID_ARGUMENT,
                           "rank %d called %s but rank %d called %s (every rank must call the same operator)",
                           ref, op_names[a], r, op_names[b]);
        if (i < DC_SUM_ATTR0 + DC_SUM_ATTRS)
            return mm_fail(err, MM_ERR_INVALID_ARGUMENT,
                           "%s: attribute %s = %" PRId64 " on rank %d but %" PRId64
                           " on rank %d (attributes must be equal on every rank)",
                           op, attr_name(i - DC_SUM_ATTR0), a, ref, b, r);
        static const char *const what[] = {"H (hidden size)", "K (expert_ids.shape[1])", "the dtype of x",
                                           "the x_active_mask form (0 none, 1 per token, 2 per pair)",
                                           "elastic_info (content hash)"};
        return mm_fail(err, MM_ERR_INVALID_ARGUMENT,
                       "%s: %s is %" PRId64 " on rank %d but %" PRId64
                       " on rank %d (it must be equal on every rank)",
                       op, what[i - DC_SUM_H], a, ref, b, r);
    }
    const int64_t *attrs = mm_op_exchange_fields_of(x, ref) + DC_SUM_ATTR0;
    int64_t R = attrs[0], gbs = attrs[7], ref_bs = mm_op_exchange_fields_of(x, ref)[DC_SUM_BS];
    call->bs_max = x->hi[DC_SUM_BS] > 0 ? x->hi[DC_SUM_BS] : 0;
    if (gbs == 0 && x->differ_rank[DC_SUM_BS] >= 0) {
        int r = x->differ_rank[DC_SUM_BS];
        return mm_fail(err, MM_ERR_INVALID_ARGUMENT,
                       "%s: Bs = %" PRId64 " on rank %d but %" PRId64
                       " on rank %d (with global_bs = 0 every rank has the same Bs)",
                       op, ref_bs, ref, mm_op_exchange_fields_of(x, r)[DC_SUM_BS], r);
    }
    if (gbs != 0 && gbs != call->bs_max * R)
        return mm_fail(err, MM_ERR_INVALID_ARGUMENT,
                       "%s: global_bs = %" PRId64 " is not max Bs over ranks (%" PRId64
                       ") x ep_world_size (%" PRId64 ") = %" PRId64,
                       op, gbs, call->bs_max, R, call->bs_max * R);
    if (gbs) call->bs_max = gbs / R; /* the bound every rank used for its own checks */
    return MM_OK;
}

static mm_status exchange(mm_comm *comm, mm_status local, const dc_summary *mine, const char *op,
                          dc_call *call, mm_error *err) {
    memset(call, 0, sizeof *call);
    call->comm = comm;
    dc_summary send = *mine;
    send.v[DC_SUM_OP] = strcmp(op, op_names[0]) == 0 ? 0 : 1;
    if (!comm) return local ? local : mm_fail(err, MM_ERR_INVALID_ARGUMENT, "comm is NULL");
    mm_op_exchange x = {.local = local,
                        .message = err ? err->message : NULL,
                        .fields = send.v,
                        .nfields = DC_SUM_COUNT,
                        .ncompare = DC_SUM_COMPARED};
    mm_error ex_err = {MM_OK, ""};
    mm_status st = mm_op_exchange_run(comm, &x, &ex_err);
    if (st == MM_OK) {
        st = compare(&x, op, call, err);
    } else if (x.failed_rank >= 0) {
        st = mm_fail(err, st, "%s", ex_err.message); /* "rank N: ..." */
    } else if (!local) {
        st = mm_fail(err, st, "%s: %s", op, ex_err.message);
    } else {
        st = local; /* a communication failure after a local one: keep the local validation message */
    }
    mm_op_exchange_done(&x);
    return st;
}

mm_status mm_dc_call_begin(mm_comm *comm, mm_status local, const mm_error *local_err, const mm_dc_attrs *a,
                           int64_t bs, int64_t h, int64_t k, int64_t dtype, int64_t mask_kind,
                           const mm_tensor *elastic_info, const char *op, dc_call *call, mm_error *err) {
    dc_summary mine;
    summary_fill(&mine, local ? NULL : a, bs, h, k, dtype, mask_kind, elastic_info);
    mm_error e = {MM_OK, ""};
    if (local_err) e = *local_err;
    /* Every rank takes part in the exchange, failed or not, so that all learn the same verdict. */
    mm_status st = exchange(comm, local, &mine, op, call, &e);
    if (st) mm_fail(err, st, "%s", e.message);
    return st;
}
