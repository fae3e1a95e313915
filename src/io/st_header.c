/* SPDX-License-Identifier: Apache-2.0 */
/* io/st_header.c: validation of a safetensors header against its data region.
 *
 * Every rule of docs/case_files.md "What the reader enforces" is checked here, in this order:
 * JSON syntax; top-level object; __metadata__ (object of strings); each tensor entry (exactly dtype,
 * shape, data_offsets; known dtype; shape of at most MM_MAX_DIMS non-negative integers; offsets in
 * bounds; byte span equal to the shape's size); the offsets tile the data region exactly (the rule of
 * the reference implementation); and the logical-dtype metadata (dtype.<name>, shape.<name>). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "format/format_table.h"
#include "io/io_util.h"
#include "io/st_internal.h"

mm_dtype mm_st_dtype_from_string(const char *s) {
    for (int d = MM_DTYPE_INVALID + 1; d < MM_DTYPE_COUNT; d++) {
        const char *name = mm_format_table[d].safetensors;
        if (name && strcmp(name, s) == 0) return (mm_dtype)d;
    }
    return MM_DTYPE_INVALID;
}

const char *mm_st_dtype_string(mm_dtype dtype) {
    const mm_format_traits *t = mm_format_traits_of(dtype);
    return t ? t->safetensors : NULL;
}

/* Standard safetensors dtypes that megamoe never computes with: a checkpoint may hold them in tensors
 * megamoe does not ask for (index buffers, counters), so the file is accepted, the tensor is listed
 * with dtype MM_DTYPE_INVALID and its string, and reading it is refused (mm_st_read_tensor). Returns
 * the element size in bytes, 0 for a string that is not one of them. */
static int foreign_dtype_bytes(const char *s) {
    static const struct {
        const char *name;
        int bytes;
    } foreign[] = {{"U16", 2}, {"U32", 4}, {"C64", 8}};
    for (size_t i = 0; i < sizeof foreign / sizeof foreign[0]; i++)
        if (strcmp(foreign[i].name, s) == 0) return foreign[i].bytes;
    return 0;
}

/* "[4, 16]" for messages; cut with "...]" if it does not fit. */
static const char *shape_text(char *buf, size_t cap, int ndim, const int64_t *shape) {
    size_t at = (size_t)snprintf(buf, cap, "[");
    for (int i = 0; i < ndim && at < cap; i++)
        at += (size_t)snprintf(buf + at, cap - at, "%s%lld", i ? ", " : "", (long long)shape[i]);
    if (at < cap) snprintf(buf + at, cap - at, "]");
    return buf;
}

/* Reads a JSON list of at most MM_MAX_DIMS non-negative int64 values. `what` names it in messages
 * (e.g. `tensor "x": shape`). */
static mm_status read_shape(const mm_json_value *v, const char *what, int *ndim, int64_t *shape,
                            mm_error *err) {
    if (v->type != MM_JSON_ARRAY)
        return mm_fail(err, MM_ERR_INVALID_FILE, "%s is %s, must be a list of integers", what,
                       mm_json_type_phrase(v->type));
    if (v->u.array.count > MM_MAX_DIMS)
        return mm_fail(err, MM_ERR_INVALID_FILE, "%s has %zu dimensions, at most %d are allowed", what,
                       v->u.array.count, MM_MAX_DIMS);
    for (size_t i = 0; i < v->u.array.count; i++) {
        char why[96];
        const mm_json_value *item = v->u.array.items[i];
        if (item->type == MM_JSON_NUMBER && item->u.number.negative)
            return mm_fail(err, MM_ERR_INVALID_FILE, "%s[%zu] is negative", what, i);
        if (!mm_json_number_to_int64(item, 0, INT64_MAX, &shape[i], why, sizeof why))
            return mm_fail(err, MM_ERR_INVALID_FILE, "%s[%zu] %s", what, i, why);
    }
    *ndim = (int)v->u.array.count;
    return MM_OK;
}

