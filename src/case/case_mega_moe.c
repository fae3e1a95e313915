/* SPDX-License-Identifier: Apache-2.0 */
/* case/case_mega_moe.c: the mega_moe case adapter (collective: tensors rank<g>.<name>, metadata ranks).
 *
 * inputs per rank: x, scales, topk_ids, topk_weights, weight1, weight2, weight_scales1/2, bias1/2,
 * shared_weight1/2, shared_weight_scales1/2, shared_bias1/2, x_active_mask (stacked weights, E_l or S
 * first); attributes by their snake_case names (docs/mega_moe.md); outputs rank<g>.y and
 * rank<g>.expert_token_nums. H comes from x, I from weight1, K from topk_ids.
 *
 * Threads backend: every rank's tensors are read first (the context is not thread-safe), then the
 * ranks run as threads. MPI backend: each process reads its own rank's tensors, runs on
 * MPI_COMM_WORLD, and the outputs are gathered to process 0, which writes the file. Both give the
 * same bytes: the operator's results do not depend on the backend. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "case/case_context.h"
#include "core/error.h"
#include "ffn/activation.h"
#include "io/json.h"
#include "megamoe/comm.h"
#include "megamoe/mega_moe.h"
#include "megamoe/safetensors.h"

/* The seed operator's names; mega_moe_ext (docs/weight_formats.md) takes them plus the zero points of UINT4
 * weights and the block and interleave attributes (biases for every weight format and the A16 weight-only
 * scenarios are accepted there). */
#define MEGA_MOE_SEED_INPUTS                                                                                 \
    "x", "scales", "topk_ids", "topk_weights", "weight1", "weight2", "weight_scales1", "weight_scales2",     \
        "bias1", "bias2", "shared_weight1", "shared_weight2", "shared_weight_scales1",                       \
        "shared_weight_scales2", "shared_bias1", "shared_bias2", "x_active_mask"
#define MEGA_MOE_SEED_ATTRIBUTES                                                                             \
    "moe_expert_num", "ep_world_size", "num_max_tokens_per_rank", "max_recv_token_num",                      \
        "dispatch_quant_mode", "dispatch_quant_out_dtype", "shared_expert_quant_out_dtype",                  \
        "combine_quant_mode", "activation", "activation_params", "activation_out_dtype",                     \
        "transpose_weight1", "transpose_weight2", "topk_weights_type", "combine_comm_mode",                  \
        "rank_num_per_server"
static const char *const mega_moe_inputs[] = {MEGA_MOE_SEED_INPUTS, NULL};
static const char *const mega_moe_ext_inputs[] = {MEGA_MOE_SEED_INPUTS,   "weight_zeros1",
                                                  "weight_zeros2",        "shared_weight_zeros1",
                                                  "shared_weight_zeros2", NULL};
static const char *const mega_moe_attributes[] = {MEGA_MOE_SEED_ATTRIBUTES, NULL};
static const char *const mega_moe_ext_attributes[] = {MEGA_MOE_SEED_ATTRIBUTES, "scale_block_n",
                                                      "scale_block_k", "weight1_interleave", NULL};

#define ANY_DTYPE (~UINT64_C(0) & ~MM_CASE_DTYPE(MM_DTYPE_INVALID))
/* Room for the activation table's names in the "activation" attribute's choice list. */
#define MM_CASE_MAX_ACTIVATIONS 16

/* One rank's tensors. */
typedef struct moe_rank_case {
    mm_tensor x, scales, ids, weights, mask;
    int has_scales, has_mask;
    mm_tensor t[16]; /* weight1, weight2, weight_scales1, weight_scales2, bias1, bias2, then shared_*, then
                        weight_zeros1/2, shared_weight_zeros1/2 (mega_moe_ext) */
    int has[16];
    mm_tensor y, etn;
} moe_rank_case;

