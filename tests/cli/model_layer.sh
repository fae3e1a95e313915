#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# tests/cli/model_layer.sh: `megamoe layer` on tiny Hugging Face checkpoints of each family written by
# tests/python/hf_tiny.py (real names, dtypes, config keys; mixtral sharded over 2 files with an index):
# routing identical to and y within 1/64 x max|y| of the float64 reference of tests/python/hf_moe_reference.py
# on 1 and 2 thread ranks (4 for two cases; 2 MPI processes when mpirun is there), the same bytes for every rank
# count and backend; broken checkpoints exit 2 with one line naming the file, tensor or config key.
# --trace (every family on 1 and 2 thread ranks and 2 MPI processes, 4 ranks with a rank without tokens)
# writes the layer's phases and per rank its MegaMoE calls (qwen2_moe: "routed" and "shared") with the
# stages, expert batches and dispatch -> expert flows that lib/moe_trace.py checks from the shape alone;
# a trace with one batch's rows changed fails that check. `run --model --trace` (1, 2, 4 thread ranks, 2 MPI
# processes) gives the same slices for each timed forward, after the load and a warm-up.
# Usage: bash model_layer.sh <path-to-megamoe> <source-dir>
set -u
source "$(dirname "${BASH_SOURCE[0]}")/lib/common.bash"
cli_mpi_env
source "$(dirname "${BASH_SOURCE[0]}")/lib/model_common.bash"
# Everything the script needs, written by one Python run (numpy starts slowly on a loaded machine):
# the three checkpoints, the inputs, and the broken copies (each one edit of a good checkpoint).
cat >make.py <<'PY'
import json, sys
import numpy as np
from hf_tiny import *

for fam, seed in (("mixtral", 3), ("qwen3_moe", 4), ("qwen2_moe", 5)):
    write_checkpoint(fam, fam, seed)
write_input("mixtral", 1, "x_mixtral.st", 16, "bf16", 6)
write_input("qwen3_moe", 1, "x_qwen3_moe.st", 13, "f32", 7)
write_input("qwen2_moe", 1, "x_qwen2_moe.st", 11, "bf16", 8)
write_input("mixtral", 0, "x_mixtral0.st", 5, "bf16", 9)
write_safetensors("x_empty.st", [("x", bf16_bits(np.zeros((0, 64))))])
write_safetensors("nox.st", [("h", bf16_bits(np.zeros((2, 64))))])
write_safetensors("widex.st", [("x", bf16_bits(np.zeros((2, 65))))])

def broken(src, dst, config=None, tensors=None, index=None):
    copy_checkpoint(src, dst, config)
    if tensors:
        t = {n: a for n, (d, a) in read_safetensors(dst + "/model.safetensors").items()}
        tensors(t)
        write_safetensors(dst + "/model.safetensors", list(t.items()))
    if index:
        i = json.load(open(dst + "/model.safetensors.index.json"))
        index(i["weight_map"])
        json.dump(i, open(dst + "/model.safetensors.index.json", "w"))

broken("qwen3_moe", "q3_nokey", config=lambda c: c.pop("num_experts_per_tok"))
broken("qwen2_moe", "q2_nokey", config=lambda c: c.pop("shared_expert_intermediate_size"))
broken("qwen3_moe", "q3_family", config=lambda c: c.update(model_type="dbrx"))
broken("qwen3_moe", "q3_quant", config=lambda c: c.update(quantization_config={"quant_method": "fp8"}))
broken("qwen3_moe", "q3_act", config=lambda c: c.update(hidden_act="gelu"))
broken("qwen3_moe", "q3_missing", tensors=lambda t: t.pop("model.layers.1.mlp.experts.6.up_proj.weight"))
def swap(t):
    t["model.layers.1.mlp.experts.2.down_proj.weight"] = t["model.layers.1.mlp.experts.2.gate_proj.weight"]
broken("qwen3_moe", "q3_shape", tensors=swap)
def to_f32(t):
    n = "model.layers.1.mlp.shared_expert_gate.weight"
    t[n] = bf16_values(t[n]).astype(np.float32)
broken("qwen2_moe", "q2_dtype", tensors=to_f32)
broken("mixtral", "mx_noentry", index=lambda m: m.pop("model.layers.1.block_sparse_moe.experts.7.w2.weight"))
PY
PYTHONPATH="$PYDIR" "$PY" make.py || bad "make.py: writing the checkpoints"