static mm_status read_offsets(const mm_json_value *v, const char *what, uint64_t data_size, uint64_t *begin,
                              uint64_t *end, mm_error *err) {
    if (v->type != MM_JSON_ARRAY || v->u.array.count != 2)
        return mm_fail(err, MM_ERR_INVALID_FILE, "%s must be a list of 2 integers [begin, end]", what);
    uint64_t pair[2];
    for (size_t i = 0; i < 2; i++) {
        const mm_json_value *item = v->u.array.items[i];
        if (item->type != MM_JSON_NUMBER || !item->u.number.is_integer)
            return mm_fail(err, MM_ERR_INVALID_FILE, "%s[%zu] is not an integer", what, i);
        if (item->u.number.negative) return mm_fail(err, MM_ERR_INVALID_FILE, "%s[%zu] is negative", what, i);
        if (item->u.number.magnitude_overflow || item->u.number.magnitude > data_size)
            return mm_fail(err, MM_ERR_INVALID_FILE, "%s[%zu] is beyond the end of the %llu-byte data region",
                           what, i, (unsigned long long)data_size);
        pair[i] = item->u.number.magnitude;
    }
    if (pair[0] > pair[1])
        return mm_fail(err, MM_ERR_INVALID_FILE, "%s [%llu, %llu] has begin > end", what,
                       (unsigned long long)pair[0], (unsigned long long)pair[1]);
    *begin = pair[0];
    *end = pair[1];
    return MM_OK;
}

/* Validates one tensor entry into info (offset relative to the data region for now). */
static mm_status read_entry(const mm_json_member *m, uint64_t data_size, mm_st_tensor_info *info,
                            mm_error *err) {
    char name[MM_IO_QUOTE_BUF], what[MM_IO_QUOTE_BUF + 40];
    mm_io_quote(name, sizeof name, m->key, m->key_len);
    if (strlen(m->key) != m->key_len)
        return mm_fail(err, MM_ERR_INVALID_FILE, "tensor \"%s\": the name contains a NUL character", name);
    const mm_json_value *e = m->value;
    if (e->type != MM_JSON_OBJECT)
        return mm_fail(err, MM_ERR_INVALID_FILE, "tensor \"%s\": entry is %s, must be an object", name,
                       mm_json_type_phrase(e->type));
    for (size_t i = 0; i < e->u.object.count; i++) {
        const char *k = e->u.object.members[i].key;
        /* strcmp would stop at an embedded NUL ("dtype\u0000x"); compare lengths too. */
        size_t kl = e->u.object.members[i].key_len;
        if (kl != strlen(k) ||
            (strcmp(k, "dtype") != 0 && strcmp(k, "shape") != 0 && strcmp(k, "data_offsets") != 0)) {
            char q[MM_IO_QUOTE_BUF];
            return mm_fail(err, MM_ERR_INVALID_FILE,
                           "tensor \"%s\": unknown field \"%s\" (allowed: dtype, shape, data_offsets)", name,
                           mm_io_quote(q, sizeof q, k, e->u.object.members[i].key_len));
        }
    }
    const mm_json_value *dtype = mm_json_object_get(e, "dtype"), *shape = mm_json_object_get(e, "shape"),
                        *offsets = mm_json_object_get(e, "data_offsets");
    if (!dtype || !shape || !offsets)
        return mm_fail(err, MM_ERR_INVALID_FILE, "tensor \"%s\": missing field \"%s\"", name,
                       !dtype   ? "dtype"
                       : !shape ? "shape"
                                : "data_offsets");
    if (dtype->type != MM_JSON_STRING)
        return mm_fail(err, MM_ERR_INVALID_FILE, "tensor \"%s\": dtype is %s, must be a string", name,
                       mm_json_type_phrase(dtype->type));
    info->dtype = mm_st_dtype_from_string(dtype->u.string.chars);
    info->dtype_string = dtype->u.string.chars;
    int foreign_bytes = info->dtype == MM_DTYPE_INVALID ? foreign_dtype_bytes(dtype->u.string.chars) : 0;
    if ((info->dtype == MM_DTYPE_INVALID && foreign_bytes == 0) ||
        strlen(dtype->u.string.chars) != dtype->u.string.len) {
        char q[MM_IO_QUOTE_BUF];
        return mm_fail(
            err, MM_ERR_INVALID_FILE,
            "tensor \"%s\": unknown dtype \"%s\" (known: BOOL, U8, I8, I16, I32, I64, U64, F16, BF16, "
            "F32, F64, F8_E4M3, F8_E5M2, F8_E8M0, F4; U16, U32, C64 listed but not read)",
            name, mm_io_quote(q, sizeof q, dtype->u.string.chars, dtype->u.string.len));
    }
    snprintf(what, sizeof what, "tensor \"%s\": shape", name);
    mm_status st = read_shape(shape, what, &info->ndim, info->shape, err);
    if (st != MM_OK) return st;
    uint64_t begin = 0, end = 0;
    snprintf(what, sizeof what, "tensor \"%s\": data_offsets", name);
    if ((st = read_offsets(offsets, what, data_size, &begin, &end, err)) != MM_OK) return st;
    /* A foreign dtype has the byte size of the plain dtype of its width (same rows, same overflow). */
    mm_dtype size_dtype = foreign_bytes == 2   ? MM_DTYPE_I16
                          : foreign_bytes == 4 ? MM_DTYPE_F32
                          : foreign_bytes == 8 ? MM_DTYPE_I64
                                               : info->dtype;
    mm_tensor t = mm_tensor_make(size_dtype, info->ndim, info->shape, NULL);
    int64_t need = mm_tensor_nbytes(&t);
    char shape_buf[200];
    shape_text(shape_buf, sizeof shape_buf, info->ndim, info->shape);
    if (need < 0)
        return mm_fail(err, MM_ERR_INVALID_FILE,
                       "tensor \"%s\": shape %s of %s has a byte size beyond 64 bits", name, shape_buf,
                       dtype->u.string.chars);
    if (end - begin != (uint64_t)need)
        return mm_fail(
            err, MM_ERR_INVALID_FILE,
            "tensor \"%s\": data_offsets [%llu, %llu] span %llu bytes but shape %s of %s needs %lld", name,
            (unsigned long long)begin, (unsigned long long)end, (unsigned long long)(end - begin), shape_buf,
            dtype->u.string.chars, (long long)need);
    info->name = m->key;
    info->offset = begin;
    info->nbytes = end - begin;
    return MM_OK;
}

