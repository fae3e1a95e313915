# SPDX-License-Identifier: Apache-2.0
"""The engine calls from Python: the local experts call and MegaMoE on a world of rank threads, in every
weight format against the independent Hugging Face-style block (moe_reference.py), torch tensors in and
out, the expert map, threads sharing one Experts (the GIL is released), and bad inputs raising."""
import threading

import numpy as np
import pytest

import megamoe
from moe_reference import SCENARIOS, SparseMoeBlock, make_experts, make_tokens, relative_error

E, K, H, I, T = 8, 2, 64, 32, 6


def make_case(fmt, seed=3, tokens=T):
    rng = np.random.default_rng(seed)
    kw, w1, w2 = make_experts(fmt, E, H, I, rng)
    x, ids, w = make_tokens(tokens, H, E, K, rng)
    return kw, SparseMoeBlock(w1, w2, I, fmt), x, ids, w


@pytest.mark.parametrize("fmt", list(SCENARIOS))
def test_experts_against_hf_block(fmt):
    kw, block, x, ids, w = make_case(fmt)
    attrs, tol = SCENARIOS[fmt]
    with megamoe.Experts(megamoe.ExpertWeights(**kw), **attrs) as experts:
        assert experts.nbytes > 0
        y = experts(x, ids, w)
        assert y.dtype == np.uint16 and y.shape == (T, H)
        err = relative_error(y, block(x, ids, w))
        assert err <= tol, f"{fmt}: relative error {err} above {tol}"
        # F32 output: the same BF16 values widened exactly
        y32 = experts(x, ids, w, out_dtype="f32")
        np.testing.assert_array_equal(y32.view(np.uint32) >> 16, y.astype(np.uint32))
        # decode (T = 1) and T = 0
        np.testing.assert_array_equal(experts(x[:1], ids[:1], w[:1]), y[:1])
        assert experts(x[:0], ids[:0], w[:0]).shape == (0, H)


def test_torch_in_and_out():
    torch = pytest.importorskip("torch")
    kw, _, x, ids, w = make_case("bf16")
    experts = megamoe.Experts(kw)
    y = experts(x, ids, w)
    xt = torch.from_numpy(x.view(np.int16)).view(torch.bfloat16)
    yt = experts(xt, torch.from_numpy(ids.astype(np.int64)), torch.from_numpy(w))
    assert yt.dtype == torch.bfloat16 and tuple(yt.shape) == (T, H)
    np.testing.assert_array_equal(yt.view(torch.int16).numpy().view(np.uint16), y)
    # torch weights (bfloat16 tensors) pack to the same experts
    kwt = dict(kw, weight1=torch.from_numpy(kw["weight1"].view(np.int16)).view(torch.bfloat16),
               weight2=torch.from_numpy(kw["weight2"].view(np.int16)).view(torch.bfloat16))
    np.testing.assert_array_equal(megamoe.Experts(kwt)(x, ids, w), y)
    with pytest.raises(megamoe.InvalidArgumentError, match="contiguous"):
        experts(xt.t(), ids, w)