typedef struct moe_case_run {
    mm_mega_moe_sizing sizing;
    mm_mega_moe_attrs attrs;
    int transpose1, transpose2;
    int ext; /* op mega_moe_ext: the checkpoint-format extensions (docs/weight_formats.md) */
    int64_t scale_block_n, scale_block_k;
    int weight1_interleave;
    int64_t ranks;
    double timeout_seconds; /* the case options' --timeout; 0 keeps the communicator's default */
    moe_rank_case *rank;    /* indexed by rank (threads: all; MPI: only this process's is filled) */
} moe_case_run;

static const char *const weight_names[16] = {"weight1",
                                             "weight2",
                                             "weight_scales1",
                                             "weight_scales2",
                                             "bias1",
                                             "bias2",
                                             "shared_weight1",
                                             "shared_weight2",
                                             "shared_weight_scales1",
                                             "shared_weight_scales2",
                                             "shared_bias1",
                                             "shared_bias2",
                                             "weight_zeros1",
                                             "weight_zeros2",
                                             "shared_weight_zeros1",
                                             "shared_weight_zeros2"};

static mm_status read_rank(mm_case_ctx *ctx, int64_t g, int ext, moe_rank_case *rc, mm_error *err) {
    mm_status st;
    if ((st = mm_case_input(ctx, g, "x", 1, ANY_DTYPE, 2, 2, &rc->x, NULL, err)) != MM_OK) return st;
    if ((st = mm_case_input(ctx, g, "scales", 0, ANY_DTYPE, 2, 2, &rc->scales, &rc->has_scales, err)) !=
        MM_OK)
        return st;
    if ((st = mm_case_input(ctx, g, "topk_ids", 1, ANY_DTYPE, 2, 2, &rc->ids, NULL, err)) != MM_OK) return st;
    if ((st = mm_case_input(ctx, g, "topk_weights", 1, ANY_DTYPE, 2, 2, &rc->weights, NULL, err)) != MM_OK)
        return st;
    if ((st = mm_case_input(ctx, g, "x_active_mask", 0, ANY_DTYPE, 1, 1, &rc->mask, &rc->has_mask, err)) !=
        MM_OK)
        return st;
    for (int q = 0; q < (ext ? 16 : 12); q++) {
        int required = q < 2;
        st = mm_case_input(ctx, g, weight_names[q], required, ANY_DTYPE, 1, 4, &rc->t[q], &rc->has[q], err);
        if (st != MM_OK) return st;
        if (required) rc->has[q] = 1;
    }
    return MM_OK;
}

/* A dtype attribute: absent = undefined; a name (int8, fp8_e4m3fn, ...) or the original's number. */
static mm_status attr_dtype(mm_case_ctx *ctx, const char *name, mm_dtype *out, mm_error *err) {
    const char *text = mm_st_metadata(ctx->reader, name);
    *out = MM_DTYPE_INVALID;
    if (!text) return MM_OK;
    static const struct {
        int64_t code;
        mm_dtype dtype;
    } codes[] = {{1, MM_DTYPE_I8},
                 {23, MM_DTYPE_FP8_E5M2},
                 {24, MM_DTYPE_FP8_E4M3FN},
                 {296, MM_DTYPE_FP4_E2M1},
                 {27, MM_DTYPE_BF16}};
    char *end = NULL;
    long long v = strtoll(text, &end, 10);
    if (end && end != text && *end == '\0') {
        for (size_t i = 0; i < sizeof codes / sizeof codes[0]; i++)
            if (codes[i].code == v) {
                *out = codes[i].dtype;
                return MM_OK;
            }
        if (v == 0 || v == -1) return MM_OK; /* DT_UNDEFINED spellings */
        return mm_fail(err, MM_ERR_INVALID_FILE,
                       "metadata \"%s\" = %lld is not a dtype code (1 int8, 23 fp8_e5m2, 24 fp8_e4m3fn, 296 "
                       "fp4_e2m1)",
                       name, v);
    }
    if (strcmp(text, "undefined") == 0 || strcmp(text, "none") == 0 || text[0] == '\0') return MM_OK;
    mm_dtype d = mm_dtype_from_name(text);
    if (d != MM_DTYPE_I8 && d != MM_DTYPE_FP8_E5M2 && d != MM_DTYPE_FP8_E4M3FN && d != MM_DTYPE_FP4_E2M1 &&
        d != MM_DTYPE_BF16)
        return mm_fail(
            err, MM_ERR_INVALID_FILE,
            "metadata \"%s\" = \"%s\" is not one of int8, fp8_e5m2, fp8_e4m3fn, fp4_e2m1 (or bf16)", name,
            text);
    *out = d;
    return MM_OK;
}