static int compare_meta(const void *a, const void *b) {
    return strcmp(((const mm_st_meta_entry *)a)->key, ((const mm_st_meta_entry *)b)->key);
}

static mm_status read_metadata(mm_st_reader *r, const mm_json_value *meta, mm_error *err) {
    if (meta->type != MM_JSON_OBJECT)
        return mm_fail(err, MM_ERR_INVALID_FILE, "__metadata__ is %s, must be an object of strings",
                       mm_json_type_phrase(meta->type));
    size_t n = meta->u.object.count;
    r->meta = malloc((n ? n : 1) * sizeof *r->meta);
    if (!r->meta) return mm_fail(err, MM_ERR_OUT_OF_MEMORY, "header: out of memory");
    for (size_t i = 0; i < n; i++) {
        const mm_json_member *m = &meta->u.object.members[i];
        char q[MM_IO_QUOTE_BUF];
        mm_io_quote(q, sizeof q, m->key, m->key_len);
        if (m->value->type != MM_JSON_STRING)
            return mm_fail(err, MM_ERR_INVALID_FILE,
                           "__metadata__ \"%s\" is %s, metadata values must be strings", q,
                           mm_json_type_phrase(m->value->type));
        if (strlen(m->key) != m->key_len || strlen(m->value->u.string.chars) != m->value->u.string.len)
            return mm_fail(err, MM_ERR_INVALID_FILE,
                           "__metadata__ \"%s\": key or value contains a NUL character", q);
        r->meta[i].key = m->key;
        r->meta[i].value = m->value->u.string.chars;
    }
    r->meta_count = n;
    qsort(r->meta, n, sizeof *r->meta, compare_meta); /* keys are unique (duplicate JSON keys are refused) */
    return MM_OK;
}

/* File order: by data offsets, then by name so that empty tensors sharing an offset sort stably. */
static int compare_by_offsets(const void *a, const void *b) {
    const mm_st_tensor_info *x = a, *y = b;
    if (x->offset != y->offset) return x->offset < y->offset ? -1 : 1;
    if (x->nbytes != y->nbytes) return x->nbytes < y->nbytes ? -1 : 1;
    return strcmp(x->name, y->name);
}

/* qsort_r is a GNU extension; the name index sorts (index, table) pairs instead. */
typedef struct name_slot {
    const char *name;
    size_t index;
} name_slot;

static int compare_slots(const void *a, const void *b) {
    return strcmp(((const name_slot *)a)->name, ((const name_slot *)b)->name);
}

/* The reference implementation requires the tensors to tile the data region: sorted by offsets,
 * each begins where the previous ended, the first at 0 and the last ends at the end of the file. So
 * no byte of the file is unaccounted for, and no two tensors share a byte. */
