#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# tests/cli/file_cycles.sh: no two files of one operator folder (src/ops/*) or of src/ffn call each
# other in a circle (scripts/check-file-cycles.py on the library's object files), so that each folder
# keeps an order in which its ideas can be read, tested and replaced one at a time; a future circle
# fails the suite with the files and the calls that close it.
# Usage: bash file_cycles.sh <path-to-megamoe> <source-dir>
set -u
source "$(dirname "$0")/lib/common.bash"
cli_require_python file_cycles
BUILD="$(dirname "$MEGAMOE")"
SCRIPT="$SOURCE_DIR/scripts/check-file-cycles.py"

if [ -f "$SCRIPT" ]; then ok; else bad "no $SCRIPT (source dir '$SOURCE_DIR')"; fi
# Every folder under src/ops (the script's default), then the expert FFN module.
for folders in "" "ffn"; do
    # shellcheck disable=SC2086  # an empty $folders means "no argument"
    if python3 "$SCRIPT" "$BUILD" $folders >"$WORK/out" 2>"$WORK/err"; then ok; else
        bad "circle(s) in ${folders:-src/ops}: $(cat "$WORK/out" "$WORK/err")"
    fi
    # The script must have looked at files: a folder line with a positive file count for each folder.
    if grep -qE '^src/[a-z_/]+: [1-9][0-9]* files, 0 circle' "$WORK/out"; then ok; else
        bad "no folder checked in ${folders:-src/ops}: $(head -c 400 "$WORK/out")"
    fi
done
if grep -q '^src/ops/mega_moe: ' <(python3 "$SCRIPT" "$BUILD"); then ok; else bad "src/ops/mega_moe not checked"; fi
cli_finish file_cycles
