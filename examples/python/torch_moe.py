# SPDX-License-Identifier: Apache-2.0
"""A torch MoE module whose experts run in megamoe: a drop-in for a Hugging Face-style sparse MoE block
(Qwen3-MoE / Mixtral: a router `gate`, experts with gate_proj / up_proj / down_proj, softmax, top-k,
optional renormalisation). The router stays in torch; the experts' FFN and the weighted sum run in one
megamoe.Experts call on BF16 activations (or INT8 weights with --int8).

Run from the build tree:  PYTHONPATH=build/python python3 examples/python/torch_moe.py [--int8]
It builds a small HF-style block with random weights, wraps it, and compares the two outputs."""
import argparse
import os

import numpy as np
import torch
from torch import nn

import megamoe


class HFExpert(nn.Module):
    def __init__(self, hidden, inter):
        super().__init__()
        self.gate_proj = nn.Linear(hidden, inter, bias=False)
        self.up_proj = nn.Linear(hidden, inter, bias=False)
        self.down_proj = nn.Linear(inter, hidden, bias=False)

    def forward(self, x):
        return self.down_proj(nn.functional.silu(self.gate_proj(x)) * self.up_proj(x))


class HFSparseMoeBlock(nn.Module):
    """The shape of transformers' Qwen3MoeSparseMoeBlock (written out here: no transformers needed)."""

    def __init__(self, hidden, inter, num_experts, top_k, norm_topk_prob=True):
        super().__init__()
        self.num_experts, self.top_k, self.norm_topk_prob = num_experts, top_k, norm_topk_prob
        self.gate = nn.Linear(hidden, num_experts, bias=False)
        self.experts = nn.ModuleList([HFExpert(hidden, inter) for _ in range(num_experts)])

    def route(self, hidden_states):
        router_logits = self.gate(hidden_states)
        routing_weights = nn.functional.softmax(router_logits, dim=1, dtype=torch.float)
        routing_weights, selected = torch.topk(routing_weights, self.top_k, dim=-1)
        if self.norm_topk_prob:
            routing_weights /= routing_weights.sum(dim=-1, keepdim=True)
        return router_logits, routing_weights, selected

    def forward(self, hidden_states):
        shape = hidden_states.shape
        hidden_states = hidden_states.view(-1, shape[-1])
        router_logits, routing_weights, selected = self.route(hidden_states)
        out = torch.zeros_like(hidden_states)
        mask = nn.functional.one_hot(selected, num_classes=self.num_experts).permute(2, 1, 0)
        for e in range(self.num_experts):
            idx, top_x = torch.where(mask[e])
            if top_x.numel():
                y = self.experts[e](hidden_states[top_x]) * routing_weights[top_x, idx, None]
                out.index_add_(0, top_x, y.to(hidden_states.dtype))
        return out.view(shape), router_logits


class MegaMoEBlock(nn.Module):
    """Same forward as HFSparseMoeBlock (returns (hidden_states, router_logits)); the experts run in
    megamoe. Weights are packed once here; the torch expert weights are not used afterwards."""

    def __init__(self, block, int8=False):
        super().__init__()
        self.block = block  # keeps the router (and route())
        inter = block.experts[0].gate_proj.out_features
        # megamoe's transposed layout: weight1 (E, 2I, H) = [gate_proj; up_proj], weight2 (E, H, I) = down_proj
        w1 = torch.stack([torch.cat([e.gate_proj.weight, e.up_proj.weight]) for e in block.experts]).detach().float()
        w2 = torch.stack([e.down_proj.weight for e in block.experts]).detach().float()
        attrs = {}
        if int8:  # INT8 per output channel (megamoe's exact quantizer), INT8 per-token activations
            q1, s1 = megamoe.int8_quantize(w1.numpy())
            q2, s2 = megamoe.int8_quantize(w2.numpy())
            routed = megamoe.ExpertWeights(q1, q2, s1, s2, transpose_weight1=True, transpose_weight2=True)
            attrs = {"dispatch_quant_mode": 2, "dispatch_quant_out_dtype": "int8"}
        else:
            routed = megamoe.ExpertWeights(w1.to(torch.bfloat16).contiguous(), w2.to(torch.bfloat16).contiguous(),
                                           transpose_weight1=True, transpose_weight2=True)
        self.experts = megamoe.Experts(routed, **attrs)
        self.inter = inter

    def forward(self, hidden_states):
        shape = hidden_states.shape
        x = hidden_states.reshape(-1, shape[-1])
        router_logits, routing_weights, selected = self.block.route(x)
        y = self.experts(x.to(torch.bfloat16).contiguous(), selected.to(torch.int32), routing_weights.float().contiguous())
        return y.to(hidden_states.dtype).view(shape), router_logits


def time_ms(fn, calls):
    """Median wall time of one call in ms over `calls` calls (after one warm-up call)."""
    import time
    fn()
    times = []
    for _ in range(calls):
        t0 = time.perf_counter()
        fn()
        times.append((time.perf_counter() - t0) * 1e3)
    return sorted(times)[len(times) // 2]


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--int8", action="store_true", help="INT8 weights and activations (A8W8-INT)")
    parser.add_argument("--tokens", type=int, default=16)
    parser.add_argument("--hidden", type=int, default=256)
    parser.add_argument("--intermediate", type=int, default=128)
    parser.add_argument("--experts", type=int, default=8)
    parser.add_argument("--topk", type=int, default=2)
    parser.add_argument("--time", type=int, default=0, metavar="CALLS",
                        help="also time both blocks (median of CALLS calls; torch runs its block in BF16)")
    args = parser.parse_args()
    torch.manual_seed(0)
    hidden, inter, experts, top_k = args.hidden, args.intermediate, args.experts, args.topk
    block = HFSparseMoeBlock(hidden, inter, experts, top_k)
    with torch.no_grad():
        for e in block.experts:  # bf16-exact weights, so the torch reference sees megamoe's weights
            for lin in (e.gate_proj, e.up_proj, e.down_proj):
                lin.weight.copy_(lin.weight.to(torch.bfloat16).float())
        moe = MegaMoEBlock(block, int8=args.int8)
        x = torch.randn(2, max(args.tokens // 2, 1), hidden).to(torch.bfloat16).float()
        ref, logits_ref = block(x)
        got, logits = moe(x)
    err = ((got - ref).abs().max() / ref.abs().max()).item()
    print(f"megamoe experts ({'A8W8-INT' if args.int8 else 'A16W16'}): y {tuple(got.shape)}, "
          f"max |y - y_torch| / max |y_torch| = {err:.5f}")
    assert torch.equal(logits, logits_ref)
    assert err < (1 / 32 if args.int8 else 1 / 64), "outside the scenario tolerance (docs/mega_moe.md)"
    if args.time:
        # megamoe's pool uses every CPU of the affinity mask; give torch the same (its default may be fewer)
        torch.set_num_threads(len(os.sched_getaffinity(0)))
        with torch.no_grad():
            bf16_block = block.to(torch.bfloat16)
            xb = x.to(torch.bfloat16)
            t_torch = time_ms(lambda: bf16_block(xb), args.time)
            t_moe = time_ms(lambda: moe(xb), args.time)
        print(f"time per call, {x.shape[0] * x.shape[1]} tokens, H {hidden} I {inter} E {experts} top-{top_k}, "
              f"{torch.get_num_threads()} torch threads: torch BF16 block {t_torch:.3f} ms, "
              f"megamoe block {t_moe:.3f} ms ({t_torch / t_moe:.2f}x)")


if __name__ == "__main__":
    main()
