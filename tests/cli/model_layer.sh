#!/usr/bin/env bash
# tests/cli/model_layer.sh: `megamoe layer` on tiny Hugging Face checkpoints of each family written by
# tests/python/hf_tiny.py (real names, dtypes, config keys; mixtral sharded over 2 files with an index):
# routing identical to and y within 1/64 x max|y| of the float64 reference of tests/python/hf_moe_reference.py
# on 1, 2 and 4 thread ranks (and 2 MPI processes when mpirun is there), the same bytes for every rank
# count and backend; broken checkpoints exit 2 with one line naming the file, tensor or config key.
# Usage: bash model_layer.sh <path-to-megamoe> <source-dir>
set -u
source "$(dirname "${BASH_SOURCE[0]}")/lib/common.bash"
cli_mpi_env

# The checks are numpy programs: the first python3 that has numpy (a pyenv shim may not).
PY=
for p in python3 /usr/bin/python3; do
    if command -v "$p" >/dev/null && "$p" -c "import numpy" 2>/dev/null; then PY=$p; break; fi
done
[ -n "$PY" ] || { echo "model_layer: python3 with numpy is required (apt-get install python3-numpy)"; exit 1; }
PYDIR="$(cd "$(dirname "${BASH_SOURCE[0]}")/../python" && pwd)"
gen() { "$PY" "$PYDIR/hf_tiny.py" "$@" || bad "hf_tiny.py $*"; }

MEGAMOE="$(cd "$(dirname "$MEGAMOE")" && pwd)/$(basename "$MEGAMOE")"
cd "$WORK"
gen checkpoint mixtral mixtral --seed 3
gen checkpoint qwen3_moe qwen3_moe --seed 4
gen checkpoint qwen2_moe qwen2_moe --seed 5
gen input mixtral 1 x_mixtral.st --tokens 16 --dtype bf16 --seed 6
gen input qwen3_moe 1 x_qwen3_moe.st --tokens 13 --dtype f32 --seed 7
gen input qwen2_moe 1 x_qwen2_moe.st --tokens 11 --dtype bf16 --seed 8
gen input mixtral 0 x_mixtral0.st --tokens 5 --dtype bf16 --seed 9

check() { # family layer x out
    if "$PY" "$PYDIR/hf_moe_reference.py" check "$1" "$2" "$3" "$4" >"$WORK/ref.log" 2>&1; then
        ok
    else
        bad "$1 layer $2 ($4) vs reference: $(cat "$WORK/ref.log")"
    fi
}

for fam in mixtral qwen3_moe qwen2_moe; do
    for r in 1 2 4; do
        expect 0 "$fam on $r ranks" layer --model "$fam" --layer 1 "x_$fam.st" -o "$fam.$r.st" --ranks "$r"
        stderr_empty
        check "$fam" 1 "x_$fam.st" "$fam.$r.st"
    done
    if cmp -s "$fam.1.st" "$fam.2.st" && cmp -s "$fam.1.st" "$fam.4.st"; then ok; else bad "$fam: output depends on the rank count"; fi
    if cli_has_mpi; then
        if timeout 120 mpirun --allow-run-as-root -n 2 "$MEGAMOE" layer --model "$fam" --layer 1 "x_$fam.st" \
            -o "$fam.mpi.st" --backend mpi >"$WORK/mpi.log" 2>&1; then
            if cmp -s "$fam.1.st" "$fam.mpi.st"; then ok; else bad "$fam: MPI output differs from threads"; fi
        else
            bad "$fam: mpirun failed: $(tail -3 "$WORK/mpi.log")"
        fi
    fi
done
# Layer 0 of the sharded mixtral lives in the first shard only, at odd offsets (copied, not mapped):
# 5 tokens on 4 ranks leave rank 3 without tokens; it runs without the second shard.
expect 0 "mixtral layer 0" layer --model mixtral --layer 0 x_mixtral0.st -o mixtral0.st --ranks 4
check mixtral 0 x_mixtral0.st mixtral0.st
"$PY" -c "
import sys; sys.path.insert(0, '$PYDIR')
from hf_tiny import *
import numpy as np
write_safetensors('x_empty.st', [('x', bf16_bits(np.zeros((0, 64))))])" || bad "write x_empty"
expect 0 "no tokens" layer --model qwen2_moe --layer 1 x_empty.st -o empty.st --ranks 2
check qwen2_moe 1 x_empty.st empty.st
cp -r mixtral mixtral_noshard && rm mixtral_noshard/model-00002-of-00002.safetensors
expect 0 "layer 0 without the unused shard" layer --model mixtral_noshard --layer 0 x_mixtral0.st -o m0.st

