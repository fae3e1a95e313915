#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# tests/cli/run_mpi.sh: `megamoe run --backend mpi` under mpirun (2 and 3 processes, one rank each):
# every scenario's row is within tolerance and the trace (rank 0 writes every process's events) has one
# track per process, their setup, expert batches and dispatch -> expert flows (lib/moe_trace.py). A build
# without MPI fails with status 1 and says so.
# Usage: bash run_mpi.sh <path-to-megamoe> <source-dir>
set -u
source "$(dirname "${BASH_SOURCE[0]}")/lib/common.bash"
cli_require_python run_mpi
cli_mpi_env

SMALL=(--hidden 256 --intermediate 128 --experts 12 --tokens 10 --iterations 2 --check-tokens 2)

timeout 60 "$MEGAMOE" run --backend mpi --help >/dev/null 2>&1 || bad "--help"
timeout 120 "$MEGAMOE" run --backend mpi "${SMALL[@]}" >"$WORK/out" 2>"$WORK/err"
status=$?
if [ "$status" -eq 1 ] && grep -q "no MPI" "$WORK/err"; then
    ok # a build without MPI says so and fails cleanly
elif [ "$status" -ne 0 ]; then
    bad "singleton MPI run: exit $status ($(cat "$WORK/err"))"
elif ! command -v mpirun >/dev/null; then
    bad "megamoe has MPI but mpirun is not installed"
else
    ok # a singleton process is a world of one rank
    for np in 2 3; do
        timeout 180 mpirun -np "$np" "$MEGAMOE" run --backend mpi "${SMALL[@]}" --scenario all \
            --trace "$WORK/trace$np.json" >"$WORK/out" 2>"$WORK/err"
        status=$?
        if [ "$status" -eq 0 ]; then ok; else bad "mpirun -np $np: exit $status ($(head -c 400 "$WORK/err"))"; fi
        if grep -qF "$np ranks (mpi)" "$WORK/out"; then ok; else bad "np $np: banner"; fi
        if python3 - "$WORK/out" "$np" <<'PY'; then ok; else bad "np $np: rows"; fi
import sys
rows = [l.split() for l in open(sys.argv[1])]
rows = [r for r in rows if len(r) == 15 and r[1].isdigit()]
assert [r[0] for r in rows] == ["a16w16", "a8w8-int", "a8w4-int", "a8w8-fp-e4m3", "a8w8-fp-e5m2", "a8w4-fp",
                                "a4w4-fp", "a16w8-fp8", "a16w4-mx", "a16w4-int"], rows
for r in rows:
    assert int(r[1]) == 10 * int(sys.argv[2]), r
    assert float(r[11]) < 0.1 and r[13] == "100.0%", r
PY
        # the trace merges every process's events on rank 0: tracks, slices, expert rows and flows
        # (lib/moe_trace.py; shape: ranks experts tokens topk iterations checked scenarios)
        if python3 "$(dirname "${BASH_SOURCE[0]}")/lib/moe_trace.py" "$WORK/trace$np.json" "$np" 12 10 8 2 1 \
            a16w16 a8w8-int a8w4-int a8w8-fp-e4m3 a8w8-fp-e5m2 a8w4-fp a4w4-fp; then ok; else bad "np $np: trace"; fi
    done
    # A bad option fails on every process with status 2.
    timeout 60 mpirun -np 2 "$MEGAMOE" run --backend mpi --experts 5 >"$WORK/out" 2>"$WORK/err"
    status=$?
    if [ "$status" -eq 2 ] && grep -q "not a multiple of the 2 ranks" "$WORK/err"; then ok; else bad "bad option under mpirun: exit $status"; fi
fi

cli_finish run_mpi
