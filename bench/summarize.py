#!/usr/bin/env python3
"""Medians of the allreduce benchmark repetitions in RESULTS_DIR, side by side with the peers.

usage: summarize.py RESULTS_DIR [--docs docs/benchmarks.md] [--metric busbw_GBps|algbw_GBps]

Prints a markdown table: per message size, the median busbw (GB/s, nccl-tests definition) of every
cann-dist-train algorithm and every peer, and the ratio of our `auto` (run on its own, like each peer) to the best TCP peer
(Open MPI's TCP BTL, Gloo ring_chunked / halving_doubling). Open MPI's shared-memory default is shown
for reference only: it does not use the network at all. With --docs, replaces the section between
the markers in that file.
"""
import glob
import json
import os
import statistics
import sys

BEGIN = "<!-- allreduce-peers:begin -->"
END = "<!-- allreduce-peers:end -->"


def load(results_dir, metric):
    series = {}  # name -> bytes -> [busbw]
    for path in sorted(glob.glob(os.path.join(results_dir, "*.json"))):
        base = os.path.basename(path).rsplit("_", 1)[0]
        with open(path) as f:
            doc = json.load(f)
        for r in doc["results"]:
            if base == "cdtall":  # every algorithm, one invocation; `auto` comes from its own runs
                if r["algo"] == "auto":
                    continue
                name = "cdt_" + r["algo"]
            elif base == "cdt":
                name = "cdt_" + r["algo"]
            elif base == "cdttcp":  # `auto` with CDT_SHM=0
                name = "cdt_tcp_auto"
            else:
                name = base
            series.setdefault(name, {}).setdefault(r["bytes"], []).append(r[metric])
    return series


def human(n):
    for unit, size in (("M", 1 << 20), ("K", 1 << 10)):
        if n >= size and n % size == 0:
            return f"{n // size}{unit}"
    return str(n)


def main():
    if len(sys.argv) < 2:
        print(__doc__)
        return 2
    results_dir = sys.argv[1]
    metric = sys.argv[sys.argv.index("--metric") + 1] if "--metric" in sys.argv else "busbw_GBps"
    series = load(results_dir, metric)
    reps = len(glob.glob(os.path.join(results_dir, "cdt_*.json")))
    ours = [n for n in ("cdt_ring", "cdt_rd", "cdt_rhd", "cdt_tree", "cdt_hier", "cdt_tcp_auto", "cdt_auto")
            if n in series]
    tcp_peers = [n for n in ("mpi_tcp", "gloo_ring_chunked", "gloo_halving_doubling") if n in series]
    fixed = [n for n in ours if n not in ("cdt_auto", "cdt_tcp_auto")]
    ref = [n for n in ("mpi_shm",) if n in series]
    sizes = sorted(series.get("cdt_auto", {}).keys())
    cols = ours + tcp_peers + ref
    lines = [f"Median {metric.split('_')[0]} in GB/s over {reps} repetition(s), results in `{results_dir}`.", "",
             "| bytes | " + " | ".join(cols) +
             " | auto / best TCP peer | auto / best fixed | auto / mpi_shm | auto / tcp_auto |",
             "|---:|" + "---:|" * len(cols) + "---:|---:|---:|---:|"]
    worst_shm, worst_tcp = None, None
    worst_big, worst_small = None, None
    for b in sizes:
        med = {n: statistics.median(series[n][b]) for n in cols if b in series[n]}
        best_peer = max((med[n] for n in tcp_peers if n in med), default=None)
        ratio = med["cdt_auto"] / best_peer if best_peer else None
        if ratio is not None:
            if b >= 256 << 10:
                worst_big = ratio if worst_big is None else min(worst_big, ratio)
            else:
                worst_small = ratio if worst_small is None else min(worst_small, ratio)
        cells = [f"{med[n]:.3f}" if n in med else "-" for n in cols]
        best_fixed = max((med[n] for n in fixed if n in med), default=None)
        vs_fixed = f"{med['cdt_auto'] / best_fixed:.2f}x" if best_fixed else "-"
        vs = {}
        for peer in ("mpi_shm", "cdt_tcp_auto"):
            vs[peer] = med["cdt_auto"] / med[peer] if peer in med and med[peer] > 0 else None
        if vs["mpi_shm"] is not None:
            worst_shm = vs["mpi_shm"] if worst_shm is None else min(worst_shm, vs["mpi_shm"])
        if vs["cdt_tcp_auto"] is not None and (1 << 20) <= b <= (16 << 20):
            worst_tcp = vs["cdt_tcp_auto"] if worst_tcp is None else min(worst_tcp, vs["cdt_tcp_auto"])
        cell = lambda v: f"{v:.2f}x" if v is not None else "-"
        lines.append(f"| {human(b)} | " + " | ".join(cells) +
                     (f" | {ratio:.2f}x" if ratio else " | -") + f" | {vs_fixed} | " +
                     f"{cell(vs['mpi_shm'])} | {cell(vs['cdt_tcp_auto'])} |")
    lines.append("")
    if worst_big is not None:
        lines.append(f"Lowest auto / best-TCP-peer ratio from 256 KiB up: **{worst_big:.2f}x**; "
                     f"below 256 KiB: **{worst_small:.2f}x**.")
    if worst_shm is not None:
        lines.append(f"Lowest auto / Open MPI default (shared memory): **{worst_shm:.2f}x**.")
    if worst_tcp is not None:
        lines.append(f"Lowest auto / our TCP-only auto from 1 to 16 MiB: **{worst_tcp:.2f}x**.")
    table = "\n".join(lines)
    print(table)
    if "--docs" in sys.argv:
        path = sys.argv[sys.argv.index("--docs") + 1]
        text = open(path).read() if os.path.exists(path) else ""
        if BEGIN in text and END in text:
            head, rest = text.split(BEGIN, 1)
            _, tail = rest.split(END, 1)
            text = head + BEGIN + "\n" + table + "\n" + END + tail
        else:
            text += "\n" + BEGIN + "\n" + table + "\n" + END + "\n"
        with open(path, "w") as f:
            f.write(text)
        print(f"updated {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
