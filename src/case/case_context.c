/* SPDX-License-Identifier: Apache-2.0 */
/* case/case_context.c: inputs, attributes and outputs of an operator adapter, with named errors. */
#include "case/case_context.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/error.h"
#include "io/io_util.h"
#include "io/json.h"

void mm_case_tensor_name(char *buf, size_t cap, int64_t rank, const char *name) {
    if (rank < 0)
        snprintf(buf, cap, "%s", name);
    else
        snprintf(buf, cap, "rank%" PRId64 ".%s", rank, name);
}

static int track(mm_case_owned *list, void *p) {
    if (list->count == list->cap) {
        size_t cap = list->cap ? 2 * list->cap : 16;
        void **grown = realloc(list->items, cap * sizeof *grown);
        if (!grown) return -1;
        list->items = grown;
        list->cap = cap;
    }
    list->items[list->count++] = p;
    return 0;
}

static void *alloc_into(mm_case_owned *list, size_t nbytes) {
    void *p = calloc(nbytes ? nbytes : 1, 1);
    if (!p) return NULL;
    if (track(list, p) != 0) {
        free(p);
        return NULL;
    }
    return p;
}

void *mm_case_alloc(mm_case_ctx *ctx, size_t nbytes) {
    return alloc_into(&ctx->owned, nbytes);
}

void *mm_case_alloc_output(mm_case_ctx *ctx, size_t nbytes) {
    return alloc_into(&ctx->outputs, nbytes);
}

/* Counts need bytes against the memory budget, before they are allocated: a tiny file whose attributes
 * or shapes ask for gigabytes is refused with both figures instead of running out of memory. */
mm_status mm_case_charge(mm_case_ctx *ctx, uint64_t need, const char *what, mm_error *err) {
    if (!ctx->budget) {
        long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
        uint64_t phys = pages > 0 && page > 0 ? (uint64_t)pages * (uint64_t)page : UINT64_MAX / 4 * 3;
        ctx->budget = ctx->options.memory_budget_bytes ? ctx->options.memory_budget_bytes : phys / 4 * 3;
    }
    if (need > ctx->budget - (ctx->used < ctx->budget ? ctx->used : ctx->budget))
        return mm_fail(err, MM_ERR_INVALID_ARGUMENT,
                       "%s: the case needs %.2f GB, more than the budget of %.2f GB (the memory budget of "
                       "the case options)",
                       what, ((double)ctx->used + (double)need) / 1e9, (double)ctx->budget / 1e9);
    ctx->used += need;
    return MM_OK;
}

mm_status mm_case_alloc_tensor(mm_case_ctx *ctx, mm_tensor *t, const char *what, mm_error *err) {
    int64_t nbytes = mm_tensor_nbytes(t);
    if (nbytes < 0 || (uint64_t)nbytes > SIZE_MAX)
        return mm_fail(err, MM_ERR_INVALID_ARGUMENT, "%s: size of the output overflows", what);
    mm_status st = mm_case_charge(ctx, (uint64_t)nbytes, what, err); /* the writer streams it: no copy */
    if (st) return st;
    t->data = mm_case_alloc_output(ctx, (size_t)nbytes);
    if (!t->data)
        return mm_fail(err, MM_ERR_OUT_OF_MEMORY, "%s: cannot allocate %" PRId64 " bytes", what, nbytes);
    return MM_OK;
}

static void release_list(mm_case_owned *list) {
    for (size_t i = 0; i < list->count; i++) free(list->items[i]);
    free(list->items);
    memset(list, 0, sizeof *list);
}

mm_status mm_case_alloc_gather(mm_case_ctx *ctx, size_t bytes, int64_t ranks, unsigned char **block,
                               unsigned char **all, mm_error *err) {
    uint64_t total;
    *block = *all = NULL;
    if (__builtin_mul_overflow((uint64_t)bytes, (uint64_t)ranks + 1, &total) || total > SIZE_MAX)
        total = UINT64_MAX;
    mm_status st = mm_case_charge(ctx, total, "gathering the outputs", err);
    if (st) return st;
    *block = calloc(1, bytes ? bytes : 1);
    *all = mm_case_alloc_output(ctx, (size_t)(total - bytes));
    if (!*block || !*all) return mm_fail(err, MM_ERR_OUT_OF_MEMORY, "gathering the outputs: out of memory");
    return MM_OK;
}

