#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# tests/cli/spdx_headers.sh: every source file carries the license line (scripts/check-spdx.sh lists those
# that do not; `scripts/check-spdx.sh --fix` adds it), and the checker itself finds a file without it.
# Usage: bash spdx_headers.sh <path-to-megamoe> <source-dir>
set -u
source "$(dirname "$0")/lib/common.bash"
checker="${SOURCE_DIR:?source dir}/scripts/check-spdx.sh"

if bash "$checker" "$SOURCE_DIR" >"$WORK/missing" 2>"$WORK/err"; then ok; else
    bad "files without the SPDX line (scripts/check-spdx.sh --fix adds it): $(head -20 "$WORK/missing" | tr '\n' ' ')"
fi

# The checker on a scratch tree (not git): a C file and a script without the line are listed and fail it;
# --fix puts the line first (after the #! line of a script) and the check then passes.
mkdir -p "$WORK/tree/src"
printf '/* src/a.c: what it is for. */\nint a;\n' >"$WORK/tree/src/a.c"
printf '#!/usr/bin/env bash\n# run.sh: what it is for.\n' >"$WORK/tree/run.sh"
printf '/* SPDX-License-Identifier: Apache-2.0 */\n/* src/b.c: done. */\n' >"$WORK/tree/src/b.c"
if bash "$checker" "$WORK/tree" >"$WORK/listed" 2>/dev/null; then bad "checker passed a tree with files lacking the line"; else ok; fi
if [ "$(sort "$WORK/listed" | tr '\n' ' ')" = "run.sh src/a.c " ]; then ok; else bad "checker listed: $(tr '\n' ' ' <"$WORK/listed")"; fi
bash "$checker" --fix "$WORK/tree" >/dev/null
if [ "$(head -n 2 "$WORK/tree/src/a.c")" = "$(printf '/* SPDX-License-Identifier: Apache-2.0 */\n/* src/a.c: what it is for. */')" ]; then ok; else bad "--fix on a.c: $(head -n 2 "$WORK/tree/src/a.c")"; fi
if [ "$(sed -n 2p "$WORK/tree/run.sh")" = "# SPDX-License-Identifier: Apache-2.0" ] && head -n 1 "$WORK/tree/run.sh" | grep -q '^#!'; then ok; else bad "--fix on run.sh: $(head -n 3 "$WORK/tree/run.sh")"; fi
if bash "$checker" "$WORK/tree" >/dev/null 2>&1; then ok; else bad "checker fails after --fix"; fi

cli_finish spdx_headers
