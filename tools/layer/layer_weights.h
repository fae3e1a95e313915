/* SPDX-License-Identifier: Apache-2.0 */
/* tools/layer/layer_weights.h: the --weights option of the commands that load a checkpoint's layer
 * (`megamoe layer`, `megamoe run --model`): native (as stored) or bf16 (dequantized on load). */
#ifndef MEGAMOE_TOOLS_LAYER_WEIGHTS_H
#define MEGAMOE_TOOLS_LAYER_WEIGHTS_H

#include "megamoe/model.h"

/* "native" or "bf16" into options->dequantize_to_bf16; else a usage error on stderr and -1. */
int cli_parse_weights(const char *command, const char *text, mm_moe_layer_options *options);

#endif
