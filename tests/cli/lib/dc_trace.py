# SPDX-License-Identifier: Apache-2.0
"""tests/cli/lib/dc_trace.py: independent checks of the Chrome / Perfetto trace of
`megamoe run --op dispatch-combine --trace FILE` and `megamoe run --op re-routing --trace FILE`
(standard library only), used by tests/cli/run_trace.sh.

  dc_trace.py TRACE RANKS TOKENS TOPK SHARED HIDDEN ITERATIONS CHECKED ROWS [TP]
  dc_trace.py --re-routing TRACE TOKENS RANKS EXPERTS ITERATIONS

Dispatch-combine (RANKS thread ranks in all, TOKENS per rank, no masks or special experts; SHARED shared
experts; ROWS the rows the command reported received in all; TP 1 (default) or 2 with --tp 2, where both
TP ranks of an expert receive every row sent to it): from the shape alone it asserts
  - tracks "host" (with one "setup" slice) and "rank 0" .. "rank R-1";
  - per rank and iteration 0..ITERATIONS-1: "dispatch", "expert FFN", "combine + RMSNorm" in that order,
    after the setup, with the same "experts" (or "shared_expert") and "rows" args on all three; with
    CHECKED one "check" slice after them;
  - the routed experts: each of 0 .. M-1 on exactly TP ranks (with the same rows), a rank's
    consecutive; rows >= 0;
  - rows received, summed over every rank's experts == ROWS == RANKS x TOKENS x (TOPK + SHARED) x TP,
    and per rank == the sum of its "from_rows";
  - what a rank sends: its "to_rows" sum to TOKENS x (TOPK + SHARED) x TP (each token to K experts and
    each shared expert), agree with the receivers' "from_rows", and bytes_sent / bytes_received ==
    rows x HIDDEN x 2 (BF16 rows);
  - flows: each start ("s") has exactly one finish ("f", bp "e") with its id, name and cat; the start is
    inside the "dispatch" of rank src, the finish inside the "expert FFN" of rank dst of the same
    iteration, strictly later; rank dst received rows from src; and every such (iteration, src, dst) pair
    has exactly one flow.
Re-routing (one process): "setup", "warm-up", ITERATIONS x ("memcpy", "re-routing"), "check" on the
host track; each re-routing slice's "experts" are 0 .. EXPERTS-1 with "rows" summing to TOKENS, its
"ranks" 0 .. RANKS-1 with "ranks_rows" summing to TOKENS; no flows (nothing is sent).

Prints one line per failure and exits 1 when anything failed."""
import collections
import json
import sys

from trace_common import fail, finish, flow_pairs, prefix

prefix[0] = "dc_trace"


def inside(s, ts):
    return s["ts"] <= ts <= s["ts"] + s["dur"]


def load(path):
    ev = json.load(open(path))["traceEvents"]
    names = {e["tid"]: e["args"]["name"] for e in ev if e["ph"] == "M" and e["name"] == "thread_name"}
    return ev, names, [e for e in ev if e["ph"] == "X"]


def re_routing(path, tokens, ranks, experts, iterations):
    ev, names, xs = load(path)
    if list(names.values()) != ["host"]:
        fail("tracks %s" % names)
    want = ["setup", "warm-up"] + ["memcpy", "re-routing"] * iterations + ["check"]
    if [s["name"] for s in xs] != want:
        fail("slices %s, expected %s" % ([s["name"] for s in xs], want))
    calls = [s for s in xs if s["name"] == "re-routing"]
    if [c["args"].get("iteration") for c in calls] != list(range(iterations)):
        fail("re-routing iterations %s" % [c["args"].get("iteration") for c in calls])
    for c in calls:
        a = c["args"]
        if a.get("experts") != list(range(experts)) or len(a.get("rows", [])) != experts \
                or sum(a["rows"]) != tokens or min(a["rows"], default=0) < 0:
            fail("re-routing %s: experts / rows %s %s" % (a.get("iteration"), a.get("experts"), a.get("rows")))
        if a.get("ranks") != list(range(ranks)) or len(a.get("ranks_rows", [])) != ranks \
                or sum(a["ranks_rows"]) != tokens:
            fail("re-routing %s: ranks / rows %s %s" % (a.get("iteration"), a.get("ranks"), a.get("ranks_rows")))
    if any(e["ph"] in ("s", "f") for e in ev):
        fail("flows in a trace of one process")


