#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# tests/cli/case_broken.sh: broken case files (built byte by byte in Python, standard library only) make
# `megamoe case` exit with status 2, print exactly one line on stderr naming the tensor or attribute,
# create no output file, and leave an existing output file byte-identical.
# Usage: bash case_broken.sh <path-to-megamoe> <source-dir>
set -u
source "$(dirname "${BASH_SOURCE[0]}")/lib/common.bash"

cli_require_python case_broken

# Writes one file per broken kind into $WORK/cases and lists "file<TAB>needle" in $WORK/cases/index.
mkdir -p "$WORK/cases"
python3 - "$WORK/cases" <<'PY' || { echo "case_broken: building the files failed"; exit 1; }
import json, os, struct, sys
out = sys.argv[1]
index = []

def container(header_bytes, data):
    return struct.pack("<Q", len(header_bytes)) + header_bytes + data

def st(name, needle, tensors, meta):
    header, data = {}, b""
    if meta is not None:
        header["__metadata__"] = meta
    for tname, dtype, shape, raw in tensors:
        header[tname] = {"dtype": dtype, "shape": shape, "data_offsets": [len(data), len(data) + len(raw)]}
        data += raw
    raw_bytes(name, needle, container(json.dumps(header).encode(), data))

def raw_bytes(name, needle, blob):
    with open(os.path.join(out, name + ".st"), "wb") as f:
        f.write(blob)
    index.append("%s.st\t%s" % (name, needle))

def i32(*v): return struct.pack("<%di" % len(v), *v)

TOKENS = ("tokens", "BF16", [7, 4], bytes(range(56)))
COUNTS = ("expert_token_num_per_rank", "I32", [2, 2], i32(1, 2, 3, 1))
OP = {"op": "moe_re_routing"}

def with_meta(**kv):
    m = dict(OP)
    m.update(kv)
    return m

# The valid base, to make sure the harness itself accepts a good file.
st("valid", "", [TOKENS, COUNTS], OP)

st("missing_op", '"op" is missing', [TOKENS, COUNTS], {})
st("no_metadata", '"op" is missing', [TOKENS, COUNTS], None)
st("unknown_op", "moe_rerouting", [TOKENS, COUNTS], {"op": "moe_rerouting"})
st("missing_tokens", '"tokens" is missing', [COUNTS], OP)
st("missing_counts", '"expert_token_num_per_rank" is missing', [TOKENS], OP)
st("tokens_f32", '"tokens" has dtype f32', [("tokens", "F32", [7, 2], bytes(56)), COUNTS], OP)
st("counts_f32", '"expert_token_num_per_rank" has dtype f32',
   [TOKENS, ("expert_token_num_per_rank", "F32", [2, 2], bytes(16))], OP)
st("scales_bf16", '"per_token_scales" has dtype bf16', [TOKENS, COUNTS, ("per_token_scales", "BF16", [7], bytes(14))], OP)
st("tokens_1d", '"tokens" has 1 dimension (', [("tokens", "BF16", [28], bytes(56)), COUNTS], OP)
st("counts_3d", '"expert_token_num_per_rank" has 3 dimensions',
   [TOKENS, ("expert_token_num_per_rank", "I32", [1, 2, 2], i32(1, 2, 3, 1))], OP)
st("hidden_zero", "tokens.shape[1] = H = 0 must be positive", [("tokens", "BF16", [7, 0], b""), COUNTS], OP)
st("scales_rows", "per_token_scales.shape[0] = 6 differs from the token count A = 7", [TOKENS, COUNTS, ("per_token_scales", "F32", [6], bytes(24))], OP)
st("attr_word", '"idx_type"', [TOKENS, COUNTS], with_meta(idx_type="one"))
st("attr_fraction", '"expert_token_num_type"', [TOKENS, COUNTS], with_meta(expert_token_num_type="1.0"))
st("attr_quoted", '"idx_type"', [TOKENS, COUNTS], with_meta(idx_type='"0"'))
st("attr_two_values", '"idx_type"', [TOKENS, COUNTS], with_meta(idx_type="0 1"))
st("attr_out_of_range", '"idx_type" = 2 is outside [0, 1]', [TOKENS, COUNTS], with_meta(idx_type="2"))
st("attr_negative", '"expert_token_num_type" = -1 is outside [0, 1]', [TOKENS, COUNTS],
   with_meta(expert_token_num_type="-1"))
st("counts_sum", "sum of expert_token_num_per_rank through [1][1] exceeds the token count A = 7", [TOKENS, ("expert_token_num_per_rank", "I32", [2, 2], i32(1, 2, 3, 2))], OP)
st("counts_short", "sum of expert_token_num_per_rank = 6 differs from the token count A = 7",
   [TOKENS, ("expert_token_num_per_rank", "I32", [2, 2], i32(1, 2, 2, 1))], OP)
st("negative_count", "expert_token_num_per_rank[1][0] = -3",
   [TOKENS, ("expert_token_num_per_rank", "I32", [2, 2], i32(1, 2, -3, 7))], OP)
