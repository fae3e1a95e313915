/* SPDX-License-Identifier: Apache-2.0 */
/* io/st_writer.c: writing safetensors files in the standard layout, atomically.
 *
 * Layout: metadata first (keys sorted), then the tensors in insertion order with their data laid out
 * in the same order, the header padded with spaces so the data starts at a multiple of 8 (as the
 * reference writer does). Where the bytes land (atomic replacement, links, special files) is
 * io/out_file.c's job.
 *
 * The file is streamed: the header is built in memory, then each tensor's bytes go to the file straight
 * from where they are (the writer's copy for mm_st_writer_add, the caller's memory for
 * mm_st_writer_add_ref), so writing never holds a second copy of the data region. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/error.h"
#include "format/format_table.h"
#include "io/io_util.h"
#include "io/out_file.h"
#include "io/st_internal.h"

typedef struct writer_tensor {
    char *name;
    mm_dtype dtype; /* logical dtype, as added */
    int ndim;
    int64_t shape[MM_MAX_DIMS];        /* logical shape */
    int64_t stored_shape[MM_MAX_DIMS]; /* shape of the stored dtype (U8 bytes for 4-bit logical ones) */
    const unsigned char *data; /* the bytes written: `owned`, or the caller's (mm_st_writer_add_ref) */
    unsigned char *owned;      /* the writer's copy (mm_st_writer_add), NULL for a borrowed tensor */
    uint64_t nbytes;
} writer_tensor;

typedef struct writer_meta {
    char *key;
    char *value;
} writer_meta;

struct mm_st_writer {
    writer_tensor *tensors;
    size_t tensor_count, tensor_cap;
    writer_meta *meta;
    size_t meta_count, meta_cap;
};

mm_status mm_st_writer_create(mm_st_writer **out, mm_error *err) {
    if (!out) return mm_fail(err, MM_ERR_INVALID_ARGUMENT, "mm_st_writer_create: out is NULL");
    *out = calloc(1, sizeof **out);
    if (!*out) return mm_fail(err, MM_ERR_OUT_OF_MEMORY, "mm_st_writer_create: out of memory");
    return MM_OK;
}

void mm_st_writer_destroy(mm_st_writer *w) {
    if (!w) return;
    for (size_t i = 0; i < w->tensor_count; i++) {
        free(w->tensors[i].name);
        free(w->tensors[i].owned);
    }
    for (size_t i = 0; i < w->meta_count; i++) {
        free(w->meta[i].key);
        free(w->meta[i].value);
    }
    free(w->tensors);
    free(w->meta);
    free(w);
}

static char *copy_string(const char *s) {
    size_t n = strlen(s) + 1;
    char *c = malloc(n);
    if (c) memcpy(c, s, n);
    return c;
}

/* Grows an array of `size`-byte elements to hold one more; 0 on allocation failure. */
static int reserve_one(void **items, size_t count, size_t *cap, size_t size) {
    if (count < *cap) return 1;
    size_t grown_cap = *cap ? *cap * 2 : 16;
    void *grown = realloc(*items, grown_cap * size);
    if (!grown) return 0;
    *items = grown;
    *cap = grown_cap;
    return 1;
}

mm_status mm_st_writer_set_metadata(mm_st_writer *w, const char *key, const char *value, mm_error *err) {
    if (!w || !key || !value)
        return mm_fail(err, MM_ERR_INVALID_ARGUMENT,
                       "mm_st_writer_set_metadata: writer, key or value is NULL");
    char q[MM_IO_QUOTE_BUF];
    mm_io_quote(q, sizeof q, key, strlen(key));
    if (key[0] == '\0') return mm_fail(err, MM_ERR_INVALID_ARGUMENT, "metadata key is empty");
    if (!mm_io_utf8_valid(key, strlen(key)) || !mm_io_utf8_valid(value, strlen(value)))
        return mm_fail(err, MM_ERR_INVALID_ARGUMENT, "metadata \"%s\": key or value is not valid UTF-8", q);
    if (strncmp(key, "dtype.", 6) == 0 || strncmp(key, "shape.", 6) == 0)
        return mm_fail(
            err, MM_ERR_INVALID_ARGUMENT,
            "metadata key \"%s\" is reserved: the writer derives dtype.<name> and shape.<name> from the "
            "tensors' dtypes",
            q);
    char *v = copy_string(value);
    if (!v) return mm_fail(err, MM_ERR_OUT_OF_MEMORY, "metadata \"%s\": out of memory", q);
    for (size_t i = 0; i < w->meta_count; i++) {
        if (strcmp(w->meta[i].key, key) == 0) {
            free(w->meta[i].value);
            w->meta[i].value = v;
            return MM_OK;
        }
    }
    char *k = copy_string(key);
    if (!k || !reserve_one((void **)&w->meta, w->meta_count, &w->meta_cap, sizeof *w->meta)) {
        free(k);
        free(v);
        return mm_fail(err, MM_ERR_OUT_OF_MEMORY, "metadata \"%s\": out of memory", q);
    }
    w->meta[w->meta_count].key = k;
    w->meta[w->meta_count].value = v;
    w->meta_count++;
    return MM_OK;
}

