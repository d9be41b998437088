#!/usr/bin/env python3
"""Cost model vs measurement for `auto` in an emulated-cluster results folder.

usage: model_error.py RESULTS_DIR [--min-bytes 1048576]

For every size, over the `cdt_*.json` runs of `bench allreduce --algo auto --adaptive-comm`: the
algorithm `auto` ran, the median measured time, the planner's prediction for that algorithm, and
the error (prediction / measurement - 1). Also "auto vs best fixed": the median of `auto` against
the best median of every fixed algorithm from the `cdtall_*.json` runs.
"""
import glob
import json
import os
import statistics
import sys


def main():
    d = sys.argv[1]
    min_bytes = int(sys.argv[sys.argv.index("--min-bytes") + 1]) if "--min-bytes" in sys.argv else 0
    auto, fixed = {}, {}
    for path in sorted(glob.glob(os.path.join(d, "cdt_*.json"))):
        for r in json.load(open(path))["results"]:
            auto.setdefault(r["bytes"], []).append(r)
    for path in sorted(glob.glob(os.path.join(d, "cdtall_*.json"))):
        for r in json.load(open(path))["results"]:
            if r["algo"] != "auto":
                fixed.setdefault(r["bytes"], {}).setdefault(r["algo"], []).append(r["time_us"])
    print("| bytes | auto ran | measured us (median) | predicted us | error | best fixed | best fixed us | auto / best fixed (speed) |")
    print("|---:|---|---:|---:|---:|---|---:|---:|")
    for b in sorted(auto):
        if b < min_bytes:
            continue
        rows = auto[b]
        ran = sorted({r.get("ran", "?") for r in rows})
        meas = statistics.median(r["time_us"] for r in rows)
        preds = [r["predicted_us"] for r in rows if "predicted_us" in r]
        pred = statistics.median(preds) if preds else float("nan")
        best_name, best = min(((a, statistics.median(t)) for a, t in fixed.get(b, {}).items()),
                              key=lambda x: x[1], default=("-", float("nan")))
        print(f"| {b} | {'/'.join(ran)} | {meas:.1f} | {pred:.1f} | {100 * (pred / meas - 1):+.1f}% | "
              f"{best_name} | {best:.1f} | {best / meas:.2f}x |")


if __name__ == "__main__":
    main()
