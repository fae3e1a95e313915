# SPDX-License-Identifier: Apache-2.0
"""tests/python/hf_moe_reference.py: an independent float64 reference of the Hugging Face MoE blocks, and
the check of `megamoe layer`'s output against it (numpy only).

Written from the transformers modeling code (MixtralSparseMoeBlock, Qwen3MoeSparseMoeBlock,
Qwen2MoeSparseMoeBlock, DeepseekV3MoE, GptOssMLP; docs/models.md), not from megamoe's C code:
    logits  = x @ gate.T                          (x rounded to BF16 first when the input is F32)
    p       = softmax(logits)                     top-k of p, ties to the lower index
    w       = p_k / sum(p_k)  (mixtral always; qwen iff norm_topk_prob)
    y       = sum_k w_k * down(silu(gate_proj(x)) * up_proj(x))
            + sigmoid(x @ shared_expert_gate.T) * shared_expert(x)        (qwen2_moe)
in float64 throughout (HF's BF16 intermediate roundings are not modelled: the reference is the exact
value both implementations approximate).
deepseek_v3 (DeepseekV3TopkRouter, DeepseekV3MoE):
    s = sigmoid(x @ gate.T); c = s + e_score_correction_bias; group score = sum of the group's top-2 c;
    the topk_group best groups kept, c of the others set to 0; top-k of c; w = s_k / (sum s_k + 1e-20)
    (norm_topk_prob) * routed_scaling_factor; y = sum_k w_k expert_k(x) + shared_experts(x)
    with FP8 weights dequantized by the contract's rule W = BF16(F32(e4m3(q) * scale_inv[block])).
gpt_oss (GptOssTopKRouter, GptOssExperts): l = x @ router.T + bias; top-k of l; w = softmax(l_k);
    gu = x @ W_gu.T + b_gu, gate = gu[::2], up = gu[1::2], gate = min(gate, limit), up = clip(up, +-limit),
    out = ((up + 1) * gate * sigmoid(1.702 gate)) @ W_d.T + b_d; y = sum_k w_k out_k, with the MXFP4
    weights as convert_moe_packed_tensors decodes them (E2M1 value * 2^(scale - 127)).

  python3 hf_moe_reference.py check MODEL_DIR LAYER X.safetensors OUT.safetensors [MODEL_DIR LAYER X OUT ...] [--tol T]

Checks: topk_ids equal exactly; topk_weights within 1e-5 (an F32 softmax against float64); y within
T * max|y_ref| per element (default T = 1/64: MegaMoE's A16W16 rounds GEMM1's output, the activation
output and y to BF16, docs/mega_moe.md). Prints the measured errors; exits 1 on a mismatch."""
import json
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from hf_tiny import bf16_bits, bf16_values, load_tensor, read_safetensors  # noqa: E402


def silu(v):
    return v / (1.0 + np.exp(-v))


# ---- AWQ / GPTQ: the published dequantization w = (q - z) * s in float64 ------------------------------
# Unpacking as AutoAWQ's unpack_awq + reverse_awq_order (AWQ_REVERSE_ORDER [0, 4, 1, 5, 2, 6, 3, 7]) and
# AutoGPTQ's QuantLinear forward (shifts 0, 4, .., 28 along the packed dimension; v1 adds 1 to the zeros).
AWQ_REVERSE_ORDER = [0, 4, 1, 5, 2, 6, 3, 7]


def unpack_cols(words):
    """int32 (r, c) -> (r, 8 c) nibbles, column 8 j + i = nibble i of word j."""
    w = words.view(np.uint32)[:, :, None] >> (np.arange(8, dtype=np.uint32) * 4)[None, None, :]
    return (w & 0xF).reshape(words.shape[0], -1).astype(np.int64)


def dequantize(model_dir, c, base):
    """The float64 nn.Linear weight (out, in) of base.qweight / .qzeros / .scales."""
    q = c["quantization_config"]
    scales = load_tensor(model_dir, base + ".scales").astype(np.float64)  # (in / g, out)
    zeros = unpack_cols(load_tensor(model_dir, base + ".qzeros"))  # (in / g, out)
    if q["quant_method"] == "awq":
        iw = unpack_cols(load_tensor(model_dir, base + ".qweight"))  # (in, out) in AWQ's packed order
        rev = np.arange(iw.shape[1]).reshape(-1, 8)[:, AWQ_REVERSE_ORDER].reshape(-1)
        iw, zeros = iw[:, rev], zeros[:, rev]
    else:
        iw = unpack_cols(load_tensor(model_dir, base + ".qweight").T).T  # (in, out), packed along in
        if q.get("checkpoint_format", "gptq") == "gptq":
            zeros = zeros + 1
    k = iw.shape[0]
    g = q["group_size"] if q["group_size"] > 0 else k
    group = np.arange(k) // g
    return ((iw - zeros[group]) * scales[group]).T


