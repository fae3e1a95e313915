#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# tests/cli/a16_weight_formats.sh: the A16 weight-only checkpoint formats (docs/weight_formats.md) through
# the CLI: `megamoe run --scenario a16w8-fp8 | a16w4-mx | a16w4-int` (plain, and with --bias,
# --weight1-interleave and odd block sizes) passes its float64 check, in the table and in --json;
# `case-gen mega-moe-ext` -> `megamoe case` for each row, with and without bias / interleave, gives y equal
# to the independent Python reference (lib/mega_moe_case.py) computed from the case file alone, and that
# reference rejects an output checked against the wrong attribute; op mega_moe (the seed's contract)
# still refuses the A16 scenarios and the block attributes with one line naming op mega_moe_ext.
# Usage: bash a16_weight_formats.sh <path-to-megamoe> <source-dir>
set -u
source "$(dirname "${BASH_SOURCE[0]}")/lib/common.bash"
cli_require_python a16_weight_formats
check_py="$(dirname "${BASH_SOURCE[0]}")/lib/mega_moe_case.py"
ROWS=(a16w8-fp8 a16w4-mx a16w4-int)
TINY=(--hidden 128 --intermediate 64 --experts 8 --ranks 2 --tokens 4 --iterations 1 --check-tokens 2)

# in_tol SCENARIO: the last run's table row of SCENARIO says 100.0% in tolerance (the column before
# "vs a16w16") and its max error is finite.
in_tol() {
    local row
    row=$(awk -v s="$1" '$1 == s' "$WORK/out")
    if [ -n "$row" ] && [ "$(echo "$row" | awk '{print $(NF-1)}')" = "100.0%" ] &&
        ! echo "$row" | grep -qi "nan\|not run"; then ok; else bad "$1: row '$row' is not 100.0% in tolerance"; fi
}

# 1. run, text table: each row alone, default blocks; then all three with bias, interleave, 16 x 32 blocks.
for sc in "${ROWS[@]}"; do
    expect 0 "run --scenario $sc" -- run "${TINY[@]}" --scenario "$sc"
    in_tol "$sc"
    stderr_empty
done
stdout_has "a16w4-int F32 block scales 1 x 128 with zero points" "default UINT4 groups"
expect 0 "run a16w8-fp8 bias interleave" -- run "${TINY[@]}" --scenario a16w8-fp8 --bias --weight1-interleave \
    --scale-block-n 16 --scale-block-k 32
in_tol a16w8-fp8
stdout_has "weights: bias1/bias2 on every expert; weight1 gate/up interleaved; a16w8-fp8 F32 block scales 16 x 32"
for sc in a16w4-mx a16w4-int; do
    expect 0 "run $sc bias interleave" -- run "${TINY[@]}" --scenario "$sc" --bias --weight1-interleave \
        --scale-block-n 3 --scale-block-k 40
    in_tol "$sc"
done
expect 2 "run --scale-block-n 0" -- run "${TINY[@]}" --scenario a16w4-int --scale-block-n 0
stderr_is_one_line "--scale-block-n"

# 2. run --json: every A16 row with its weight dtype and block sizes, all outputs within tolerance.
expect 0 "run --json" -- run "${TINY[@]}" --scenario all --json --bias --scale-block-k 64
python3 - "$WORK/out" <<'PY' && ok || bad "run --json rows of the A16 scenarios"
import json, sys
lines = [json.loads(l) for l in open(sys.argv[1])]
head = lines[0]
assert head["type"] == "header" and head["bias"] is True and head["weight1_interleave"] is False, head
rows = {r["scenario"]: r for r in lines[1:] if r["type"] == "row"}
want = {"a16w8-fp8": ("fp8_e4m3fn", 128, 64), "a16w4-mx": ("fp4_e2m1", None, None), "a16w4-int": ("uint4", 1, 64),
        "a16w16": ("bf16", None, None)}
for name, (dtype, bn, bk) in want.items():
    r = rows[name]
    assert "error" not in r, r
    assert (r["weight_dtype"], r["scale_block_n"], r["scale_block_k"]) == (dtype, bn, bk), r
    assert r["in_tolerance_pct"] == 100.0 and 0 <= r["maxerr_over_rms"] < 0.05, r
    assert name == "a16w16" or 0 < r["vs_a16w16"] < 0.5, r  # quantized weights differ from BF16's, a little
assert len(rows) == 10, sorted(rows)
PY

# --weight1-interleave stores the same master values in another order (with their scales and biases): where no
# quantization block mixes gate and up channels (per-channel and MX scales, blocks of one row), every row's
# outputs, hence its error and its difference from A16W16, are the same as without it.
for il in plain il; do
    flag=() && [ "$il" = il ] && flag=(--weight1-interleave)
    expect 0 "run --json $il" -- run "${TINY[@]}" --scenario all --json --bias --scale-block-n 1 "${flag[@]}"
    cp "$WORK/out" "$WORK/rows_$il.json"
