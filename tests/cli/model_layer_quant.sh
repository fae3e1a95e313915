#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# tests/cli/model_layer_quant.sh: `megamoe layer` on tiny DeepSeek-V3 and gpt-oss checkpoints written by
# tests/python/hf_quant_tiny.py (real names, dtypes and layouts: FP8 E4M3 experts with F32 block scales
# of a 16 x 48 block, sharded, a dense first layer, 2 shared experts; the same family in BF16; MXFP4
# experts with interleaved gate/up, a router bias, a clamped SwiGLU): routing identical to and y within
# 1/64 x max|y| of the float64 reference of tests/python/hf_moe_reference.py, the same bytes on 1 and 2
# thread ranks and 2 MPI processes; broken checkpoints exit 2 with one line naming the tensor or key.
# The quantized experts run dequantized on load (--weights bf16) and natively (MegaMoE's A16 weight-only
# scenarios, gpt_oss with non-zero biases): the same bytes. The native 2-rank run's --trace passes
# lib/moe_trace.py --layer (one MegaMoE call per rank; DeepSeek's shared experts are its `shared` stage).
# Usage: bash model_layer_quant.sh <path-to-megamoe> <source-dir>
set -u
source "$(dirname "${BASH_SOURCE[0]}")/lib/common.bash"
cli_mpi_env
source "$(dirname "${BASH_SOURCE[0]}")/lib/model_common.bash"
cat >make.py <<'PY'
import numpy as np
from hf_tiny import *

for fam, seed in (("deepseek_v3", 3), ("deepseek_v3_bf16", 4), ("gpt_oss_nobias", 5), ("gpt_oss", 9)):
    write_checkpoint(fam, fam, seed)
write_input("gpt_oss", 1, "x_gpt_oss.st", 14, "bf16", 10)
write_input("deepseek_v3", 1, "x_deepseek_v3.st", 13, "bf16", 6)
write_input("deepseek_v3_bf16", 1, "x_deepseek_v3_bf16.st", 11, "f32", 7)
write_input("gpt_oss_nobias", 1, "x_gpt_oss_nobias.st", 12, "bf16", 8)

def broken(src, dst, config=None, tensors=None, shard="model.safetensors"):
    copy_checkpoint(src, dst, config)
    if tensors:
        path = dst + "/" + shard
        t = {n: (a, d) for n, (d, a) in read_safetensors(path).items()}
        tensors(t)
        write_safetensors(path, [(n, a, d) for n, (a, d) in t.items()])

ds2 = "model-00002-of-00002.safetensors"
broken("deepseek_v3", "ds_noscale", shard=ds2,
       tensors=lambda t: t.pop("model.layers.1.mlp.experts.3.down_proj.weight_scale_inv"))
broken("deepseek_v3", "ds_block", config=lambda c: c["quantization_config"].update(weight_block_size=[32, 48]))
def to_bf16(t):
    n = "model.layers.1.mlp.experts.0.up_proj.weight"
    t[n] = (bf16_bits(np.zeros(t[n][0].shape)), "BF16")
broken("deepseek_v3", "ds_dtype", shard=ds2, tensors=to_bf16)
broken("deepseek_v3_bf16", "ds_scoring", config=lambda c: c.update(scoring_func="softmax"))
broken("deepseek_v3_bf16", "ds_nogroup", config=lambda c: c.update(n_group=3))
def to_i8(t):
    n = "model.layers.1.mlp.experts.down_proj_blocks"
    t[n] = (t[n][0], "I8")
broken("gpt_oss_nobias", "oss_dtype", tensors=to_i8)
broken("gpt_oss_nobias", "oss_nobias", tensors=lambda t: t.pop("model.layers.1.mlp.router.bias"))
broken("gpt_oss_nobias", "oss_bf16", config=lambda c: c.pop("quantization_config"))
PY
PYTHONPATH="$PYDIR" "$PY" make.py || bad "make.py: writing the checkpoints"