static mm_status read_attrs(mm_case_ctx *ctx, moe_case_run *run, mm_error *err) {
    mm_status st;
    int64_t v;
    mm_mega_moe_attrs *a = &run->attrs;
    *a = mm_mega_moe_default_attrs();
    memset(&run->sizing, 0, sizeof run->sizing);
    if ((st = mm_case_attr_int64(ctx, "moe_expert_num", 0, 1, INT32_MAX, &run->sizing.moe_expert_num, err)) !=
        MM_OK)
        return st;
    if (!mm_st_metadata(ctx->reader, "moe_expert_num"))
        return mm_fail(err, MM_ERR_INVALID_FILE,
                       "metadata \"moe_expert_num\" is missing (required by mega_moe)");
    if ((st = mm_case_attr_int64(ctx, "ep_world_size", ctx->ranks, 1, INT32_MAX, &v, err)) != MM_OK)
        return st;
    if (v != ctx->ranks)
        return mm_fail(err, MM_ERR_INVALID_FILE,
                       "metadata \"ep_world_size\" = %" PRId64 " differs from \"ranks\" = %" PRId64, v,
                       ctx->ranks);
    if ((st = mm_case_attr_int64(ctx, "num_max_tokens_per_rank", 0, 0, INT32_MAX,
                                 &run->sizing.num_max_tokens_per_rank, err)) != MM_OK)
        return st;
    if ((st = mm_case_attr_int64(ctx, "max_recv_token_num", 0, 0, INT64_MAX / 2,
                                 &run->sizing.max_recv_token_num, err)) != MM_OK)
        return st;
    if ((st = mm_case_attr_int64(ctx, "dispatch_quant_mode", 0, 0, 4, &v, err)) != MM_OK) return st;
    a->dispatch_quant_mode = (int)v;
    if ((st = attr_dtype(ctx, "dispatch_quant_out_dtype", &a->dispatch_quant_out_dtype, err)) != MM_OK)
        return st;
    if ((st = attr_dtype(ctx, "shared_expert_quant_out_dtype", &a->shared_expert_quant_out_dtype, err)) !=
        MM_OK)
        return st;
    if ((st = attr_dtype(ctx, "activation_out_dtype", &a->activation_out_dtype, err)) != MM_OK) return st;
    if ((st = mm_case_attr_int64(ctx, "combine_quant_mode", 0, 0, 4, &v, err)) != MM_OK) return st;
    a->combine_quant_mode = (int)v;
    /* The accepted names are the activation table's (src/ffn/activation.c), so a new row is accepted
     * here without an edit. */
    const char *acts[MM_CASE_MAX_ACTIVATIONS + 1];
    int act_count = 0;
    const mm_ffn_act_info *act_table = mm_ffn_act_table(&act_count);
    if (act_count > MM_CASE_MAX_ACTIVATIONS) act_count = MM_CASE_MAX_ACTIVATIONS;
    for (int i = 0; i < act_count; i++) acts[i] = act_table[i].name;
    acts[act_count] = NULL;
    const char *act = NULL;
    if ((st = mm_case_attr_choice(ctx, "activation", "swiglu", acts, &act, err)) != MM_OK) return st;
    a->activation = (mm_mega_moe_activation)mm_mega_moe_activation_from_name(act);
    const char *params = mm_st_metadata(ctx->reader, "activation_params");
    if (params) {
        double p[MM_MEGA_MOE_MAX_ACTIVATION_PARAMS];
        size_t n = 0;
        mm_error parse;
        mm_error_clear(&parse);
        /* The parser's message ("... has 4 elements, at most 3 are allowed", "... is not a list") goes
         * through a local record: formatting err's own message into err would read and write the
         * same buffer (it came out empty). */
        st = mm_json_literal_double_list("metadata \"activation_params\"", params, p,
                                         MM_MEGA_MOE_MAX_ACTIVATION_PARAMS, &n, &parse);
        if (st != MM_OK) return mm_fail(err, MM_ERR_INVALID_FILE, "%s", parse.message);
        a->activation_param_count = (int)n;
        for (size_t i = 0; i < n; i++) a->activation_params[i] = (float)p[i];
    }
    if ((st = mm_case_attr_bool(ctx, "transpose_weight1", 0, &run->transpose1, err)) != MM_OK) return st;
    if ((st = mm_case_attr_bool(ctx, "transpose_weight2", 0, &run->transpose2, err)) != MM_OK) return st;
    if ((st = mm_case_attr_int64(ctx, "topk_weights_type", 0, 0, 1, &v, err)) != MM_OK) return st;
    a->topk_weights_type = (int)v;
    if ((st = mm_case_attr_int64(ctx, "combine_comm_mode", 0, 0, 2, &v, err)) != MM_OK) return st;
    a->combine_comm_mode = (int)v;
    if ((st = mm_case_attr_int64(ctx, "rank_num_per_server", 0, 0, INT32_MAX, &a->rank_num_per_server,
                                 err)) != MM_OK)
        return st;
    return MM_OK;
}

