/* SPDX-License-Identifier: Apache-2.0 */
/* case/case_run.c: mm_case_run: open a case file, check it against its operator, run, write outputs.
 *
 * The checks here are the ones shared by every operator and need no tensor data, so a broken file
 * fails fast and before any allocation proportional to its tensors. Strictness is the point: a case
 * file is a public contract, and a silently ignored typo in an attribute name would make a case test
 * something other than what its author meant. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "case/case_runner.h"
#include "core/error.h"
#include "io/io_util.h"
#include "io/json.h"
#include "megamoe/version.h"

/* Collective calls larger than this are not a real machine. */
#define MM_CASE_MAX_RANKS 65536

static int name_in_list(const char *name, const char *const *list) {
    for (size_t i = 0; list && list[i]; i++)
        if (strcmp(name, list[i]) == 0) return 1;
    return 0;
}

static void join_list(const char *const *list, char *buf, size_t cap) {
    size_t at = 0;
    buf[0] = '\0';
    for (size_t i = 0; list && list[i] && at < cap; i++) {
        int n = snprintf(buf + at, cap - at, "%s%s", i ? ", " : "", list[i]);
        if (n < 0) break;
        at += (size_t)n;
    }
    if (!list || !list[0]) snprintf(buf, cap, "none");
}

static int starts_with(const char *s, const char *prefix) {
    return strncmp(s, prefix, strlen(prefix)) == 0;
}

static const char *quote(char *buf, size_t cap, const char *s) {
    return mm_io_quote(buf, cap, s, strlen(s));
}

static mm_status check_metadata_keys(const mm_case_ctx *ctx, mm_error *err) {
    const mm_case_op *op = ctx->op;
    size_t n = mm_st_metadata_count(ctx->reader);
    for (size_t i = 0; i < n; i++) {
        const char *key, *value;
        char q[MM_IO_QUOTE_BUF], list[512];
        mm_st_metadata_at(ctx->reader, i, &key, &value);
        if (strcmp(key, "op") == 0 || starts_with(key, "x-") || name_in_list(key, op->attributes)) continue;
        if (starts_with(key, "dtype.") || starts_with(key, "shape.")) {
            /* The reader applies these to their tensor; one naming no tensor is a mistake. */
            if (mm_st_find(ctx->reader, strchr(key, '.') + 1)) continue;
            return mm_fail(err, MM_ERR_INVALID_FILE, "metadata key \"%s\" names no tensor of the file",
                           quote(q, sizeof q, key));
        }
        if (strcmp(key, "ranks") == 0) {
            if (op->collective) continue;
            return mm_fail(err, MM_ERR_INVALID_FILE,
                           "metadata key \"ranks\" does not apply: %s is not collective (remove it)",
                           op->name);
        }
        join_list(op->attributes, list, sizeof list);
        return mm_fail(err, MM_ERR_INVALID_FILE,
                       "metadata key \"%s\" is not an attribute of %s (attributes: %s; notes go under keys "
                       "starting with \"x-\")",
                       quote(q, sizeof q, key), op->name, list);
    }
    return MM_OK;
}

/* Splits "rank<g>.<rest>" with g written canonically (no sign, no leading zero). */
static int parse_rank_name(const char *name, int64_t *rank, const char **rest) {
    if (!starts_with(name, "rank")) return 0;
    const char *p = name + 4;
    if (*p < '0' || *p > '9' || (p[0] == '0' && p[1] >= '0' && p[1] <= '9')) return 0;
    int64_t g = 0;
    for (; *p >= '0' && *p <= '9'; p++) {
        if (g > (INT64_MAX - 9) / 10) return 0;
        g = g * 10 + (*p - '0');
    }
    if (*p != '.') return 0;
    *rank = g;
    *rest = p + 1;
    return 1;
}

static mm_status check_tensor_names(const mm_case_ctx *ctx, mm_error *err) {
    const mm_case_op *op = ctx->op;
    size_t n = mm_st_tensor_count(ctx->reader);
    char q[MM_IO_QUOTE_BUF], list[512];
    for (size_t i = 0; i < n; i++) {
        const char *name = mm_st_tensor_at(ctx->reader, i)->name;
        if (!op->collective) {
            if (name_in_list(name, op->inputs)) continue;
            join_list(op->inputs, list, sizeof list);
            return mm_fail(err, MM_ERR_INVALID_FILE, "tensor \"%s\" is not an input of %s (inputs: %s)",
                           quote(q, sizeof q, name), op->name, list);
        }
        int64_t rank;
        const char *rest;
        if (!parse_rank_name(name, &rank, &rest) || !name_in_list(rest, op->inputs)) {
            join_list(op->inputs, list, sizeof list);
            return mm_fail(err, MM_ERR_INVALID_FILE,
                           "tensor \"%s\" is not a per-rank input rank<g>.<name> of %s (names: %s)",
                           quote(q, sizeof q, name), op->name, list);
        }
        if (rank >= ctx->ranks)
            return mm_fail(err, MM_ERR_INVALID_FILE,
                           "tensor \"%s\" names rank %" PRId64 " but ranks = %" PRId64,
                           quote(q, sizeof q, name), rank, ctx->ranks);
    }
    return MM_OK;
}