def dispatch_combine(path, ranks, tokens, topk, shared, hidden, iterations, checked, rows_reported, tp=1):
    ev, names, xs = load(path)
    want = {0: "host"}
    want.update({r + 1: "rank %d" % r for r in range(ranks)})
    if names != want:
        fail("tracks %s, expected %s" % (names, want))
        return
    host = [s for s in xs if s["tid"] == 0]
    if [s["name"] for s in host] != ["setup"]:
        fail("host slices %s" % [s["name"] for s in host])
        return
    setup_end = host[0]["ts"] + host[0]["dur"]
    stages = ["dispatch", "expert FFN", "combine + RMSNorm"]
    sl = {}  # (rank, iteration, stage) -> slice
    received, owner = {}, {}
    for r in range(ranks):
        mine = sorted((s for s in xs if s["tid"] == r + 1), key=lambda s: s["ts"])
        names_r = [s["name"] for s in mine]
        if names_r != stages * iterations + (["check"] if checked else []):
            fail("rank %d: slices %s" % (r, names_r))
            continue
        if mine[0]["ts"] < setup_end - 0.002:
            fail("rank %d: a stage before the end of the setup" % r)
        for i, s in enumerate(mine[:3 * iterations]):
            if s["args"].get("iteration") != i // 3:
                fail("rank %d: %s has iteration %s, expected %d" % (r, s["name"], s["args"].get("iteration"), i // 3))
            sl[(r, i // 3, s["name"])] = s
        first = mine[0]["args"]
        for s in mine[:3 * iterations]:
            a = s["args"]
            if (a.get("experts"), a.get("shared_expert"), a.get("rows")) != \
                    (first.get("experts"), first.get("shared_expert"), first.get("rows")):
                fail("rank %d %s it %s: experts / rows %s differ from the first dispatch's" % (r, s["name"], a.get("iteration"), a))
        rows = first.get("rows", [])
        if not rows or min(rows) < 0 or ("experts" in first) == ("shared_expert" in first) \
                or ("experts" in first and len(first["experts"]) != len(rows)):
            fail("rank %d: experts / rows args %s" % (r, first))
            continue
        for e, n in zip(first.get("experts", []), rows):
            owner.setdefault(e, []).append((r, n))
        if first.get("experts") and first["experts"] != list(range(first["experts"][0], first["experts"][0] + len(rows))):
            fail("rank %d: experts %s not consecutive" % (r, first["experts"]))
        received[r] = sum(rows)
    if len(received) != ranks:
        return
    if sorted(owner) != list(range(len(owner))):
        fail("routed experts %s are not 0 .. M-1" % sorted(owner))
    for e, held in owner.items():
        if len(held) != tp or len({n for r, n in held}) != 1:
            fail("expert %d on ranks (rank, rows) %s, expected %d with the same rows" % (e, held, tp))
    per_rank = tokens * (topk + shared) * tp
    if not sum(received.values()) == rows_reported == ranks * per_rank:
        fail("rows received %d in all (%s); the command reported %d; expected %d x %d x (%d + %d) x %d = %d" % (
            sum(received.values()), received, rows_reported, ranks, tokens, topk, shared, tp, ranks * per_rank))
    # The send / receive matrix, from the first iteration's dispatch args.
    got = collections.Counter()  # (src, dst) -> rows, as the receiver says
    for r in range(ranks):
        a = sl[(r, 0, "dispatch")]["args"]
        for key in ("to", "from"):
            if len(a.get(key, [])) != len(a.get(key + "_rows", [])) or min(a.get(key + "_rows") or [1]) <= 0:
                fail("rank %d: %s / %s_rows %s %s" % (r, key, key, a.get(key), a.get(key + "_rows")))
        if sum(a["from_rows"]) != received[r]:
            fail("rank %d: from_rows %s sum to %d, its experts received %d" % (r, a["from_rows"], sum(a["from_rows"]), received[r]))
        if sum(a["to_rows"]) != per_rank:
            fail("rank %d: to_rows %s sum to %d, expected %d" % (r, a["to_rows"], sum(a["to_rows"]), per_rank))
        if a.get("bytes_sent") != sum(a["to_rows"]) * hidden * 2 or a.get("bytes_received") != received[r] * hidden * 2:
            fail("rank %d: bytes_sent %s / bytes_received %s, expected rows x %d x 2" % (r, a.get("bytes_sent"), a.get("bytes_received"), hidden))
        for src, n in zip(a["from"], a["from_rows"]):
            got[(src, r)] = n
    for r in range(ranks):
        a = sl[(r, 0, "dispatch")]["args"]
        if dict(zip(a["to"], a["to_rows"])) != {dst: n for (src, dst), n in got.items() if src == r}:
            fail("rank %d: sends %s disagree with what the ranks received" % (r, dict(zip(a["to"], a["to_rows"]))))
    # Flows.
    pairs = flow_pairs(ev)
    linked = collections.Counter()
    for fid, s, f in pairs:
        src, dst = s["tid"] - 1, f["tid"] - 1
        it = next((i for i in range(iterations) if (src, i, "dispatch") in sl and inside(sl[(src, i, "dispatch")], s["ts"])), None)
        if it is None:
            fail("flow %s starts outside every dispatch of rank %d" % (fid, src))
            continue
        if (dst, it, "expert FFN") not in sl or not inside(sl[(dst, it, "expert FFN")], f["ts"]):
            fail("flow %s (rank %d it %d) does not finish in rank %d's expert FFN of that iteration" % (fid, src, it, dst))
            continue
        if not s["ts"] < f["ts"]:
            fail("flow %s goes back in time (%s -> %s)" % (fid, s["ts"], f["ts"]))
        if got[(src, dst)] <= 0:
            fail("flow %s from rank %d to rank %d, which received no rows from it" % (fid, src, dst))
        linked[(it, src, dst)] += 1
    want = collections.Counter({(it, src, dst): 1 for it in range(iterations) for (src, dst), n in got.items() if n > 0})
    if linked != want:
        fail("flows per (iteration, src, dst) %s, expected one for each of %s" % (dict(linked), sorted(want)))


def main(argv):
    if argv[1] == "--re-routing":
        re_routing(argv[2], *(int(v) for v in argv[3:7]))
    else:
        dispatch_combine(argv[1], *(int(v) for v in argv[2:11]))
    return finish("dc_trace")


if __name__ == "__main__":
    sys.exit(main(sys.argv))
