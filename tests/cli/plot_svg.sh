#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# tests/cli/plot_svg.sh: `--plot FILE.svg` (docs/cli.md): `bench ffn`'s roofline and `bench mega-moe`'s
# stage bars are well-formed SVG (python3 xml.etree) with the expected parts: one marker per measured
# (format, rows) point of the registry's kernels, the two peak lines and the bandwidth line, the axis
# labels, the title naming the CPU and the thread count (the same as the --json header's); one stacked
# bar segment per (rank, stage) with time and one rank label per rank, also under mpirun (each process's
# times gathered to rank 0). Also `bench mega-moe --json`.
# Usage: bash plot_svg.sh <path-to-megamoe> <source-dir>
set -u
source "$(dirname "${BASH_SOURCE[0]}")/lib/common.bash"
cli_require_python plot_svg

# svg_check FILE PYTHON: FILE parses as XML; PYTHON asserts on `root` and `by_class(name)` (elements
# whose class is name), with `objs` the last expect's JSON lines when there are any.
svg_check() {
    local what=$1
    if python3 - "$WORK/$1" "$WORK/out" "$2" <<'PY'; then ok; else bad "$what"; fi
import json, sys
import xml.etree.ElementTree as ET
root = ET.parse(sys.argv[1]).getroot()  # raises unless well-formed
NS = "{http://www.w3.org/2000/svg}"
assert root.tag == NS + "svg", root.tag
def by_class(name):
    return [e for e in root.iter() if e.get("class") == name]
def text_of(name):
    return [e.text for e in by_class(name)]
objs = [json.loads(l) for l in open(sys.argv[2]).read().splitlines() if l.startswith("{")]
exec(sys.argv[3])
PY
}

# bench ffn: 2 formats x 2 row counts at level auto = 4 points.
expect 0 "bench ffn --plot" -- bench ffn --quick --hidden 256 --intermediate 128 --rows 1,8 --format bf16,int8 \
    --isa auto --stream-mb 4 --iterations 2 --json --plot "$WORK/ffn.svg"
stderr_empty
svg_check ffn.svg '
rows = [o for o in objs if o["type"] == "row" and o["level"] == "auto"]
points = [e for e in root.iter() if e.get("class") == "point"]
assert len(points) == len(rows) == 4, (len(points), rows)
# each marker names its format and rows in its tooltip, in the order measured
tips = [e.find(NS + "title").text for e in points]
for tip, r in zip(tips, rows):
    assert tip.startswith("%s, H %d, %d row" % (r["format"], r["hidden"], r["rows"])), (tip, r)
labels = text_of("axis-label")
assert len(labels) == 2 and "arithmetic intensity" in labels[0] and "GFLOP/s" in labels[1], labels
head = objs[0]
title = text_of("title")[0]
assert head["cpu"] in title and (" %d thread" % head["threads_n"]) in title, (title, head)
peaks = {o["instruction"]: o for o in objs if o["type"] == "peak"}
bw = [o for o in objs if o["type"] == "bandwidth"]
if peaks["vdpbf16ps (bf16)"]["gops_n"]:  # AVX-512 BF16: the peak lines and the bandwidth line are drawn
    assert len(by_class("peak-bf16")) == 1 and len(by_class("peak-int8")) == 1, "peak lines"
    assert len(bw) == 1 and len(by_class("bandwidth")) <= 1, "bandwidth line"
    # the BF16 peak is a horizontal line
    line = by_class("peak-bf16")[0]
    assert line.get("y1") == line.get("y2") and line.get("x1") != line.get("x2"), line.attrib
legend = text_of("legend")
assert "bf16" in legend and "int8" in legend, legend
'

# bench mega-moe: one decode case on 2 ranks, --json and --plot in the same run.
expect 0 "bench mega-moe --json --plot" -- bench mega-moe --preset qwen3-30b-a3b --phase decode --decode-tokens 2 \
    --ranks 2 --iterations 1 --hidden 256 --intermediate 128 --experts 16 --json --plot "$WORK/layer.svg"
stderr_empty
svg_check layer.svg '
head, rows = objs[0], [o for o in objs if o["type"] == "row"]
assert head["type"] == "header" and head["bench"] == "mega-moe" and head["ranks"] == 2, head
assert len(rows) == 1 and rows[0]["tokens_per_rank"] == 2 and rows[0]["phase"] == "decode", rows
assert rows[0]["layer_ms"] > 0 and rows[0]["compute_ms"] > 0 and rows[0]["ranks"] == 2, rows
assert (rows[0]["hidden"], rows[0]["intermediate"], rows[0]["experts"], rows[0]["topk"]) == (256, 128, 16, 8), rows
assert rows[0]["rows"] == 2 * 2 * 8, rows
assert text_of("rank-label") == ["rank 0", "rank 1"], text_of("rank-label")
stages = by_class("stage")
tips = [e.find(NS + "title").text for e in stages]
for r in (0, 1):  # every rank dispatches, runs GEMM1 and GEMM2 and combines
    for st in ("dispatch", "gemm1", "gemm2", "combine"):
        assert any(t.startswith("rank %d %s:" % (r, st)) for t in tips), (r, st, tips)
assert all(float(e.get("width")) >= 0 for e in stages)
assert len(text_of("legend")) == 6 and len(text_of("axis-label")) == 1, text_of("legend")
assert "qwen3-30b-a3b" in text_of("case-label")[0], text_of("case-label")
assert len(by_class("layer-time")) == 1
'

# bench mega-moe under mpirun, one rank per process: rank 0 gathers every rank's stage times (it once
# summed them with an allreduce longer than the comm layer's limit and failed), so each rank has its bar.
if cli_has_mpi; then
    cli_mpi_env
    timeout 300 mpirun --oversubscribe -n 2 "$MEGAMOE" bench mega-moe --backend mpi --preset qwen3-30b-a3b \
        --hidden 256 --intermediate 128 --experts 16 --phase decode --decode-tokens 2 --iterations 1 --json --plot "$WORK/layer_mpi.svg" >"$WORK/out" 2>"$WORK/err"
    status=$?
    if [ "$status" -eq 0 ]; then ok; else bad "bench mega-moe --backend mpi --plot: exit $status ($(head -c 300 "$WORK/err"))"; fi
    svg_check layer_mpi.svg '
head, rows = objs[0], [o for o in objs if o["type"] == "row"]
assert head["backend"] == "mpi processes" and head["ranks"] == 2 and len(rows) == 1, (head, rows)
assert "ranks as processes" in text_of("subtitle")[0], text_of("subtitle")
assert text_of("rank-label") == ["rank 0", "rank 1"], text_of("rank-label")
tips = [e.find(NS + "title").text for e in by_class("stage")]
for r in (0, 1):
    for st in ("dispatch", "gemm1", "gemm2", "combine"):
        assert any(t.startswith("rank %d %s:" % (r, st)) for t in tips), (r, st, tips)
'
fi

# An unwritable plot path: one line, status 1.
expect 1 "bench ffn --plot into a missing folder" -- bench ffn --quick --hidden 256 --intermediate 128 --rows 1 \
    --format bf16 --isa auto --stream-mb 4 --iterations 1 --plot "$WORK/no/such/dir/x.svg"
stderr_is_one_line "--plot: cannot write"

cli_finish plot_svg
