#!/usr/bin/env python3
"""Turns the JSON lines of `sparsegpu-bench --json PATH` into one PNG per family: our speedup over
the vendor library against density (SMaT, MSREP, SDDMM) or valid ratio (SpAMM), one series per
operation, vendor call, value type and device count. Rows that did not run are left out and counted.

    python3 scripts/plot_bench.py results.jsonl [more.jsonl ...] [--out DIR] [--select KEY=VALUE ...]
"""
import argparse
import collections
import json
import os
import sys


def load(paths):
    rows = []
    for path in paths:
        with open(path) as f:
            for number, line in enumerate(f, 1):
                line = line.strip()
                if not line:
                    continue
                try:
                    rows.append(json.loads(line))
                except json.JSONDecodeError as e:
                    sys.exit(f"{path}:{number}: not JSON: {e}")
    return rows


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("jsonl", nargs="+")
    parser.add_argument("--out", default=".", help="directory for the PNG files (default: here)")
    parser.add_argument(
        "--select", nargs="*", default=[], metavar="KEY=VALUE", help="keep the lines whose KEY has VALUE (as text)"
    )
    args = parser.parse_args()
    selections = [tuple(s.split("=", 1)) for s in args.select]
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        sys.exit("plot_bench.py needs matplotlib (pip install matplotlib)")

    rows = [
        r
        for r in load(args.jsonl)
        if r.get("family") != "peak" and all(str(r.get(k)) == v for k, v in selections)
    ]
    os.makedirs(args.out, exist_ok=True)
    families = collections.OrderedDict()
    for r in rows:
        families.setdefault(r["family"], []).append(r)
    for family, items in families.items():
        x_key = "valid_ratio" if family == "spamm" else "density"
        series = collections.OrderedDict()
        skipped = 0
        for r in items:
            if r.get("speedup") is None or r.get(x_key) is None:
                skipped += 1
                continue
            label = f'{r["op"]} vs {r["vendor_op"]} ({r["type"]}'
            label += f', {r["devices"]} GPUs)' if family == "msrep" else ")"
            if family in ("spamm", "sddmm"):
                label += f' {r["input"]}'
            series.setdefault(label, []).append((r[x_key], r["speedup"], r.get("status")))
        fig, ax = plt.subplots(figsize=(9, 5.5))
        for label, points in series.items():
            points.sort()
            xs, ys = [p[0] for p in points], [p[1] for p in points]
            ax.plot(xs, ys, marker="o", label=label)
            for x, y, status in points:
                if status == "mismatch":
                    ax.annotate("mismatch", (x, y), color="red", fontsize=7)
        ax.axhline(1.0, color="gray", linewidth=0.8, linestyle="--")
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlabel("valid ratio (block products performed)" if family == "spamm" else "density nnz / (rows·cols)")
        ax.set_ylabel("speedup over the vendor (vendor ms / ours ms)")
        gpu = items[0].get("gpu", "")
        date = items[0].get("date", "")[:10]
        title = f"{family}: libsparsegpu vs vendor on {gpu}, {date}"
        if skipped:
            title += f"\n({skipped} measurement(s) without a speedup left out)"
        ax.set_title(title, fontsize=10)
        if series:
            ax.legend(fontsize=7)
        else:
            ax.text(0.5, 0.5, "no measurement with a speedup", ha="center", va="center", transform=ax.transAxes)
        path = os.path.join(args.out, f"bench_{family}.png")
        fig.tight_layout()
        fig.savefig(path, dpi=120)
        plt.close(fig)
        print(f"{path}: {sum(len(p) for p in series.values())} point(s), {skipped} left out")


if __name__ == "__main__":
    main()
