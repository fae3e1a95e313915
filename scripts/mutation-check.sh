#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Mutation check: does the test suite catch the small bugs a user would hit? Applies each mutation of
# the list below (one small source edit, a known kind of bug) to a scratch copy of the tracked sources,
# rebuilds there (its own build directory, Release), runs the MegaMoE end-to-end tests (on this CPU's
# kernels, and again on the portable ones, MEGAMOE_ISA=ref, as CI does) and the unit tests of the
# touched area, and prints a table: which group of tests caught it, or SURVIVED.
#
#   scripts/mutation-check.sh [-k] [name ...]   all mutations, or only the named ones
#   scripts/mutation-check.sh --list            the names and what each one breaks
#
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
  'shared_first|src/ops/mega_moe/combine.c|s{(memset\(acc, 0, \(size_t\)s->H \* sizeof \*acc\);)(\n        if \(mode == 0\))}{$1\n        for (int64_t e = 0; e < S; e++) s->ops->add_bf16(acc, s->shared_out + (e * c->active_rows + a) * s->H, s->H);$2}; s{(\n        for \(int64_t e = 0; e < S; e\+\+\) \{\n[^\n]*\n        \})}{}|shared-expert rows summed before the routed terms'
  'combine_e4m3_for_e5m2|src/ops/mega_moe/combine.c src/ops/mega_moe/combine_send.c|s{(== 3 \? )MM_DTYPE_FP8_E5M2}{${1}MM_DTYPE_FP8_E4M3FN}g|combine_quant_mode 3 sends E4M3 instead of E5M2'
  'expert_dropped|src/ops/mega_moe/combine.c|s{(\n\s+)(const uint8_t \*slot = s->comb_local)}{$1if (ids[i * s->K + k] == 1) continue;$1$2}|expert 1 output dropped in the combine (mode 0)'
  'bf16_ties_away|src/format/bf16_inline.h|s{\(u \+ 0x7FFFu \+ \(\(u >> 16\) & 1u\)\) >> 16}{(u + 0x8000u) >> 16}|F32 -> BF16 rounds ties away from zero'
  'mx_scale_plus1|src/format/mx.c|s{return \(uint8_t\)\(e > emax \? e - emax : 0\);}{return (uint8_t)(e > emax ? e - emax + 1 : 1);}|MX scale byte one too high'
  'int8_mul_ties_away|src/format/int_quant.c|s{round_clamp\(x\[i\] \* m, 1\)}{round_clamp(x[i] * m, 0)}|INT8 mul-even quantization rounds ties away'
  'clamp_both_sides|src/ffn/activation.c|s{g = clamp_high\(g, act->clamp\);}{g = clamp_both(g, act->clamp);}|swiglu clamps the gate on both sides'
  'dispatch_weight_k0|src/ops/mega_moe/dispatch.c|s{mm_moe_topk_weight\(s, i, k\), s->stage_scale}{mm_moe_topk_weight(s, i, 0), s->stage_scale}|dispatched rows carry the first k gating weight'
)

# The tests run for every mutation: the MegaMoE end-to-end tests, and the unit tests of formats,
# GEMMs, activations and the reference (which catch format bugs directly).
e2e_tests=(test_mega_moe_quant test_mega_moe_a16w16 test_mega_moe_schedule test_mega_moe_activation)
unit_tests=(test_format_scalar test_format_exhaustive test_format_mx test_format_int test_ref_format
  test_gemm_kernels test_gemm_pack test_gemm_int4_small test_gemm_grouped test_ffn_activation_table
  test_ffn_rowops)

if [ "${1:-}" = --list ]; then
  for m in "${mutations[@]}"; do IFS='|' read -r name files _ what <<<"$m"; printf '%-24s %s (%s)\n' "$name" "$what" "$files"; done
  exit 0
fi
if [ "${1:-}" = -k ]; then keep=1; shift; fi
selected=("$@")

echo "mutation-check: scratch copy in $scratch"
rm -rf "$scratch"
mkdir -p "$scratch/src" "$scratch/pristine"
git ls-files -z | tar -c --null -T - | tar -x -C "$scratch/src"
git ls-files -z | tar -c --null -T - | tar -x -C "$scratch/pristine"
cmake -S "$scratch/src" -B "$scratch/build" -DCMAKE_BUILD_TYPE=Release -DMEGAMOE_WITH_MPI=OFF >"$scratch/configure.log" 2>&1

# Builds the tests and runs them (with the environment in $run_env); prints the names of the failing
# ones (or BUILD-FAILED).
run_env=
run_group() {
  local failed=()
  if ! cmake --build "$scratch/build" -j "$jobs" --target "$@" >"$scratch/build.log" 2>&1; then
    echo BUILD-FAILED
    return
  fi
  for t in "$@"; do
    if ! (cd "$scratch/build" && env $run_env timeout 600 "./tests/$t" >"$scratch/$t.log" 2>&1); then
      failed+=("$t")
    fi
  done
  echo "${failed[*]:-}"
}

echo "mutation-check: baseline (no mutation) must pass"
base=$(run_group "${e2e_tests[@]}" "${unit_tests[@]}")
if [ -n "$base" ]; then
  echo "mutation-check: the unmutated tree fails: $base" >&2
  exit 2
fi

status=0
printf '\n| mutation | what it breaks | MegaMoE end-to-end tests | the same, MEGAMOE_ISA=ref | unit tests |\n|---|---|---|---|---|\n' >"$scratch/table.md"
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
    e2e=$(run_group "${e2e_tests[@]}")
    portable=$(run_env=MEGAMOE_ISA=ref run_group "${e2e_tests[@]}")
    unit=$(run_group "${unit_tests[@]}")
    [ -z "$e2e" ] && [ -z "$portable" ] && [ -z "$unit" ] && status=1
    row="| $name | $what | ${e2e:-SURVIVED} | ${portable:-SURVIVED} | ${unit:-SURVIVED} |"
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
