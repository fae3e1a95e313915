#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Mutation check: does the test suite catch the small bugs a user would hit? Applies each mutation of
# the list below (one small source edit, a known kind of bug) to a scratch copy of the tracked sources,
# rebuilds there (its own build directory, Release), runs the MegaMoE end-to-end tests (on this CPU's
# kernels, and again on the portable ones, MEGAMOE_ISA=ref, as CI does) and the unit tests of the
# touched area, and prints a table: which group of tests caught it, or SURVIVED.
#
#   scripts/mutation-check.sh [-k] [-r] [name ...]   all mutations, or only the named ones
#     -k keeps the scratch directory; -r reuses a kept one (no new copy, build or baseline run)
#   scripts/mutation-check.sh --list            the names and what each one breaks
#
# The portable run and the other tests run only for mutations the native end-to-end run let through
# (ALL=1: for every mutation).
# Scratch: $MUTATION_DIR (default /tmp/megamoe-mutation); -k keeps it. Takes a few minutes per
# mutation on 2 cores (set CMAKE_C_COMPILER_LAUNCHER=ccache to reuse objects): not run in CI
# (docs/testing.md). Exit status 1 when a mutation survived or did not apply.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)
scratch=${MUTATION_DIR:-/tmp/megamoe-mutation}
keep=0
jobs=${JOBS:-2}

# name | file | perl substitution (applied with perl -0pi, so it may span lines) | what it breaks
mutations=(
  'weight_x1.01|src/ops/mega_moe/call_state.h|s{return \(\(const float \*\)t->data\)\[i \* s->K \+ k\];}{return ((const float *)t->data)[i * s->K + k] * (((const int32_t *)s->in->topk_ids->data)[i * s->K + k] == 0 ? 1.01f : 1.0f);}|expert 0 gating weight x 1.01'
  'int4_bias_offset_0|src/gemm/pack.c|s{w->col_offset\[pc\] = d->bias\[n\] - 8\.0f \* s \* \(float\)sum;}{w->col_offset[pc] = 0.0f;}|A8W4-INT packed bias offset dropped'
  'shared_first|src/ops/mega_moe/combine_sum.c|s{(\n    for \(int64_t e = 0; e < S; e\+\+\) )ops->add_bf16\(acc, shared \+ e \* stride, H\);}{\n    static _Thread_local float sh[1 << 16];\n    memset(sh, 0, (size_t)H * sizeof *sh);$1ops->add_bf16(sh, shared + e * stride, H);\n    if (S > 0) for (int64_t x = 0; x < H; x++) acc[x] = sh[x] + acc[x];}|shared-expert rows summed before the routed terms'
  'combine_e4m3_for_e5m2|src/ops/mega_moe/combine_send.c|s{(== 3 \? )MM_DTYPE_FP8_E5M2}{${1}MM_DTYPE_FP8_E4M3FN}g|combine_quant_mode 3 sends E4M3 instead of E5M2'
  'expert_dropped|src/ops/mega_moe/combine_sum.c|s{if \(at < 0\) continue;}{if (at < 0) continue;\n        if (k == 1) continue;}|the second top-k output dropped in the combine sum'
  'bf16_ties_away|src/format/bf16_inline.h|s{\(u \+ 0x7FFFu \+ \(\(u >> 16\) & 1u\)\) >> 16}{(u + 0x8000u) >> 16}|F32 -> BF16 rounds ties away from zero'
  'mx_scale_plus1|src/format/mx.c|s{return \(uint8_t\)\(e > emax \? e - emax : 0\);}{return (uint8_t)(e > emax ? e - emax + 1 : 1);}|MX scale byte one too high'
  'int8_mul_ties_away|src/format/int_quant.c|s{round_clamp\(x\[i\] \* m, 1\)}{round_clamp(x[i] * m, 0)}|INT8 mul-even quantization rounds ties away'
  'clamp_both_sides|src/ffn/activation.c|s{g = clamp_high\(g, act->clamp\);}{g = clamp_both(g, act->clamp);}|swiglu clamps the gate on both sides'
  'dispatch_weight_k0|src/ops/mega_moe/dispatch.c|s{mm_moe_topk_weight\(s, i, k\), s->stage_scale}{mm_moe_topk_weight(s, i, 0), s->stage_scale}|dispatched rows carry the first k gating weight'
  'bf16_ties_away_avx512|src/ffn/rowops_avx512.c|s{_mm512_set1_epi32\(0x7FFF\)\), lsb\)}{_mm512_set1_epi32(0x7FFF)), _mm512_or_si512(lsb, _mm512_set1_epi32(1)))}|the AVX-512 F32 -> BF16 row rounding rounds ties away from zero'
  'int8_mul_ties_away_avx512|src/ffn/rowops_avx512.c|s{if \(half_even\) \{(\s+r = _mm512_roundscale_ps)}{if (0) \{$1}|the AVX-512 INT8 mul-even quantizer rounds ties away'
  'nibble_order_weights|src/gemm/pack.c|s{(mm_nibble_get\(bytes \+ row \* mm_dtype_row_bytes\(d->dtype, row_len\), col)\)}{$1 ^ 1)}|packing reads 4-bit weights high nibble first'
  'nibble_order_acts|src/gemm/prepare_rows.c|s{>> \(\(i & 1\) \* 4\)}{>> ((~i & 1) * 4)}|FP4 activation rows decoded high nibble first'
  'last_kblock_short|src/gemm/grouped.c|s{(args\.last = args\.k_end == w->k;)}{$1\n        if (args.last && args.k_end - k_begin > 32) args.k_end = k_begin + ((args.k_end - k_begin - 1) & ~(int64_t)31);}|the last K block of a GEMM stops 1..32 values short'
  'mx_last_block_dropped|src/format/mx.c|s{for \(int64_t g = 0; g \* MX_GROUP < n; g\+\+\)}{for (int64_t g = 0; (g + 1) * MX_GROUP <= n; g++)}g|the MX quantizers skip a partial last block of 32'
)