MOE_TRACE="$PYDIR/../cli/lib/moe_trace.py" # PYDIR: tests/python, absolute (model_test_env)
# trace_ok TRACE RANKS TOKENS CALLS WHAT: lib/moe_trace.py --layer on a trace of the tiny checkpoints
# (8 experts, top-2; CALLS 2 for qwen2_moe's shared-expert call).
trace_ok() {
    if python3 "$MOE_TRACE" --layer "$1" "$2" 8 "$3" 2 "$4" >trace.log 2>&1; then ok; else bad "$5: $(head -5 trace.log)"; fi
}
declare -A TOKENS=([mixtral]=16 [qwen3_moe]=13 [qwen2_moe]=11) CALLS=([mixtral]=1 [qwen3_moe]=1 [qwen2_moe]=2)
refs=() # model layer x out, checked against the reference by one Python run at the end
for fam in mixtral qwen3_moe qwen2_moe; do
    for r in 1 2; do
        expect 0 "$fam on $r ranks" layer --model "$fam" --layer 1 "x_$fam.st" -o "$fam.$r.st" --ranks "$r" \
            --trace "$fam.$r.json"
        stderr_empty
        trace_ok "$fam.$r.json" "$r" "${TOKENS[$fam]}" "${CALLS[$fam]}" "$fam on $r ranks: trace"
    done
    refs+=("$fam" 1 "x_$fam.st" "$fam.1.st")
    if cmp -s "$fam.1.st" "$fam.2.st"; then ok; else bad "$fam: output depends on the rank count"; fi
    mpi_same "$fam" "x_$fam.st" "$fam.1.st" "$fam.mpi.st" "$fam" --trace "$fam.mpi.json"
    if cli_has_mpi; then trace_ok "$fam.mpi.json" 2 "${TOKENS[$fam]}" "${CALLS[$fam]}" "$fam on MPI: trace"; fi
done
# A corrupted trace: one batch's expert rows (all three stages) one more than the dispatches routed.
python3 - qwen3_moe.2.json bad_rows.json <<'PY'
import json, sys
t = json.load(open(sys.argv[1]))
key = next((e["tid"], e["args"]["batch"]) for e in t["traceEvents"] if e.get("name") == "gemm1" and "batch" in e.get("args", {}))
for e in t["traceEvents"]:
    if e.get("cat") == "routed" and (e["tid"], e["args"].get("batch")) == key:
        e["args"]["rows"][0] += 1
json.dump(t, open(sys.argv[2], "w"))
PY
if python3 "$MOE_TRACE" --layer bad_rows.json 2 8 13 2 1 >trace.log 2>&1; then
    bad "a trace with changed expert rows passes the check"
elif grep -q "rows computed per expert" trace.log; then ok; else bad "changed expert rows: $(head -3 trace.log)"; fi
# run --model --trace: the same slices per timed forward, after the load and a warm-up (lib/moe_trace.py
# --model: TOKENS per rank); a trace missing one rank's forward fails that check.
run_trace_ok() {
    if python3 "$MOE_TRACE" --model "$1" "$2" 8 5 2 2 2 >trace.log 2>&1; then ok; else bad "$3: $(head -5 trace.log)"; fi
}
for r in 1 2 4; do
    expect 0 "run --model on $r ranks" run --model qwen2_moe --tokens 5 --ranks "$r" --iterations 2 --trace "run.$r.json"
    stdout_has "trace: run.$r.json" "run --model on $r ranks"
    run_trace_ok "run.$r.json" "$r" "run --model on $r ranks: trace"
done
if cli_has_mpi; then
    if timeout 120 mpirun --allow-run-as-root --oversubscribe -np 2 "$MEGAMOE" run --model qwen2_moe --tokens 5 \
        --iterations 2 --backend mpi --trace run.mpi.json >"$WORK/mpi.log" 2>&1; then ok; else
        bad "run --model --trace under mpirun: $(tail -3 "$WORK/mpi.log")"
    fi
    run_trace_ok run.mpi.json 2 "run --model on MPI: trace"
fi
python3 - run.2.json run_bad.json <<'PY'
import json, sys
t = json.load(open(sys.argv[1]))
t["traceEvents"] = [e for e in t["traceEvents"] if not (e.get("name") == "forward" and e["tid"] == 1
                                                        and e["args"].get("iteration") == 1)]
json.dump(t, open(sys.argv[2], "w"))
PY
if python3 "$MOE_TRACE" --model run_bad.json 2 8 5 2 2 2 >trace.log 2>&1; then
    bad "a run --model trace without one forward passes the check"
