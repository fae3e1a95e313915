#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# tests/cli/run_mega_moe.sh: `megamoe run` (the MegaMoE layer) on shrunken shapes: every scenario exits 0
# with a table row whose sample check is within the scenario tolerance, the presets' activations and
# shared experts run, --trace writes valid JSON with one track per rank, setup and check, the stage slices
# inside the calls, expert ids and rows, and flows from each dispatch to the experts its rows reach (checked
# by lib/moe_trace.py), bad options exit 2 with one line, and an operator error is reported cleanly.
# Usage: bash run_mega_moe.sh <path-to-megamoe> <source-dir>
set -u
source "$(dirname "${BASH_SOURCE[0]}")/lib/common.bash"
cli_require_python run_mega_moe

# check_rows SCENARIO...: each scenario has one table row; its error columns are numbers, the max error
# is below 0.1 of rms(y_ref) and 100% of the checked outputs are within the tolerance.
check_rows() {
    for sc in "$@"; do
        if python3 - "$WORK/out" "$sc" <<'PY'; then ok; else bad "row of $sc: $(grep "^$sc " "$WORK/out")"; fi
import sys
rows = [l.split() for l in open(sys.argv[1]) if l.split() and l.split()[0] == sys.argv[2]]
assert len(rows) == 1, rows
r = rows[0]
assert len(r) == 15, r  # scenario tokens 6 stages total tokens/s GFLOP/s maxerr <=1ulp intol vs-a16w16
assert int(r[1]) > 0
times = [float(v) for v in r[2:12]]
assert all(t >= 0 for t in times) and times[8] > 0, times  # total ms, tokens/s > 0
maxerr = float(r[11])
assert 0 <= maxerr < 0.1, maxerr
assert r[12].endswith("%") and float(r[12][:-1]) >= 90.0, r[12]
assert r[13] == "100.0%", r[13]
# vs a16w16: the relative RMS cost of quantization, once A16W16 ran before in the same command
assert r[14] == "-" if r[0] == "a16w16" else (r[14] == "-" or 0 < float(r[14]) < 0.5), r[14]
PY
    done
}

SMALL=(--hidden 256 --intermediate 128 --experts 16 --tokens 12 --iterations 2 --check-tokens 3)
ALL="a16w16 a8w8-int a8w4-int a8w8-fp-e4m3 a8w8-fp-e5m2 a8w4-fp a4w4-fp a16w8-fp8 a16w4-mx a16w4-int"

# Every scenario, one run (4 ranks as threads, skewed routing).
expect 0 "all scenarios" -- run "${SMALL[@]}" --scenario all
stdout_has "MegaMoE layer of the shape of Qwen3-30B-A3B (preset qwen3-30b-a3b), H and I overridden"
stdout_has "maxerr/rms"
# shellcheck disable=SC2086
check_rows $ALL
# with all scenarios in one command, every quantized one is compared with A16W16 on the same tokens
if awk '$1 ~ /^a[0-9]+w/ && $1 != "a16w16" && NF == 15 { n++; if ($15 == "-") bad = 1 } END { exit !(n == 9 && !bad) }' "$WORK/out"; then ok; else bad "vs a16w16 column"; fi

# Presets: gpt-oss (swigluoai with clamp 7.0, alpha, beta; MXFP4 experts), deepseek (a shared expert),
# mixtral (top-2), on their default scenarios, shrunk; and 3 ranks with BS differing routes.
expect 0 "gpt-oss preset" -- run --preset gpt-oss-20b "${SMALL[@]}"
stdout_has "swigluoai [7, 1.702, 1]"
check_rows a8w4-fp
expect 0 "deepseek preset" -- run --preset deepseek-v3 "${SMALL[@]}"
stdout_has "1 shared"
check_rows a8w8-fp-e4m3
if grep -q "^a8w8-fp-e4m3 " "$WORK/out" && awk '$1 == "a8w8-fp-e4m3" { exit !($7 > 0) }' "$WORK/out"; then ok; else bad "deepseek: shared stage time not > 0"; fi
expect 0 "mixtral preset, 3 ranks" -- run --preset mixtral-8x7b --hidden 128 --intermediate 64 --experts 6 --ranks 3 --tokens 5 --iterations 1
check_rows a16w16

# Combine knobs: a quantized combine (MX E4M3 rows) and the rank-level / domain-level partial sums of
# combine_comm_mode 1 / 2 with weights applied after the activation, each checked against the float64
# reference; a mode the topology does not allow is the library's invalid-argument error (exit 2, one line).
expect 0 "combine quant e4m3" -- run "${SMALL[@]}" --combine-quant-mode 4
stdout_has "combine: quantization MX E4M3, comm mode 0"
check_rows a16w16
expect 0 "combine comm 1, weights after the activation" -- run "${SMALL[@]}" --combine-comm-mode 1 --topk-weights-type 1
stdout_has "comm mode 1, top-k weights type 1"
check_rows a16w16
expect 0 "combine comm 2, domains of 2" -- run "${SMALL[@]}" --combine-comm-mode 2 --rank-num-per-server 2 --scenario a8w8-int
stdout_has "comm mode 2 (layered)"
check_rows a8w8-int
expect_usage_error "combine comm 2 on a flat topology" "combine_comm_mode = 2 needs a layered topology" -- run "${SMALL[@]}" --combine-comm-mode 2
expect_usage_error "bad --combine-quant-mode" "--combine-quant" -- run "${SMALL[@]}" --combine-quant-mode 2

