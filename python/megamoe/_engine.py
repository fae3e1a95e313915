# SPDX-License-Identifier: Apache-2.0
"""The engine calls: the local experts call (Experts), MegaMoE on a persistent world of rank threads
(World) and MegaMoE with one rank per MPI process over an mpi4py communicator (MegaMoE).

Weights are packed once when the object is made; the caller's arrays are not needed afterwards.
Outputs are new arrays (y BF16: numpy uint16, or torch.bfloat16 when x was a torch tensor). Objects
are context managers; close() frees the C side, and any later use raises InvalidArgumentError.
"""
import numpy as np

from . import _megamoe as _c
from ._arrays import empty, is_torch, like_input, spec, to_numpy

_ATTR_KEYS = ("dispatch_quant_mode", "dispatch_quant_out_dtype", "shared_expert_quant_out_dtype",
              "combine_quant_mode", "activation", "activation_params", "activation_out_dtype",
              "topk_weights_type", "combine_comm_mode", "rank_num_per_server")


class _Closable:
    """close() frees the C object (idempotent); with-blocks close on exit."""

    def close(self):
        self._c.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


class ExpertWeights:
    """One group of experts, stacked (leading expert dimension), as mm_mega_moe_expert_weights:
    weight1 (E, H, 2I) or (E, 2I, H) with transpose_weight1; weight2 (E, I, H) or (E, H, I) with
    transpose_weight2 (2I for gelu); dtype: bf16 (uint16 / torch.bfloat16), int8, int4, fp8_e4m3fn,
    fp8_e5m2, fp4_e2m1 (uint8 arrays; 4-bit ones packed along the stored last dimension).
    weight_scales1/2: f32 or uint64 (E, N) for int8/int4; e8m0 uint8 (E, N, ceil(K/64), 2) for MX.
    bias1 / bias2: f32 (E, 2I) / (E, H), for int4 weights."""

    def __init__(self, weight1, weight2, weight_scales1=None, weight_scales2=None, bias1=None, bias2=None,
                 dtype=None, transpose_weight1=False, transpose_weight2=False):
        def scale_spec(s, name):
            if s is None:
                return None
            arr = to_numpy(s, name)[0]
            return spec(arr, name, "e8m0" if arr.dtype == np.uint8 else None)

        self.spec = {
            "weight1": spec(weight1, "weight1", dtype), "weight2": spec(weight2, "weight2", dtype),
            "transpose_weight1": bool(transpose_weight1), "transpose_weight2": bool(transpose_weight2),
        }
        for key, value in (("weight_scales1", scale_spec(weight_scales1, "weight_scales1")),
                           ("weight_scales2", scale_spec(weight_scales2, "weight_scales2")),
                           ("bias1", spec(bias1, "bias1")), ("bias2", spec(bias2, "bias2"))):
            if value is not None:
                self.spec[key] = value

    @property
    def count(self):
        return self.spec["weight1"][2][0]


def _group(w):
    if w is None:
        return None
    if isinstance(w, ExpertWeights):
        return w.spec
    if isinstance(w, dict):
        return ExpertWeights(**w).spec
    raise _c.InvalidArgumentError(f"weights: expected ExpertWeights or a dict, got {type(w).__name__}")


def attrs_dict(attrs):
    """MegaMoE attributes: a dict with the keys of mm_mega_moe_attrs (dtypes and activation by name)."""
    attrs = dict(attrs or {})
    for k in attrs:
        if k not in _ATTR_KEYS:
            raise _c.InvalidArgumentError(f"unknown attribute '{k}' (known: {', '.join(_ATTR_KEYS)})")
    return attrs


class Experts(_Closable):
    """The local experts call (include/megamoe/experts.h): y = sum_k w_k expert_k(x) (+ shared).

    Experts(routed, num_experts=None, expert_map=None, activation="swiglu", shared=None, **attrs)
    with routed an ExpertWeights (or dict of its arguments). num_experts defaults to the routed count.
    expert_map: num_experts ints, the local slot of each global expert or -1. attrs: the MegaMoE
    attributes used by every call (quantization modes, activation_params, topk_weights_type, ...).
    """

    def __init__(self, routed, num_experts=None, expert_map=None, activation="swiglu", shared=None, **attrs):
        routed = _group(routed)
        w1 = routed["weight1"][2]
        hidden = w1[2] if routed["transpose_weight1"] else w1[1]
        n1 = w1[1] if routed["transpose_weight1"] else w1[2]
        inter = n1 // 2  # GEMM1 has 2I columns for every activation (gelu: GEMM2's K is 2I)
        if num_experts is None:
            num_experts = w1[0] if expert_map is None else len(expert_map)
        emap = None
        if expert_map is not None:
            emap = np.ascontiguousarray(to_numpy(expert_map, "expert_map")[0], dtype=np.int32)
        self._map = emap  # kept alive until packing is done (the C side copies it)
        config = {"num_experts": int(num_experts), "hidden": int(hidden), "intermediate_hidden": int(inter),
                  "activation": activation, "expert_map": spec(emap, "expert_map")}
        self.hidden = int(hidden)
        self.attrs = attrs_dict(dict(attrs, activation=activation))
        self._c = _c.Experts(config, routed, _group(shared))

    def __call__(self, x, topk_ids, topk_weights, x_active_mask=None, skip_negative_ids=False,
                 out_dtype="bf16"):
        """x (T, H) BF16 (uint16 / torch.bfloat16), F16 or F32; topk_ids (T, K) int32/int64; topk_weights
        (T, K) f32 or BF16. Returns y (T, H): BF16 (uint16, or torch.bfloat16 for torch x) or f32."""
        x_spec = spec(x, "x")
        y = empty((x_spec[2][0], self.hidden) if len(x_spec[2]) == 2 else x_spec[2], out_dtype)
        self._c.run(self.attrs, x_spec, spec(topk_ids, "topk_ids"), spec(topk_weights, "topk_weights"),
                    spec(x_active_mask, "x_active_mask"), 1 if skip_negative_ids else 0, spec(y, "y", out_dtype))
        return like_input(y, out_dtype, is_torch(x))

    @property
    def nbytes(self):
        return self._c.nbytes