/* Sizes the file decides: H from x, K from topk_ids, I from weight1. */
static mm_status derive_sizes(const moe_case_run *run, const moe_rank_case *rc, mm_mega_moe_sizing *s,
                              mm_error *err) {
    s->hidden = rc->x.shape[1];
    s->topk = rc->ids.shape[1];
    const mm_tensor *w1 = &rc->t[0];
    if (w1->ndim != 3)
        return mm_fail(err, MM_ERR_INVALID_ARGUMENT, "weight1 must be 3-D (E_l, H, 2I), has %d dims",
                       w1->ndim);
    int64_t n1 = run->transpose1 ? w1->shape[1] : w1->shape[2];
    if (n1 % 2 != 0)
        return mm_fail(err, MM_ERR_INVALID_ARGUMENT, "weight1 output width 2I = %" PRId64 " must be even",
                       n1);
    s->intermediate_hidden = n1 / 2;
    /* The weights' count bounds moe_expert_num before the buffer allocates per-expert records sized by
     * it: a tiny file must not make megamoe allocate gigabytes before saying it is inconsistent (the
     * same rule and message as mm_mega_moe_weights_create). */
    int64_t per_rank = run->sizing.moe_expert_num / (run->ranks > 0 ? run->ranks : 1);
    if (w1->shape[0] != per_rank)
        return mm_fail(err, MM_ERR_INVALID_ARGUMENT, "routed count = %" PRId64 " must be E / R = %" PRId64,
                       w1->shape[0], per_rank);
    return MM_OK;
}

static void fill_weights(const moe_rank_case *rc, int shared, int t1, int t2, mm_mega_moe_expert_weights *w) {
    memset(w, 0, sizeof *w);
    int b = shared ? 6 : 0;
    if (!rc->has[b]) return;
    w->count = rc->t[b].ndim >= 1 ? rc->t[b].shape[0] : 0;
    w->transpose_weight1 = t1;
    w->transpose_weight2 = t2;
    w->weight1 = &rc->t[b];
    w->weight2 = rc->has[b + 1] ? &rc->t[b + 1] : NULL;
    w->weight_scales1 = rc->has[b + 2] ? &rc->t[b + 2] : NULL;
    w->weight_scales2 = rc->has[b + 3] ? &rc->t[b + 3] : NULL;
    w->bias1 = rc->has[b + 4] ? &rc->t[b + 4] : NULL;
    w->bias2 = rc->has[b + 5] ? &rc->t[b + 5] : NULL;
    int z = shared ? 14 : 12;
    w->weight_zeros1 = rc->has[z] ? &rc->t[z] : NULL;
    w->weight_zeros2 = rc->has[z + 1] ? &rc->t[z + 1] : NULL;
}

/* Op mega_moe keeps the seed's contract: the checkpoint-format extensions of the C API (A16 weight-only
 * scenarios, biases outside A8W4-INT) are refused there, naming the op that takes them. */
