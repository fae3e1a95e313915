/* SPDX-License-Identifier: Apache-2.0 */
/* tools/layer/layer_json.c: the result object of `megamoe layer --json` (layer_json.h). */
#include "layer/layer_json.h"

#include <stdio.h>

#include "common/cli_json.h"
#include "common/cli_threads.h"

void layer_json_print(const layer_json_facts *f) {
    char threads[160];
    cli_threads_describe(threads, sizeof threads);
    cli_json j = cli_json_begin(stdout, "result");
    cli_json_str(&j, "command", "layer");
    cli_json_cpu(&j);
    cli_json_str(&j, "threads", threads);
    cli_json_str(&j, "model", f->model_dir);
    cli_json_int(&j, "layer", f->layer);
    cli_json_str(&j, "backend", f->backend);
    cli_json_int(&j, "ranks", f->ranks);
    cli_json_int(&j, "tokens", f->tokens);
    cli_json_int(&j, "hidden", f->hidden);
    cli_json_int(&j, "topk", f->topk);
    cli_json_str(&j, "input", f->input);
    cli_json_str(&j, "output", f->output);
    cli_json_num(&j, "read_s", f->read_s);
    cli_json_num(&j, "run_s", f->run_s);
    cli_json_num(&j, "total_s", f->read_s + f->run_s);
    cli_json_end(&j);
}