static int is_logical(mm_dtype dtype) {
    return mm_st_dtype_string(dtype) == NULL;
}

/* Adds a tensor: a copy of its bytes when `copy`, else a reference to the caller's (streamed by write). */
static mm_status add_tensor(mm_st_writer *w, const char *name, const mm_tensor *tensor, int copy,
                            mm_error *err) {
    if (!w || !name || !tensor)
        return mm_fail(err, MM_ERR_INVALID_ARGUMENT, "%s: writer, name or tensor is NULL",
                       copy ? "mm_st_writer_add" : "mm_st_writer_add_ref");
    char q[MM_IO_QUOTE_BUF];
    mm_io_quote(q, sizeof q, name, strlen(name));
    if (name[0] == '\0') return mm_fail(err, MM_ERR_INVALID_ARGUMENT, "tensor name is empty");
    if (strcmp(name, "__metadata__") == 0)
        return mm_fail(err, MM_ERR_INVALID_ARGUMENT,
                       "tensor name \"__metadata__\" is reserved for the metadata");
    if (!mm_io_utf8_valid(name, strlen(name)))
        return mm_fail(err, MM_ERR_INVALID_ARGUMENT, "tensor name \"%s\" is not valid UTF-8", q);
    for (size_t i = 0; i < w->tensor_count; i++)
        if (strcmp(w->tensors[i].name, name) == 0)
            return mm_fail(err, MM_ERR_INVALID_ARGUMENT,
                           "tensor \"%s\" was already added (names must be unique)", q);
    if (!mm_format_traits_of(tensor->dtype))
        return mm_fail(err, MM_ERR_INVALID_ARGUMENT, "tensor \"%s\": dtype %d is not a valid mm_dtype", q,
                       (int)tensor->dtype);
    if (tensor->ndim < 0 || tensor->ndim > MM_MAX_DIMS)
        return mm_fail(err, MM_ERR_INVALID_ARGUMENT, "tensor \"%s\": ndim = %d is outside [0, %d]", q,
                       tensor->ndim, MM_MAX_DIMS);
    for (int d = 0; d < tensor->ndim; d++)
        if (tensor->shape[d] < 0)
            return mm_fail(err, MM_ERR_INVALID_ARGUMENT, "tensor \"%s\": shape[%d] = %lld is negative", q, d,
                           (long long)tensor->shape[d]);
    int64_t nbytes = mm_tensor_nbytes(tensor);
    if (nbytes < 0)
        return mm_fail(err, MM_ERR_INVALID_ARGUMENT,
                       "tensor \"%s\": byte size of the shape overflows 64 bits", q);
    if (nbytes > 0 && !tensor->data)
        return mm_fail(err, MM_ERR_INVALID_ARGUMENT, "tensor \"%s\": data is NULL for %lld bytes", q,
                       (long long)nbytes);
    if (!reserve_one((void **)&w->tensors, w->tensor_count, &w->tensor_cap, sizeof *w->tensors))
        return mm_fail(err, MM_ERR_OUT_OF_MEMORY, "tensor \"%s\": out of memory", q);
    writer_tensor *t = &w->tensors[w->tensor_count];
    memset(t, 0, sizeof *t);
    t->name = copy_string(name);
    if (copy && (uint64_t)nbytes <= SIZE_MAX) t->owned = malloc(nbytes ? (size_t)nbytes : 1);
    if (!t->name || (copy && !t->owned) || (uint64_t)nbytes > SIZE_MAX) {
        free(t->name);
        free(t->owned);
        return mm_fail(err, MM_ERR_OUT_OF_MEMORY, "tensor \"%s\": out of memory for %lld bytes", q,
                       (long long)nbytes);
    }
    if (copy && nbytes) memcpy(t->owned, tensor->data, (size_t)nbytes);
    t->data = copy ? t->owned : tensor->data;
    t->nbytes = (uint64_t)nbytes;
    t->dtype = tensor->dtype;
    t->ndim = tensor->ndim;
    for (int d = 0; d < tensor->ndim; d++) t->shape[d] = t->stored_shape[d] = tensor->shape[d];
    /* A 4-bit logical tensor is stored as its packed bytes: U8 with the last dimension ceil(n/2). */
    if (is_logical(t->dtype) && mm_dtype_bits(t->dtype) == 4 && t->ndim > 0) {
        int64_t last = t->shape[t->ndim - 1];
        t->stored_shape[t->ndim - 1] = last / 2 + last % 2;
    }
    w->tensor_count++;
    return MM_OK;
}

