# SPDX-License-Identifier: Apache-2.0
"""tests/python/hf_tiny.py: tiny Hugging Face MoE checkpoints for tests, without network (numpy only).

The folders look like the published ones: config.json with the family's keys, tensors with the real
names and layouts (nn.Linear weights (out, in)), BF16 stored as uint16 bits, the non-MoE tensors of a
decoder layer beside the MoE ones (so a loader must pick its own), one unrelated U32 tensor and one
I64 tensor (a loader must not reject the file for them), and for mixtral a sharded layout:
model.safetensors.index.json naming two shards, layer 0 (and the embedding) in the first, at odd byte
offsets behind a 3-byte U8 tensor, layer 1 in the second. --shape writes a checkpoint of a real model's MoE sizes (e.g. 2048,768,128,8 for
Qwen3-30B-A3B) to measure a real layer without downloading one.

  python3 hf_tiny.py checkpoint FAMILY DIR [--seed S] [--shape H,I,E,K[,I_s]] [--quant awq|gptq|gptq_v2
                                                          [--group-size G]]
                                         FAMILY: mixtral, qwen3_moe, qwen2_moe (--quant for these three),
                                                 deepseek_v3 (FP8), deepseek_v3_bf16, gpt_oss, gpt_oss_nobias
                                                 (hf_quant_tiny.py)
  python3 hf_tiny.py input DIR LAYER X.safetensors --tokens T [--dtype bf16|f32] [--seed S]

`input` writes x (T, H) whose routing is unambiguous: every token's K-th and (K+1)-th router
probabilities (computed in float64 from the BF16 values) differ by at least 1e-3, so an F32 router and
the float64 reference choose the same experts (rows closer than that are drawn again)."""
import json
import os
import shutil
import struct
import sys

import numpy as np

SIZES = {"hidden": 64, "inter": 32, "shared_inter": 48, "experts": 8, "topk": 2, "layers": 2, "vocab": 16}


def bf16_bits(a):
    """float array -> uint16 BF16 bits, round to nearest even (no NaN in these data)."""
    b = np.asarray(a, dtype=np.float32).view(np.uint32).astype(np.uint64)
    return ((b + 0x7FFF + ((b >> 16) & 1)) >> 16).astype(np.uint16)


def bf16_values(bits):
    return (np.asarray(bits, dtype=np.uint16).astype(np.uint32) << 16).view(np.float32).astype(np.float64)


DTYPES = {np.uint8: "U8", np.uint16: "BF16", np.float32: "F32", np.int32: "I32", np.int64: "I64", np.uint32: "U32",
          np.float16: "F16"}


def write_safetensors(path, tensors, meta=None):
    """tensors: list of (name, array) or (name, array, safetensors dtype); uint16 arrays are BF16 bits."""
    header = {"__metadata__": meta or {"format": "pt"}}
    blobs, at = [], 0
    for t in tensors:
        name, a = t[0], t[1]
        raw = np.ascontiguousarray(a).tobytes()
        dtype = t[2] if len(t) > 2 else DTYPES[a.dtype.type]
        header[name] = {"dtype": dtype, "shape": list(a.shape), "data_offsets": [at, at + len(raw)]}
        blobs.append(raw)
        at += len(raw)
    text = json.dumps(header).encode()
    text += b" " * ((8 - len(text) % 8) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)) + text + b"".join(blobs))


def read_safetensors(path):
    with open(path, "rb") as f:
        blob = f.read()
    n = struct.unpack("<Q", blob[:8])[0]
    header = json.loads(blob[8 : 8 + n])
    header.pop("__metadata__", None)
    np_of = {"U8": np.uint8, "F8_E4M3": np.uint8, "BF16": np.uint16, "F32": np.float32, "I32": np.int32,
             "I64": np.int64, "U32": np.uint32, "F16": np.float16}
    out = {}
    for name, v in header.items():
        b, e = v["data_offsets"]
        out[name] = (v["dtype"], np.frombuffer(blob[8 + n + b : 8 + n + e], dtype=np_of[v["dtype"]]).reshape(v["shape"]))
    return out


def copy_checkpoint(src, dst, config=None):
    """Copies checkpoint folder src to dst; config(c), when given, edits the copy's config.json dict c."""
    shutil.copytree(src, dst)
    c = json.load(open(dst + "/config.json"))
    if config:
        config(c)
    json.dump(c, open(dst + "/config.json", "w"))


