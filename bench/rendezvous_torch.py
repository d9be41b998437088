#!/usr/bin/env python3
"""torch's c10d rendezvous (torchrun --rdzv-backend c10d: DynamicRendezvousHandler over TCPStore)
with N simulated members, the peer of bench/rendezvous_scale.cc's first round: N threads, one
TCPStore connection each, call next_rendezvous() together; the store is hosted by a child process
(its CPU seconds and peak RSS from /proc, as rendezvous_scale reports ours). Prints one JSON line.

Usage: python3 bench/rendezvous_torch.py [--members N] [--limit SECONDS]
A round that has not formed within --limit is reported as such ("formed": false), not waited for.
"""
import argparse
import json
import multiprocessing
import os
import resource
import socket
import threading
import time


def host_store(port, ready):
    from datetime import timedelta

    from torch.distributed import TCPStore

    store = TCPStore("127.0.0.1", port, is_master=True, timeout=timedelta(seconds=600))
    ready.set()
    while True:
        time.sleep(3600)
    del store


def use_of(pid):
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    cpu = (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    rss = 0.0
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmHWM:"):
                rss = int(line.split()[1]) / 1024.0
    return cpu, rss


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--members", type=int, default=1024)
    ap.add_argument("--limit", type=float, default=300.0)
    args = ap.parse_args()
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    threading.stack_size(512 << 10)

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    ctx = multiprocessing.get_context("spawn")
    ready = ctx.Event()
    server = ctx.Process(target=host_store, args=(port, ready), daemon=True)
    server.start()
    if not ready.wait(60):
        raise SystemExit("rendezvous_torch: the TCPStore process did not start")

    import torch
    from torch.distributed.elastic.rendezvous import RendezvousParameters
    from torch.distributed.elastic.rendezvous.c10d_rendezvous_backend import create_backend
    from torch.distributed.elastic.rendezvous.dynamic_rendezvous import create_handler

    n = args.members
    results, errors = [None] * n, []
    go = threading.Barrier(n + 1)

    def member(i):
        try:
            params = RendezvousParameters(
                backend="c10d", endpoint=f"127.0.0.1:{port}", run_id="scale",
                min_nodes=n, max_nodes=n, is_host="false", join_timeout=str(int(args.limit)),
                last_call_timeout="1", read_timeout="600")
            go.wait()
            backend, store = create_backend(params)
            handler = create_handler(store, backend, params)
            got = handler.next_rendezvous()
            results[i] = (got[1], got[2]) if isinstance(got, tuple) else (got.rank, got.world_size)
        except Exception as e:  # reported below, with how many formed
            errors.append(f"member {i}: {type(e).__name__}: {e}")

    threads = [threading.Thread(target=member, args=(i,), daemon=True) for i in range(n)]
    for t in threads:
        t.start()
    cpu0, _ = use_of(server.pid)
    go.wait()
    t0 = time.monotonic()
    for t in threads:
        t.join(max(0.0, args.limit - (time.monotonic() - t0)))
    seconds = time.monotonic() - t0
    cpu1, rss = use_of(server.pid)
    done = [r for r in results if r is not None]
    formed = (len(done) == n and sorted(r[0] for r in done) == list(range(n))
              and all(r[1] == n for r in done))
    print(json.dumps({
        "store": "torch TCPStore (c10d rendezvous)", "torch": torch.__version__, "members": n,
        "formed": formed, "members_done": len(done), "seconds": round(seconds, 3),
        "store_cpu_s": round(cpu1 - cpu0, 3), "store_peak_rss_mib": round(rss, 1),
        "errors": errors[:3]}))
    server.kill()
    os._exit(0 if formed else 1)


if __name__ == "__main__":
    main()
