# SPDX-License-Identifier: Apache-2.0
"""tests/python/hf_quant_tiny.py: tiny DeepSeek-V3 and gpt-oss checkpoints (numpy only), written by
hf_tiny.py's `checkpoint` for the families deepseek_v3 (FP8 E4M3 experts with F32 block scales
`weight_scale_inv`, sharded over 2 files with an index, layer 0 dense through first_k_dense_replace),
deepseek_v3_bf16 (the same family stored in BF16, no quantization_config, one file) and gpt_oss (MXFP4
experts: `*_blocks` U8 (E, N, K/32, 16), `*_scales` U8 E8M0 (E, N, K/32), BF16 biases, interleaved
gate/up rows; router with a bias). gpt_oss_nobias has all expert biases zero.

The codes are encoded here from Gaussian weights: E4M3 by the nearest of the 254 finite code values
after dividing by the block's scale (amax / 448), MXFP4 by the nearest E2M1 value after dividing by
2^ceil(log2(amax / 6)) per group of 32 (element 2m in the low nibble of byte m, as transformers'
convert_moe_packed_tensors reads them). Decoding (for the reference) is in this file too:
fp8_e4m3_values, mxfp4_values."""
import json
import os

import numpy as np

from hf_tiny import bf16_bits, write_safetensors

DS = {"hidden": 64, "inter": 32, "experts": 8, "topk": 3, "n_group": 4, "topk_group": 2, "shared": 2,
      "block": [16, 48], "layers": 2}
OSS = {"hidden": 64, "inter": 64, "experts": 8, "topk": 2, "layers": 2, "limit": 0.75}
FP4 = np.array([0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0, -0.0, -0.5, -1.0, -1.5, -2.0, -3.0, -4.0, -6.0])


def fp8_e4m3_values(codes):
    """E4M3FN codes -> float64 (NaN for 0x7F / 0xFF)."""
    c = np.asarray(codes, dtype=np.int64)
    s = np.where(c & 0x80, -1.0, 1.0)
    e, m = (c >> 3) & 0xF, c & 7
    v = np.where(e == 0, m / 8.0 * 2.0 ** -6, (1 + m / 8.0) * 2.0 ** (e - 7))
    return np.where((c & 0x7F) == 0x7F, np.nan, s * v)


