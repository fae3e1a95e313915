/* SPDX-License-Identifier: Apache-2.0 */
/* case/case_dispatch_common.c: attributes and the collective runner of the Dispatch V3 / Combine V2
 * case adapters.
 *
 * A rank is a survivor when the file has its expert_ids (a rank removed by elastic scale-in has no
 * tensors). Threads backend: every survivor's tensors are read and its outputs allocated first (the
 * context is not thread-safe), then the ranks run as threads; the survivors declare themselves to the
 * communicator before anything else, so nobody waits for removed ranks. MPI backend: process g is rank
 * g; it reads only its own tensors, runs on MPI_COMM_WORLD, and the outputs are gathered to every
 * process in fixed-size blocks (process 0 writes the file). Both give the same bytes. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "case/case_dispatch_common.h"
#include "core/error.h"
#include "io/io_util.h"
#include "megamoe/safetensors.h"

mm_status mm_case_dc_read_attrs(mm_case_ctx *ctx, int combine, mm_dc_attrs *a, mm_error *err) {
    *a = mm_dc_default_attrs();
    mm_status st;
    if ((st = mm_case_attr_int64(ctx, "tp_world_size", 0, 0, 2, &a->tp_world_size, err))) return st;
    int64_t tpw = a->tp_world_size > 1 ? a->tp_world_size : 1;
    if (ctx->ranks % tpw != 0)
        return mm_fail(err, MM_ERR_INVALID_FILE,
                       "metadata \"ranks\" = %" PRId64 " is not a multiple of tp_world_size = %" PRId64,
                       ctx->ranks, tpw);
    int64_t ep = ctx->ranks / tpw;
    if ((st = mm_case_attr_int64(ctx, "ep_world_size", ep, 1, INT32_MAX, &a->ep_world_size, err))) return st;
    if (a->ep_world_size * tpw != ctx->ranks)
        return mm_fail(err, MM_ERR_INVALID_FILE,
                       "metadata \"ranks\" = %" PRId64
                       " is not ep_world_size x max(tp_world_size, 1) = %" PRId64,
                       ctx->ranks, a->ep_world_size * tpw);
    if (!mm_st_metadata(ctx->reader, "moe_expert_num"))
        return mm_fail(err, MM_ERR_INVALID_FILE, "attribute \"moe_expert_num\" is missing (required by %s)",
                       ctx->op->name);
#define ATTR(field, def, lo, hi)                                                                             \
    { #field, &a->field, def, lo, hi }
    /* the attribute named as its field of mm_dc_attrs, its default and its range */
    const struct {
        const char *name;
        int64_t *v, def, lo, hi;
    } ints[] = {ATTR(moe_expert_num, 1, 1, INT32_MAX),    ATTR(expert_shard_type, 0, 0, INT32_MAX),
                ATTR(shared_expert_num, 0, 0, INT32_MAX), ATTR(shared_expert_rank_num, 0, 0, INT32_MAX),
                ATTR(quant_mode, 0, 0, INT32_MAX),        ATTR(global_bs, 0, 0, INT32_MAX),
                ATTR(expert_token_nums_type, 1, 0, 1),    ATTR(zero_expert_num, 0, 0, INT32_MAX),
                ATTR(copy_expert_num, 0, 0, INT32_MAX),   ATTR(const_expert_num, 0, 0, INT32_MAX),
                ATTR(out_dtype, 0, 0, INT32_MAX),         ATTR(comm_quant_mode, 0, 0, INT32_MAX),
                ATTR(group_list_type, 0, 0, INT32_MAX)};
#undef ATTR
    size_t n = sizeof ints / sizeof ints[0] - (combine ? 0 : 3);
    for (size_t i = 0; i < n; i++)
        if ((st = mm_case_attr_int64(ctx, ints[i].name, ints[i].def, ints[i].lo, ints[i].hi, ints[i].v, err)))
            return st;
    /* comm_alg is reserved: absent or empty (a choice list of one empty entry would print nothing). */
    const char *alg = mm_st_metadata(ctx->reader, "comm_alg");
    if (alg && alg[0]) {
        char quoted[MM_IO_QUOTE_BUF];
        mm_io_quote(quoted, sizeof quoted, alg, strlen(alg));
        return mm_fail(err, MM_ERR_INVALID_FILE,
                       "attribute \"comm_alg\" = \"%s\" is reserved and must be empty or absent", quoted);
    }
    if (combine) {
        double eps = 1e-6;
        if ((st = mm_case_attr_double(ctx, "norm_eps", 1e-6, 0.0, 1e30, &eps, err))) return st;
        a->norm_eps = (float)eps;
    }
    return MM_OK;
}

