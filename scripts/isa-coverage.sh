#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# ISA coverage summary for CI: which kernel paths the test suite exercised on this machine, and the
# list of what it could not run (the "SKIP:" lines tests print through mm_test_skip, tests/testlib.h).
#
#   scripts/isa-coverage.sh LOG [LOG ...]
#
# LOG: a CTest log holding every test's output (build/Testing/Temporary/LastTest.log, copied after
# each ctest run, as .ci/run does). Prints, e.g.:
#   AMX kernels: not run (CPU lacks amx_tile amx_bf16 amx_int8)
#     AMX kernels' AVX-512 parts: run without AMX (...); the tile products need AMX
#   AVX-512 kernels: run
#   portable (reference) kernels: run
#   Intel SDE: not available (no emulator for the missing ISA paths)
#   skipped test parts: 19
#     SKIP: amx kernel int8 x int8 ...
set -euo pipefail
logs=("$@")
[ ${#logs[@]} -gt 0 ] || { echo "usage: $0 LOG [LOG ...]" >&2; exit 2; }

flags=$(grep -m1 '^flags' /proc/cpuinfo 2>/dev/null || true)
has() { [[ " $flags " == *" $1 "* ]]; }
skips=$(cat "${logs[@]}" 2>/dev/null | grep -o 'SKIP: .*' | sort -u || true)
count=$(printf '%s' "$skips" | grep -c . || true)

# An ISA path counts as exercised when the CPU has it and no test reported one of its kernels as not
# run; the reason is the CPU's (flags) or MEGAMOE_ISA's.
report() { # label isa-name cpu-flags...
  local label=$1 isa=$2
  shift 2
  local missing=()
  for f in "$@"; do has "$f" || missing+=("$f"); done
  if [ ${#missing[@]} -gt 0 ]; then
    echo "$label kernels: not run (CPU lacks ${missing[*]})"
  elif printf '%s\n' "$skips" | grep -q "^SKIP: $isa "; then
    echo "$label kernels: partly not run (see the SKIP lines below)"
  else
    echo "$label kernels: run"
  fi
}
report AMX amx amx_tile amx_bf16 amx_int8
# The AMX kernels' decoders are AVX-512 VBMI code: tests run them without AMX (test_gemm_mx_decode,
# test_gemm_amx_i4_decode, and test_gemm_amx_kblocks on a stand-in tile, whose SKIP lines say so).
if printf '%s\n' "$skips" | grep -q 'ran on the avx512 stand-in'; then
  echo "  AMX kernels' AVX-512 parts: run without AMX (MX and INT4 panel decoders, MX row decoder, MX K blocks on an AVX-512 stand-in tile); the tile products need AMX"
fi
report AVX-512 avx512 avx512f avx512bw avx512vl avx512dq avx512_bf16 avx512_vnni
echo "portable (reference) kernels: run (every GEMM test checks them; the MEGAMOE_ISA=ref step runs the whole suite on them)"
if command -v sde64 >/dev/null 2>&1 || command -v sde >/dev/null 2>&1; then
  echo "Intel SDE: available (not used by CI yet)"
else
  echo "Intel SDE: not available (no emulator for the ISA paths this CPU lacks)"
fi
echo "skipped test parts: $count"
[ -z "$skips" ] || printf '%s\n' "$skips" | sed 's/^/  /'
