#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# tests/cli/case_reliability.sh: case files that used to crash, give wrong results with exit 0, or run
# far longer / larger than their size warrants (the reliability audit); each section pins one fix.
# Usage: bash case_reliability.sh <path-to-megamoe> <source-dir>
set -u
source "$(dirname "${BASH_SOURCE[0]}")/lib/common.bash"
cli_require_python case_reliability
cli_mpi_env

# drop_rank IN OUT G: copies case IN to OUT without rank G's tensors.
drop_rank() {
    python3 - "$1" "$2" "$3" <<'PY'
import sys
from safetensors_io import load, save
m, t = load(sys.argv[1])
save(sys.argv[2], m, {k: v for k, v in t.items() if not k.startswith("rank%s." % sys.argv[3])})
PY
}

# 1-2. TP = 2 has no elastic scale-in: a missing TP rank (TP rank 1 or of a later EP rank) is refused,
# naming the global rank, on both backends (it crashed in Dispatch and gave a wrong y in Combine).
# have_mpi: megamoe was built with MPI and mpirun exists (a build without MPI says "no MPI").
have_mpi() {
    command -v mpirun >/dev/null 2>&1 || return 1
    ! "$MEGAMOE" case "$WORK/nothing.st" -o "$WORK/nothing_out.st" --backend mpi 2>&1 | grep -q "no MPI"
}
for op in dispatch_v3 combine_v2; do
    expect 0 "case-gen $op tp 2" case-gen "${op/_/-}" -o "$WORK/$op.st" --ranks 2 --tp 2 --tokens 4 --hidden 32
    for g in 1 3; do
        drop_rank "$WORK/$op.st" "$WORK/$op.no$g.st" "$g"
        case_rejected "$op tp 2 without rank $g" "$WORK/$op.no$g.st" \
            "tensor \"rank$g.expert_ids\" is missing .*tp_world_size = 2 allows no elastic scale-in"
        have_mpi || continue
        timeout 120 mpirun --allow-run-as-root --oversubscribe -n 4 "$MEGAMOE" case "$WORK/$op.no$g.st" -o "$WORK/mpi_out.st" \
            --backend mpi >"$WORK/log" 2>&1
        status=$?
        if [ "$status" -eq 2 ] && grep -qF "tensor \"rank$g.expert_ids\" is missing" "$WORK/log"; then ok; else bad "$op without rank $g under mpirun: exit $status, $(head -c 600 "$WORK/log")"; fi
    done
done
# 5. The receive plan of Dispatch is linear in L (local experts per rank): moe_expert_num = 2^22 on two
# ranks (L = 2^21) finishes in seconds (the quadratic prefix sum ran for hours), with the results of the
# small-L path: the same ids (all below 4) sent to rank 0 with L = 4 and with L = 2^21.
expect 0 "case-gen dispatch-v3 8 experts" case-gen dispatch-v3 -o "$WORK/small_l.st" --ranks 2 --experts 8 \
    --topk 2 --tokens 4 --hidden 32
python3 - "$WORK/small_l.st" "$WORK/big_l.st" <<'PY'
import struct, sys
from safetensors_io import load, save
m, t = load(sys.argv[1])
for g in range(2):
    ids = [v for i in range(4) for v in (i % 4, (i + 1 + g) % 4)]
    t["rank%d.expert_ids" % g] = ("I32", [4, 2], struct.pack("<8i", *ids))