typedef struct dcc_runner {
    mm_case_ctx *ctx;
    const dcc_op *op;
    mm_dc_attrs attrs;
    int64_t ranks, tpw;
    int n_alive;
    int alive_list[MM_COMM_MAX_RANKS];
    unsigned char alive[MM_COMM_MAX_RANKS];
    dcc_rank *rank;
} dcc_runner;

static mm_dc_attrs attrs_of(const dcc_runner *run, int64_t g) {
    mm_dc_attrs a = run->attrs;
    a.ep_rank_id = g / run->tpw;
    a.tp_rank_id = g % run->tpw;
    return a;
}

static mm_status prepare_rank(dcc_runner *run, int64_t g, mm_error *err) {
    mm_dc_attrs a = attrs_of(run, g);
    mm_status st = run->op->read(run->ctx, g, &run->rank[g], err);
    if (st == MM_OK) st = run->op->alloc(run->ctx, &a, &run->rank[g], err);
    if (st != MM_OK && !strstr(err ? err->message : "", "tensor \""))
        mm_error_prefix(err, "rank %" PRId64, g); /* the operator's messages do not name the rank */
    return st;
}

/* ws: a workspace made earlier (freed here), or NULL for a new one. */
static mm_status call_rank(mm_comm *comm, dcc_runner *run, int64_t g, mm_dc_workspace *ws, mm_error *err) {
    mm_dc_attrs a = attrs_of(run, g);
    mm_status st = ws ? MM_OK : mm_dc_workspace_create(comm, &ws, err);
    if (st) return st;
    st = run->op->call(ws, &a, &run->rank[g], err);
    mm_status st2 = mm_dc_workspace_free(ws, st ? NULL : err);
    return st ? st : st2;
}

static mm_status thread_rank(mm_comm *comm, void *arg, mm_error *err) {
    dcc_runner *run = arg;
    int g = mm_comm_rank(comm);
    if (!run->alive[g]) return MM_OK; /* removed by scale-in: never calls */
    if (run->ctx->options.timeout_seconds > 0)
        mm_comm_set_timeout(comm, run->ctx->options.timeout_seconds, NULL);
    mm_status st = MM_OK;
    if (run->n_alive < run->ranks && (st = mm_comm_set_survivors(comm, run->alive_list, run->n_alive, err)))
        return st;
    return call_rank(comm, run, g, NULL, err);
}

static mm_status add_outputs(dcc_runner *run, int64_t g, dcc_rank *r, mm_error *err) {
    for (int o = 0; o < run->op->n_out; o++) {
        if (!r->out_on[o]) continue;
        mm_tensor t = r->out[o];
        if (run->op->trim_mask & (1u << o)) t.shape[0] = r->rows;
        mm_status st = mm_case_output(run->ctx, g, run->op->outputs[o], &t, err);
        if (st) return st;
    }
    return MM_OK;
}

/* The largest BS, hidden size and topk of the surviving ranks, from the file's header (every process
 * sees every rank's shapes; no tensor is read). */
static void file_extents(const dcc_runner *run, int64_t *max_bs, int64_t *hidden, int64_t *topk) {
    *max_bs = 0, *hidden = 1, *topk = 1;
    for (int64_t q = 0; q < run->ranks; q++) {
        if (!run->alive[q]) continue;
        char name[96];
        mm_case_tensor_name(name, sizeof name, q, "expert_ids");
        const mm_st_tensor_info *ids = mm_st_find(run->ctx->reader, name);
        mm_case_tensor_name(name, sizeof name, q, run->op->hidden_tensor);
        const mm_st_tensor_info *hx = mm_st_find(run->ctx->reader, name);
        if (ids && ids->ndim == 2) {
            *max_bs = ids->shape[0] > *max_bs ? ids->shape[0] : *max_bs;
            *topk = ids->shape[1] > *topk ? ids->shape[1] : *topk;
        }
        if (hx && hx->ndim >= 1 && hx->shape[hx->ndim - 1] > *hidden) *hidden = hx->shape[hx->ndim - 1];
    }
}

/* Counts the workspaces of the `here` ranks this process runs against the memory budget, sized by the
 * operator's mm_dc_workspace_bytes_for, before anything is read or allocated. Extents the operator
 * refuses count nothing: its own check reports them. */
static mm_status charge_workspaces(dcc_runner *run, int64_t here, mm_error *err) {
    int64_t max_bs, hidden, topk;
    file_extents(run, &max_bs, &hidden, &topk);
    mm_dc_attrs a = attrs_of(run, run->alive_list[0]);
    uint64_t bytes = mm_dc_workspace_bytes_for(&a, (int)run->ranks, max_bs, hidden, topk), total;
    if (__builtin_mul_overflow(bytes, (uint64_t)here, &total)) total = UINT64_MAX;
    char what[160];
    snprintf(what, sizeof what,
             "the %s workspace of %" PRId64 " rank%s (BS %" PRId64 ", H %" PRId64 ", K %" PRId64 ")",
             run->ctx->op->name, here, here == 1 ? "" : "s", max_bs, hidden, topk);
    return mm_case_charge(run->ctx, total, what, err);
}

