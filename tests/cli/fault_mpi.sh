#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# tests/cli/fault_mpi.sh: fault injection under mpirun. One of 3 MPI processes of `megamoe case` and of
# `megamoe run` is stopped (SIGSTOP) or killed (SIGKILL) mid-call; the others must return a named error
# within the timeout (3 s) and every process must exit (no wait in an agreement or in MPI_Finalize), each
# scenario well under 20 s. Skipped (one passing check) without mpirun or in a build without MPI.
# Usage: bash fault_mpi.sh <path-to-megamoe> <source-dir>
set -u
source "$(dirname "${BASH_SOURCE[0]}")/lib/common.bash"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1

if ! command -v mpirun >/dev/null 2>&1 ||
    "$MEGAMOE" case "$WORK/none.st" -o "$WORK/none_out.st" --backend mpi 2>&1 | grep -q "no MPI"; then
    echo "fault_mpi: skipped (no mpirun or no MPI in this build)"
    ok
    cli_finish fault_mpi
fi

# fault NAME SIGNAL DELAY PATTERN -- ARGS...: starts mpirun -n 3 megamoe ARGS, sends SIGNAL to the
# second process after DELAY seconds, and expects mpirun to end with a failure within 20 s and its
# output to match the regex PATTERN. The stopped process is continued and every process it started is
# ended by its id afterwards, so nothing is left behind.
fault() {
    local name=$1 sig=$2 delay=$3 pattern=$4
    shift 5
    local start=$SECONDS
    mpirun -n 3 -x MEGAMOE_COMM_TIMEOUT=3 "$MEGAMOE" "$@" >"$WORK/log" 2>&1 &
    local mp=$! kids="" victim="" i
    for i in $(seq 1 50); do # the processes of this mpirun, once all three exist
        kids=$(pgrep -P "$mp" | tr '\n' ' ')
        [ "$(echo $kids | wc -w)" -ge 3 ] && break
        sleep 0.1
    done
    sleep "$delay"
    victim=$(echo $kids | awk '{print $2}')
    [ -n "$victim" ] && kill -"$sig" "$victim" 2>/dev/null
    for i in $(seq 1 200); do # up to 20 s
        kill -0 "$mp" 2>/dev/null || break
        sleep 0.1
    done
    local alive=0
    if kill -0 "$mp" 2>/dev/null; then alive=1; fi
    for p in $kids; do kill -CONT "$p" 2>/dev/null; kill -KILL "$p" 2>/dev/null; done
    [ "$alive" -eq 1 ] && kill -KILL "$mp" 2>/dev/null
    wait "$mp"
    local rc=$?
    if [ "$alive" -eq 0 ] && [ "$rc" -ne 0 ]; then ok; else bad "$name: mpirun still running after 20 s (alive $alive) or exit $rc: $(head -c 600 "$WORK/log")"; fi
    if grep -qE -- "$pattern" "$WORK/log"; then ok; else bad "$name: output lacks /$pattern/: $(head -c 800 "$WORK/log")"; fi
    echo "$name: exit $rc after $((SECONDS - start)) s"
}

# The case must last a few seconds unperturbed, so that the signal at 1.5 s lands inside the call, but
# not much longer: survivors compute their own share before they wait for the stopped rank, and all of
# it must end within 20 s. The build's speed varies ~10x (AVX-512: 8192 tokens in ~4 s; the portable
# kernels (MEGAMOE_ISA=ref) or a sanitizer build: 30-50 s), so the size is calibrated: an unperturbed
# 1024-token case is timed (MPI start-up included) and scaled to about 8 s of it (768 to 8192 tokens).
# The run: 250 calls take ~7 s on AVX-512 and the portable kernels are ~50x slower there, so 8 calls.
case_gen() {
    expect 0 "case-gen mega-moe $1" case-gen mega-moe -o "$WORK/m3.st" --ranks 3 --tokens "$1" --hidden 1024 \
        --intermediate 1024 --experts 6
}
case_gen 1024
t0=$(date +%s%N)
mpirun -n 3 "$MEGAMOE" case "$WORK/m3.st" -o "$WORK/m3_cal.st" --backend mpi >/dev/null 2>&1
ms=$((($(date +%s%N) - t0) / 1000000))
case_tokens=$((1024 * 8000 / (ms > 100 ? ms : 100)))
[ "$case_tokens" -lt 768 ] && case_tokens=768
[ "$case_tokens" -gt 8192 ] && case_tokens=8192
echo "fault_mpi: 1024 tokens took $ms ms unperturbed; the fault case has $case_tokens tokens"
case_gen "$case_tokens"
run_calls=250
if [ "${MEGAMOE_ISA:-}" = ref ]; then run_calls=8; fi
for sig in STOP KILL; do
    # STOP: the survivors time out naming the stopped rank. KILL: megamoe names the missing rank when
    # its peers notice first; mpirun may end the job first, then it names the killed process.
    if [ "$sig" = STOP ]; then pat="rank 1 did not arrive within 3 s"; else pat="rank 1 did not arrive|exited on signal 9"; fi
    rm -f "$WORK/m3_out.st"
    fault "case, one process $sig" "$sig" 1.5 "$pat" -- case "$WORK/m3.st" -o "$WORK/m3_out.st" --backend mpi --timeout 3
    if [ ! -e "$WORK/m3_out.st" ]; then ok; else bad "case, one process $sig: wrote an output"; fi
    fault "run, one process $sig" "$sig" 2 "$pat" -- run --backend mpi --ranks 3 --scenario a16w16 --experts 24 --tokens 256 --check-tokens 4 \
        --hidden 512 --intermediate 512 --iterations "$run_calls"
done
cli_finish fault_mpi
