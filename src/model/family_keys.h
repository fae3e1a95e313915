/* SPDX-License-Identifier: Apache-2.0 */
/* model/family_keys.h: config.json helpers shared by the deepseek_v3 and gpt_oss loaders. Private. */
#ifndef MEGAMOE_MODEL_FAMILY_KEYS_H
#define MEGAMOE_MODEL_FAMILY_KEYS_H

#include "io/json.h"
#include "model/model_internal.h"

/* A boolean key; absent: def. */
mm_status mm_model_config_bool(const mm_json_value *root, const char *key, int def, int *out, mm_error *err);
/* A number key in [min, max]; absent: def. */
mm_status mm_model_config_real(const mm_json_value *root, const char *key, double def, double min, double max,
                               float *out, mm_error *err);
/* obj's string key must equal want (absent: fine unless required); where names the object. */
mm_status mm_model_config_string_is(const mm_json_value *obj, const char *where, const char *key,
                                    const char *want, int required, mm_error *err);
/* 1 when the n values are all +0 or -0. */
int mm_model_all_zero_f32(const float *v, size_t n);

/* The router: weight (E, H) BF16 into l->gate, bias (E,) F32 or BF16 into l->router_bias and
 * l->router.bias; e_key names E's config key in messages. */
mm_status mm_model_load_router(mm_moe_layer *l, mm_model_files *files, const char *weight, const char *bias,
                               const char *e_key, mm_error *err);

#endif
