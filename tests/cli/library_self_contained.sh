#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# tests/cli/library_self_contained.sh: libmegamoe links alone. Every mm_ symbol an object of
# libmegamoe.a references is defined in libmegamoe.a itself, the shared library needs no mm_ symbol from
# elsewhere, and nothing of the support library (support/: the float64 reference and the bench-only
# paths, linked by the tests and the CLI only) is in either: the library never depends on it.
# Usage: bash library_self_contained.sh <path-to-megamoe> <source-dir>
set -u
source "$(dirname "$0")/lib/common.bash"
BUILD=$(dirname "$MEGAMOE")
LIB="$BUILD/libmegamoe.a"
SO="$BUILD/libmegamoe.so"
SUPPORT="$BUILD/libmegamoe_support.a"

for f in "$LIB" "$SO" "$SUPPORT"; do
    if [ -e "$f" ]; then ok; else bad "missing $f"; fi
done
# nm lines are "ADDR TYPE NAME" for definitions and "U NAME" for references.
nm "$LIB" 2>/dev/null | awk 'NF == 3 && $2 ~ /^[A-TV-Z]$/ {print $3}' | sort -u >"$WORK/lib_defined"
nm "$LIB" 2>/dev/null | awk 'NF == 2 && $1 == "U" {print $2}' | sort -u >"$WORK/lib_used"
nm "$SUPPORT" 2>/dev/null | awk 'NF == 3 && $2 ~ /^[A-TV-Z]$/ {print $3}' | sort -u >"$WORK/support_defined"
if [ -s "$WORK/lib_defined" ] && [ -s "$WORK/lib_used" ] && [ -s "$WORK/support_defined" ]; then ok; else
    bad "nm listed no symbols"
fi

comm -23 "$WORK/lib_used" "$WORK/lib_defined" | grep '^mm_' >"$WORK/lib_missing"
if [ ! -s "$WORK/lib_missing" ]; then ok; else
    bad "libmegamoe.a references mm_ symbols it does not define: $(tr '\n' ' ' <"$WORK/lib_missing")"
fi
comm -12 "$WORK/lib_defined" "$WORK/support_defined" >"$WORK/both"
if [ ! -s "$WORK/both" ]; then ok; else
    bad "support symbols inside libmegamoe.a: $(tr '\n' ' ' <"$WORK/both")"
fi
nm -D --undefined-only "$SO" 2>/dev/null | awk '{print $NF}' | grep '^mm_' >"$WORK/so_missing"
if [ ! -s "$WORK/so_missing" ]; then ok; else
    bad "libmegamoe.so needs mm_ symbols from elsewhere: $(tr '\n' ' ' <"$WORK/so_missing")"
fi
nm -D --defined-only "$SO" 2>/dev/null | awk '{print $NF}' | sort -u | comm -12 - "$WORK/support_defined" >"$WORK/so_both"
if [ ! -s "$WORK/so_both" ]; then ok; else
    bad "support symbols exported by libmegamoe.so: $(tr '\n' ' ' <"$WORK/so_both")"
fi
cli_finish library_self_contained
