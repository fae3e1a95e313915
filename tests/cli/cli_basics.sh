#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# tests/cli/cli_basics.sh: --help, version and the exit status of bad usage of the megamoe CLI.
# Usage: bash cli_basics.sh <path-to-megamoe> <source-dir>
set -u
source "$(dirname "${BASH_SOURCE[0]}")/lib/common.bash"

version=$(sed -n 's/^project(megamoe VERSION \([0-9.]*\).*/\1/p' "${SOURCE_DIR:?source dir}/CMakeLists.txt")

expect 0 "--help" -- --help
stdout_has "usage: megamoe <command>"
for cmd in run case case-gen bench version; do stdout_has "  $cmd "; done
stderr_empty
expect 0 "-h" -- -h
stdout_has "commands:"
expect 0 "version" -- version
if [ "$(cat "$WORK/out")" = "megamoe $version" ]; then ok; else bad "version printed '$(cat "$WORK/out")', expected 'megamoe $version'"; fi
expect 0 "--version" -- --version
if [ "$(cat "$WORK/out")" = "megamoe $version" ]; then ok; else bad "--version printed '$(cat "$WORK/out")'"; fi
expect 0 "help case" -- help case
stdout_has "usage: megamoe case IN"

# Every command has --help on stdout with status 0.
for cmd in run case case-gen bench version; do
    expect 0 "$cmd --help" -- "$cmd" --help
    stdout_has "usage: megamoe $cmd"
    stderr_empty
done
expect 0 "case-gen re-routing --help" -- case-gen re-routing --help
stdout_has "--expert-token-num-type"
expect 0 "bench re-routing --help" -- bench re-routing --help
stdout_has "--iterations"
expect 0 "bench lists" -- bench
for name in re-routing comm dispatch-combine ffn mega-moe; do stdout_has "  $name "; done
# Every benchmark, run operator and case-gen operator has its own --help (stdout, status 0, no stderr).
for name in re-routing comm dispatch-combine ffn mega-moe; do
    expect 0 "bench $name --help" -- bench "$name" --help
    stdout_has "usage: megamoe bench $name"
    stderr_empty
done
for op in mega-moe re-routing dispatch-combine; do
    expect 0 "run --op $op --help" -- run --op "$op" --help
    stdout_has "usage: megamoe run"
    stdout_has "$op"
    stderr_empty
done
for op in re-routing mega-moe dispatch-v3 combine-v2; do
    expect 0 "case-gen $op --help" -- case-gen "$op" --help
    stdout_has "usage: megamoe case-gen $op"
    stderr_empty
done

# Bad usage: status 2 and exactly one line on stderr that says what is wrong.
expect 2 "no command" --
stderr_is_one_line "no command"
expect 2 "unknown command" -- frobnicate
stderr_is_one_line "unknown command 'frobnicate'"
expect 2 "unknown global option" -- --frobnicate
stderr_is_one_line "unknown option '--frobnicate'"
expect 2 "case without input" -- case -o "$WORK/o.st"
stderr_is_one_line "missing input file"
expect 2 "case without -o" -- case "$WORK/in.st"
stderr_is_one_line "missing output file"
expect 2 "case unknown option" -- case "$WORK/in.st" -o "$WORK/o.st" --fast
stderr_is_one_line "unknown option '--fast'"
expect 2 "case -o without value" -- case "$WORK/in.st" -o
stderr_is_one_line "option '-o' needs a value"
expect 2 "case bad backend" -- case "$WORK/in.st" -o "$WORK/o.st" --backend gpu
stderr_is_one_line "--backend 'gpu'"
expect 2 "case bad timeout" -- case "$WORK/in.st" -o "$WORK/o.st" --timeout soon
stderr_is_one_line "--timeout 'soon' is not a number"
expect 2 "case two inputs" -- case "$WORK/a.st" "$WORK/b.st" -o "$WORK/o.st"
stderr_is_one_line "unexpected argument"
expect 2 "run bad tokens" -- run --tokens many
stderr_is_one_line "--tokens 'many' is not an integer"
expect 2 "run hidden out of range" -- run --op re-routing --hidden 16384
stderr_is_one_line "--hidden 16384 is outside [1, 16383]"
expect 2 "run bad dtype" -- run --op re-routing --dtype float128
stderr_is_one_line "--dtype 'float128'"
expect 2 "run unknown op" -- run --op nosuch
stderr_is_one_line "--op 'nosuch' is not an operator"
expect 2 "help for an unknown command" -- help nosuch
stderr_is_one_line "unknown command 'nosuch'"
expect 2 "bench comm bad ranks" -- bench comm --ranks 2,99
stderr_is_one_line "--ranks '2,99'"
expect 2 "bench unknown" -- bench nope
stderr_is_one_line "unknown benchmark 'nope'"
expect 2 "bench re-routing bad option" -- bench re-routing --warp 9
stderr_is_one_line "unknown option '--warp'"
expect 2 "case-gen unknown op" -- case-gen mega_blob -o "$WORK/x.st"
stderr_is_one_line "unknown operator 'mega_blob'"
expect 2 "case-gen without -o" -- case-gen re-routing
stderr_is_one_line "missing output file"
expect 2 "case-gen bad idx type" -- case-gen re-routing -o "$WORK/x.st" --idx-type 2
stderr_is_one_line "--idx-type 2 is outside [0, 1]"
expect 2 "version with argument" -- version extra
stderr_is_one_line "unexpected argument 'extra'"
expect 0 "version --features" -- version --features
if grep -qxE "mpi backend: (yes|no)" "$WORK/out"; then ok; else bad "version --features printed '$(cat "$WORK/out")'"; fi
if [ ! -e "$WORK/x.st" ] && [ ! -e "$WORK/o.st" ]; then ok; else bad "a failed command created a file"; fi

# A missing input file is an I/O failure: status 1, one line naming the file.
expect 1 "case missing input" -- case "$WORK/absent.st" -o "$WORK/o.st"
stderr_is_one_line "absent.st"

# A usage error of an operator points to that operator's help, once.
expect 2 "run --op dispatch-combine bad option" -- run --op dispatch-combine --warp 9
stderr_is_one_line "unknown option '--warp' (see 'megamoe run --op dispatch-combine --help')"
expect 2 "case-gen mega-moe unknown scenario" -- case-gen mega-moe -o "$WORK/x.st" --scenario a9w9
stderr_is_one_line "--scenario 'a9w9' is not known (see 'megamoe case-gen mega-moe --help')"
if [ "$(grep -o "(see " "$WORK/err" | wc -l)" -eq 1 ]; then ok; else bad "doubled (see ...): $(cat "$WORK/err")"; fi
expect 2 "bench re-routing bad value" -- bench re-routing --iterations 0
stderr_is_one_line "(see 'megamoe bench re-routing --help')"

# Counts of one are singular in the run header.
expect 0 "run, one of each" -- run --hidden 64 --intermediate 32 --experts 8 --tokens 1 --ranks 1 --iterations 1
stdout_has "1 rank (threads) x 1 token, seed 1, routing skew 1; 1 timed call after 1 warm-up; 1 token per rank checked"
stdout_has "MegaMoE layer of the shape of Qwen3-30B-A3B (preset qwen3-30b-a3b), H and I overridden: H 64, I 32"

cli_finish cli_basics
