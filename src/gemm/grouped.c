/* SPDX-License-Identifier: Apache-2.0 */
/* gemm/grouped.c: mm_gemm_grouped, the framework loops around the micro-kernels.
 *
 * Work is cut into tasks of (group, N-block of one or more adjacent panels, M-block of up to
 * M_BLOCK_TILES kernel tiles) and handed to the process-wide pool (core/parallel.h). Inside a task each
 * panel in turn is the outer loop, so its packed weights stay in cache while the M tiles stream past. Groups
 * with 0 rows produce no task. A kernel with pairs_panels (kernel.h) computes two panels per call for a
 * one-tile task of few rows: each even panel's step then computes the odd panel after it too (which may
 * belong to the next task), and each odd panel's step is empty. Each output element is computed by exactly
 * one sequence of kernel calls over the whole K, so the result is the same for every thread count and
 * every task schedule. */
#include <stdlib.h>

#include "format/format_table.h"
#include "core/error.h"
#include "core/parallel.h"
#include "core/thread_scratch.h"
#include "gemm/kernel_registry.h"
#include "gemm/kernels/kernels.h"

/* Tiles per M-block: hot experts (many rows) are split so both threads get work; 16 tiles keep the
 * per-task overhead negligible next to the kernel time. */
#define M_BLOCK_TILES 16
_Static_assert(MM_GEMM_AMX_KC % MM_GEMM_KC == 0, "K blocks start on multiples of MM_GEMM_KC");
_Static_assert(2 * MM_GEMM_KC * MM_GEMM_NR <= MM_GEMM_PREPARED_BLOCK_BYTES,
               "INT4 block decoded to INT8 fits");

typedef struct grouped_job {
    mm_dtype a_dtype;
    const mm_gemm_group *groups;    /* the caller's groups, or a copy pointing at prepared rows */
    const mm_gemm_group *original;  /* the caller's groups (source of row preparation) */
    int64_t *row_start;             /* per group: index of its first row among all prepared rows */
    const mm_gemm_kernel **kernels; /* per group */
    int64_t *task_start;            /* per group: index of its first task; [n_groups] = total */
    int64_t *panels_per_task;       /* per group */
    int64_t n_groups;
    mm_gemm_epilogue_fn epilogue;
    void *epilogue_ctx;
} grouped_job;

static int64_t activation_row_bytes(mm_dtype a_dtype, int64_t k) {
    return mm_dtype_row_bytes(a_dtype, k);
}

/* K per kernel call (kernel.h: the kernel's kc). It depends on the kernel only, and kernels continue
 * their sums exactly across calls, so results stay independent of the schedule. */
static int64_t k_block(const mm_gemm_kernel *kernel) {
    return kernel->kc > 0 ? kernel->kc : MM_GEMM_KC;
}

static int64_t m_block_rows(const mm_gemm_kernel *kernel) {
    return (int64_t)kernel->mr * M_BLOCK_TILES;
}

static int64_t m_blocks_of(const mm_gemm_group *g, const mm_gemm_kernel *kernel) {
    return (g->rows + m_block_rows(kernel) - 1) / m_block_rows(kernel);
}

/* Panels per task: up to MAX_PANELS_PER_TASK adjacent panels, computed one after the other, for
 * - one-tile tasks (decode sizes), whose kernels stream the weights themselves: a thread's stream then
 *   runs on from one panel into the next (panels are contiguous), where with one panel per task the
 *   pool's counter gave two threads alternate panels and each task restarted the hardware prefetcher;
 * - tasks of several tiles whose kernel fetches the prefetch hint (takes_prefetch): during a panel's
 *   last K block the tiles prefetch the next panel's first block, so that only a task's first panel
 *   starts on weights still in memory.
 * Fewer panels per task where the call (all its groups: per_thread_limit) would otherwise give fewer than
 * MIN_TASKS_PER_THREAD tasks per thread, to keep the threads balanced; an even count for kernels that pair
 * panels, so that every task computes as many. Measured: docs/gemm.md, 'Adjacent panels per task'. */
