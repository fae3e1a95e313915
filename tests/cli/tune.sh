#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# tests/cli/tune.sh: `megamoe tune` writes a cache that the library then uses (version --verbose says
# so, and its kernel lines follow the cache), keyed by this CPU; MEGAMOE_TUNE=0, a corrupt cache and a
# forced profile leave the profile's choices; MEGAMOE_CPU_PROFILE forces a profile and an unknown name
# is reported with the valid ones; bad options are usage errors. Timings are not checked.
# Usage: bash tune.sh <path-to-megamoe> <source-dir>
set -u
source "$(dirname "$0")/lib/common.bash"

cache="$WORK/sub/dir/kernels.txt"
expect 0 "tune small" -- tune --formats int8xint4,mxfp4 --hidden 256 --intermediate 128 --iterations 1 --out "$cache"
stdout_has "wrote $cache"
stderr_empty
if [ -f "$cache" ] && head -2 "$cache" | grep -qx "megamoe-tune 1"; then ok; else bad "no cache at $cache"; fi
if grep -q "^int8xint4 1:" "$cache" && grep -q "^mxfp4 1:" "$cache" && ! grep -q "^bf16 " "$cache"; then ok; else
    bad "cache lines: $(cat "$cache")"
fi

# The library reads it (MEGAMOE_TUNE_FILE); a hand-written class line steers the kernel lines.
cpu=$(sed -n 's/^cpu //p' "$cache")
version=$(sed -n 's/^version //p' "$cache")
printf 'megamoe-tune 1\ncpu %s\nversion %s\nint8xint4 1:avx512 64:avx512-few\n' "$cpu" "$version" >"$WORK/hand.txt"
MEGAMOE_TUNE_FILE="$WORK/hand.txt" "$MEGAMOE" version --verbose >"$WORK/out" 2>"$WORK/err"
if grep -q "isa level at run time: ref" "$WORK/out"; then
    stdout_has "tune cache: $WORK/hand.txt ignored"
else
    stdout_has "tune cache: $WORK/hand.txt used for int8xint4"
    if grep -q '^  int8 x int4 *i8xi4_avx512_8x32 / i8xi4_avx512_8x32 / i8xi4_avx512_small_8x32$' "$WORK/out"; then ok; else
        bad "int8 x int4 kernels do not follow the cache: $(grep 'int8 x int4' "$WORK/out")"
    fi
fi
MEGAMOE_TUNE=0 MEGAMOE_TUNE_FILE="$WORK/hand.txt" "$MEGAMOE" version --verbose >"$WORK/out" 2>&1
stdout_has "tune cache: off (MEGAMOE_TUNE=0)"
printf 'megamoe-tune 1\ncpu %s\nversion %s\nint8xint4 5:avx512 2:amx\n' "$cpu" "$version" >"$WORK/bad.txt"
MEGAMOE_TUNE_FILE="$WORK/bad.txt" "$MEGAMOE" version --verbose >"$WORK/out" 2>&1
stdout_has "ignored: line 4: step '2:amx'"
printf 'megamoe-tune 1\ncpu Other 1 2 cpu\nversion %s\nint8xint4 1:avx512\n' "$version" >"$WORK/other.txt"
MEGAMOE_TUNE_FILE="$WORK/other.txt" "$MEGAMOE" version --verbose >"$WORK/out" 2>&1
stdout_has "ignored: measured on another CPU"

# Forced profiles.
MEGAMOE_CPU_PROFILE=sapphire-rapids MEGAMOE_TUNE_FILE="$WORK/hand.txt" "$MEGAMOE" version --verbose >"$WORK/out" 2>&1
stdout_has "cpu profile: sapphire-rapids (MEGAMOE_CPU_PROFILE;"
stdout_has "tune cache: not read (MEGAMOE_CPU_PROFILE forces a profile)"
MEGAMOE_CPU_PROFILE=pentium "$MEGAMOE" version --verbose >"$WORK/out" 2>&1
stdout_has "cpu profile error: MEGAMOE_CPU_PROFILE = 'pentium' is not a CPU profile (one of: sapphire-rapids, emerald-rapids, granite-rapids, zen4, zen5, generic)"
MEGAMOE_CPU_PROFILE=pentium timeout 120 "$MEGAMOE" tune --formats int8 --out "$WORK/x.txt" >"$WORK/out" 2>"$WORK/err"
if [ $? -ne 0 ] && [ ! -e "$WORK/x.txt" ]; then ok; else bad "tune with an unknown profile should fail"; fi
stderr_is_one_line "MEGAMOE_CPU_PROFILE = 'pentium' is not a CPU profile"

expect 2 "tune bad format" -- tune --formats int9
stderr_is_one_line "--formats: unknown or repeated format 'int9'"
expect 2 "tune bad iterations" -- tune --iterations 0
expect 0 "tune --help" -- tune --help
stdout_has "usage: megamoe tune"

cli_finish tune
