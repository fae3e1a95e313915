#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# tests/cli/case_mega_moe.sh: `megamoe case` on mega_moe cases made by `case-gen mega-moe`: every scenario
# and the main options run (exit 0) on the threads backend; in an MPI build, mpirun gives the same bytes;
# a case breaking a rule exits 2 with one line naming it and writes no output; y of A16W16 cases equals
# an independent reference computed from the case file (lib/mega_moe_case.py).
# Usage: bash case_mega_moe.sh <path-to-megamoe> <source-dir>
set -u
source "$(dirname "${BASH_SOURCE[0]}")/lib/common.bash"
cli_mpi_env

n=0
gen_run() { # name ranks case-gen-options...
    local name=$1 ranks=$2
    shift 2
    n=$((n + 1))
    "$MEGAMOE" case-gen mega-moe -o "$WORK/$name.st" --ranks "$ranks" --seed "$n" "$@" || { bad "case-gen $name"; return; }
    if timeout 120 "$MEGAMOE" case "$WORK/$name.st" -o "$WORK/$name.out.st"; then ok; else bad "case $name"; return; fi
    if command -v mpirun >/dev/null && [ "$ranks" -le 4 ]; then
        if timeout 120 mpirun --allow-run-as-root -n "$ranks" "$MEGAMOE" case "$WORK/$name.st" -o "$WORK/$name.mpi.st" \
            --backend mpi >"$WORK/mpi.log" 2>&1; then
            if cmp -s "$WORK/$name.out.st" "$WORK/$name.mpi.st"; then ok; else bad "$name: MPI output differs from threads"; fi
        elif grep -q "no MPI" "$WORK/mpi.log"; then
            ok # a build without MPI
        else
            bad "$name: mpirun failed: $(tail -3 "$WORK/mpi.log")"
        fi
    fi
}

gen_run a16w16 3 --scenario a16w16 --shared-experts 2 --mask --zero-rank 1
gen_run a8w8_int 2 --scenario a8w8-int --topk-weights-type 1
gen_run a8w4_int 4 --scenario a8w4-int --transpose --combine-quant-mode 4
gen_run a8w8_fp_e4m3 2 --scenario a8w8-fp-e4m3 --activation gelu
gen_run a8w8_fp_e5m2 3 --scenario a8w8-fp-e5m2 --combine-quant-mode 3 --shared-experts 1
gen_run a8w4_fp 2 --scenario a8w4-fp --activation swigluoai --clamp 7
gen_run a4w4_fp 2 --scenario a4w4-fp --prequantized --activation situglu
gen_run dedup 4 --scenario a16w16 --combine-comm-mode 1 --topk 3
gen_run layered 4 --scenario a16w16 --combine-comm-mode 2 --rank-num-per-server 2 --topk 4
gen_run one_rank 1 --scenario a8w8-int --tokens 5

# Broken: combine_comm_mode 2 on a flat topology -> status 2, one line naming the attribute, no output.
"$MEGAMOE" case-gen mega-moe -o "$WORK/broken.st" --ranks 2 --combine-comm-mode 2 || bad "case-gen broken"
case_rejected "combine_comm_mode 2, flat" "$WORK/broken.st" "combine_comm_mode = 2"

# Independent check of the case runner's wiring: y of A16W16 cases recomputed from the case file alone
# (lib/mega_moe_case.py: float64 with the spec's BF16 rounding points), expert_token_nums exact;
# transposed weights, a shared expert, a mask and an idle rank, then the plain layout.
cli_require_python case_mega_moe
check_py="$(dirname "${BASH_SOURCE[0]}")/lib/mega_moe_case.py"
reference_case() { # name case-gen-options...
    local name=$1
    shift
    "$MEGAMOE" case-gen mega-moe -o "$WORK/$name.st" "$@" || { bad "case-gen $name"; return; }
    "$MEGAMOE" case "$WORK/$name.st" -o "$WORK/$name.out.st" || { bad "case $name"; return; }
    if python3 "$check_py" reference "$WORK/$name.st" "$WORK/$name.out.st"; then ok; else bad "$name: y differs from the reference"; fi
}
reference_case ref_layout --ranks 3 --shared-experts 1 --mask --transpose --zero-rank 1 --seed 4
reference_case ref_plain --ranks 2 --tokens 6 --topk 3 --seed 5

# Broken cases: each rule of the spec's "Validation" list (and of the file format) exits 2 with one line
# naming the parameter, its value and the rule, and writes no output.
"$MEGAMOE" case-gen mega-moe -o "$WORK/valid.st" --ranks 2 --shared-experts 1 || bad "case-gen valid"
if python3 "$check_py" broken "$MEGAMOE" "$WORK/valid.st"; then ok; else bad "broken mega_moe cases"; fi

# --timeout applies to mega_moe cases on the threads backend too (it was set for MPI only): a wait of
# 1 us cannot be met by 4 ranks on this machine's 2 cores, so the case fails naming the late ranks.
"$MEGAMOE" case-gen mega-moe -o "$WORK/t4.st" --ranks 4 --tokens 32 --hidden 256 --intermediate 128 || bad "case-gen t4"
"$MEGAMOE" case "$WORK/t4.st" -o "$WORK/t4.out.st" --timeout 0.000001 2>"$WORK/err"; rc=$?
[ "$rc" = 1 ] && grep -q "did not arrive within 1e-06 s" "$WORK/err" && [ ! -e "$WORK/t4.out.st" ] && ok ||
    bad "mega_moe --timeout on threads: exit $rc, stderr: $(cat "$WORK/err")"

cli_finish case_mega_moe
