# SPDX-License-Identifier: Apache-2.0
"""An independent MoE block in the style of Hugging Face's Qwen3-MoE / Mixtral sparse block (router,
softmax, top-k, renormalisation, per-expert gate/up/down projections, SiLU gating, index_add of the
weighted expert outputs), in torch float64 when torch is present, else numpy float64. It never calls
megamoe: its weights are the exact dequantization (from the documented rules) of the weights megamoe
gets in each format, and its activations pass through the scenario's documented quantization points
(docs/mega_moe.md "Numerics per scenario": x at dispatch, the GEMM2 input), implemented here in numpy
from docs/numerics.md. Tolerances: the scenario bounds of docs/mega_moe.md ("Measured errors",
src/ops/mega_moe/tolerance.h), metric max |y - y_ref| / max |y_ref|."""
import numpy as np

from format_reference import bf16_bits, bf16_value, decode_codes, mx_reference, unpack_nibbles

try:
    import torch
except ImportError:  # numpy fallback
    torch = None

# format -> (megamoe attributes of the call, tolerance)
SCENARIOS = {
    "bf16": ({}, 1 / 64),
    "int8": ({"dispatch_quant_mode": 2, "dispatch_quant_out_dtype": "int8"}, 1 / 32),
    "int4": ({"dispatch_quant_mode": 2, "dispatch_quant_out_dtype": "int8"}, 1 / 32),
    "fp8_e4m3fn": ({"dispatch_quant_mode": 4, "dispatch_quant_out_dtype": "fp8_e4m3fn"}, 1 / 8),
    "fp8_e5m2": ({"dispatch_quant_mode": 4, "dispatch_quant_out_dtype": "fp8_e5m2"}, 1 / 4),
    "fp4_e2m1": ({"dispatch_quant_mode": 4, "dispatch_quant_out_dtype": "fp8_e4m3fn"}, 1 / 4),  # A8W4-FP
}


def _int8_div_away(v):
    v = v.astype(np.float32)
    s = (np.abs(v).max(axis=-1, keepdims=True) / np.float32(127)).astype(np.float32)
    with np.errstate(divide="ignore", invalid="ignore"):
        r = (v / s).astype(np.float64)
    t = np.trunc(r)
    q = np.clip(np.nan_to_num(np.where(np.abs(r - t) >= 0.5, t + np.sign(r), t)), -127, 127)
    return q * s.astype(np.float64)


def _int8_mul_even(v):
    v = v.astype(np.float32)
    amax = np.abs(v).max(axis=-1, keepdims=True).astype(np.float32)
    with np.errstate(divide="ignore", invalid="ignore"):
        m = (np.float32(127) / amax).astype(np.float32)
        q = np.clip(np.nan_to_num(np.rint((v * m).astype(np.float32).astype(np.float64))), -127, 127)
    return q * (amax / np.float32(127)).astype(np.float32).astype(np.float64)


def _mx(kind):
    def quant(v):
        codes, scales = mx_reference(v.astype(np.float32), kind)
        n = v.shape[-1]
        return decode_codes(codes, kind) * np.exp2(np.repeat(scales.astype(np.float64) - 127, 32, axis=-1)[..., :n])
    return quant


def _bf16(v):
    return bf16_value(bf16_bits(v.astype(np.float32))).astype(np.float64)


# format -> (quantization of x at dispatch, of the GEMM2 input), as docs/mega_moe.md's scenario table
DATA_FLOW = {
    "bf16": (lambda v: v, _bf16),
    "int8": (_int8_div_away, _int8_mul_even),
    "int4": (_int8_div_away, _int8_mul_even),
    "fp8_e4m3fn": (_mx("fp8_e4m3fn"), lambda v: _mx("fp8_e4m3fn")(_bf16(v))),
    "fp8_e5m2": (_mx("fp8_e5m2"), lambda v: _mx("fp8_e5m2")(_bf16(v))),
    "fp4_e2m1": (_mx("fp8_e4m3fn"), lambda v: _mx("fp8_e4m3fn")(_bf16(v))),
}


