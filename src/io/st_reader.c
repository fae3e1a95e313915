/* SPDX-License-Identifier: Apache-2.0 */
/* io/st_reader.c: opening safetensors files (from disk or memory), lookups, and lazy tensor reads.
 *
 * Only the 8-byte length and the header are read at open; tensor data is read on demand with pread,
 * which keeps no file position, so ranks running as threads may read one reader concurrently. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/error.h"
#include "core/free_all.h"
#include "io/io_util.h"
#include "io/st_internal.h"

/* Reads exactly n bytes at offset; 0 on success, an errno value otherwise (EIO-like ENODATA when
 * the file ends early, which means it changed after it was validated). */
static int pread_full(int fd, void *dst, uint64_t n, uint64_t offset) {
    unsigned char *p = dst;
    while (n > 0) {
        size_t chunk = n > ((size_t)1 << 30) ? ((size_t)1 << 30) : (size_t)n;
        ssize_t got = pread(fd, p, chunk, (off_t)offset);
        if (got < 0) {
            if (errno == EINTR) continue;
            return errno;
        }
        if (got == 0) return ENODATA;
        p += got;
        n -= (uint64_t)got;
        offset += (uint64_t)got;
    }
    return 0;
}

static mm_status io_fail(mm_error *err, const char *what, const char *path, int errnum) {
    char text[128], q[MM_IO_QUOTE_BUF];
    if (errnum == ENODATA)
        snprintf(text, sizeof text, "the file ended early (was it changed while open?)");
    else
        mm_io_errno_text(errnum, text, sizeof text);
    return mm_fail(err, MM_ERR_IO, "%s \"%s\": %s", what, mm_io_quote(q, sizeof q, path, strlen(path)), text);
}

void mm_st_close(mm_st_reader *reader) {
    if (!reader) return;
    if (reader->fd >= 0) close(reader->fd);
    free(reader->memory);
    mm_json_doc_free(reader->header);
    MM_FREE_ALL(reader->tensors, reader->by_name, reader->meta, reader);
}

/* Checks the header length field against the file size before anything is allocated. */
static mm_status check_header_length(uint64_t n, uint64_t file_size, mm_error *err) {
    if (file_size < 8)
        return mm_fail(
            err, MM_ERR_INVALID_FILE,
            "file has %llu bytes, fewer than the 8-byte header length that starts a safetensors file",
            (unsigned long long)file_size);
    if (n > MM_ST_MAX_HEADER_BYTES)
        return mm_fail(err, MM_ERR_INVALID_FILE,
                       "header length %llu exceeds the limit of %llu bytes (100 MiB)", (unsigned long long)n,
                       (unsigned long long)MM_ST_MAX_HEADER_BYTES);
    if (n > file_size - 8)
        return mm_fail(
            err, MM_ERR_INVALID_FILE,
            "header length %llu exceeds the %llu bytes that follow the length field (truncated file?)",
            (unsigned long long)n, (unsigned long long)(file_size - 8));
    return MM_OK;
}

static uint64_t load_le64(const unsigned char *b) {
    uint64_t v = 0;
    for (int i = 7; i >= 0; i--) v = (v << 8) | b[i];
    return v;
}

static mm_st_reader *new_reader(void) {
    mm_st_reader *r = calloc(1, sizeof *r);
    if (r) r->fd = -1;
    return r;
}

