#!/usr/bin/env python3
"""The Markdown tables of docs/benchmarks.md from the JSON lines of `sparsegpu-bench --json PATH`, so
that no figure there is copied by hand.

    scripts/bench_tables.py FILE.jsonl [FILE.jsonl ...] [--family F] [--select KEY=VALUE ...]

--family keeps one family (spamm, smat, msrep, sddmm); --select keeps the lines whose KEY has VALUE
(compared as text, e.g. build=after round=2 for a file of scripts/compare_builds.sh). Only rows
compared with a vendor library and measured ("status": "ok") are shown. SMaT rows give, per value
type and width, the geometric-mean speedup over the fastest cuSPARSE CSR algorithm (lowest in
brackets), f16 by class, and every matrix at n = 128; SMaT rows in 3xTF32 are the type "f32, 3xTF32".
"""
import argparse
import collections
import json
import math
import re


def load(paths, family, selections):
    rows = []
    for path in paths:
        with open(path) as f:
            for line in f:
                if not line.strip():
                    continue
                r = json.loads(line)
                if family and r.get("family") != family:
                    continue
                if any(str(r.get(k)) != v for k, v in selections):
                    continue
                if r.get("family") == "peak" or r.get("status") != "ok" or r.get("speedup") is None:
                    continue
                rows.append(r)
    return rows


def ms(x):
    return f"{x:.3f}" if x >= 0.01 else f"{x:.4f}"


def spamm(rows):
    print("| call | type | input | valid ratio | ours ms | vendor | vendor ms | speedup | error (bound) |")
    print("|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        bound = r.get("error_bound")
        error = f"{r['error']:.2e}" + (f" ({bound:.2e})" if bound is not None else "")
        print(
            f"| {r['op']} | {r['type']} | {r['input'].replace('|', chr(92) + '|')} | {r['valid_ratio']:.3f} | "
            f"{ms(r['ours_ms'])} | {r['vendor_op']} | {ms(r['vendor_ms'])} | {r['speedup']:.2f}× | {error} |"
        )


def msrep(rows):
    print("| call | type | input | devices | ours ms | vendor ms | speedup | GB/s (% of copy) |")
    print("|---|---|---|---|---|---|---|---|")
    for r in rows:
        print(
            f"| {r['op']} | {r['type']} | {r['input']} ({r['shape'].split(' ')[-1]}) | {r['devices']} | "
            f"{ms(r['ours_ms'])} | {ms(r['vendor_ms'])} | {r['speedup']:.2f}× | "
            f"{r['gbps']:.0f} ({r['pct_of_peak']:.0f} %) |"
        )


def sddmm(rows):
    print("| call | type | input | density | ours ms | vendor ms | speedup |")
    print("|---|---|---|---|---|---|---|")
    for r in rows:
        print(
            f"| {r['op']} | {r['type']} | {r['input']} {r['shape']} | {r['density']:.0e} | "
            f"{ms(r['ours_ms'])} | {ms(r['vendor_ms'])} | {r['speedup']:.2f}× |"
        )


def smat(rows):
    rows = [r for r in rows if r["vendor_op"].startswith("cusparse")]
    for r in rows:
        if "3xTF32" in r["op"]:
            r["type"] = "f32, 3xTF32"
    width = lambda r: int(r["shape"].split("n=")[1])
    geomean = lambda v: math.exp(sum(map(math.log, v)) / len(v))
    types = [t for t in ["f16", "bf16", "f32", "f32, 3xTF32", "f64"] if any(r["type"] == t for r in rows)]
    widths = sorted({width(r) for r in rows})
    by_type = collections.defaultdict(list)
    for r in rows:
        by_type[(r["type"], width(r))].append(r["speedup"])
    print("| n | " + " | ".join(types) + " |")
    print("|---" * (len(types) + 1) + "|")
    for n in widths:
        cells = [f"{geomean(v):.2f}× ({min(v):.2f}×)" for t in types for v in [by_type[(t, n)]] if v]
        print(f"| {n} | " + " | ".join(cells) + " |")
    print()
    classes, by_class = [], collections.defaultdict(list)
    for r in rows:
        if r["type"] == "f16":
            classes += [r["class"]] if r["class"] not in classes else []
            by_class[(r["class"], width(r))].append(r["speedup"])
    if classes:
        print("| f16, class | " + " | ".join(f"n = {n}" for n in widths) + " |")
        print("|---" * (len(widths) + 1) + "|")
        for c in classes:
            print(f"| {c} | " + " | ".join(f"{geomean(by_class[(c, n)]):.2f}×" for n in widths) + " |")
        print()
    matrices, cell = [], {}
    for r in rows:
        if width(r) == 128:
            matrices += [r["input"]] if r["input"] not in matrices else []
            cell[(r["input"], r["type"])] = r
    print("| n = 128 | " + " | ".join(types) + " | f16 rows in tiles | f16 analysis |")
    print("|---" * (len(types) + 3) + "|")
    for m in matrices:
        cells = [
            f"{ms(c['ours_ms'])} / {ms(c['vendor_ms'])} ({c['speedup']:.2f}×)" if c else "-"
            for t in types
            for c in [cell.get((m, t))]
        ]
        f16 = cell.get((m, "f16"))
        stored, analysis = "-", "-"
        if f16:
            part = re.search(r"rows in tiles (\d+) \(\d+ tiles \S+, fill ([\d.]+)\), rows in CSR (\d+), reordered (\w+)", f16["note"])
            if part:
                tiles, fill, csr, reordered = part.groups()
                stored = f"{tiles} / {int(tiles) + int(csr)}" + (f", fill {fill}" if tiles != "0" else "")
                stored += ", reordered" if reordered == "true" else ""
            analysis = f"{f16['analysis_ms']:.0f} ms = {f16['analysis_vendor_calls']:.0f} calls"
        print(f"| {m} | " + " | ".join(cells) + f" | {stored} | {analysis} |")


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("files", nargs="+")
    parser.add_argument("--family", choices=["spamm", "smat", "msrep", "sddmm"])
    parser.add_argument("--select", nargs="*", default=[], metavar="KEY=VALUE")
    args = parser.parse_args()
    selections = [tuple(s.split("=", 1)) for s in args.select]
    rows = load(args.files, args.family, selections)
    for name, table in [("spamm", spamm), ("smat", smat), ("msrep", msrep), ("sddmm", sddmm)]:
        family_rows = [r for r in rows if r["family"] == name]
        if family_rows:
            table(family_rows)
            print()


if __name__ == "__main__":
    main()
