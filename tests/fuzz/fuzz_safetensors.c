/* SPDX-License-Identifier: Apache-2.0 */
/* fuzz_safetensors.c: libFuzzer target for the safetensors reader (megamoe/safetensors.h).
 *
 * The input is the bytes of a file. It is opened from memory and from a file path (the two paths must
 * agree: same status, same tensors and metadata); when it opens, every tensor and metadata entry is
 * walked, looked up by name and read both ways (mm_st_read and mm_st_read_tensor). Anything the reader
 * accepts must be self-consistent; anything it refuses must come with a message. A violation aborts,
 * which libFuzzer (and the replay test) report as a crash. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "input_file.h"
#include "megamoe/safetensors.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void require(int cond, const char *what) {
    if (!cond) {
        fprintf(stderr, "fuzz_safetensors: broken invariant: %s\n", what);
        abort();
    }
}

/* The reader's view of one file must be the same however it was opened. */
static void compare_readers(const mm_st_reader *a, const mm_st_reader *b) {
    require(mm_st_tensor_count(a) == mm_st_tensor_count(b), "tensor count differs between memory and file");
    require(mm_st_metadata_count(a) == mm_st_metadata_count(b),
            "metadata count differs between memory and file");
    for (size_t i = 0; i < mm_st_tensor_count(a); i++) {
        const mm_st_tensor_info *x = mm_st_tensor_at(a, i), *y = mm_st_tensor_at(b, i);
        require(strcmp(x->name, y->name) == 0 && x->dtype == y->dtype && x->ndim == y->ndim &&
                    x->offset == y->offset && x->nbytes == y->nbytes,
                "tensor info differs between memory and file");
    }
}

static void walk(mm_st_reader *reader, size_t file_size) {
    uint64_t previous_end = 0;
    for (size_t i = 0; i < mm_st_tensor_count(reader); i++) {
        const mm_st_tensor_info *info = mm_st_tensor_at(reader, i);
        require(info != NULL && info->name != NULL, "mm_st_tensor_at gave NULL inside the count");
        require(mm_st_find(reader, info->name) == info, "mm_st_find does not give back the listed tensor");
        require(info->ndim >= 0 && info->ndim <= MM_MAX_DIMS, "ndim outside [0, MM_MAX_DIMS]");
        require(info->offset >= previous_end, "tensors overlap or are out of file order");
        require(info->offset <= file_size && info->nbytes <= file_size - info->offset,
                "tensor data outside the file");
        previous_end = info->offset + info->nbytes;

        /* nbytes is inside the file, so these buffers are bounded by the input size. */
        void *bytes = malloc(info->nbytes ? info->nbytes : 1);
        require(bytes != NULL, "out of memory for a tensor inside the input");
        mm_error err = {MM_OK, ""};
        mm_status st = mm_st_read(reader, info, bytes, &err);
        require(st == MM_OK || err.message[0] != '\0', "mm_st_read failed without a message");
        mm_tensor t;
        err = (mm_error){MM_OK, ""};
        mm_status st2 = mm_st_read_tensor(reader, info->name, &t, &err);
        require(st2 == MM_OK || err.message[0] != '\0', "mm_st_read_tensor failed without a message");
        if (st == MM_OK && st2 == MM_OK) {
            require(t.data != NULL, "mm_st_read_tensor gave NULL data");
            require(memcmp(t.data, bytes, info->nbytes) == 0, "mm_st_read and mm_st_read_tensor disagree");
        }
        if (st2 == MM_OK) mm_tensor_free_data(&t);
        free(bytes);
    }
    for (size_t i = 0; i < mm_st_metadata_count(reader); i++) {
        const char *key = NULL, *value = NULL;
        mm_st_metadata_at(reader, i, &key, &value);
        require(key != NULL && value != NULL, "metadata entry with a NULL key or value");
        const char *found = mm_st_metadata(reader, key);
        require(found != NULL && strcmp(found, value) == 0,
                "mm_st_metadata disagrees with mm_st_metadata_at");
    }
    require(mm_st_find(reader, "") == NULL, "an empty tensor name was found");
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    mm_error err = {MM_OK, ""}; /* cleared before each call, so a missing message cannot pass */
    mm_st_reader *from_memory = NULL;
    mm_status st = mm_st_open_memory(data, size, &from_memory, &err);
    require(st == MM_OK || err.message[0] != '\0', "mm_st_open_memory failed without a message");
    require((st == MM_OK) == (from_memory != NULL), "mm_st_open_memory: status and reader disagree");

    const char *path = fuzz_input_path(data, size);
    if (path) {
        mm_st_reader *from_file = NULL;
        err = (mm_error){MM_OK, ""};
        mm_status st_file = mm_st_open(path, &from_file, &err);
        require(st_file == st, "mm_st_open and mm_st_open_memory disagree on the status");
        require(st_file == MM_OK || err.message[0] != '\0', "mm_st_open failed without a message");
        if (from_file) {
            compare_readers(from_memory, from_file);
            walk(from_file, size);
            mm_st_close(from_file);
        }
    }
    if (from_memory) {
        walk(from_memory, size);
        mm_st_close(from_memory);
    }
    return 0;
}
