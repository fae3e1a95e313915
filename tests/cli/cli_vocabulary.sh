#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# tests/cli/cli_vocabulary.sh: one option vocabulary across commands (docs/cli.md "Option vocabulary"):
#   1. every old spelling (of an option, a scenario, an operator or a benchmark) is rejected with exit 2
#      and one line naming its replacement, in every command that used to take it;
#   2. every command accepts the canonical names, on small shapes.
# Usage: bash cli_vocabulary.sh <path-to-megamoe> <source-dir>
set -u
source "$(dirname "${BASH_SOURCE[0]}")/lib/common.bash"

# renamed CMD-PREFIX OLD NEW -- ARGS...: megamoe ARGS exits 2 with exactly "megamoe: CMD-PREFIX: OLD was
# renamed NEW" on stderr.
renamed() {
    local prefix=$1 old=$2 now=$3
    shift 3
    if [ "${1:-}" = "--" ]; then shift; fi
    expect 2 "$*" -- "$@"
    if [ "$(cat "$WORK/err")" = "megamoe: $prefix: $old was renamed $now" ]; then
        ok
    else
        bad "$*: stderr '$(cat "$WORK/err")', expected 'megamoe: $prefix: $old was renamed $now'"
    fi
}
O=(-o "$WORK/x.st")

# 1. Old spellings, where each used to be accepted.
renamed run --inter --intermediate -- run --op dispatch-combine --inter 32
renamed run --inter --intermediate -- run --op dispatch-combine --inter=32
renamed case-gen --inter --intermediate -- case-gen mega-moe "${O[@]}" --inter 32
renamed case-gen --shared --shared-experts -- case-gen mega-moe "${O[@]}" --shared 1
renamed run "--combine-quant" "--combine-quant-mode (none 0, e5m2 3, e4m3 4)" -- run --combine-quant e4m3
renamed run --combine-comm --combine-comm-mode -- run --combine-comm 1
renamed run --ranks-per-server --rank-num-per-server -- run --ranks-per-server 2
renamed run "--scenario a8w8-fp8" a8w8-fp-e4m3 -- run --scenario a8w8-fp8
renamed run "--scenario a8w8-fp8-e5m2" a8w8-fp-e5m2 -- run --scenario=a8w8-fp8-e5m2
renamed bench "--scenario a8w8-fp8" a8w8-fp-e4m3 -- bench mega-moe --scenario a8w8-fp8
renamed bench --repetitions --iterations -- bench comm --repetitions 1
renamed bench --repetitions --iterations -- bench re-routing --repetitions 1
renamed bench --repetitions --iterations -- bench dispatch-combine --repetitions 1
renamed bench --repeat --iterations -- bench ffn --repeat 1
renamed case-gen re_routing re-routing -- case-gen re_routing "${O[@]}"
renamed case-gen moe_re_routing re-routing -- case-gen moe_re_routing "${O[@]}"
renamed case-gen mega_moe mega-moe -- case-gen mega_moe "${O[@]}"
renamed case-gen dispatch_v3 dispatch-v3 -- case-gen dispatch_v3 "${O[@]}"
renamed case-gen combine_v2 combine-v2 -- case-gen combine_v2 "${O[@]}"
renamed bench rerouting re-routing -- bench rerouting
renamed bench layer mega-moe -- bench layer
renamed run re_routing re-routing -- run --op re_routing
[ ! -e "$WORK/x.st" ] && ok || bad "a rejected case-gen wrote its output"

# 2. The canonical names, in every command.
expect 0 "run, attribute options" -- run --hidden 64 --intermediate 32 --experts 8 --tokens 2 --ranks 2 \
    --iterations 1 --scenario a8w8-fp-e4m3 --combine-quant-mode 4 --topk-weights-type 1
stdout_has "a8w8-fp-e4m3"
expect 0 "run, layered combine" -- run --hidden 64 --intermediate 32 --experts 8 --tokens 2 --ranks 4 \
    --iterations 1 --scenario a16w16 --combine-comm-mode 2 --rank-num-per-server 2
expect 0 "run, combine per source" -- run --hidden 64 --intermediate 32 --experts 8 --tokens 2 --ranks 2 \
    --iterations 1 --scenario a16w16 --combine-comm-mode 1
expect 0 "run --op dispatch-combine" -- run --op dispatch-combine --tokens 2 --hidden 64 --intermediate 32 \
    --iterations 1
expect 0 "run --op re-routing" -- run --op re-routing --tokens 64 --hidden 32 --iterations 1
expect 0 "case-gen mega-moe" -- case-gen mega-moe -o "$WORK/m.st" --ranks 4 --intermediate 32 --shared-experts 1 \
    --scenario a8w8-fp-e5m2 --combine-comm-mode 2 --rank-num-per-server 2
for op in dispatch-v3 combine-v2 re-routing; do
    expect 0 "case-gen $op" -- case-gen "$op" -o "$WORK/$op.st" --tokens 4 --hidden 32
done
for f in m dispatch-v3 combine-v2 re-routing; do expect 0 "case $f" -- case "$WORK/$f.st" -o "$WORK/${f}_out.st"; done
expect 0 "bench re-routing" -- bench re-routing --tokens 64 --hidden 32 --iterations 1 --warmup 0
expect 0 "bench comm" -- bench comm --ranks 2 --max-rows 4 --iterations 1 --warmup 0
expect 0 "bench dispatch-combine" -- bench dispatch-combine --ranks 2 --tokens 1 --hidden 64 --topk 2 \
    --experts-per-rank 2 --iterations 1 --warmup 0
# bench mega-moe runs full model shapes (tests/cli/bench_mega_moe.sh times one): here only its options
# are checked, up to the shape rule that follows them (3 ranks do not divide 128 experts).
expect 2 "bench mega-moe" -- bench mega-moe --phase decode --decode-tokens 2 --iterations 1 \
    --scenario a8w8-fp-e4m3 --ranks 3
stderr_is_one_line "3 ranks do not divide the 128 experts"
cli_finish cli_vocabulary
