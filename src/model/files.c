/* SPDX-License-Identifier: Apache-2.0 */
/* model/files.c: one rank's view of a checkpoint's tensors: find the shard that holds a tensor (the
 * index, or the single model.safetensors), open it once (the safetensors reader validates its header)
 * and memory-map it, so only the pages of the tensors a rank asks for are ever read. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/error.h"
#include "io/io_util.h"
#include "io/st_internal.h"
#include "model/model_internal.h"

static int compare_name(const void *key, const void *entry) {
    return strcmp(key, ((const mm_model_entry *)entry)->name);
}

static const char *file_of(const mm_model *m, const char *name) {
    if (!m->sharded) return "model.safetensors";
    const mm_model_entry *e = bsearch(name, m->entries, m->entry_count, sizeof *e, compare_name);
    return e ? e->file : NULL;
}

static mm_status open_shard(mm_model_files *files, const char *file, mm_model_shard **out, mm_error *err) {
    for (size_t i = 0; i < files->count; i++)
        if (strcmp(files->shards[i].file, file) == 0) {
            *out = &files->shards[i];
            return MM_OK;
        }
    if (files->count == files->cap) {
        size_t cap = files->cap ? files->cap * 2 : 4;
        mm_model_shard *bigger = realloc(files->shards, cap * sizeof *bigger);
        if (!bigger) return mm_fail(err, MM_ERR_OUT_OF_MEMORY, "model: out of memory");
        files->shards = bigger;
        files->cap = cap;
    }
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", files->model->dir, file);
    struct stat sb;
    if (stat(path, &sb) != 0 && errno == ENOENT)
        return mm_fail(err, MM_ERR_INVALID_FILE, "shard \"%s\" is missing from %s%s", file, files->model->dir,
                       files->model->sharded ? " (named by model.safetensors.index.json)" : "");
    mm_model_shard s = {file, NULL, NULL, 0};
    mm_status st = mm_st_open(path, &s.reader, err);
    if (st) return st;
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0 || fstat(fd, &sb) != 0) {
        char why[128];
        int e = errno;
        if (fd >= 0) close(fd);
        mm_st_close(s.reader);
        return mm_fail(err, MM_ERR_IO, "cannot open \"%s\": %s", path, mm_io_errno_text(e, why, sizeof why));
    }
    s.map_bytes = (size_t)sb.st_size;
    s.map = mmap(NULL, s.map_bytes, PROT_READ, MAP_PRIVATE, fd, 0);
    int e = errno;
    close(fd);
    if (s.map == MAP_FAILED) {
        char why[128];
        mm_st_close(s.reader);
        return mm_fail(err, MM_ERR_IO, "cannot map \"%s\": %s", path, mm_io_errno_text(e, why, sizeof why));
    }
    files->shards[files->count] = s;
    *out = &files->shards[files->count++];
    return MM_OK;
}

static void shape_text(char *buf, size_t cap, const mm_st_tensor_info *info) {
    size_t at = (size_t)snprintf(buf, cap, "[");
    for (int d = 0; d < info->ndim && at < cap; d++)
        at += (size_t)snprintf(buf + at, cap - at, "%s%lld", d ? ", " : "", (long long)info->shape[d]);
    if (at < cap) snprintf(buf + at, cap - at, "]");
}

int mm_model_files_has(mm_model_files *files, const char *name) {
    const char *file = file_of(files->model, name);
    mm_model_shard *s;
    mm_error ignored;
    if (!file || open_shard(files, file, &s, &ignored) != MM_OK) return 0;
    return mm_st_find(s->reader, name) != NULL;
}

static void dims_text(char *buf, size_t cap, int ndim, const int64_t *shape) {
    size_t at = (size_t)snprintf(buf, cap, "[");
    for (int d = 0; d < ndim && at < cap; d++)
        at += (size_t)snprintf(buf + at, cap - at, "%s%lld", d ? ", " : "", (long long)shape[d]);
    if (at < cap) snprintf(buf + at, cap - at, "]");
}

mm_status mm_model_files_get(mm_model_files *files, const char *name, mm_dtype dtype, mm_dtype alt, int ndim,
                             const int64_t *shape, const char *dims, mm_tensor *out, mm_error *err) {
    const char *file = file_of(files->model, name);
    if (!file)
        return mm_fail(err, MM_ERR_INVALID_FILE,
                       "tensor \"%s\" is missing (model.safetensors.index.json has no entry)", name);
    mm_model_shard *s;
    mm_status st = open_shard(files, file, &s, err);
    if (st) return st;
    const mm_st_tensor_info *info = mm_st_find(s->reader, name);
    if (!info) return mm_fail(err, MM_ERR_INVALID_FILE, "tensor \"%s\" is missing from \"%s\"", name, file);
    if (info->dtype != dtype && (alt == MM_DTYPE_INVALID || info->dtype != alt)) {
        if (dtype == MM_DTYPE_BF16 && alt == MM_DTYPE_INVALID)
            return mm_fail(err, MM_ERR_INVALID_FILE,
                           "tensor \"%s\" has dtype %s, must be BF16 (megamoe runs the BF16 checkpoints)",
                           name, info->dtype_string);
        return mm_fail(err, MM_ERR_INVALID_FILE, "tensor \"%s\" has dtype %s, must be %s%s%s", name,
                       info->dtype_string, mm_st_dtype_string(dtype), alt ? " or " : "",
                       alt ? mm_st_dtype_string(alt) : "");
    }
    int same = info->ndim == ndim;
    for (int d = 0; d < ndim && same; d++) same = info->shape[d] == shape[d];
    if (!same) {
        char got[200], want[200];
        shape_text(got, sizeof got, info);
        dims_text(want, sizeof want, ndim, shape);
        return mm_fail(err, MM_ERR_INVALID_FILE, "tensor \"%s\" has shape %s, must be %s %s", name, got, want,
                       dims);
    }
    const uint8_t *data = (const uint8_t *)s->map + info->offset;
    void *p = (void *)data;
    size_t align = (size_t)(mm_dtype_bits(info->dtype) / 8);
    if (align > 1 && (uintptr_t)data % align != 0) { /* a tensor after an odd-sized one: copy it */
        if (files->copy_count == files->copy_cap) {
            size_t cap = files->copy_cap ? files->copy_cap * 2 : 8;
            void **bigger = realloc(files->copies, cap * sizeof *bigger);
            if (!bigger) return mm_fail(err, MM_ERR_OUT_OF_MEMORY, "model: out of memory");
            files->copies = bigger;
            files->copy_cap = cap;
        }
        if (!(p = malloc(info->nbytes ? info->nbytes : 1)))
            return mm_fail(err, MM_ERR_OUT_OF_MEMORY, "tensor \"%s\": out of memory", name);
        memcpy(p, data, info->nbytes);
        files->copies[files->copy_count++] = p;
    }
    *out = mm_tensor_make(info->dtype, ndim, shape, p);
    return MM_OK;
}