static mm_status seed_contract(const moe_case_run *run, const moe_rank_case *rc, mm_error *err) {
    for (int shared = 0; shared <= 1; shared++) {
        int b = shared ? 6 : 0;
        const char *group = shared ? "shared" : "routed";
        if (!rc->has[b]) continue;
        mm_dtype wd = rc->t[b].dtype;
        if ((rc->has[b + 4] || rc->has[b + 5]) && wd != MM_DTYPE_INT4)
            return mm_fail(
                err, MM_ERR_INVALID_ARGUMENT,
                "%s bias is given with %s weights (op mega_moe: bias only with int4 weights, A8W4-INT; "
                "biases for every format: op mega_moe_ext)",
                group, mm_dtype_name(wd));
        int bf16_x = run->attrs.dispatch_quant_mode == 0 && rc->x.dtype == MM_DTYPE_BF16;
        int a16_quant = wd == MM_DTYPE_UINT4 ||
                        (bf16_x && (wd == MM_DTYPE_FP8_E4M3FN || wd == MM_DTYPE_FP4_E2M1)) ||
                        (rc->has[b + 2] && rc->t[b + 2].dtype == MM_DTYPE_F32 && wd == MM_DTYPE_FP8_E4M3FN);
        if (a16_quant)
            return mm_fail(err, MM_ERR_INVALID_ARGUMENT,
                           "%s weight dtype %s with %s activations is an A16 weight-only scenario: not in op "
                           "mega_moe's scenario table (use op mega_moe_ext)",
                           group, mm_dtype_name(wd), bf16_x ? "bf16" : "quantized");
    }
    return MM_OK;
}

/* One rank's call (thread or process). */
static mm_status rank_call(mm_comm *comm, moe_case_run *run, moe_rank_case *rc, mm_error *err) {
    mm_status st;
    mm_mega_moe_sizing sizing = run->sizing;
    mm_error local;
    mm_error_clear(&local);
    /* 0 = the largest BS of this call; sizes from this rank's tensors, checked equal by the operator */
    int64_t maxbs[1] = {rc->x.shape[0]};
    st = derive_sizes(run, rc, &sizing, &local);
    st = mm_comm_agree(comm, st, &local);
    if (st == MM_OK) st = mm_comm_allreduce_i64(comm, maxbs, 1, MM_REDUCE_MAX, &local);
    if (st != MM_OK) return mm_fail(err, st, "%s", local.message);
    if (sizing.num_max_tokens_per_rank == 0) sizing.num_max_tokens_per_rank = maxbs[0] > 0 ? maxbs[0] : 1;
    mm_mega_moe_buffer *buf = NULL;
    mm_mega_moe_weights *w = NULL;
    mm_mega_moe_expert_weights routed, shared;
    fill_weights(rc, 0, run->transpose1, run->transpose2, &routed);
    fill_weights(rc, 1, run->transpose1, run->transpose2, &shared);
    mm_mega_moe_expert_weights *groups[2] = {&routed, &shared};
    for (int q = 0; q < 2 && run->ext; q++) {
        groups[q]->weight1_interleave = run->weight1_interleave;
        if (groups[q]->weight_zeros1 ||
            (groups[q]->weight_scales1 && groups[q]->weight_scales1->dtype == MM_DTYPE_F32 &&
             groups[q]->weight1->dtype != MM_DTYPE_I8 && groups[q]->weight1->dtype != MM_DTYPE_INT4)) {
            groups[q]->scale_block_n = run->scale_block_n;
            groups[q]->scale_block_k = run->scale_block_k;
        }
    }
    if ((st = mm_mega_moe_buffer_create(comm, &sizing, &buf, err)) != MM_OK) return st;
    st = run->ext ? MM_OK : seed_contract(run, rc, &local);
    if (st == MM_OK) st = mm_mega_moe_weights_create(buf, &routed, shared.count ? &shared : NULL, &w, &local);
    st = mm_comm_agree(comm, st, &local);
    if (st == MM_OK) {
        mm_mega_moe_inputs in = {&rc->x, rc->has_scales ? &rc->scales : NULL, &rc->ids, &rc->weights,
                                 rc->has_mask ? &rc->mask : NULL};
        mm_mega_moe_outputs out = {&rc->y, &rc->etn};
        st = mm_mega_moe_run(buf, w, &run->attrs, &in, &out, &local);
    }
    mm_mega_moe_weights_free(w);
    mm_mega_moe_buffer_free(buf, NULL);
    if (st != MM_OK) return mm_fail(err, st, "%s", local.message);
    return MM_OK;
}

