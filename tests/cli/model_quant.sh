#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# tests/cli/model_quant.sh: `megamoe layer` and `megamoe run --model` on tiny AWQ and GPTQ (v1 "gptq" and
# "gptq_v2") checkpoints of mixtral, qwen3_moe and qwen2_moe written by tests/python/hf_tiny.py with the
# real packings (AutoAWQ's nibble order, GPTQ's along-the-inputs qweight and zero - 1 of v1, F16 scales and
# routers; mixtral sharded with its first layer at odd offsets): routing identical to and y within 1/64 x
# max|y| of the float64 reference that dequantizes w = (q - z) * s (tests/python/hf_moe_reference.py), the
# same bytes on 1 and 2 thread ranks and 2 MPI processes, and for --weights native (A16W4-INT) and
# --weights bf16 (dequantized on load: the contract makes them the same bits); broken or unsupported
# quantized checkpoints exit 2 with one line naming the key or tensor.
# Usage: bash model_quant.sh <path-to-megamoe> <source-dir>
set -u
source "$(dirname "${BASH_SOURCE[0]}")/lib/common.bash"
cli_mpi_env
source "$(dirname "${BASH_SOURCE[0]}")/lib/model.bash"
model_test_env model_quant
cat >make.py <<'PY'
import numpy as np
from hf_tiny import *

# family, method, group size (qwen2_moe's shared expert has 48 inputs: groups of 16)
CASES = [("mixtral", "awq", 32), ("mixtral", "gptq", 16), ("mixtral", "gptq_v2", 32),
         ("qwen3_moe", "awq", 16), ("qwen3_moe", "gptq", 32), ("qwen3_moe", "gptq_v2", 16),
         ("qwen2_moe", "awq", 16), ("qwen2_moe", "gptq", 16), ("qwen2_moe", "gptq_v2", 16)]
for fam, m, g in CASES:
    write_checkpoint(fam, fam + "_" + m, 11, quant_checkpoint_config(m[:4], g, m))
write_checkpoint("qwen3_moe", "q3_gall", 11, quant_checkpoint_config("gptq", -1, "gptq_v2"))
write_checkpoint("qwen2_moe", "b_q2group", 11, quant_checkpoint_config("awq", 32, "awq"))
# the same seed gives every variant of a family the same router: one input per family
write_input("mixtral_awq", 1, "x_mixtral.st", 12, "bf16", 6)
write_input("qwen3_moe_awq", 1, "x_qwen3_moe.st", 9, "f32", 7)
write_input("qwen2_moe_awq", 1, "x_qwen2_moe.st", 10, "bf16", 8)
write_input("mixtral_awq", 0, "x_mixtral0.st", 5, "bf16", 9)

def broken(src, dst, config=None, tensors=None):
    copy_checkpoint(src, dst, config and (lambda c: config(c["quantization_config"])))
    if tensors:
        t = {n: a for n, (d, a) in read_safetensors(dst + "/model.safetensors").items()}
        tensors(t)
        write_safetensors(dst + "/model.safetensors", list(t.items()))

broken("qwen3_moe_awq", "b_noqzeros", tensors=lambda t: t.pop("model.layers.1.mlp.experts.5.down_proj.qzeros"))
broken("qwen3_moe_awq", "b_group", config=lambda q: q.update(group_size=32))
broken("qwen3_moe_gptq", "b_descact", config=lambda q: q.update(desc_act=True))
broken("qwen3_moe_gptq", "b_bits8", config=lambda q: q.update(bits=8))
broken("qwen3_moe_awq", "b_gemv", config=lambda q: q.update(version="gemv"))
broken("qwen3_moe_awq", "b_method", config=lambda q: q.update(quant_method="bitsandbytes"))
def permute_gidx(t):
    n = "model.layers.1.mlp.experts.0.up_proj.g_idx"
    t[n] = t[n][::-1].copy()
broken("qwen3_moe_gptq", "b_gidx", tensors=permute_gidx)
def v1_zero16(t):  # a stored nibble 15 in v1 is the zero point 16
    n = "model.layers.1.mlp.experts.3.gate_proj.qzeros"
    t[n] = (t[n].view(np.uint32) | np.uint32(0xF)).view(np.int32)
broken("qwen3_moe_gptq", "b_zero16", tensors=v1_zero16)
PY
PYTHONPATH="$PYDIR" "$PY" make.py || bad "make.py: writing the checkpoints"

refs=()
for fam in mixtral qwen3_moe qwen2_moe; do
    for m in awq gptq gptq_v2; do
        c=${fam}_$m
        for r in 1 2; do
            expect 0 "$c bf16 on $r ranks" layer --model "$c" --layer 1 "x_$fam.st" -o "$c.bf16.$r.st" --ranks "$r" \
                --weights bf16
            stderr_empty
            expect 0 "$c native on $r ranks" layer --model "$c" --layer 1 "x_$fam.st" -o "$c.native.$r.st" --ranks "$r"
            stderr_empty
        done
        refs+=("$c" 1 "x_$fam.st" "$c.native.1.st")
        for o in bf16.2 native.2 bf16.1; do
            if cmp -s "$c.native.1.st" "$c.$o.st"; then ok; else bad "$c: $o differs from native on 1 rank"; fi
        done
    done
    c=${fam}_gptq
    mpi_same "$c" "x_$fam.st" "$c.native.1.st" "$c.mpi.st" "$c"
