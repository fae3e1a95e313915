#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# tests/cli/json_every.sh: `--json` on every other command that measures (schemas in docs/cli.md; `run`'s
# MegaMoE is tests/cli/json_output.sh, `bench mega-moe` tests/cli/plot_svg.sh): `run --op re-routing`,
# `run --op dispatch-combine`, `bench ffn`, `bench comm`, `bench dispatch-combine`, `bench experts`,
# `bench re-routing`, `bench world` and `layer` on tiny shapes. Every stdout line parses as one JSON
# object (nothing else is printed there), the first is the header naming the command and echoing the
# options given, the rows carry the options' values (tokens, ranks, hidden, formats) and times > 0.
# The `run --op` and `layer` runs also write `--trace FILE`: a Chrome trace JSON whose slices hold the
# setup and check phases, every timed call (per rank) with its iteration, in time order per track (the
# layer's: the host's read and launch, per rank its load, forward and MegaMoE call; lib/moe_trace.py, run by
# model_layer.sh, checks the call's stages and flows).
# Usage: bash json_every.sh <path-to-megamoe> <source-dir>
set -u
source "$(dirname "${BASH_SOURCE[0]}")/lib/common.bash"
cli_require_python json_every

# check WHAT PYTHON: the last expect's stdout as `objs` (every line one JSON object, else it fails),
# `head` the first, `rows` those of type "row"; PYTHON asserts on them.
check() {
    local what=$1
    if python3 - "$WORK/out" "$2" <<'PY'; then ok; else bad "$what: $(head -c 1200 "$WORK/out")"; fi
import json, sys
lines = open(sys.argv[1]).read().splitlines()
objs = [json.loads(l) for l in lines]  # raises on any line that is not JSON
assert lines and all(isinstance(o, dict) and "type" in o for o in objs), objs
head, rows = objs[0], [o for o in objs if o["type"] == "row"]
assert head["type"] in ("header", "result") and head["cpu"] and head["threads"].split()[0].isdigit(), head
def pos(o, *keys):
    for k in keys:
        assert isinstance(o[k], (int, float)) and o[k] > 0, (k, o)
exec(sys.argv[2])
PY
}

# trace_check FILE PYTHON: FILE is a Chrome trace; `slices` its complete events, `names` their names,
# `tracks` the names of the tracks by tid; PYTHON asserts on them.
trace_check() {
    local what=$1
    if python3 - "$WORK/$1" "$2" <<'PY'; then ok; else bad "trace $what: $(head -c 600 "$WORK/$1")"; fi
import json, sys
events = json.load(open(sys.argv[1]))["traceEvents"]
slices = [e for e in events if e["ph"] == "X"]
names = [e["name"] for e in slices]
tracks = {e["tid"]: e["args"]["name"] for e in events if e["ph"] == "M" and e["name"] == "thread_name"}
assert slices and all(e["dur"] >= 0 and e["ts"] >= 0 and e["tid"] in tracks for e in slices), slices
for tid in tracks:  # slices of one track follow each other in time
    ts = [e["ts"] for e in slices if e["tid"] == tid]
    assert ts == sorted(ts), (tid, ts)
exec(sys.argv[2])
PY
}

expect 0 "run --op re-routing --json" -- run --op re-routing --tokens 256 --hidden 64 --ranks 2 --experts 4 \
    --iterations 2 --json --trace "$WORK/rr.trace"
stderr_empty
check "run re-routing" '
assert head["command"] == "run" and head["op"] == "re-routing", head
assert (head["tokens"], head["hidden"], head["ranks"], head["experts"], head["iterations"]) == (256, 64, 2, 4, 2)
assert head["dtype"] == "bf16" and head["bytes"] == 256 * 64 * 2 and head["check_ok"] is True, head
assert [r["method"] for r in rows] == ["re-routing", "memcpy (1 thread)"], rows
for r in rows:
    pos(r, "median_ms", "min_ms", "max_ms", "gb_per_s")
    assert r["min_ms"] <= r["median_ms"] <= r["max_ms"], r
    assert abs(r["gb_per_s"] - head["bytes"] * 1e-9 / (r["median_ms"] * 1e-3)) <= 1e-6 * r["gb_per_s"], r
'
trace_check rr.trace '
assert names == ["setup", "warm-up", "memcpy", "re-routing", "memcpy", "re-routing", "check"], names
assert [e["args"]["iteration"] for e in slices if e["name"] == "re-routing"] == [0, 1], slices
assert all(e["args"]["bytes"] == 256 * 64 * 2 for e in slices if e["name"] == "memcpy"), slices
'

expect 0 "run --op dispatch-combine --json" -- run --op dispatch-combine --ranks 2 --tokens 4 --hidden 64 \
    --intermediate 32 --iterations 2 --check-tokens 2 --json --trace "$WORK/dc.trace"
