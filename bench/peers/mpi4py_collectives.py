#!/usr/bin/python3
"""Open MPI's MPI_Alltoallv (uneven splits), MPI_Reduce_scatter_block (f32 sum) and MPI_Allgather
called from Python through mpi4py on torch tensors (their .numpy() views, no copy): Open MPI's
equivalents as a Python user reaches them, beside torch.distributed's calls on "cdt" and "gloo"
(bench/peers/torch_collectives.py: the same sizes, splits, iterations and timing — warm-up,
barrier, mean over iterations, the slowest rank — and the same JSON). Run under mpirun;
bench/run_collectives_peers.sh does. Debian python3-mpi4py (scripts/install-deps.sh --bench).

  mpirun -np 4 /usr/bin/python3 bench/peers/mpi4py_collectives.py MIN_BYTES MAX_BYTES [JSON]
"""
import json
import os
import sys

import torch
from mpi4py import MPI

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from torch_collectives import OPS, all_to_all_splits, mean_call_us  # noqa: E402


def run_op(comm, op, nbytes):
    rank, world = comm.Get_rank(), comm.Get_size()
    n = max(world, nbytes // 4)
    n -= n % world
    if op == "all_to_all_single":
        send = all_to_all_splits(rank, world, n)
        recv = [all_to_all_splits(p, world, n)[rank] for p in range(world)]
        inp, out = torch.ones(n), torch.empty(sum(recv))
        call = lambda: comm.Alltoallv([inp.numpy(), (send, None), MPI.FLOAT],  # noqa: E731
                                      [out.numpy(), (recv, None), MPI.FLOAT])
    elif op == "reduce_scatter_tensor":
        inp, out = torch.ones(n), torch.empty(n // world)
        call = lambda: comm.Reduce_scatter_block(inp.numpy(), out.numpy(), MPI.SUM)  # noqa: E731
    else:
        inp, out = torch.ones(n // world), torch.empty(n)
        call = lambda: comm.Allgather(inp.numpy(), out.numpy())  # noqa: E731
    us = comm.allreduce(mean_call_us(call, n * 4, comm.Barrier), op=MPI.MAX)
    return n * 4, us


def main():
    min_bytes = int(sys.argv[1]) if len(sys.argv) > 1 else 1 << 10
    max_bytes = int(sys.argv[2]) if len(sys.argv) > 2 else 64 << 20
    torch.set_num_threads(1)
    comm = MPI.COMM_WORLD
    rows = []
    for op in OPS:
        nbytes = min_bytes
        while nbytes <= max_bytes:
            b, us = run_op(comm, op, nbytes)
            rows.append({"op": op, "bytes": b, "time_us": us})
            if comm.Get_rank() == 0:
                print(f"mpi4py {op:24} {b:>10} B {us:12.1f} us", flush=True)
            nbytes *= 4
    if comm.Get_rank() == 0 and len(sys.argv) > 3:
        with open(sys.argv[3], "w") as f:
            json.dump({"peer": "Open MPI from Python (mpi4py)", "world_size": comm.Get_size(),
                       "mpi4py": __import__("mpi4py").__version__, "results": rows}, f, indent=1)


if __name__ == "__main__":
    sys.exit(main())
