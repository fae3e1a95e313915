# SPDX-License-Identifier: Apache-2.0
"""tests/cli/lib/trace_common.py: what the `--trace FILE` checkers (moe_trace.py, dc_trace.py) share: the
failure list and the pairing of flow ends (standard library only)."""
import collections

failures = []
prefix = ["trace"]  # set by the checker: the name its failure lines start with


def fail(msg):
    failures.append(msg)
    if len(failures) <= 20:
        print(prefix[0] + ": " + msg)


def flow_pairs(ev):
    """The flows of events ev as (id, start, finish): each start ("s") must have exactly one finish ("f")
    with its id, name and cat, bound to its enclosing slice ("bp":"e"); every broken id is a failure and
    left out."""
    starts, finishes = collections.defaultdict(list), collections.defaultdict(list)
    for e in ev:
        if e["ph"] == "s":
            starts[e["id"]].append(e)
        elif e["ph"] == "f":
            finishes[e["id"]].append(e)
    if set(starts) != set(finishes):
        fail("flow ids without both ends: %s" % sorted(set(starts) ^ set(finishes))[:10])
    pairs = []
    for fid, ss in starts.items():
        ff = finishes.get(fid, [])
        if len(ss) != 1 or len(ff) != 1:
            fail("flow %s: %d starts, %d finishes" % (fid, len(ss), len(ff)))
            continue
        s, f = ss[0], ff[0]
        if (s["name"], s["cat"]) != (f["name"], f["cat"]) or f.get("bp") != "e":
            fail("flow %s: ends differ in name / cat or the finish is not bound to its enclosing slice" % fid)
        pairs.append((fid, s, f))
    return pairs


def finish(name):
    """The exit status: 1 after a line counting the failures, 0 when there were none."""
    if failures:
        print("%s: %d failure(s)" % (name, len(failures)))
        return 1
    return 0