void mm_case_ctx_release_inputs(mm_case_ctx *ctx) {
    release_list(&ctx->owned);
}

void mm_case_ctx_release(mm_case_ctx *ctx) {
    release_list(&ctx->owned);
    release_list(&ctx->outputs);
}

/* "f16, bf16, i8" from a mask, for messages. */
static void dtype_list(uint64_t mask, char *buf, size_t cap) {
    size_t at = 0;
    buf[0] = '\0';
    for (int d = MM_DTYPE_INVALID + 1; d < MM_DTYPE_COUNT && at < cap; d++) {
        if (!(mask & MM_CASE_DTYPE(d))) continue;
        int n = snprintf(buf + at, cap - at, "%s%s", at ? ", " : "", mm_dtype_name((mm_dtype)d));
        if (n < 0) break;
        at += (size_t)n;
    }
}

static void shape_text(const int64_t *shape, int ndim, char *buf, size_t cap) {
    size_t at = 0;
    int n = snprintf(buf, cap, "[");
    at = n > 0 ? (size_t)n : 0;
    for (int i = 0; i < ndim && at < cap; i++) {
        n = snprintf(buf + at, cap - at, "%s%" PRId64, i ? ", " : "", shape[i]);
        if (n < 0) break;
        at += (size_t)n;
    }
    if (at < cap) snprintf(buf + at, cap - at, "]");
}

mm_status mm_case_input(mm_case_ctx *ctx, int64_t rank, const char *name, int required, uint64_t dtype_mask,
                        int ndim_min, int ndim_max, mm_tensor *out, int *present, mm_error *err) {
    char full[160];
    mm_case_tensor_name(full, sizeof full, rank, name);
    memset(out, 0, sizeof *out);
    if (present) *present = 0;
    const mm_st_tensor_info *info = mm_st_find(ctx->reader, full);
    if (!info) {
        if (!required) return MM_OK;
        return mm_fail(err, MM_ERR_INVALID_FILE, "tensor \"%s\" is missing (required by %s)", full,
                       ctx->op->name);
    }
    if (!(dtype_mask & MM_CASE_DTYPE(info->dtype))) {
        char allowed[256];
        dtype_list(dtype_mask, allowed, sizeof allowed);
        return mm_fail(err, MM_ERR_INVALID_FILE, "tensor \"%s\" has dtype %s; %s accepts %s", full,
                       info->dtype == MM_DTYPE_INVALID ? info->dtype_string : mm_dtype_name(info->dtype),
                       ctx->op->name, allowed);
    }
    if (info->ndim < ndim_min || info->ndim > ndim_max) {
        char shape[200], expected[48];
        shape_text(info->shape, info->ndim, shape, sizeof shape);
        if (ndim_min == ndim_max)
            snprintf(expected, sizeof expected, "%d", ndim_min);
        else
            snprintf(expected, sizeof expected, "%d to %d", ndim_min, ndim_max);
        return mm_fail(err, MM_ERR_INVALID_FILE, "tensor \"%s\" has %d dimension%s (shape %s); %s expects %s",
                       full, info->ndim, info->ndim == 1 ? "" : "s", shape, ctx->op->name, expected);
    }
    mm_tensor t = mm_tensor_make(info->dtype, info->ndim, info->shape, NULL);
    if (info->nbytes > SIZE_MAX)
        return mm_fail(err, MM_ERR_OUT_OF_MEMORY, "tensor \"%s\" is too large", full);
    mm_status charged = mm_case_charge(ctx, info->nbytes, full, err);
    if (charged) return charged;
    t.data = mm_case_alloc(ctx, (size_t)info->nbytes);
    if (!t.data)
        return mm_fail(err, MM_ERR_OUT_OF_MEMORY, "tensor \"%s\": cannot allocate %" PRIu64 " bytes", full,
                       info->nbytes);
    mm_status st = mm_st_read(ctx->reader, info, t.data, err);
    if (st != MM_OK) return st;
    *out = t;
    if (present) *present = 1;
    return MM_OK;
}

