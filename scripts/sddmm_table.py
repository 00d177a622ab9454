#!/usr/bin/env python3
"""SDDMM rows of sparsegpu-bench JSON lines as the Markdown tables of docs/benchmarks.md: for one
call, one row per type and density, one column per width k, each cell 'ours ms / vendor ms
(speedup)', then the geometric-mean speedup over the cells. With --dispatch instead: the bench's count
of AUTO against the two forced algorithms (sddmmExecutePlan with and without an algorithm forced),
from the JSON lines of any run.

usage: scripts/sddmm_table.py results.jsonl... [--op sddmmExecutePlan] [--dispatch]
"""
import json
import math
import re
import sys


def algorithm(r):
    """The algorithm a measured call ran, as the bench notes it."""
    return "tiled" if r.get("note", "").startswith("algorithm tiled") else "COO"


def dispatch(rows):
    """As bench/src/sddmm.rs's dispatch_score: AUTO chose the faster forced algorithm or one within
    3 % of it; its time within 3 % of the faster's; its worst ratio to it."""
    planned = [r for r in rows if r.get("family") == "sddmm" and r["op"].startswith("sddmmExecutePlan")]
    planned = [r for r in planned if r.get("ours_ms")]
    cells = chose = as_fast = 0
    worst = 1.0
    for auto in (r for r in planned if r["op"] == "sddmmExecutePlan"):
        case = (auto.get("type"), auto["input"], auto["shape"])
        forced = [r for r in planned if r["op"] != "sddmmExecutePlan" and (r.get("type"), r["input"], r["shape"]) == case]
        if not forced:
            continue
        best = min(r["ours_ms"] for r in forced)
        cells += 1
        chose += any(r["ours_ms"] <= best * 1.03 and algorithm(r) == algorithm(auto) for r in forced)
        as_fast += auto["ours_ms"] <= best * 1.03
        worst = max(worst, auto["ours_ms"] / best)
    print(
        f"dispatch: chose the faster forced algorithm (or one within 3 % of it) in {chose} of {cells} cells; "
        f"as fast as the faster (within 3 %) in {as_fast} of {cells}; at worst {worst:.2f}× its time"
    )


def main(argv):
    if "--dispatch" in argv:
        dispatch([json.loads(line) for path in argv if not path.startswith("--") for line in open(path) if line.strip()])
        return
    op = argv[argv.index("--op") + 1] if "--op" in argv else "sddmmExecutePlan"
    paths = [a for i, a in enumerate(argv) if not a.startswith("--") and (i == 0 or argv[i - 1] != "--op")]
    rows = [json.loads(line) for path in paths for line in open(path) if line.strip()]
    rows = [r for r in rows if r.get("family") == "sddmm" and r["op"] == op and r.get("ours_ms") and r.get("vendor_ms")]
    width = lambda r: int(re.search(r"k=(\d+)", r["shape"]).group(1))
    ks = sorted({width(r) for r in rows})
    cells = {}
    for r in rows:
        cells[(r["type"], float(f"{r['density']:.0e}"), width(r))] = r
    print("| type | density | " + " | ".join(f"k = {k}" for k in ks) + " |")
    print("|---|---|" + "---|" * len(ks))
    for ty, density in sorted({(t, d) for t, d, _ in cells}):
        out = []
        for k in ks:
            r = cells.get((ty, density, k))
            out.append(f"{r['ours_ms']:.3f} / {r['vendor_ms']:.3f} ({r['vendor_ms'] / r['ours_ms']:.2f}×)" if r else "-")
        print(f"| {ty} | {density:.0e} | " + " | ".join(out) + " |")
    speedups = [r["vendor_ms"] / r["ours_ms"] for r in rows]
    if speedups:
        geomean = math.exp(sum(map(math.log, speedups)) / len(speedups))
        print(f"\nGeometric mean {geomean:.2f}× over {len(speedups)} cells, lowest {min(speedups):.2f}×.")


if __name__ == "__main__":
    main(sys.argv[1:])
