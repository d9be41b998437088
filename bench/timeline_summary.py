#!/usr/bin/env python3
"""What a `train --timeline FILE` trace says about where a synchronous step loses time.

Per rank: the percentiles of its compute (forward without the waits inside it, and backward),
the exposed wait per bucket as a distribution (a median of 0 with a mean of milliseconds is a
straggler tail, not a slow network), and each bucket's span on its channel. Then the steps whose
wait was longest, with how far each rank's compute of that step and the one before it was above
that rank's median: the rank whose compute ran long is the straggler the others waited for.

    python3 bench/timeline_summary.py TRACE.json [--from-step 100] [--worst 5] [--json OUT]

The trace format is docs/training.md ("Timeline"). Used for docs/benchmarks.md ("The peer on the
same one-core nodes").
"""
import argparse
import json
import statistics
import sys


def percentiles(values):
    s = sorted(values)
    if not s:
        return {}
    at = lambda q: s[min(len(s) - 1, int(q * len(s)))]
    return {"p10": at(0.1), "p50": at(0.5), "p90": at(0.9), "max": s[-1],
            "mean": statistics.fmean(s)}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("trace")
    ap.add_argument("--from-step", type=int, default=100, help="leave out the steps before (warm-up)")
    ap.add_argument("--worst", type=int, default=5, help="steps with the longest wait to list")
    ap.add_argument("--json", help="write the summary here too")
    a = ap.parse_args()
    try:
        with open(a.trace) as f:
            doc = json.load(f)
    except (OSError, ValueError) as e:
        sys.exit(f"timeline_summary: {a.trace}: {e}")
    events = [e for e in (doc.get("traceEvents", []) if isinstance(doc, dict) else doc)
              if e.get("ph") == "X" and isinstance(e.get("dur"), (int, float))]
    ranks = sorted({e["pid"] for e in events})
    # Per rank and step: forward (its waits taken out), backward, and the waits of that forward.
    step_of = {}  # (rank, step) -> {"forward": ms, "backward": ms, "wait": ms}
    spans = {r: sorted((e for e in events if e["pid"] == r and e["tid"] == 0), key=lambda e: e["ts"])
             for r in ranks}
    for r in ranks:
        forward = None
        for e in spans[r]:
            name, ms = e["name"], e["dur"] / 1e3
            if name in ("forward", "backward"):
                step = int(e.get("args", {}).get("step", -1))
                row = step_of.setdefault((r, step), {"forward": 0.0, "backward": 0.0, "wait": 0.0})
                row[name] += ms
                forward = (row, e["ts"], e["ts"] + e["dur"]) if name == "forward" else None
            elif name.startswith("wait") and forward and forward[1] <= e["ts"] < forward[2]:
                forward[0]["wait"] += ms
                forward[0]["forward"] -= ms
                forward[0].setdefault("waits", {})[name] = forward[0].get("waits", {}).get(name, 0) + ms
    kept = {k: v for k, v in step_of.items() if k[1] >= a.from_step}
    if not kept:
        sys.exit(f"timeline_summary: {a.trace}: no steps from {a.from_step} (--timeline-steps too few?)")
    out = {"trace": a.trace, "from_step": a.from_step, "ranks": {}}
    for r in ranks:
        rows = [v for (rr, _), v in kept.items() if rr == r]
        buckets = {}
        for e in events:
            if e["pid"] == r and e["tid"] != 0 and e["name"].startswith("bucket"):
                buckets.setdefault(e["name"], []).append(e["dur"] / 1e3)
        # Every step counts for every bucket waited on in any step (0 where it did not wait).
        names = sorted({w for v in rows for w in v.get("waits", {})})
        waits = {name: [v.get("waits", {}).get(name, 0.0) for v in rows] for name in names}
        out["ranks"][r] = {
            "steps": len(rows),
            "forward_ms": percentiles([v["forward"] for v in rows]),
            "backward_ms": percentiles([v["backward"] for v in rows]),
            "wait_ms": percentiles([v["wait"] for v in rows]),
            "steps_waiting_over_5ms": sum(v["wait"] > 5 for v in rows),
            "wait_per_bucket_ms": {k: percentiles(w) for k, w in waits.items()},
            "bucket_span_ms": {k: percentiles(d) for k, d in sorted(buckets.items())},
        }
    median = {(r, part): out["ranks"][r][part + "_ms"]["p50"] for r in ranks for part in ("forward", "backward")}
    worst = sorted(kept.items(), key=lambda kv: -kv[1]["wait"])[:a.worst]
    out["worst"] = []
    for (r, step), v in worst:
        excess = {}
        for q in ranks:
            ms = 0.0
            for s in (step - 1, step):  # the waited-for bucket was computed in the step before
                row = step_of.get((q, s))
                if row:
                    ms += sum(row[p] - median[(q, p)] for p in ("forward", "backward"))
            excess[q] = round(ms, 1)
        out["worst"].append({"rank": r, "step": step, "wait_ms": round(v["wait"], 1),
                             "compute_over_median_ms_by_rank": excess})

    for r in ranks:
        s = out["ranks"][r]
        fmt = lambda p: " / ".join(f"{p[k]:.1f}" for k in ("p10", "p50", "p90", "max"))
        print(f"rank {r} ({s['steps']} steps from {a.from_step}), ms p10 / p50 / p90 / max:")
        print(f"  forward {fmt(s['forward_ms'])}   backward {fmt(s['backward_ms'])}")
        print(f"  wait    {fmt(s['wait_ms'])}   mean {s['wait_ms']['mean']:.2f}; "
              f"{s['steps_waiting_over_5ms']} step(s) waited > 5 ms")
        for k, p in s["wait_per_bucket_ms"].items():
            print(f"    {k:<16} {fmt(p)}   mean {p['mean']:.2f}")
        for k, p in s["bucket_span_ms"].items():
            print(f"    span {k:<11} {fmt(p)}")
    print("longest waits (compute of that step and the one before, above each rank's median):")
    for w in out["worst"]:
        by = ", ".join(f"rank {q} {ms:+.1f} ms" for q, ms in w["compute_over_median_ms_by_rank"].items())
        print(f"  step {w['step']} rank {w['rank']} waited {w['wait_ms']:.1f} ms: {by}")
    if a.json:
        with open(a.json, "w") as f:
            json.dump(out, f, indent=1)


if __name__ == "__main__":
    main()
