/* SPDX-License-Identifier: Apache-2.0 */
/* io/json.h: a strict JSON parser (RFC 8259) for safetensors headers and case-file attribute values.
 *
 * Strict because the input is untrusted: no comments, no trailing commas, no leading zeros, no NaN,
 * no duplicate object keys, no raw control characters in strings, UTF-8 validated, \uXXXX escapes
 * with surrogate pairs checked, nesting limited to MM_JSON_MAX_DEPTH, nothing after the value but
 * whitespace. The parsed document owns all its nodes (one arena), freed with mm_json_doc_free.
 * Failures are MM_ERR_INVALID_FILE with a message "JSON at byte <offset>: <what is wrong>".
 *
 * The mm_json_literal_* helpers parse one metadata value such as "4", "1e-06", "true" or
 * "[10.0, 1.702, 1.0]" for the case runner, with messages naming the caller's label. */
#ifndef MEGAMOE_IO_JSON_H
#define MEGAMOE_IO_JSON_H

#include <stddef.h>
#include <stdint.h>

#include "megamoe/status.h"

#define MM_JSON_MAX_DEPTH 64

typedef enum mm_json_type {
    MM_JSON_NULL,
    MM_JSON_BOOL,
    MM_JSON_NUMBER,
    MM_JSON_STRING,
    MM_JSON_ARRAY,
    MM_JSON_OBJECT
} mm_json_type;

typedef struct mm_json_value mm_json_value;

typedef struct mm_json_member {
    const char *key; /* decoded UTF-8, NUL-terminated; may contain NUL when written as \u0000 */
    size_t key_len;
    const mm_json_value *value;
} mm_json_member;

typedef struct mm_json_number {
    int is_integer;         /* written without fraction or exponent */
    int negative;           /* written with a leading '-' (also for -0) */
    int magnitude_overflow; /* integer magnitude does not fit in uint64 */
    uint64_t magnitude;     /* |value| when is_integer and !magnitude_overflow */
    double real;            /* correctly rounded value (strtod in the C locale) */
    int real_overflow;      /* |value| is too large for a finite double */
} mm_json_number;

struct mm_json_value {
    mm_json_type type;
    size_t offset; /* byte offset of the value in the parsed text, for messages */
    union {
        int boolean;
        mm_json_number number;
        struct {
            const char *chars; /* decoded UTF-8, NUL-terminated */
            size_t len;
        } string;
        struct {
            const mm_json_value **items;
            size_t count;
        } array;
        struct {
            const mm_json_member *members; /* in document order */
            size_t count;
        } object;
    } u;
};

typedef struct mm_json_doc mm_json_doc;

/* Parses text[0..len) (which need not be NUL-terminated). */
mm_status mm_json_parse(const char *text, size_t len, mm_json_doc **out, mm_error *err);
const mm_json_value *mm_json_doc_root(const mm_json_doc *doc);
void mm_json_doc_free(mm_json_doc *doc);

/* The type as a message phrase: "null", "a boolean", "a number", "a string", "an array", "an object". */
const char *mm_json_type_phrase(mm_json_type type);
/* Member of an object by key (keys are unique), NULL when absent or obj is not an object. */
const mm_json_value *mm_json_object_get(const mm_json_value *obj, const char *key);

/* Member key of object when it has `type`: *out = the member, or NULL when it is absent (or null, with
 * null_is_absent). Of another type: MM_ERR_INVALID_FILE "<where>: "<key>" is <its type>, must be <must_be>".
 */
mm_status mm_json_member_typed(const mm_json_value *object, const char *key, mm_json_type type,
                               int null_is_absent, const char *where, const char *must_be,
                               const mm_json_value **out, mm_error *err);
/* Integer value of a number node: fails unless it is an integer within [min, max]. On failure
 * writes "is not an integer", "is a fraction", "is below <min>"-style reasons into `why`. */
int mm_json_number_to_int64(const mm_json_value *v, int64_t min, int64_t max, int64_t *out, char *why,
                            size_t why_cap);

/* Literal helpers. `label` names the value in messages, e.g. `metadata "topk"`; errors are
 * MM_ERR_INVALID_FILE ("metadata \"topk\" = \"4.5\" is not an integer"), or MM_ERR_INVALID_ARGUMENT
 * for NULL pointers. Surrounding JSON whitespace is allowed. */
mm_status mm_json_literal_int64(const char *label, const char *text, int64_t *out, mm_error *err);
/* Accepts any JSON number (integers too); rejects values beyond the double range. */
mm_status mm_json_literal_double(const char *label, const char *text, double *out, mm_error *err);
/* Accepts exactly true or false. */
mm_status mm_json_literal_bool(const char *label, const char *text, int *out, mm_error *err);
/* A JSON array of numbers, at most `capacity` of them; *count receives how many. */
mm_status mm_json_literal_double_list(const char *label, const char *text, double *out, size_t capacity,
                                      size_t *count, mm_error *err);
mm_status mm_json_literal_int64_list(const char *label, const char *text, int64_t *out, size_t capacity,
                                     size_t *count, mm_error *err);

#endif
