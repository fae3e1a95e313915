# SPDX-License-Identifier: Apache-2.0
# tests/cli/lib/model.bash: what the Hugging Face checkpoint tests (tests/cli/model_*.sh) share, sourced
# after common.bash: model_test_env and mpi_same.

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

# mpi_same MODEL X THREADS_OUT MPI_OUT WHAT [options]: when the MPI backend is there, layer 1 of MODEL on
# X run by 2 MPI processes writes MPI_OUT with the bytes of THREADS_OUT (one expectation; none without MPI).
mpi_same() {
    local model=$1 x=$2 threads_out=$3 mpi_out=$4 what=$5
    shift 5
    cli_has_mpi || return 0
    if timeout 120 mpirun --allow-run-as-root -n 2 "$MEGAMOE" layer --model "$model" --layer 1 "$x" \
        -o "$mpi_out" --backend mpi "$@" >"$WORK/mpi.log" 2>&1; then
        if cmp -s "$threads_out" "$mpi_out"; then ok; else bad "$what: MPI output differs from threads"; fi
    else
        bad "$what: mpirun failed: $(tail -3 "$WORK/mpi.log")"
    fi
}
