#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Bit-identity check for refactors: `make` a corpus of generated case files with one build, store the
# outputs that build gives, then check that another build gives the same bytes for every case.
#   scripts/golden-outputs.sh make  MEGAMOE DIR   write DIR/in/*.st (case-gen) and DIR/out/*.st (case)
#   scripts/golden-outputs.sh check MEGAMOE DIR   run every DIR/in/*.st with MEGAMOE, cmp against DIR/out
# The corpus covers every operator, every MegaMoE scenario and activation, and the options of each.
set -uo pipefail
mode=${1:?make or check}; cli=${2:?path to megamoe}; dir=${3:?corpus folder}
cli=$(readlink -f "$cli")

gen() { # name op args...
    local name=$1 op=$2; shift 2
    "$cli" case-gen "$op" -o "$dir/in/$name.st" "$@" >/dev/null || { echo "case-gen failed: $name" >&2; return 1; }
}

make_corpus() {
    mkdir -p "$dir/in" "$dir/out"
    local s a
    for s in a16w16 a8w8-int a8w4-int a8w8-fp-e4m3 a8w8-fp-e5m2 a8w4-fp a4w4-fp; do
        for a in swiglu swiglustep swigluoai situglu gelu; do
            gen "mm_${s}_${a}" mega-moe --scenario "$s" --activation "$a" --ranks 2 --tokens 5
        done
        gen "mm_${s}_r1_opts" mega-moe --scenario "$s" --ranks 1 --tokens 6 --shared-experts 2 --mask \
            --topk-weights-type 1 --hidden 128 --intermediate 64
        gen "mm_${s}_r3_opts" mega-moe --scenario "$s" --ranks 3 --tokens 7 --shared-experts 1 --mask --transpose \
            --combine-comm-mode 1 --clamp 7 --zero-rank 1
        gen "mm_${s}_cq3" mega-moe --scenario "$s" --ranks 2 --combine-quant-mode 3
        gen "mm_${s}_layered" mega-moe --scenario "$s" --ranks 4 --combine-comm-mode 2 --rank-num-per-server 2
        gen "mm_${s}_cq4" mega-moe --scenario "$s" --ranks 2 --combine-quant-mode 4 --topk 3 --experts 6
        gen "mm_${s}_big" mega-moe --scenario "$s" --ranks 2 --tokens 40 --hidden 256 --intermediate 128 --seed 7
    done
    for s in a8w8-fp-e4m3 a8w4-fp a4w4-fp; do
        gen "mm_${s}_preq" mega-moe --scenario "$s" --ranks 2 --prequantized
    done
    local op n
    for op in dispatch-v3 combine-v2; do
        n=${op/-/_} # the corpus's file names keep the case-file spelling
        gen "${n}_plain" "$op"
        gen "${n}_shared" "$op" --ranks 6 --shared-experts 1 --shared-ranks 2 --experts 8 --zero-experts 1 \
            --copy-experts 1 --const-experts 2 --alpha-2d --mask 2d --shared-x --quant-mode 2 --smooth
        gen "${n}_tp2" "$op" --ranks 2 --tp 2 --tokens 4 --hidden 32 --mask 1d --uneven-bs
        gen "${n}_elastic" "$op" --ranks 5 --remove 1,3 --uneven-bs --quant-mode 2
        gen "${n}_cum" "$op" --expert-token-nums-type 0 --experts 8 --topk 3 --seed 3
    done
    local d
    for d in f16 bf16 int8 fp8_e5m2 fp8_e4m3fn hifloat8 fp4_e2m1 fp4_e1m2; do
        gen "rr_$d" re-routing --dtype "$d" --hidden 64
    done
    gen rr_scales re-routing --scales f32 --scale-cols 3 --expert-token-num-type 0 --idx-type 1 --count-dtype int64
    gen rr_e8m0 re-routing --dtype fp8_e4m3fn --scales e8m0 --scale-cols 2
    run_corpus "$dir/out"
    echo "golden: $(ls "$dir/in" | wc -l) cases written to $dir"
}

run_corpus() { # outdir
    local f fail=0 n=0
    mkdir -p "$1"
    for f in "$dir"/in/*.st; do
        n=$((n + 1))
        "$cli" case "$f" -o "$1/$(basename "$f")" 2>"$1/$(basename "$f" .st).err" || { echo "case failed: $f" >&2; fail=$((fail + 1)); }
    done
    return $fail
}

case "$mode" in
make) make_corpus ;;
check)
    tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
    run_corpus "$tmp"
    same=0 diff=0
    for f in "$dir"/out/*.st "$dir"/out/*.err; do
        if cmp -s "$f" "$tmp/$(basename "$f")"; then same=$((same + 1)); else diff=$((diff + 1)); echo "DIFFERS: $(basename "$f")"; fi
    done
    echo "golden: $same identical, $diff different"
    [ "$diff" -eq 0 ] ;;
*) echo "usage: $0 make|check MEGAMOE DIR" >&2; exit 2 ;;
esac
