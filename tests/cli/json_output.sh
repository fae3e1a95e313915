#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# tests/cli/json_output.sh: `--json` (JSON Lines, schema in docs/cli.md): every stdout line parses as one
# JSON object, the first is the header with the run's facts, then one row per scenario with the table's
# columns as numbers in their ranges (times > 0, errors >= 0, percentages in [0, 100]), null where the
# table prints "-"; nothing else on stdout (no banner, table, notes or trace line), nothing on stderr.
# Usage: bash json_output.sh <path-to-megamoe> <source-dir>
set -u
source "$(dirname "${BASH_SOURCE[0]}")/lib/common.bash"
cli_require_python json_output

# check_json SCENARIOS CHECKED: the last expect's stdout is a header and one row per scenario (a
# space-separated list, in order); CHECKED is 1 when the reference check ran.
check_json() {
    if python3 - "$WORK/out" "$1" "$2" <<'PY'; then ok; else bad "json of '$1': $(head -c 800 "$WORK/out")"; fi
import json, sys
lines = open(sys.argv[1]).read().splitlines()
objs = [json.loads(l) for l in lines]  # every line one object: raises on anything else
assert all(isinstance(o, dict) for o in objs), objs
scenarios, checked = sys.argv[2].split(), sys.argv[3] == "1"
head, rows = objs[0], objs[1:]
assert head["type"] == "header" and head["command"] == "run" and head["op"] == "mega-moe", head
for k, v in {"hidden": 256, "intermediate": 128, "experts": 16, "ranks": 4, "tokens_per_rank": 12,
             "iterations": 2, "topk": 8, "backend": "threads", "preset": "qwen3-30b-a3b"}.items():
    assert head[k] == v, (k, head[k])
assert head["threads"].split()[0].isdigit() and head["cpu"], head
assert head["bias"] is False and head["weight1_interleave"] is False, head
assert [r["type"] for r in rows] == ["row"] * len(scenarios), rows
assert [r["scenario"] for r in rows] == scenarios, rows
for r in rows:
    assert r["tokens"] == 48, r
    # the weights' dtype, and the F32 block size of the block-scaled rows only
    assert r["weight_dtype"] in ("bf16", "int8", "int4", "fp8_e4m3fn", "fp8_e5m2", "fp4_e2m1", "uint4"), r
    blocks = (128, 128) if r["scenario"] == "a16w8-fp8" else (1, 128) if r["scenario"] == "a16w4-int" else (None, None)
    assert (r["scale_block_n"], r["scale_block_k"]) == blocks, r
    for k in ("dispatch_ms", "gemm1_ms", "activation_ms", "gemm2_ms", "shared_ms", "combine_ms", "setup_s",
              "generate_s", "check_s"):
        assert isinstance(r[k], (int, float)) and r[k] >= 0, (k, r)
    for k in ("total_ms", "tokens_per_s", "gflop_per_s"):
        assert isinstance(r[k], (int, float)) and r[k] > 0, (k, r)
    # the total is the wall time of the call: at least its slowest stage
    assert r["total_ms"] >= max(r[k] for k in ("dispatch_ms", "gemm1_ms", "gemm2_ms", "combine_ms")), r
    # tokens/s is tokens over the total time
    assert abs(r["tokens_per_s"] - r["tokens"] / (r["total_ms"] * 1e-3)) <= 1e-6 * r["tokens_per_s"], r
    if checked:
        assert 0 <= r["maxerr_over_rms"] < 0.1, r
        assert 90 <= r["within_ulp_pct"] <= 100 and r["in_tolerance_pct"] == 100, r
    else:
        assert r["maxerr_over_rms"] is None and r["within_ulp_pct"] is None and r["in_tolerance_pct"] is None, r
    if r["scenario"] == "a16w16" or "a16w16" not in scenarios:
        assert r["vs_a16w16"] is None, r
    else:
        assert 0 < r["vs_a16w16"] < 0.5, r
PY
}

SMALL=(--hidden 256 --intermediate 128 --experts 16 --tokens 12 --iterations 2)
ALL="a16w16 a8w8-int a8w4-int a8w8-fp-e4m3 a8w8-fp-e5m2 a8w4-fp a4w4-fp a16w8-fp8 a16w4-mx a16w4-int"

expect 0 "run --json, every scenario" -- run "${SMALL[@]}" --check-tokens 3 --scenario all --json
stderr_empty
check_json "$ALL" 1

# Without the check the error columns are null; with --trace the trace is written but not announced.
expect 0 "run --json --no-check --trace" -- run "${SMALL[@]}" --no-check --scenario a8w8-int --json \
    --trace "$WORK/trace.json"
stderr_empty
check_json "a8w8-int" 0
if python3 -c 'import json,sys; json.load(open(sys.argv[1]))' "$WORK/trace.json"; then ok; else bad "trace"; fi

# The table is unchanged without --json.
expect 0 "run without --json" -- run "${SMALL[@]}" --no-check --scenario a8w8-int
stdout_has "worker pool:"
# the banner names the GEMM kernels the registry chooses for the scenario's formats (the names depend on
# the CPU's ISA level)
stdout_has "gemm kernels of a8w8-int: GEMM1 int8 x int8 "
stdout_has "; GEMM2 int8 x int8 "
if ! grep -q '^{' "$WORK/out"; then ok; else bad "JSON without --json"; fi

cli_finish json_output
