/* SPDX-License-Identifier: Apache-2.0 */
/* tools/layer/layer_weights.h: the --weights option of the commands that load a checkpoint's layer
 * (`megamoe layer`, `megamoe run --model`): native (as stored) or bf16 (dequantized on load). */
#ifndef MEGAMOE_TOOLS_LAYER_WEIGHTS_H
#define MEGAMOE_TOOLS_LAYER_WEIGHTS_H

#include "megamoe/model.h"

/* --weights: "native" or "bf16" into ((mm_moe_layer_options *)options)->dequantize_to_bf16; else a usage
 * error on stderr and -1 (a parser of a cli_options.h row). */
int cli_parse_weights(const char *command, const char *option, const char *text, void *options);

#endif