static mm_status thread_rank(mm_comm *comm, void *arg, mm_error *err) {
    moe_case_run *run = arg;
    if (run->timeout_seconds > 0) mm_comm_set_timeout(comm, run->timeout_seconds, NULL);
    return rank_call(comm, run, &run->rank[mm_comm_rank(comm)], err);
}

static mm_status alloc_outputs(mm_case_ctx *ctx, const moe_case_run *run, moe_rank_case *rc, mm_error *err) {
    int64_t ys[2] = {rc->x.ndim == 2 ? rc->x.shape[0] : 0, rc->x.ndim == 2 ? rc->x.shape[1] : 0};
    int64_t el = run->sizing.moe_expert_num / (run->ranks > 0 ? run->ranks : 1);
    rc->y = mm_tensor_make(MM_DTYPE_BF16, 2, ys, NULL);
    rc->etn = mm_tensor_make(MM_DTYPE_I32, 1, &el, NULL);
    mm_status st = mm_case_alloc_tensor(ctx, &rc->y, "y", err);
    if (st == MM_OK) st = mm_case_alloc_tensor(ctx, &rc->etn, "expert_token_nums", err);
    return st;
}

/* Counts the MegaMoE buffers of the `here` ranks this process runs against the memory budget, sized
 * by the operator's mm_mega_moe_buffer_bytes_for from the file's header (no tensor is read): a tiny file
 * whose num_max_tokens_per_rank or max_recv_token_num asks for gigabytes of receive area is refused
 * before anything is allocated. A file whose shapes or sizing the operator refuses counts nothing: the
 * operator's own check reports it. */
static mm_status charge_buffers(mm_case_ctx *ctx, const moe_case_run *run, int64_t here, mm_error *err) {
    moe_rank_case rc;
    memset(&rc, 0, sizeof rc);
    int64_t max_bs = 0;
    for (int64_t g = 0; g < run->ranks; g++) {
        char name[64];
        mm_case_tensor_name(name, sizeof name, g, "x");
        const mm_st_tensor_info *x = mm_st_find(ctx->reader, name);
        if (x && x->ndim == 2 && x->shape[0] > max_bs) max_bs = x->shape[0];
    }
    static const char *const names[3] = {"x", "topk_ids", "weight1"};
    mm_tensor *shapes[3] = {&rc.x, &rc.ids, &rc.t[0]};
    for (int i = 0; i < 3; i++) {
        char name[64];
        mm_case_tensor_name(name, sizeof name, 0, names[i]);
        const mm_st_tensor_info *info = mm_st_find(ctx->reader, name);
        if (!info || info->ndim != (i == 2 ? 3 : 2)) return MM_OK;
        *shapes[i] = mm_tensor_make(info->dtype, info->ndim, info->shape, NULL);
    }
    mm_mega_moe_sizing s = run->sizing;
    if (derive_sizes(run, &rc, &s, NULL) != MM_OK) return MM_OK;
    if (s.num_max_tokens_per_rank == 0) s.num_max_tokens_per_rank = max_bs > 0 ? max_bs : 1;
    if (run->ranks > MM_COMM_MAX_RANKS) return MM_OK;
    uint64_t bytes = mm_mega_moe_buffer_bytes_for(&s, (int)run->ranks, run->attrs.combine_comm_mode == 2),
             total;
    if (__builtin_mul_overflow(bytes, (uint64_t)here, &total)) total = UINT64_MAX;
    char what[200];
    snprintf(what, sizeof what,
             "the mega_moe buffer of %" PRId64 " rank%s (num_max_tokens_per_rank %" PRId64
             ", max_recv_token_num %" PRId64 ", H %" PRId64 ", K %" PRId64 ")",
             here, here == 1 ? "" : "s", s.num_max_tokens_per_rank, s.max_recv_token_num, s.hidden, s.topk);
    return mm_case_charge(ctx, total, what, err);
}