def fp8_quantize(w, block):
    """w (N, K) -> (codes uint8 (N, K), scale_inv float32 (ceil(N/bn), ceil(K/bk)))."""
    bn, bk = block
    n, k = w.shape
    sn, sk = -(-n // bn), -(-k // bk)
    scale = np.zeros((sn, sk), dtype=np.float32)
    for i in range(sn):
        for j in range(sk):
            scale[i, j] = max(np.abs(w[i * bn:(i + 1) * bn, j * bk:(j + 1) * bk]).max(), 1e-6) / 448.0
    full = np.repeat(np.repeat(scale, bn, axis=0), bk, axis=1)[:n, :k].astype(np.float64)
    table = fp8_e4m3_values(np.arange(256))
    finite = np.where(np.isfinite(table))[0]
    order = finite[np.argsort(table[finite], kind="stable")]
    vals = table[order]
    t = w / full
    idx = np.clip(np.searchsorted(vals, t), 1, len(vals) - 1)
    pick = np.where(np.abs(vals[idx - 1] - t) <= np.abs(vals[idx] - t), idx - 1, idx)
    return order[pick].astype(np.uint8), scale


def mxfp4_quantize(w):
    """w (..., N, K) -> (blocks uint8 (..., N, K/32, 16), scales uint8 (..., N, K/32))."""
    g = w.reshape(*w.shape[:-1], w.shape[-1] // 32, 32)
    amax = np.maximum(np.abs(g).max(axis=-1), 1e-6)
    e = np.ceil(np.log2(amax / 6.0)).astype(np.int64)
    t = g / (2.0 ** e)[..., None]
    pos = FP4[:8]
    idx = np.abs(np.abs(t)[..., None] - pos).argmin(axis=-1) + np.where(t < 0, 8, 0)
    blocks = (idx[..., 0::2] | (idx[..., 1::2] << 4)).astype(np.uint8)
    return blocks, (e + 127).astype(np.uint8)


def mxfp4_values(blocks, scales):
    """(..., N, G, 16) codes and (..., N, G) E8M0 -> float32 (..., N, G * 32), by the contract's rule
    (E2M1 value times 2^(s - 127) in F32)."""
    lo, hi = FP4[blocks & 0x0F], FP4[blocks >> 4]
    v = np.empty(blocks.shape[:-1] + (32,))
    v[..., 0::2], v[..., 1::2] = lo, hi
    v = v.astype(np.float32) * (2.0 ** (scales.astype(np.float64) - 127)).astype(np.float32)[..., None]
    return v.reshape(*blocks.shape[:-2], blocks.shape[-2] * 32)


def config_of(family):
    if family.startswith("deepseek_v3"):
        s = DS
        c = {"architectures": ["DeepseekV3ForCausalLM"], "model_type": "deepseek_v3", "hidden_size": s["hidden"],
             "num_hidden_layers": s["layers"], "intermediate_size": 96, "moe_intermediate_size": s["inter"],
             "n_routed_experts": s["experts"], "num_experts_per_tok": s["topk"], "n_shared_experts": s["shared"],
             "first_k_dense_replace": 1, "moe_layer_freq": 1, "n_group": s["n_group"], "topk_group": s["topk_group"],
             "norm_topk_prob": True, "routed_scaling_factor": 2.5, "scoring_func": "sigmoid",
             "topk_method": "noaux_tc", "hidden_act": "silu", "num_attention_heads": 4, "kv_lora_rank": 16,
             "vocab_size": 16, "torch_dtype": "bfloat16"}
        if family == "deepseek_v3":
            c["quantization_config"] = {"activation_scheme": "dynamic", "fmt": "e4m3", "quant_method": "fp8",
                                        "weight_block_size": s["block"]}
        return c
    s = OSS
    return {"architectures": ["GptOssForCausalLM"], "model_type": "gpt_oss", "hidden_size": s["hidden"],
            "num_hidden_layers": s["layers"], "intermediate_size": s["inter"], "num_local_experts": s["experts"],
            "num_experts_per_tok": s["topk"], "experts_per_token": s["topk"], "swiglu_limit": s["limit"],
            "hidden_act": "silu", "num_attention_heads": 4, "head_dim": 16, "vocab_size": 16,
            "torch_dtype": "bfloat16", "layer_types": ["sliding_attention", "full_attention"],
            "quantization_config": {"modules_to_not_convert": ["model.layers.*.self_attn", "model.layers.*.mlp.router",
                                                               "model.embed_tokens", "lm_head"],
                                    "quant_method": "mxfp4"}}


def ds_linear(name, w, fp8, block):
    """A DeepSeek weight: BF16, or FP8 codes + weight_scale_inv."""
    if not fp8:
        return [(name + ".weight", bf16_bits(w))]
    q, s = fp8_quantize(w, block)
    return [(name + ".weight", q, "F8_E4M3"), (name + ".weight_scale_inv", s)]


def ds_layer(c, layer, rng, fp8):
    s = DS
    h, i, e = s["hidden"], s["inter"], s["experts"]
    g = lambda *shape, scale=0.08: rng.standard_normal(shape) * scale
    p = "model.layers.%d." % layer
    t = [(p + "input_layernorm.weight", bf16_bits(np.ones(h))), (p + "self_attn.o_proj.weight", bf16_bits(g(h, h)))]
    if layer < c["first_k_dense_replace"]:
        for n, shape in (("gate_proj", (96, h)), ("up_proj", (96, h)), ("down_proj", (h, 96))):
            t += ds_linear(p + "mlp." + n, g(*shape), fp8, s["block"])
        return t
    t += [(p + "mlp.gate.weight", bf16_bits(g(e, h, scale=0.3))),
          (p + "mlp.gate.e_score_correction_bias", (rng.standard_normal(e) * 0.1).astype(np.float32))]
    for m in range(e):
        for n, shape in (("gate_proj", (i, h)), ("up_proj", (i, h)), ("down_proj", (h, i))):
            t += ds_linear(p + "mlp.experts.%d.%s" % (m, n), g(*shape), fp8, s["block"])
    si = i * s["shared"]
    for n, shape in (("gate_proj", (si, h)), ("up_proj", (si, h)), ("down_proj", (h, si))):
        t += ds_linear(p + "mlp.shared_experts." + n, g(*shape), fp8, s["block"])
    return t


def oss_layer(layer, rng, bias):
    s = OSS
    h, i, e = s["hidden"], s["inter"], s["experts"]
    p = "model.layers.%d." % layer
    b = lambda *shape: bf16_bits(rng.standard_normal(shape) * 0.2 if bias else np.zeros(shape))
    t = [(p + "input_layernorm.weight", bf16_bits(np.ones(h))), (p + "self_attn.sinks", bf16_bits(np.zeros(4))),
         (p + "mlp.router.weight", bf16_bits(rng.standard_normal((e, h)) * 0.3)),
         (p + "mlp.router.bias", bf16_bits(rng.standard_normal(e) * 0.3))]
    for n, shape in (("gate_up_proj", (e, 2 * i, h)), ("down_proj", (e, h, i))):
        blocks, scales = mxfp4_quantize(rng.standard_normal(shape) * 0.08)
        t += [(p + "mlp.experts.%s_blocks" % n, blocks), (p + "mlp.experts.%s_scales" % n, scales),
              (p + "mlp.experts.%s_bias" % n, b(*shape[:2]))]
    return t


def write_family(family, out_dir, seed):
    rng = np.random.default_rng(seed)
    c = config_of(family)
    os.makedirs(out_dir, exist_ok=True)
    with open(os.path.join(out_dir, "config.json"), "w") as f:
        json.dump(c, f, indent=2)
    head = [("model.embed_tokens.weight", bf16_bits(rng.standard_normal((16, c["hidden_size"])))),
            ("model.extra_u32_counter", np.arange(3, dtype=np.uint32))]
    if family.startswith("gpt_oss"):
        layers = [oss_layer(n, rng, family == "gpt_oss") for n in range(c["num_hidden_layers"])]
    else:
        layers = [ds_layer(c, n, rng, family == "deepseek_v3") for n in range(c["num_hidden_layers"])]
    tail = [("model.norm.weight", bf16_bits(np.ones(c["hidden_size"])))]
    if family != "deepseek_v3":
        write_safetensors(os.path.join(out_dir, "model.safetensors"), head + sum(layers, []) + tail)
        return
    # sharded: the dense layer 0 (behind a 3-byte tensor: odd offsets) in the first shard, layer 1 in the second
    shards = [head + [("model.extra_flags", np.ones(3, dtype=np.uint8))] + layers[0], layers[1] + tail]
    names = ["model-%05d-of-%05d.safetensors" % (k + 1, len(shards)) for k in range(len(shards))]
    weight_map = {}
    for name, shard in zip(names, shards):
        write_safetensors(os.path.join(out_dir, name), shard)
        weight_map.update({t[0]: name for t in shard})
    with open(os.path.join(out_dir, "model.safetensors.index.json"), "w") as f:
        json.dump({"metadata": {"total_size": 0}, "weight_map": dict(sorted(weight_map.items()))}, f, indent=2)
