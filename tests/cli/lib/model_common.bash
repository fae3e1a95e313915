# SPDX-License-Identifier: Apache-2.0
# tests/cli/lib/model_common.bash: what the `megamoe layer` tests share (sourced after common.bash):
# lib/model.bash's environment (PY with numpy, PYDIR, MEGAMOE absolute, the working folder entered),
# set up at once, and `rejected`.
source "$(dirname "${BASH_SOURCE[0]}")/model.bash"
model_test_env "$(basename "$0" .sh)"

# rejected MODEL LAYER X NEEDLE WHAT [options]: exit 2, one stderr line containing NEEDLE, no output.
rejected() {
    local model=$1 layer=$2 x=$3 needle=$4 what=$5
    shift 5
    rm -f rejected.st
    expect 2 "$what" layer --model "$model" --layer "$layer" "$x" -o rejected.st "$@"
    stderr_is_one_line "$needle" "$what"
    if [ ! -e rejected.st ]; then ok; else bad "$what: wrote an output"; fi
}