#define MAX_PANELS_PER_TASK  8
#define MIN_TASKS_PER_THREAD 8
static int64_t panels_per_task(const mm_gemm_group *g, const mm_gemm_kernel *kernel,
                               int64_t per_thread_limit) {
    if (g->rows == 0 || (g->rows > kernel->mr && !kernel->takes_prefetch)) return 1;
    int64_t per = per_thread_limit < 1                     ? 1
                  : per_thread_limit > MAX_PANELS_PER_TASK ? MAX_PANELS_PER_TASK
                                                           : per_thread_limit;
    if (g->rows <= kernel->pairs_panels && per > 1) per += per & 1; /* MAX_PANELS_PER_TASK is even */
    return per;
}

static int64_t task_count(const mm_gemm_group *g, const mm_gemm_kernel *kernel, int64_t panels_per_task) {
    if (g->rows == 0) return 0;
    return m_blocks_of(g, kernel) * ((g->w->n_panels + panels_per_task - 1) / panels_per_task);
}

/* The group whose range [start[g], start[g+1]) holds `index`; empty groups are skipped naturally. */
static int64_t find_group(const int64_t *start, int64_t n_groups, int64_t index) {
    int64_t lo = 0, hi = n_groups - 1;
    while (lo < hi) {
        int64_t mid = (lo + hi + 1) / 2;
        if (start[mid] <= index)
            lo = mid;
        else
            hi = mid - 1;
    }
    return lo;
}

/* Bytes between prepared rows (BF16: K rounded up to even, or the kernel's own layout), rows on cache-line
 * boundaries. */
static int64_t prepared_stride(const mm_gemm_kernel *kernel, int64_t k) {
    int64_t bytes = kernel->prepared_row_bytes ? kernel->prepared_row_bytes(k) : (k + 1) / 2 * 4;
    return (bytes + 63) / 64 * 64;
}

static void prepare_row_task(void *ctx, int64_t row) {
    const grouped_job *job = ctx;
    int64_t gi = find_group(job->row_start, job->n_groups, row);
    const mm_gemm_group *src = &job->original[gi];
    int64_t r = row - job->row_start[gi];
    const uint8_t *mx = src->a_mx_scales ? src->a_mx_scales + r * src->a_mx_stride : NULL;
    uint16_t *dst =
        (uint16_t *)(void *)((uint8_t *)(uintptr_t)job->groups[gi].a + r * job->groups[gi].a_stride);
    job->kernels[gi]->prepare_rows(job->a_dtype, (const uint8_t *)src->a + r * src->a_stride, mx, src->w->k,
                                   dst);
}

/* The panel's own fields of a kernel call (its codes, column and block scales, valid columns). */
static void set_panel(mm_ukernel_args *args, const mm_gemm_packed_weights *w, int64_t panel) {
    int64_t col0 = panel * MM_GEMM_NR;
    args->n = (int)(w->n_out - col0 < MM_GEMM_NR ? w->n_out - col0 : MM_GEMM_NR);
    args->b = mm_packed_panel(w, panel);
    if (w->col_scale) args->col_scale = w->col_scale + col0;
    if (w->col_offset) args->col_offset = w->col_offset + col0;
    if (w->col_sum_x128) args->col_sum_x128 = w->col_sum_x128 + col0;
    if (w->mx_scale) args->b_mx_scale = w->mx_scale + panel * w->k_blocks * MM_GEMM_NR;
    if (w->mx_scale_e8m0) args->b_mx_e8m0 = w->mx_scale_e8m0 + panel * w->k_blocks * MM_GEMM_NR;
    if (w->block_scale) args->b_block_scale = w->block_scale + panel * w->scale_blocks * MM_GEMM_NR;
    if (w->block_zero) args->b_block_zero = w->block_zero + panel * w->scale_blocks * MM_GEMM_NR;
}