static mm_status check_tiling(const mm_st_reader *r, uint64_t data_size, mm_error *err) {
    uint64_t covered = 0;
    const mm_st_tensor_info *prev = NULL;
    for (size_t i = 0; i < r->tensor_count; i++) {
        const mm_st_tensor_info *t = &r->tensors[i];
        char q[MM_IO_QUOTE_BUF], pq[MM_IO_QUOTE_BUF];
        unsigned long long b = t->offset, e = t->offset + t->nbytes;
        if (t->offset < covered)
            return mm_fail(err, MM_ERR_INVALID_FILE,
                           "tensor \"%s\": data_offsets [%llu, %llu] overlap tensor \"%s\" [%llu, %llu]",
                           mm_io_quote(q, sizeof q, t->name, strlen(t->name)), b, e,
                           mm_io_quote(pq, sizeof pq, prev->name, strlen(prev->name)),
                           (unsigned long long)prev->offset,
                           (unsigned long long)(prev->offset + prev->nbytes));
        if (t->offset > covered)
            return mm_fail(
                err, MM_ERR_INVALID_FILE,
                "tensor \"%s\": data_offsets [%llu, %llu] leave bytes [%llu, %llu) of the data region "
                "unused (tensors must cover the data region contiguously)",
                mm_io_quote(q, sizeof q, t->name, strlen(t->name)), b, e, (unsigned long long)covered, b);
        covered = t->offset + t->nbytes;
        prev = t;
    }
    if (covered != data_size)
        return mm_fail(
            err, MM_ERR_INVALID_FILE,
            "data region has %llu bytes but the tensors cover only [0, %llu) (tensors must cover the "
            "data region exactly, up to the end of the file)",
            (unsigned long long)data_size, (unsigned long long)covered);
    return MM_OK;
}

static mm_st_tensor_info *find_tensor(mm_st_reader *r, const char *name) {
    return (mm_st_tensor_info *)mm_st_find(r, name);
}

/* strcmp(key, prefix + name) without building the concatenation (names have no length limit). */
static int compare_prefixed(const char *key, const char *prefix, const char *name) {
    size_t np = strlen(prefix);
    int c = strncmp(key, prefix, np);
    return c ? c : strcmp(key + np, name);
}