def config_of(family):
    s = SIZES
    c = {"architectures": [], "model_type": family, "hidden_size": s["hidden"], "num_hidden_layers": s["layers"],
         "num_attention_heads": 4, "num_key_value_heads": 2, "hidden_act": "silu", "rms_norm_eps": 1e-6,
         "vocab_size": s["vocab"], "num_experts_per_tok": s["topk"], "torch_dtype": "bfloat16"}
    if family == "mixtral":
        c.update(architectures=["MixtralForCausalLM"], num_local_experts=s["experts"], intermediate_size=s["inter"])
    elif family == "qwen3_moe":
        # layer 0 is a dense MLP layer through mlp_only_layers
        c.update(architectures=["Qwen3MoeForCausalLM"], num_experts=s["experts"], moe_intermediate_size=s["inter"],
                 intermediate_size=96, norm_topk_prob=True, decoder_sparse_step=1, mlp_only_layers=[0])
    elif family == "qwen2_moe":
        # layer 0 is dense through decoder_sparse_step 2 ((0 + 1) % 2 != 0); no renormalization
        c.update(architectures=["Qwen2MoeForCausalLM"], num_experts=s["experts"], moe_intermediate_size=s["inter"],
                 intermediate_size=96, shared_expert_intermediate_size=s["shared_inter"], norm_topk_prob=False,
                 decoder_sparse_step=2, mlp_only_layers=[])
    else:
        raise SystemExit("unknown family " + family)
    return c


def is_sparse(c, layer):
    if c["model_type"] == "mixtral":
        return True
    return layer not in c.get("mlp_only_layers", []) and (layer + 1) % c.get("decoder_sparse_step", 1) == 0


def layer_tensors(c, layer, rng):
    h, i, e = c["hidden_size"], SIZES["inter"], SIZES["experts"]
    w = lambda *shape, scale=0.08: bf16_bits(rng.standard_normal(shape) * scale)
    p = "model.layers.%d." % layer
    t = [(p + "input_layernorm.weight", w(h, scale=1.0)), (p + "post_attention_layernorm.weight", w(h, scale=1.0))]
    for n in ("q_proj", "k_proj", "v_proj", "o_proj"):
        t.append((p + "self_attn.%s.weight" % n, w(h, h)))
    if c["model_type"] == "mixtral":
        t.append((p + "block_sparse_moe.gate.weight", w(e, h, scale=0.3)))
        for m in range(e):
            q = p + "block_sparse_moe.experts.%d." % m
            t += [(q + "w1.weight", w(i, h)), (q + "w2.weight", w(h, i)), (q + "w3.weight", w(i, h))]
        return t
    if not is_sparse(c, layer):
        d = c["intermediate_size"]
        return t + [(p + "mlp.gate_proj.weight", w(d, h)), (p + "mlp.up_proj.weight", w(d, h)),
                    (p + "mlp.down_proj.weight", w(h, d))]
    t.append((p + "mlp.gate.weight", w(e, h, scale=0.3)))
    for m in range(e):
        q = p + "mlp.experts.%d." % m
        t += [(q + "gate_proj.weight", w(i, h)), (q + "up_proj.weight", w(i, h)), (q + "down_proj.weight", w(h, i))]
    if c["model_type"] == "qwen2_moe":
        s = SIZES["shared_inter"]
        t += [(p + "mlp.shared_expert.gate_proj.weight", w(s, h)), (p + "mlp.shared_expert.up_proj.weight", w(s, h)),
              (p + "mlp.shared_expert.down_proj.weight", w(h, s)), (p + "mlp.shared_expert_gate.weight", w(1, h))]
    return t


