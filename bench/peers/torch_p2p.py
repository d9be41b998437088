#!/usr/bin/python3
"""torch.distributed send/recv between two ranks on one backend ("cdt" or "gloo"): ping-pong,
sizes x16 from --min-bytes to --max-bytes, with tag 0 and a named source, with tag 3, and with a
receive from any source; one-way time = round trip / 2 (the OSU latency test's convention),
median of --reps timed loops after a warm-up. bench/run_p2p_peers.sh runs both backends
side by side. Debian python3-torch; /usr/bin/python3.

  /usr/bin/python3 bench/peers/torch_p2p.py --backend cdt --json out.json"""
import argparse
import datetime
import json
import os
import statistics
import sys
import time

import torch
import torch.distributed as dist
import torch.multiprocessing as mp

MODES = ("tag0", "tag3", "any_source")


def iterations(nbytes):
    return max(4, min(400, (64 << 20) // max(nbytes, 1)))


def pingpong(rank, t, mode, iters):
    tag = 3 if mode == "tag3" else 0
    peer = 1 - rank
    for _ in range(iters):
        if rank == 0:
            dist.send(t, peer, tag=tag)
            if mode == "any_source":
                dist.recv(t, tag=tag)
            else:
                dist.recv(t, peer, tag=tag)
        else:
            if mode == "any_source":
                dist.recv(t, tag=tag)
            else:
                dist.recv(t, peer, tag=tag)
            dist.send(t, peer, tag=tag)


def worker(rank, port, args):
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), RANK=str(rank),
                      WORLD_SIZE="2", LOCAL_RANK=str(rank), LOCAL_WORLD_SIZE="2")
    torch.set_num_threads(1)
    if args.backend == "cdt":
        import cann_dist  # noqa: F401  (registers "cdt")
    dist.init_process_group(args.backend, timeout=datetime.timedelta(seconds=120))
    rows = []
    for mode in MODES:
        nbytes = args.min_bytes
        while nbytes <= args.max_bytes:
            t = torch.ones(max(1, nbytes // 4))
            iters = iterations(nbytes)
            pingpong(rank, t, mode, max(2, iters // 4))
            samples = []
            for _ in range(args.reps):
                dist.barrier()
                t0 = time.perf_counter()
                pingpong(rank, t, mode, iters)
                samples.append((time.perf_counter() - t0) * 1e6 / iters / 2)
            us = statistics.median(samples)
            b = t.numel() * 4
            rows.append({"mode": mode, "bytes": b, "one_way_us": us, "gbps": b / us / 1e3})
            if rank == 0:
                print(f"{args.backend:5} {mode:10} {b:>10} B {us:10.1f} us {b / us / 1e3:8.3f} GB/s",
                      flush=True)
            nbytes *= 16
    if rank == 0 and args.json:
        with open(args.json, "w") as f:
            json.dump({"peer": args.backend, "torch": torch.__version__, "results": rows}, f,
                      indent=1)
    dist.destroy_process_group()


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--backend", default="cdt", choices=("cdt", "gloo"))
    p.add_argument("--min-bytes", type=int, default=4)
    p.add_argument("--max-bytes", type=int, default=64 << 20)
    p.add_argument("--reps", type=int, default=5)
    p.add_argument("--port", type=int, default=29631)
    p.add_argument("--json")
    args = p.parse_args()
    mp.start_processes(worker, args=(args.port, args), nprocs=2, start_method="spawn")


if __name__ == "__main__":
    sys.exit(main())