static mm_status run_threads(mm_case_ctx *ctx, moe_case_run *run, mm_error *err) {
    mm_status st;
    if (run->ranks > MM_COMM_MAX_RANKS)
        return mm_fail(err, MM_ERR_INVALID_FILE,
                       "metadata \"ranks\" = %" PRId64 ": the threads backend runs at most %d", run->ranks,
                       MM_COMM_MAX_RANKS);
    if ((st = charge_buffers(ctx, run, run->ranks, err)) != MM_OK) return st;
    for (int64_t g = 0; g < run->ranks; g++) {
        if ((st = read_rank(ctx, g, run->ext, &run->rank[g], err)) != MM_OK) return st;
        if ((st = alloc_outputs(ctx, run, &run->rank[g], err)) != MM_OK) return st;
    }
    /* The operator's failures are agreed (same status and message, already naming the rank) on every
     * rank: report rank 0's record as is rather than the launcher's "rank N: "-prefixed copy. */
    mm_status *statuses = mm_case_alloc(ctx, (size_t)run->ranks * sizeof *statuses);
    mm_error *errors = mm_case_alloc(ctx, (size_t)run->ranks * sizeof *errors);
    if (!statuses || !errors) return mm_fail(err, MM_ERR_OUT_OF_MEMORY, "mega_moe case: out of memory");
    st = mm_comm_run_threads((int)run->ranks, thread_rank, run, statuses, errors, err);
    if (st != MM_OK && statuses[0] != MM_OK) return mm_fail(err, statuses[0], "%s", errors[0].message);
    if (st != MM_OK) return st;
    for (int64_t g = 0; g < run->ranks; g++) {
        if ((st = mm_case_output(ctx, g, "y", &run->rank[g].y, err)) != MM_OK) return st;
        if ((st = mm_case_output(ctx, g, "expert_token_nums", &run->rank[g].etn, err)) != MM_OK) return st;
    }
    return MM_OK;
}

