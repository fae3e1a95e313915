#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# tests/cli/run_trace.sh: `--trace FILE` of `megamoe run --op dispatch-combine` (1, 2 and 4 thread ranks,
# 4 with a shared-expert rank, EP 2 x TP 2) and `megamoe run --op re-routing`, checked by lib/dc_trace.py from the
# command line's shape alone: the setup and check phases, per rank and iteration the dispatch / expert FFN /
# combine slices whose expert rows sum to ranks x tokens x (K + shared) (also what the command reports),
# each rank's rows and bytes sent and received, and one flow from every sending rank's dispatch to the
# expert FFN of each rank that received its rows, forward in time. Traces with one rank's rows changed or
# a flow turned back in time fail the check. (`run --model --trace` is tests/cli/model_layer.sh's.)
# Usage: bash run_trace.sh <path-to-megamoe> <source-dir>
set -u
source "$(dirname "${BASH_SOURCE[0]}")/lib/common.bash"
cli_require_python run_trace
DC_TRACE="$(dirname "${BASH_SOURCE[0]}")/lib/dc_trace.py"

SMALL=(--tokens 4 --hidden 64 --intermediate 32 --iterations 2 --check-tokens 2)
# dc_ok WHAT RANKS TOPK SHARED TP CHECKED [options]: run --op dispatch-combine with --trace, then
# dc_trace.py on it (RANKS: in all) with the rows the command reported.
dc_ok() {
    local what=$1 ranks=$2 topk=$3 shared=$4 tp=$5 checked=$6
    shift 6
    expect 0 "$what" run --op dispatch-combine --ranks $((ranks / tp)) "${SMALL[@]}" --trace "$WORK/$what.json" "$@"
    local rows
    rows=$(sed -n 's/.*; \([0-9]*\) rows received in all$/\1/p' "$WORK/out")
    if python3 "$DC_TRACE" "$WORK/$what.json" "$ranks" 4 "$topk" "$shared" 64 2 "$checked" "${rows:-0}" "$tp" \
        >"$WORK/log" 2>&1; then ok; else bad "$what: trace: $(head -5 "$WORK/log")"; fi
}
dc_ok dc1 1 4 0 1 1 # one rank: its 4 experts, K 4
dc_ok dc2 2 4 0 1 1
dc_ok dc4 4 4 0 1 1
dc_ok dc4_shared 4 4 1 1 1 --shared-experts 1 --shared-ranks 1
dc_ok dc4_tp 4 2 0 2 0 --tp 2 # EP 2 x TP 2, one expert per EP rank, K 2; no float64 check with TP

# The check can fail: one rank's received rows changed on all its slices, then one flow's start moved
# after its finish.
python3 - "$WORK/dc2.json" "$WORK/bad_rows.json" "$WORK/bad_flow.json" <<'PY'
import json, sys
t = json.load(open(sys.argv[1]))
for e in t["traceEvents"]:
    if e["ph"] == "X" and e["tid"] == 2 and "rows" in e["args"]:
        e["args"]["rows"][0] += 1
json.dump(t, open(sys.argv[2], "w"))
t = json.load(open(sys.argv[1]))
f = next(e for e in t["traceEvents"] if e["ph"] == "f" and e["id"] == 1)
s = next(e for e in t["traceEvents"] if e["ph"] == "s" and e["id"] == 1)
s["ts"] = f["ts"] + 1.0  # (the sender's dispatch stretched to hold it: the start is still inside it)
d = next(e for e in t["traceEvents"] if e["ph"] == "X" and e["tid"] == s["tid"] and e["name"] == "dispatch")
d["dur"] = s["ts"] + 1.0 - d["ts"]
json.dump(t, open(sys.argv[3], "w"))
PY
if python3 "$DC_TRACE" "$WORK/bad_rows.json" 2 4 4 0 64 2 1 32 >"$WORK/log" 2>&1; then
    bad "a trace with changed rows passes the check"
elif grep -q "rows received 33 in all" "$WORK/log" && grep -q "from_rows .* sum to" "$WORK/log"; then ok
else bad "changed rows: $(head -3 "$WORK/log")"; fi
if python3 "$DC_TRACE" "$WORK/bad_flow.json" 2 4 4 0 64 2 1 32 >"$WORK/log" 2>&1; then
    bad "a trace with a flow back in time passes the check"
elif grep -q "flow 1 goes back in time" "$WORK/log"; then ok
else bad "flow back in time: $(head -3 "$WORK/log")"; fi

expect 0 "re-routing" run --op re-routing --tokens 256 --hidden 64 --ranks 3 --experts 4 --iterations 2 \
    --trace "$WORK/rr.json"
if python3 "$DC_TRACE" --re-routing "$WORK/rr.json" 256 3 4 2 >"$WORK/log" 2>&1; then ok
else bad "re-routing trace: $(head -5 "$WORK/log")"; fi
cli_finish run_trace
