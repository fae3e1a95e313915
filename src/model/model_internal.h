/* SPDX-License-Identifier: Apache-2.0 */
/* model/model_internal.h: what the checkpoint files share: the opened model (config + tensor index)
 * and one rank's memory-mapped view of the shard files it needs. Private to src/model/. */
#ifndef MEGAMOE_MODEL_INTERNAL_H
#define MEGAMOE_MODEL_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

#include "megamoe/model.h"
#include "megamoe/safetensors.h"

/* One entry of model.safetensors.index.json's weight_map. */
typedef struct mm_model_entry {
    const char *name, *file;
} mm_model_entry;

struct mm_model {
    char *dir;
    mm_model_config config;
    int64_t *mlp_only_layers;
    size_t mlp_only_count;
    int sharded;             /* 1: index.json names the file of each tensor; 0: dir/model.safetensors */
    mm_model_entry *entries; /* sorted by name (strings owned by index_doc) */
    size_t entry_count;
    struct mm_json_doc *index_doc;
};

/* One rank's open shards: each file is opened (header validated) and memory-mapped once. */
typedef struct mm_model_shard {
    const char *file; /* as named by the index (or "model.safetensors") */
    mm_st_reader *reader;
    void *map;
    size_t map_bytes;
} mm_model_shard;

typedef struct mm_model_files {
    const mm_model *model;
    mm_model_shard *shards;
    size_t count, cap;
    void **copies; /* tensors whose mapped data was not aligned to their element size */
    size_t copy_count, copy_cap;
} mm_model_files;

/* The tensor `name` as a descriptor pointing into the mapped file (valid until mm_model_files_close),
 * checked to be BF16 with the given 2-D shape; `dims` names the shape's config keys for messages,
 * e.g. "(moe_intermediate_size, hidden_size)". */
mm_status mm_model_files_tensor(mm_model_files *files, const char *name, int64_t rows, int64_t cols,
                                const char *dims, mm_tensor *out, mm_error *err);
void mm_model_files_close(mm_model_files *files);

#endif
