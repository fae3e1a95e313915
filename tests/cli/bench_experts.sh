#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# tests/cli/bench_experts.sh: `megamoe bench experts` runs at a small shape and prints one row per
# format and token count whose last column says the local call's y has the same bits as MegaMoE's on
# one rank (no timing is asserted); bad options exit 2 with one stderr line.
# Usage: bash bench_experts.sh <path-to-megamoe> <source-dir>
set -u
source "$(dirname "${BASH_SOURCE[0]}")/lib/common.bash"

timeout 240 "$MEGAMOE" bench experts --hidden 128 --intermediate 64 --experts 8 --topk 2 --shared-experts 1 \
    --tokens 1,20 --format a16w16,a8w8-int,a8w4-fp --iterations 2 >"$WORK/out" 2>"$WORK/err"
status=$?
if [ "$status" -eq 0 ]; then ok; else bad "bench experts exited $status: $(head -c 400 "$WORK/err")"; fi
for label in A16W16 A8W8-INT A8W4-FP; do
    for tokens in 1 20; do
        if grep -qE "^$label +$tokens +[0-9.]+ .* yes$" "$WORK/out"; then ok; else
            bad "no row with the same bits for $label at $tokens tokens: $(cat "$WORK/out")"
        fi
    done
done
bench_option_checks experts --tokens --intermediate

cli_finish bench_experts
