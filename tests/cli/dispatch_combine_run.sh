#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# tests/cli/dispatch_combine_run.sh: `megamoe run --op dispatch-combine` and `megamoe bench dispatch-combine`
# as a user runs them: --help states the defaults, small runs on every feature (TP, quant mode 2, shared
# ranks, special experts, masks, elastic removal) succeed with the same-bits and finite checks passing,
# the received row counts equal tokens x K x ranks (x 2 with TP: both TP ranks get every row), bad
# options exit 2 with one line, and the benchmark prints one row per size (threads, and MPI when present).
# No timing is asserted. Usage: bash dispatch_combine_run.sh <path-to-megamoe> <source-dir>
set -u
source "$(dirname "${BASH_SOURCE[0]}")/lib/common.bash"

SAME="check: every iteration gives the same bits: yes; outputs finite: yes"
F64="of y, x, rstd within tolerance"
SMALL=(--tokens 4 --hidden 64 --intermediate 32 --iterations 2)

# ---- run --op dispatch-combine ----
expect 0 "run help" run --op dispatch-combine --help
stdout_has "tokens per rank (default 32)" "run help"
stdout_has "hidden size (default 1024)" "run help"
stdout_has "--iterations N" "run help"

expect 0 "run plain" run --op dispatch-combine --ranks 3 "${SMALL[@]}"
stdout_has "3 ranks (EP 3 x TP 1), Bs 4, H 64, K 4, 12 routed experts (4 per rank)" "run plain"
stdout_has "; 48 rows received in all" "run plain" # 3 ranks x 4 tokens x K 4
for stage in "dispatch " "expert FFN" "combine + RMSNorm" "total (per rank)"; do stdout_has "$stage" "run plain"; done
stdout_has "$SAME" "run plain"
stdout_has "check: float64 reference on 12 tokens (+ 0 inactive, zeros expected)" "run plain"
stdout_has "100.0% $F64" "run plain"

expect 0 "run tp" run --op dispatch-combine --ranks 2 --tp 2 --quant-mode 2 --smooth "${SMALL[@]}"
stdout_has "4 ranks (EP 2 x TP 2), Bs 4, H 64, K 2, 2 routed experts (1 per rank)" "run tp"
stdout_has "; 64 rows received in all" "run tp" # 4 sources x 4 tokens x K 2, each to both TP ranks
stdout_has "$SAME" "run tp"
stdout_has "check: no float64 check with --tp 2" "run tp"

expect 0 "run shared + special + mask" run --op dispatch-combine --ranks 4 --shared-experts 1 --shared-ranks 1 \
    --zero-experts 1 --copy-experts 1 --const-experts 2 --alpha-2d --mask 2d --shared-x "${SMALL[@]}"
stdout_has "1 shared" "run shared"
stdout_has "$SAME" "run shared"
stdout_has "100.0% $F64" "run shared"
expect 0 "run quant 2 + 2 shared + 1-D mask" run --op dispatch-combine --ranks 6 --shared-experts 2 --shared-ranks 2 \
    --quant-mode 2 --smooth --mask 1d --uneven-bs --copy-experts 1 --const-experts 1 "${SMALL[@]}"
stdout_has "100.0% $F64" "run quant 2"

expect 0 "run elastic" run --op dispatch-combine --ranks 4 --remove 1,2 --uneven-bs --mask 1d "${SMALL[@]}"
stdout_has "elastic scale-in" "run elastic"
stdout_has "8 routed experts (4 per rank)" "run elastic" # survivors keep their experts
stdout_has "$SAME" "run elastic"

expect 2 "run --experts not a multiple" run --op dispatch-combine --ranks 3 --experts 5
stderr_is_one_line "--experts 5 is not a multiple of the 3 routed-expert ranks" "run --experts"
expect 2 "run --tp 2 with 2 experts per rank" run --op dispatch-combine --ranks 2 --tp 2 --experts 4
stderr_is_one_line "--tp 2 needs one expert per routed-expert rank: --experts 2, not 4" "run --tp 2"
expect 2 "run --remove beyond --ranks" run --op dispatch-combine --ranks 2 --remove 5
stderr_is_one_line "--remove 5 is not an EP rank (--ranks 2)" "run --remove"
expect 2 "run --iterations 0" run --op dispatch-combine --iterations 0
stderr_is_one_line "--iterations" "run --iterations"

# ---- bench dispatch-combine ----
expect 0 "bench help" bench dispatch-combine --help
stdout_has "--experts-per-rank E" "bench help"
BENCH=(--tokens 1,3 --hidden 64 --topk 2 --experts-per-rank 2 --iterations 1 --warmup 0)
# rows_of SIZE: the rows column of the benchmark row for SIZE tokens per rank.
rows_of() { awk -v t="$1" '$1 == t && NF == 8 { print $2 }' "$WORK/out"; }
expect 0 "bench threads" bench dispatch-combine --ranks 2 "${BENCH[@]}"
stdout_has "2 ranks (threads of one process), H 64, K 2, 2 experts per rank" "bench threads"
[ "$(rows_of 1)" = 4 ] && [ "$(rows_of 3)" = 12 ] && ok || bad "bench threads rows: $(cat "$WORK/out")"
expect 2 "bench --topk above the experts" bench dispatch-combine --ranks 2 --experts-per-rank 1 --topk 4
stderr_is_one_line "--topk 4 exceeds the 2 experts" "bench --topk"
[ ! -s "$WORK/out" ] && ok || bad "bench printed a header before rejecting its options"
expect 2 "bench --tokens 0" bench dispatch-combine --tokens 0
stderr_is_one_line "--tokens '0'" "bench --tokens"
if cli_has_mpi; then
    cli_mpi_env
    timeout 120 mpirun --oversubscribe -n 2 "$MEGAMOE" bench dispatch-combine --backend mpi "${BENCH[@]}" \
        >"$WORK/out" 2>"$WORK/err"
    rc=$?
    [ $rc -eq 0 ] && ok || bad "bench mpi exited $rc: $(head -c 300 "$WORK/err")"
    stdout_has "2 ranks (MPI processes)" "bench mpi"
    stdout_has "MPI_A2Av us" "bench mpi"
    [ "$(rows_of 1)" = 4 ] && [ "$(rows_of 3)" = 12 ] && ok || bad "bench mpi rows: $(cat "$WORK/out")"
fi
# Out of memory is said on stderr (it used to exit 1 with nothing). A sanitizer build reserves more
# address space than the cap allows, so the check runs on ordinary builds only.
if ! grep -q "^MEGAMOE_SANITIZE:BOOL=ON" "$(dirname "$MEGAMOE")/CMakeCache.txt" 2>/dev/null; then
    for c in "run --op dispatch-combine" "case-gen dispatch-v3 -o $WORK/oom.st"; do
        (ulimit -v 400000; $MEGAMOE $c --tokens 60000 --hidden 8192 >/dev/null 2>"$WORK/err"); rc=$?
        [ "$rc" = 1 ] && grep -q "out of memory generating a rank's tokens" "$WORK/err" && ok ||
            bad "$c out of memory: exit $rc, stderr: $(cat "$WORK/err")"
    done
fi
cli_finish dispatch_combine_run
