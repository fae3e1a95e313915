# SPDX-License-Identifier: Apache-2.0
"""tests/cli/lib/moe_trace.py: independent checks of the Chrome / Perfetto trace of
`megamoe run --op mega-moe --trace FILE` and of `megamoe layer --trace FILE` (standard library only),
used by tests/cli/run_mega_moe.sh, tests/cli/run_mpi.sh and tests/cli/model_layer.sh.

  moe_trace.py TRACE RANKS EXPERTS TOKENS TOPK ITERATIONS CHECKED SCENARIO...
  moe_trace.py --layer TRACE RANKS EXPERTS TOKENS TOPK CALLS
  moe_trace.py --model TRACE RANKS EXPERTS TOKENS TOPK CALLS ITERATIONS

The second form is a layer's: TOKENS in all, rank r holding the r-th block of ceil(TOKENS / RANKS);
one call per rank of scenario "routed" (EXPERTS, TOPK) and with CALLS 2 one of "shared" (qwen2_moe's
shared expert: RANKS "experts", one per rank, K = 1). Instead of run's setup and check it asserts a
"host" track with "read config, index and x" then "launch", and per rank "load experts" (args: its
tokens) then "forward" holding the rank's calls, and rank 0's "gather and write" after its forward, all
inside the launch.

The third form is `megamoe run --model`'s: TOKENS per rank, the host's "open model" then "launch", and
per rank "load experts", "warm-up", then ITERATIONS "forward" slices (args: tokens, iteration) each
holding the rank's calls of that iteration; no "gather and write".

What it asserts, from the command line's shape alone (run):
  - tracks: "rank 0" .. "rank R-1" (and their overlap tracks) and "host (check)";
  - per scenario and rank: a setup slice holding "generate weights" then "pack weights", a warm-up
    after it, ITERATIONS timed call slices, and every stage slice inside a call of its rank; with
    CHECKED (1) one "check" slice per scenario on the host track, after every rank's calls;
  - per call: one "dispatch" (the rank sending), the first stage of the call, whose args list the
    experts its rows go to: ids below EXPERTS, rows summing to TOKENS * TOPK (the rank's tokens);
  - per call: the gemm1 / activation / gemm2 slices of each batch carry the same experts and rows; the
    experts are the rank's own (global ids rank * E/R ...), each computed by one batch, on exactly the
    rows the ranks' dispatches routed to it (summed over the sending ranks), so all ranks' expert rows
    sum to TOPK times all ranks' tokens;
  - flows: each start ("s") has exactly one finish ("f", bp "e") with its id, name and cat; the start
    lies inside a dispatch slice of rank src, the finish inside a gemm1 slice of the same scenario and
    iteration on rank dst, later, whose experts include one the dispatch routed rows to; and every
    (dispatch, batch) pair that shares such an expert has its flow.

Prints one line per failure and exits 1 when anything failed."""
import collections
import json
import sys

from trace_common import fail, finish, flow_pairs, prefix

prefix[0] = "moe_trace"


def rank_of(tid):
    return tid % 1000


def enclosing(slices_by_tid, tid, ts):
    """The innermost slice of track tid containing ts (what a viewer binds a flow end to)."""
    inside = [s for s in slices_by_tid.get(tid, []) if s["ts"] <= ts <= s["ts"] + s["dur"]]
    return min(inside, key=lambda s: s["dur"]) if inside else None


def within(inner, outer):
    return outer["ts"] - 0.002 <= inner["ts"] and inner["ts"] + inner["dur"] <= outer["ts"] + outer["dur"] + 0.002


