# SPDX-License-Identifier: Apache-2.0
"""tests/cli/lib/mega_moe_case.py: independent checks of `megamoe case` on mega_moe files (standard
library only), used by tests/cli/case_mega_moe.sh and tests/cli/case_mega_moe_a16.sh.

  reference CASE OUT   recomputes y of an A16W16 mega_moe case, or of a mega_moe_ext case with BF16
                       activations (A16W16 or the A16 weight-only formats FP8 E4M3 + F32 blocks,
                       FP4 E2M1 + E8M0 MX scales, UINT4 + F32 blocks + U8 zero points; biases;
                       weight1_interleave), from the case file alone (float64 with the spec's BF16
                       rounding points: the dequantized weight w' = BF16(F32(F32(q - z) * s)), GEMM1
                       output + bias1, activation output, expert output + bias2, final sum; swiglu
                       without clamp) and compares it with megamoe's output file (|d| <= 2^-6 |ref|
                       + 0.01 rms(y), `megamoe run`'s A16W16 tolerance); expert_token_nums must
                       match exactly. It reads the layout the way the spec says (weight1 (E_l, H, 2I)
                       or (E_l, 2I, H) with transpose_weight1, gate = the first I columns or, with
                       weight1_interleave, the even ones; inactive rows give y = 0; shared experts
                       add unweighted), so it catches a case runner that wires a tensor or attribute
                       wrongly.
  broken MEGAMOE CASE  damages a valid case in many ways; each must exit 2 with one stderr line
                       naming the rule (a fragment) and write no output file.

Prints one line per failure and exits 1 when anything failed."""
import json
import math
import os
import struct
import subprocess
import sys
import tempfile

from safetensors_io import load, save


def bf16_value(bits):
    return struct.unpack("<f", struct.pack("<I", bits << 16))[0]


def round_bf16(v):
    """Nearest BF16 (ties to even) of a double, through its exact F32 neighbour when representable."""
    if v == 0.0 or math.isnan(v) or math.isinf(v):
        return v
    f32_bits = struct.unpack("<I", struct.pack("<f", v))[0]
    # correct the F32 rounding direction so that the BF16 rounding sees the double's side of a tie
    f32 = struct.unpack("<f", struct.pack("<I", f32_bits))[0]
    low = f32_bits & 0xFFFF
    if low == 0x8000 and f32 != v:
        low = 0x8001 if abs(v) > abs(f32) else 0x7FFF
    bits = (f32_bits & 0xFFFF0000) + (0x10000 if low > 0x8000 or (low == 0x8000 and (f32_bits >> 16) & 1) else 0)
    return struct.unpack("<f", struct.pack("<I", bits & 0xFFFFFFFF))[0]


def values(tensor):
    dtype, shape, raw = tensor
    count = len(raw) // {"BF16": 2, "F32": 4, "I32": 4, "I8": 1, "BOOL": 1}[dtype]
    if dtype == "BF16":
        return [bf16_value(b) for b in struct.unpack("<%dH" % count, raw)]
    fmt = {"F32": "f", "I32": "i", "I8": "b", "BOOL": "B"}[dtype]
    return list(struct.unpack("<%d%s" % (count, fmt), raw))


def f32(v):
    """v rounded once to F32 (nearest even)."""
    return struct.unpack("<f", struct.pack("<f", v))[0]


def e4m3_value(code):
    sign = -1.0 if code & 0x80 else 1.0
    e, m = (code >> 3) & 0xF, code & 7
    if e == 0xF and m == 7:
        return math.nan
    return sign * (m / 8.0 * 2.0**-6 if e == 0 else (1.0 + m / 8.0) * 2.0 ** (e - 7))


def e2m1_value(code):
    return (-1.0 if code & 8 else 1.0) * [0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0][code & 7]


