# SPDX-License-Identifier: Apache-2.0
# tests/cli/lib/common.bash: what every CLI test script shares, sourced right after `set -u`.
# (Not named *.sh: every tests/cli/*.sh is registered as a CTest test, and this file is not one.)
#
# Every script is run as `bash script <path-to-megamoe> <source-dir>`. Sourcing this file sets
#   MEGAMOE     the CLI under test          SOURCE_DIR  the source tree (may be empty)
#   WORK        a scratch directory, removed when the script exits
#   PYTHONPATH  starts with this lib/ directory, so that the scripts' Python checks (often written to
#               $WORK first) can `import safetensors_io`
# and gives ok / bad to count expectations, expect / stdout_has / stderr_is_one_line / stderr_empty /
# expect_usage_error to run the CLI and check what it printed, case_rejected for a case file that must be
# refused, bench_option_checks for the option errors and --help of a `bench` subcommand, and cli_finish to
# print the tally and set the exit status:
# a script passes only when nothing failed and at least one expectation was checked, so a script that
# silently skipped everything cannot pass.
MEGAMOE=${1:?path to megamoe}
SOURCE_DIR=${2:-}
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
export PYTHONPATH="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)${PYTHONPATH:+:$PYTHONPATH}"
passed=0
failed=0

ok() { passed=$((passed + 1)); }
bad() {
    failed=$((failed + 1))
    echo "FAIL: $*" >&2
}

# expect STATUS WHAT [--] ARGS...: runs megamoe ARGS (stdout in $WORK/out, stderr in $WORK/err; a run
# that hangs is stopped after 120 s so a script never hangs) and checks the exit status.
expect() {
    local want=$1 what=$2
    shift 2
    if [ "${1:-}" = "--" ]; then shift; fi
    timeout 120 "$MEGAMOE" "$@" >"$WORK/out" 2>"$WORK/err"
    local got=$?
    if [ "$got" -eq "$want" ]; then ok; else bad "$what: exit $got, expected $want ($(head -c 400 "$WORK/err"))"; fi
}
# stdout_has NEEDLE [WHAT]: the last expect's stdout contains NEEDLE.
stdout_has() {
    if grep -qF -- "$1" "$WORK/out"; then ok; else bad "${2:+$2: }stdout lacks '$1': $(head -c 600 "$WORK/out")"; fi
}
# stderr_is_one_line NEEDLE [WHAT]: the last expect printed exactly one stderr line, containing NEEDLE
# (the CLI's rule for every error).
stderr_is_one_line() {
    if [ "$(wc -l <"$WORK/err")" -eq 1 ] && grep -qF -- "$1" "$WORK/err"; then
        ok
    else
        bad "${2:+$2: }stderr should be one line with '$1': $(cat "$WORK/err")"
    fi
}
# expect_usage_error WHAT NEEDLE [--] ARGS...: megamoe ARGS exits 2 with exactly one stderr line, containing
# NEEDLE (two expectations: expect 2 and stderr_is_one_line).
expect_usage_error() {
    local what=$1 needle=$2
    shift 2
    expect 2 "$what" "$@"
    stderr_is_one_line "$needle"
}
# stderr_empty: the last expect printed nothing on stderr.
stderr_empty() { if [ ! -s "$WORK/err" ]; then ok; else bad "stderr not empty: $(cat "$WORK/err")"; fi; }

# case_rejected WHAT CASE PATTERN: `megamoe case CASE` exits 2 with one stderr line matching the regex
# PATTERN and writes no output file.
case_rejected() {
    rm -f "$WORK/rejected_out.st"
    timeout 120 "$MEGAMOE" case "$2" -o "$WORK/rejected_out.st" 2>"$WORK/err"
    local rc=$?
    if [ "$rc" -eq 2 ]; then ok; else bad "$1: exited $rc, expected 2"; fi
    if [ "$(wc -l <"$WORK/err")" -eq 1 ] && grep -q -- "$3" "$WORK/err"; then
        ok
    else
        bad "$1: message '$(cat "$WORK/err")' does not match '$3'"
    fi
    if [ ! -e "$WORK/rejected_out.st" ]; then ok; else bad "$1: wrote an output"; fi
}

# bench_option_checks CMD OPTION HELP_NEEDLE: three expectations on `megamoe bench CMD`: --format nosuch
# exits 2 with one stderr line naming --format; OPTION 0 exits 2 naming OPTION; --help exits 0 and names
# HELP_NEEDLE.
bench_option_checks() {
    local status
    timeout 60 "$MEGAMOE" bench "$1" --format nosuch >"$WORK/out" 2>"$WORK/err"
    status=$?
    if [ "$status" -eq 2 ] && [ "$(wc -l <"$WORK/err")" -eq 1 ] && grep -qF -- "--format" "$WORK/err"; then ok; else
        bad "bad --format: exit $status, stderr $(cat "$WORK/err")"
    fi
    timeout 60 "$MEGAMOE" bench "$1" "$2" 0 >"$WORK/out" 2>"$WORK/err"
    if [ $? -eq 2 ] && grep -qF -- "$2" "$WORK/err"; then ok; else bad "$2 0 accepted: $(cat "$WORK/err")"; fi
    timeout 60 "$MEGAMOE" bench "$1" --help >"$WORK/out" 2>"$WORK/err"
    if [ $? -eq 0 ] && grep -qF -- "$3" "$WORK/out"; then ok; else bad "--help"; fi
}

# cli_require_python NAME: the script's independent checks are written in Python (standard library only).
cli_require_python() {
    command -v python3 >/dev/null || {
        echo "$1: python3 is required"
        exit 1
    }
}

# cli_has_mpi: true when mpirun exists and the CLI was built with the MPI backend.
cli_has_mpi() {
    command -v mpirun >/dev/null && "$MEGAMOE" version --features 2>/dev/null | grep -qx "mpi backend: yes"
}

# cli_mpi_env: lets mpirun start as root with more ranks than cores, and turns leak checking off in
# sanitizer builds: Open MPI keeps thousands of start-up allocations until exit, many in plugins it has
# already unloaded, which no suppression can name. Only the scripts that run mpirun call this.
cli_mpi_env() {
    export OMPI_MCA_rmaps_base_oversubscribe=1 OMPI_MCA_btl_vader_single_copy_mechanism=none
    export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
    export ASAN_OPTIONS="detect_leaks=0${ASAN_OPTIONS:+:$ASAN_OPTIONS}"
}

# cli_finish NAME: prints "NAME: P passed, F failed" and exits 0 only when F = 0 and P > 0.
cli_finish() {
    echo "$1: $passed passed, $failed failed"
    [ "$failed" -eq 0 ] && [ "$passed" -gt 0 ]
    exit
}