mm_status mm_model_files_tensor(mm_model_files *files, const char *name, int64_t rows, int64_t cols,
                                const char *dims, mm_tensor *out, mm_error *err) {
    int64_t shape[2] = {rows, cols};
    return mm_model_files_get(files, name, MM_DTYPE_BF16, MM_DTYPE_INVALID, 2, shape, dims, out, err);
}

mm_status mm_model_files_tensor_of(mm_model_files *files, const char *name, const mm_dtype *allowed,
                                   int64_t rows, int64_t cols, const char *dims, mm_tensor *out,
                                   mm_error *err) {
    /* one or two allowed dtypes (the lists of the AWQ/GPTQ loader); rows < 0: a vector of cols */
    int64_t shape[2] = {rows < 0 ? cols : rows, cols};
    return mm_model_files_get(files, name, allowed[0],
                              allowed[0] == MM_DTYPE_INVALID ? MM_DTYPE_INVALID : allowed[1],
                              rows < 0 ? 1 : 2, shape, dims, out, err);
}

void mm_model_files_close(mm_model_files *files) {
    for (size_t i = 0; i < files->count; i++) {
        munmap(files->shards[i].map, files->shards[i].map_bytes);
        mm_st_close(files->shards[i].reader);
    }
    for (size_t i = 0; i < files->copy_count; i++) free(files->copies[i]);
    free(files->shards);
    free(files->copies);
    memset(files, 0, sizeof *files);
}
