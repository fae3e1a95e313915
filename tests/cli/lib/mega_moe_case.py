# SPDX-License-Identifier: Apache-2.0
"""tests/cli/lib/mega_moe_case.py: independent checks of `megamoe case` on mega_moe files (standard
library only), used by tests/cli/case_mega_moe.sh.

  reference CASE OUT   recomputes y of an A16W16 case from the case file alone (float64 with the
                       spec's BF16 rounding points: GEMM1 output, activation output, expert output,
                       final sum; swiglu without clamp) and compares it with megamoe's output file;
                       expert_token_nums must match exactly. It reads the layout the way the spec
                       says (weight1 (E_l, H, 2I) or (E_l, 2I, H) with transpose_weight1, gate = the
                       first I columns; inactive rows give y = 0; shared experts add unweighted), so
                       it catches a case runner that wires a tensor or attribute wrongly.
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


def expert_ffn(x, w1, w2, e, H, I, t1, t2):
    """One A16W16 expert on one row, the spec's rounding points; swiglu without clamp."""
    h = []
    for n in range(2 * I):
        acc = 0.0
        for k in range(H):
            acc += x[k] * (w1[(e * 2 * I + n) * H + k] if t1 else w1[(e * H + k) * 2 * I + n])
        h.append(round_bf16(acc))
    a = []
    for j in range(I):
        g, u = h[j], h[I + j]
        a.append(round_bf16(g / (1.0 + math.exp(-g)) * u))
    out = []
    for n in range(H):
        acc = 0.0
        for k in range(I):
            acc += a[k] * (w2[(e * H + n) * I + k] if t2 else w2[(e * I + k) * H + n])
        out.append(round_bf16(acc))
    return out


def reference(case_path, out_path):
    meta, t = load(case_path)
    _, o = load(out_path)
    failures = []
    assert meta["op"] == "mega_moe" and meta.get("dispatch_quant_mode", "0") == "0"
    assert meta.get("activation", "swiglu") == "swiglu" and "activation_params" not in meta
    R, E = int(meta["ranks"]), int(meta["moe_expert_num"])
    El = E // R
    t1 = meta.get("transpose_weight1", "false") == "true"
    t2 = meta.get("transpose_weight2", "false") == "true"
    wtype = int(meta.get("topk_weights_type", "0"))
    H = t["rank0.x"][1][1]
    I = (t["rank0.weight1"][1][1] if t1 else t["rank0.weight1"][1][2]) // 2
    K = t["rank0.topk_ids"][1][1]
    w1 = [values(t["rank%d.weight1" % r]) for r in range(R)]
    w2 = [values(t["rank%d.weight2" % r]) for r in range(R)]
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
            s1, s2 = values(t["rank%d.shared_weight1" % r]), values(t["rank%d.shared_weight2" % r])
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
                    out = expert_ffn(row, w1[owner], w2[owner], local, H, I, t1, t2)
                    acc = [acc[n] + g * out[n] for n in range(H)]
                if shared:
                    for s in range(S):
                        out = expert_ffn(row, s1, s2, s, H, I, t1, t2)
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
