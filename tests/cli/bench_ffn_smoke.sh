#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# tests/cli/bench_ffn_smoke.sh: `megamoe bench ffn --quick` runs and prints its tables (no timing is
# asserted: speed is the benchmark's business, not a test's); bad options exit 2 with one stderr line.
# Usage: bash bench_ffn_smoke.sh <path-to-megamoe> <source-dir>
set -u
source "$(dirname "${BASH_SOURCE[0]}")/lib/common.bash"

# The user's quick run as it is; in a sanitizer build (whose point is the memory checks, not the shape)
# a small shape, which took the step ~50 s less.
shape=() H=2048
if grep -qE "^MEGAMOE_SANITIZE:BOOL=ON" "$(dirname "$MEGAMOE")/CMakeCache.txt" 2>/dev/null; then
    shape=(--hidden 256 --intermediate 128 --stream-mb 4 --iterations 2) H=256
fi
timeout 240 "$MEGAMOE" bench ffn --quick "${shape[@]}" >"$WORK/out" 2>"$WORK/err"
status=$?
if [ "$status" -eq 0 ]; then ok; else bad "bench ffn --quick exited $status: $(head -c 400 "$WORK/err")"; fi
for section in "(a) peak loops" "vdpbf16ps" "(b) streaming read" "(c) expert FFN" "(d) oneDNN" "(e) against the targets"; do
    if grep -qF -- "$section" "$WORK/out"; then ok; else bad "output lacks '$section'"; fi
done
# One table row per format at the quick shape (H = 2048), each ending in a number (the speed-up).
for format in bf16 int8 int8xint4 mxfp8 mxfp8xmxfp4 mxfp4; do
    if grep -qE "^$format +$H +(1|8|64) +[a-z0-9]+ +[a-z0-9_]+ .*[0-9]$" "$WORK/out"; then ok; else
        bad "no table row for $format"
    fi
done

# The summary has one verdict line per target and format (prefill %, scaling, decode; oneDNN for bf16/int8
# when built with it).
for format in bf16 int8 int8xint4 mxfp8 mxfp8xmxfp4 mxfp4; do
    if grep -qE "^$format decode: time / streaming bound .* (met|NOT met)$" "$WORK/out"; then ok; else
        bad "no decode verdict for $format"
    fi
done

bench_option_checks ffn --rows --quick

cli_finish bench_ffn_smoke
