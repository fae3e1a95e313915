/* SPDX-License-Identifier: Apache-2.0 */
/* model/family_keys.c: config.json helpers of the deepseek_v3 and gpt_oss families (boolean, real and
 * string keys with their transformers defaults), the copies the layer keeps of small tensors, and the
 * router of both (a weight and a bias). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "io/json.h"
#include "megamoe/formats.h"
#include "model/family_keys.h"

mm_status mm_model_config_bool(const mm_json_value *root, const char *key, int def, int *out, mm_error *err) {
    const mm_json_value *v;
    mm_status st = mm_json_member_typed(root, key, MM_JSON_BOOL, 0, "config.json", "true or false", &v, err);
    if (st == MM_OK) *out = v ? v->u.boolean : def;
    return st;
}

mm_status mm_model_config_real(const mm_json_value *root, const char *key, double def, double min, double max,
                               float *out, mm_error *err) {
    const mm_json_value *v;
    mm_status st = mm_json_member_typed(root, key, MM_JSON_NUMBER, 0, "config.json", "a number", &v, err);
    if (st != MM_OK) return st;
    if (!v) {
        *out = (float)def;
        return MM_OK;
    }
    double d = v->u.number.real;
    if (v->u.number.real_overflow || !(d >= min && d <= max))
        return mm_fail(err, MM_ERR_INVALID_FILE, "config.json: \"%s\" = %g is outside [%g, %g]", key, d, min,
                       max);
    *out = (float)d;
    return MM_OK;
}

mm_status mm_model_config_string_is(const mm_json_value *obj, const char *where, const char *key,
                                    const char *want, int required, mm_error *err) {
    const mm_json_value *v = mm_json_object_get(obj, key);
    if (!v && !required) return MM_OK;
    if (!v) return mm_fail(err, MM_ERR_INVALID_FILE, "%s: key \"%s\" is missing", where, key);
    if (v->type != MM_JSON_STRING || strcmp(v->u.string.chars, want) != 0)
        return mm_fail(err, MM_ERR_INVALID_FILE,
                       "%s: \"%s\" must be \"%s\" (the only one megamoe implements)", where, key, want);
    return MM_OK;
}

mm_status mm_model_copy_f32(const mm_tensor *t, float **out, mm_error *err) {
    size_t n = (size_t)mm_tensor_numel(t);
    if (!(*out = malloc((n ? n : 1) * sizeof **out)))
        return mm_fail(err, MM_ERR_OUT_OF_MEMORY, "layer: out of memory");
    for (size_t i = 0; i < n; i++)
        (*out)[i] = t->dtype == MM_DTYPE_F32 ? ((const float *)t->data)[i]
                                             : mm_bf16_to_f32(((const uint16_t *)t->data)[i]);
    return MM_OK;
}

int mm_model_all_zero_f32(const float *v, size_t n) {
    for (size_t i = 0; i < n; i++)
        if (v[i] != 0.0f) return 0;
    return 1;
}

mm_status mm_model_load_router(mm_moe_layer *l, mm_model_files *files, const char *weight, const char *bias,
                               const char *e_key, mm_error *err) {
    const mm_model_config *c = &l->config;
    char dims[96];
    mm_tensor t;
    snprintf(dims, sizeof dims, "(%s, hidden_size)", e_key);
    mm_status st = mm_model_files_tensor(files, weight, c->num_experts, c->hidden_size, dims, &t, err);
    if (!st) st = mm_model_copy_bf16(&t, &l->gate, err);
    snprintf(dims, sizeof dims, "(%s,)", e_key);
    if (!st)
        st = mm_model_files_get(files, bias, MM_DTYPE_F32, MM_DTYPE_BF16, 1, &c->num_experts, dims, &t, err);
    if (!st) st = mm_model_copy_f32(&t, &l->router_bias, err);
    if (st) return st;
    l->router_bias_t = mm_tensor_make(MM_DTYPE_F32, 1, &c->num_experts, l->router_bias);
    l->router.bias = &l->router_bias_t;
    return MM_OK;
}
