#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Runs every libFuzzer target for a bounded time: builds build-fuzz/ (clang, MEGAMOE_FUZZ=ON), generates
# seed corpora with the CLI (`megamoe case-gen OP`, small sizes; nothing large is committed), then runs
#   fuzz_safetensors  on the crafted seeds + the generated case files (they are safetensors files)
#   fuzz_case         once per operator, on that operator's generated cases
# each for SECONDS seconds. A crash, leak, sanitizer report or hang fails the script; libFuzzer writes
# the input to build-fuzz/artifacts/<target>/ (save it under tests/fuzz/regressions/<target>/ once the
# bug is fixed, docs/testing.md).
#   tests/fuzz/run.sh [SECONDS] [CLI]     defaults: 60, build/megamoe (a normal build's CLI)
set -euo pipefail
cd "$(dirname "$0")/../.."
seconds=${1:-60}
cli=${2:-build/megamoe}
out=build-fuzz
[ -x "$cli" ] || { echo "fuzz: $cli is missing: build first (make)" >&2; exit 2; }

CC=clang cmake -S . -B "$out" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DMEGAMOE_FUZZ=ON -DMEGAMOE_WITH_MPI=OFF >/dev/null
cmake --build "$out" -j "$(nproc 2>/dev/null || echo 2)" --target fuzz_safetensors fuzz_case

# Seeds: a few small cases of each operator and option family, fixed seeds so a run is reproducible.
corpus=$out/corpus
rm -rf "$corpus"
gen() { # gen OP NAME OPTIONS...  (OP as the CLI spells it; the corpus folders keep the old names)
  local op=$1 name=$2 dir=${1//-/_}
  shift 2
  mkdir -p "$corpus/case_$dir"
  "$cli" case-gen "$op" -o "$corpus/case_$dir/${dir}_$name.safetensors" "$@" >/dev/null
}
gen re-routing small --tokens 8 --hidden 16 --ranks 2 --experts 4
gen re-routing fp4_scales --tokens 6 --hidden 7 --ranks 2 --experts 3 --dtype fp4_e2m1 --scales e8m0 --scale-cols 2
gen re-routing int8_int64 --tokens 5 --hidden 8 --ranks 3 --experts 2 --dtype int8 --count-dtype int64 --scales f32 --idx-type 1
gen mega-moe a16w16 --ranks 2 --tokens 4 --hidden 32 --intermediate 16 --experts 4 --topk 2
gen mega-moe a8w4_shared --scenario a8w4-int --ranks 2 --tokens 4 --hidden 64 --intermediate 32 --experts 2 --topk 2 --shared-experts 1
gen mega-moe fp8_mask --scenario a8w8-fp-e4m3 --ranks 2 --tokens 3 --hidden 64 --intermediate 32 --experts 2 --topk 1 --mask
gen dispatch-v3 small --ranks 2 --tokens 4 --hidden 32 --topk 2
gen dispatch-v3 tp_quant_shared --ranks 3 --tp 2 --tokens 3 --hidden 32 --quant-mode 2 --smooth --mask 1d --shared-experts 1 --shared-ranks 1
gen dispatch-v3 special_removed --ranks 3 --tokens 4 --hidden 32 --zero-experts 1 --copy-experts 1 --const-experts 1 --uneven-bs --remove 2
gen combine-v2 small --ranks 2 --tokens 4 --hidden 32 --topk 2
gen combine-v2 shared_quant_mask --ranks 3 --tokens 3 --hidden 32 --shared-x --shared-experts 1 --shared-ranks 1 --quant-mode 2 --mask 2d
mkdir -p "$corpus/safetensors"
cp tests/fuzz/seeds/safetensors/* "$corpus"/case_*/*.safetensors "$corpus/safetensors/"

# -timeout: one input taking longer is a hang (the harness gives the library 5 s for a collective);
# -rss_limit_mb / -malloc_limit_mb: the resource cap, so a small case that makes the runner allocate
# gigabytes is reported as such instead of taking the machine down.
# UBSan: fatal, with a stack, except the known issues held back in known-issues.supp.
export UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1:suppressions=$PWD/tests/fuzz/known-issues.supp
flags=(-max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 -malloc_limit_mb=1024 -print_final_stats=1)
run() { # run TARGET LABEL CORPUS...: libFuzzer's log goes to build-fuzz/artifacts/LABEL.log
  local target=$1 label=$2
  shift 2
  local log=$out/artifacts/$label.log start=$SECONDS
  mkdir -p "$out/artifacts/$target"
  echo "fuzz: $label (fuzz_$target) for ${seconds}s"
  if ! "$out/tests/fuzz/fuzz_$target" "${flags[@]}" -artifact_prefix="$out/artifacts/$target/" "$@" \
    tests/fuzz/seeds/"$target" tests/fuzz/regressions/"$target" >"$log" 2>&1; then
    tail -n 80 "$log"
    echo "fuzz: $label FAILED; the input is in $out/artifacts/$target/ (log: $log)" >&2
    return 1
  fi
  grep -E '^stat::(number_of_executed_units|new_units_added|peak_rss_mb)' "$log" | tr '\n' ' '
  echo "($((SECONDS - start)) s)"
}
status=0
run safetensors safetensors "$corpus/safetensors" || status=1
for dir in "$corpus"/case_*; do
  run case "$(basename "$dir")" "$dir" || status=1
done
exit $status