static void run_panel(const grouped_job *job, int64_t lo, int64_t panel, int64_t row_begin, int64_t row_end,
                      int64_t following_panel) {
    const mm_gemm_group *g = &job->groups[lo];
    const mm_gemm_kernel *kernel = job->kernels[lo];
    const mm_gemm_packed_weights *w = g->w;
    int64_t col0 = panel * MM_GEMM_NR;
    float scratch[2][MM_GEMM_MR_MAX * MM_GEMM_NR];
    /* Running accumulators of every tile of the M-block between K blocks. */
    uint32_t partial[M_BLOCK_TILES * MM_GEMM_MR_MAX * MM_GEMM_NR];
    _Alignas(64) uint8_t stack_block[MM_GEMM_PREPARED_BLOCK_BYTES];
    uint8_t *block = stack_block;
    int64_t kc = k_block(kernel);
    if (kernel->prepare_panel && kc * MM_GEMM_NR * 2 > (int64_t)sizeof stack_block) {
        /* Larger prepared blocks live in the thread's scratch; without it, the stack block and
         * MM_GEMM_KC give the same results (kernel.h), only slower. */
        block = mm_thread_scratch((size_t)(kc * MM_GEMM_NR * 2));
        if (!block) block = stack_block, kc = MM_GEMM_KC;
    }

    mm_ukernel_args args = {0};
    args.k = w->k;
    args.a_dtype = kernel->prepare_rows ? MM_DTYPE_BF16 : job->a_dtype;
    args.a_stride = g->a_stride;
    args.a_mx_stride = g->a_mx_stride;
    args.w_dtype = w->dtype;
    set_panel(&args, w, panel);
    args.block_k = w->block_k;
    int64_t tiles = (row_end - row_begin + kernel->mr - 1) / kernel->mr;
    args.streams_weights = tiles == 1;
    /* A kernel that pairs panels (kernel.h) computes odd panel p + 1 with even panel p when the task has
     * one tile: the odd panel's step is then empty (wherever the task boundaries fall). */
    int pairs = row_end - row_begin <= kernel->pairs_panels && !kernel->prepare_panel && tiles == 1;
    if (pairs && panel % 2 == 1) return;
    pairs = pairs && panel + 1 < w->n_panels;
    int64_t pair_bytes = w->panel_bytes / ((w->k + 1) / 2); /* packed bytes per K pair of the panel */
    /* K outer, M tiles inner: the panel's K block stays in cache while the tiles stream past it. */
    for (int64_t k_begin = 0; k_begin < w->k; k_begin += kc) {
        args.k_begin = k_begin;
        args.k_end = w->k - k_begin < kc ? w->k : k_begin + kc;
        args.first = k_begin == 0;
        args.last = args.k_end == w->k;
        /* The next K block to fetch, split among the M-block's tiles (kernel.h: prefetch): the panel's
         * next one or, in its last K block, the first of the task's following panel. With one tile the
         * kernel or the prepare streams the weights itself. */
        const uint8_t *next_codes = NULL; /* the panel the next block belongs to */
        int64_t next_begin = 0;
        if (!args.streams_weights && args.k_end < w->k)
            next_codes = args.b, next_begin = args.k_end;
        else if (!args.streams_weights && following_panel >= 0)
            next_codes = mm_packed_panel(w, following_panel);
        int64_t next_lines = 0, tile_lines = 0;
        const uint8_t *next_block = NULL;
        if (next_codes) {
            int64_t next_end = w->k - next_begin < kc ? w->k : next_begin + kc;
            next_block = next_codes + next_begin / 2 * pair_bytes;
            next_lines = ((next_end + 1) / 2 - next_begin / 2) * pair_bytes / 64;
            tile_lines = (next_lines + tiles - 1) / tiles;
        }
        args.prefetch = NULL; /* the tiles of a task's last K block fetch nothing */
        args.prefetch_lines = 0;
        if (kernel->prepare_panel) {
            kernel->prepare_panel(&args, block);
            args.b_block = block;
        }
        for (int64_t row0 = row_begin; row0 < row_end; row0 += kernel->mr) {
            int64_t tile = (row0 - row_begin) / kernel->mr;
            if (next_block) {
                int64_t first_line = tile * tile_lines, left = next_lines - first_line;
                args.prefetch = next_block + first_line * 64;
                args.prefetch_lines = left < 0 ? 0 : left < tile_lines ? left : tile_lines;
            }
            args.partial = partial + tile * MM_GEMM_MR_MAX * MM_GEMM_NR;
            args.m = (int)(row_end - row0 < kernel->mr ? row_end - row0 : kernel->mr);
            args.a = (const uint8_t *)g->a + row0 * g->a_stride;
            if (g->a_row_scales) args.a_row_scales = g->a_row_scales + row0;
            if (g->a_mx_scales) args.a_mx_scales = g->a_mx_scales + row0 * g->a_mx_stride;
            if (g->c) {
                args.c = g->c + row0 * g->ldc + col0;
                args.ldc = g->ldc;
            } else {
                args.c = scratch[0];
                args.ldc = MM_GEMM_NR;
            }
            /* The paired panel: the same rows and K block; its accumulators in the next tile's slot
             * (this task has one tile). */
            mm_ukernel_args second;
            args.next_panel = NULL;
            if (pairs) {
                second = args;
                set_panel(&second, w, panel + 1);
                second.partial = partial + MM_GEMM_MR_MAX * MM_GEMM_NR;
                second.c = g->c ? args.c + MM_GEMM_NR : scratch[1];
                args.next_panel = &second;
            }
            kernel->fn(&args);
            if (args.last && job->epilogue) {
                job->epilogue(job->epilogue_ctx, lo, row0, col0, args.m, args.n, args.c, args.ldc);
                if (pairs)
                    job->epilogue(job->epilogue_ctx, lo, row0, col0 + MM_GEMM_NR, second.m, second.n,
                                  second.c, second.ldc);
            }
        }
    }
}