done
python3 - "$WORK/rows_plain.json" "$WORK/rows_il.json" <<'PY' && ok || bad "--weight1-interleave changes the results"
import json, sys
keep = ("scenario", "maxerr_over_rms", "within_ulp_pct", "in_tolerance_pct", "vs_a16w16")
rows = [[{k: o[k] for k in keep} for o in map(json.loads, open(f)) if o["type"] == "row"] for f in sys.argv[1:]]
assert len(rows[0]) == 10 and rows[0] == rows[1], rows
PY

# 3. case-gen mega-moe-ext -> case -> the independent reference, for each row with and without bias and
#    interleave (transposed weights, a shared expert, a mask and odd blocks in the second set).
n=0
round_trip() { # name case-gen-options...
    local name=$1
    shift
    n=$((n + 1))
    "$MEGAMOE" case-gen mega-moe-ext -o "$WORK/$name.st" --seed "$n" "$@" || { bad "case-gen $name"; return; }
    "$MEGAMOE" case "$WORK/$name.st" -o "$WORK/$name.out.st" || { bad "case $name"; return; }
    if python3 "$check_py" reference "$WORK/$name.st" "$WORK/$name.out.st"; then ok; else bad "$name: y differs from the reference"; fi
}
for sc in "${ROWS[@]}"; do
    blocks=(--scale-block-n 16 --scale-block-k 32) odd=(--scale-block-n 3 --scale-block-k 24)
    [ "$sc" = a16w4-mx ] && blocks=() odd=() # MX scales: blocks of 32 along K, fixed
    round_trip "$sc" --scenario "$sc" "${blocks[@]}"
    round_trip "$sc-bias-il" --scenario "$sc" --bias --weight1-interleave --transpose --shared-experts 1 --mask \
        "${odd[@]}"
done
round_trip a16w16-bias-il --scenario a16w16 --bias --weight1-interleave

# The same options give the same bytes.
for f in 1 2; do
    "$MEGAMOE" case-gen mega-moe-ext -o "$WORK/again$f.st" --scenario a16w4-int --bias --weight1-interleave \
        --shared-experts 1 --scale-block-n 3 --scale-block-k 24 || bad "case-gen again$f"
done
cmp -s "$WORK/again1.st" "$WORK/again2.st" && ok || bad "case-gen mega-moe-ext is not deterministic"

# The reference is not blind: the interleaved case's output checked as if weight1 were plain must fail.
python3 - "$WORK" <<'PY' || bad "deriving the plain-order copy"
import sys
from safetensors_io import load, save
meta, t = load(sys.argv[1] + "/a16w8-fp8-bias-il.st")
save(sys.argv[1] + "/not_il.st", dict(meta, weight1_interleave="0"), t)
PY
if python3 "$check_py" reference "$WORK/not_il.st" "$WORK/a16w8-fp8-bias-il.out.st" >/dev/null; then
    bad "the reference accepted an interleaved output for a plain weight1"
else ok; fi

# 4. Op mega_moe keeps the seed's contract: an A16 case relabelled mega_moe is refused, naming op
#    mega_moe_ext; with the ext attributes left in, the unknown key is named; case-gen mega-moe refuses.
for sc in "${ROWS[@]}"; do
    python3 - "$WORK/$sc.st" "$WORK/seed_$sc.st" "$WORK/seed_keys_$sc.st" <<'PY' || bad "relabelling $sc"
import sys
from safetensors_io import load, save
meta, t = load(sys.argv[1])
ext_keys = ("scale_block_n", "scale_block_k", "weight1_interleave")
save(sys.argv[3], dict(meta, op="mega_moe"), {k: v for k, v in t.items() if "weight_zeros" not in k})
meta = {k: v for k, v in meta.items() if k not in ext_keys}
save(sys.argv[2], dict(meta, op="mega_moe"), {k: v for k, v in t.items() if "weight_zeros" not in k})
PY
    case_rejected "op mega_moe, $sc" "$WORK/seed_$sc.st" "A16 weight-only scenario.*use op mega_moe_ext"
    case_rejected "op mega_moe, $sc with the ext attributes" "$WORK/seed_keys_$sc.st" \
        'metadata key "[a-z_1]*" is not an attribute of mega_moe'
done
expect 2 "case-gen mega-moe --scenario a16w4-mx" -- case-gen mega-moe -o "$WORK/no.st" --scenario a16w4-mx
stderr_is_one_line "case-gen mega-moe-ext writes it (op mega_moe_ext)"
expect 2 "case-gen mega-moe --scale-block-k" -- case-gen mega-moe -o "$WORK/no.st" --scale-block-k 32
stderr_is_one_line "--scale-block-k is an option of case-gen mega-moe-ext"
[ ! -e "$WORK/no.st" ] && ok || bad "a refused case-gen wrote its output"

cli_finish a16_weight_formats
