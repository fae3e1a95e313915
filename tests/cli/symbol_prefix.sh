#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# tests/cli/symbol_prefix.sh: every external symbol the static library defines starts with mm_, so that
# linking libmegamoe.a into a program cannot collide with the program's own names (the shared library's
# exports are checked against the public headers in install_pkgconfig.sh; the static archive exposes
# every non-static function, private ones included).
# Usage: bash symbol_prefix.sh <path-to-megamoe> <source-dir>
set -u
source "$(dirname "$0")/lib/common.bash"
LIB="$(dirname "$MEGAMOE")/libmegamoe.a"

if [ -f "$LIB" ]; then ok; else bad "no static library at $LIB"; fi
if nm -g --defined-only "$LIB" >"$WORK/nm.txt" 2>"$WORK/nm.err"; then ok; else bad "nm failed: $(head -3 "$WORK/nm.err")"; fi
awk 'NF == 3 && $2 ~ /[TDBRCGSVW]/ {print $3}' "$WORK/nm.txt" | sort -u >"$WORK/defined.txt"
if [ -s "$WORK/defined.txt" ]; then ok; else bad "nm listed no defined symbols in $LIB"; fi
# AddressSanitizer adds one __odr_asan.<name> marker per global; it names a global the check covers.
grep -v -e '^mm_' -e '^__odr_asan\.mm_' "$WORK/defined.txt" >"$WORK/unprefixed.txt"
if [ ! -s "$WORK/unprefixed.txt" ]; then ok; else
    bad "external symbols of libmegamoe.a without the mm_ prefix: $(tr '\n' ' ' <"$WORK/unprefixed.txt")"
fi
cli_finish symbol_prefix