static void run_task(void *ctx, int64_t task) {
    const grouped_job *job = ctx;
    int64_t lo = find_group(job->task_start, job->n_groups, task);
    const mm_gemm_group *g = &job->groups[lo];
    const mm_gemm_kernel *kernel = job->kernels[lo];
    int64_t n_panels = g->w->n_panels, per = job->panels_per_task[lo];
    int64_t panel_tasks = (n_panels + per - 1) / per;
    int64_t local = task - job->task_start[lo];
    int64_t first = local % panel_tasks * per;
    int64_t last = first + per < n_panels ? first + per : n_panels;
    int64_t row_begin = (local / panel_tasks) * m_block_rows(kernel);
    int64_t row_end = row_begin + m_block_rows(kernel) < g->rows ? row_begin + m_block_rows(kernel) : g->rows;
    for (int64_t panel = first; panel < last; panel++)
        run_panel(job, lo, panel, row_begin, row_end, panel + 1 < last ? panel + 1 : -1);
}

static mm_status validate_group(mm_dtype a_dtype, int64_t gi, const mm_gemm_group *g,
                                const mm_gemm_options *opts, const mm_gemm_kernel **kernel, mm_error *err) {
    *kernel = NULL;
    if (g->rows < 0)
        return mm_fail(err, MM_ERR_INVALID_ARGUMENT, "groups[%lld].rows = %lld is negative", (long long)gi,
                       (long long)g->rows);
    if (g->rows == 0) return MM_OK;
    if (!g->w)
        return mm_fail(err, MM_ERR_INVALID_ARGUMENT, "groups[%lld].w is NULL with %lld rows", (long long)gi,
                       (long long)g->rows);
    const mm_gemm_packed_weights *w = g->w;
    if (!(opts && opts->kernel)) {
        mm_status st = mm_gemm_kernel_config_check(err);
        if (st != MM_OK) return st;
    }
    *kernel = opts && opts->kernel ? opts->kernel : mm_gemm_kernel_select_rows(a_dtype, w->dtype, g->rows);
    if (!*kernel)
        return mm_fail(err, MM_ERR_INVALID_ARGUMENT,
                       "groups[%lld]: activation dtype %s with weight dtype %s is not a supported GEMM pair",
                       (long long)gi, mm_dtype_name(a_dtype), mm_dtype_name(w->dtype));
    /* FP8 E4M3 weights come packed with MX scales (FP8/FP4 activations) or with block scales (the
     * weight-only pair with BF16 activations); the two are not interchangeable. */
    if (w->dtype == MM_DTYPE_FP8_E4M3FN && (a_dtype == MM_DTYPE_BF16) != (w->block_scale != NULL))
        return mm_fail(err, MM_ERR_INVALID_ARGUMENT,
                       "groups[%lld]: %s activations with fp8_e4m3fn weights packed with %s scales: bf16 "
                       "activations take block-scaled fp8 weights, MX activations take MX-scaled ones",
                       (long long)gi, mm_dtype_name(a_dtype), w->block_scale ? "block" : "MX");
    if ((*kernel)->kc < 0 || (*kernel)->kc % MM_GEMM_KC != 0)
        return mm_fail(err, MM_ERR_INVALID_ARGUMENT, "kernel %s has kc = %d, not a multiple of %d",
                       (*kernel)->name, (*kernel)->kc, MM_GEMM_KC);
    if ((*kernel)->mr < 1 || (*kernel)->mr > MM_GEMM_MR_MAX)
        return mm_fail(err, MM_ERR_INVALID_ARGUMENT, "kernel %s has MR = %d outside [1, %d]", (*kernel)->name,
                       (*kernel)->mr, MM_GEMM_MR_MAX);
    if (!g->a)
        return mm_fail(err, MM_ERR_INVALID_ARGUMENT, "groups[%lld].a is NULL with %lld rows", (long long)gi,
                       (long long)g->rows);
    int64_t row_bytes = activation_row_bytes(a_dtype, w->k);
    if (g->rows > 1 && g->a_stride < row_bytes)
        return mm_fail(err, MM_ERR_INVALID_ARGUMENT,
                       "groups[%lld].a_stride = %lld is below the row size %lld bytes (K = %lld)",
                       (long long)gi, (long long)g->a_stride, (long long)row_bytes, (long long)w->k);
    if (a_dtype == MM_DTYPE_I8 && !g->a_row_scales)
        return mm_fail(err, MM_ERR_INVALID_ARGUMENT,
                       "groups[%lld].a_row_scales is NULL: int8 activations need a scale per row",
                       (long long)gi);
    if (mm_format_is_mx(a_dtype)) {
        int64_t blocks = (w->k + 31) / 32;
        if (!g->a_mx_scales)
            return mm_fail(err, MM_ERR_INVALID_ARGUMENT,
                           "groups[%lld].a_mx_scales is NULL: MX activations need E8M0 scales",
                           (long long)gi);
        if (g->rows > 1 && g->a_mx_stride < blocks)
            return mm_fail(err, MM_ERR_INVALID_ARGUMENT,
                           "groups[%lld].a_mx_stride = %lld is below ceil(K/32) = %lld", (long long)gi,
                           (long long)g->a_mx_stride, (long long)blocks);
    }
    if (!g->c && !(opts && opts->epilogue))
        return mm_fail(err, MM_ERR_INVALID_ARGUMENT,
                       "groups[%lld].c is NULL and there is no epilogue to take the output", (long long)gi);
    if (g->c && g->rows > 1 && g->ldc < w->n_out)
        return mm_fail(err, MM_ERR_INVALID_ARGUMENT,
                       "groups[%lld].ldc = %lld is below the %lld output columns", (long long)gi,
                       (long long)g->ldc, (long long)w->n_out);
    return MM_OK;
}

