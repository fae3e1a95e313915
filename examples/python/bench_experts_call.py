# SPDX-License-Identifier: Apache-2.0
"""Per-call cost of the local experts call from Python at decode (1 token), BF16 weights, to compare with
the same call timed in C (docs/python.md "Per-call overhead"): the full megamoe.Experts call (numpy and
torch inputs), and the extension call alone with prepared arguments.
    PYTHONPATH=build/python python3 examples/python/bench_experts_call.py [H I iters]"""
import sys
import time

import numpy as np

import megamoe
from megamoe._arrays import spec

H, I, ITERS = (int(a) for a in (sys.argv[1:4] if len(sys.argv) >= 4 else (256, 128, 20000)))
E, K = 8, 2
i1 = np.arange(E * 2 * I * H, dtype=np.int64)
i2 = np.arange(E * H * I, dtype=np.int64)
w1 = megamoe.to_bf16((((i1 * 7919) % 255 - 127) / 4096.0).astype(np.float32).reshape(E, 2 * I, H))
w2 = megamoe.to_bf16((((i2 * 104729) % 255 - 127) / 4096.0).astype(np.float32).reshape(E, H, I))
experts = megamoe.Experts(megamoe.ExpertWeights(w1, w2, transpose_weight1=True, transpose_weight2=True))
x = megamoe.to_bf16((np.arange(H) % 13 / 13.0).astype(np.float32).reshape(1, H))
ids = np.array([[1, 5]], np.int32)
gw = np.array([[0.6, 0.4]], np.float32)


def best(fn):
    for _ in range(200):
        fn()
    b = 1e9
    for _ in range(5):
        t0 = time.perf_counter()
        for _ in range(ITERS):
            fn()
        b = min(b, (time.perf_counter() - t0) / ITERS)
    return b * 1e6


y = np.empty((1, H), np.uint16)
args = (experts.attrs, spec(x, "x"), spec(ids, "topk_ids"), spec(gw, "topk_weights"), None, 0, spec(y, "y"))
print(f"Python H={H} I={I} E={E} K={K} T=1 (best of 5 x {ITERS}):")
print(f"  extension call, prepared arguments: {best(lambda: experts._c.run(*args)):.2f} us")
print(f"  megamoe.Experts(x, ids, w), numpy:  {best(lambda: experts(x, ids, gw)):.2f} us")
try:
    import torch

    xt = torch.from_numpy(x.view(np.int16)).view(torch.bfloat16)
    idt, gwt = torch.from_numpy(ids), torch.from_numpy(gw)
    print(f"  megamoe.Experts(x, ids, w), torch:  {best(lambda: experts(xt, idt, gwt)):.2f} us")
except ImportError:
    pass
