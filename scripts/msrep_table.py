#!/usr/bin/env python3
"""MSREP rows of sparsegpu-bench JSON lines as the Markdown tables of docs/benchmarks.md.

First table: one row per matrix, for one partition per device, each type's cell 'ours ms / vendor ms
(speedup)' with the fastest cuSPARSE algorithm and our share of the copy bandwidth, then the geometric
mean and lowest speedup per type. Second table (runs with several partition counts): per matrix and
type, our time for each count and its excess over one partition. Creation from the host CSR (the
note's 'created in') is the last column of the first table.

usage: scripts/msrep_table.py results.jsonl [more.jsonl ...]
"""
import json
import math
import re
import sys


def partitions(r):
    return int(re.search(r"(\d+) partition", r["note"]).group(1))


def created_ms(r):
    found = re.search(r"created in (\d+) ms", r["note"])
    return int(found.group(1)) if found else None


def main(paths):
    rows = [json.loads(line) for path in paths for line in open(path) if line.strip()]
    rows = [r for r in rows if r.get("family") == "msrep" and r.get("ours_ms") and r.get("vendor_ms")]
    cells = {(r["input"], r["type"], r["devices"], partitions(r) // r["devices"]): r for r in rows}
    inputs = list(dict.fromkeys(r["input"] for r in rows))
    types = sorted({r["type"] for r in rows})
    counts = sorted({p for _, _, _, p in cells})

    print("| matrix | nonzeros | " + " | ".join(f"{t} ours / vendor (speedup), % of copy" for t in types) + " | created (f64) |")
    print("|---|---|" + "---|" * len(types) + "---|")
    speedups = {t: [] for t in types}
    for name in inputs:
        out, nnz, created = [], "", ""
        for t in types:
            r = cells.get((name, t, 1, 1))
            if not r:
                out.append("-")
                continue
            nnz = re.search(r"nnz=(\d+)", r["shape"]).group(1)
            s = r["vendor_ms"] / r["ours_ms"]
            speedups[t].append(s)
            pct = f", {r['pct_of_peak']:.0f} %" if r.get("pct_of_peak") else ""
            out.append(f"{r['ours_ms']:.3f} / {r['vendor_ms']:.3f} {r.get('vendor_alg') or ''} ({s:.2f}×){pct}")
            if t == "f64" and created_ms(r) is not None:
                created = f"{created_ms(r)} ms"
        print(f"| {name} | {int(nnz) / 1e6:.1f} M | " + " | ".join(out) + f" | {created} |")
    for t in types:
        s = speedups[t]
        if s:
            geomean = math.exp(sum(map(math.log, s)) / len(s))
            print(f"\n{t}: geometric mean {geomean:.2f}× over {len(s)} matrices, lowest {min(s):.2f}×.", end="")
    print()

    if len(counts) > 1:
        print("\n| matrix | type | " + " | ".join(f"{p} partition(s)" for p in counts) + " |")
        print("|---|---|" + "---|" * len(counts))
        for name in inputs:
            for t in types:
                one = cells.get((name, t, 1, 1))
                if not one:
                    continue
                out = []
                for p in counts:
                    r = cells.get((name, t, 1, p))
                    if not r:
                        out.append("-")
                    elif p == 1:
                        out.append(f"{r['ours_ms']:.3f} ms")
                    else:
                        out.append(f"{r['ours_ms']:.3f} ms ({100 * (r['ours_ms'] / one['ours_ms'] - 1):+.1f} %)")
                print(f"| {name} | {t} | " + " | ".join(out) + " |")


if __name__ == "__main__":
    main(sys.argv[1:])