# The native runs (FP8 block-scaled, MXFP4 with biases) must give the bytes of the dequantized run.
refs=()
fams="deepseek_v3 deepseek_v3_bf16 gpt_oss_nobias gpt_oss"
declare -A TOKENS=([deepseek_v3]=13 [deepseek_v3_bf16]=11 [gpt_oss_nobias]=12 [gpt_oss]=14)
for fam in $fams; do
    for r in 1 2; do
        expect 0 "$fam on $r ranks" layer --model "$fam" --layer 1 "x_$fam.st" -o "$fam.$r.st" --ranks "$r" \
            --weights bf16
        stderr_empty
    done
    refs+=("$fam" 1 "x_$fam.st" "$fam.1.st")
    if cmp -s "$fam.1.st" "$fam.2.st"; then ok; else bad "$fam: output depends on the rank count"; fi
    expect 0 "$fam native" layer --model "$fam" --layer 1 "x_$fam.st" -o "$fam.native.st" --ranks 2 \
        --trace "$fam.json"
    read -r e k < <("$PY" -c 'import json, sys; c = json.load(open(sys.argv[1]))
print(c.get("n_routed_experts") or c.get("num_local_experts") or c["num_experts"], c["num_experts_per_tok"])' "$fam/config.json")
    if python3 "$PYDIR/../cli/lib/moe_trace.py" --layer "$fam.json" 2 "$e" "${TOKENS[$fam]}" "$k" 1 >trace.log 2>&1; then ok
    else bad "$fam native: trace: $(head -5 trace.log)"; fi
    if cmp -s "$fam.1.st" "$fam.native.st"; then ok; else bad "$fam: native and dequantized outputs differ"; fi
    mpi_same "$fam" "x_$fam.st" "$fam.1.st" "$fam.mpi.st" "$fam" --weights bf16
done
if "$PY" "$PYDIR/hf_moe_reference.py" check "${refs[@]}" >ref.log 2>&1; then ok; else bad "vs reference: $(cat ref.log)"; fi
grep -q "routing identical=True" ref.log && ok || bad "reference log: $(cat ref.log)"

rej() { rejected "$@" --weights bf16; } # the quantized checkpoints load dequantized
X=x_deepseek_v3.st
rej deepseek_v3 0 $X 'layer 0 is a dense MLP layer, not MoE (config.json first_k_dense_replace = 1)' "dense layer"
rej ds_noscale 1 $X 'tensor "model.layers.1.mlp.experts.3.down_proj.weight_scale_inv" is missing from "model-00002-of-00002.safetensors"' \
    "missing scale tensor"
rej ds_block 1 $X 'tensor "model.layers.1.mlp.experts.0.gate_proj.weight_scale_inv" has shape [2, 2], must be [1, 2]' \
    "wrong block shape"
rej ds_dtype 1 $X 'tensor "model.layers.1.mlp.experts.0.up_proj.weight" has dtype BF16, must be F8_E4M3' \
    "BF16 weight in an FP8 checkpoint"
rej ds_scoring 1 x_deepseek_v3_bf16.st '"scoring_func" must be "sigmoid"' "other scoring function"
rej ds_nogroup 1 x_deepseek_v3_bf16.st 'n_group = 3 must divide n_routed_experts = 8' "groups"
rej oss_dtype 1 x_gpt_oss_nobias.st 'tensor "model.layers.1.mlp.experts.down_proj_blocks" has dtype I8, must be U8' \
    "wrong dtype"
rej oss_nobias 1 x_gpt_oss_nobias.st 'tensor "model.layers.1.mlp.router.bias" is missing' "missing router bias"
rej oss_bf16 1 x_gpt_oss_nobias.st 'quant_method must be "mxfp4"' "gpt_oss without quantization"
expect 2 "bad --weights" layer --model deepseek_v3 --layer 1 $X -o out.st --weights fp8
stderr_is_one_line "--weights must be native or bf16"

cli_finish model_layer_quant
