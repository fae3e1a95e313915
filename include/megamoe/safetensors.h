/* SPDX-License-Identifier: Apache-2.0 */
/* megamoe/safetensors.h: reading and writing safetensors files, the container of case files.
 *
 * The reader trusts nothing: it checks the header length (at most 100 MiB and inside the file), the JSON
 * syntax (strict; no duplicate keys), every dtype string, that shape x dtype size equals the byte range
 * (in 64 bits, overflow refused), and that the tensors tile the data region exactly: sorted by offset,
 * no gaps, no overlaps, the last ending at the end of the file (the reference implementation's rule).
 * It reads the header once and tensor data on demand (pread), so a process that needs only its own
 * rank's tensors reads only those. The full list of rules is in docs/case_files.md.
 *
 * Logical dtypes without a standard string (int4, fp4_e1m2, hifloat8) are stored as U8 and named in
 * the metadata under "dtype.<tensor>" (4-bit ones also carry "shape.<tensor>" with the logical shape as
 * a JSON list); the reader applies that metadata so callers see the logical dtype and shape, and the
 * writer adds it.
 *
 * Threads: an open reader is not modified by lookups or reads, so several threads may use one reader
 * at once. A writer belongs to one thread at a time. */
#ifndef MEGAMOE_SAFETENSORS_H
#define MEGAMOE_SAFETENSORS_H

#include <stddef.h>
#include <stdint.h>

#include "megamoe/dtype.h"
#include "megamoe/status.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct mm_st_reader mm_st_reader;

typedef struct mm_st_tensor_info {
    const char *name; /* valid while the reader is open */
    mm_dtype dtype;   /* logical dtype (after "dtype.<name>" metadata) */
    int ndim;
    int64_t shape[MM_MAX_DIMS]; /* logical shape (after "shape.<name>" metadata) */
    uint64_t offset;            /* byte offset in the file of the tensor's data */
    uint64_t nbytes;            /* bytes of data */
    /* The dtype string as stored ("BF16", "U8" for logical ones). The standard dtypes megamoe never
     * computes with (U16, U32, C64) are accepted in a file with dtype MM_DTYPE_INVALID, so a checkpoint
     * holding such a tensor opens; mm_st_read_tensor refuses them, mm_st_read copies their bytes. */
    const char *dtype_string;
} mm_st_tensor_info;

/* Open and validate a file. Malformed content gives MM_ERR_INVALID_FILE with a message naming the
 * file, the tensor or field and the rule; an unreadable file gives MM_ERR_IO with the system's reason. */
mm_status mm_st_open(const char *path, mm_st_reader **out, mm_error *err);
/* Same over a memory buffer (copied). Used by tests and fuzzing. */
mm_status mm_st_open_memory(const void *data, size_t size, mm_st_reader **out, mm_error *err);
void mm_st_close(mm_st_reader *reader);

size_t mm_st_tensor_count(const mm_st_reader *reader);
/* Tensors in file order (by data offset). */
const mm_st_tensor_info *mm_st_tensor_at(const mm_st_reader *reader, size_t index);
/* NULL when absent. */
const mm_st_tensor_info *mm_st_find(const mm_st_reader *reader, const char *name);

size_t mm_st_metadata_count(const mm_st_reader *reader);
/* Key/value of metadata entry `index` (sorted by key). */
void mm_st_metadata_at(const mm_st_reader *reader, size_t index, const char **key, const char **value);
/* Value of a metadata key, NULL when absent. */
const char *mm_st_metadata(const mm_st_reader *reader, const char *key);

/* Read a tensor's bytes into dst (which holds info->nbytes bytes). info must come from this reader
 * (mm_st_find / mm_st_tensor_at), else MM_ERR_INVALID_ARGUMENT. */
mm_status mm_st_read(mm_st_reader *reader, const mm_st_tensor_info *info, void *dst, mm_error *err);
/* Read into a newly allocated tensor: data is 64-byte aligned and never NULL (also for empty tensors);
 * free it with mm_tensor_free_data. A name not in the file gives MM_ERR_INVALID_FILE. */
mm_status mm_st_read_tensor(mm_st_reader *reader, const char *name, mm_tensor *out, mm_error *err);
/* Frees data allocated by mm_st_read_tensor and sets it to NULL. Accepts NULL. */
void mm_tensor_free_data(mm_tensor *t);

typedef struct mm_st_writer mm_st_writer;

mm_status mm_st_writer_create(mm_st_writer **out, mm_error *err);
void mm_st_writer_destroy(mm_st_writer *writer);
/* Metadata strings (valid UTF-8, non-empty key) are copied. Adding a key twice replaces its value. Keys
 * starting with "dtype." or "shape." are reserved (the writer derives them) and refused. */
mm_status mm_st_writer_set_metadata(mm_st_writer *writer, const char *key, const char *value, mm_error *err);
/* Adds a tensor; its data (mm_tensor_nbytes bytes) is copied. Logical dtypes get their
 * "dtype."/"shape." metadata automatically. Names must be unique, non-empty, valid UTF-8 and not
 * "__metadata__". */
mm_status mm_st_writer_add(mm_st_writer *writer, const char *name, const mm_tensor *tensor, mm_error *err);
/* As mm_st_writer_add, but the data is not copied: the writer keeps tensor->data and streams the bytes
 * from it when the file is written, so a large output costs no second copy. The caller keeps the data
 * allocated and unchanged until the last mm_st_writer_write (or mm_st_writer_destroy). */
mm_status mm_st_writer_add_ref(mm_st_writer *writer, const char *name, const mm_tensor *tensor,
                               mm_error *err);
/* Writes the file: header with __metadata__ first (keys sorted), then the tensors in insertion order,
 * data in the same order (streamed: each tensor's bytes are written from its data, never gathered into
 * one image of the file), header padded with spaces so the data starts at a multiple of 8. Writes to a
 * temporary file beside path (fsync'ed), then renames it into place: a failed write removes the
 * temporary file and leaves an existing file untouched (MM_ERR_IO). A replaced file keeps its mode, a
 * new one gets 0644. An existing path that is neither a regular file nor a directory (/dev/null,
 * /dev/stdout, a FIFO) is written in place, never replaced; a symbolic link is followed (its target is
 * replaced, the link stays). The writer can be written again (e.g. to another path). */
mm_status mm_st_writer_write(mm_st_writer *writer, const char *path, mm_error *err);

#ifdef __cplusplus
}
#endif
#endif
