#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# tests/cli/case_mega_moe_ext.sh: the case-file op mega_moe_ext (docs/weight_formats.md) on cases derived
# from a `case-gen mega-moe` A16W16 case: weight1 stored gate/up interleaved with weight1_interleave = 1
# gives y bit for bit equal to the seed case; a bias2 of ones moves every y element by the sum of the
# row's top-k weights (within BF16 rounding); op mega_moe refuses the bias, naming op mega_moe_ext.
# Usage: bash case_mega_moe_ext.sh <path-to-megamoe> <source-dir>
set -u
source "$(dirname "${BASH_SOURCE[0]}")/lib/common.bash"
cli_require_python case_mega_moe_ext
LIB="$(cd "$(dirname "${BASH_SOURCE[0]}")/lib" && pwd)"

"$MEGAMOE" case-gen mega-moe -o "$WORK/base.st" --ranks 2 --seed 11 --shared-experts 1 || bad "case-gen"
"$MEGAMOE" case "$WORK/base.st" -o "$WORK/base.out.st" && ok || bad "seed case"

python3 - "$WORK" "$LIB" <<'PY' || bad "deriving the mega_moe_ext cases"
import struct, sys
sys.path.insert(0, sys.argv[2])
from safetensors_io import load, save
work = sys.argv[1]
meta, t = load(work + "/base.st")
assert meta["op"] == "mega_moe" and meta.get("transpose_weight1", "0") in ("0", "false")

def interleave(name):  # (count, H, 2I) BF16: stored column 2i = gate i, 2i + 1 = up i
    dtype, shape, raw = t[name]
    count, H, N = shape
    I = N // 2
    src = memoryview(raw).cast("H")
    out = bytearray(len(raw))
    dst = memoryview(out).cast("H")
    for row in range(count * H):
        base = row * N
        for i in range(I):
            dst[base + 2 * i] = src[base + i]
            dst[base + 2 * i + 1] = src[base + I + i]
    t[name] = (dtype, shape, out)

il_meta = dict(meta, op="mega_moe_ext", weight1_interleave="1")
saved = dict(t)
for name in list(t):
    if name.endswith(".weight1") or name.endswith(".shared_weight1"):
        interleave(name)
save(work + "/interleaved.st", il_meta, t)

t = dict(saved)
for name in list(t):
    if name.endswith(".weight2"):
        count, H = t[name][1][0], t[name][1][2]
        t[name.replace("weight2", "bias2")] = ("F32", [count, H], bytearray(struct.pack("<f", 1.0) * (count * H)))
save(work + "/bias.st", dict(meta, op="mega_moe_ext"), t)
save(work + "/bias_seed.st", meta, t)
PY

"$MEGAMOE" case "$WORK/interleaved.st" -o "$WORK/interleaved.out.st" && ok || bad "interleaved case"
"$MEGAMOE" case "$WORK/bias.st" -o "$WORK/bias.out.st" && ok || bad "bias case"
"$MEGAMOE" case "$WORK/bias_seed.st" -o "$WORK/bias_seed.out.st" 2>"$WORK/err"; rc=$?
[ "$rc" = 2 ] && grep -q "op mega_moe_ext" "$WORK/err" && [ ! -e "$WORK/bias_seed.out.st" ] && ok ||
    bad "op mega_moe with a bf16 bias: exit $rc, stderr: $(cat "$WORK/err")"

python3 - "$WORK" "$LIB" <<'PY' && ok || bad "mega_moe_ext outputs"
import struct, sys
sys.path.insert(0, sys.argv[2])
from safetensors_io import load
work = sys.argv[1]
_, base = load(work + "/base.out.st")
_, il = load(work + "/interleaved.out.st")
_, bias = load(work + "/bias.out.st")
_, inp = load(work + "/base.st")
bf = lambda raw: [struct.unpack("<f", struct.pack("<I", v << 16))[0] for v in memoryview(raw).cast("H")]
for name in base:
    assert base[name][2] == il[name][2], f"{name}: interleaved weight1 changes the bits"
worst = 0.0
for name in base:
    if not name.endswith(".y"):
        continue
    rank = name.split(".")[0]
    y0, y1 = bf(base[name][2]), bf(bias[name][2])
    T, H = base[name][1]
    K = inp[rank + ".topk_weights"][1][1]
    w = struct.unpack(f"<{T * K}f", inp[rank + ".topk_weights"][2])
    amax = max(abs(v) for v in y1) or 1.0
    for i in range(T):
        shift = sum(w[i * K:(i + 1) * K])
        for h in range(H):
            worst = max(worst, abs(y1[i * H + h] - y0[i * H + h] - shift) / amax)
assert worst < 0.02, f"bias2 of ones: y moved by the weight sum up to {worst:.3g} (relative)"
print(f"bias2 of ones: worst deviation {worst:.3g} of max |y|")
PY

cli_finish case_mega_moe_ext