save(sys.argv[1], m, t)
m["moe_expert_num"] = str(1 << 22)
save(sys.argv[2], m, t)
PY
expect 0 "small L" case "$WORK/small_l.st" -o "$WORK/small_l_out.st"
start=$(date +%s)
timeout 60 "$MEGAMOE" case "$WORK/big_l.st" -o "$WORK/big_l_out.st" 2>"$WORK/err"
status=$?
if [ "$status" -eq 0 ] && [ $(($(date +%s) - start)) -lt 30 ]; then ok; else bad "moe_expert_num 2^22: exit $status after $(($(date +%s) - start)) s: $(head -c 400 "$WORK/err")"; fi
python3 - "$WORK/small_l_out.st" "$WORK/big_l_out.st" <<'PY' && ok || bad "moe_expert_num 2^22 differs from the small-L results"
import struct, sys
from safetensors_io import load
_, a = load(sys.argv[1]); _, b = load(sys.argv[2])
def v(t, f): return list(struct.unpack("<%d%s" % (len(t[2]) // struct.calcsize(f), f), t[2]))
for name in ("expand_x", "assist_info_for_combine"):
    assert a["rank0." + name] == b["rank0." + name], name
assert b["rank1.expand_x"][1][0] == 0
na, nb = v(a["rank0.expert_token_nums"], "q"), v(b["rank0.expert_token_nums"], "q")
assert nb[:4] == na and not any(nb[4:]), "expert_token_nums"
ca, cb = v(a["rank0.ep_recv_counts"], "i"), v(b["rank0.ep_recv_counts"], "i")
assert cb[:8] == ca and set(cb[8:]) == {ca[-1]}, "ep_recv_counts"
PY
# 6. A memory budget (--memory-budget GB, default 3/4 of physical memory): a 216-byte re-routing case
# whose expert_token_num_per_rank has shape (0, 2^28) asks for 1.07 GB of output (streamed to the file,
# counted once); with a budget of 1 GB it is refused at once, exit 2, naming both figures, writing nothing.
python3 - "$WORK/huge_e.st" <<'PY'
import sys
from safetensors_io import save
save(sys.argv[1], {"op": "moe_re_routing"},
     {"tokens": ("BF16", [0, 8], b""), "expert_token_num_per_rank": ("I32", [0, 1 << 28], b"")})
PY
rm -f "$WORK/huge_e_out.st"
start=$(date +%s)
expect 2 "a 1.07 GB case over a 1 GB budget" case "$WORK/huge_e.st" -o "$WORK/huge_e_out.st" --memory-budget 1
stderr_is_one_line "expert_token_num: the case needs 1.07 GB, more than the budget of 1.00 GB"
if [ $(($(date +%s) - start)) -lt 5 ] && [ ! -e "$WORK/huge_e_out.st" ]; then ok; else bad "the refused case took $(($(date +%s) - start)) s or wrote output"; fi
expect 2 "--memory-budget 0" case "$WORK/huge_e.st" -o "$WORK/huge_e_out.st" --memory-budget 0
# 6b. The budget counts the operators' workspaces, sized by the operators' own sizing functions, before
# anything is read. A 52 KB mega_moe case whose num_max_tokens_per_rank = 2^16 asks for 0.13 GB of
# receive and combine areas (mm_mega_moe_buffer_bytes_for, 2 ranks): over a 0.05 GB budget it is
# refused at once, exit 2, naming the figure and the attribute (it ran, using the areas, exit 0).
expect 0 "case-gen mega-moe for the buffer budget" case-gen mega-moe -o "$WORK/mm_budget.st" --ranks 2
python3 - "$WORK/mm_budget.st" <<'PY'
import sys
from safetensors_io import load, save
meta, tensors = load(sys.argv[1])
assert [tensors["rank0.x"][1], meta["ranks"]] == [[8, 64], "2"], "case-gen mega-moe changed its defaults"
meta["num_max_tokens_per_rank"] = str(1 << 16)
save(sys.argv[1], meta, tensors)
PY
rm -f "$WORK/mm_budget_out.st"
start=$(date +%s)
expect 2 "mega_moe buffer over the budget" case "$WORK/mm_budget.st" -o "$WORK/mm_budget_out.st" --memory-budget 0.05
stderr_is_one_line "the mega_moe buffer of 2 ranks (num_max_tokens_per_rank 65536, max_recv_token_num 0, H 64, K 2): the case needs 0.13 GB, more than the budget of 0.05 GB"
if [ $(($(date +%s) - start)) -lt 5 ] && [ ! -e "$WORK/mm_budget_out.st" ]; then ok; else bad "the refused mega_moe case took $(($(date +%s) - start)) s or wrote output"; fi
# Dispatch V3 on 8 ranks, BS 64, H 1024, K 8, 64 experts (L = 8): each rank's workspace is 8 regions of
# 64 (L x 4 header) + 6144 (512 rows x 12 assist) + 2048 (x 4 scales) + 1048576 (x 2048 bytes) = 1056832
# bytes, plus a combine area of 64 x 8 x 1024 x 2 = 1048576: 9503232 bytes, 0.076 GB for 8 ranks. It is
# counted first and named (the budget counted only the 1 MB of inputs and the outputs).
expect 0 "case-gen dispatch-v3 for the workspace budget" case-gen dispatch-v3 -o "$WORK/dc_budget.st" --ranks 8 \
    --tokens 64 --hidden 1024 --topk 8 --experts 64
expect 2 "dispatch workspace over the budget" case "$WORK/dc_budget.st" -o "$WORK/dc_budget_out.st" --memory-budget 0.07
stderr_is_one_line "the moe_distribute_dispatch_v3 workspace of 8 ranks (BS 64, H 1024, K 8): the case needs 0.08 GB, more than the budget of 0.07 GB"

# 8. norm_eps = 0 is accepted; a token whose sum is all zero (expert weights 0, residual 0) gets
# rstd = +inf and y = NaN (0 x inf), as docs/dispatch_combine.md says; the other tokens stay finite.
expect 0 "case-gen combine-v2 norm_eps 0" case-gen combine-v2 -o "$WORK/eps0.st" --ranks 2 --tokens 4 \
    --hidden 32 --norm-eps 0
python3 - "$WORK/eps0.st" <<'PY'
import struct, sys
from safetensors_io import load, save
m, t = load(sys.argv[1])
assert float(m["norm_eps"]) == 0.0
dt, shape, raw = t["rank0.expert_scales"]; k = shape[1]
t["rank0.expert_scales"] = (dt, shape, b"\0" * 4 * k + raw[4 * k:])
dt, shape, raw = t["rank0.residual_x"]; h = shape[2]
t["rank0.residual_x"] = (dt, shape, b"\0" * 2 * h + raw[2 * h:])
save(sys.argv[1], m, t)
PY
expect 0 "norm_eps 0 with an all-zero token" case "$WORK/eps0.st" -o "$WORK/eps0_out.st"
python3 - "$WORK/eps0_out.st" <<'PY' && ok || bad "norm_eps 0: rstd or y of the all-zero token"
import math, struct, sys
from safetensors_io import load
_, o = load(sys.argv[1])
rstd = struct.unpack("<%df" % (len(o["rank0.rstd"][2]) // 4), o["rank0.rstd"][2])
assert rstd[0] == math.inf and all(math.isfinite(v) for v in rstd[1:]), rstd
dt, shape, raw = o["rank0.y"]; h = shape[-1]
y = [struct.unpack("<f", struct.pack("<I", b << 16))[0] for b in struct.unpack("<%dH" % (len(raw) // 2), raw)]
assert all(math.isnan(v) for v in y[:h]) and all(math.isfinite(v) for v in y[h:]), "y"
PY

# 7 (mega_moe). moe_expert_num = 2^31 - 2 with weights for 4 experts: refused at once with the weights
# rule (exit 2), before the buffer allocates per-expert records sized by it (it exited 1, out of memory).
expect 0 "case-gen mega-moe" case-gen mega-moe -o "$WORK/mm.st" --ranks 2
python3 - "$WORK/mm.st" "$WORK/mm_huge_e.st" <<'PY' && ok || bad "make the huge-E case"
import sys
from safetensors_io import load, save
meta, tensors = load(sys.argv[1])
meta["moe_expert_num"] = "2147483646"
save(sys.argv[2], meta, tensors)
PY
case_rejected "mega_moe huge moe_expert_num" "$WORK/mm_huge_e.st" "routed count = 2 must be E / R = 1073741823"

cli_finish case_reliability