mm_status mm_st_writer_add(mm_st_writer *w, const char *name, const mm_tensor *tensor, mm_error *err) {
    return add_tensor(w, name, tensor, 1, err);
}

mm_status mm_st_writer_add_ref(mm_st_writer *w, const char *name, const mm_tensor *tensor, mm_error *err) {
    return add_tensor(w, name, tensor, 0, err);
}

static int compare_meta(const void *a, const void *b) {
    return strcmp(((const writer_meta *)a)->key, ((const writer_meta *)b)->key);
}

static void append_shape(mm_io_buffer *b, int ndim, const int64_t *shape) {
    mm_io_buffer_append(b, "[", 1);
    for (int d = 0; d < ndim; d++) {
        if (d) mm_io_buffer_append(b, ",", 1);
        mm_io_buffer_append_u64(b, (uint64_t)shape[d]);
    }
    mm_io_buffer_append(b, "]", 1);
}

/* Builds the header JSON, padded with spaces to a multiple of 8 bytes. The metadata list is the
 * user's entries plus dtype./shape. entries for logical dtypes, sorted by key. */
static mm_status build_header(const mm_st_writer *w, mm_io_buffer *header, mm_error *err) {
    mm_status st = MM_OK;
    size_t cap = w->meta_count + 2 * w->tensor_count, n = 0;
    writer_meta *meta = calloc(cap ? cap : 1, sizeof *meta);
    mm_io_buffer keys = {0}; /* owns the generated keys and values, NUL-separated */
    size_t *key_at = calloc(cap ? cap * 2 : 1, sizeof *key_at);
    if (!meta || !key_at) goto oom;
    for (size_t i = 0; i < w->meta_count; i++) meta[n++] = w->meta[i];
    /* Generated strings go into one buffer that may move while it grows: record offsets first. */
    size_t generated = n;
    for (size_t i = 0; i < w->tensor_count; i++) {
        const writer_tensor *t = &w->tensors[i];
        if (!is_logical(t->dtype)) continue;
        key_at[2 * (n - generated)] = keys.len;
        mm_io_buffer_append_str(&keys, "dtype.");
        mm_io_buffer_append(&keys, t->name, strlen(t->name) + 1);
        key_at[2 * (n - generated) + 1] = keys.len;
        mm_io_buffer_append(&keys, mm_dtype_name(t->dtype), strlen(mm_dtype_name(t->dtype)) + 1);
        n++;
        if (mm_dtype_bits(t->dtype) != 4) continue;
        key_at[2 * (n - generated)] = keys.len;
        mm_io_buffer_append_str(&keys, "shape.");
        mm_io_buffer_append(&keys, t->name, strlen(t->name) + 1);
        key_at[2 * (n - generated) + 1] = keys.len;
        append_shape(&keys, t->ndim, t->shape);
        mm_io_buffer_append(&keys, "", 1);
        n++;
    }
    if (keys.failed) goto oom;
    for (size_t i = generated; i < n; i++) {
        meta[i].key = keys.data + key_at[2 * (i - generated)];
        meta[i].value = keys.data + key_at[2 * (i - generated) + 1];
    }
    qsort(meta, n, sizeof *meta, compare_meta);

    mm_io_buffer_append(header, "{", 1);
    if (n) {
        mm_io_buffer_append_str(header, "\"__metadata__\":{");
        for (size_t i = 0; i < n; i++) {
            if (i) mm_io_buffer_append(header, ",", 1);
            mm_io_buffer_append_json_string(header, meta[i].key, strlen(meta[i].key));
            mm_io_buffer_append(header, ":", 1);
            mm_io_buffer_append_json_string(header, meta[i].value, strlen(meta[i].value));
        }
        mm_io_buffer_append(header, "}", 1);
    }
    uint64_t offset = 0;
    for (size_t i = 0; i < w->tensor_count; i++) {
        const writer_tensor *t = &w->tensors[i];
        if (n || i) mm_io_buffer_append(header, ",", 1);
        mm_io_buffer_append_json_string(header, t->name, strlen(t->name));
        mm_io_buffer_append_str(header, ":{\"dtype\":\"");
        mm_io_buffer_append_str(header, is_logical(t->dtype) ? "U8" : mm_st_dtype_string(t->dtype));
        mm_io_buffer_append_str(header, "\",\"shape\":");
        append_shape(header, t->ndim, t->stored_shape);
        mm_io_buffer_append_str(header, ",\"data_offsets\":[");
        mm_io_buffer_append_u64(header, offset);
        mm_io_buffer_append(header, ",", 1);
        mm_io_buffer_append_u64(header, offset + t->nbytes);
        mm_io_buffer_append_str(header, "]}");
        offset += t->nbytes;
    }
    mm_io_buffer_append(header, "}", 1);
    while (!header->failed && header->len % 8 != 0) mm_io_buffer_append(header, " ", 1);
    if (header->failed) goto oom;
    goto done;
oom:
    st = mm_fail(err, MM_ERR_OUT_OF_MEMORY, "safetensors header: out of memory");
done:
    free(meta);
    free(key_at);
    mm_io_buffer_free(&keys);
    return st;
}

