#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Fails (exit 1) listing every tracked C file that clang-format would change. The files go to
# clang-format in batches on every core (one process per file cost CI ~90 s for ~400 files).
set -euo pipefail
cd "$(dirname "$0")/.."
jobs=$(nproc 2>/dev/null || echo 2)
report=$(git ls-files -z '*.c' '*.h' |
  xargs -0 -n 40 -P "$jobs" clang-format --dry-run --Werror 2>&1 >/dev/null || true)
# Diagnostics read "FILE:LINE:COL: error: code should be clang-formatted"; anything else is clang-format
# itself failing (missing binary, unreadable .clang-format), which must fail the check too.
bad_files=$(printf '%s\n' "$report" | sed -n 's/^\([^:]*\):[0-9]*:[0-9]*: error: .*clang-format.*/\1/p' | sort -u)
if [ -n "$bad_files" ]; then
  printf 'format-check: %s is not clang-formatted (run: make format)\n' $bad_files
  exit 1
fi
if printf '%s\n' "$report" | grep -q .; then
  printf 'format-check: clang-format failed:\n%s\n' "$report" | head -20
  exit 1
fi
exit 0
