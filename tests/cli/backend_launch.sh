#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# tests/cli/backend_launch.sh: `--backend NAME` is looked up in the table of backends: an unknown name
# is one line naming it and the available ones (exit 2) on every command; the MPI backend asked for more
# than one rank in a process not started by an MPI launcher is an error saying how to start it (it used
# to run 1 rank and print "1 rank (mpi)"), and so is a rank count other than the world size under
# mpirun. A build without MPI says so (exit 1).
# Usage: bash backend_launch.sh <path-to-megamoe> <source-dir>
set -u
source "$(dirname "${BASH_SOURCE[0]}")/lib/common.bash"
cli_mpi_env

SMALL=(--hidden 256 --intermediate 128 --experts 12 --tokens 10 --iterations 1 --check-tokens 2)
"$MEGAMOE" case-gen re-routing -o "$WORK/in.st" --tokens 30 --hidden 48 --scales f32 --seed 9 || bad "case-gen failed"

expect 2 "run unknown backend" -- run --backend ucx
stderr_is_one_line "--backend 'ucx' is not a backend (available: threads"
expect 2 "case unknown backend" -- case "$WORK/in.st" -o "$WORK/o.st" --backend ucx
stderr_is_one_line "--backend 'ucx' is not a backend (available: threads"
expect 2 "bench mega-moe unknown backend" -- bench mega-moe --backend ucx
stderr_is_one_line "--backend 'ucx' is not a backend (available: threads"
expect 2 "bench comm unknown backend" -- bench comm --backend ucx
stderr_is_one_line "--backend 'ucx' is not a backend (available: threads"
expect 2 "bench dispatch-combine unknown backend" -- bench dispatch-combine --backend ucx
stderr_is_one_line "--backend 'ucx' is not a backend (available: threads"

# No launcher in the environment: a single process.
NOLAUNCH=(env -u OMPI_COMM_WORLD_SIZE -u OMPI_COMM_WORLD_RANK -u PMI_SIZE -u PMI_RANK -u PMIX_RANK
          -u MPI_LOCALNRANKS)
timeout 120 "${NOLAUNCH[@]}" "$MEGAMOE" run --backend mpi --ranks 4 "${SMALL[@]}" >"$WORK/out" 2>"$WORK/err"
status=$?
if cli_has_mpi; then
    if [ "$status" -eq 2 ]; then ok; else bad "run --backend mpi --ranks 4 without mpirun: exit $status"; fi
    stderr_is_one_line "start it with mpirun -n 4 megamoe"
    if ! grep -q "ranks (mpi)" "$WORK/out"; then ok; else bad "ran anyway: $(cat "$WORK/out")"; fi
    # One rank, or no --ranks, without a launcher: a singleton world is fine.
    timeout 120 "${NOLAUNCH[@]}" "$MEGAMOE" run --backend mpi --ranks 1 "${SMALL[@]}" \
        >"$WORK/out" 2>"$WORK/err"
    status=$?
    if [ "$status" -eq 0 ] && grep -qF "1 rank (mpi)" "$WORK/out"; then ok; else bad "singleton --ranks 1: exit $status $(cat "$WORK/err")"; fi
    # Under mpirun the count must be the world's.
    timeout 120 mpirun -n 2 "$MEGAMOE" run --backend mpi --ranks 3 "${SMALL[@]}" >"$WORK/out" 2>"$WORK/err"
    status=$?
    if [ "$status" -eq 2 ] && grep -qF "MPI_COMM_WORLD has 2 processes" "$WORK/err"; then ok; else bad "mpirun -n 2 --ranks 3: exit $status $(cat "$WORK/err")"; fi
    if [ "$(grep -c "MPI_COMM_WORLD has 2 processes" "$WORK/err")" -eq 1 ]; then ok; else bad "mpirun -n 2 --ranks 3: not one line: $(cat "$WORK/err")"; fi
    timeout 120 mpirun -n 2 "$MEGAMOE" run --backend mpi --ranks 2 "${SMALL[@]}" >"$WORK/out" 2>"$WORK/err"
    status=$?
    if [ "$status" -eq 0 ] && grep -qF "2 ranks (mpi)" "$WORK/out"; then ok; else bad "mpirun -n 2 --ranks 2: exit $status $(cat "$WORK/err")"; fi
else
    if [ "$status" -eq 1 ] && grep -q "no MPI" "$WORK/err"; then ok; else bad "no-MPI build: exit $status $(cat "$WORK/err")"; fi
    stderr_is_one_line "(available: threads)"
fi

cli_finish backend_launch
