"""FSDP of a small transformer on CPU tensors, the same script on "gloo" and "cdt" (only --backend
changes): training throughput and the loss curve. Started by bench/run_fsdp_peers.sh, which runs
it under torch.distributed.run (PyTorch 2.x: FSDP on cdt needs it).

FullyShardedDataParallel, FULL_SHARD, one unit per encoder layer: each step all-gathers every
layer's parameters (forward, and again in backward) and reduce-scatters its gradients. Each rank
trains on its share of a fixed-seed synthetic batch (next-token-like: the label is the sequence's
first token), so the loss curve is the same on every backend up to rounding."""
import argparse
import json
import os
import time

import torch
import torch.distributed as dist
from torch.distributed.fsdp import FullyShardedDataParallel, ShardingStrategy
from torch.distributed.fsdp.wrap import ModuleWrapPolicy

import cann_dist  # noqa: F401  (registers "cdt")


class Transformer(torch.nn.Module):
    def __init__(self, vocab, width, layers):
        super().__init__()
        self.embed = torch.nn.Embedding(vocab, width)
        layer = torch.nn.TransformerEncoderLayer(width, 8, 4 * width, dropout=0.0, batch_first=True)
        self.encoder = torch.nn.TransformerEncoder(layer, layers, enable_nested_tensor=False)
        self.head = torch.nn.Linear(width, vocab)

    def forward(self, x):
        return self.head(self.encoder(self.embed(x)).mean(dim=1))


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--backend", required=True)
    p.add_argument("--steps", type=int, default=30)
    p.add_argument("--warmup", type=int, default=3)
    p.add_argument("--width", type=int, default=256)
    p.add_argument("--layers", type=int, default=4)
    p.add_argument("--batch-per-rank", type=int, default=8)
    p.add_argument("--seq", type=int, default=32)
    p.add_argument("--json", required=True)
    a = p.parse_args()
    torch.set_num_threads(int(os.environ.get("OMP_NUM_THREADS", "1")))
    dist.init_process_group(a.backend)
    rank, world = dist.get_rank(), dist.get_world_size()
    torch.manual_seed(0)
    vocab = 1000
    model = Transformer(vocab, a.width, a.layers)
    params = sum(t.numel() for t in model.parameters())
    model = FullyShardedDataParallel(model, sharding_strategy=ShardingStrategy.FULL_SHARD,
                                     device_id=torch.device("cpu"),
                                     auto_wrap_policy=ModuleWrapPolicy({torch.nn.TransformerEncoderLayer}))
    opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    b = a.batch_per_rank
    losses, start = [], None
    for step in range(a.warmup + a.steps):
        if step == a.warmup:
            dist.barrier()
            start = time.perf_counter()
        g = torch.Generator().manual_seed(1000 + step % 4)
        x = torch.randint(0, vocab, (b * world, a.seq), generator=g)
        loss = torch.nn.functional.cross_entropy(model(x[rank * b:(rank + 1) * b]), x[rank * b:(rank + 1) * b, 0])
        opt.zero_grad()
        loss.backward()
        opt.step()
        mean = loss.detach().clone()
        dist.all_reduce(mean)
        losses.append(mean.item() / world)
    dist.barrier()
    seconds = time.perf_counter() - start
    if rank == 0:
        with open(a.json, "w") as f:
            json.dump({"backend": a.backend, "world": world, "parameters": params,
                       "steps": a.steps, "seconds": seconds, "steps_per_s": a.steps / seconds,
                       "samples_per_s": a.steps * b * world / seconds, "losses": losses,
                       "torch": torch.__version__}, f)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
