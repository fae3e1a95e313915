#!/usr/bin/env bash
# tests/cli/case_reliability.sh: case files that used to crash, give wrong results with exit 0, or run
# far longer / larger than their size warrants (the reliability audit); each section pins one fix.
# Usage: bash case_reliability.sh <path-to-megamoe> <source-dir>
set -u
source "$(dirname "${BASH_SOURCE[0]}")/lib/common.bash"
cli_require_python case_reliability

# drop_rank IN OUT G: copies case IN to OUT without rank G's tensors.
drop_rank() {
    python3 - "$1" "$2" "$3" <<'PY'
import sys
from safetensors_io import load, save
m, t = load(sys.argv[1])
save(sys.argv[2], m, {k: v for k, v in t.items() if not k.startswith("rank%s." % sys.argv[3])})
PY
}

# 1-2. TP = 2 has no elastic scale-in: a missing TP rank (TP rank 1 or of a later EP rank) is refused,
# naming the global rank, on both backends (it crashed in Dispatch and gave a wrong y in Combine).
# have_mpi: megamoe was built with MPI and mpirun exists (a build without MPI says "no MPI").
have_mpi() {
    command -v mpirun >/dev/null 2>&1 || return 1
    ! "$MEGAMOE" case "$WORK/nothing.st" -o "$WORK/nothing_out.st" --backend mpi 2>&1 | grep -q "no MPI"
}
for op in dispatch_v3 combine_v2; do
    expect 0 "case-gen $op tp 2" case-gen "$op" -o "$WORK/$op.st" --ranks 2 --tp 2 --tokens 4 --hidden 32
    for g in 1 3; do
        drop_rank "$WORK/$op.st" "$WORK/$op.no$g.st" "$g"
        case_rejected "$op tp 2 without rank $g" "$WORK/$op.no$g.st" \
            "tensor \"rank$g.expert_ids\" is missing .*tp_world_size = 2 allows no elastic scale-in"
        have_mpi || continue
        timeout 120 mpirun --allow-run-as-root --oversubscribe -n 4 "$MEGAMOE" case "$WORK/$op.no$g.st" -o "$WORK/mpi_out.st" \
            --backend mpi >"$WORK/log" 2>&1
        status=$?
        if [ "$status" -eq 2 ] && grep -qF "tensor \"rank$g.expert_ids\" is missing" "$WORK/log"; then ok; else bad "$op without rank $g under mpirun: exit $status, $(head -c 600 "$WORK/log")"; fi
    done
done
cli_finish case_reliability
