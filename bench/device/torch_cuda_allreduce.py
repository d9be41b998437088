#!/usr/bin/env python3
"""torch.distributed's all_reduce of CUDA tensors on one backend (Gloo's CUDA path: its own
streams, host staging), nccl-tests style: sizes x4 from --min-bytes to --max-bytes, warm-up,
barrier, mean over iterations with torch.cuda.synchronize() before the clock stops, the slowest
rank's time; busbw = algbw * 2(n-1)/n. Ranks share the GPUs round robin (one H200: all on
cuda:0). The reference of issue 43's acceptance (docs/device.md); bench/device/run.sh runs it.

  python3 bench/device/torch_cuda_allreduce.py --backend gloo --nproc-per-node 2 --json out.json
"""
import argparse
import datetime
import json
import os
import sys
import time

import torch
import torch.distributed as dist
import torch.multiprocessing as mp


def iterations(nbytes):
    return max(5, min(200, (256 << 20) // max(nbytes, 1)))


def worker(rank, world, args, queue):
    os.environ["MASTER_ADDR"] = "127.0.0.1"
    os.environ["MASTER_PORT"] = str(args.port)
    device = torch.device("cuda", rank % torch.cuda.device_count())
    torch.cuda.set_device(device)
    dist.init_process_group(args.backend, rank=rank, world_size=world,
                            timeout=datetime.timedelta(seconds=120))
    rows = []
    nbytes = args.min_bytes
    while nbytes <= args.max_bytes:
        n = nbytes // 4
        t = torch.full((n,), float(rank + 1), device=device)
        iters = iterations(nbytes)
        for _ in range(max(2, iters // 5)):
            dist.all_reduce(t)
        torch.cuda.synchronize(device)
        dist.barrier()
        t0 = time.perf_counter()
        for _ in range(iters):
            dist.all_reduce(t)
        torch.cuda.synchronize(device)
        us = torch.tensor([(time.perf_counter() - t0) * 1e6 / iters], dtype=torch.float64)
        dist.all_reduce(us, op=dist.ReduceOp.MAX)
        t.fill_(float(rank + 1))
        dist.all_reduce(t)
        ok = bool(torch.all(t == world * (world + 1) / 2).item())
        algbw = nbytes / us.item() / 1e3
        rows.append({"bytes": nbytes, "time_us": us.item(), "algbw_GBps": algbw,
                     "busbw_GBps": algbw * 2 * (world - 1) / world, "check": "ok" if ok else "WRONG",
                     "iters": iters})
        nbytes *= 4
    if rank == 0:
        queue.put(rows)
    dist.destroy_process_group()


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--backend", default="gloo")
    p.add_argument("--nproc-per-node", type=int, default=2)
    p.add_argument("--min-bytes", type=int, default=64 << 10)
    p.add_argument("--max-bytes", type=int, default=256 << 20)
    p.add_argument("--port", type=int, default=29631)
    p.add_argument("--json")
    args = p.parse_args()
    if not torch.cuda.is_available():
        sys.exit("torch_cuda_allreduce.py: torch sees no CUDA device (needs a GPU and a CUDA build "
                 "of torch)")
    ctx = mp.get_context("spawn")
    queue = ctx.Queue()
    mp.spawn(worker, args=(args.nproc_per_node, args, queue), nprocs=args.nproc_per_node)
    rows = queue.get()
    print(f"# torch {torch.__version__} {args.backend} all_reduce of CUDA tensors, "
          f"{args.nproc_per_node} ranks on {torch.cuda.get_device_name(0)}, f32 sum")
    print(f"{'bytes':>12} {'time_us':>12} {'algbw_GBps':>11} {'busbw_GBps':>11} {'check':>7}")
    for r in rows:
        print(f"{r['bytes']:>12} {r['time_us']:>12.1f} {r['algbw_GBps']:>11.3f} "
              f"{r['busbw_GBps']:>11.3f} {r['check']:>7}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"backend": args.backend, "torch": torch.__version__,
                       "world_size": args.nproc_per_node, "device": "cuda", "results": rows}, f,
                      indent=2)


if __name__ == "__main__":
    main()