static mm_status run_threads(dcc_runner *run, mm_error *err) {
    mm_status st = charge_workspaces(run, run->n_alive, err);
    if (st) return st;
    for (int64_t g = 0; g < run->ranks; g++)
        if (run->alive[g] && (st = prepare_rank(run, g, err))) return st;
    mm_status *sts = calloc((size_t)run->ranks, sizeof *sts);
    mm_error *errs = calloc((size_t)run->ranks, sizeof *errs);
    if (!sts || !errs) {
        free(sts), free(errs);
        return mm_fail(err, MM_ERR_OUT_OF_MEMORY, "%s: out of memory", run->ctx->op->name);
    }
    st = mm_comm_run_threads((int)run->ranks, thread_rank, run, sts, errs, NULL);
    if (st) { /* every rank has the agreed message already naming the rank: report it as is */
        for (int64_t g = 0; g < run->ranks; g++)
            if (sts[g]) {
                st = mm_fail(err, sts[g], "%s", errs[g].message);
                break;
            }
    }
    free(sts), free(errs);
    for (int64_t g = 0; st == MM_OK && g < run->ranks; g++)
        if (run->alive[g]) st = add_outputs(run, g, &run->rank[g], err);
    return st;
}

/* ---- MPI: one rank per process, outputs gathered in blocks ---- */

typedef struct block_header {
    int64_t on, dtype, ndim, shape[MM_MAX_DIMS], nbytes;
} block_header;

static size_t block_size(const dcc_runner *run, dcc_rank *r) {
    size_t n = 0;
    for (int o = 0; o < run->op->n_out; o++) {
        n += sizeof(block_header);
        if (!r->out_on[o]) continue;
        mm_tensor t = r->out[o];
        if (run->op->trim_mask & (1u << o)) t.shape[0] = r->rows;
        n += (size_t)mm_tensor_nbytes(&t);
    }
    return n;
}

static void block_fill(const dcc_runner *run, dcc_rank *r, unsigned char *p) {
    for (int o = 0; o < run->op->n_out; o++) {
        block_header h;
        memset(&h, 0, sizeof h);
        mm_tensor t = r->out[o];
        if (run->op->trim_mask & (1u << o)) t.shape[0] = r->rows;
        h.on = r->out_on[o];
        if (h.on) {
            h.dtype = t.dtype, h.ndim = t.ndim, h.nbytes = mm_tensor_nbytes(&t);
            memcpy(h.shape, t.shape, sizeof h.shape);
        }
        memcpy(p, &h, sizeof h);
        p += sizeof h;
        if (h.on && h.nbytes) memcpy(p, t.data, (size_t)h.nbytes);
        p += h.on ? (size_t)h.nbytes : 0;
    }
}

static mm_status block_read(dcc_runner *run, int64_t g, const unsigned char *p, mm_error *err) {
    for (int o = 0; o < run->op->n_out; o++) {
        block_header h;
        memcpy(&h, p, sizeof h);
        p += sizeof h;
        if (!h.on) continue;
        mm_tensor t = mm_tensor_make((mm_dtype)h.dtype, (int)h.ndim, h.shape, (void *)p);
        p += (size_t)h.nbytes;
        mm_status st = mm_case_output(run->ctx, g, run->op->outputs[o], &t, err);
        if (st) return st;
    }
    return MM_OK;
}