/* MPI: this process is rank ctx->process_rank; outputs are gathered to process 0. */
static mm_status run_mpi(mm_case_ctx *ctx, moe_case_run *run, mm_error *err) {
    mm_comm *comm = NULL;
    mm_error local;
    mm_error_clear(&local);
    int64_t g = ctx->process_rank;
    mm_status st = MM_OK;
    if (ctx->process_count != run->ranks)
        return mm_fail(err, MM_ERR_INVALID_ARGUMENT,
                       "the case has ranks = %" PRId64 " but %d MPI processes run it", run->ranks,
                       ctx->process_count);
    if ((st = mm_comm_mpi_world(&comm, err)) != MM_OK) return st;
    if (ctx->options.timeout_seconds > 0) mm_comm_set_timeout(comm, ctx->options.timeout_seconds, NULL);
    moe_rank_case *rc = &run->rank[g];
    st = charge_buffers(ctx, run, 1, &local);
    if (st == MM_OK) st = read_rank(ctx, g, run->ext, rc, &local);
    if (st == MM_OK) st = alloc_outputs(ctx, run, rc, &local);
    st = mm_comm_agree(comm, st, &local);
    if (st == MM_OK) st = rank_call(comm, run, rc, &local);
    /* Gather: BS per rank, then fixed-size blocks of (M x H BF16 + E_l INT32). */
    int64_t H = rc->x.ndim == 2 ? rc->x.shape[1] : 0, el = run->sizing.moe_expert_num / run->ranks;
    int64_t bs[1] = {rc->x.shape[0]}, maxbs[1] = {rc->x.shape[0]}, maxh[1] = {H};
    unsigned char *block = NULL, *all = NULL;
    if (st == MM_OK) st = mm_comm_allreduce_i64(comm, maxbs, 1, MM_REDUCE_MAX, &local);
    if (st == MM_OK) st = mm_comm_allreduce_i64(comm, maxh, 1, MM_REDUCE_MAX, &local);
    size_t ybytes = (size_t)(maxbs[0] * maxh[0]) * 2, bytes = 8 + ybytes + (size_t)el * 4;
    if (st == MM_OK) {
        /* `all` holds every rank's outputs until the file is written (the writer streams from it). */
        st = mm_case_alloc_gather(ctx, bytes, run->ranks, &block, &all, &local);
        st = mm_comm_agree(comm, st, &local);
    }
    if (st == MM_OK) {
        memcpy(block, bs, 8);
        memcpy(block + 8, rc->y.data, (size_t)(bs[0] * H) * 2);
        memcpy(block + 8 + ybytes, rc->etn.data, (size_t)el * 4);
        st = mm_comm_allgather(comm, block, bytes, all, &local);
    }
    for (int64_t q = 0; st == MM_OK && q < run->ranks; q++) {
        moe_rank_case *o = &run->rank[q];
        int64_t qbs;
        memcpy(&qbs, all + q * bytes, 8);
        int64_t ys[2] = {qbs, H};
        mm_tensor y = mm_tensor_make(MM_DTYPE_BF16, 2, ys, all + q * bytes + 8);
        mm_tensor etn = mm_tensor_make(MM_DTYPE_I32, 1, &el, all + q * bytes + 8 + ybytes);
        (void)o;
        if ((st = mm_case_output(ctx, q, "y", &y, &local)) != MM_OK) break;
        st = mm_case_output(ctx, q, "expert_token_nums", &etn, &local);
    }
    free(block);
    mm_comm_free(comm, NULL);
    if (st != MM_OK) return mm_fail(err, st, "%s", local.message);
    return MM_OK;
}

static mm_status run_op(mm_case_ctx *ctx, int ext, mm_error *err) {
    moe_case_run run;
    memset(&run, 0, sizeof run);
    run.ext = ext;
    run.ranks = ctx->ranks;
    run.timeout_seconds = ctx->options.timeout_seconds;
    mm_status st = read_attrs(ctx, &run, err);
    if (st != MM_OK) return st;
    if (ext) {
        int64_t il = 0;
        if ((st = mm_case_attr_int64(ctx, "scale_block_n", 0, 0, INT32_MAX, &run.scale_block_n, err)) !=
                MM_OK ||
            (st = mm_case_attr_int64(ctx, "scale_block_k", 0, 0, INT32_MAX, &run.scale_block_k, err)) !=
                MM_OK ||
            (st = mm_case_attr_int64(ctx, "weight1_interleave", 0, 0, 1, &il, err)) != MM_OK)
            return st;
        run.weight1_interleave = (int)il;
    }
    if (run.sizing.moe_expert_num % run.ranks != 0)
        return mm_fail(err, MM_ERR_INVALID_ARGUMENT,
                       "moe_expert_num = %" PRId64 " must be a multiple of ep_world_size = %" PRId64,
                       run.sizing.moe_expert_num, run.ranks);
    run.rank = mm_case_alloc(ctx, (size_t)run.ranks * sizeof *run.rank);
    if (!run.rank) return mm_fail(err, MM_ERR_OUT_OF_MEMORY, "mega_moe case: out of memory");
    if (ctx->options.backend == MM_CASE_BACKEND_MPI) return run_mpi(ctx, &run, err);
    return run_threads(ctx, &run, err);
}

static mm_status run_mega_moe(mm_case_ctx *ctx, mm_error *err) {
    return run_op(ctx, 0, err);
}

static mm_status run_mega_moe_ext(mm_case_ctx *ctx, mm_error *err) {
    return run_op(ctx, 1, err);
}

const mm_case_op mm_case_op_mega_moe = {"mega_moe", 1, mega_moe_inputs, mega_moe_attributes, run_mega_moe};
const mm_case_op mm_case_op_mega_moe_ext = {"mega_moe_ext", 1, mega_moe_ext_inputs, mega_moe_ext_attributes,
                                            run_mega_moe_ext};
