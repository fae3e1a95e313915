/* SPDX-License-Identifier: Apache-2.0 */
/* ops/re_routing.c: MoeReRouting, moving (rank, expert) blocks of tokens from rank-major to expert-major
 * order, with their scales, and writing the index and per-expert token counts.
 *
 * Plan: one O(N*E) pass turns the count matrix into the list of non-empty blocks in destination order
 * (source offset, destination offset, rows). Since every row has the same size, balancing the copy by
 * bytes is balancing it by destination rows: each parallel task takes a fixed range of destination rows,
 * finds its first block by binary search and copies block pieces with memcpy. A large block is thereby
 * split across tasks and many tiny blocks are grouped into one. Tokens are moved as bytes, so every
 * format (including 4-bit rows of ceil(H/2) bytes) takes the same path. */
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "core/parallel.h"
#include "ops/re_routing_check.h"

enum {
    /* Enough tasks per thread to even out a noisy core, each large enough to amortize the hand-out. */
    MM_RR_TASKS_PER_THREAD = 8,
    MM_RR_MIN_TASK_BYTES = 256 * 1024,
};

typedef struct rr_block {
    int64_t src_row, dst_row, rows;
} rr_block;

typedef struct rr_copy_plan {
    const uint8_t *tokens;
    uint8_t *permute_tokens;
    int64_t token_row_bytes;
    const uint8_t *scales; /* NULL without per_token_scales */
    uint8_t *permute_scales;
    int64_t scale_row_bytes;
    int32_t *token_idx;
    int scatter_idx; /* idx_type 1 */
    const rr_block *blocks;
    int64_t n_blocks;
    int64_t total_rows;
    int64_t rows_per_task;
} rr_copy_plan;

mm_re_routing_attrs mm_re_routing_default_attrs(void) {
    mm_re_routing_attrs attrs = {.expert_token_num_type = 1, .idx_type = 0};
    return attrs;
}

static mm_status check_all_inputs(const mm_re_routing_inputs *in, const mm_re_routing_attrs **attrs,
                                  mm_re_routing_attrs *defaults, mm_rr_geometry *g, mm_error *err) {
    if (!*attrs) {
        *defaults = mm_re_routing_default_attrs();
        *attrs = defaults;
    }
    return mm_rr_check_inputs(in, *attrs, g, err);
}

mm_status mm_re_routing_plan(const mm_re_routing_inputs *in, const mm_re_routing_attrs *attrs,
                             mm_tensor *permute_tokens, mm_tensor *permute_per_token_scales,
                             mm_tensor *permute_token_idx, mm_tensor *expert_token_num, mm_error *err) {
    mm_re_routing_attrs defaults;
    mm_rr_geometry g;
    mm_status st = check_all_inputs(in, &attrs, &defaults, &g, err);
    if (st != MM_OK) return st;
    mm_rr_fill_output_shapes(in, &g, permute_tokens, permute_per_token_scales, permute_token_idx,
                             expert_token_num);
    return MM_OK;
}

mm_status mm_re_routing_output_shapes(const mm_re_routing_inputs *in, const mm_re_routing_attrs *attrs,
                                      mm_tensor *permute_tokens, mm_tensor *permute_per_token_scales,
                                      mm_tensor *permute_token_idx, mm_tensor *expert_token_num,
                                      mm_error *err) {
    return mm_re_routing_plan(in, attrs, permute_tokens, permute_per_token_scales, permute_token_idx,
                              expert_token_num, err);
}

static int64_t read_count(const mm_tensor *counts, int64_t i) {
    if (counts->dtype == MM_DTYPE_I32) return ((const int32_t *)counts->data)[i];
    return ((const int64_t *)counts->data)[i];
}

static void write_count(mm_tensor *out, int64_t i, int64_t value) {
    if (out->dtype == MM_DTYPE_I32)
        ((int32_t *)out->data)[i] = (int32_t)value;
    else
        ((int64_t *)out->data)[i] = value;
}

/* Fills blocks (non-empty ones, in destination order) and expert_token_num. rank_cursor has N entries:
 * it starts as each rank's first source row and advances through the rank's experts. Counts were
 * validated: non-negative, summing to A, so every offset fits. */
static int64_t plan_blocks(const mm_tensor *counts, const mm_rr_geometry *g, int cumulative,
                           int64_t *rank_cursor, rr_block *blocks, mm_tensor *expert_token_num) {
    int64_t start = 0;
    for (int64_t r = 0; r < g->n; r++) {
        rank_cursor[r] = start;
        for (int64_t e = 0; e < g->e; e++) start += read_count(counts, r * g->e + e);
    }
    int64_t n_blocks = 0, dst = 0;
    for (int64_t e = 0; e < g->e; e++) {
        int64_t expert_total = 0;
        for (int64_t r = 0; r < g->n; r++) {
            int64_t rows = read_count(counts, r * g->e + e);
            if (rows == 0) continue;
            blocks[n_blocks++] = (rr_block){.src_row = rank_cursor[r], .dst_row = dst, .rows = rows};
            rank_cursor[r] += rows;
            dst += rows;
            expert_total += rows;
        }
        write_count(expert_token_num, e, cumulative ? dst : expert_total);
    }
    return n_blocks;
}