def group_weights(meta, t, prefix, which, K, N):
    """GEMM `which` (1, 2) of one weight group (prefix "rank<g>." or "rank<g>.shared_") as dequantized values
    w[e][n * K + k] (logical (k, n): k the reduction), plus its bias (count x N, or None). BF16 weights are
    their values; the A16 weight-only formats (docs/weight_formats.md) are w' = BF16(F32(F32(q - z) * s)):
    FP8 E4M3 with F32 block scales, FP4 E2M1 with E8M0 MX scales (N, ceil(K/64), 2), UINT4 (two codes per
    byte along the stored last dimension, element 2i low) with F32 block scales and U8 zero points."""
    name = "%sweight%d" % (prefix, which)
    dtype, shape, raw = t[name]
    logical = meta.get("dtype." + name, dtype)
    transposed = meta.get("transpose_weight%d" % which, "false") == "true"
    count = shape[0]
    last = K if transposed else N
    four = logical in ("F4", "uint4")
    row_bytes = (last + 1) // 2 if four else last * (2 if dtype == "BF16" else 1)
    rows = N if transposed else K
    scales = t.get("%sweight_scales%d" % (prefix, which))
    zeros = t.get("%sweight_zeros%d" % (prefix, which))
    bn, bk = int(meta.get("scale_block_n", "0")), int(meta.get("scale_block_k", "0"))
    sv = values(scales) if scales and scales[0] == "F32" else None
    zv = list(zeros[2]) if zeros else None
    out = []
    for e in range(count):
        w = [0.0] * (N * K)
        for n in range(N):
            for k in range(K):
                r, c = (n, k) if transposed else (k, n)
                at = (e * rows + r) * row_bytes
                if dtype == "BF16":
                    w[n * K + k] = bf16_value(struct.unpack_from("<H", raw, at + 2 * c)[0])
                    continue
                code = (raw[at + c // 2] >> (4 * (c % 2))) & 15 if four else raw[at + c]
                if logical == "F4":  # MX: one E8M0 scale per 32 along K
                    pairs = (K + 63) // 64
                    value, zero = e2m1_value(code), 0
                    scale = 2.0 ** (scales[2][(e * N + n) * pairs * 2 + k // 32] - 127)
                else:
                    b = (e * ((N + bn - 1) // bn) + n // bn) * ((K + bk - 1) // bk) + k // bk
                    value = float(code) if logical == "uint4" else e4m3_value(code)
                    zero = zv[b] if zv else 0
                    scale = sv[b]
                w[n * K + k] = round_bf16(f32(f32(value - zero) * scale))
        out.append(w)
    bias = t.get("%sbias%d" % (prefix, which))
    return out, (values(bias) if bias else None)


def expert_ffn(x, g1, g2, e, H, I, interleave):
    """One A16 expert on one row, the spec's rounding points (bias added before them); swiglu without clamp.
    With weight1_interleave GEMM1's channel 2j is gate j and 2j + 1 up j."""
    (w1, b1), (w2, b2) = g1, g2
    h = []
    for n in range(2 * I):
        acc = sum(x[k] * w1[e][n * H + k] for k in range(H))
        h.append(round_bf16(acc + (b1[e * 2 * I + n] if b1 else 0.0)))
    a = []
    for j in range(I):
        g, u = (h[2 * j], h[2 * j + 1]) if interleave else (h[j], h[I + j])
        a.append(round_bf16(g / (1.0 + math.exp(-g)) * u))
    out = []
    for n in range(H):
        acc = sum(a[k] * w2[e][n * I + k] for k in range(I))
        out.append(round_bf16(acc + (b2[e * H + n] if b2 else 0.0)))
    return out


def reference(case_path, out_path):
    meta, t = load(case_path)
    _, o = load(out_path)
    failures = []
    assert meta["op"] in ("mega_moe", "mega_moe_ext") and meta.get("dispatch_quant_mode", "0") == "0"
    assert meta.get("activation", "swiglu") == "swiglu" and "activation_params" not in meta
    R, E = int(meta["ranks"]), int(meta["moe_expert_num"])
    El = E // R
    interleave = meta.get("weight1_interleave", "0") == "1"
    wtype = int(meta.get("topk_weights_type", "0"))
    H = t["rank0.x"][1][1]
    w2_shape = json.loads(meta["shape.rank0.weight2"]) if "shape.rank0.weight2" in meta else t["rank0.weight2"][1]
    I = w2_shape[2] if meta.get("transpose_weight2", "false") == "true" else w2_shape[1]  # uint4: logical shape
    K = t["rank0.topk_ids"][1][1]
    groups = [(group_weights(meta, t, "rank%d." % r, 1, H, 2 * I), group_weights(meta, t, "rank%d." % r, 2, I, H))
              for r in range(R)]
    counts = [0] * E
    checked = 0
    for r in range(R):
        bs = t["rank%d.x" % r][1][0]
        x = values(t["rank%d.x" % r])
        ids = values(t["rank%d.topk_ids" % r])
        gates = values(t["rank%d.topk_weights" % r])
        mask = values(t["rank%d.x_active_mask" % r]) if "rank%d.x_active_mask" % r in t else [1] * bs
        shared = "rank%d.shared_weight1" % r in t
        if shared:
            sg = (group_weights(meta, t, "rank%d.shared_" % r, 1, H, 2 * I),
                  group_weights(meta, t, "rank%d.shared_" % r, 2, I, H))
            S = t["rank%d.shared_weight1" % r][1][0]
        y = values(o["rank%d.y" % r])
        rms = math.sqrt(sum(v * v for v in y) / len(y)) if y else 0.0
        for i in range(bs):
            row = x[i * H : (i + 1) * H]
            acc = [0.0] * H
            if mask[i]:
                for k in range(K):
                    e = ids[i * K + k]
                    counts[e] += 1
                    owner, local = e // El, e % El
                    g = gates[i * K + k]
                    if wtype == 1:  # the gate multiplies the activation output, before its rounding
                        raise SystemExit("reference: topk_weights_type 1 is not modelled here")
                    out = expert_ffn(row, groups[owner][0], groups[owner][1], local, H, I, interleave)
                    acc = [acc[n] + g * out[n] for n in range(H)]
                if shared:
                    for s in range(S):
                        out = expert_ffn(row, sg[0], sg[1], s, H, I, interleave)
                        acc = [acc[n] + out[n] for n in range(H)]
            for n in range(H):
                want, got = round_bf16(acc[n]), y[i * H + n]
                checked += 1
                if not mask[i] and struct.pack("<f", got) != struct.pack("<f", 0.0):
                    failures.append("rank %d y[%d][%d] = %g, an inactive row must be +0" % (r, i, n, got))
                elif abs(got - want) > 2.0**-6 * abs(want) + 0.01 * rms:
                    failures.append("rank %d y[%d][%d] = %.6g, reference %.6g" % (r, i, n, got, want))
    for r in range(R):
        etn = values(o["rank%d.expert_token_nums" % r])
        if etn != counts[r * El : (r + 1) * El]:
            failures.append("rank %d expert_token_nums %s, reference %s" % (r, etn, counts[r * El : (r + 1) * El]))
    if checked == 0:
        failures.append("reference: no output was checked")
    return failures


def i32_set(name, index, value):
    def edit(meta, t):
        struct.pack_into("<i", t[name][2], 4 * index, value)

    return edit


def meta_set(**kv):
    def edit(meta, t):
        meta.update(kv)

    return edit


def drop(name):
    def edit(meta, t):
        t.pop(name)

    return edit


def retype(name, dtype, shape, nbytes):
    def edit(meta, t):
        t[name] = (dtype, shape, bytearray(nbytes))

    return edit


def duplicate_first_id(meta, t):
    raw = t["rank1.topk_ids"][2]
    struct.pack_into("<i", raw, 4, struct.unpack_from("<i", raw, 0)[0])


# (what, edit, fragment of the one stderr line). The case: 2 ranks, E = 4, K = 2, H = 64, I = 32, BS 8,
# A16W16, one shared expert, no mask (every row's ids are checked).
BREAKS = [
    ("E not a multiple of R", meta_set(moe_expert_num="3"), "moe_expert_num = 3 must be a multiple of ep_world_size = 2"),
    ("ep_world_size vs ranks", meta_set(ep_world_size="4"), '"ep_world_size" = 4 differs from "ranks" = 2'),
    ("id out of range", i32_set("rank1.topk_ids", 3, 4), "topk_ids[1][1] = 4 is outside [0, 4)"),
    ("negative id", i32_set("rank0.topk_ids", 0, -1), "topk_ids[0][0] = -1 is outside [0, 4)"),
    ("repeated id", duplicate_first_id, "topk_ids[0][1]"),
    ("BS above capacity", meta_set(num_max_tokens_per_rank="4"), "BS = 8 rows, above num_max_tokens_per_rank = 4"),
    ("receive limit", meta_set(max_recv_token_num="2"), "above max_recv_token_num = 2"),
    ("dispatch_quant_mode", meta_set(dispatch_quant_mode="3"), "dispatch_quant_mode = 3 is not 0, 2 or 4"),
    ("scenario table", meta_set(dispatch_quant_mode="2"), "weight dtype bf16 does not pair with dispatch dtype int8"),
    ("dispatch dtype name", meta_set(dispatch_quant_out_dtype="fp16"), '"dispatch_quant_out_dtype" = "fp16"'),
    ("combine_quant_mode", meta_set(combine_quant_mode="2"), "combine_quant_mode = 2 is not 0, 3 or 4"),
    ("mode 1 with quant", meta_set(combine_comm_mode="1", combine_quant_mode="4"), "combine_comm_mode = 1 needs a flat"),
    ("mode 2 on flat", meta_set(combine_comm_mode="2"), "combine_comm_mode = 2 needs a layered"),
    ("activation name", meta_set(activation="relu"), '"activation" = "relu"'),
    ("params not a list", meta_set(activation_params="7"), '"activation_params" = "7" is a number, not a list'),
    ("params too long", meta_set(activation_params="[1.0, 2.0, 3.0, 4.0, 5.0]"), "has 5 elements, at most 3"),
    ("params count", meta_set(activation_params="[1.0, 2.0]"), "activation_params has 2 values: swiglu takes"),
    ("negative clamp", meta_set(activation_params="[-1.0]"), "clamp = -1 must be >= 0"),
    ("gelu clamp", meta_set(activation="gelu", activation_params="[5.0]"), "gelu takes no clamp"),
    ("situglu beta", meta_set(activation="situglu", activation_params="[0.0]"), "(beta) = 0 must be finite and > 0"),
    ("activation_out_dtype", meta_set(activation_out_dtype="fp8_e4m3fn"), "only in an FP scenario"),
    ("topk_weights_type", meta_set(topk_weights_type="2"), '"topk_weights_type" = 2 is outside [0, 1]'),
    ("x dtype", retype("rank0.x", "F32", [8, 64], 8 * 64 * 4), "x dtype f32 is not accepted"),
    ("topk_weights rows", retype("rank0.topk_weights", "F32", [7, 2], 7 * 2 * 4), "topk_weights must have shape (8, 2)"),
    ("weight2 missing", drop("rank0.weight2"), '"rank0.weight2" is missing'),
    ("shared weight2 missing", drop("rank1.shared_weight2"), "shared weight2 is missing"),
    ("scales without pre-quantized x", retype("rank0.scales", "F8_E8M0", [8, 2], 16), "scales is given but x is not pre-quantized"),
    ("weight scales for BF16", retype("rank0.weight_scales1", "F32", [2, 64], 2 * 64 * 4), "weight scales are given for bf16 weights"),
    ("INT4 bias", retype("rank0.bias1", "F32", [2, 64], 2 * 64 * 4), "bias is given with bf16 weights"),
]


def broken(megamoe, case_path):
    failures = []
    meta0, t0 = load(case_path)
    with tempfile.TemporaryDirectory() as tmp:
        for what, edit, fragment in BREAKS:
            meta, t = json.loads(json.dumps(meta0)), {k: (d, list(s), bytearray(r)) for k, (d, s, r) in t0.items()}
            edit(meta, t)
            src, out = os.path.join(tmp, "broken.st"), os.path.join(tmp, "out.st")
            save(src, meta, t)
            p = subprocess.run([megamoe, "case", src, "-o", out], capture_output=True, text=True, timeout=60)
            lines = p.stderr.splitlines()
            if p.returncode != 2 or len(lines) != 1 or fragment not in lines[0] or os.path.exists(out):
                failures.append("%s: exit %d, output %s, stderr %r (expected 2, none, one line with %r)"
                                % (what, p.returncode, "written" if os.path.exists(out) else "none", p.stderr, fragment))
    return failures


if __name__ == "__main__":
    if sys.argv[1] == "reference":
        found = reference(sys.argv[2], sys.argv[3])
    else:
        found = broken(sys.argv[2], sys.argv[3])
    for f in found[:20]:
        print(f)
    sys.exit(1 if found else 0)
