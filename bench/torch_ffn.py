# SPDX-License-Identifier: Apache-2.0
"""A peer for `megamoe bench ffn`: one expert's FFN timed the way a PyTorch user runs it (eager, the
Hugging Face expert block down_proj(silu(gate_proj(x)) * up_proj(x)) with nn.Linear layers, in BF16 and in
F32) side by side with the same FFN in megamoe (megamoe.Experts with one expert, top-1, weight 1.0,
A16W16), on the same BF16-exact weights and inputs. Prints the CPU, the medians, torch / megamoe for each
torch dtype, and each one's weight-read rate (weight bytes of its own dtype / time; small weights stay in
cache between calls, so rates above the memory's streaming read mean cache-resident weights).

Run from the build tree:  PYTHONPATH=build/python python3 bench/torch_ffn.py [--hidden 2048,7168]
    [--intermediate 768] [--rows 1,8,64,256] [--calls 20] [--threads N]
Both libraries use the same thread count (torch.set_num_threads and MEGAMOE_NUM_THREADS, set before
megamoe is imported). The megamoe output is checked against torch's in float32 before timing."""
import argparse
import os
import platform
import time


def cpu_model():
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown CPU"


def median_ms(fn, calls):
    fn()  # warm-up: first-touch of buffers, torch's kernel selection
    times = []
    for _ in range(calls):
        t0 = time.perf_counter()
        fn()
        times.append((time.perf_counter() - t0) * 1e3)
    times.sort()
    return times[len(times) // 2]


def int_list(text):
    return [int(v) for v in text.split(",") if v]


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--hidden", type=int_list, default=[2048])
    parser.add_argument("--intermediate", type=int, default=768)
    parser.add_argument("--rows", type=int_list, default=[1, 8, 64, 256])
    parser.add_argument("--calls", type=int, default=20)
    parser.add_argument("--threads", type=int, default=os.cpu_count() or 1)
    args = parser.parse_args()
    os.environ["MEGAMOE_NUM_THREADS"] = str(args.threads)
    import torch
    from torch import nn
    import megamoe

    torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    config = torch.__config__.show()
    blas = next((part.split("=", 1)[1] for part in config.replace(",", " ").split() if part.startswith("BLAS_INFO=")),
                "unknown")
    print(f"bench torch_ffn: {cpu_model()}; {args.threads} threads; torch {torch.__version__} eager "
          f"(BLAS {blas}, oneDNN {'on' if 'MKL-DNN' in config else 'off'}) in BF16 and F32 vs megamoe A16W16; "
          f"medians of {args.calls} calls")
    print(f"{'H':>6} {'I':>5} {'rows':>5} {'torch bf16 ms':>14} {'torch f32 ms':>13} {'megamoe ms':>11} "
          f"{'bf16/mm':>8} {'f32/mm':>7} {'torch GB/s':>11} {'megamoe GB/s':>13} {'max rel diff':>13}")
    inter = args.intermediate
    for hidden in args.hidden:
        gate = nn.Linear(hidden, inter, bias=False).to(torch.bfloat16)
        up = nn.Linear(hidden, inter, bias=False).to(torch.bfloat16)
        down = nn.Linear(inter, hidden, bias=False).to(torch.bfloat16)
        gate32, up32, down32 = (nn.Linear(lin.in_features, lin.out_features, bias=False) for lin in (gate, up, down))
        with torch.no_grad():
            for lin32, lin in ((gate32, gate), (up32, up), (down32, down)):
                lin32.weight.copy_(lin.weight.float())
        w1 = torch.cat([gate.weight, up.weight]).detach().unsqueeze(0).contiguous()  # (1, 2I, H)
        w2 = down.weight.detach().unsqueeze(0).contiguous()  # (1, H, I)
        experts = megamoe.Experts(megamoe.ExpertWeights(w1, w2, transpose_weight1=True, transpose_weight2=True))
        weight_bytes = 2 * (3 * hidden * inter)
        for rows in args.rows:
            x = torch.randn(rows, hidden).to(torch.bfloat16)
            ids = torch.zeros(rows, 1, dtype=torch.int32)
            weights = torch.ones(rows, 1, dtype=torch.float32)

            def run_torch():
                with torch.no_grad():
                    return down(nn.functional.silu(gate(x)) * up(x))

            x32 = x.float()

            def run_torch_f32():
                with torch.no_grad():
                    return down32(nn.functional.silu(gate32(x32)) * up32(x32))

            def run_megamoe():
                return experts(x, ids, weights)

            ref = run_torch().float()
            got = torch.as_tensor(run_megamoe()).float()
            diff = ((got - ref).abs().max() / ref.abs().max().clamp_min(1e-30)).item()
            if not diff < 0.05:
                raise SystemExit(f"megamoe and torch disagree at H {hidden} rows {rows}: max rel diff {diff:.3g}")
            t_torch = median_ms(run_torch, args.calls)
            t_f32 = median_ms(run_torch_f32, args.calls)
            t_mm = median_ms(run_megamoe, args.calls)
            best_torch_rate = max(weight_bytes / t_torch, 2 * weight_bytes / t_f32) / 1e6
            print(f"{hidden:>6} {inter:>5} {rows:>5} {t_torch:>14.3f} {t_f32:>13.3f} {t_mm:>11.3f} "
                  f"{t_torch / t_mm:>8.2f} {t_f32 / t_mm:>7.2f} {best_torch_rate:>11.2f} "
                  f"{weight_bytes / t_mm / 1e6:>13.2f} {diff:>13.2e}")
        experts.close()


if __name__ == "__main__":
    main()
