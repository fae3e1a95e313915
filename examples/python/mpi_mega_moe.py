# SPDX-License-Identifier: Apache-2.0
"""MegaMoE with one rank per MPI process, from Python over an mpi4py communicator.

Each process holds E / R experts and its own tokens; one collective call sends every token to its
top-k experts, runs their FFN and sums the results at home. Run from the build tree:
    PYTHONPATH=build/python mpirun -n 2 python3 examples/python/mpi_mega_moe.py
(as root add --allow-run-as-root). Errors are agreed: when one rank passes a bad expert id, every rank
raises the same megamoe.InvalidArgumentError naming that rank."""
import numpy as np
from mpi4py import MPI

import megamoe

E, K, H, I, T = 8, 2, 128, 64, 4

comm = MPI.COMM_WORLD
rank, size = comm.Get_rank(), comm.Get_size()
local = E // size

# every process draws the same global experts, then keeps its own E / R (transposed layout: (E, 2I, H),
# (E, H, I)); BF16 weights as numpy uint16 bit patterns
rng = np.random.default_rng(0)
w1 = megamoe.to_bf16(rng.standard_normal((E, 2 * I, H)).astype(np.float32) / np.sqrt(H))
w2 = megamoe.to_bf16(rng.standard_normal((E, H, I)).astype(np.float32) / np.sqrt(I))
mine = slice(rank * local, (rank + 1) * local)
routed = megamoe.ExpertWeights(w1[mine], w2[mine], transpose_weight1=True, transpose_weight2=True)

# this rank's tokens and routing
rng = np.random.default_rng(100 + rank)
x = megamoe.to_bf16(rng.standard_normal((T, H)).astype(np.float32))
topk_ids = np.stack([rng.choice(E, K, replace=False) for _ in range(T)]).astype(np.int32)
topk_weights = np.full((T, K), 1.0 / K, np.float32)

with megamoe.MegaMoE(comm, moe_expert_num=E, num_max_tokens_per_rank=T, topk=K, hidden=H,
                     intermediate_hidden=I) as moe:
    with moe.weights(routed) as weights:
        y, expert_token_nums = moe(weights, x, topk_ids, topk_weights)
        print(f"rank {rank}/{size}: y {y.shape} bf16, |y| max {np.abs(megamoe.bf16_to_f32(y)).max():.3f}, "
              f"rows per local expert {list(expert_token_nums)}", flush=True)
        bad = topk_ids.copy()
        if rank == size - 1:
            bad[0, 0] = E + 1
        try:
            moe(weights, x, bad, topk_weights)
        except megamoe.InvalidArgumentError as e:
            print(f"rank {rank}: agreed error: {e}", flush=True)
