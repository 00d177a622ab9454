#!/usr/bin/env python3
"""SDDMM rows of sparsegpu-bench JSON lines as the Markdown tables of docs/benchmarks.md: for one
call, one row per type and density, one column per width k, each cell 'ours ms / vendor ms
(speedup)', then the geometric-mean speedup over the cells.

usage: scripts/sddmm_table.py results.jsonl [--op sddmmExecutePlan]
"""
import json
import math
import re
import sys


def main(argv):
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
