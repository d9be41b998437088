#!/usr/bin/python3
"""The seed's second step: train your own model with gradient compression that adapts to the
job — a one-line change to a DDP script.

  cann-dist-train launch --nproc-per-node 2 -- /usr/bin/python3 examples/python/step2_compression.py

GradientCompressor("adaptive") is cann_dist.hooks.compress("adaptive"): every --interval steps
each gradient bucket goes uncompressed or with PowerSGD, from the phase of training and how
communication-bound the job measures (on a fast link it may choose to send uncompressed).
"""
import argparse
import json
import os
import sys
import time

import torch
import torch.distributed as dist
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import fashion_mnist  # noqa: E402

from cann.distributed import GradientCompressor  # noqa: E402


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--steps", type=int, default=200)
    p.add_argument("--batch-size", type=int, default=64, help="per rank")
    p.add_argument("--method", default="adaptive", help="adaptive, powersgd, topk, int8, fp16, ...")
    p.add_argument("--interval", type=int, default=50, help="adaptive: steps between decisions")
    p.add_argument("--json", help="rank 0 writes the result here")
    a = p.parse_args()
    torch.set_num_threads(1)
    dist.init_process_group("cdt")
    rank, world = dist.get_rank(), dist.get_world_size()
    torch.manual_seed(1)
    images, labels = fashion_mnist.load("train")
    model = torch.nn.parallel.DistributedDataParallel(fashion_mnist.SmallCnn())
    options = {"interval": a.interval} if a.method == "adaptive" else {}
    compressor = GradientCompressor(a.method, **options)
    compressor.register(model)                       # the one line
    opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    g = torch.Generator().manual_seed(1)
    start = time.perf_counter()
    for step in range(a.steps):
        idx = torch.randint(0, len(labels), (world, a.batch_size), generator=g)[rank]
        opt.zero_grad()
        loss = F.cross_entropy(model(images[idx]), labels[idx])
        loss.backward()
        opt.step()
    wall = time.perf_counter() - start
    if rank == 0:
        test_images, test_labels = fashion_mnist.load("test")
        result = {"steps": a.steps, "world_size": world, "samples_per_s": a.steps * a.batch_size * world / wall,
                  "final_loss": loss.item(),
                  "test_accuracy": fashion_mnist.accuracy(model.module, test_images, test_labels),
                  "decisions": compressor.decisions() if a.method == "adaptive" else []}
        print(json.dumps(result))
        if a.json:
            with open(a.json, "w") as f:
                json.dump(result, f, indent=1)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
