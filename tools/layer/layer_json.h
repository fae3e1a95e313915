/* SPDX-License-Identifier: Apache-2.0 */
/* tools/layer/layer_json.h: `megamoe layer --json`: one JSON object on stdout after a successful run
 * (docs/cli.md), kept apart from cmd_layer.c's loading logic. */
#ifndef MEGAMOE_TOOLS_LAYER_JSON_H
#define MEGAMOE_TOOLS_LAYER_JSON_H

#include <stdint.h>

typedef struct layer_json_facts {
    const char *model_dir, *backend, *input, *output;
    int64_t layer, tokens, ranks, hidden, topk;
    double read_s; /* opening the checkpoint's config and index, reading x */
    double run_s;  /* the launch: loading the layer's weights on every rank, router, experts, writing */
} layer_json_facts;

void layer_json_print(const layer_json_facts *f);

#endif
