#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# tests/cli/version_verbose.sh: `megamoe version --verbose` reports what this build and machine use: the
# run-time ISA level and kernels follow MEGAMOE_ISA, the thread count follows MEGAMOE_NUM_THREADS, the MPI
# line agrees with --features, and every GEMM pair the registry supports has a kernel of the chosen level.
# Usage: bash version_verbose.sh <path-to-megamoe> <source-dir>
set -u
source "$(dirname "$0")/lib/common.bash"

expect 0 "version --verbose" -- version --verbose
stderr_empty
for line in "build type: " "compiler: " "isa levels compiled in: ref" "cpu: " "cpu supports: ref" \
    "isa level at run time: " "threads: " "mpi backend: " "cpu profile: " "tune cache: " "gemm kernels"; do
    stdout_has "$line"
done
cp "$WORK/out" "$WORK/verbose"
pairs=$(grep -c '^  [a-z0-9_]* x [a-z0-9_]* ' "$WORK/verbose")
if [ "$pairs" -eq 13 ]; then ok; else bad "expected the 13 GEMM pairs of the registry, got $pairs"; fi

# The MPI line is the same as --features'.
expect 0 "version --features" -- version --features
if [ "$(grep '^mpi backend:' "$WORK/out")" = "$(grep '^mpi backend:' "$WORK/verbose")" ]; then ok; else
    bad "--verbose and --features disagree on the MPI backend"
fi

# MEGAMOE_ISA=ref: the run-time level is ref and every kernel is a portable one (3 per pair).
MEGAMOE_ISA=ref MEGAMOE_NUM_THREADS=3 "$MEGAMOE" version --verbose >"$WORK/ref" 2>&1
if grep -qx "isa level at run time: ref (MEGAMOE_ISA=ref)" "$WORK/ref"; then ok; else bad "MEGAMOE_ISA=ref not reported: $(grep 'run time' "$WORK/ref")"; fi
if grep -qx "threads: 3 (MEGAMOE_NUM_THREADS=3)" "$WORK/ref"; then ok; else bad "MEGAMOE_NUM_THREADS=3 not reported: $(grep threads "$WORK/ref")"; fi
refs=$(grep '^  [a-z0-9_]* x ' "$WORK/ref" | grep -o '_ref_4x32' | wc -l)
if [ "$refs" -eq 39 ]; then ok; else bad "MEGAMOE_ISA=ref: $refs portable kernels listed, expected 39"; fi

# Without the cap, the many-rows kernel of every pair is of the run-time level (the registry has every
# pair at every level), except the weight-only pairs (bf16 x fp8_e4m3fn / fp4_e2m1 / uint4), which have
# no AMX kernel and run on AVX-512 there (docs/gemm.md, "Weight-only formats").
level=$(sed -n 's/^isa level at run time: \([a-z0-9]*\).*/\1/p' "$WORK/verbose")
if [ -n "$level" ]; then ok; else bad "no run-time ISA level"; fi
weight_only='^  bf16 x (fp8_e4m3fn|fp4_e2m1|uint4) '
grep '^  [a-z0-9_]* x ' "$WORK/verbose" | grep -Ev "$weight_only" | awk '{print $NF}' >"$WORK/many"
if [ "$(grep -vc "_${level}_" "$WORK/many")" -eq 0 ]; then ok; else bad "many-rows kernels not all $level: $(tr '\n' ' ' <"$WORK/many")"; fi
wo_level=$level
if [ "$level" = amx ]; then wo_level=avx512; fi
grep -E "$weight_only" "$WORK/verbose" | awk '{print $NF}' >"$WORK/many_wo"
if [ "$(wc -l <"$WORK/many_wo")" -eq 3 ] && [ "$(grep -vc "_${wo_level}_" "$WORK/many_wo")" -eq 0 ]; then ok; else
    bad "weight-only many-rows kernels not all $wo_level: $(tr '\n' ' ' <"$WORK/many_wo")"
fi

expect 2 "version --verbose extra" -- version --verbose extra
stderr_is_one_line "unexpected argument 'extra'"

cli_finish version_verbose
