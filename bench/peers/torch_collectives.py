#!/usr/bin/python3
"""torch.distributed's all_to_all_single (uneven splits), reduce_scatter_tensor and
all_gather_into_tensor on one backend ("cdt" or "gloo"), sizes x4 from --min-bytes to --max-bytes
(each rank's input), in the nccl-tests manner: warm-up, barrier, mean over iterations, the slowest
rank's time. bench/peers/mpi_collectives.cc does the same with Open MPI's equivalents;
bench/run_collectives_peers.sh runs them side by side. Debian python3-torch; /usr/bin/python3.

  /usr/bin/python3 bench/peers/torch_collectives.py --backend cdt --nproc-per-node 4 --json out.json

Uneven splits: rank r sends peer p a share of its input proportional to 1 + (r + p) % world
(all_to_all_splits below; the MPI peer computes the same)."""
import argparse
import datetime
import json
import os
import sys
import time

import torch
import torch.distributed as dist
import torch.multiprocessing as mp

OPS = ("all_to_all_single", "reduce_scatter_tensor", "all_gather_into_tensor")


def iterations(nbytes):
    return max(5, min(2000, (256 << 20) // max(nbytes, 1) // 4))


def mean_call_us(call, nbytes, barrier):
    """This rank's mean µs per call of `call` over iterations(nbytes) calls, after a warm-up and
    `barrier` (every peer times alike; the caller takes the slowest rank's)."""
    iters = iterations(nbytes)
    for _ in range(max(2, iters // 5)):
        call()
    barrier()
    t0 = time.perf_counter()
    for _ in range(iters):
        call()
    return (time.perf_counter() - t0) * 1e6 / iters


def all_to_all_splits(rank, world, n):
    """Elements rank `rank` sends to each peer out of n: weights 1 + (rank + p) % world, the
    remainder to the last peer."""
    w = [1 + (rank + p) % world for p in range(world)]
    s = [n * x // sum(w) for x in w]
    s[-1] += n - sum(s)
    return s


def run_op(op, rank, world, nbytes):
    n = max(world, nbytes // 4)
    n -= n % world
    if op == "all_to_all_single":
        send = all_to_all_splits(rank, world, n)
        recv = [all_to_all_splits(p, world, n)[rank] for p in range(world)]
        inp, out = torch.ones(n), torch.empty(sum(recv))
        call = lambda: dist.all_to_all_single(out, inp, recv, send)  # noqa: E731
    elif op == "reduce_scatter_tensor":
        inp, out = torch.ones(n), torch.empty(n // world)
        call = lambda: dist.reduce_scatter_tensor(out, inp)  # noqa: E731
    elif op == "all_gather_into_tensor":
        inp, out = torch.ones(n // world), torch.empty(n)
        call = lambda: dist.all_gather_into_tensor(out, inp)  # noqa: E731
    else:  # "all_gather (list)": what a backend without all_gather_into_tensor offers instead
        inp, outs = torch.ones(n // world), [torch.empty(n // world) for _ in range(world)]
        call = lambda: dist.all_gather(outs, inp)  # noqa: E731
    us = torch.tensor([mean_call_us(call, n * 4, dist.barrier)], dtype=torch.float64)
    dist.all_reduce(us, op=dist.ReduceOp.MAX)
    return n * 4, us.item()


def worker(rank, world, port, args):
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), RANK=str(rank),
                      WORLD_SIZE=str(world), LOCAL_RANK=str(rank), LOCAL_WORLD_SIZE=str(world))
    torch.set_num_threads(1)
    if args.backend == "cdt":
        import cann_dist  # noqa: F401  (registers "cdt")
    dist.init_process_group(args.backend, timeout=datetime.timedelta(seconds=120))
    rows = []
    unsupported = {}
    for op in OPS:
        nbytes = args.min_bytes
        while nbytes <= args.max_bytes:
            try:
                b, us = run_op(op, rank, world, nbytes)
            except RuntimeError as e:  # refused before any traffic, alike on every rank
                unsupported[op] = str(e)
                if rank == 0:
                    print(f"{args.backend:5} {op:24} not supported: {e}", flush=True)
                if op == "all_gather_into_tensor":  # measure the list form in its place
                    unsupported[op] += "; measured as all_gather (list) instead"
                    op = "all_gather (list)"
                    continue
                break
            rows.append({"op": OPS[2] if op.startswith("all_gather (") else op, "bytes": b,
                         "time_us": us})
            if rank == 0:
                print(f"{args.backend:5} {op:24} {b:>10} B {us:12.1f} us", flush=True)
            nbytes *= 4
    if rank == 0 and args.json:
        with open(args.json, "w") as f:
            json.dump({"peer": args.backend, "world_size": world, "torch": torch.__version__,
                       "results": rows, "unsupported": unsupported}, f, indent=1)
    dist.destroy_process_group()


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--backend", default="cdt", choices=("cdt", "gloo"))
    p.add_argument("--nproc-per-node", type=int, default=4)
    p.add_argument("--min-bytes", type=int, default=1 << 10)
    p.add_argument("--max-bytes", type=int, default=64 << 20)
    p.add_argument("--port", type=int, default=29611)
    p.add_argument("--json")
    args = p.parse_args()
    mp.start_processes(worker, args=(args.nproc_per_node, args.port, args),
                       nprocs=args.nproc_per_node, start_method="spawn")


if __name__ == "__main__":
    sys.exit(main())
