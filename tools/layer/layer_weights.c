/* SPDX-License-Identifier: Apache-2.0 */
/* tools/layer/layer_weights.c: parsing --weights native|bf16 (layer_weights.h). */
#include "layer/layer_weights.h"

#include <string.h>

#include "common/cli_util.h"

int cli_parse_weights(const char *command, const char *option, const char *text, void *options) {
    if (strcmp(text, "native") == 0 || strcmp(text, "bf16") == 0) {
        ((mm_moe_layer_options *)options)->dequantize_to_bf16 = strcmp(text, "bf16") == 0;
        return 0;
    }
    cli_usage_error(command, "%s must be native or bf16, not '%s'", option, text);
    return -1;
}
