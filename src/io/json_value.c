/* SPDX-License-Identifier: Apache-2.0 */
/* io/json_value.c: reading values out of a parsed JSON document, and the literal helpers the case
 * runner uses to parse attribute strings from case-file metadata (see json.h). */
#include <stdio.h>
#include <string.h>

#include "core/error.h"
#include "io/io_util.h"
#include "io/json.h"

const char *mm_json_type_phrase(mm_json_type type) {
    switch (type) {
    case MM_JSON_NULL: return "null";
    case MM_JSON_BOOL: return "a boolean";
    case MM_JSON_NUMBER: return "a number";
    case MM_JSON_STRING: return "a string";
    case MM_JSON_ARRAY: return "an array";
    case MM_JSON_OBJECT: return "an object";
    }
    return "of unknown type";
}

const mm_json_value *mm_json_object_get(const mm_json_value *obj, const char *key) {
    if (!obj || obj->type != MM_JSON_OBJECT || !key) return NULL;
    size_t n = strlen(key);
    for (size_t i = 0; i < obj->u.object.count; i++) {
        const mm_json_member *m = &obj->u.object.members[i];
        if (m->key_len == n && memcmp(m->key, key, n) == 0) return m->value;
    }
    return NULL;
}

int mm_json_number_to_int64(const mm_json_value *v, int64_t min, int64_t max, int64_t *out, char *why,
                            size_t why_cap) {
    if (!v || v->type != MM_JSON_NUMBER) {
        snprintf(why, why_cap, "is %s, not an integer", v ? mm_json_type_phrase(v->type) : "missing");
        return 0;
    }
    const mm_json_number *n = &v->u.number;
    if (!n->is_integer) {
        snprintf(why, why_cap, "is not an integer (fraction or exponent)");
        return 0;
    }
    /* The magnitude fits int64 when <= INT64_MAX, or == 2^63 for a negative value. */
    int64_t value;
    if (n->magnitude_overflow || (!n->negative && n->magnitude > (uint64_t)INT64_MAX) ||
        (n->negative && n->magnitude > (uint64_t)INT64_MAX + 1)) {
        snprintf(why, why_cap, "is outside the 64-bit integer range");
        return 0;
    }
    if (n->negative)
        value = n->magnitude == (uint64_t)INT64_MAX + 1 ? INT64_MIN : -(int64_t)n->magnitude;
    else
        value = (int64_t)n->magnitude;
    if (value < min) {
        snprintf(why, why_cap, "is below the minimum %lld", (long long)min);
        return 0;
    }
    if (value > max) {
        snprintf(why, why_cap, "is above the maximum %lld", (long long)max);
        return 0;
    }
    *out = value;
    return 1;
}

mm_status mm_json_member_typed(const mm_json_value *object, const char *key, mm_json_type type,
                               int null_is_absent, const char *where, const char *must_be,
                               const mm_json_value **out, mm_error *err) {
    const mm_json_value *v = mm_json_object_get(object, key);
    *out = NULL;
    if (!v || (null_is_absent && v->type == MM_JSON_NULL)) return MM_OK;
    if (v->type != type)
        return mm_fail(err, MM_ERR_INVALID_FILE, "%s: \"%s\" is %s, must be %s", where, key,
                       mm_json_type_phrase(v->type), must_be);
    *out = v;
    return MM_OK;
}

/* Parses text as JSON; on failure the message is "<label> = "<text>" is not valid JSON (...)". */
static mm_status parse_literal(const char *label, const char *text, mm_json_doc **doc, mm_error *err) {
    if (!label || !text) return mm_fail(err, MM_ERR_INVALID_ARGUMENT, "JSON literal: label or text is NULL");
    mm_error inner;
    mm_error_clear(&inner);
    mm_status st = mm_json_parse(text, strlen(text), doc, &inner);
    if (st == MM_OK) return MM_OK;
    char q[MM_IO_QUOTE_BUF];
    return mm_fail(err, st, "%s = \"%s\" is not valid JSON (%s)", label,
                   mm_io_quote(q, sizeof q, text, strlen(text)), inner.message);
}

static mm_status literal_fail(mm_error *err, const char *label, const char *text, const char *why) {
    char q[MM_IO_QUOTE_BUF];
    return mm_fail(err, MM_ERR_INVALID_FILE, "%s = \"%s\" %s", label,
                   mm_io_quote(q, sizeof q, text, strlen(text)), why);
}

static int number_to_double(const mm_json_value *v, double *out, char *why, size_t why_cap) {
    if (v->type != MM_JSON_NUMBER) {
        snprintf(why, why_cap, "is %s, not a number", mm_json_type_phrase(v->type));
        return 0;
    }
    if (v->u.number.real_overflow) {
        snprintf(why, why_cap, "is outside the range of a double");
        return 0;
    }
    *out = v->u.number.real;
    return 1;
}