/* Index of the block holding destination row `row` (blocks are sorted and tile [0, A)). */
static int64_t find_block(const rr_block *blocks, int64_t n_blocks, int64_t row) {
    int64_t lo = 0, hi = n_blocks - 1;
    while (lo < hi) {
        int64_t mid = lo + (hi - lo + 1) / 2;
        if (blocks[mid].dst_row <= row)
            lo = mid;
        else
            hi = mid - 1;
    }
    return lo;
}

static void copy_piece(const rr_copy_plan *p, int64_t src, int64_t dst, int64_t rows) {
    memcpy(p->permute_tokens + dst * p->token_row_bytes, p->tokens + src * p->token_row_bytes,
           (size_t)(rows * p->token_row_bytes));
    if (p->scales && p->scale_row_bytes > 0)
        memcpy(p->permute_scales + dst * p->scale_row_bytes, p->scales + src * p->scale_row_bytes,
               (size_t)(rows * p->scale_row_bytes));
    if (p->scatter_idx)
        for (int64_t i = 0; i < rows; i++) p->token_idx[src + i] = (int32_t)(dst + i);
    else
        for (int64_t i = 0; i < rows; i++) p->token_idx[dst + i] = (int32_t)(src + i);
}

static void copy_task(void *ctx, int64_t task) {
    const rr_copy_plan *p = ctx;
    int64_t row = task * p->rows_per_task;
    int64_t end = row + p->rows_per_task < p->total_rows ? row + p->rows_per_task : p->total_rows;
    for (int64_t b = find_block(p->blocks, p->n_blocks, row); row < end; b++) {
        const rr_block *blk = &p->blocks[b];
        int64_t offset = row - blk->dst_row;
        int64_t rows = blk->rows - offset < end - row ? blk->rows - offset : end - row;
        copy_piece(p, blk->src_row + offset, row, rows);
        row += rows;
    }
}

static int64_t choose_rows_per_task(const mm_rr_geometry *g) {
    int64_t row_bytes = g->token_row_bytes + g->scale_row_bytes + (int64_t)sizeof(int32_t);
    int64_t tasks = (int64_t)mm_parallel_num_threads() * MM_RR_TASKS_PER_THREAD;
    int64_t rows = (g->a + tasks - 1) / tasks;
    int64_t min_rows = (MM_RR_MIN_TASK_BYTES + row_bytes - 1) / row_bytes;
    return rows > min_rows ? rows : min_rows;
}

/* Validation and allocation are done: from here on nothing can fail. */
static void rearrange(const mm_re_routing_inputs *in, const mm_re_routing_attrs *attrs,
                      const mm_re_routing_outputs *out, const mm_rr_geometry *g, int64_t *rank_cursor,
                      rr_block *blocks) {
    rr_copy_plan plan = {
        .tokens = in->tokens->data,
        .permute_tokens = out->permute_tokens->data,
        .token_row_bytes = g->token_row_bytes,
        .scales = in->per_token_scales ? in->per_token_scales->data : NULL,
        .permute_scales = in->per_token_scales ? out->permute_per_token_scales->data : NULL,
        .scale_row_bytes = g->scale_row_bytes,
        .token_idx = out->permute_token_idx->data,
        .scatter_idx = attrs->idx_type == MM_RE_ROUTING_IDX_SCATTER,
        .blocks = blocks,
        .total_rows = g->a,
        .rows_per_task = choose_rows_per_task(g),
    };
    plan.n_blocks = plan_blocks(in->expert_token_num_per_rank, g,
                                attrs->expert_token_num_type == MM_RE_ROUTING_TOKEN_NUM_CUMULATIVE,
                                rank_cursor, blocks, out->expert_token_num);
    mm_parallel_for((g->a + plan.rows_per_task - 1) / plan.rows_per_task, copy_task, &plan);
}

mm_status mm_re_routing(const mm_re_routing_inputs *in, const mm_re_routing_attrs *attrs,
                        const mm_re_routing_outputs *out, mm_error *err) {
    mm_re_routing_attrs defaults;
    mm_rr_geometry g;
    int64_t *rank_cursor = NULL;
    rr_block *blocks = NULL;
    mm_status st = check_all_inputs(in, &attrs, &defaults, &g, err);
    if (st == MM_OK) st = mm_rr_check_outputs(in, &g, out, err);
    if (st != MM_OK) goto done;

    /* At most A blocks are non-empty; allocate before writing anything so a failure leaves outputs alone. */
    if (g.a > 0) {
        rank_cursor = malloc((size_t)g.n * sizeof *rank_cursor);
        blocks = malloc((size_t)g.a * sizeof *blocks);
        if (!rank_cursor || !blocks) {
            st = mm_fail(err, MM_ERR_OUT_OF_MEMORY,
                         "no memory for the re-routing plan of %lld ranks and %lld tokens", (long long)g.n,
                         (long long)g.a);
            goto done;
        }
    }
    if (g.a == 0) {
        /* No tokens: every expert count (and every cumulative sum) is 0. */
        for (int64_t e = 0; e < g.e; e++) write_count(out->expert_token_num, e, 0);
        goto done;
    }

    rearrange(in, attrs, out, &g, rank_cursor, blocks);

done:
    free(blocks);
    free(rank_cursor);
    return st;
}