st("unknown_key", '"idx_typ"', [TOKENS, COUNTS], with_meta(idx_typ="0"))
st("ranks_key", '"ranks"', [TOKENS, COUNTS], with_meta(ranks="2"))
st("unknown_tensor", '"extra"', [TOKENS, COUNTS, ("extra", "I32", [1], i32(0))], OP)
st("rank_prefixed", '"rank0.tokens"', [("rank0.tokens", "BF16", [7, 4], bytes(56)), COUNTS], OP)
st("bad_dtype_string", "BF17", [("tokens", "BF17", [7, 4], bytes(56)), COUNTS], OP)
st("dtype_key_no_tensor", "dtype.nothing", [TOKENS, COUNTS], with_meta(**{"dtype.nothing": "hifloat8"}))

# Byte-level damage: the message names the field and the rule.
good = open(os.path.join(out, "valid.st"), "rb").read()
raw_bytes("truncated_data", "beyond the end of the", good[:-5])
raw_bytes("truncated_header", "header length", good[:20])
raw_bytes("garbage_header", "header does not start with '{'", container(b"this is not json", b""))
raw_bytes("header_array", "header does not start with '{'", container(b"[1, 2, 3]", b""))
raw_bytes("header_length_past_end", "header length 1099511627776", struct.pack("<Q", 1 << 40) + b"{}")
raw_bytes("empty_file", "file has 0 bytes", b"")
raw_bytes("seven_bytes", "file has 7 bytes", b"\x02\x00\x00\x00\x00\x00\x00")
hdr = json.dumps({"__metadata__": OP, "tokens": {"dtype": "BF16", "shape": [7, 4], "data_offsets": [0, 50]},
                  "expert_token_num_per_rank": {"dtype": "I32", "shape": [2, 2], "data_offsets": [50, 66]}}).encode()
raw_bytes("size_mismatch", 'tensor "tokens": data_offsets [0, 50] span 50 bytes but shape [7, 4] of BF16 needs 56', container(hdr, bytes(66)))
hdr = json.dumps({"__metadata__": {"op": 5}, "tokens": {"dtype": "BF16", "shape": [7, 4], "data_offsets": [0, 56]}}).encode()
raw_bytes("metadata_not_string", '__metadata__ "op" is a number', container(hdr, bytes(56)))
raw_bytes("control_char_key", 'metadata key "a\\x0ab"', container(json.dumps({"__metadata__": {"op": "moe_re_routing", "a\nb": "1"},
    "tokens": {"dtype": "BF16", "shape": [7, 4], "data_offsets": [0, 56]}}).encode(), bytes(56)))

with open(os.path.join(out, "index"), "w") as f:
    f.write("\n".join(index) + "\n")
PY

# The harness accepts a valid file (else every rejection below would prove nothing).
if "$MEGAMOE" case "$WORK/cases/valid.st" -o "$WORK/valid_out.st" 2>"$WORK/err" && [ -s "$WORK/valid_out.st" ]; then
    ok
else
    bad "valid base case was rejected: $(cat "$WORK/err")"
fi

sentinel="an existing output that a failed case must not touch"
while IFS=$'\t' read -r file needle; do
    [ "$file" = "valid.st" ] && continue
    in="$WORK/cases/$file"
    out="$WORK/out_${file}"
    # 1. No output file yet: status 2, one stderr line naming the culprit, no file created.
    timeout 60 "$MEGAMOE" case "$in" -o "$out" >"$WORK/stdout" 2>"$WORK/err"
    status=$?
    lines=$(wc -l <"$WORK/err")
    if [ "$status" -eq 2 ]; then ok; else bad "$file: exit $status, expected 2 ($(cat "$WORK/err"))"; fi
    if [ "$lines" -eq 1 ] && grep -q '^megamoe: case: ' "$WORK/err"; then ok; else bad "$file: stderr is not one 'megamoe: case:' line: $(cat "$WORK/err")"; fi
    if [ -z "$needle" ] || grep -qF -- "$needle" "$WORK/err"; then ok; else bad "$file: message lacks '$needle': $(cat "$WORK/err")"; fi
    if [ ! -s "$WORK/stdout" ]; then ok; else bad "$file: printed on stdout"; fi
    if [ ! -e "$out" ]; then ok; else bad "$file: an output file was created"; fi
    # 2. An existing output file stays byte-identical.
    printf '%s' "$sentinel" >"$out"
    cp "$out" "$WORK/expected"
    timeout 60 "$MEGAMOE" case "$in" -o "$out" 2>/dev/null
    status=$?
    if [ "$status" -eq 2 ] && cmp -s "$out" "$WORK/expected"; then ok; else bad "$file: existing output changed (exit $status)"; fi
done <"$WORK/cases/index"

leftovers=$(find "$WORK" -name '*.tmp*' | wc -l)
if [ "$leftovers" -eq 0 ]; then ok; else bad "temporary files left behind"; fi

cli_finish case_broken