const char *mm_st_meta_prefixed(const mm_st_reader *r, const char *prefix, const char *name) {
    size_t lo = 0, hi = r->meta_count;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        int c = compare_prefixed(r->meta[mid].key, prefix, name);
        if (c == 0) return r->meta[mid].value;
        if (c < 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    return NULL;
}

/* Applies "dtype.<name>" (and "shape.<name>" for the 4-bit ones) to the tensors they name. */
static mm_status apply_logical_dtypes(mm_st_reader *r, mm_error *err) {
    for (size_t i = 0; i < r->meta_count; i++) {
        const char *key = r->meta[i].key, *value = r->meta[i].value;
        char q[MM_IO_QUOTE_BUF], vq[MM_IO_QUOTE_BUF];
        mm_io_quote(q, sizeof q, key, strlen(key));
        if (strncmp(key, "shape.", 6) == 0) {
            const char *logical = mm_st_meta_prefixed(r, "dtype.", key + 6);
            if (!logical || (strcmp(logical, "int4") != 0 && strcmp(logical, "uint4") != 0 &&
                             strcmp(logical, "fp4_e1m2") != 0))
                return mm_fail(
                    err, MM_ERR_INVALID_FILE,
                    "metadata \"%s\" needs \"dtype.%s\" to be int4, uint4 or fp4_e1m2 (shape.<name> is only "
                    "for 4-bit logical dtypes)",
                    q, q + 6);
            continue;
        }
        if (strncmp(key, "dtype.", 6) != 0) continue;
        const char *name = key + 6;
        mm_st_tensor_info *t = find_tensor(r, name);
        if (!t) return mm_fail(err, MM_ERR_INVALID_FILE, "metadata \"%s\" names no tensor \"%s\"", q, q + 6);
        /* the dtypes stored as U8 bytes, by their megamoe names */
        static const mm_dtype logical_dtypes[] = {MM_DTYPE_INT4, MM_DTYPE_UINT4, MM_DTYPE_FP4_E1M2,
                                                  MM_DTYPE_HIFLOAT8};
        mm_dtype logical = MM_DTYPE_INVALID;
        for (size_t d = 0; d < sizeof logical_dtypes / sizeof logical_dtypes[0]; d++)
            if (strcmp(value, mm_dtype_name(logical_dtypes[d])) == 0) logical = logical_dtypes[d];
        if (logical == MM_DTYPE_INVALID)
            return mm_fail(
                err, MM_ERR_INVALID_FILE,
                "metadata \"%s\" = \"%s\" is not a logical dtype (int4, uint4, fp4_e1m2, hifloat8)", q,
                mm_io_quote(vq, sizeof vq, value, strlen(value)));
        if (t->dtype != MM_DTYPE_U8)
            return mm_fail(err, MM_ERR_INVALID_FILE,
                           "tensor \"%s\": metadata \"%s\" = \"%s\" needs the stored dtype U8, not %s", q + 6,
                           q, value, mm_st_dtype_string(t->dtype));
        if (logical == MM_DTYPE_HIFLOAT8) {
            t->dtype = logical;
            continue;
        }
        char what[MM_IO_QUOTE_BUF + 40];
        const char *shape_json = mm_st_meta_prefixed(r, "shape.", name);
        if (!shape_json)
            return mm_fail(err, MM_ERR_INVALID_FILE, "tensor \"%s\": dtype %s needs metadata \"shape.%s\"",
                           q + 6, value, q + 6);
        snprintf(what, sizeof what, "metadata \"shape.%s\"", q + 6);
        mm_json_doc *doc = NULL;
        mm_status st = mm_json_parse(shape_json, strlen(shape_json), &doc, err);
        if (st != MM_OK) {
            if (err) mm_error_prefix(err, "%s", what);
            return st;
        }
        int ndim = 0;
        int64_t shape[MM_MAX_DIMS] = {0};
        st = read_shape(mm_json_doc_root(doc), what, &ndim, shape, err);
        mm_json_doc_free(doc);
        if (st != MM_OK) return st;
        int consistent = ndim == t->ndim;
        for (int d = 0; consistent && d < ndim; d++) {
            int64_t expect = d == ndim - 1 ? shape[d] / 2 + shape[d] % 2 : shape[d];
            consistent = t->shape[d] == expect;
        }
        if (!consistent) {
            char logical_text[200], stored_text[200];
            return mm_fail(
                err, MM_ERR_INVALID_FILE,
                "tensor \"%s\": stored U8 shape %s does not hold %s shape %s (the stored last dimension "
                "must be ceil(n/2), the others equal)",
                q + 6, shape_text(stored_text, sizeof stored_text, t->ndim, t->shape), value,
                shape_text(logical_text, sizeof logical_text, ndim, shape));
        }
        t->dtype = logical;
        for (int d = 0; d < ndim; d++) t->shape[d] = shape[d];
    }
    return MM_OK;
}

mm_status mm_st_parse_header(mm_st_reader *r, const char *json, size_t len, uint64_t data_size,
                             mm_error *err) {
    mm_status st = MM_OK;
    if (len == 0 || json[0] != '{')
        return mm_fail(err, MM_ERR_INVALID_FILE, "header does not start with '{' (it must be a JSON object)");
    if ((st = mm_json_parse(json, len, &r->header, err)) != MM_OK) {
        if (err) mm_error_prefix(err, "header");
        return st;
    }
    const mm_json_value *root = mm_json_doc_root(r->header);
    size_t members = root->u.object.count;
    r->tensors = calloc(members ? members : 1, sizeof *r->tensors);
    r->by_name = calloc(members ? members : 1, sizeof *r->by_name);
    name_slot *slots = calloc(members ? members : 1, sizeof *slots);
    if (!r->tensors || !r->by_name || !slots) {
        st = mm_fail(err, MM_ERR_OUT_OF_MEMORY, "header: out of memory");
        goto done;
    }
    const mm_json_value *meta = NULL;
    for (size_t i = 0; i < members; i++) {
        const mm_json_member *m = &root->u.object.members[i];
        if (strcmp(m->key, "__metadata__") == 0 && m->key_len == 12) {
            meta = m->value;
            continue;
        }
        if ((st = read_entry(m, data_size, &r->tensors[r->tensor_count], err)) != MM_OK) goto done;
        r->tensor_count++;
    }
    if (meta) {
        if ((st = read_metadata(r, meta, err)) != MM_OK) goto done;
    } else {
        r->meta = malloc(sizeof *r->meta);
        if (!r->meta) {
            st = mm_fail(err, MM_ERR_OUT_OF_MEMORY, "header: out of memory");
            goto done;
        }
    }
    qsort(r->tensors, r->tensor_count, sizeof *r->tensors, compare_by_offsets);
    if ((st = check_tiling(r, data_size, err)) != MM_OK) goto done;
    for (size_t i = 0; i < r->tensor_count; i++) {
        slots[i].name = r->tensors[i].name;
        slots[i].index = i;
    }
    qsort(slots, r->tensor_count, sizeof *slots, compare_slots);
    for (size_t i = 0; i < r->tensor_count; i++) r->by_name[i] = slots[i].index;
    if ((st = apply_logical_dtypes(r, err)) != MM_OK) goto done;
    for (size_t i = 0; i < r->tensor_count; i++) r->tensors[i].offset += r->data_start;
done:
    free(slots);
    return st;
}