/* The metadata text of attribute `name`, or NULL when the file does not give it (the caller keeps
 * its default); label gets the prefix every message about the attribute starts with. */
static const char *attr_text(mm_case_ctx *ctx, const char *name, char *label, size_t cap) {
    snprintf(label, cap, "attribute \"%s\"", name);
    return mm_st_metadata(ctx->reader, name);
}

/* Reads attribute `name`, when the file gives it, as an int64 into *iv within [imin, imax], or (iv NULL)
 * as a double into *dv within [dmin, dmax]; leaves the output alone when absent or invalid. */
static mm_status attr_number(mm_case_ctx *ctx, const char *name, int64_t *iv, int64_t imin, int64_t imax,
                             double *dv, double dmin, double dmax, mm_error *err) {
    char label[96];
    const char *text = attr_text(ctx, name, label, sizeof label);
    if (!text) return MM_OK;
    int64_t i = 0;
    double d = 0;
    mm_status st =
        iv ? mm_json_literal_int64(label, text, &i, err) : mm_json_literal_double(label, text, &d, err);
    if (st != MM_OK) return st;
    if (iv && (i < imin || i > imax))
        return mm_fail(err, MM_ERR_INVALID_FILE, "%s = %" PRId64 " is outside [%" PRId64 ", %" PRId64 "]",
                       label, i, imin, imax);
    if (!iv && !(d >= dmin && d <= dmax))
        return mm_fail(err, MM_ERR_INVALID_FILE, "%s = %.17g is outside [%.17g, %.17g]", label, d, dmin,
                       dmax);
    if (iv)
        *iv = i;
    else
        *dv = d;
    return MM_OK;
}

mm_status mm_case_attr_int64(mm_case_ctx *ctx, const char *name, int64_t default_value, int64_t min,
                             int64_t max, int64_t *out, mm_error *err) {
    *out = default_value;
    return attr_number(ctx, name, out, min, max, NULL, 0, 0, err);
}

mm_status mm_case_attr_double(mm_case_ctx *ctx, const char *name, double default_value, double min,
                              double max, double *out, mm_error *err) {
    *out = default_value;
    return attr_number(ctx, name, NULL, 0, 0, out, min, max, err);
}

mm_status mm_case_attr_bool(mm_case_ctx *ctx, const char *name, int default_value, int *out, mm_error *err) {
    char label[96];
    const char *text = attr_text(ctx, name, label, sizeof label);
    *out = default_value;
    return text ? mm_json_literal_bool(label, text, out, err) : MM_OK;
}

mm_status mm_case_attr_choice(mm_case_ctx *ctx, const char *name, const char *default_value,
                              const char *const *allowed, const char **out, mm_error *err) {
    const char *text = mm_st_metadata(ctx->reader, name);
    *out = default_value;
    if (!text) return MM_OK;
    char list[256];
    size_t at = 0;
    list[0] = '\0';
    for (size_t i = 0; allowed[i]; i++) {
        if (strcmp(text, allowed[i]) == 0) {
            *out = allowed[i];
            return MM_OK;
        }
        int n = snprintf(list + at, sizeof list - at, "%s%s", i ? ", " : "", allowed[i]);
        if (n > 0 && (size_t)n < sizeof list - at) at += (size_t)n;
    }
    char quoted[MM_IO_QUOTE_BUF];
    mm_io_quote(quoted, sizeof quoted, text, strlen(text));
    return mm_fail(err, MM_ERR_INVALID_FILE, "attribute \"%s\" = \"%s\" is not one of: %s", name, quoted,
                   list);
}

mm_status mm_case_output(mm_case_ctx *ctx, int64_t rank, const char *name, const mm_tensor *t,
                         mm_error *err) {
    char full[160];
    mm_case_tensor_name(full, sizeof full, rank, name);
    mm_status st = mm_st_writer_add_ref(ctx->writer, full, t, err);
    if (st != MM_OK) mm_error_prefix(err, "output \"%s\"", full);
    return st;
}