static int write_full(int fd, const void *data, uint64_t n) {
    const unsigned char *p = data;
    while (n > 0) {
        size_t chunk = n > ((size_t)1 << 30) ? ((size_t)1 << 30) : (size_t)n;
        ssize_t put = write(fd, p, chunk);
        if (put < 0) {
            if (errno == EINTR) continue;
            return errno;
        }
        p += put;
        n -= (uint64_t)put;
    }
    return 0;
}

typedef struct contents {
    const mm_st_writer *w;
    const mm_io_buffer *header;
} contents;

/* Length field, header, tensor data. 0 or the errno of the failed write. */
static int write_contents(int fd, void *arg) {
    const contents *c = arg;
    unsigned char length_field[8];
    for (int i = 0; i < 8; i++) length_field[i] = (unsigned char)((uint64_t)c->header->len >> (8 * i));
    int e = write_full(fd, length_field, 8);
    if (e == 0) e = write_full(fd, c->header->data, c->header->len);
    for (size_t i = 0; e == 0 && i < c->w->tensor_count; i++)
        e = write_full(fd, c->w->tensors[i].data, c->w->tensors[i].nbytes);
    return e;
}

mm_status mm_st_writer_write(mm_st_writer *w, const char *path, mm_error *err) {
    if (!w || !path)
        return mm_fail(err, MM_ERR_INVALID_ARGUMENT, "mm_st_writer_write: writer or path is NULL");
    mm_io_buffer header = {0};
    char q[MM_IO_QUOTE_BUF], why[128];
    mm_io_quote(q, sizeof q, path, strlen(path));
    mm_status st = build_header(w, &header, err);
    if (st != MM_OK) return st;
    contents c = {w, &header};
    const char *step = "";
    int e = mm_out_file_write(path, write_contents, &c, &step);
    if (e != 0)
        st = mm_fail(err, e == ENOMEM ? MM_ERR_OUT_OF_MEMORY : MM_ERR_IO, "%s \"%s\": %s", step, q,
                     mm_io_errno_text(e, why, sizeof why));
    mm_io_buffer_free(&header);
    return st;
}