elif grep -q "rank 1: phases" trace.log; then ok; else bad "missing forward: $(head -3 trace.log)"; fi
expect 0 "qwen3_moe on 4 ranks" layer --model qwen3_moe --layer 1 x_qwen3_moe.st -o qwen3_moe.4.st --ranks 4
if cmp -s qwen3_moe.1.st qwen3_moe.4.st; then ok; else bad "qwen3_moe: 4 ranks differ from 1"; fi
# Layer 0 of the sharded mixtral lives in the first shard only, at odd offsets (copied, not mapped):
# 5 tokens on 4 ranks leave rank 3 without tokens; it runs without the second shard.
expect 0 "mixtral layer 0" layer --model mixtral --layer 0 x_mixtral0.st -o mixtral0.st --ranks 4 --trace m0.json
trace_ok m0.json 4 5 1 "mixtral layer 0 on 4 ranks: trace"
refs+=(mixtral 0 x_mixtral0.st mixtral0.st)
expect 0 "no tokens" layer --model qwen2_moe --layer 1 x_empty.st -o empty.st --ranks 2
refs+=(qwen2_moe 1 x_empty.st empty.st)
if "$PY" "$PYDIR/hf_moe_reference.py" check "${refs[@]}" >ref.log 2>&1; then ok; else bad "vs reference: $(cat ref.log)"; fi
cp -r mixtral mixtral_noshard && rm mixtral_noshard/model-00002-of-00002.safetensors
expect 0 "layer 0 without the unused shard" layer --model mixtral_noshard --layer 0 x_mixtral0.st -o m0.st

rejected mixtral_noshard 1 x_mixtral.st 'shard "model-00002-of-00002.safetensors" is missing' "missing shard"
cp -r mixtral mixtral_trunc && truncate -s -100 mixtral_trunc/model-00002-of-00002.safetensors
rejected mixtral_trunc 1 x_mixtral.st 'is beyond the end of the' "truncated shard"
rejected q3_nokey 1 x_qwen3_moe.st 'config.json: key "num_experts_per_tok" is missing' "missing config key"
rejected q2_nokey 1 x_qwen2_moe.st 'key "shared_expert_intermediate_size" is missing' "missing shared size"
rejected qwen3_moe 0 x_qwen3_moe.st 'layer 0 is a dense MLP layer, not MoE (config.json mlp_only_layers' "dense layer"
rejected qwen2_moe 0 x_qwen2_moe.st 'config.json decoder_sparse_step = 2' "dense layer by step"
rejected qwen2_moe 2 x_qwen2_moe.st 'layer 2 is outside [0, 2) (config.json num_hidden_layers)' "layer out of range"
rejected qwen2_moe 1 x_qwen2_moe.st '8 experts (config.json num_experts) do not split evenly over 3 ranks' \
    "experts over ranks" --ranks 3
rejected q3_family 1 x_qwen3_moe.st 'model_type "dbrx" is not a supported family' "unknown family"
rejected q3_quant 1 x_qwen3_moe.st 'quantization_config: quant_method "fp8" is not supported' "unsupported quantization"
rejected q3_act 1 x_qwen3_moe.st '"hidden_act" must be "silu"' "other activation"
rejected q3_missing 1 x_qwen3_moe.st 'tensor "model.layers.1.mlp.experts.6.up_proj.weight" is missing' "missing tensor" --ranks 2
rejected q3_shape 1 x_qwen3_moe.st \
    'tensor "model.layers.1.mlp.experts.2.down_proj.weight" has shape [32, 64], must be [64, 32] (hidden_size, moe_intermediate_size)' \
    "wrong shape"
rejected q2_dtype 1 x_qwen2_moe.st 'tensor "model.layers.1.mlp.shared_expert_gate.weight" has dtype F32, must be BF16' \
    "wrong dtype"
rejected mx_noentry 1 x_mixtral.st 'experts.7.w2.weight" is missing (model.safetensors.index.json has no entry)' \
    "missing index entry" --ranks 2
rejected qwen3_moe 1 nox.st 'tensor "x" is missing' "input without x"
rejected qwen3_moe 1 widex.st 'tensor "x" must be (T, 64) BF16 or F32' "input of another width"
expect 2 "no --model" layer --layer 1 x_qwen3_moe.st -o out.st
stderr_is_one_line "missing --model DIR"

cli_finish model_layer
