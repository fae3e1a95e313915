#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# tests/cli/bench_world.sh: `megamoe bench world` on tiny settings runs at 1 and 2 ranks, prints a row
# per rank count with the world's y identical to the launcher's (no timing is asserted: speed is the
# benchmark's business), and bad options exit 2 with one stderr line.
# Usage: bash bench_world.sh <path-to-megamoe> <source-dir>
set -u
source "$(dirname "${BASH_SOURCE[0]}")/lib/common.bash"

expect 0 "bench world, tiny" -- bench world --ranks 1,2 --experts 8 --calls 2 --launches 1 --empty-calls 10 --iterations 1
stdout_has "megamoe bench world: per-call cost"
stdout_has "CPU: "
for ranks in 1 2; do
    # ranks, 5 times, 2 overheads, "yes" (y of the world = y of the launcher), setup seconds
    if grep -qE "^ +$ranks +[0-9.]+ +[0-9.]+ +[0-9.]+ +[0-9.]+ +[0-9.]+ +-?[0-9.]+ +-?[0-9.]+ +yes +[0-9.]+$" "$WORK/out"; then
        ok
    else
        bad "no row for $ranks ranks: $(cat "$WORK/out")"
    fi
done

expect 2 "3 ranks do not divide 8 experts" -- bench world --ranks 3 --experts 8
stderr_is_one_line "3 ranks do not divide --experts 8"
expect 2 "--ranks 0" -- bench world --ranks 0
stderr_is_one_line "--ranks"
expect 2 "old spelling" -- bench world --repetitions 2
stderr_is_one_line "--repetitions was renamed --iterations"
expect 0 "--help" -- bench world --help
stdout_has "--empty-calls"

cli_finish bench_world