# The tests run for every mutation, in two groups: the MegaMoE end-to-end tests, and every other C test
# of the suite (tests/test_*.c: formats, GEMMs, activations, the reference, the pinned combine cases,
# the threads backend, ...). The CLI and MPI tests are not run (the scratch build has no MPI).
e2e_regex='^test_mega_moe_(quant|a16w16|schedule|activation)$'
rest_regex='^test_'

if [ "${1:-}" = --list ]; then
  for m in "${mutations[@]}"; do IFS='|' read -r name files _ what <<<"$m"; printf '%-24s %s (%s)\n' "$name" "$what" "$files"; done
  exit 0
fi
reuse=0
while [ "${1:-}" = -k ] || [ "${1:-}" = -r ]; do
  [ "$1" = -k ] && keep=1
  [ "$1" = -r ] && reuse=1 keep=1
  shift
done
selected=("$@")

if [ $reuse = 1 ] && [ -d "$scratch/build" ] && [ -d "$scratch/pristine" ]; then
  # -r: the scratch copy of an earlier -k run, whose unmutated tree passed; its sources must be the
  # pristine ones (a file left mutated by an interrupted run is copied back, so it is rebuilt).
  echo "mutation-check: reusing $scratch"
  (cd "$scratch/pristine" && find . -type f) | while read -r f; do
    cmp -s "$scratch/src/$f" "$scratch/pristine/$f" || cp "$scratch/pristine/$f" "$scratch/src/$f"
  done