mm_status mm_case_open(const char *in_path, const mm_case_options *options, mm_case_ctx *ctx, mm_error *err) {
    memset(ctx, 0, sizeof *ctx);
    ctx->options = *options;
    ctx->process_count = 1;
    char q[MM_IO_QUOTE_BUF], list[256];
    mm_status st = mm_st_open(in_path, &ctx->reader, err);
    if (st != MM_OK) goto fail;
    const char *op_name = mm_st_metadata(ctx->reader, "op");
    mm_case_list_ops(list, sizeof list);
    if (!op_name) {
        st = mm_fail(err, MM_ERR_INVALID_FILE, "metadata key \"op\" is missing (it names the operator: %s)",
                     list);
        goto fail;
    }
    ctx->op = mm_case_find_op(op_name);
    if (!ctx->op) {
        if (mm_case_is_contract_op(op_name))
            st = mm_fail(err, MM_ERR_UNSUPPORTED,
                         "metadata \"op\" = \"%s\" is not implemented in this build (it runs: %s)", op_name,
                         list);
        else
            st = mm_fail(err, MM_ERR_INVALID_FILE,
                         "metadata \"op\" = \"%s\" is not a known operator (known: %s)",
                         quote(q, sizeof q, op_name), list);
        goto fail;
    }
    if (ctx->op->collective) {
        const char *text = mm_st_metadata(ctx->reader, "ranks");
        if (!text) {
            st = mm_fail(err, MM_ERR_INVALID_FILE, "metadata key \"ranks\" is missing (required by %s)",
                         op_name);
            goto fail;
        }
        if ((st = mm_json_literal_int64("metadata \"ranks\"", text, &ctx->ranks, err)) != MM_OK) goto fail;
        if (ctx->ranks < 1 || ctx->ranks > MM_CASE_MAX_RANKS) {
            st = mm_fail(err, MM_ERR_INVALID_FILE, "metadata \"ranks\" = %" PRId64 " is outside [1, %d]",
                         ctx->ranks, MM_CASE_MAX_RANKS);
            goto fail;
        }
    }
    if ((st = check_metadata_keys(ctx, err)) != MM_OK) goto fail;
    if ((st = check_tensor_names(ctx, err)) != MM_OK) goto fail;
    return MM_OK;
fail:
    mm_case_close(ctx);
    return st;
}

mm_status mm_case_execute(mm_case_ctx *ctx, const char *out_path, mm_error *err) {
    mm_status st = mm_st_writer_create(&ctx->writer, err);
    if (st != MM_OK) goto done;
    if ((st = mm_st_writer_set_metadata(ctx->writer, "op", ctx->op->name, err)) != MM_OK) goto done;
    if ((st = mm_st_writer_set_metadata(ctx->writer, "megamoe_version", mm_version(), err)) != MM_OK)
        goto done;
    if ((st = ctx->op->run(ctx, err)) != MM_OK) goto done;
    /* The writer streams the outputs from their buffers: free only the inputs and scratch before writing. */
    mm_case_ctx_release_inputs(ctx);
    if (ctx->process_rank == ctx->output_process) st = mm_st_writer_write(ctx->writer, out_path, err);
done:
    mm_st_writer_destroy(ctx->writer);
    ctx->writer = NULL;
    mm_case_ctx_release(ctx);
    return st;
}

void mm_case_close(mm_case_ctx *ctx) {
    mm_case_ctx_release(ctx);
    if (ctx->writer) mm_st_writer_destroy(ctx->writer);
    if (ctx->reader) mm_st_close(ctx->reader);
    ctx->writer = NULL;
    ctx->reader = NULL;
}

static mm_status run_in_process(const char *in_path, const char *out_path, const mm_case_options *options,
                                mm_error *err) {
    mm_case_ctx ctx;
    mm_status st = mm_case_open(in_path, options, &ctx, err);
    if (st != MM_OK) return st;
    st = mm_case_execute(&ctx, out_path, err);
    mm_case_close(&ctx);
    return st;
}

mm_status mm_case_run(const char *in_path, const char *out_path, const mm_case_options *options,
                      mm_error *err) {
    mm_case_options opts = {MM_CASE_BACKEND_THREADS, 0.0, 0};
    if (options) opts = *options;
    if (!in_path) return mm_fail(err, MM_ERR_INVALID_ARGUMENT, "in_path is NULL");
    if (!out_path) return mm_fail(err, MM_ERR_INVALID_ARGUMENT, "out_path is NULL");
    if (opts.backend != MM_CASE_BACKEND_THREADS && opts.backend != MM_CASE_BACKEND_MPI)
        return mm_fail(err, MM_ERR_INVALID_ARGUMENT, "options->backend = %d is not a mm_case_backend",
                       (int)opts.backend);
    if (!(opts.timeout_seconds >= 0.0))
        return mm_fail(err, MM_ERR_INVALID_ARGUMENT, "options->timeout_seconds = %g is negative or NaN",
                       opts.timeout_seconds);
    /* threads: the op's adapter starts its rank threads itself; mpi launches this process's rank. */
    if (opts.backend == MM_CASE_BACKEND_THREADS) return run_in_process(in_path, out_path, &opts, err);
    return mm_case_run_launched("mpi", in_path, out_path, &opts, err);
}