/* The scalar kinds a literal converts to. */
typedef enum { LITERAL_INT64, LITERAL_DOUBLE, LITERAL_BOOL } literal_kind;

/* v as kind into *out (an int64_t, a double or an int); 0 with why filled when it is not one. */
static int literal_convert(literal_kind kind, const mm_json_value *v, void *out, char *why, size_t why_cap) {
    if (kind == LITERAL_INT64) return mm_json_number_to_int64(v, INT64_MIN, INT64_MAX, out, why, why_cap);
    if (kind == LITERAL_DOUBLE) return number_to_double(v, out, why, why_cap);
    if (v->type == MM_JSON_BOOL) {
        *(int *)out = v->u.boolean;
        return 1;
    }
    snprintf(why, why_cap, "is %s, not true or false", mm_json_type_phrase(v->type));
    return 0;
}

/* Shared body of the scalar helpers: out (size bytes, may be NULL) is written only on success. */
static mm_status literal_scalar(const char *label, const char *text, literal_kind kind, void *out,
                                size_t size, mm_error *err) {
    mm_json_doc *doc = NULL;
    mm_status st = parse_literal(label, text, &doc, err);
    if (st != MM_OK) return st;
    char why[160];
    union {
        int64_t i;
        double d;
        int b;
    } value;
    if (!literal_convert(kind, mm_json_doc_root(doc), &value, why, sizeof why))
        st = literal_fail(err, label, text, why);
    else if (out)
        memcpy(out, &value, size);
    mm_json_doc_free(doc);
    return st;
}

mm_status mm_json_literal_int64(const char *label, const char *text, int64_t *out, mm_error *err) {
    return literal_scalar(label, text, LITERAL_INT64, out, sizeof *out, err);
}

mm_status mm_json_literal_double(const char *label, const char *text, double *out, mm_error *err) {
    return literal_scalar(label, text, LITERAL_DOUBLE, out, sizeof *out, err);
}

mm_status mm_json_literal_bool(const char *label, const char *text, int *out, mm_error *err) {
    return literal_scalar(label, text, LITERAL_BOOL, out, sizeof *out, err);
}

/* Shared body of the two list helpers: checks the array shape, then converts each element. */
static mm_status literal_list(const char *label, const char *text, double *out_double, int64_t *out_int,
                              size_t capacity, size_t *count, mm_error *err) {
    mm_json_doc *doc = NULL;
    mm_status st = parse_literal(label, text, &doc, err);
    if (st != MM_OK) return st;
    const mm_json_value *v = mm_json_doc_root(doc);
    char why[256];
    if (v->type != MM_JSON_ARRAY) {
        snprintf(why, sizeof why, "is %s, not a list", mm_json_type_phrase(v->type));
        st = literal_fail(err, label, text, why);
        goto done;
    }
    if (v->u.array.count > capacity) {
        snprintf(why, sizeof why, "has %zu elements, at most %zu are allowed", v->u.array.count, capacity);
        st = literal_fail(err, label, text, why);
        goto done;
    }
    for (size_t i = 0; i < v->u.array.count; i++) {
        const mm_json_value *item = v->u.array.items[i];
        char item_why[96];
        int ok = out_double ? literal_convert(LITERAL_DOUBLE, item, &out_double[i], item_why, sizeof item_why)
                            : literal_convert(LITERAL_INT64, item, &out_int[i], item_why, sizeof item_why);
        if (!ok) {
            snprintf(why, sizeof why, "is not a list of %s: element %zu %s",
                     out_double ? "numbers" : "integers", i, item_why);
            st = literal_fail(err, label, text, why);
            goto done;
        }
    }
    if (count) *count = v->u.array.count;
done:
    mm_json_doc_free(doc);
    return st;
}

mm_status mm_json_literal_double_list(const char *label, const char *text, double *out, size_t capacity,
                                      size_t *count, mm_error *err) {
    if (!out && capacity) return mm_fail(err, MM_ERR_INVALID_ARGUMENT, "JSON literal: output list is NULL");
    double unused;
    return literal_list(label, text, out ? out : &unused, NULL, capacity, count, err);
}

mm_status mm_json_literal_int64_list(const char *label, const char *text, int64_t *out, size_t capacity,
                                     size_t *count, mm_error *err) {
    if (!out && capacity) return mm_fail(err, MM_ERR_INVALID_ARGUMENT, "JSON literal: output list is NULL");
    int64_t unused;
    return literal_list(label, text, NULL, out ? out : &unused, capacity, count, err);
}
