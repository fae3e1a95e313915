#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Fails (exit 1) listing every tracked C file that clang-format would change.
set -euo pipefail
cd "$(dirname "$0")/.."
bad=0
while IFS= read -r f; do
  if ! clang-format --dry-run --Werror "$f" >/dev/null 2>&1; then
    echo "format-check: $f is not clang-formatted (run: make format)"
    bad=1
  fi
done < <(git ls-files '*.c' '*.h')
exit $bad
