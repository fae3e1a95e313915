#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# tests/cli/case_round_trip.sh: `megamoe case-gen` -> `megamoe case` -> an independent check in Python
# (standard library only) that parses both safetensors files itself (lib/safetensors_io.py) and
# rebuilds the re-routing from the spec's definitions (SrcOffset/DstOffset). Also: case-gen is
# deterministic, and the re-routing demo (`megamoe run --op re-routing`; plain `run` is the MegaMoE
# layer) and `bench re-routing` finish with their own checks passing on small shapes.
# Usage: bash case_round_trip.sh <path-to-megamoe> <source-dir>
set -u
source "$(dirname "${BASH_SOURCE[0]}")/lib/common.bash"

cli_require_python case_round_trip

cat >"$WORK/verify.py" <<'PY'
import struct, sys

from safetensors_io import load

def ints(dtype, raw):
    fmt = {"I32": "i", "I64": "q"}[dtype]
    return list(struct.unpack("<%d%s" % (len(raw) // struct.calcsize(fmt), fmt), raw))

def fail(msg):
    print("verify: " + msg)
    sys.exit(1)

in_meta, inp = load(sys.argv[1])
out_meta, out = load(sys.argv[2])
num_type = int(in_meta.get("expert_token_num_type", "1"))
idx_type = int(in_meta.get("idx_type", "0"))
tok_dtype, tok_shape, tokens = inp["tokens"]
cnt_dtype, (n, e), cnt_raw = inp["expert_token_num_per_rank"]
counts = ints(cnt_dtype, cnt_raw)
a = tok_shape[0]
row = len(tokens) // a if a else 0

gather = [0] * a
for r in range(n):
    for x in range(e):
        src = sum(counts[i * e + j] for i in range(n) for j in range(e) if i < r or (i == r and j < x))
        dst = sum(counts[i * e + j] for i in range(n) for j in range(e) if j < x or (j == x and i < r))
        for k in range(counts[r * e + x]):
            gather[dst + k] = src + k

if out_meta.get("op") != "moe_re_routing": fail("output op is %r" % out_meta.get("op"))
if "megamoe_version" not in out_meta: fail("output lacks megamoe_version")
names = {"permute_tokens", "permute_token_idx", "expert_token_num"}
if "per_token_scales" in inp: names.add("permute_per_token_scales")
if set(out) != names: fail("output tensors %s, expected %s" % (sorted(out), sorted(names)))

pt_dtype, pt_shape, pt = out["permute_tokens"]
if (pt_dtype, pt_shape) != (tok_dtype, tok_shape): fail("permute_tokens is %s %s" % (pt_dtype, pt_shape))
if out_meta.get("dtype.permute_tokens") != in_meta.get("dtype.tokens"): fail("logical dtype of permute_tokens differs")
for d in range(a):
    if pt[d * row:(d + 1) * row] != tokens[gather[d] * row:(gather[d] + 1) * row]:
        fail("permute_tokens row %d is not tokens row %d" % (d, gather[d]))

idx_dtype, idx_shape, idx_raw = out["permute_token_idx"]
if (idx_dtype, idx_shape) != ("I32", [a]): fail("permute_token_idx is %s %s" % (idx_dtype, idx_shape))
expected = gather if idx_type == 0 else [0] * a
if idx_type == 1:
    for d in range(a): expected[gather[d]] = d
if ints("I32", idx_raw) != expected: fail("permute_token_idx %s, expected %s" % (ints("I32", idx_raw)[:20], expected[:20]))

num_dtype, num_shape, num_raw = out["expert_token_num"]
if (num_dtype, num_shape) != (cnt_dtype, [e]): fail("expert_token_num is %s %s" % (num_dtype, num_shape))
sums = [sum(counts[r * e + x] for r in range(n)) for x in range(e)]
if num_type == 0: sums = [sum(sums[:x + 1]) for x in range(e)]
if ints(num_dtype, num_raw) != sums: fail("expert_token_num %s, expected %s" % (ints(num_dtype, num_raw), sums))

if "per_token_scales" in inp:
    s_dtype, s_shape, scales = inp["per_token_scales"]
    ps_dtype, ps_shape, ps = out["permute_per_token_scales"]
    if (ps_dtype, ps_shape) != (s_dtype, s_shape): fail("permute_per_token_scales is %s %s" % (ps_dtype, ps_shape))
    srow = len(scales) // a if a else 0
    for d in range(a):
        if ps[d * srow:(d + 1) * srow] != scales[gather[d] * srow:(gather[d] + 1) * srow]:
            fail("permute_per_token_scales row %d is not row %d" % (d, gather[d]))
print("verify: ok (A=%d H=%s N=%d E=%d %s idx_type=%d num_type=%d)" % (a, tok_shape[1], n, e, tok_dtype, idx_type, num_type))
PY

# round_trip LABEL CASE-GEN-OPTIONS...: generate, run, verify.
round_trip() {
    local label=$1
    shift
    rm -f "$WORK/in.st" "$WORK/out.st"
    if ! timeout 60 "$MEGAMOE" case-gen re-routing -o "$WORK/in.st" "$@" 2>"$WORK/err"; then
        bad "$label: case-gen failed: $(cat "$WORK/err")"
        return
    fi
    if ! timeout 60 "$MEGAMOE" case "$WORK/in.st" -o "$WORK/out.st" 2>"$WORK/err"; then
        bad "$label: case failed: $(cat "$WORK/err")"
        return
    fi
    if [ -s "$WORK/err" ]; then bad "$label: case printed on stderr: $(cat "$WORK/err")"; fi
    if python3 "$WORK/verify.py" "$WORK/in.st" "$WORK/out.st" >"$WORK/verify.log"; then ok; else bad "$label: $(cat "$WORK/verify.log")"; fi
}

round_trip "defaults"
round_trip "int64 counts, cumsum, scatter" --count-dtype int64 --expert-token-num-type 0 --idx-type 1
round_trip "f32 scales (A)" --scales f32 --seed 7
round_trip "f32 scales (A, 4)" --scales f32 --scale-cols 4 --idx-type 1
round_trip "e8m0 scales" --scales e8m0 --scale-cols 2
for dtype in f16 bf16 int8 fp8_e5m2 fp8_e4m3fn hifloat8 fp4_e2m1 fp4_e1m2; do
    round_trip "tokens $dtype" --dtype "$dtype" --tokens 50 --hidden 33 --ranks 3 --experts 5 --seed 11
done
round_trip "one block" --ranks 1 --experts 1 --tokens 5
round_trip "no tokens" --tokens 0 --ranks 2 --experts 3
round_trip "many sparse blocks" --tokens 30 --ranks 16 --experts 32 --seed 3
round_trip "larger" --tokens 2000 --hidden 128 --ranks 8 --experts 16 --scales f32

# Seeded: the same options give the same bytes, another seed gives other bytes.
"$MEGAMOE" case-gen re-routing -o "$WORK/a.st" --seed 5 --scales f32
"$MEGAMOE" case-gen re-routing -o "$WORK/b.st" --seed 5 --scales f32
"$MEGAMOE" case-gen re-routing -o "$WORK/c.st" --seed 6 --scales f32
if cmp -s "$WORK/a.st" "$WORK/b.st"; then ok; else bad "case-gen with one seed gave two files"; fi
if ! cmp -s "$WORK/a.st" "$WORK/c.st"; then ok; else bad "case-gen ignores --seed"; fi

# Running a case twice gives the same output file, bit for bit.
"$MEGAMOE" case "$WORK/a.st" -o "$WORK/a1.st" && "$MEGAMOE" case "$WORK/a.st" -o "$WORK/a2.st"
if cmp -s "$WORK/a1.st" "$WORK/a2.st"; then ok; else bad "two runs of one case differ"; fi
# The output may replace an existing file.
"$MEGAMOE" case "$WORK/c.st" -o "$WORK/a1.st"
if python3 "$WORK/verify.py" "$WORK/c.st" "$WORK/a1.st" >"$WORK/verify.log"; then ok; else bad "overwrite: $(cat "$WORK/verify.log")"; fi
# An output that is a FIFO (or /dev/null, /dev/stdout) is written through, not replaced by a file:
# the reader gets the same bytes as a regular output, and the FIFO is still a FIFO afterwards.
mkfifo "$WORK/pipe.st"
timeout 10 cat "$WORK/pipe.st" >"$WORK/from_pipe.st" &
reader=$!
if timeout 20 "$MEGAMOE" case "$WORK/c.st" -o "$WORK/pipe.st" 2>"$WORK/err"; then ok; else bad "case -o FIFO: $(cat "$WORK/err")"; fi
wait "$reader"
if [ -p "$WORK/pipe.st" ]; then ok; else bad "case -o FIFO replaced the FIFO with a file"; fi
if cmp -s "$WORK/from_pipe.st" "$WORK/a1.st"; then ok; else bad "bytes read from the FIFO differ from the file output"; fi
# An output that is a symbolic link: its target gets the output (keeping its mode), the link stays.
mkdir -p "$WORK/real"
printf 'old' >"$WORK/real/target.st"
chmod 600 "$WORK/real/target.st"
ln -s real/target.st "$WORK/link.st"
if "$MEGAMOE" case "$WORK/c.st" -o "$WORK/link.st" 2>"$WORK/err"; then ok; else bad "case -o symlink: $(cat "$WORK/err")"; fi
if [ -L "$WORK/link.st" ] && cmp -s "$WORK/real/target.st" "$WORK/a1.st"; then ok; else bad "case -o symlink: the link was replaced or its target not written"; fi
if [ "$(stat -c %a "$WORK/real/target.st")" = 600 ]; then ok; else bad "case -o symlink: target mode $(stat -c %a "$WORK/real/target.st"), expected 600"; fi
leftovers=$(find "$WORK" -name '*.tmp*' | wc -l)
if [ "$leftovers" -eq 0 ]; then ok; else bad "temporary files left: $(find "$WORK" -name '*.tmp*')"; fi

# The demo and the benchmark run their own checks.
if timeout 120 "$MEGAMOE" run --op re-routing --tokens 512 --hidden 256 --iterations 2 >"$WORK/run.log" 2>&1 &&
    grep -q "re-routing demo" "$WORK/run.log" && grep -q "^check: ok" "$WORK/run.log" && grep -q "memcpy" "$WORK/run.log"; then
    ok
else
    bad "run: $(cat "$WORK/run.log")"
fi
if timeout 120 "$MEGAMOE" bench re-routing --tokens 512 --hidden 256 --iterations 3 --warmup 1 --threads 2 >"$WORK/bench.log" 2>&1 &&
    grep -q "^check: ok" "$WORK/bench.log" && grep -q "memcpy 2 threads" "$WORK/bench.log" && grep -q "^ratio" "$WORK/bench.log"; then
    ok
else
    bad "bench re-routing: $(cat "$WORK/bench.log")"
fi

cli_finish case_round_trip
