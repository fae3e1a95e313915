# SPDX-License-Identifier: Apache-2.0
# tests/cli/lib/model_common.bash: what the `megamoe layer` tests share (sourced after common.bash):
# the first python3 that has numpy (PY; a pyenv shim may not), the folder of the checkpoint writers
# (PYDIR), MEGAMOE made absolute, the working folder entered, and `rejected`.
PY=
for p in python3 /usr/bin/python3; do
    if command -v "$p" >/dev/null && "$p" -c "import numpy" 2>/dev/null; then PY=$p; break; fi
done
[ -n "$PY" ] || { echo "$(basename "$0"): python3 with numpy is required (apt-get install python3-numpy)"; exit 1; }
PYDIR="$(cd "$(dirname "${BASH_SOURCE[0]}")/../../python" && pwd)"
MEGAMOE="$(cd "$(dirname "$MEGAMOE")" && pwd)/$(basename "$MEGAMOE")"
cd "$WORK" || exit 1

# rejected MODEL LAYER X NEEDLE WHAT [options]: exit 2, one stderr line containing NEEDLE, no output.
rejected() {
    local model=$1 layer=$2 x=$3 needle=$4 what=$5
    shift 5
    rm -f rejected.st
    expect 2 "$what" layer --model "$model" --layer "$layer" "$x" -o rejected.st "$@"
    stderr_is_one_line "$needle" "$what"
    if [ ! -e rejected.st ]; then ok; else bad "$what: wrote an output"; fi
}