stderr_empty
check "run dispatch-combine" '
assert head["command"] == "run" and head["op"] == "dispatch-combine", head
assert (head["ranks"], head["tokens_per_rank"], head["hidden"], head["intermediate"], head["iterations"]) == (2, 4, 64, 32, 2)
stages = [r["stage"] for r in rows]
assert stages[-1] == "total" and len(stages) >= 3, stages
for r in rows:
    pos(r, "median_us", "min_us", "max_us")
    assert r["min_us"] <= r["median_us"] <= r["max_us"], r
# the total per rank is at least each stage (slowest rank of each)
assert rows[-1]["median_us"] >= max(r["median_us"] for r in rows[:-1]) * 0.999, rows
check = [o for o in objs if o["type"] == "check"]
assert len(check) == 1 and check[0]["same_bits"] is True and check[0]["finite"] is True, check
assert check[0]["reference_tokens"] > 0 and check[0]["in_tolerance_pct"] == 100, check
assert 0 <= check[0]["maxerr_over_rms"] < 0.1, check
'
trace_check dc.trace '
assert tracks == {0: "host", 1: "rank 0", 2: "rank 1"}, tracks
assert [e["name"] for e in slices if e["tid"] == 0] == ["setup"], slices
for tid in (1, 2):
    mine = [e for e in slices if e["tid"] == tid]
    assert [e["name"] for e in mine] == ["dispatch", "expert FFN", "combine + RMSNorm"] * 2 + ["check"], mine
    assert [e["args"]["iteration"] for e in mine[:6]] == [0, 0, 0, 1, 1, 1], mine
    assert all(min(e["args"]["rows"]) >= 0 for e in mine[:6]), mine
# every token of both ranks to K = 4 experts (lib/dc_trace.py, run by run_trace.sh, checks the rest)
assert sum(sum(e["args"]["rows"]) for e in slices if e["name"] == "dispatch" and e["args"]["iteration"] == 0) == 32
'

expect 0 "bench ffn --json" -- bench ffn --quick --hidden 256 --intermediate 128 --rows 1,8 --format bf16,int8 \
    --isa auto --stream-mb 4 --iterations 2 --json
stderr_empty
check "bench ffn" '
assert head["command"] == "bench" and head["bench"] == "ffn", head
assert (head["intermediate"], head["iterations"], head["stream_mb"]) == (128, 2, 4), head
auto = [r for r in rows if r["level"] == "auto"]
assert [(r["format"], r["rows"]) for r in auto] == [("bf16", 1), ("bf16", 8), ("int8", 1), ("int8", 8)], rows
for r in rows:
    assert r["hidden"] == 256 and r["intermediate"] == 128 and r["kernel"], r  # (the ref row: 256 x 128 too)
    pos(r, "t1_ms", "tn_ms", "gflop_per_s", "weight_mb", "flop_per_weight_byte", "speedup_n")
    # 6 rows H I FLOPs (GEMM1 2 x H x 2I, GEMM2 2 x I x H) per weight byte
    assert abs(r["flop_per_weight_byte"] - 6 * r["rows"] * r["hidden"] * 128 / (r["weight_mb"] * 1e6)) <= 1e-6 * r["flop_per_weight_byte"], r
    assert abs(r["gflop_per_s"] - 6 * r["rows"] * r["hidden"] * 128 / (r["tn_ms"] * 1e-3) / 1e9) <= 1e-6 * r["gflop_per_s"], r
for t in [o for o in objs if o["type"] == "target"]:
    assert isinstance(t["met"], bool) and t["rule"], t
peaks = [o for o in objs if o["type"] == "peak"]
# one object per instruction of the table, null where the CPU lacks it
assert len(peaks) == 5 and all(p["instruction"] and (p["gops_n"] is None or p["gops_n"] > 0) for p in peaks), peaks
'

expect 0 "bench comm --json" -- bench comm --ranks 2 --max-rows 2 --iterations 2 --warmup 1 --json
stderr_empty
check "bench comm" '
assert head["command"] == "bench" and head["bench"] == "comm" and head["iterations"] == 2, head
assert [r["bytes_per_peer"] for r in rows] == [8, 14336, 28672], rows
for r in rows:
    assert r["ranks"] == 2, r
    pos(r, "threads_us", "threads_put_us", "memcpy_us", "threads_gb_per_s", "memcpy_gb_per_s")
    assert r["mpi_alltoallv_us"] is None and r["mm_mpi_us"] is None, r
'

expect 0 "bench dispatch-combine --json" -- bench dispatch-combine --ranks 2 --tokens 1,4 --hidden 128 --topk 2 \
    --experts-per-rank 2 --iterations 2 --warmup 1 --json
stderr_empty
check "bench dispatch-combine" '
assert head["bench"] == "dispatch-combine" and (head["ranks"], head["hidden"], head["topk"]) == (2, 128, 2), head
assert head["backend"] == "threads" and head["baseline"] == "mm_comm_alltoallv", head
assert [r["tokens_per_rank"] for r in rows] == [1, 4], rows
for r in rows:
    pos(r, "rows", "dispatch_us", "combine_us", "alltoallv_us", "dispatch_gb_per_s", "combine_gb_per_s")
    # every token goes to K = 2 experts: rows received in all <= ranks x tokens x K
    assert r["rows"] <= 2 * r["tokens_per_rank"] * 2, r
