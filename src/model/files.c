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

static int dtype_allowed(mm_dtype dtype, const mm_dtype *allowed) {
    for (; *allowed != MM_DTYPE_INVALID; allowed++)
        if (*allowed == dtype) return 1;
    return 0;
}

mm_status mm_model_files_tensor_of(mm_model_files *files, const char *name, const mm_dtype *allowed,
                                   int64_t rows, int64_t cols, const char *dims, mm_tensor *out,
                                   mm_error *err) {
    const char *file = file_of(files->model, name);
    if (!file)
        return mm_fail(err, MM_ERR_INVALID_FILE,
                       "tensor \"%s\" is missing (model.safetensors.index.json has no entry)", name);
    mm_model_shard *s;
    mm_status st = open_shard(files, file, &s, err);
    if (st) return st;
    const mm_st_tensor_info *info = mm_st_find(s->reader, name);
    if (!info) return mm_fail(err, MM_ERR_INVALID_FILE, "tensor \"%s\" is missing from \"%s\"", name, file);
    if (!dtype_allowed(info->dtype, allowed)) {
        char list[64] = "";
        for (const mm_dtype *a = allowed; *a != MM_DTYPE_INVALID; a++)
            snprintf(list + strlen(list), sizeof list - strlen(list), "%s%s", a == allowed ? "" : " or ",
                     mm_st_dtype_string(*a));
        return mm_fail(err, MM_ERR_INVALID_FILE, "tensor \"%s\" has dtype %s, must be %s%s", name,
                       info->dtype_string, list,
                       allowed[0] == MM_DTYPE_BF16 && allowed[1] == MM_DTYPE_INVALID
                           ? " (megamoe runs the BF16 checkpoints)"
                           : "");
    }
    int one_d = rows < 0; /* a vector of cols elements */
    if (info->ndim != (one_d ? 1 : 2) || (!one_d && info->shape[0] != rows) ||
        info->shape[one_d ? 0 : 1] != cols) {
        char shape[200];
        shape_text(shape, sizeof shape, info);
        if (one_d)
            return mm_fail(err, MM_ERR_INVALID_FILE, "tensor \"%s\" has shape %s, must be [%lld] %s", name,
                           shape, (long long)cols, dims);
        return mm_fail(err, MM_ERR_INVALID_FILE, "tensor \"%s\" has shape %s, must be [%lld, %lld] %s", name,
                       shape, (long long)rows, (long long)cols, dims);
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
    int64_t shape[2] = {one_d ? cols : rows, cols};
    *out = mm_tensor_make(info->dtype, one_d ? 1 : 2, shape, p);
    return MM_OK;
}

mm_status mm_model_files_tensor(mm_model_files *files, const char *name, int64_t rows, int64_t cols,
                                const char *dims, mm_tensor *out, mm_error *err) {
    static const mm_dtype bf16[] = {MM_DTYPE_BF16, MM_DTYPE_INVALID};
    return mm_model_files_tensor_of(files, name, bf16, rows, cols, dims, out, err);
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