def write_checkpoint(family, out_dir, seed, quant=None):
    """quant: None (BF16) or a quantization_config (quant_checkpoint_config) for quantize_layer."""
    if family.startswith(("deepseek_v3", "gpt_oss")):
        from hf_quant_tiny import write_family
        return write_family(family, out_dir, seed)
    rng = np.random.default_rng(seed)
    c = config_of(family)
    if quant:
        c.update(quantization_config=quant, torch_dtype="float16")
    os.makedirs(out_dir, exist_ok=True)
    with open(os.path.join(out_dir, "config.json"), "w") as f:
        json.dump(c, f, indent=2)
    head = [("model.embed_tokens.weight", bf16_bits(rng.standard_normal((SIZES["vocab"], SIZES["hidden"])))),
            ("model.extra_u32_counter", np.arange(3, dtype=np.uint32)),
            ("model.extra_position_ids", np.arange(5, dtype=np.int64))]
    layers = [layer_tensors(c, n, rng) for n in range(c["num_hidden_layers"])]
    if quant:
        layers = [quantize_layer(t, quant, rng) for t in layers]
    tail = [("model.norm.weight", bf16_bits(np.ones(SIZES["hidden"]))),
            ("lm_head.weight", bf16_bits(rng.standard_normal((SIZES["vocab"], SIZES["hidden"])) * 0.05))]
    if family != "mixtral":
        write_safetensors(os.path.join(out_dir, "model.safetensors"), head + sum(layers, []) + tail)
        return
    # a 3-byte tensor before layer 0 leaves its BF16 tensors at odd offsets in the first shard (a loader
    # must not read them as aligned uint16); layer 1's, in the second shard, are aligned
    shards = [head + [("model.extra_flags", np.ones(3, dtype=np.uint8))] + layers[0], layers[1] + tail]
    names = ["model-%05d-of-%05d.safetensors" % (k + 1, len(shards)) for k in range(len(shards))]
    weight_map, total = {}, 0
    for name, shard in zip(names, shards):
        write_safetensors(os.path.join(out_dir, name), shard)
        for n, a in shard:
            weight_map[n] = name
            total += a.nbytes
    with open(os.path.join(out_dir, "model.safetensors.index.json"), "w") as f:
        json.dump({"metadata": {"total_size": total}, "weight_map": dict(sorted(weight_map.items()))}, f, indent=2)


def load_tensor(model_dir, name):
    index = os.path.join(model_dir, "model.safetensors.index.json")
    if os.path.exists(index):
        with open(index) as f:
            path = os.path.join(model_dir, json.load(f)["weight_map"][name])
    else:
        path = os.path.join(model_dir, "model.safetensors")
    return read_safetensors(path)[name][1]


def router_gate(model_dir, layer):
    with open(os.path.join(model_dir, "config.json")) as f:
        c = json.load(f)
    part = "block_sparse_moe" if c["model_type"] == "mixtral" else "mlp"
    g = load_tensor(model_dir, "model.layers.%d.%s.gate.weight" % (layer, part))
    return c, g.astype(np.float64) if g.dtype == np.float16 else bf16_values(g)


def write_input(model_dir, layer, out_path, tokens, dtype, seed):
    rng = np.random.default_rng(seed)
    with open(os.path.join(model_dir, "config.json")) as f:
        c = json.load(f)
    if c["model_type"] in ("deepseek_v3", "gpt_oss"):  # the family's own selection values and margins
        from hf_moe_reference import router_margin
        margin = lambda row: router_margin(model_dir, layer, bf16_values(bf16_bits(row))[None, :])
    else:
        c, gate = router_gate(model_dir, layer)

        def margin(row):
            logits = gate @ bf16_values(bf16_bits(row))
            p = np.exp(logits - logits.max())
            p = np.sort(p / p.sum())[::-1]
            return p[c["num_experts_per_tok"] - 1] - p[c["num_experts_per_tok"]]
    x = np.zeros((tokens, c["hidden_size"]), dtype=np.float32)
    for t in range(tokens):
        for _ in range(1000):
            row = rng.standard_normal(c["hidden_size"]).astype(np.float32)
            if margin(row) >= 1e-3:
                x[t] = row
                break
        else:
            raise SystemExit("no unambiguous row found")
    write_safetensors(out_path, [("x", bf16_bits(x) if dtype == "bf16" else x)])


# ---- AWQ and GPTQ checkpoints (docs/models.md, "AWQ and GPTQ") ----------------------------------------
# The packings, written from AutoAWQ (awq/utils/packing_utils.py, pack order [0, 2, 4, 6, 1, 3, 5, 7]) and
# AutoGPTQ (qlinear_cuda_old.py pack(): qweight along the inputs, qzeros along the outputs, v1 stores
# zero - 1). Codes, zeros and F16 scales are drawn at random (a real quantizer's values are no different
# to the loader).
AWQ_PACK_ORDER = [0, 2, 4, 6, 1, 3, 5, 7]