/* For groups whose kernel prepares its activations: one workspace of prepared rows, filled in parallel
 * (one task per row), and a copy of the groups pointing at it. */
static mm_status prepare_rows(grouped_job *job, mm_gemm_group **prepared, uint8_t **workspace,
                              mm_error *err) {
    int64_t total_rows = 0, total_bytes = 0;
    job->row_start = calloc((size_t)job->n_groups + 1, sizeof *job->row_start);
    if (!job->row_start) goto oom;
    for (int64_t gi = 0; gi < job->n_groups; gi++) {
        const mm_gemm_group *g = &job->original[gi];
        int needs = g->rows > 0 && job->kernels[gi]->prepare_rows;
        job->row_start[gi + 1] = job->row_start[gi] + (needs ? g->rows : 0);
        if (needs) total_bytes += g->rows * prepared_stride(job->kernels[gi], g->w->k);
    }
    total_rows = job->row_start[job->n_groups];
    if (total_rows == 0) return MM_OK;
    *prepared = malloc((size_t)job->n_groups * sizeof **prepared);
    *workspace = aligned_alloc(64, (size_t)total_bytes);
    if (!*prepared || !*workspace) goto oom;
    int64_t offset = 0;
    for (int64_t gi = 0; gi < job->n_groups; gi++) {
        mm_gemm_group *g = &(*prepared)[gi];
        *g = job->original[gi];
        if (g->rows == 0 || !job->kernels[gi]->prepare_rows) continue;
        g->a = *workspace + offset;
        g->a_stride = prepared_stride(job->kernels[gi], g->w->k);
        g->a_row_scales = NULL;
        g->a_mx_scales = NULL;
        offset += g->rows * g->a_stride;
    }
    job->groups = *prepared;
    mm_parallel_for(total_rows, prepare_row_task, job);
    return MM_OK;
oom:
    return mm_fail(err, MM_ERR_OUT_OF_MEMORY, "grouped GEMM activation workspace (%lld bytes): out of memory",
                   (long long)total_bytes);
}

