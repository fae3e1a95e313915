#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# tests/cli/threads.sh: the worker pool on the command line (docs/threads.md): the header line names the
# thread count and why (`taskset -c 0` gives 1 thread, --threads and MEGAMOE_NUM_THREADS win and are
# named, MEGAMOE_PIN=1 shows), --threads is checked, and the results do not depend on it (same bits
# in the case files of a run with 1 and with 3 threads).
# Usage: bash threads.sh <path-to-megamoe> <source-dir>
set -u
source "$(dirname "${BASH_SOURCE[0]}")/lib/common.bash"
SMALL=(--hidden 64 --intermediate 32 --experts 8 --tokens 2 --ranks 2 --iterations 1)

# taskset narrows the affinity mask to one CPU: one thread, and the line says so
if command -v taskset >/dev/null && taskset -c 0 true 2>/dev/null; then
    timeout 120 taskset -c 0 "$MEGAMOE" run "${SMALL[@]}" >"$WORK/out" 2>"$WORK/err"
    [ $? -eq 0 ] && ok || bad "taskset -c 0 run: $(head -c 400 "$WORK/err")"
    stdout_has "worker pool: 1 thread (affinity 1 CPU, cgroup quota " "taskset -c 0"
    timeout 120 taskset -c 0 "$MEGAMOE" bench re-routing --tokens 64 --hidden 32 --iterations 1 >"$WORK/out" 2>"$WORK/err"
    [ $? -eq 0 ] && ok || bad "taskset -c 0 bench re-routing: $(head -c 400 "$WORK/err")"
    stdout_has "worker pool: 1 thread (affinity 1 CPU" "taskset -c 0 bench"
fi

# the affinity count is what the kernel says (python reads the same mask; nproc would heed OMP_NUM_THREADS)
cpus=$(python3 -c 'import os; print(len(os.sched_getaffinity(0)))')
env -u MEGAMOE_NUM_THREADS -u MEGAMOE_PIN "$MEGAMOE" run "${SMALL[@]}" >"$WORK/out" 2>"$WORK/err"
[ $? -eq 0 ] && ok || bad "run: $(head -c 400 "$WORK/err")"
stdout_has "(affinity $cpus CPU" "default"

expect 0 "--threads 3" -- run "${SMALL[@]}" --threads 3
stdout_has "worker pool: 3 threads (--threads; affinity $cpus CPU"
MEGAMOE_NUM_THREADS=5 MEGAMOE_PIN=1 "$MEGAMOE" run "${SMALL[@]}" >"$WORK/out" 2>"$WORK/err"
[ $? -eq 0 ] && ok || bad "MEGAMOE_NUM_THREADS=5: $(head -c 400 "$WORK/err")"
stdout_has "worker pool: 5 threads (MEGAMOE_NUM_THREADS; affinity $cpus CPU"
stdout_has "), pinned"
# --threads wins over the environment
MEGAMOE_NUM_THREADS=5 "$MEGAMOE" run "${SMALL[@]}" --threads 2 >"$WORK/out" 2>"$WORK/err"
stdout_has "worker pool: 2 threads (--threads;"

# every command that computes takes --threads and shows the line
expect 0 "run --op re-routing --threads 2" -- run --op re-routing --tokens 64 --hidden 32 --iterations 1 --threads 2
stdout_has "worker pool: 2 threads (--threads;"
expect 0 "run --op dispatch-combine --threads 2" -- run --op dispatch-combine --tokens 2 --hidden 64 \
    --intermediate 32 --iterations 1 --threads 2
stdout_has "worker pool: 2 threads (--threads;"
expect 0 "bench dispatch-combine --threads 1" -- bench dispatch-combine --tokens 1 --hidden 64 --iterations 1 \
    --warmup 0 --threads 1
stdout_has "worker pool: 1 thread (--threads;"
for c in "run" "run --op re-routing" "run --op dispatch-combine" "bench mega-moe" "bench dispatch-combine" \
    "bench re-routing" "bench ffn"; do
    # shellcheck disable=SC2086
    expect 0 "$c --help" -- $c --help
    stdout_has "--threads" "$c --help"
done

# bad values: exit 2, one line naming the option, the value and the range
for v in 0 1025 -1 x; do
    expect 2 "--threads $v" -- run --threads "$v"
    stderr_is_one_line "--threads"
done
expect 2 "--threads 0" -- run --threads 0
stderr_is_one_line "megamoe: run: --threads 0 is outside [1, 1024]"

# same bits with 1 and 3 threads: a case file run both ways
expect 0 "case-gen" -- case-gen mega-moe -o "$WORK/c.st" --hidden 64 --intermediate 32 --experts 8 --tokens 4 --ranks 2
MEGAMOE_NUM_THREADS=1 "$MEGAMOE" case "$WORK/c.st" -o "$WORK/o1.st" 2>"$WORK/err" && ok || bad "case, 1 thread: $(cat "$WORK/err")"
MEGAMOE_NUM_THREADS=3 MEGAMOE_PIN=1 "$MEGAMOE" case "$WORK/c.st" -o "$WORK/o3.st" 2>"$WORK/err" && ok ||
    bad "case, 3 threads: $(cat "$WORK/err")"
cmp -s "$WORK/o1.st" "$WORK/o3.st" && ok || bad "case outputs differ between 1 and 3 threads"

cli_finish threads
