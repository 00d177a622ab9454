#!/usr/bin/env python3
"""SpAMM rows of sparsegpu-bench JSON lines (one or more files) as the Markdown tables of
docs/benchmarks.md: per type, one row per N, one column per valid ratio (tau = 0 first), each cell
'ms / speedup over the vendor / fraction of the vendor's rate on the valid work'.

The fraction is (valid ratio x 2N^3 / our time) / (2N^3 / vendor time) = valid ratio x speedup: how
fast the valid block products run compared with the vendor's dense GEMM.

usage: scripts/spamm_table.py results.jsonl [more.jsonl ...] [--devices K]
"""
import json
import sys
from collections import defaultdict


def main(argv):
    paths = [a for a in argv if not a.startswith("--")]
    devices = 1
    if "--devices" in argv:
        devices = int(argv[argv.index("--devices") + 1])
        paths.remove(str(devices))
    rows = defaultdict(dict)  # (type, op, vendor) -> {n: {target: record}}
    targets = set()
    for path in paths:
        for line in open(path):
            r = json.loads(line)
            if r.get("family") != "spamm" or r.get("status") != "ok" or r.get("devices", 1) != devices:
                continue
            n = int(r["shape"].split("=")[1])
            note = r.get("note", "")
            target = 1.0 if r["tau"] == 0 else float(note.split("target ")[1].split(",")[0])
            targets.add(target)
            rows[(r["type"], r["op"], r["vendor_op"])].setdefault(n, {})[target] = r
    order = sorted(targets, reverse=True)
    for (ty, op, vendor), by_n in sorted(rows.items()):
        heads = ["tau = 0" if t == 1.0 else f"{t:.0%}" for t in order]
        print(f"\n{op} ({ty}) vs {vendor}; cell: ms / speedup / fraction of the vendor's rate on the valid work\n")
        print("| N | " + " | ".join(heads) + " |")
        print("|---|" + "---|" * len(heads))
        for n in sorted(by_n):
            cells = []
            for t in order:
                r = by_n[n].get(t)
                if r is None:
                    cells.append("-")
                    continue
                fraction = r["valid_ratio"] * r["speedup"]
                cells.append(f"{r['ours_ms']:.3g} / {r['speedup']:.2f}x / {fraction:.2f} (vr {r['valid_ratio']:.3f})")
            print(f"| {n} | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main(sys.argv[1:])