# --no-check prints the row without error columns.
expect 0 "no check" -- run "${SMALL[@]}" --no-check
if awk '$1 == "a16w16" { exit !($12 == "-" && $14 == "-") }' "$WORK/out"; then ok; else bad "--no-check row: $(grep '^a16w16' "$WORK/out")"; fi

# The trace: valid JSON whose tracks, setup / warm-up / call / check slices, expert batches (ids and rows
# against the dispatches' routing) and dispatch -> expert flows tests/cli/lib/moe_trace.py checks from
# the shape alone; then 6 ranks, another scenario, combine mode 1 and no check (no check slice).
MOE_TRACE="$(dirname "${BASH_SOURCE[0]}")/lib/moe_trace.py"
expect 0 "trace" -- run "${SMALL[@]}" --experts 12 --ranks 3 --trace "$WORK/trace.json"
stdout_has "trace: $WORK/trace.json"
if python3 -m json.tool "$WORK/trace.json" >/dev/null; then ok; else bad "trace is not valid JSON"; fi
# shape: ranks experts tokens topk iterations checked scenario
if python3 "$MOE_TRACE" "$WORK/trace.json" 3 12 12 8 2 1 a16w16; then ok; else bad "trace of 3 ranks"; fi
expect 0 "trace, 6 ranks, combine mode 1, no check" -- run "${SMALL[@]}" --experts 24 --ranks 6 --scenario a8w8-int \
    --combine-comm-mode 1 --no-check --trace "$WORK/trace6.json"
if python3 "$MOE_TRACE" "$WORK/trace6.json" 6 24 12 8 2 0 a8w8-int; then ok; else bad "trace of 6 ranks"; fi

# Bad options: status 2, one line naming the problem.
expect_usage_error "bad preset" "--preset 'llama' is not a preset" -- run --preset llama
expect_usage_error "bad scenario" "--scenario 'a2w2' is not a scenario" -- run --scenario a2w2
expect_usage_error "bad ranks" "--ranks 0 is outside" -- run --ranks 0
expect_usage_error "experts not a multiple of ranks" "--experts 6 is not a multiple of the 4 ranks" -- run --experts 6 --ranks 4
expect_usage_error "experts below top-k" "below the preset's top-k 8" -- run --experts 4 --ranks 4
expect_usage_error "bad backend" "--backend 'gpu' is not a backend" -- run --backend gpu
expect_usage_error "bad tokens" "--tokens 'many' is not an integer" -- run --tokens many
expect_usage_error "unknown option" "unknown option '--warp'" -- run --warp 9
expect_usage_error "positional" "unexpected argument 'extra'" -- run extra
expect_usage_error "more weights than memory" "need about" -- run --preset deepseek-v3 --experts 4096
expect_usage_error "unknown op" "--op 'teleport' is not an operator" -- run --op teleport
expect_usage_error "op without value" "'--op' needs a value" -- run --op

# An operator error (MX needs H a multiple of 32) is reported by the operator, cleanly: status 2, a
# "not run" row naming the rule, one stderr line.
expect 2 "operator rejects the shape" -- run --hidden 48 --intermediate 32 --experts 16 --tokens 4 --scenario a8w8-fp-e4m3
stdout_has "a8w8-fp-e4m3    not run:"
# The message names the rank once (the operator's agreed message already carries "rank 0: ").
stdout_has "not run: rank 0: hidden = 48 must be a multiple of 32 with MX quantization"
stderr_is_one_line "a8w8-fp-e4m3: rank 0: hidden = 48 must be a multiple of 32 with MX quantization"

# Help and the other operator.
expect 0 "help" -- run --help
stdout_has "usage: megamoe run [--op mega-moe]"
stdout_has "re-routing"
expect 0 "re-routing demo" -- run --op re-routing --tokens 64 --hidden 32 --iterations 1
stdout_has "re-routing demo"

# The memory guard counts the tokens: the symmetric buffers grow with them (the weights alone fit), so
# a million tokens per rank is refused before anything is allocated, naming the buffers and --tokens.
expect_usage_error "too many tokens for memory" "symmetric buffers" -- run --tokens 1048576
if grep -q -- "load fewer with --experts or --tokens" "$WORK/err"; then ok; else bad "memory guard: $(cat "$WORK/err")"; fi

cli_finish run_mega_moe