def test_expert_map_and_subsets():
    kw, _, x, ids, w = make_case("bf16")
    y = megamoe.Experts(kw)(x, ids, w, out_dtype="f32")
    perm = np.random.default_rng(5).permutation(E).astype(np.int32)  # global expert g -> slot perm[g]
    order = np.argsort(perm)
    permuted = dict(kw, weight1=np.ascontiguousarray(kw["weight1"][order]), weight2=np.ascontiguousarray(kw["weight2"][order]))
    np.testing.assert_array_equal(megamoe.Experts(permuted, expert_map=perm)(x, ids, w, out_dtype="f32"), y)
    # two halves: each process-like part adds its experts' share; non-local choices contribute nothing
    parts = []
    for half in range(2):
        emap = np.full(E, -1, np.int32)
        emap[half * E // 2:(half + 1) * E // 2] = np.arange(E // 2)
        sub = dict(kw, weight1=kw["weight1"][half * E // 2:(half + 1) * E // 2],
                   weight2=kw["weight2"][half * E // 2:(half + 1) * E // 2])
        parts.append(megamoe.Experts(sub, expert_map=emap)(x, ids, w, out_dtype="f32"))
    np.testing.assert_allclose(parts[0] + parts[1], y, rtol=2**-7, atol=2**-7 * np.abs(y).max())
    # padding ids (-1) skipped on request, refused otherwise
    ids_pad = ids.copy()
    ids_pad[0, 1] = -1
    experts = megamoe.Experts(kw)
    experts(x, ids_pad, w, skip_negative_ids=True)
    with pytest.raises(megamoe.InvalidArgumentError, match="topk_ids"):
        experts(x, ids_pad, w)


def test_threads_share_one_experts():
    kw, _, x, ids, w = make_case("int8", tokens=64)
    experts = megamoe.Experts(kw, **SCENARIOS["int8"][0])
    want = experts(x, ids, w)
    results, errors = [], []

    def work():
        try:
            for _ in range(5):
                results.append(experts(x, ids, w))
        except Exception as e:  # pragma: no cover - reported below
            errors.append(e)

    threads = [threading.Thread(target=work) for _ in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors and len(results) == 15
    for r in results:
        np.testing.assert_array_equal(r, want)


def test_bad_inputs_raise():
    kw, _, x, ids, w = make_case("bf16")
    experts = megamoe.Experts(kw)
    with pytest.raises(megamoe.InvalidArgumentError, match="x"):
        experts(x.astype(np.float64), ids, w)  # f64 x is not accepted
    with pytest.raises(megamoe.InvalidArgumentError, match="contiguous"):
        experts(np.asfortranarray(x), ids, w)
    with pytest.raises(megamoe.InvalidArgumentError):
        experts(x, ids[:, :1], w)  # shape mismatch
    with pytest.raises(megamoe.InvalidArgumentError, match="topk_ids"):
        experts(x, ids + E, w)
    with pytest.raises(megamoe.InvalidArgumentError):
        megamoe.Experts(dict(kw, weight2=kw["weight2"][:, :, :5]))
    with pytest.raises(megamoe.InvalidArgumentError, match="weight1 dtype u8"):
        megamoe.Experts(dict(kw, weight1=kw["weight1"].view(np.uint8), dtype=None), num_experts=E)
    with pytest.raises(megamoe.InvalidArgumentError, match="weight1: buffer .* cannot hold bf16"):
        megamoe.Experts(dict(kw, weight1=kw["weight1"].view(np.float16)))  # halves are not BF16 codes
    with pytest.raises(megamoe.InvalidArgumentError, match="unknown attribute"):
        megamoe.Experts(kw, dispatch_quant=2)
    experts.close()
    experts.close()  # idempotent
    with pytest.raises(megamoe.InvalidArgumentError, match="closed"):
        experts(x, ids, w)
    err = None
    try:
        megamoe.Experts(kw, num_experts=0)
    except megamoe.Error as e:
        err = e
    assert err is not None and err.status_name == "invalid_argument" and isinstance(err, ValueError)


@pytest.mark.parametrize("fmt", ["bf16", "int4", "fp8_e4m3fn"])
def test_world_mega_moe(fmt):
    kw, block, _, _, _ = make_case(fmt)
    attrs, tol = SCENARIOS[fmt]
    R = 2
    local = E // R
    rng = np.random.default_rng(11)
    toks = [make_tokens(T - r, H, E, K, rng) for r in range(R)]
    experts = megamoe.Experts(megamoe.ExpertWeights(**kw), **attrs)
    with megamoe.World(R) as world:
        world.create_buffers(moe_expert_num=E, num_max_tokens_per_rank=T, topk=K, hidden=H, intermediate_hidden=I)
        weights = [world.weights(r, {k: (v[r * local:(r + 1) * local] if isinstance(v, np.ndarray) else v)
                                     for k, v in kw.items()}) for r in range(R)]
        for _ in range(2):  # the world and its buffers are reused across calls
            ys, counts = world.run(weights, [t[0] for t in toks], [t[1] for t in toks], [t[2] for t in toks], **attrs)
        for r in range(R):
            x, ids, w = toks[r]
            assert relative_error(ys[r], block(x, ids, w)) <= tol
            # the same bits as the local experts call (all experts in one process)
            np.testing.assert_array_equal(ys[r], experts(x, ids, w))
            all_ids = np.concatenate([t[1] for t in toks])
            assert list(counts[r]) == [int((all_ids == r * local + e).sum()) for e in range(local)]
        with pytest.raises(megamoe.InvalidArgumentError, match="rank 1"):
            bad = [t[1].copy() for t in toks]
            bad[1][0, 0] = E
            world.run(weights, [t[0] for t in toks], bad, [t[2] for t in toks], **attrs)
        with pytest.raises(megamoe.InvalidArgumentError, match="2 entries"):
            world.run(weights[:1], [toks[0][0]], [toks[0][1]], [toks[0][2]])
    with pytest.raises(megamoe.InvalidArgumentError, match="closed"):
        world.run(weights, [t[0] for t in toks], [t[1] for t in toks], [t[2] for t in toks])