def linear_weight(model_dir, c, name):
    """name.weight (BF16 or F16) or, in a quantized checkpoint, the dequantized name.qweight."""
    base = name[: -len(".weight")]
    if "quantization_config" in c:
        try:
            return dequantize(model_dir, c, base)
        except KeyError:
            pass
    a = load_tensor(model_dir, name)
    return a.astype(np.float64) if a.dtype == np.float16 else bf16_values(a)


def sigmoid(v):
    return 1.0 / (1.0 + np.exp(-v))


def first_k(v, k):
    """Indices of the k largest values, descending, ties to the lower index; and the margin between the
    k-th and the (k+1)-th (inf when there is none)."""
    order = sorted(range(len(v)), key=lambda e: (-v[e], e))
    return order[:k], (v[order[k - 1]] - v[order[k]]) if k < len(v) else np.inf


def route(c, logits, bias):
    """deepseek_v3 / gpt_oss routing of one row of float64 logits: ids, weights, the smallest margin."""
    k_n = c["num_experts_per_tok"]
    if c["model_type"] == "gpt_oss":
        l = logits + bias
        ids, margin = first_k(l, k_n)
        w = np.exp(l[ids] - l[ids].max())
        return ids, w / w.sum(), margin
    s = sigmoid(logits)
    ch = s + bias
    g_n, tg = c["n_group"], c["topk_group"]
    per = len(ch) // g_n
    gs = np.sort(ch.reshape(g_n, per), axis=-1)[:, -2:].sum(axis=-1)
    groups, gmargin = first_k(gs, tg)
    keep = np.zeros(len(ch), dtype=bool)
    for g in groups:
        keep[g * per:(g + 1) * per] = True
    ids, margin = first_k(np.where(keep, ch, 0.0), k_n)
    w = s[ids]
    if c.get("norm_topk_prob", True):
        w = w / (w.sum() + 1e-20)
    return ids, w * c.get("routed_scaling_factor", 2.5), min(margin, gmargin)


def quant_parts(model_dir, layer, c):
    """The router weight, its bias, and a function giving an expert's (gate, up, down, b1, b2) in float64
    (gate/up de-interleaved for gpt_oss; biases 0 for deepseek_v3); expert -1: the shared experts."""
    from hf_quant_tiny import fp8_e4m3_values, mxfp4_values
    p = "model.layers.%d.mlp." % layer
    T = lambda name: load_tensor(model_dir, p + name)
    if c["model_type"] == "gpt_oss":
        gate, bias = bf16_values(T("router.weight")), bf16_values(T("router.bias"))
        wq = lambda n: bf16_values(bf16_bits(mxfp4_values(T("experts.%s_blocks" % n), T("experts.%s_scales" % n))))
        gu, d = wq("gate_up_proj"), wq("down_proj")
        bgu, bd = bf16_values(T("experts.gate_up_proj_bias")), bf16_values(T("experts.down_proj_bias"))
        return gate, bias, lambda e: (gu[e][0::2], gu[e][1::2], d[e], bgu[e], bd[e])
    q = c.get("quantization_config")

    def W(name):
        w = load_tensor(model_dir, p + name + ".weight")
        if not q:
            return bf16_values(w)
        bn, bk = q.get("weight_block_size", [128, 128])
        s = load_tensor(model_dir, p + name + ".weight_scale_inv")
        full = np.repeat(np.repeat(s, bn, axis=0), bk, axis=1)[: w.shape[0], : w.shape[1]]
        return bf16_values(bf16_bits(fp8_e4m3_values(w).astype(np.float32) * full.astype(np.float32)))

    def expert(e):
        pre = "shared_experts." if e < 0 else "experts.%d." % e
        return W(pre + "gate_proj"), W(pre + "up_proj"), W(pre + "down_proj"), 0.0, 0.0
    return bf16_values(T("gate.weight")), T("gate.e_score_correction_bias").astype(np.float64), expert


def router_margin(model_dir, layer, x):
    """The smallest selection margin of x's rows (hf_tiny.write_input draws rows until it is >= 1e-3)."""
    c = load_config(model_dir)
    gate, bias, _ = quant_parts(model_dir, layer, c)
    return min(route(c, row, bias)[2] for row in x @ gate.T)


def quant_block(model_dir, layer, x, c):
    gate, bias, expert = quant_parts(model_dir, layer, c)
    k_n = c["num_experts_per_tok"]
    ids = np.zeros((x.shape[0], k_n), dtype=np.int64)
    w = np.zeros((x.shape[0], k_n))
    y = np.zeros_like(x)
    limit = c.get("swiglu_limit", 7.0)
    cache = {}
    for t, row in enumerate(x @ gate.T):
        ids[t], w[t], _ = route(c, row, bias)
        for k in range(k_n):
            e = int(ids[t, k])
            g, u, d, b1, b2 = cache.setdefault(e, expert(e))
            v = x[t]
            if c["model_type"] == "gpt_oss":
                gg, uu = np.minimum(v @ g.T + b1[0::2], limit), np.clip(v @ u.T + b1[1::2], -limit, limit)
                y[t] += w[t, k] * (((uu + 1) * gg * sigmoid(1.702 * gg)) @ d.T + b2)
            else:
                y[t] += w[t, k] * ((silu(v @ g.T) * (v @ u.T)) @ d.T)
    if c["model_type"] == "deepseek_v3":
        g, u, d, _, _ = expert(-1)
        y += (silu(x @ g.T) * (x @ u.T)) @ d.T
    return ids, w, y, None