done
# layer 0 of the sharded mixtral: its I32 tensors sit at odd offsets (copied, not mapped)
expect 0 "mixtral awq layer 0" layer --model mixtral_awq --layer 0 x_mixtral0.st -o m0.st --ranks 4
refs+=(mixtral_awq 0 x_mixtral0.st m0.st)
# GPTQ group_size -1: one group over each linear's inputs (two group sizes in a layer: dequantized)
expect 0 "gptq group_size -1" layer --model q3_gall --layer 1 x_qwen3_moe.st -o gall.st --weights bf16
refs+=(q3_gall 1 x_qwen3_moe.st gall.st)
if "$PY" "$PYDIR/hf_moe_reference.py" check "${refs[@]}" >ref.log 2>&1; then ok; else bad "vs reference: $(cat ref.log)"; fi

rejected() {
    local model=$1 x=$2 needle=$3 what=$4
    shift 4
    rm -f rejected.st
    expect 2 "$what" layer --model "$model" --layer 1 "$x" -o rejected.st "$@"
    stderr_is_one_line "$needle" "$what"
    if [ ! -e rejected.st ]; then ok; else bad "$what: wrote an output"; fi
}
rejected b_noqzeros x_qwen3_moe.st 'tensor "model.layers.1.mlp.experts.5.down_proj.qzeros" is missing' "missing qzeros" \
    --ranks 2
rejected b_group x_qwen3_moe.st \
    'tensor "model.layers.1.mlp.experts.0.gate_proj.qzeros" has shape [4, 4], must be [2, 4] (hidden_size / group_size, moe_intermediate_size / 8)' \
    "wrong group size"
rejected b_descact x_qwen3_moe.st 'gptq "desc_act" is true' "desc_act"
rejected b_bits8 x_qwen3_moe.st 'quantization_config: gptq "bits" = 8 is not supported (only 4-bit)' "8 bits"
rejected b_gemv x_qwen3_moe.st 'awq "version" = "gemv" is not supported' "AWQ gemv packing"
rejected b_method x_qwen3_moe.st 'quant_method "bitsandbytes" is not supported' "other method"
rejected b_q2group x_qwen2_moe.st \
    'model.layers.1.mlp.shared_expert.down_proj: quantization_config group_size = 32 does not divide the 48 inputs (shared_expert_intermediate_size)' \
    "group size not dividing"
rejected b_gidx x_qwen3_moe.st 'tensor "model.layers.1.mlp.experts.0.up_proj.g_idx": g_idx[0] = 1 is not 0 / group_size' \
    "act-order g_idx"
rejected b_zero16 x_qwen3_moe.st 'model.layers.1.mlp.experts.3.gate_proj: a zero point is 16' "v1 zero point 16 natively"
expect 0 "v1 zero point 16 dequantized" layer --model b_zero16 --layer 1 x_qwen3_moe.st -o z16.st --weights bf16
expect 2 "bad --weights" layer --model qwen3_moe_awq --layer 1 x_qwen3_moe.st -o z.st --weights int4
stderr_is_one_line "--weights must be native or bf16, not 'int4'"

# run --model: the default layer is the first sparse one (qwen3_moe: 1, layer 0 is in mlp_only_layers);
# every routed (token, k) pair is counted once: the counts sum to tokens x ranks x K
expect 0 "run --model json" run --model qwen3_moe_gptq --tokens 8 --iterations 2 --json
stdout_has '"family":"qwen3_moe","layer":1,"weights":"native","ranks":1,"tokens":8'
stdout_has '"expert_tokens_mean":2}'
expect 0 "run --model text" run --model qwen2_moe_awq --weights bf16 --tokens 6 --ranks 2 --iterations 2
stdout_has "ranks 2, 12 tokens (6 per rank)"
sum=$(awk '/^tokens per expert/ {on = 1; next} on {for (i = 1; i <= NF; i++) s += $i} END {print s}' "$WORK/out")
if [ "$sum" = 24 ]; then ok; else bad "run --model: tokens per expert sum to '$sum', expected 12 x 2"; fi
if cli_has_mpi; then
    if timeout 120 mpirun --allow-run-as-root -n 2 "$MEGAMOE" run --model mixtral_gptq_v2 --tokens 4 --backend mpi \
        --json >"$WORK/mpi.log" 2>&1 && grep -qF '"ranks":2,"tokens":8' "$WORK/mpi.log"; then
        ok
    else
        bad "run --model under mpirun: $(tail -3 "$WORK/mpi.log")"
    fi
fi
expect 2 "run --model dense layer" run --model qwen3_moe_awq --layer 0
stderr_is_one_line "layer 0 is a dense MLP layer"
expect 2 "run --model broken" run --model b_bits8
stderr_is_one_line '"bits" = 8 is not supported'

cli_finish model_quant