def run_setup(xs, host, ranks, iterations, checked, scenarios):
    """run's setup, warm-up and check slices."""
    calls = [s for s in xs if s["cat"] == "run"]
    for sc in scenarios:
        for r in range(ranks):
            setup = [s for s in xs if s["tid"] == r and s["cat"] == "setup" and s["args"].get("scenario") == sc]
            kinds = {n: [s for s in setup if s["name"] == n] for n in ("setup", "generate weights", "pack weights", "warm-up")}
            if any(len(v) != 1 for v in kinds.values()):
                fail("%s rank %d: setup slices %s" % (sc, r, sorted(s["name"] for s in setup)))
                continue
            whole, gen, pack, warm = (kinds[n][0] for n in ("setup", "generate weights", "pack weights", "warm-up"))
            if not (within(gen, whole) and within(pack, whole) and gen["ts"] + gen["dur"] <= pack["ts"] + 0.002):
                fail("%s rank %d: generate / pack not inside setup, in order" % (sc, r))
            if warm["ts"] < whole["ts"] + whole["dur"] - 0.002:
                fail("%s rank %d: warm-up before the end of setup" % (sc, r))
            mine = [c for c in calls if c["tid"] == r and c["name"] == "mega_moe " + sc]
            if sorted(c["args"]["iteration"] for c in mine) != list(range(iterations)):
                fail("%s rank %d: call iterations %s" % (sc, r, [c["args"]["iteration"] for c in mine]))
            if any(c["ts"] < warm["ts"] + warm["dur"] - 0.002 for c in mine):
                fail("%s rank %d: a timed call before the warm-up ended" % (sc, r))
        checks = [s for s in xs if s["name"] == "check" and s["args"].get("scenario") == sc]
        if checked:
            if len(checks) != 1 or checks[0]["tid"] not in host:
                fail("%s: check slices %s" % (sc, checks))
            elif any(checks[0]["ts"] < c["ts"] + c["dur"] - 0.002 for c in calls if c["name"] == "mega_moe " + sc):
                fail("%s: check before a timed call ended" % sc)
        elif checks:
            fail("%s: a check slice without a check" % sc)


def layer_setup(xs, host, ranks, tokens_of, scenarios, iterations=0):
    """layer's phases: the host's read and launch, each rank's load and forward around its calls; with
    iterations (run --model) the host's "open model", and per rank a warm-up and one forward per
    iteration."""
    hs = {s["name"]: s for s in xs if s["tid"] in host}
    first = "open model" if iterations else "read config, index and x"
    if sorted(hs) != sorted(["launch", first]):
        fail("host slices %s" % sorted(hs))
        return
    read, launch = hs[first], hs["launch"]
    if read["ts"] + read["dur"] > launch["ts"] + 0.002:
        fail("read does not end before the launch")
    calls = [s for s in xs if s["cat"] == "run"]
    for r in range(ranks):
        mine = {}
        for s in xs:
            if s["tid"] == r and s["cat"] in ("setup", "layer"):
                mine.setdefault(s["name"], []).append(s)
        want = {"load experts": 1, "forward": max(1, iterations)}
        want.update({"warm-up": 1} if iterations else {"gather and write": 1} if r == 0 else {})
        if {n: len(v) for n, v in mine.items()} != want:
            fail("rank %d: phases %s, expected %s" % (r, {n: len(v) for n, v in mine.items()}, want))
            continue
        load, fwds = mine["load experts"][0], sorted(mine["forward"], key=lambda s: s["ts"])
        before = mine["warm-up"][0] if iterations else load
        if iterations and [f["args"].get("iteration") for f in fwds] != list(range(iterations)):
            fail("rank %d: forward iterations %s" % (r, [f["args"].get("iteration") for f in fwds]))
            continue
        if any(s["args"].get("tokens") != tokens_of[r] for s in [load, before] + fwds):
            fail("rank %d: tokens %s, expected %d" % (r, load["args"].get("tokens"), tokens_of[r]))
        seq = [load] + ([before] if iterations else []) + fwds
        if any(a["ts"] + a["dur"] > b["ts"] + 0.002 for a, b in zip(seq, seq[1:])):
            fail("rank %d: load, warm-up and forwards not in order" % r)
        for s in [load, before] + fwds + mine.get("gather and write", []):
            if not within(s, launch):
                fail("rank %d: %s outside the launch" % (r, s["name"]))
        if r == 0 and not iterations and mine["gather and write"][0]["ts"] < fwds[-1]["ts"] + fwds[-1]["dur"] - 0.002:
            fail("rank 0: gather and write before the end of the forward")
        names = sorted(c["name"] for c in calls if c["tid"] == r)
        if names != sorted(["mega_moe " + sc for sc in scenarios] * len(fwds)):
            fail("rank %d: calls %s, expected %d each of %s" % (r, names, len(fwds), scenarios))
        for sc in scenarios:
            cs = sorted((c for c in calls if c["tid"] == r and c["name"] == "mega_moe " + sc), key=lambda c: c["ts"])
            if [c["args"].get("iteration") for c in cs] != list(range(len(fwds))):
                fail("rank %d: %s calls %s" % (r, sc, [c["args"] for c in cs]))
            elif any(not within(c, f) for c, f in zip(cs, fwds)):
                fail("rank %d: %s call outside the forward of its iteration" % (r, sc))