mm_status mm_st_open(const char *path, mm_st_reader **out, mm_error *err) {
    if (!out) return mm_fail(err, MM_ERR_INVALID_ARGUMENT, "mm_st_open: out is NULL");
    *out = NULL;
    if (!path) return mm_fail(err, MM_ERR_INVALID_ARGUMENT, "mm_st_open: path is NULL");
    mm_status st = MM_OK;
    char *header = NULL;
    mm_st_reader *r = new_reader();
    if (!r) return mm_fail(err, MM_ERR_OUT_OF_MEMORY, "mm_st_open: out of memory");
    r->fd = open(path, O_RDONLY | O_CLOEXEC);
    if (r->fd < 0) {
        st = io_fail(err, "cannot open", path, errno);
        goto fail;
    }
    struct stat sb;
    if (fstat(r->fd, &sb) != 0) {
        st = io_fail(err, "cannot stat", path, errno);
        goto fail;
    }
    if (!S_ISREG(sb.st_mode)) {
        st = io_fail(err, "cannot read", path, S_ISDIR(sb.st_mode) ? EISDIR : EINVAL);
        goto fail;
    }
    r->file_size = (uint64_t)sb.st_size;
    unsigned char length_field[8];
    uint64_t n = 0;
    if (r->file_size >= 8) {
        int e = pread_full(r->fd, length_field, 8, 0);
        if (e) {
            st = io_fail(err, "cannot read", path, e);
            goto fail;
        }
        n = load_le64(length_field);
    }
    if ((st = check_header_length(n, r->file_size, err)) != MM_OK) goto fail;
    header = malloc(n ? (size_t)n : 1);
    if (!header) {
        st = mm_fail(err, MM_ERR_OUT_OF_MEMORY, "header of %llu bytes: out of memory", (unsigned long long)n);
        goto fail;
    }
    int e = pread_full(r->fd, header, n, 8);
    if (e) {
        st = io_fail(err, "cannot read", path, e);
        goto fail;
    }
    r->data_start = 8 + n;
    if ((st = mm_st_parse_header(r, header, (size_t)n, r->file_size - r->data_start, err)) != MM_OK)
        goto fail;
    free(header);
    *out = r;
    return MM_OK;
fail:
    /* Name the file in content errors too (I/O errors already do). */
    if (st == MM_ERR_INVALID_FILE && err) {
        char q[MM_IO_QUOTE_BUF];
        mm_error_prefix(err, "\"%s\"", mm_io_quote(q, sizeof q, path, strlen(path)));
    }
    free(header);
    mm_st_close(r);
    return st;
}

mm_status mm_st_open_memory(const void *data, size_t size, mm_st_reader **out, mm_error *err) {
    if (!out) return mm_fail(err, MM_ERR_INVALID_ARGUMENT, "mm_st_open_memory: out is NULL");
    *out = NULL;
    if (!data && size) return mm_fail(err, MM_ERR_INVALID_ARGUMENT, "mm_st_open_memory: data is NULL");
    mm_status st = MM_OK;
    mm_st_reader *r = new_reader();
    if (!r) return mm_fail(err, MM_ERR_OUT_OF_MEMORY, "mm_st_open_memory: out of memory");
    r->memory = malloc(size ? size : 1);
    if (!r->memory) {
        st = mm_fail(err, MM_ERR_OUT_OF_MEMORY, "mm_st_open_memory: out of memory for %zu bytes", size);
        goto fail;
    }
    if (size) memcpy(r->memory, data, size);
    r->file_size = size;
    uint64_t n = size >= 8 ? load_le64(r->memory) : 0;
    if ((st = check_header_length(n, r->file_size, err)) != MM_OK) goto fail;
    r->data_start = 8 + n;
    st = mm_st_parse_header(r, (const char *)r->memory + 8, (size_t)n, r->file_size - r->data_start, err);
    if (st != MM_OK) goto fail;
    *out = r;
    return MM_OK;
fail:
    mm_st_close(r);
    return st;
}

size_t mm_st_tensor_count(const mm_st_reader *reader) {
    return reader ? reader->tensor_count : 0;
}

const mm_st_tensor_info *mm_st_tensor_at(const mm_st_reader *reader, size_t index) {
    if (!reader || index >= reader->tensor_count) return NULL;
    return &reader->tensors[index];
}

