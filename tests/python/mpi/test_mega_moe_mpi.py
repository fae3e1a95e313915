# SPDX-License-Identifier: Apache-2.0
"""MegaMoE with one rank per MPI process over an mpi4py communicator: every process builds the same
global experts and tokens from one seed, holds E / R of the experts and its own tokens, and compares
its y with the independent Hugging Face-style block on its tokens, in every weight format. Errors are
agreed by all ranks. Run under mpirun -n 2 (CTest python_mpi_np2)."""
import numpy as np
import pytest

import megamoe
from moe_reference import SCENARIOS, SparseMoeBlock, make_experts, make_tokens, relative_error

MPI = pytest.importorskip("mpi4py.MPI")
E, K, H, I, T = 4, 2, 64, 32, 5


def rank_data(fmt, comm):
    rank, size = comm.Get_rank(), comm.Get_size()
    rng = np.random.default_rng(7)
    kw, w1, w2 = make_experts(fmt, E, H, I, rng)
    tokens = [make_tokens(T - r % 2, H, E, K, np.random.default_rng(100 + r)) for r in range(size)]
    local = E // size
    sl = slice(rank * local, (rank + 1) * local)
    mine = {k: (v[sl] if isinstance(v, np.ndarray) else v) for k, v in kw.items()}
    return megamoe.ExpertWeights(**mine), SparseMoeBlock(w1, w2, I, fmt), tokens[rank]


@pytest.mark.parametrize("fmt", list(SCENARIOS))
def test_formats_against_hf_block(fmt):
    comm = MPI.COMM_WORLD
    if E % comm.Get_size():
        pytest.skip("E must be a multiple of the process count")
    attrs, tol = SCENARIOS[fmt]
    routed, block, (x, ids, w) = rank_data(fmt, comm)
    with megamoe.MegaMoE(comm, moe_expert_num=E, num_max_tokens_per_rank=T, topk=K, hidden=H,
                         intermediate_hidden=I) as moe:
        assert (moe.rank, moe.size) == (comm.Get_rank(), comm.Get_size())
        with moe.weights(routed) as weights:
            y, counts = moe(weights, x, ids, w, **attrs)
    assert y.dtype == np.uint16 and y.shape == (x.shape[0], H)
    err = comm.allreduce(relative_error(y, block(x, ids, w)), op=MPI.MAX)  # all ranks fail together
    assert err <= tol, f"{fmt}: relative error {err} above {tol}"
    # expert_token_nums: the rows each local expert received, summed over all ranks
    all_ids = comm.allgather(ids)
    local = E // comm.Get_size()
    want = [sum(int((a == comm.Get_rank() * local + e).sum()) for a in all_ids) for e in range(local)]
    assert list(counts) == want


def test_error_is_agreed_by_all_ranks():
    comm = MPI.COMM_WORLD
    routed, _, (x, ids, w) = rank_data("bf16", comm)
    if comm.Get_rank() == comm.Get_size() - 1:
        ids = ids.copy()
        ids[0, 0] = 99
    with megamoe.MegaMoE(comm, moe_expert_num=E, num_max_tokens_per_rank=T, topk=K, hidden=H,
                         intermediate_hidden=I) as moe:
        weights = moe.weights(routed)
        with pytest.raises(megamoe.InvalidArgumentError) as e:
            moe(weights, x, ids, w)
        assert f"rank {comm.Get_size() - 1}" in str(e.value) and "99" in str(e.value)
        # the buffer stays usable after an agreed error
        y, _ = moe(weights, x, np.where(ids == 99, 0, ids).astype(np.int32), w) if comm.Get_rank() != comm.Get_size() - 1 \
            else moe(weights, x, np.array([[0, 1]] + [list(r) for r in ids[1:]], np.int32), w)
        assert y.shape == (x.shape[0], H)
        weights.close()
        with pytest.raises(megamoe.InvalidArgumentError, match="closed"):
            moe(weights, x, ids, w)