def quant_checkpoint_config(method, group_size, fmt="gptq"):
    if method == "awq":
        return {"quant_method": "awq", "bits": 4, "group_size": group_size, "zero_point": True, "version": "gemm",
                "modules_to_not_convert": ["gate"]}
    return {"quant_method": "gptq", "bits": 4, "group_size": group_size, "desc_act": False, "sym": False,
            "checkpoint_format": fmt, "true_sequential": True, "damp_percent": 0.01}


def pack_words(codes, order):
    """codes (rows, cols) 0..15 -> uint32 (rows, cols / 8): nibble i of word j holds column 8j + order[i]."""
    r, c = codes.shape
    v = codes.astype(np.uint32).reshape(r, c // 8, 8)
    out = np.zeros((r, c // 8), dtype=np.uint32)
    for i in range(8):
        out |= v[:, :, order[i]] << np.uint32(4 * i)
    return out.view(np.int32)


def quantize_linear(n, k, quant, rng):
    """Random codes q (n, k), zeros z (n, k/g), scales s (n, k/g) of one nn.Linear (out n, in k), packed the
    checkpoint's way. Returns [(suffix, array)]."""
    g = quant["group_size"] if quant["group_size"] > 0 else k
    q = rng.integers(0, 16, size=(n, k))
    v1 = quant["quant_method"] == "gptq" and quant.get("checkpoint_format", "gptq") == "gptq"
    z = rng.integers(1 if v1 else 0, 16, size=(n, k // g))  # v1 stores z - 1: z = 0 would not fit
    s = (rng.uniform(0.004, 0.012, size=(n, k // g))).astype(np.float16)
    if quant["quant_method"] == "awq":
        return [("qweight", pack_words(q.T, AWQ_PACK_ORDER)), ("qzeros", pack_words(z.T, AWQ_PACK_ORDER)),
                ("scales", np.ascontiguousarray(s.T))]
    plain = list(range(8))
    qweight = pack_words(q, plain).view(np.uint32).reshape(n, k // 8).T  # along the inputs: (k/8, n)
    return [("qweight", np.ascontiguousarray(qweight).view(np.int32)),
            ("qzeros", pack_words(((z - (1 if v1 else 0)) & 0xF).T, plain)),
            ("scales", np.ascontiguousarray(s.T)), ("g_idx", (np.arange(k) // g).astype(np.int32))]


def quantize_layer(tensors, quant, rng):
    """The expert linears (routed and shared) become qweight/qzeros/scales(/g_idx); the rest F16."""
    out = []
    for name, a in tensors:
        expert = ".experts." in name or ".shared_expert." in name
        if expert and name.endswith(".weight") and a.ndim == 2:
            base = name[: -len(".weight")]
            out += [(base + "." + sfx, v) for sfx, v in quantize_linear(a.shape[0], a.shape[1], quant, rng)]
        elif a.dtype == np.uint16:
            out.append((name, bf16_values(a).astype(np.float16)))
        else:
            out.append((name, a))
    return out


def main(argv):
    opts = {"--seed": "1", "--tokens": "16", "--dtype": "bf16", "--shape": "", "--quant": "", "--group-size": "128"}
    args = []
    it = iter(argv[1:])
    for a in it:
        if a in opts:
            opts[a] = next(it)
        else:
            args.append(a)
    if opts["--shape"]:
        v = [int(n) for n in opts["--shape"].split(",")]
        SIZES.update(hidden=v[0], inter=v[1], experts=v[2], topk=v[3], shared_inter=v[4] if len(v) > 4 else 4 * v[1])
    if len(args) == 3 and args[0] == "checkpoint":
        q = opts["--quant"]  # awq, gptq (v1) or gptq_v2
        quant = quant_checkpoint_config(q[:4] if q else q, int(opts["--group-size"]), q if q else "") if q else None
        write_checkpoint(args[1], args[2], int(opts["--seed"]), quant)
    elif len(args) == 4 and args[0] == "input":
        write_input(args[1], int(args[2]), args[3], int(opts["--tokens"]), opts["--dtype"], int(opts["--seed"]))
    else:
        raise SystemExit(__doc__)


if __name__ == "__main__":
    main(sys.argv)