static mm_status run_mpi(dcc_runner *run, mm_error *err) {
    mm_case_ctx *ctx = run->ctx;
    int64_t g = ctx->process_rank;
    if (ctx->process_count != run->ranks)
        return mm_fail(err, MM_ERR_INVALID_ARGUMENT,
                       "the case has ranks = %" PRId64 " but %d MPI processes run it", run->ranks,
                       ctx->process_count);
    /* Survivors gather every output; a removed process holds none, so the lowest survivor writes. */
    ctx->output_process = run->alive_list[0];
    mm_comm *comm = NULL;
    mm_status st = mm_comm_mpi_world(&comm, err);
    if (st) return st;
    if (ctx->options.timeout_seconds > 0) mm_comm_set_timeout(comm, ctx->options.timeout_seconds, NULL);
    mm_error local = {MM_OK, ""};
    unsigned char *block = NULL, *all = NULL;
    mm_dc_workspace *ws = NULL;
    if ((st = mm_comm_agree(comm, charge_workspaces(run, 1, &local), &local))) goto done;
    if ((st = mm_dc_workspace_create(comm, &ws, &local))) goto done;
    if (run->n_alive < run->ranks) {
        /* MPI allocates symmetric buffers only while every rank is alive: reserve them first, sized from
         * the file's header (every process sees every rank's shapes). */
        int64_t max_bs, hidden, topk;
        file_extents(run, &max_bs, &hidden, &topk);
        mm_dc_attrs a = attrs_of(run, g);
        mm_status rs = mm_dc_workspace_reserve(ws, &a, max_bs, hidden, topk, &local);
        if ((st = mm_comm_agree(comm, rs, &local))) goto done;
    }
    if (!run->alive[g]) { /* removed by scale-in: this process takes no further part */
        mm_dc_workspace_abandon(ws);
        ws = NULL;
        goto done;
    }
    if (run->n_alive < run->ranks &&
        (st = mm_comm_set_survivors(comm, run->alive_list, run->n_alive, &local)))
        goto done;
    st = prepare_rank(run, g, &local);
    if ((st = mm_comm_agree(comm, st, &local)) != MM_OK) goto done;
    st = call_rank(comm, run, g, ws, &local);
    ws = NULL;
    if (st != MM_OK) goto done;
    int64_t bytes = (int64_t)block_size(run, &run->rank[g]);
    if ((st = mm_comm_allreduce_i64(comm, &bytes, 1, MM_REDUCE_MAX, &local))) goto done;
    /* `all` holds every rank's outputs until the file is written (the writer streams from it). */
    st = mm_case_alloc_gather(ctx, (size_t)bytes, run->ranks, &block, &all, &local);
    if ((st = mm_comm_agree(comm, st, &local))) goto done;
    block_fill(run, &run->rank[g], block);
    if ((st = mm_comm_allgather(comm, block, (size_t)bytes, all, &local))) goto done;
    for (int64_t q = 0; q < run->ranks && st == MM_OK; q++)
        if (run->alive[q]) st = block_read(run, q, all + (size_t)q * (size_t)bytes, &local);
done:
    if (ws) mm_dc_workspace_free(ws, NULL);
    free(block);
    mm_comm_free(comm, NULL);
    if (st) return mm_fail(err, st, "%s", local.message);
    return MM_OK;
}

mm_status mm_case_dc_run(mm_case_ctx *ctx, const dcc_op *op, const mm_dc_attrs *attrs, mm_error *err) {
    dcc_runner *run = mm_case_alloc(ctx, sizeof *run);
    if (!run) return mm_fail(err, MM_ERR_OUT_OF_MEMORY, "%s: out of memory", ctx->op->name);
    run->ctx = ctx, run->op = op, run->attrs = *attrs, run->ranks = ctx->ranks;
    run->tpw = attrs->tp_world_size > 1 ? attrs->tp_world_size : 1;
    if (run->ranks > MM_COMM_MAX_RANKS)
        return mm_fail(err, MM_ERR_INVALID_FILE, "metadata \"ranks\" = %" PRId64 ": at most %d ranks run",
                       run->ranks, MM_COMM_MAX_RANKS);
    for (int64_t g = 0; g < run->ranks; g++) {
        char name[64];
        mm_case_tensor_name(name, sizeof name, g, "expert_ids");
        run->alive[g] = mm_st_find(ctx->reader, name) != NULL;
        if (run->alive[g]) run->alive_list[run->n_alive++] = (int)g;
    }
    if (run->n_alive == 0)
        return mm_fail(err, MM_ERR_INVALID_FILE, "tensor \"rank0.expert_ids\" is missing (required by %s)",
                       ctx->op->name);
    for (int64_t g = 0; run->tpw > 1 && g < run->ranks; g++)
        if (!run->alive[g]) /* a global rank: ep_rank g / 2, tp_rank g % 2 */
            return mm_fail(err, MM_ERR_INVALID_FILE,
                           "tensor \"rank%" PRId64
                           ".expert_ids\" is missing (required by %s: tp_world_size = "
                           "2 allows no elastic scale-in, so every rank has its tensors)",
                           g, ctx->op->name);
    run->rank = mm_case_alloc(ctx, sizeof(dcc_rank) * (size_t)run->ranks);
    if (!run->rank) return mm_fail(err, MM_ERR_OUT_OF_MEMORY, "%s: out of memory", ctx->op->name);
    if (ctx->options.backend == MM_CASE_BACKEND_MPI) return run_mpi(run, err);
    return run_threads(run, err);
}

mm_status mm_case_dc_read_and_run(mm_case_ctx *ctx, const dcc_op *op, int combine, mm_error *err) {
    mm_dc_attrs attrs;
    mm_status st = mm_case_dc_read_attrs(ctx, combine, &attrs, err);
    return st ? st : mm_case_dc_run(ctx, op, &attrs, err);
}
