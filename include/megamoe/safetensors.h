/* megamoe/safetensors.h: reading and writing safetensors files, the container of case files.
 *
 * The reader trusts nothing: it checks the header length, the JSON syntax, every dtype string, that
 * shape x dtype size equals the byte range, that offsets are in bounds, ordered and not overlapping,
 * and that all sizes fit in 64 bits. It reads the header once and tensor data on demand (pread), so a
 * process that needs only its own rank's tensors reads only those.
 *
 * Logical dtypes without a standard string (int4, fp4_e1m2, hifloat8) are stored as U8 and named in
 * the metadata under "dtype.<tensor>" (4-bit ones also carry "shape.<tensor>" with the logical shape as
 * a JSON list); the reader applies that metadata so callers see the logical dtype and shape. */
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
    const char *name;        /* valid while the reader is open */
    mm_dtype dtype;          /* logical dtype (after "dtype.<name>" metadata) */
    int ndim;
    int64_t shape[MM_MAX_DIMS]; /* logical shape (after "shape.<name>" metadata) */
    uint64_t offset;         /* byte offset in the file of the tensor's data */
    uint64_t nbytes;         /* bytes of data */
} mm_st_tensor_info;

/* Open and validate a file. Malformed content gives MM_ERR_INVALID_FILE with a message naming the
 * tensor or field and the rule; an unreadable file gives MM_ERR_IO. */
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

/* Read a tensor's bytes into dst (which holds info->nbytes bytes). */
mm_status mm_st_read(mm_st_reader *reader, const mm_st_tensor_info *info, void *dst, mm_error *err);
/* Read into a newly allocated tensor (data from malloc; free with mm_tensor_free_data). */
mm_status mm_st_read_tensor(mm_st_reader *reader, const char *name, mm_tensor *out, mm_error *err);
void mm_tensor_free_data(mm_tensor *t);

typedef struct mm_st_writer mm_st_writer;

mm_status mm_st_writer_create(mm_st_writer **out, mm_error *err);
void mm_st_writer_destroy(mm_st_writer *writer);
/* Metadata strings are copied. Adding a key twice replaces its value. */
mm_status mm_st_writer_set_metadata(mm_st_writer *writer, const char *key, const char *value, mm_error *err);
/* Adds a tensor; its data is copied. Logical dtypes get their "dtype."/"shape." metadata automatically.
 * Names must be unique. */
mm_status mm_st_writer_add(mm_st_writer *writer, const char *name, const mm_tensor *tensor, mm_error *err);
/* Writes to a temporary file beside path, then renames it into place: a failed write leaves an
 * existing file untouched. */
mm_status mm_st_writer_write(mm_st_writer *writer, const char *path, mm_error *err);

#ifdef __cplusplus
}
#endif
#endif