def load_config(model_dir):
    with open(os.path.join(model_dir, "config.json")) as f:
        return json.load(f)


def moe_block(model_dir, layer, x):
    c = load_config(model_dir)
    fam = c["model_type"]
    if fam in ("deepseek_v3", "gpt_oss"):
        return quant_block(model_dir, layer, x, c)
    W = lambda name: linear_weight(model_dir, c, "model.layers.%d.%s" % (layer, name))
    if fam == "mixtral":
        e_n, part, names = c["num_local_experts"], "block_sparse_moe", ("w1", "w3", "w2")
        renorm = True
    else:
        e_n, part, names = c["num_experts"], "mlp", ("gate_proj", "up_proj", "down_proj")
        renorm = bool(c.get("norm_topk_prob", False))
    k_n = c["num_experts_per_tok"]
    logits = x @ W(part + ".gate.weight").T
    p = np.exp(logits - logits.max(axis=1, keepdims=True))
    p /= p.sum(axis=1, keepdims=True)
    ids = np.zeros((x.shape[0], k_n), dtype=np.int64)
    for t in range(x.shape[0]):
        ids[t] = sorted(range(e_n), key=lambda e: (-p[t, e], e))[:k_n]
    w = np.take_along_axis(p, ids, axis=1)
    if renorm:
        w = w / w.sum(axis=1, keepdims=True)

    def mlp(prefix, v):
        g, u, d = (W(prefix + n + ".weight") for n in names)
        return (silu(v @ g.T) * (v @ u.T)) @ d.T

    y = np.zeros_like(x)
    for t in range(x.shape[0]):
        for k in range(k_n):
            y[t] += w[t, k] * mlp("%s.experts.%d." % (part, ids[t, k]), x[t : t + 1])[0]
    if fam == "qwen2_moe":
        gate = 1.0 / (1.0 + np.exp(-(x @ W("mlp.shared_expert_gate.weight").T)))
        y += gate * mlp("mlp.shared_expert.", x)
    return ids, w, y, p


def check(model_dir, layer, x_path, out_path, tol):
    dtype, x = read_safetensors(x_path)["x"]
    if dtype == "F32":  # megamoe rounds an F32 x to BF16 (nearest even) first
        x = bf16_bits(x)
    x = bf16_values(x)
    ids, w, y, p = moe_block(model_dir, layer, x)
    out = read_safetensors(out_path)
    got_ids = out["topk_ids"][1].astype(np.int64)
    got_w = out["topk_weights"][1].astype(np.float64)
    got_y = bf16_values(out["y"][1])
    assert out["y"][0] == "BF16" and out["topk_ids"][0] == "I32" and out["topk_weights"][0] == "F32", out.keys()
    failures = []
    if got_ids.shape != ids.shape or not np.array_equal(got_ids, ids):
        failures.append("topk_ids differ: first rows %s vs reference %s" % (got_ids[:3].tolist(), ids[:3].tolist()))
    if got_y.shape != y.shape:
        failures.append("y has shape %s, reference %s" % (got_y.shape, y.shape))
    if x.shape[0] == 0:  # no tokens: the shapes are all there is to check
        print("tokens 0: shapes %s %s %s" % (got_y.shape, got_ids.shape, got_w.shape))
        return 1 if failures or got_ids.shape != ids.shape or got_w.shape != w.shape else 0
    werr = float(np.abs(got_w - w).max()) if got_w.shape == w.shape else float("inf")
    if werr > 1e-5:
        failures.append("topk_weights differ by %.3g (> 1e-5)" % werr)
    scale = float(np.abs(y).max())
    yerr = float(np.abs(got_y - y).max()) if got_y.shape == y.shape else float("inf")
    print("tokens %d: routing identical=%s, max |w - ref| = %.3g, max |y - ref| = %.3g = %.3g x max|y_ref| (%.3g)"
          % (x.shape[0], not failures[:1] or "ids" not in failures[0], werr, yerr, yerr / scale, scale))
    if yerr > tol * scale:
        failures.append("y differs by %.3g > %.3g x max|y_ref| = %.3g" % (yerr, tol, tol * scale))
    for f in failures:
        print("FAIL: " + f)
    return 1 if failures else 0


def main(argv):
    tol = 1.0 / 64
    args = list(argv[1:])
    if "--tol" in args:
        i = args.index("--tol")
        tol = float(args[i + 1])
        del args[i : i + 2]
    if len(args) < 5 or (len(args) - 1) % 4 != 0 or args[0] != "check":
        raise SystemExit(__doc__)
    rc = 0
    for i in range(1, len(args), 4):
        print("%s layer %s, %s -> %s:" % tuple(args[i : i + 4]))
        rc |= check(args[i], int(args[i + 1]), args[i + 2], args[i + 3], tol)
    sys.exit(rc)


if __name__ == "__main__":
    main(sys.argv)
