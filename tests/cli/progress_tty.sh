#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# tests/cli/progress_tty.sh: `megamoe run` shows its long phases (generating and packing weights, the
# reference check) as a progress line on stderr only on a terminal: a run under `script` (util-linux,
# which gives the command a pseudo-terminal) shows both phases and erases the line; --quiet shows none;
# without a terminal stderr stays empty.
# Usage: bash progress_tty.sh <path-to-megamoe> <source-dir>
set -u
source "$(dirname "${BASH_SOURCE[0]}")/lib/common.bash"

ARGS=(run --hidden 256 --intermediate 128 --experts 16 --tokens 12 --iterations 2 --check-tokens 3)

# Not a terminal: nothing on stderr (what every other CLI test relies on).
expect 0 "run without a terminal" -- "${ARGS[@]}"
stderr_empty

if command -v script >/dev/null; then
    timeout 120 script -qec "$MEGAMOE ${ARGS[*]}" /dev/null >"$WORK/tty" </dev/null
    if [ $? -eq 0 ]; then ok; else bad "run on a terminal failed: $(head -c 400 "$WORK/tty")"; fi
    for phase in "a16w16: generating and packing weights, 2 timed calls" \
        "a16w16: checking against the float64 reference"; do
        # the label, then the elapsed seconds, after a carriage return (redrawn in place)
        if grep -qaE $'\r'"$phase [0-9]+\.[0-9] s" "$WORK/tty"; then ok; else bad "no '$phase' on a terminal"; fi
    done
    if grep -qaF $'\r\e[K' "$WORK/tty"; then ok; else bad "the progress line is not erased"; fi
    if grep -qa "a16w16  .*100.0%" "$WORK/tty"; then ok; else bad "no table row on a terminal"; fi

    timeout 120 script -qec "$MEGAMOE ${ARGS[*]} --quiet" /dev/null >"$WORK/tty_quiet" </dev/null
    if [ $? -eq 0 ]; then ok; else bad "run --quiet on a terminal failed"; fi
    if ! grep -qaE "packing weights|checking against" "$WORK/tty_quiet"; then ok; else bad "--quiet shows progress"; fi
else
    echo "progress_tty: no 'script' (util-linux): the terminal cases are not run"
fi

cli_finish progress_tty
