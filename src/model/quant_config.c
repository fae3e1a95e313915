/* SPDX-License-Identifier: Apache-2.0 */
/* model/quant_config.c: config.json's quantization_config for the AWQ and GPTQ checkpoints of the BF16
 * families: which method, the group size and the zero-point convention, and one clear refusal for every
 * variant megamoe does not run (other bit widths, act-order, other packings). The keys are those of
 * transformers' AwqConfig and GPTQConfig (docs/models.md, "AWQ and GPTQ"). */
#include <stdio.h>
#include <string.h>

#include "core/error.h"
#include "io/io_util.h"
#include "io/json.h"
#include "model/model_internal.h"

static const char where[] = "config.json: quantization_config";

/* The value of the first of two spellings present (AutoAWQ's own files say w_bit / q_group_size). */
static const mm_json_value *get2(const mm_json_value *q, const char *key, const char *alt,
                                 const char **used) {
    const mm_json_value *v = mm_json_object_get(q, key);
    *used = key;
    if (!v && alt && (v = mm_json_object_get(q, alt))) *used = alt;
    return v;
}

static mm_status get_int(const mm_json_value *q, const char *key, const char *alt, int64_t *out,
                         mm_error *err) {
    const char *used;
    const mm_json_value *v = get2(q, key, alt, &used);
    if (!v) return mm_fail(err, MM_ERR_INVALID_FILE, "%s: key \"%s\" is missing", where, key);
    char why[96];
    if (v->type != MM_JSON_NUMBER || !mm_json_number_to_int64(v, -1, (int64_t)1 << 30, out, why, sizeof why))
        return mm_fail(err, MM_ERR_INVALID_FILE, "%s: \"%s\" must be an integer", where, used);
    return MM_OK;
}

/* A boolean key: absent gives def. */
static mm_status get_bool(const mm_json_value *q, const char *key, int def, int *out, mm_error *err) {
    const mm_json_value *v;
    *out = def;
    mm_status st = mm_json_member_typed(q, key, MM_JSON_BOOL, 1, where, "true or false", &v, err);
    if (v) *out = v->u.boolean;
    return st;
}

/* A string key: absent or null gives def. */
static mm_status get_string(const mm_json_value *q, const char *key, const char *def, const char **out,
                            mm_error *err) {
    const mm_json_value *v;
    *out = def;
    mm_status st = mm_json_member_typed(q, key, MM_JSON_STRING, 1, where, "a string", &v, err);
    if (v) *out = v->u.string.chars;
    return st;
}

static mm_status read_awq(const mm_json_value *q, mm_model_quant *out, mm_error *err) {
    int zero_point;
    const char *version;
    mm_status st;
    if ((st = get_int(q, "group_size", "q_group_size", &out->group_size, err)) ||
        (st = get_bool(q, "zero_point", 1, &zero_point, err)) ||
        (st = get_string(q, "version", "gemm", &version, err)))
        return st;
    if (out->group_size < 1)
        return mm_fail(err, MM_ERR_INVALID_FILE, "%s: awq \"group_size\" = %lld must be positive", where,
                       (long long)out->group_size);
    if (!zero_point)
        return mm_fail(err, MM_ERR_INVALID_FILE,
                       "%s: awq \"zero_point\" is false: only AWQ with zero points is supported", where);
    /* version names the packing: "gemv", "gemv_fast", "marlin", "exllama", "ipex" pack otherwise */
    if (strcmp(version, "gemm") != 0 && strcmp(version, "GEMM") != 0) {
        char vq[MM_IO_QUOTE_BUF];
        return mm_fail(
            err, MM_ERR_INVALID_FILE,
            "%s: awq \"version\" = \"%s\" is not supported (only \"gemm\", AutoAWQ's default packing)", where,
            mm_io_quote(vq, sizeof vq, version, strlen(version)));
    }
    out->method = MM_MODEL_QUANT_AWQ;
    return MM_OK;
}

static mm_status read_gptq(const mm_json_value *q, mm_model_quant *out, mm_error *err) {
    int desc_act, marlin;
    const char *format;
    mm_status st;
    if ((st = get_int(q, "group_size", NULL, &out->group_size, err)) ||
        (st = get_bool(q, "desc_act", 0, &desc_act, err)) ||
        (st = get_bool(q, "is_marlin_format", 0, &marlin, err)) ||
        (st = get_string(q, "checkpoint_format", "gptq", &format, err)))
        return st;
    if (out->group_size == -1)
        out->group_size = 0; /* one group over the whole input */
    else if (out->group_size < 1)
        return mm_fail(err, MM_ERR_INVALID_FILE, "%s: gptq \"group_size\" = %lld must be positive or -1",
                       where, (long long)out->group_size);
    if (desc_act)
        return mm_fail(err, MM_ERR_INVALID_FILE,
                       "%s: gptq \"desc_act\" is true: act-order checkpoints (g_idx not k / group_size) are "
                       "not supported",
                       where);
    if (marlin)
        return mm_fail(err, MM_ERR_INVALID_FILE,
                       "%s: gptq \"is_marlin_format\" is true: the Marlin packing is not supported", where);
    if (strcmp(format, "gptq") == 0)
        out->zeros_minus_one = 1;
    else if (strcmp(format, "gptq_v2") == 0)
        out->zeros_minus_one = 0;
    else {
        char fq[MM_IO_QUOTE_BUF];
        return mm_fail(err, MM_ERR_INVALID_FILE,
                       "%s: gptq \"checkpoint_format\" = \"%s\" is not supported (\"gptq\" or \"gptq_v2\")",
                       where, mm_io_quote(fq, sizeof fq, format, strlen(format)));
    }
    out->method = MM_MODEL_QUANT_GPTQ;
    return MM_OK;
}

mm_status mm_model_quant_read(const mm_json_value *root, mm_model_quant *out, mm_error *err) {
    memset(out, 0, sizeof *out);
    const mm_json_value *q = mm_json_object_get(root, "quantization_config");
    if (!q || q->type == MM_JSON_NULL) return MM_OK;
    if (q->type != MM_JSON_OBJECT)
        return mm_fail(err, MM_ERR_INVALID_FILE, "%s is %s, must be an object", where,
                       mm_json_type_phrase(q->type));
    const char *method;
    mm_status st = get_string(q, "quant_method", "", &method, err);
    if (st) return st;
    int awq = strcmp(method, "awq") == 0, gptq = strcmp(method, "gptq") == 0;
    if (!awq && !gptq) {
        char mq[MM_IO_QUOTE_BUF];
        return mm_fail(err, MM_ERR_INVALID_FILE,
                       "%s: quant_method \"%s\" is not supported (BF16 checkpoints, and 4-bit \"awq\" or "
                       "\"gptq\" for these families)",
                       where, mm_io_quote(mq, sizeof mq, method, strlen(method)));
    }
    int64_t bits;
    if ((st = get_int(q, "bits", awq ? "w_bit" : NULL, &bits, err))) return st;
    if (bits != 4)
        return mm_fail(err, MM_ERR_INVALID_FILE, "%s: %s \"bits\" = %lld is not supported (only 4-bit)",
                       where, method, (long long)bits);
    return awq ? read_awq(q, out, err) : read_gptq(q, out, err);
}
