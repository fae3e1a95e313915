/* SPDX-License-Identifier: Apache-2.0 */
/* io/st_internal.h: the reader's state, shared by the header validation (st_header.c) and the file
 * access code (st_reader.c). */
#ifndef MEGAMOE_IO_ST_INTERNAL_H
#define MEGAMOE_IO_ST_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

#include "io/json.h"
#include "megamoe/safetensors.h"

/* Headers larger than this are refused before anything is allocated (the reference implementation
 * refuses 100 MB; a larger header is no real file). */
#define MM_ST_MAX_HEADER_BYTES ((uint64_t)100 * 1024 * 1024)

typedef struct mm_st_meta_entry {
    const char *key;
    const char *value;
} mm_st_meta_entry;

struct mm_st_reader {
    int fd;                /* -1 when the file is a memory copy */
    unsigned char *memory; /* the whole file, for mm_st_open_memory */
    uint64_t file_size;
    uint64_t data_start;        /* 8 + header length */
    mm_json_doc *header;        /* owns the strings that names and metadata point into */
    mm_st_tensor_info *tensors; /* sorted by data offset */
    size_t tensor_count;
    size_t *by_name;        /* indices into tensors, sorted by name for binary search */
    mm_st_meta_entry *meta; /* sorted by key */
    size_t meta_count;
};

/* Validates header json[0..len) against a data region of data_size bytes and fills the reader's
 * tensors, name index and metadata (data_start must already be set). */
mm_status mm_st_parse_header(mm_st_reader *reader, const char *json, size_t len, uint64_t data_size,
                             mm_error *err);

/* Value of metadata key prefix + name (binary search over the sorted keys), NULL when absent; prefix ""
 * is the plain lookup of mm_st_metadata. */
const char *mm_st_meta_prefixed(const mm_st_reader *reader, const char *prefix, const char *name);
/* The dtype for a standard safetensors dtype string, MM_DTYPE_INVALID when unknown. */
mm_dtype mm_st_dtype_from_string(const char *s);
/* The standard string for a dtype, NULL for the logical ones stored as U8. */
const char *mm_st_dtype_string(mm_dtype dtype);

#endif
