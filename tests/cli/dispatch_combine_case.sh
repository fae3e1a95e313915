#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# tests/cli/dispatch_combine_case.sh: the Dispatch V3 / Combine V2 case files end to end, checked by an
# independent Python reader (standard library only):
#   1. case-gen dispatch-v3 -> case: every output row is the x row its (source, token, k) names, routed
#      to this rank, in the page's order; counts agree.
#   2. the dispatch output file is the source of a combine case's handoff tensors (its ep_recv_counts
#      under the dispatch name), plus weights, residual and gamma written by Python; the combine
#      outputs match a float64 reference of the page's formula.
#   3. case-gen combine-v2 with shared ranks, special experts and an elastic removal runs; a broken
#      combine case exits 2 with one line and writes nothing; MPI gives the same bytes (when available).
# Usage: bash dispatch_combine_case.sh <path-to-megamoe> <source-dir>
set -u
source "$(dirname "${BASH_SOURCE[0]}")/lib/common.bash"
cli_require_python dispatch_combine_case

cat >"$WORK/dc.py" <<'PY'
import math, random, struct, sys

from safetensors_io import load, save

FMT = {"I32": "i", "I64": "q", "F32": "f", "BF16": "H", "U8": "B", "BOOL": "B"}
def vals(t):
    dt, shape, raw = t
    return list(struct.unpack("<%d%s" % (len(raw) // struct.calcsize(FMT[dt]), FMT[dt]), raw))
def bf(b): return struct.unpack("<f", struct.pack("<I", b << 16))[0]
def to_bf(x):
    u = struct.unpack("<I", struct.pack("<f", x))[0]
    return ((u + 0x7FFF + ((u >> 16) & 1)) >> 16) & 0xFFFF
def f32(x): return struct.unpack("<f", struct.pack("<f", x))[0]
def fail(m): print("verify: " + m); sys.exit(1)

def check_dispatch(case, out):
    meta, inp = load(case); _, o = load(out)
    R = int(meta["ranks"]); M = int(meta["moe_expert_num"]); L = M // R
    X, IDS = {}, {}
    for g in range(R):
        dt, shape, raw = inp["rank%d.x" % g]; bs, H = shape; K = inp["rank%d.expert_ids" % g][1][1]
        X[g] = [raw[(i * H) * 2:(i + 1) * H * 2] for i in range(bs)]
        ids = vals(inp["rank%d.expert_ids" % g]); IDS[g] = [ids[i * K:(i + 1) * K] for i in range(bs)]
    for d in range(R):
        want = []
        for le in range(L):
            for s in range(R):
                for i, row in enumerate(IDS[s]):
                    for k, e in enumerate(row):
                        if e < M and e // L == d and e % L == le: want.append((s, i, k))
        ex = o["rank%d.expand_x" % d]; a = vals(o["rank%d.assist_info_for_combine" % d])
        if ex[1][0] != len(want): fail("rank %d: %d rows, expected %d" % (d, ex[1][0], len(want)))
        for j, (s, i, k) in enumerate(want):
            if tuple(a[3 * j:3 * j + 3]) != (s, i, k): fail("rank %d row %d: assist %s, expected %s" % (d, j, a[3*j:3*j+3], (s, i, k)))
            if ex[2][j * H * 2:(j + 1) * H * 2] != X[s][i]: fail("rank %d row %d differs from x" % (d, j))
        cnt = vals(o["rank%d.expert_token_nums" % d])
        for le in range(L):
            n = sum(1 for (s, i, k) in want if IDS[s][i][k] % L == le)
            if cnt[le] != n: fail("rank %d expert_token_nums[%d] = %d, expected %d" % (d, le, cnt[le], n))
    print("dispatch ok")

def make_combine(case, out, path):
    meta, inp = load(case); _, o = load(out)
    R = int(meta["ranks"]); rnd = random.Random(5); t = {}
    m = dict(meta); m["op"] = "moe_distribute_combine_add_rms_norm_v2"; m["norm_eps"] = "1e-06"
    for g in range(R):
        bs, K = inp["rank%d.expert_ids" % g][1]; H = inp["rank%d.x" % g][1][1]
        for name in ("expand_x", "assist_info_for_combine", "ep_recv_counts", "expert_token_nums"):
            t["rank%d.%s" % (g, name)] = o["rank%d.%s" % (g, name)]
        t["rank%d.expert_ids" % g] = inp["rank%d.expert_ids" % g]
        w = [rnd.uniform(0.1, 1.0) for _ in range(bs * K)]
        t["rank%d.expert_scales" % g] = ("F32", [bs, K], struct.pack("<%df" % len(w), *w))
        res = [to_bf(rnd.uniform(-1, 1)) for _ in range(bs * H)]
        t["rank%d.residual_x" % g] = ("BF16", [bs, 1, H], struct.pack("<%dH" % len(res), *res))
        gam = [to_bf(rnd.uniform(0.5, 1.5)) for _ in range(H)]
        t["rank%d.gamma" % g] = ("BF16", [H], struct.pack("<%dH" % H, *gam))
    save(path, m, t)

def check_combine(path, out):
    meta, inp = load(path); _, o = load(out)
    R = int(meta["ranks"]); eps = float(meta["norm_eps"])
    rows = {}  # (src, token, k) -> expert output row (identity FFN: the dispatched row)
    for d in range(R):
        ex = vals(inp["rank%d.expand_x" % d]); H = inp["rank%d.expand_x" % d][1][1]; a = vals(inp["rank%d.assist_info_for_combine" % d])
        for j in range(len(a) // 3): rows[tuple(a[3 * j:3 * j + 3])] = ex[j * H:(j + 1) * H]
    worst = 0.0
    for g in range(R):
        bs, K = inp["rank%d.expert_ids" % g][1]; H = inp["rank%d.gamma" % g][1][0]
        w = vals(inp["rank%d.expert_scales" % g]); res = vals(inp["rank%d.residual_x" % g]); gam = vals(inp["rank%d.gamma" % g])
        y = vals(o["rank%d.y" % g]); xo = vals(o["rank%d.x" % g]); rs = vals(o["rank%d.rstd" % g])
        for i in range(bs):
            x = [0.0] * H
            for k in range(K):
                r = rows[(g, i, k)]
                for h in range(H): x[h] += w[i * K + k] * bf(r[h])
            for h in range(H): x[h] += bf(res[i * H + h])
            r = 1.0 / math.sqrt(sum(v * v for v in x) / H + eps)
            if abs(rs[i] - r) > 1e-5 * r: fail("rank %d token %d: rstd %g, expected %g" % (g, i, rs[i], r))
            for h in range(H):
                yr = bf(to_bf(x[h] * r)) * bf(gam[h])
                ulp = lambda v: 2.0 ** (math.frexp(v)[1] - 8) if v else 1e-30
                if abs(bf(xo[i * H + h]) - x[h]) > ulp(x[h]) + 1e-6 or abs(bf(y[i * H + h]) - yr) > 2 * ulp(yr) + 1e-6:
                    fail("rank %d token %d h %d: x %g (ref %g) y %g (ref %g)" % (g, i, h, bf(xo[i*H+h]), x[h], bf(y[i*H+h]), yr))
    print("combine ok")

cmd = sys.argv[1]
if cmd == "dispatch": check_dispatch(sys.argv[2], sys.argv[3])
elif cmd == "make-combine": make_combine(sys.argv[2], sys.argv[3], sys.argv[4])
elif cmd == "combine": check_combine(sys.argv[2], sys.argv[3])
elif cmd == "break":
    meta, t = load(sys.argv[2]); dt, shape, raw = t["rank1.expert_ids"]
    t["rank1.expert_ids"] = (dt, shape, struct.pack("<i", 999) + raw[4:]); save(sys.argv[3], meta, t)
elif cmd == "comm-alg":  # a non-empty reserved comm_alg
    meta, t = load(sys.argv[2]); meta["comm_alg"] = "fullmesh"; save(sys.argv[3], meta, t)
elif cmd == "both-counts":  # ep_send_counts and Dispatch's ep_recv_counts for the same rank
    meta, t = load(sys.argv[2]); t["rank1.ep_send_counts"] = t["rank1.ep_recv_counts"]; save(sys.argv[3], meta, t)
PY

# 1. dispatch
"$MEGAMOE" case-gen dispatch-v3 -o "$WORK/d.st" --ranks 4 --experts 8 --topk 3 --tokens 6 --hidden 48 --seed 3 \
    && ok || bad "case-gen dispatch-v3"
"$MEGAMOE" case "$WORK/d.st" -o "$WORK/d_out.st" && ok || bad "case dispatch"
python3 "$WORK/dc.py" dispatch "$WORK/d.st" "$WORK/d_out.st" && ok || bad "dispatch outputs"
# 2. the dispatch output feeds a combine case
python3 "$WORK/dc.py" make-combine "$WORK/d.st" "$WORK/d_out.st" "$WORK/c.st" && ok || bad "make combine case"
"$MEGAMOE" case "$WORK/c.st" -o "$WORK/c_out.st" && ok || bad "case combine from dispatch output"
python3 "$WORK/dc.py" combine "$WORK/c.st" "$WORK/c_out.st" && ok || bad "combine outputs"
# 3. generated combine cases, a broken one, MPI
"$MEGAMOE" case-gen combine-v2 -o "$WORK/c2.st" --ranks 6 --shared-experts 1 --shared-ranks 2 --experts 8 \
    --zero-experts 1 --copy-experts 1 --const-experts 2 --alpha-2d --mask 2d --shared-x --quant-mode 2 --smooth \
    && ok || bad "case-gen combine-v2"
"$MEGAMOE" case "$WORK/c2.st" -o "$WORK/c2_out.st" && ok || bad "case combine_v2"
"$MEGAMOE" case-gen combine-v2 -o "$WORK/c3.st" --ranks 5 --remove 1,3 --uneven-bs && ok || bad "case-gen elastic"
"$MEGAMOE" case "$WORK/c3.st" -o "$WORK/c3_out.st" && ok || bad "case elastic"
# Rank 0 removed: under MPI, process 0 holds no outputs, so a survivor must write the file.
for op in dispatch_v3 combine_v2; do
    "$MEGAMOE" case-gen ${op/_/-} -o "$WORK/r0_$op.st" --ranks 4 --remove 0,2 && ok || bad "case-gen $op --remove 0,2"
    "$MEGAMOE" case "$WORK/r0_$op.st" -o "$WORK/r0_${op}_out.st" && ok || bad "case $op --remove 0,2"
done
python3 "$WORK/dc.py" break "$WORK/c.st" "$WORK/bad.st" && ok || bad "break"
case_rejected "id out of range" "$WORK/bad.st" "rank 1: expert_ids\[0\]\[0\] = 999"
python3 "$WORK/dc.py" comm-alg "$WORK/d.st" "$WORK/bad.st" && ok || bad "comm-alg"
case_rejected "comm_alg" "$WORK/bad.st" 'attribute "comm_alg" = "fullmesh" is reserved and must be empty'
python3 "$WORK/dc.py" both-counts "$WORK/c.st" "$WORK/bad.st" && ok || bad "both-counts"
case_rejected "both counts" "$WORK/bad.st" \
    '^megamoe: case: tensor "rank1.ep_send_counts" and tensor "rank1.ep_recv_counts" are both given'
if cli_has_mpi; then
    cli_mpi_env
    for f in d c2 c3 r0_dispatch_v3 r0_combine_v2; do
        n=$(python3 -c "import sys, safetensors_io; print(safetensors_io.load(sys.argv[1])[0]['ranks'])" "$WORK/$f.st")
        timeout 120 mpirun --oversubscribe -n "$n" "$MEGAMOE" case "$WORK/$f.st" -o "$WORK/${f}_mpi.st" --backend mpi \
            >/dev/null 2>&1 && cmp -s "$WORK/${f}_out.st" "$WORK/${f}_mpi.st" && ok || bad "mpi $f differs"
    done
fi
cli_finish dispatch_combine_case