def main(argv):
    model = argv[1] == "--model"
    layer = argv[1] == "--layer" or model
    if layer:
        argv = argv[1:]
    path = argv[1]
    if layer:
        ranks, experts, tokens, topk, ncalls = (int(v) for v in argv[2:7])
        chunk = max(1, -(-tokens // ranks))
        tokens_of = [max(0, min(chunk, tokens - r * chunk)) for r in range(ranks)]
        iterations, checked = 1, 0
        if model:  # TOKENS per rank, ITERATIONS forwards
            tokens_of, iterations = [tokens] * ranks, int(argv[7])
        shape = {"routed": (experts, topk)}
        if ncalls == 2:
            shape["shared"] = (ranks, 1)
        scenarios = list(shape)
    else:
        ranks, experts, tokens, topk, iterations, checked = (int(v) for v in argv[2:8])
        scenarios = argv[8:]
        tokens_of = [tokens] * ranks
        shape = {sc: (experts, topk) for sc in scenarios}
    host_name = "host" if layer else "host (check)"
    ev = json.load(open(path))["traceEvents"]
    names = {e["tid"]: e["args"]["name"] for e in ev if e["ph"] == "M" and e["name"] == "thread_name"}
    plain = sorted(n for n in names.values() if "overlap" not in n)
    want = sorted(["rank %d" % r for r in range(ranks)] + [host_name])
    if plain != want:
        fail("tracks %s, expected %s" % (plain, want))
    host = [t for t, n in names.items() if n == host_name]
    xs = [e for e in ev if e["ph"] == "X"]
    by_tid = collections.defaultdict(list)
    for s in xs:
        by_tid[s["tid"]].append(s)
    calls = [s for s in xs if s["cat"] == "run"]
    stages = [s for s in xs if s["cat"] in scenarios]
    if layer:
        layer_setup(xs, host, ranks, tokens_of, scenarios, iterations if model else 0)
    else:
        run_setup(xs, host, ranks, iterations, checked, scenarios)

    for s in stages:
        if not any(c["tid"] == rank_of(s["tid"]) and c["name"] == "mega_moe " + s["cat"]
                   and c["args"]["iteration"] == s["args"]["iteration"] and within(s, c) for c in calls):
            fail("stage outside its call: %s" % s)

    # Per call: the dispatch (send) and the batches.
    sends = {}  # (scenario, iteration, rank) -> slice
    batches = collections.defaultdict(dict)  # (scenario, iteration, rank) -> batch -> {name: slice}
    for s in stages:
        key = (s["cat"], s["args"]["iteration"], rank_of(s["tid"]))
        if s["name"] == "dispatch":
            if key in sends:
                fail("two dispatch sends in %s" % (key,))
            sends[key] = s
        if "batch" in s["args"]:
            if s["name"] not in ("gemm1", "activation", "gemm2"):
                fail("batch args on %s" % s["name"])
            batches[key].setdefault(s["args"]["batch"], {})[s["name"]] = s
    for sc in scenarios:
        for it in range(iterations):
            routed = collections.Counter()
            for r in range(ranks):
                key = (sc, it, r)
                send = sends.get(key)
                if send is None:
                    fail("no dispatch in %s" % (key,))
                    continue
                first = min(s["ts"] for s in stages if (s["cat"], s["args"]["iteration"], rank_of(s["tid"])) == key)
                if send["ts"] > first:
                    fail("dispatch not the first stage of %s" % (key,))
                ids, rows = send["args"]["experts"], send["args"]["rows"]
                experts, topk = shape[sc]
                if len(ids) != len(rows) or sum(rows) != tokens_of[r] * topk or any(not 0 <= e < experts for e in ids) \
                        or any(n <= 0 for n in rows) or len(set(ids)) != len(ids):
                    fail("dispatch args of %s: %s %s" % (key, ids, rows))
                routed.update(dict(zip(ids, rows)))
            computed = collections.Counter()
            experts, topk = shape[sc]
            local = experts // ranks
            for r in range(ranks):
                for b, parts in batches[(sc, it, r)].items():
                    if sorted(parts) != ["activation", "gemm1", "gemm2"]:
                        fail("%s rank %d it %d batch %d: stages %s" % (sc, r, it, b, sorted(parts)))
                        continue
                    args = [(p["args"]["experts"], p["args"]["rows"]) for p in parts.values()]
                    if any(a != args[0] for a in args):
                        fail("%s rank %d batch %d: stages disagree on experts/rows" % (sc, r, b))
                    ids, rows = args[0]
                    if len(ids) != len(rows) or not ids or any(not r * local <= e < (r + 1) * local for e in ids):
                        fail("%s rank %d batch %d: experts %s not the rank's" % (sc, r, b, ids))
                    for e, n in zip(ids, rows):
                        if e in computed:
                            fail("%s it %d: expert %d in two batches" % (sc, it, e))
                        computed[e] += n
            if computed != routed:
                fail("%s it %d: rows computed per expert %s != rows routed %s" % (sc, it, dict(computed), dict(routed)))
            if sum(computed.values()) != sum(tokens_of) * topk:
                fail("%s it %d: %d expert rows, expected %d" % (sc, it, sum(computed.values()), sum(tokens_of) * topk))

    # Flows.
    pairs = flow_pairs(ev)
    if not pairs:
        fail("no flows")
    linked = set()
    for fid, s, f in pairs:
        src, dst = enclosing(by_tid, s["tid"], s["ts"]), enclosing(by_tid, f["tid"], f["ts"])
        if src is None or src["name"] != "dispatch":
            fail("flow %s starts on %s" % (fid, src and src["name"]))
            continue
        if dst is None or dst["name"] != "gemm1" or "batch" not in dst["args"]:
            fail("flow %s finishes on %s" % (fid, dst and dst["name"]))
            continue
        if (src["cat"], src["args"]["iteration"]) != (dst["cat"], dst["args"]["iteration"]):
            fail("flow %s crosses calls" % fid)
        if not f["ts"] > s["ts"]:
            fail("flow %s goes back in time" % fid)
        routed = {e for e, n in zip(src["args"]["experts"], src["args"]["rows"]) if n > 0}
        if not routed & set(dst["args"]["experts"]):
            fail("flow %s: batch experts %s, none routed from rank %d (%s)"
                 % (fid, dst["args"]["experts"], rank_of(src["tid"]), sorted(routed)))
        linked.add((src["cat"], src["args"]["iteration"], rank_of(src["tid"]), rank_of(dst["tid"]),
                    dst["args"]["batch"]))
    for (sc, it, src), send in sends.items():
        routed = set(send["args"]["experts"])
        for dst in range(ranks):
            for b, parts in batches[(sc, it, dst)].items():
                if "gemm1" in parts and routed & set(parts["gemm1"]["args"]["experts"]) \
                        and (sc, it, src, dst, b) not in linked:
                    fail("no flow from rank %d's dispatch to rank %d batch %d (%s it %d)" % (src, dst, b, sc, it))

    return finish("moe_trace")


if __name__ == "__main__":
    sys.exit(main(sys.argv))
