#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Lists every source file (C, headers, shell, Python, CMake, Makefile) without the license line
# "SPDX-License-Identifier: Apache-2.0" in its first three lines, and fails (exit 1) if there is one.
#   scripts/check-spdx.sh [DIR]         check (DIR: the source tree, default: this script's repository)
#   scripts/check-spdx.sh --fix [DIR]   add the line where it is missing: first line of the file, after a
#                                       "#!" line if there is one, so the file's what-for comment follows
# Files are git's tracked ones when DIR is a git work tree (so build trees are ignored), else found by
# name outside build*/ directories.
set -euo pipefail
fix=0
if [ "${1:-}" = "--fix" ]; then fix=1; shift; fi
root=${1:-"$(dirname "$0")/.."}
cd "$root"
tag="SPDX-License-Identifier: Apache-2.0"

list_files() {
  local patterns=('*.c' '*.h' '*.sh' '*.bash' '*.py' '*.cmake' '*.cmake.in' 'CMakeLists.txt' '*/CMakeLists.txt'
    'Makefile' '.ci/run')
  if git rev-parse --is-inside-work-tree >/dev/null 2>&1; then
    git ls-files -- "${patterns[@]}"
  else
    find . \( -path './build*' -o -path './.git' \) -prune -o -type f \( -name '*.c' -o -name '*.h' -o -name '*.sh' \
      -o -name '*.bash' -o -name '*.py' -o -name '*.cmake' -o -name '*.cmake.in' -o -name CMakeLists.txt \
      -o -name Makefile -o -path ./.ci/run \) -print | sed 's#^\./##' | sort
  fi
}

# The comment syntax of a file: C block comment or '#'.
line_for() {
  case "$1" in
    *.c | *.h) echo "/* $tag */" ;;
    *) echo "# $tag" ;;
  esac
}

# Check mode reads the first lines of every file in one head + awk pass (a head and a grep per file took
# ~30 s of CI time under load); --fix keeps the per-file loop below.
if [ $fix -eq 0 ]; then
  files=()
  while IFS= read -r f; do [ -f "$f" ] && files+=("$f"); done < <(list_files)
  [ ${#files[@]} -gt 0 ] || exit 0
  # head -v heads every file with "==> NAME <==" (an empty file gets its header and no line).
  listed=$(head -v -n 3 -- "${files[@]}" | awk -v tag="$tag" '
    /^==> .* <==$/ { if (name != "" && !found) print name; name = substr($0, 5, length($0) - 8); found = 0; next }
    index($0, tag) { found = 1 }
    END { if (name != "" && !found) print name }')
  if [ -n "$listed" ]; then
    printf '%s\n' "$listed"
    echo "check-spdx: $(printf '%s\n' "$listed" | wc -l) file(s) above lack '$tag' in their first 3 lines (fix: scripts/check-spdx.sh --fix)" >&2
    exit 1
  fi
  exit 0
fi

missing=0
while IFS= read -r f; do
  [ -f "$f" ] || continue
  if head -n 3 "$f" | grep -qF "$tag"; then continue; fi
  missing=$((missing + 1))
  if [ $fix -eq 0 ]; then
    echo "$f"
    continue
  fi
  line=$(line_for "$f")
  tmp=$(mktemp)
  if head -n 1 "$f" | grep -q '^#!'; then
    { head -n 1 "$f"; echo "$line"; tail -n +2 "$f"; } >"$tmp"
  else
    { echo "$line"; cat "$f"; } >"$tmp"
  fi
  cat "$tmp" >"$f" # keeps the file's mode (scripts stay executable)
  rm -f "$tmp"
  echo "added: $f"
done < <(list_files)

if [ $fix -eq 0 ] && [ $missing -gt 0 ]; then
  echo "check-spdx: $missing file(s) above lack '$tag' in their first 3 lines (fix: scripts/check-spdx.sh --fix)" >&2
  exit 1
fi
exit 0
