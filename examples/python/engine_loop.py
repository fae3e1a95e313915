# SPDX-License-Identifier: Apache-2.0
"""An inference engine's decode loop driving MegaMoE on a persistent world from Python (the Python twin
of examples/engine_loop.c): a world of RANKS rank threads created once, buffers and every rank's packed
experts once, then STEPS decode calls of one token per rank, each one World.run call with every rank's
inputs as lists. No thread is started per call. Prints the time per call and checks every step's
expert_token_nums (each token reaches TOPK experts).

Run from the build tree:  PYTHONPATH=build/python python3 examples/python/engine_loop.py [STEPS]"""
import sys
import time

import numpy as np

import megamoe

RANKS, EXPERTS, TOPK, HIDDEN, INTER = 2, 16, 4, 256, 128
LOCAL = EXPERTS // RANKS


def bf16(a):
    """float32 -> BF16 bit patterns (uint16), round to nearest even (megamoe's exact rounding)."""
    return megamoe.to_bf16(np.ascontiguousarray(a, dtype=np.float32))


def main():
    steps = int(sys.argv[1]) if len(sys.argv) > 1 else 1000
    rng = np.random.default_rng(0)
    with megamoe.World(RANKS) as world:
        world.create_buffers(moe_expert_num=EXPERTS, num_max_tokens_per_rank=1, topk=TOPK, hidden=HIDDEN,
                             intermediate_hidden=INTER)
        weights = []
        for r in range(RANKS):
            w1 = bf16(rng.uniform(-1 / 16, 1 / 16, (LOCAL, HIDDEN, 2 * INTER)))
            w2 = bf16(rng.uniform(-1 / 16, 1 / 16, (LOCAL, INTER, HIDDEN)))
            weights.append(world.weights(r, megamoe.ExpertWeights(w1, w2)))
        gates = [np.array([[1.0 / (k + 2) for k in range(TOPK)]], dtype=np.float32)] * RANKS
        times = []
        for step in range(steps):
            xs, ids = [], []
            for r in range(RANKS):  # the "model" before the MoE layer: a new token and its routing
                xs.append(bf16(np.sin(0.01 * (np.arange(HIDDEN) * (r + 1) + 7 * step)).reshape(1, HIDDEN)))
                first = (step * 5 + r * 3) % EXPERTS
                ids.append(np.array([[(first + 3 * k) % EXPERTS for k in range(TOPK)]], dtype=np.int32))
            t0 = time.perf_counter()
            ys, counts = world.run(weights, xs, ids, gates)
            times.append(time.perf_counter() - t0)
            total = sum(int(np.asarray(c).sum()) for c in counts)
            if total != RANKS * TOPK:
                raise SystemExit(f"step {step}: {total} rows reached experts, expected {RANKS * TOPK}")
            if not all(np.asarray(y).shape == (1, HIDDEN) for y in ys):
                raise SystemExit(f"step {step}: wrong y shape")
        times.sort()
        print(f"{steps} decode calls on a world of {RANKS} ranks (H {HIDDEN}, I {INTER}, {EXPERTS} experts, "
              f"top-{TOPK}, 1 token per rank): median {1e3 * times[len(times) // 2]:.3f} ms, "
              f"p99 {1e3 * times[int(0.99 * (len(times) - 1))]:.3f} ms per call")


if __name__ == "__main__":
    main()