else
  reuse=0
  echo "mutation-check: scratch copy in $scratch"
  rm -rf "$scratch"
  mkdir -p "$scratch/src" "$scratch/pristine"
  git ls-files -z | tar -c --null -T - | tar -x -C "$scratch/src"
  git ls-files -z | tar -c --null -T - | tar -x -C "$scratch/pristine"
  cmake -S "$scratch/src" -B "$scratch/build" -DCMAKE_BUILD_TYPE=Release -DMEGAMOE_WITH_MPI=OFF \
    ${CMAKE_C_COMPILER_LAUNCHER:+-DCMAKE_C_COMPILER_LAUNCHER=$CMAKE_C_COMPILER_LAUNCHER} >"$scratch/configure.log" 2>&1
fi

# Builds the C tests and runs the CTest tests matching $1 (and not $2), with the environment in
# $run_env; prints the names of the failing ones (or BUILD-FAILED). A test exiting 77 is skipped.
run_env=
test_targets=$(cd "$scratch/src/tests" && ls test_*.c | sed 's/\.c$//')
run_group() {
  # Only the group's executables are (re)linked: relinking all of them is most of a row's time.
  local targets
  targets=$(printf '%s\n' $test_targets | grep -E "$1" | { if [ -n "${2:-}" ]; then grep -vE "$2"; else cat; fi; })
  # shellcheck disable=SC2086 # one target per word
  if ! cmake --build "$scratch/build" -j "$jobs" --target $targets >"$scratch/build.log" 2>&1; then
    echo BUILD-FAILED
    return
  fi
  rm -f "$scratch/build/Testing/Temporary/LastTestsFailed.log"
  (cd "$scratch/build" && env $run_env ctest -j "$jobs" -R "$1" ${2:+-E "$2"} >"$scratch/ctest.log" 2>&1) || true
  if [ -f "$scratch/build/Testing/Temporary/LastTestsFailed.log" ]; then
    sed 's/^[0-9]*://' "$scratch/build/Testing/Temporary/LastTestsFailed.log" | tr '\n' ' ' | sed 's/ $//'
  fi
  echo
}

if [ $reuse = 0 ]; then
  echo "mutation-check: baseline (no mutation) must pass"
  base=$(run_group "$rest_regex")
  if [ -n "$base" ]; then
    echo "mutation-check: the unmutated tree fails: $base" >&2
    exit 2
  fi
fi

status=0
printf '\n| mutation | what it breaks | MegaMoE end-to-end tests | the same, MEGAMOE_ISA=ref | every other C test |\n|---|---|---|---|---|\n' >"$scratch/table.md"
for m in "${mutations[@]}"; do
  IFS='|' read -r name files expr what <<<"$m"
  if [ ${#selected[@]} -gt 0 ] && [[ " ${selected[*]} " != *" $name "* ]]; then continue; fi
  applied=0
  for f in $files; do
    perl -0pi -e "$expr" "$scratch/src/$f"
    cmp -s "$scratch/src/$f" "$scratch/pristine/$f" || applied=1
  done
  if [ $applied = 0 ]; then
    row="| $name | $what | NOT APPLIED (source changed?) | | |"
    status=1
  else
    e2e=$(run_group "$e2e_regex")
    # The other groups only matter where this CPU's end-to-end run let the mutation through (a
    # mutation caught there is caught by the suite); ALL=1 runs them for every mutation.
    portable="(not run)" rest="(not run)"
    if [ -z "$e2e" ] || [ "${ALL:-0}" = 1 ]; then
      portable=$(run_env=MEGAMOE_ISA=ref run_group "$e2e_regex")
      rest=$(run_group "$rest_regex" "$e2e_regex")
    fi
    [ -z "$e2e" ] && [ -z "$rest" ] && status=1
    row="| $name | $what | ${e2e:-SURVIVED} | ${portable:-SURVIVED} | ${rest:-SURVIVED} |"
  fi
  echo "$row"
  echo "$row" >>"$scratch/table.md"
  for f in $files; do cp "$scratch/pristine/$f" "$scratch/src/$f"; done
done
echo
echo "mutation-check: results (failing tests per group; SURVIVED = no test in the group failed)"
cat "$scratch/table.md"
[ $keep = 1 ] || rm -rf "$scratch"
exit $status
