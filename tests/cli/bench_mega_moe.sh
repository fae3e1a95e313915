#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# tests/cli/bench_mega_moe.sh: `megamoe bench mega-moe` runs and prints a well-formed row (the layer and its
# expert compute alone are positive times, the ratio and shares are their quotients, the row counts match
# the routing: tokens x ranks x top-k), --help lists the options, bad options exit 2 with one line.
# Timing values themselves are not checked (performance is the benchmark's output, not a test).
# Usage: bash bench_mega_moe.sh <path-to-megamoe> <source-dir>
set -u
source "$(dirname "${BASH_SOURCE[0]}")/lib/common.bash"
cli_require_python bench_mega_moe

expect 0 "help" -- bench mega-moe --help
for opt in --backend --ranks --preset --phase --prefill-tokens --decode-tokens --scenario --iterations; do
    if grep -qF -- "$opt" "$WORK/out"; then ok; else bad "--help lacks $opt"; fi
done
expect 0 "listed" -- bench
if grep -q "^  mega-moe " "$WORK/out"; then ok; else bad "bench list lacks mega-moe"; fi

expect 2 "bad phase" -- bench mega-moe --phase warmup
stderr_is_one_line "--phase"
expect 2 "bad preset" -- bench mega-moe --preset gpt-9
stderr_is_one_line "--preset"
expect 2 "bad decode sizes" -- bench mega-moe --decode-tokens 1,x
stderr_is_one_line "--decode-tokens"
expect 2 "ranks not dividing the experts" -- bench mega-moe --preset qwen3-30b-a3b --ranks 3 --phase decode
stderr_is_one_line "do not divide"

expect 2 "fewer experts than the top-k" -- bench mega-moe --preset qwen3-30b-a3b --experts 4 --ranks 2
stderr_is_one_line "fewer than the top-k 8"

# One decode size, one timed call, 2 ranks, the preset's shape made small: a row with consistent columns
# and a header naming the shape it ran.
expect 0 "decode run" -- bench mega-moe --preset qwen3-30b-a3b --phase decode --decode-tokens 2 --ranks 2 --iterations 1 \
    --hidden 256 --intermediate 128 --experts 16
if grep -qx "shape of qwen3-30b-a3b: H 256, I 128, 16 routed experts, top-8, 0 shared (the preset's, overridden)" \
    "$WORK/out"; then ok; else bad "shape line: $(grep shape "$WORK/out")"; fi
if python3 - "$WORK/out" <<'PY'; then ok; else bad "decode row: $(tail -1 "$WORK/out")"; fi
import sys
rows = [l.split() for l in open(sys.argv[1]) if l.startswith("qwen3-30b-a3b")]
assert len(rows) == 1, rows
r = rows[0]
assert r[1:4] == ["a16w16", "decode", "2"], r
assert int(r[4]) == 2 * 2 * 8, r          # tokens per rank x ranks x top-8: every row reaches an expert
layer, compute = float(r[5]), float(r[6])
assert layer > 0 and compute > 0, r
# The columns are printed to 0.001 ms, the ratio to 0.01 and the share to 0.1 %: the bounds of the
# recomputed values follow from that rounding (a small layer's times carry few digits).
rel = 0.0005 / layer + 0.0005 / compute
assert abs(float(r[7].rstrip("x")) - layer / compute) <= 0.005 + (layer / compute) * rel + 1e-9, r
assert abs(float(r[8].rstrip("%")) - 100 * (1 - compute / layer)) <= 0.05 + 100 * (compute / layer) * rel + 1e-9, r
assert 0 <= float(r[9].rstrip("%")) <= 100, r
assert abs(float(r[10]) - 2 * 2 / (layer * 1e-3)) <= 0.01 * float(r[10]) + 1, r
PY

cli_finish bench_mega_moe
