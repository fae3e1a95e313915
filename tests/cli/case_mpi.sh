#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# tests/cli/case_mpi.sh: `megamoe case --backend mpi`. In an MPI build, the file written under mpirun
# (2 and 3 processes) and by a singleton process is byte-identical to the threads backend's, and a broken
# case exits 2 without output; in a build without MPI the backend fails with status 1 and says so.
# Usage: bash case_mpi.sh <path-to-megamoe> <source-dir>
set -u
source "$(dirname "${BASH_SOURCE[0]}")/lib/common.bash"
# No leak checks here under sanitizers (see cli_mpi_env). The code this script adds over the threads
# backend (case/case_mpi.c) allocates nothing itself; the shared runner is leak-checked by
# test_case_re_routing and the other CLI scripts.
cli_mpi_env

"$MEGAMOE" case-gen re-routing -o "$WORK/in.st" --tokens 300 --hidden 48 --scales f32 --seed 9 || bad "case-gen failed"
"$MEGAMOE" case "$WORK/in.st" -o "$WORK/threads.st" || bad "threads backend failed"
python3 - "$WORK" <<'PY'
import json, struct, sys
for name, meta in (("unknown_key", {"op": "moe_re_routing", "idx_typ": "0"}), ("no_tokens", {"op": "moe_re_routing"})):
    header = json.dumps({"__metadata__": meta}).encode()
    open(sys.argv[1] + "/" + name + ".st", "wb").write(struct.pack("<Q", len(header)) + header)
PY

timeout 120 "$MEGAMOE" case "$WORK/in.st" -o "$WORK/singleton.st" --backend mpi 2>"$WORK/err"
status=$?
if [ "$status" -eq 1 ] && grep -q "no MPI" "$WORK/err"; then
    ok # a build without MPI says so and fails cleanly
    if [ ! -e "$WORK/singleton.st" ]; then ok; else bad "output written without MPI"; fi
elif [ "$status" -eq 0 ]; then
    if cmp -s "$WORK/singleton.st" "$WORK/threads.st"; then ok; else bad "singleton MPI output differs from threads"; fi
    if ! command -v mpirun >/dev/null; then
        bad "megamoe has MPI but mpirun is not installed"
    else
        for np in 2 3; do
            timeout 120 mpirun --allow-run-as-root -n "$np" "$MEGAMOE" case "$WORK/in.st" -o "$WORK/mpi$np.st" \
                --backend mpi >"$WORK/log" 2>&1
            status=$?
            if [ "$status" -eq 0 ] && cmp -s "$WORK/mpi$np.st" "$WORK/threads.st"; then ok; else bad "mpirun -n $np: exit $status, $(cat "$WORK/log")"; fi
            # One failure found by every process (an unknown key), one found by process 0 alone while it
            # runs the operator (a missing tensor): both end every process with status 2.
            [ "$np" -eq 2 ] || continue
            for broken in unknown_key:'metadata key "idx_typ"' no_tokens:'tensor "tokens" is missing'; do
                timeout 120 mpirun --allow-run-as-root -n "$np" "$MEGAMOE" case "$WORK/${broken%%:*}.st" \
                    -o "$WORK/broken_out.st" --backend mpi >"$WORK/log" 2>&1
                status=$?
                if [ "$status" -eq 2 ] && grep -qF "${broken#*:}" "$WORK/log"; then ok; else bad "${broken%%:*} under mpirun -n $np: exit $status, $(cat "$WORK/log")"; fi
                if [ ! -e "$WORK/broken_out.st" ]; then ok; else bad "${broken%%:*} under mpirun wrote output"; fi
            done
        done
    fi
else
    bad "--backend mpi: exit $status: $(cat "$WORK/err")"
fi

cli_finish case_mpi
