#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# tests/cli/docs_self_contained.sh: nothing in the repository points to files outside it: no reference to
# the specification (spec/...) or the original documents (seeds/...) that megamoe was written from, which
# a clone does not have (docs/ restates what users need), except the fuzzers' own tests/fuzz/seeds/.
# Usage: bash docs_self_contained.sh <path-to-megamoe> <source-dir>
set -u
source "$(dirname "$0")/lib/common.bash"
cd "${SOURCE_DIR:?source dir}" || exit 1
if [ -f README.md ] && [ -d docs ]; then ok; else bad "no README.md / docs in $SOURCE_DIR"; fi
grep -rnE '(^|[^a-z_/])(spec|seeds)/' README.md docs include src tools support examples scripts cmake \
    CMakeLists.txt tests 2>/dev/null | grep -vE 'tests/fuzz/(seeds|regressions)/|(fuzz|tests/fuzz)/.*seeds/<|seeds/\$|seeds/"' \
    | grep -v '^tests/cli/docs_self_contained.sh:' >"$WORK/refs"
if [ ! -s "$WORK/refs" ]; then ok; else bad "references outside the repository: $(head -5 "$WORK/refs")"; fi
cli_finish docs_self_contained