# rejected MODEL LAYER X NEEDLE WHAT [options]: exit 2, one stderr line containing NEEDLE, no output.
rejected() {
    local model=$1 layer=$2 x=$3 needle=$4 what=$5
    shift 5
    rm -f rejected.st
    expect 2 "$what" layer --model "$model" --layer "$layer" "$x" -o rejected.st "$@"
    stderr_is_one_line "$needle" "$what"
    if [ ! -e rejected.st ]; then ok; else bad "$what: wrote an output"; fi
}
# edit SRC DST PYTHON: copy a checkpoint and run PYTHON in it (c = config dict, written back; helpers of hf_tiny).
edit() {
    cp -r "$1" "$2"
    (cd "$2" && "$PY" -c "
import json, sys; sys.path.insert(0, '$PYDIR')
from hf_tiny import *
c = json.load(open('config.json'))
$3
json.dump(c, open('config.json', 'w'))") || bad "edit $2"
}
rejected mixtral_noshard 1 x_mixtral.st 'shard "model-00002-of-00002.safetensors" is missing' "missing shard"
cp -r mixtral mixtral_trunc && truncate -s -100 mixtral_trunc/model-00002-of-00002.safetensors
rejected mixtral_trunc 1 x_mixtral.st 'is beyond the end of the' "truncated shard"
edit qwen3_moe q3_nokey "del c['num_experts_per_tok']"
rejected q3_nokey 1 x_qwen3_moe.st 'config.json: key "num_experts_per_tok" is missing' "missing config key"
edit qwen2_moe q2_nokey "del c['shared_expert_intermediate_size']"
rejected q2_nokey 1 x_qwen2_moe.st 'key "shared_expert_intermediate_size" is missing' "missing shared size"
rejected qwen3_moe 0 x_qwen3_moe.st 'layer 0 is a dense MLP layer, not MoE (config.json mlp_only_layers' "dense layer"
rejected qwen2_moe 0 x_qwen2_moe.st 'config.json decoder_sparse_step = 2' "dense layer by step"
rejected qwen2_moe 2 x_qwen2_moe.st 'layer 2 is outside [0, 2) (config.json num_hidden_layers)' "layer out of range"
rejected qwen2_moe 1 x_qwen2_moe.st '8 experts (config.json num_experts) do not split evenly over 3 ranks' \
    "experts over ranks" --ranks 3
edit qwen3_moe q3_family "c['model_type'] = 'deepseek_v3'"
rejected q3_family 1 x_qwen3_moe.st 'model_type "deepseek_v3" is not a supported family' "unknown family"
edit qwen3_moe q3_quant "c['quantization_config'] = {'quant_method': 'fp8'}"
rejected q3_quant 1 x_qwen3_moe.st '"quantization_config" is present' "quantized checkpoint"
edit qwen3_moe q3_act "c['hidden_act'] = 'gelu'"
rejected q3_act 1 x_qwen3_moe.st '"hidden_act" must be "silu"' "other activation"
# tensors: one missing, one of the wrong shape, one of the wrong dtype (in the single file), one missing
# from the index of the sharded checkpoint
tensor_edit() { # src dst python-editing-dict-t
    edit "$1" "$2" "
t = {n: a for n, (d, a) in read_safetensors('model.safetensors').items()}
$3
write_safetensors('model.safetensors', list(t.items()))"
}
tensor_edit qwen3_moe q3_missing "del t['model.layers.1.mlp.experts.6.up_proj.weight']"
rejected q3_missing 1 x_qwen3_moe.st 'tensor "model.layers.1.mlp.experts.6.up_proj.weight" is missing' "missing tensor" --ranks 2
tensor_edit qwen3_moe q3_shape "t['model.layers.1.mlp.experts.2.down_proj.weight'] = t['model.layers.1.mlp.experts.2.gate_proj.weight']"
rejected q3_shape 1 x_qwen3_moe.st \
    'tensor "model.layers.1.mlp.experts.2.down_proj.weight" has shape [32, 64], must be [64, 32] (hidden_size, moe_intermediate_size)' \
    "wrong shape"
tensor_edit qwen2_moe q2_dtype "t['model.layers.1.mlp.shared_expert_gate.weight'] = bf16_values(t['model.layers.1.mlp.shared_expert_gate.weight']).astype('float32')"
rejected q2_dtype 1 x_qwen2_moe.st 'tensor "model.layers.1.mlp.shared_expert_gate.weight" has dtype F32, must be BF16' \
    "wrong dtype"
edit mixtral mx_noentry "
i = json.load(open('model.safetensors.index.json')); del i['weight_map']['model.layers.1.block_sparse_moe.experts.7.w2.weight']
json.dump(i, open('model.safetensors.index.json', 'w'))"
rejected mx_noentry 1 x_mixtral.st 'experts.7.w2.weight" is missing (model.safetensors.index.json has no entry)' \
    "missing index entry" --ranks 2
# the input: no x, or x of another hidden size
"$PY" -c "
import sys; sys.path.insert(0, '$PYDIR')
from hf_tiny import *
import numpy as np
write_safetensors('nox.st', [('h', bf16_bits(np.zeros((2, 64))))])
write_safetensors('widex.st', [('x', bf16_bits(np.zeros((2, 65))))])" || bad "write broken inputs"
rejected qwen3_moe 1 nox.st 'tensor "x" is missing' "input without x"
rejected qwen3_moe 1 widex.st 'tensor "x" must be (T, 64) BF16 or F32' "input of another width"
expect 2 "no --model" layer --layer 1 x_qwen3_moe.st -o out.st
stderr_is_one_line "missing --model DIR"

cli_finish model_layer
