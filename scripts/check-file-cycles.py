#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Fails when two or more files of one folder call each other in a circle.

Reads the object files of the library build (CMake's megamoe_objects target), links each undefined
symbol of a file to the file of the same folder that defines it, and reports every strongly connected
group of more than one file. A folder whose files call each other in a circle has no order in which
its ideas can be read, tested or replaced one at a time; the architecture asks for none.

usage: check-file-cycles.py BUILD_DIR [FOLDER ...]   (folders relative to src/, default: every folder
       under src/ops/)
"""
import os
import subprocess
import sys


def symbols(obj):
    out = subprocess.run(["nm", obj], capture_output=True, text=True, check=True).stdout
    defined, undefined = set(), set()
    for line in out.splitlines():
        parts = line.split()
        if len(parts) == 2 and parts[0] == "U":
            undefined.add(parts[1])
        elif len(parts) == 3 and parts[1] in "TDBR":
            defined.add(parts[2])
    return defined, undefined


def cycles(graph):
    """Strongly connected components of more than one node (Tarjan)."""
    index, low, stack, on, out, counter = {}, {}, [], set(), [], [0]

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in graph[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return out


def source_dir(build):
    with open(os.path.join(build, "CMakeCache.txt")) as cache:
        for line in cache:
            if line.startswith("CMAKE_HOME_DIRECTORY:"):
                return line.split("=", 1)[1].strip()
    raise SystemExit("check-file-cycles: CMakeCache.txt names no source directory")


def main():
    if len(sys.argv) < 2:
        print(__doc__, file=sys.stderr)
        return 2
    objdir = os.path.join(sys.argv[1], "CMakeFiles", "megamoe_objects.dir", "src")
    if not os.path.isdir(objdir):
        print(f"check-file-cycles: no object files under {objdir}", file=sys.stderr)
        return 2
    folders = sys.argv[2:] or sorted(
        os.path.join("ops", d) for d in os.listdir(os.path.join(objdir, "ops"))
        if os.path.isdir(os.path.join(objdir, "ops", d)))
    srcdir = source_dir(sys.argv[1])
    bad = 0
    for folder in folders:
        path = os.path.join(objdir, folder)
        # An object whose source is gone (a file moved since the last configure) is not part of the tree.
        objs = sorted(f for f in os.listdir(path) if f.endswith(".o") and
                      os.path.exists(os.path.join(srcdir, "src", folder, f[:-2]))) if os.path.isdir(path) else []
        table = {o[:-2]: symbols(os.path.join(path, o)) for o in objs}
        owner = {s: f for f, (d, _) in table.items() for s in d}
        graph = {f: sorted({owner[s] for s in u if s in owner and owner[s] != f}) for f, (_, u) in table.items()}
        found = cycles(graph)
        for comp in found:
            edges = [f"{a} -> {b}" for a in comp for b in graph[a] if b in comp]
            print(f"src/{folder}: files calling each other in a circle: {', '.join(comp)} ({'; '.join(edges)})")
        bad += len(found)
        print(f"src/{folder}: {len(table)} files, {len(found)} circle(s)")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