const mm_st_tensor_info *mm_st_find(const mm_st_reader *reader, const char *name) {
    if (!reader || !name) return NULL;
    size_t lo = 0, hi = reader->tensor_count;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        const mm_st_tensor_info *t = &reader->tensors[reader->by_name[mid]];
        int c = strcmp(t->name, name);
        if (c == 0) return t;
        if (c < 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    return NULL;
}

size_t mm_st_metadata_count(const mm_st_reader *reader) {
    return reader ? reader->meta_count : 0;
}

void mm_st_metadata_at(const mm_st_reader *reader, size_t index, const char **key, const char **value) {
    int valid = reader && index < reader->meta_count;
    if (key) *key = valid ? reader->meta[index].key : NULL;
    if (value) *value = valid ? reader->meta[index].value : NULL;
}

const char *mm_st_metadata(const mm_st_reader *reader, const char *key) {
    return reader && key ? mm_st_meta_prefixed(reader, "", key) : NULL;
}

mm_status mm_st_read(mm_st_reader *reader, const mm_st_tensor_info *info, void *dst, mm_error *err) {
    if (!reader || !info) return mm_fail(err, MM_ERR_INVALID_ARGUMENT, "mm_st_read: reader or info is NULL");
    /* info must be one of this reader's entries (compared as integers: the pointers may be unrelated). */
    uintptr_t at = (uintptr_t)info, first = (uintptr_t)reader->tensors;
    if (at < first || at >= first + reader->tensor_count * sizeof *info || (at - first) % sizeof *info != 0)
        return mm_fail(err, MM_ERR_INVALID_ARGUMENT, "mm_st_read: info does not belong to this reader");
    if (info->nbytes == 0) return MM_OK;
    if (!dst)
        return mm_fail(err, MM_ERR_INVALID_ARGUMENT,
                       "mm_st_read: dst is NULL for tensor \"%s\" of %llu bytes", info->name,
                       (unsigned long long)info->nbytes);
    if (reader->memory) {
        memcpy(dst, reader->memory + info->offset, (size_t)info->nbytes);
        return MM_OK;
    }
    int e = pread_full(reader->fd, dst, info->nbytes, info->offset);
    if (e) return io_fail(err, "cannot read tensor", info->name, e);
    return MM_OK;
}

mm_status mm_st_read_tensor(mm_st_reader *reader, const char *name, mm_tensor *out, mm_error *err) {
    if (!reader || !name || !out)
        return mm_fail(err, MM_ERR_INVALID_ARGUMENT, "mm_st_read_tensor: reader, name or out is NULL");
    memset(out, 0, sizeof *out);
    const mm_st_tensor_info *info = mm_st_find(reader, name);
    if (!info) {
        char q[MM_IO_QUOTE_BUF];
        return mm_fail(err, MM_ERR_INVALID_FILE, "tensor \"%s\" is not in the file",
                       mm_io_quote(q, sizeof q, name, strlen(name)));
    }
    if (info->dtype == MM_DTYPE_INVALID)
        return mm_fail(err, MM_ERR_INVALID_FILE, "tensor \"%s\": dtype %s is not one megamoe computes with",
                       info->name, info->dtype_string);
    /* 64-byte aligned for the vector kernels, rounded up to whole cache lines, never zero-sized so
     * that data is non-NULL even for empty tensors. */
    size_t bytes = ((size_t)info->nbytes + 63) / 64 * 64;
    void *data = NULL;
    if (info->nbytes > SIZE_MAX - 64 || posix_memalign(&data, 64, bytes ? bytes : 64) != 0)
        return mm_fail(err, MM_ERR_OUT_OF_MEMORY, "tensor \"%s\": out of memory for %llu bytes", info->name,
                       (unsigned long long)info->nbytes);
    mm_status st = mm_st_read(reader, info, data, err);
    if (st != MM_OK) {
        free(data);
        return st;
    }
    *out = mm_tensor_make(info->dtype, info->ndim, info->shape, data);
    return MM_OK;
}

void mm_tensor_free_data(mm_tensor *t) {
    if (!t) return;
    free(t->data);
    t->data = NULL;
}