def _sizing(kw):
    return {k: int(v) for k, v in kw.items()}


def _call_specs(x, topk_ids, topk_weights, x_active_mask, hidden, local_experts, label, scales=None):
    x_spec = spec(x, f"{label}x")
    bs = x_spec[2][0] if x_spec[2] else 0
    y = empty((bs, hidden), "bf16")
    counts = np.empty((local_experts,), np.int32)
    specs = (x_spec, spec(scales, f"{label}scales", "e8m0"), spec(topk_ids, f"{label}topk_ids"),
             spec(topk_weights, f"{label}topk_weights"), spec(x_active_mask, f"{label}x_active_mask"),
             spec(y, "y"), spec(counts, "expert_token_nums"))
    return specs, y, counts


class World(_Closable):
    """A persistent world of nranks rank threads (include/megamoe/world.h) running MegaMoE, driven from
    this thread with every rank's tensors given as lists.

        with megamoe.World(2) as world:
            world.create_buffers(moe_expert_num=E, num_max_tokens_per_rank=T, topk=K, hidden=H,
                                 intermediate_hidden=I)
            w = [world.weights(r, ExpertWeights(...)) for r in range(2)]
            ys, counts = world.run(w, xs, ids, gates, **attrs)
    """

    def __init__(self, nranks):
        self._c = _c.World(int(nranks))
        self.nranks = int(nranks)
        self._sizing = None

    def create_buffers(self, **sizing):
        self._c.create_buffers(_sizing(sizing))
        self._sizing = dict(sizing)

    def weights(self, rank, routed, shared=None):
        return self._c.weights(int(rank), _group(routed), _group(shared))

    def run(self, weights, x, topk_ids, topk_weights, x_active_mask=None, scales=None, **attrs):
        """Lists of nranks (x_active_mask / scales: list or None). Returns (ys, expert_token_nums)."""
        if self._sizing is None:
            raise _c.InvalidArgumentError("World.run: call create_buffers first")
        R = self.nranks
        for name, value in (("weights", weights), ("x", x), ("topk_ids", topk_ids), ("topk_weights", topk_weights),
                            ("x_active_mask", x_active_mask), ("scales", scales)):
            if value is not None and len(value) != R:
                raise _c.InvalidArgumentError(f"World.run: {name} has {len(value)} entries; "
                                              f"must be lists of {R} entries (one per rank)")
        local = self._sizing["moe_expert_num"] // R
        masks = x_active_mask if x_active_mask is not None else [None] * R
        scl = scales if scales is not None else [None] * R
        specs, ys, counts = [], [], []
        for r in range(R):
            s, y, c = _call_specs(x[r], topk_ids[r], topk_weights[r], masks[r], self._sizing["hidden"], local,
                                  f"rank {r} ", scl[r])
            specs.append(s)
            ys.append(like_input(y, "bf16", is_torch(x[r])))
            counts.append(c)
        self._c.run(list(weights), attrs_dict(attrs), specs)
        return ys, counts


class MegaMoE(_Closable):
    """MegaMoE with one rank per MPI process over an mpi4py communicator (collective calls: every
    process of comm calls them together). MegaMoE(comm, moe_expert_num=E, num_max_tokens_per_rank=T,
    topk=K, hidden=H, intermediate_hidden=I, max_recv_token_num=0). close() is collective too."""

    def __init__(self, comm, **sizing):
        from mpi4py import MPI  # only this class needs mpi4py

        if not _c.mpi_available():
            raise _c.UnsupportedError("this megamoe was built without the MPI backend")
        self._sizing = dict(sizing)
        self._c = _c.MegaMoE(MPI._addressof(comm), _sizing(sizing))
        self.rank, self.size = self._c.rank_and_size

    def weights(self, routed, shared=None):
        """This rank's experts (moe_expert_num / size of them) packed: a Weights object."""
        return self._c.weights(_group(routed), _group(shared))

    def __call__(self, weights, x, topk_ids, topk_weights, x_active_mask=None, scales=None, **attrs):
        """Returns (y, expert_token_nums) of this rank."""
        local = self._sizing["moe_expert_num"] // self.size
        specs, y, counts = _call_specs(x, topk_ids, topk_weights, x_active_mask, self._sizing["hidden"], local, "",
                                       scales)
        self._c.run(weights, attrs_dict(attrs), specs)
        return like_input(y, "bf16", is_torch(x)), counts