mm_status mm_gemm_grouped(mm_dtype a_dtype, int64_t n_groups, const mm_gemm_group *groups,
                          const mm_gemm_options *opts, mm_error *err) {
    mm_status st = MM_OK;
    grouped_job job = {0};
    mm_gemm_group *prepared = NULL;
    uint8_t *workspace = NULL;
    if (n_groups < 0)
        return mm_fail(err, MM_ERR_INVALID_ARGUMENT, "n_groups = %lld is negative", (long long)n_groups);
    if (n_groups == 0) return MM_OK;
    if (!groups)
        return mm_fail(err, MM_ERR_INVALID_ARGUMENT, "groups is NULL with n_groups = %lld",
                       (long long)n_groups);
    job.kernels = calloc((size_t)n_groups, sizeof *job.kernels);
    job.task_start = calloc((size_t)n_groups + 1, sizeof *job.task_start);
    job.panels_per_task = calloc((size_t)n_groups, sizeof *job.panels_per_task);
    if (!job.kernels || !job.task_start || !job.panels_per_task) {
        st = mm_fail(err, MM_ERR_OUT_OF_MEMORY, "grouped GEMM task table for %lld groups: out of memory",
                     (long long)n_groups);
        goto fail;
    }
    /* Panel steps of the whole call, for the panels-per-task limit (one count of threads for the call). */
    int64_t panel_steps = 0;
    for (int64_t gi = 0; gi < n_groups; gi++) {
        if ((st = validate_group(a_dtype, gi, &groups[gi], opts, &job.kernels[gi], err)) != MM_OK) goto fail;
        if (groups[gi].rows > 0)
            panel_steps += groups[gi].w->n_panels * m_blocks_of(&groups[gi], job.kernels[gi]);
    }
    int64_t per_thread_limit = panel_steps / ((int64_t)MIN_TASKS_PER_THREAD * mm_parallel_num_threads());
    for (int64_t gi = 0; gi < n_groups; gi++) {
        job.panels_per_task[gi] = panels_per_task(&groups[gi], job.kernels[gi], per_thread_limit);
        job.task_start[gi + 1] =
            job.task_start[gi] + task_count(&groups[gi], job.kernels[gi], job.panels_per_task[gi]);
    }
    job.a_dtype = a_dtype;
    job.groups = groups;
    job.original = groups;
    job.n_groups = n_groups;
    job.epilogue = opts ? opts->epilogue : NULL;
    job.epilogue_ctx = opts ? opts->epilogue_ctx : NULL;
    if ((st = prepare_rows(&job, &prepared, &workspace, err)) != MM_OK) goto fail;
    if (job.task_start[n_groups] > 0) mm_parallel_for(job.task_start[n_groups], run_task, &job);

fail:
    free(job.kernels);
    free(job.task_start);
    free(job.panels_per_task);
    free(job.row_start);
    free(prepared);
    free(workspace);
    return st;
}
