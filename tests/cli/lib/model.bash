# SPDX-License-Identifier: Apache-2.0
# tests/cli/lib/model.bash: what the Hugging Face checkpoint tests (tests/cli/model_*.sh) share, sourced
# after common.bash.

# model_test_env NAME: PY = the first python3 that has numpy (the checks are numpy programs; a pyenv shim
# may lack it), PYDIR = tests/python (the tiny-checkpoint writer and the float64 reference), MEGAMOE made
# absolute; then cd to the work folder.
model_test_env() {
    PY=
    local p
    for p in python3 /usr/bin/python3; do
        if command -v "$p" >/dev/null && "$p" -c "import numpy" 2>/dev/null; then PY=$p; break; fi
    done
    [ -n "$PY" ] || { echo "$1: python3 with numpy is required (apt-get install python3-numpy)"; exit 1; }
    PYDIR="$(cd "$(dirname "${BASH_SOURCE[0]}")/../../python" && pwd)"
    MEGAMOE="$(cd "$(dirname "$MEGAMOE")" && pwd)/$(basename "$MEGAMOE")"
    cd "$WORK" || exit 1
}