'

expect 0 "bench experts --json" -- bench experts --hidden 128 --intermediate 64 --experts 8 --topk 2 \
    --tokens 1,4 --format a16w16,a8w8-int --iterations 2 --json
stderr_empty
check "bench experts" '
assert head["bench"] == "experts" and (head["hidden"], head["intermediate"], head["experts"], head["topk"]) == (128, 64, 8, 2), head
assert [(r["format"], r["tokens"]) for r in rows] == [("a16w16", 1), ("a16w16", 4), ("a8w8-int", 1), ("a8w8-int", 4)], rows
for r in rows:
    pos(r, "local_ms", "mega_ms", "local_tokens_per_s", "mega_tokens_per_s")
    assert r["same_bits"] is True and r["local_min_ms"] <= r["local_ms"], r
'

expect 0 "bench re-routing --json" -- bench re-routing --tokens 128 --hidden 64 --iterations 2 --warmup 1 \
    --threads 2 --json
stderr_empty
check "bench re-routing" '
assert head["bench"] == "re-routing" and (head["tokens"], head["hidden"], head["iterations"]) == (128, 64, 2), head
assert head["bytes"] == 128 * 64 * 2 and head["seed"] == 1 and head["dtype"] == "bf16", head
assert [r["method"] for r in rows] == ["re-routing", "memcpy 1 thread", "memcpy 2 threads"], rows
for r in rows: pos(r, "median_ms", "gb_per_s")
'

expect 0 "bench world --json" -- bench world --ranks 1,2 --experts 8 --calls 2 --launches 1 --empty-calls 10 \
    --iterations 1 --json
stderr_empty
check "bench world" '
assert head["bench"] == "world" and head["experts"] == 8 and head["scenario"] == "a16w16", head
assert [r["ranks"] for r in rows] == [1, 2], rows
for r in rows:
    pos(r, "empty_world_us", "empty_launch_us", "moe_spmd_ms", "moe_world_ms", "moe_launch_ms", "setup_s")
    assert r["y_world_equals_launch"] is True, r
'

# megamoe layer: one result object (a tiny qwen3_moe checkpoint of tests/python/hf_tiny.py).
PY=
for p in python3 /usr/bin/python3; do
    if command -v "$p" >/dev/null && "$p" -c "import numpy" 2>/dev/null; then PY=$p; break; fi
done
if [ -n "$PY" ]; then
    PYDIR="$(cd "$(dirname "${BASH_SOURCE[0]}")/../python" && pwd)"
    (cd "$WORK" && PYTHONPATH="$PYDIR:$PYTHONPATH" "$PY" -c '
from hf_tiny import *
write_checkpoint("qwen3_moe", "qwen3_moe", 4)
write_input("qwen3_moe", 1, "x.st", 13, "bf16", 7)')
    expect 0 "layer --json" -- layer --model "$WORK/qwen3_moe" --layer 1 "$WORK/x.st" -o "$WORK/y.st" --ranks 2 --json \
        --trace "$WORK/layer.trace"
    stderr_empty
    check "layer" '
assert len(objs) == 1 and head["type"] == "result" and head["command"] == "layer", objs
assert (head["layer"], head["tokens"], head["ranks"], head["backend"]) == (1, 13, 2, "threads"), head
assert head["output"].endswith("/y.st") and head["input"].endswith("/x.st") and head["model"].endswith("/qwen3_moe"), head
pos(head, "read_s", "run_s", "total_s", "hidden", "topk")
'
    trace_check layer.trace '
host = [e for e in slices if tracks[e["tid"]] == "host"]
assert [e["name"] for e in host] == ["read config, index and x", "launch"], host
assert all(e["args"] == {"tokens": 13, "ranks": 2} for e in host), host
assert sorted(n for n in tracks.values() if "overlap" not in n) == ["host", "rank 0", "rank 1"], tracks
for r, tokens in ((0, 7), (1, 6)):  # blocks of ceil(13 / 2) tokens
    mine = [e for e in slices if e["tid"] == r]
    phases = [e["name"] for e in mine if e["cat"] in ("setup", "layer", "run")]
    assert phases == ["load experts", "forward", "mega_moe routed"] + ["gather and write"] * (r == 0), phases
    assert mine[0]["args"] == {"tokens": tokens} and mine[1]["args"] == {"tokens": tokens}, mine[:2]
    assert "dispatch" in [e["name"] for e in mine if e["cat"] == "routed"], mine
'
    if [ -s "$WORK/y.st" ]; then ok; else bad "layer --json wrote no output file"; fi
else
    echo "json_every: no numpy, the layer case is not checked"
fi

cli_finish json_every