def make_matrices(fmt, count, n, k, rng):
    """count expert matrices (n output channels, k inputs), stored (count, n, k) (transposed layout).
    Returns (megamoe tensors dict: weight, scales, bias; exact float64 values (count, n, k))."""
    step = 2.0 ** np.round(np.log2(np.sqrt(3.0 / k) / 128))
    if fmt == "bf16":
        w = rng.integers(-128, 128, (count, n, k)) * step
        return {"weight": bf16_bits(w.astype(np.float32))}, w
    if fmt in ("int8", "int4"):
        lim = 127 if fmt == "int8" else 7
        q = rng.integers(-lim, lim + 1, (count, n, k)).astype(np.int8)
        s = (np.exp2(rng.integers(-10, -4, (count, n))) * rng.uniform(1, 2, (count, n))).astype(np.float32)
        w = q.astype(np.float64) * s[..., None]
        if fmt == "int8":
            return {"weight": q, "scales": s}, w
        from megamoe import int4_pack  # packing is tested against its own rule in test_formats
        bias = (8.0 * s.astype(np.float64) * q.astype(np.float64).sum(axis=2)).astype(np.float32)  # standard MSD bias
        return {"weight": int4_pack(q), "scales": s, "bias": bias}, w
    # MX: element codes and E8M0 scales per 32 along k, laid out (count, n, ceil(k/64), 2)
    groups = (k + 31) // 32
    codes = rng.integers(0, 256 if fmt != "fp4_e2m1" else 16, (count, n, k)).astype(np.uint8)
    if fmt == "fp8_e4m3fn":
        codes[(codes & 0x7F) == 0x7F] = 0x3F
    if fmt == "fp8_e5m2":
        codes[(codes & 0x7F) >= 0x7C] = 0x3C
    scales = rng.integers(120, 124, (count, n, groups)).astype(np.uint8)
    values = decode_codes(codes, fmt) * np.exp2(np.repeat(scales.astype(np.float64) - 127, 32, axis=2)[..., :k])
    layout = np.zeros((count, n, (k + 63) // 64 * 2), np.uint8)
    layout[..., :groups] = scales
    layout = layout.reshape(count, n, (k + 63) // 64, 2)
    if fmt == "fp4_e2m1":
        packed = codes[..., 0::2] | (codes[..., 1::2] << 4)
        assert np.array_equal(unpack_nibbles(packed, k), codes)
        codes = packed.astype(np.uint8)
    return {"weight": codes, "scales": layout}, values


def make_experts(fmt, count, hidden, inter, rng):
    """megamoe.ExpertWeights keyword arguments and the exact (w1 (count, 2I, H), w2 (count, H, I))."""
    t1, w1 = make_matrices(fmt, count, 2 * inter, hidden, rng)
    t2, w2 = make_matrices(fmt, count, hidden, inter, rng)
    kw = {"weight1": t1["weight"], "weight2": t2["weight"], "transpose_weight1": True, "transpose_weight2": True,
          "dtype": fmt}
    for key, i in (("scales", ""), ("bias", "")):
        if key in t1:
            kw[("weight_scales" if key == "scales" else "bias") + "1"] = t1[key]
            kw[("weight_scales" if key == "scales" else "bias") + "2"] = t2[key]
    return kw, w1, w2


def make_tokens(tokens, hidden, num_experts, topk, rng):
    """BF16 x (uint16 codes), router logits -> top-k ids (int32) and renormalised weights (float32)."""
    x = bf16_bits(rng.standard_normal((tokens, hidden)).astype(np.float32))
    logits = rng.standard_normal((tokens, num_experts))
    probs = np.exp(logits - logits.max(axis=1, keepdims=True))
    probs /= probs.sum(axis=1, keepdims=True)
    ids = np.argsort(-probs, axis=1, kind="stable")[:, :topk].astype(np.int32)
    w = np.take_along_axis(probs, ids, axis=1)
    w = (w / w.sum(axis=1, keepdims=True)).astype(np.float32)  # norm_topk_prob
    return x, ids, w


class SparseMoeBlock:
    """Hugging Face-style sparse MoE block with fixed routing (ids, weights) and experts given as
    gate/up/down projection weights in nn.Linear's (out, in) layout; float64."""

    def __init__(self, w1, w2, inter, fmt="bf16"):
        # w1 (E, 2I, H): gate_proj = first I rows, up_proj = the next I; w2 (E, H, I): down_proj
        self.gate, self.up, self.down = w1[:, :inter], w1[:, inter:], w2
        self.quant_x, self.quant_act = DATA_FLOW[fmt]

    def __call__(self, x_bf16, ids, weights):
        x = self.quant_x(bf16_value(x_bf16).astype(np.float64))
        if torch is not None:
            return self._torch(x, ids, weights)
        y = np.zeros_like(x)
        for e in range(self.gate.shape[0]):
            rows, slot = np.nonzero(ids == e)
            if len(rows) == 0:
                continue
            h = x[rows]
            g = h @ self.gate[e].T
            act = self.quant_act(g / (1 + np.exp(-g)) * (h @ self.up[e].T))
            np.add.at(y, rows, (act @ self.down[e].T) * weights[rows, slot][:, None])
        return y

    def _torch(self, x, ids, weights):
        x = torch.from_numpy(x)
        gate, up, down = (torch.from_numpy(np.ascontiguousarray(a)) for a in (self.gate, self.up, self.down))
        ids_t, w_t = torch.from_numpy(ids.astype(np.int64)), torch.from_numpy(weights.astype(np.float64))
        y = torch.zeros_like(x)
        mask = torch.nn.functional.one_hot(ids_t, num_classes=gate.shape[0]).permute(2, 1, 0)
        for e in range(gate.shape[0]):
            slot, rows = torch.where(mask[e])
            if rows.numel() == 0:
                continue
            h = x[rows]
            act = torch.nn.functional.silu(h @ gate[e].T) * (h @ up[e].T)
            act = torch.from_numpy(self.quant_act(act.numpy()))
            y.index_add_(0, rows, (act @ down[e].T) * w_t[rows, slot, None])
        return y.numpy()


def relative_error(y_bf16, y_ref):
    y = bf16_value(np.asarray(y_bf16)).astype(np.float64)
    return float(np.abs(y - y_ref).max() / max(np.abs(y_ref).max(), 1e-30))
