#!/usr/bin/python3
"""PyTorch DDP (Gloo backend, or --backend cdt: the engine's) baseline for `cann-dist-train train`: the same cnn, the same global
data order (the GlobalSampler permutation, re-implemented below), per-rank batch, optimizer, LR
schedule and steps. Debian python3-torch 1.13; run with /usr/bin/python3.

  /usr/bin/python3 bench/peers/ddp_baseline.py --nproc-per-node 2 --steps 200 --batch-size 64 \
      --json ddp.json
  # on the emulated cluster (one process per node): CDT_NNODES / CDT_NODE_RANK / CDT_RDZV_ENDPOINT
  # come from tools/emulate-cluster; GLOO_SOCKET_IFNAME=eth0 is set for the namespaces.

Writes world_size, samples, steps, wall_s, samples_per_s, final_loss, loss_curve, test_accuracy,
backward_s, params on rank 0 (the same keys as `train --json`, where they exist).
"""
import argparse
import datetime
import gzip
import json
import math
import os
import struct
import sys
import time

import numpy as np
import torch
import torch.distributed as dist
import torch.multiprocessing as mp
import torch.nn as nn
import torch.nn.functional as F
from torch.distributed.algorithms.ddp_comm_hooks import default_hooks
from torch.distributed.algorithms.ddp_comm_hooks import powerSGD_hook

MASK = (1 << 64) - 1


def splitmix64(state):
    state = (state + 0x9E3779B97F4A7C15) & MASK
    z = state
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & MASK
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & MASK
    return state, z ^ (z >> 31)


def permutation(n, seed, epoch):
    """src/train/global_sampler.cc: Fisher-Yates over SplitMix64 with rejection sampling."""
    perm = list(range(n))
    state = ((seed * 0x100000001B3) ^ ((epoch + 1) * 0x9E3779B97F4A7C15)) & MASK
    for i in range(n, 1, -1):
        limit = MASK - (MASK % i)
        while True:
            state, x = splitmix64(state)
            if x < limit:
                break
        j = x % i
        perm[i - 1], perm[j] = perm[j], perm[i - 1]
    return perm


def load_idx(path):
    with gzip.open(path, "rb") if path.endswith(".gz") else open(path, "rb") as f:
        data = f.read()
    magic = struct.unpack(">I", data[:4])[0]
    dims = struct.unpack(">" + "I" * (magic & 0xFF), data[4:4 + 4 * (magic & 0xFF)])
    return np.frombuffer(data, dtype=np.uint8, offset=4 + 4 * len(dims)).reshape(dims)


def find(d, stem):
    for suffix in (".gz", ""):
        if os.path.exists(os.path.join(d, stem + suffix)):
            return os.path.join(d, stem + suffix)
    sys.exit(f"ddp_baseline: no {stem}[.gz] in {d}; install dataset-fashion-mnist")


class Cnn(nn.Module):
    """The same network as src/train/models.cc (421,642 parameters)."""

    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(1, 32, 3, padding=1)
        self.conv2 = nn.Conv2d(32, 64, 3, padding=1)
        self.fc1 = nn.Linear(3136, 128)
        self.fc2 = nn.Linear(128, 10)

    def forward(self, x):
        x = F.max_pool2d(F.relu(self.conv1(x)), 2)
        x = F.max_pool2d(F.relu(self.conv2(x)), 2)
        return self.fc2(F.relu(self.fc1(x.flatten(1))))


class ConvBn(nn.Sequential):
    def __init__(self, cin, cout, k, stride):
        super().__init__(nn.Conv2d(cin, cout, k, stride=stride, padding=k // 2, bias=False),
                         nn.BatchNorm2d(cout))


class Block(nn.Module):
    """Basic (two 3x3) or bottleneck (1x1, 3x3, 1x1, x4) residual block, as src/train/resnet.cc."""

    def __init__(self, cin, width, stride, bottleneck):
        super().__init__()
        out = 4 * width if bottleneck else width
        if bottleneck:
            self.layers = nn.ModuleList([ConvBn(cin, width, 1, 1), ConvBn(width, width, 3, stride),
                                         ConvBn(width, out, 1, 1)])
        else:
            self.layers = nn.ModuleList([ConvBn(cin, width, 3, stride), ConvBn(width, out, 3, 1)])
        self.shortcut = ConvBn(cin, out, 1, stride) if stride != 1 or cin != out else None

    def forward(self, x):
        h = x
        for i, layer in enumerate(self.layers):
            h = layer(h)
            if i + 1 < len(self.layers):
                h = F.relu(h)
        return F.relu(h + (self.shortcut(x) if self.shortcut is not None else x))


class ResNet(nn.Module):
    """The same ResNet-18 / -50 as src/train/resnet.cc (11,172,810 / 23,519,690 parameters)."""

    def __init__(self, depth):
        super().__init__()
        blocks, bottleneck = {18: ([2, 2, 2, 2], False), 50: ([3, 4, 6, 3], True)}[depth]
        self.stem = ConvBn(1, 64, 3, 1)
        layers, cin = [], 64
        for s, (n, width) in enumerate(zip(blocks, [64, 128, 256, 512])):
            for b in range(n):
                layers.append(Block(cin, width, 2 if s > 0 and b == 0 else 1, bottleneck))
                cin = 4 * width if bottleneck else width
        self.blocks = nn.Sequential(*layers)
        self.fc = nn.Linear(cin, 10)

    def forward(self, x):
        h = self.blocks(F.relu(self.stem(x)))
        return self.fc(F.adaptive_avg_pool2d(h, 1).flatten(1))


def make_model(name):
    if name == "cnn":
        return Cnn()
    return ResNet(int(name[len("resnet"):]))


def scale_of(a, global_batch):
    return global_batch / a.lr_reference_batch if a.lr_reference_batch > 0 else 1.0


def resolve_scaling_defaults(a, global_batch, total):
    """cann-dist-train's scaling defaults (src/train/lr_schedule.h): --warmup-steps and
    --larc-trust left at -1 become, when the rate is scaled up with the global batch,
    round(5 log2 scale) steps (at most a quarter of the run) and LARC trust 0.05; else 0."""
    scale = scale_of(a, global_batch)
    steps = round(5 * math.log2(scale)) if scale > 1 else 0  # 0 below a scale of 2^0.1
    if a.warmup_steps == -1:
        a.warmup_steps = max(min(steps, total // 4), min(1, total)) if steps >= 1 else 0
    if a.larc_trust == -1:
        a.larc_trust = 0.05 if steps >= 1 else 0.0


def clip_by_trust_ratio(params, trust, lr):
    """LARC clip mode, as src/train/larc.cc (Apex's apex.parallel.LARC): each gradient scaled by
    min(1, trust ||w|| / (lr ||g||))."""
    with torch.no_grad():
        for p in params:
            if p.grad is None:
                continue
            w, g = p.norm().item(), p.grad.norm().item()
            if w > 0 and g > 0:
                scale = min(1.0, trust * w / (lr * g))
                if scale < 1.0:
                    p.grad.mul_(scale)


def lr_at(a, step, global_batch, total):
    peak = a.lr * scale_of(a, global_batch)
    if step < a.warmup_steps:
        return peak * (step + 1) / a.warmup_steps
    if total <= a.warmup_steps:
        return peak
    t = min(1.0, max(0.0, (step - a.warmup_steps) / (total - a.warmup_steps)))
    return peak * 0.5 * (1 + math.cos(math.pi * t))


def worker(local_rank, a):
    rank = a.node_rank * a.nproc_per_node + local_rank
    world = a.nnodes * a.nproc_per_node
    torch.set_num_threads(a.threads or max(1, (os.cpu_count() or 1) // a.nproc_per_node))
    if a.backend == "cdt":
        import cann_dist  # noqa: F401  (registers "cdt"; PYTHONPATH=build/python)
    dist.init_process_group(a.backend, init_method=f"tcp://{a.master}", rank=rank, world_size=world,
                            timeout=datetime.timedelta(seconds=120))
    if a.dataset == "fashion-mnist":
        images = load_idx(find(a.data_dir, "train-images-idx3-ubyte"))
        labels = load_idx(find(a.data_dir, "train-labels-idx1-ubyte"))
        test_images = load_idx(find(a.data_dir, "t10k-images-idx3-ubyte"))
        test_labels = load_idx(find(a.data_dir, "t10k-labels-idx1-ubyte"))
    else:  # random data of the same shape: throughput only
        g = np.random.default_rng(a.seed)
        images = g.integers(0, 256, (a.synthetic_samples, 28, 28), dtype=np.uint8)
        labels = g.integers(0, 10, a.synthetic_samples, dtype=np.uint8)
        test_images, test_labels = images[:1000], labels[:1000]
    x_all = (torch.from_numpy(images.astype(np.float32)) / 255.0 - 0.2860) / 0.3530
    y_all = torch.from_numpy(labels.astype(np.int64))
    n = len(y_all)
    torch.manual_seed(a.seed)
    # PyTorch's powerSGD_hook launches each bucket's P and Q allreduces from callbacks that run,
    # and wait, on the Gloo process group's worker threads (2). With two buckets in flight the
    # threads enqueue them in an order that can differ between ranks: the ranks then pair
    # allreduces of different sizes and Gloo aborts ("op.preamble.length <= op.nbytes"), as it
    # did in 4 of 5 runs on two emulated one-core nodes. With one worker thread it hung instead
    # (its callbacks wait for allreduces only that thread could run). So with the hook the model
    # is one bucket: no overlap with backward, the only way it ran reliably here.
    if a.powersgd_rank:
        dist._DEFAULT_FIRST_BUCKET_BYTES = 1 << 30
    model = nn.parallel.DistributedDataParallel(make_model(a.model),
                                                bucket_cap_mb=1024 if a.powersgd_rank else 25)
    # DDP's own allreduce hook (average, then allreduce), timed: comm_s sums each bucket's time
    # from launch to completion; what backward() spends after the last launch is exposed
    # communication (our comm_wait_s). The hook adds one Python call per bucket.
    timing = {"comm_s": 0.0, "last_launch": 0.0}
    # PyTorch's PowerSGD hook with its own defaults (error feedback, warm start, tensors that
    # would not shrink by min_compression_rate 2 sent uncompressed); plain allreduce before
    # --powersgd-start, as its docs recommend for the first iterations.
    powersgd = powerSGD_hook.PowerSGDState(
        process_group=None, matrix_approximation_rank=a.powersgd_rank,
        start_powerSGD_iter=a.powersgd_start, random_seed=a.seed) if a.powersgd_rank else None

    cdt_hook = None
    if a.cdt_hook:
        import cann_dist
        cdt_hook = cann_dist.hooks.compress(a.cdt_hook, powersgd_rank=a.cdt_powersgd_rank,
                                            seed=a.seed)

    def timed_allreduce(state, bucket):
        t0 = time.perf_counter()
        timing["last_launch"] = t0
        if powersgd is not None:  # PyTorch's powerSGD_hook, timed
            fut = powerSGD_hook.powerSGD_hook(powersgd, bucket)
        elif a.fp16_hook:  # PyTorch's fp16_compress_hook, timed
            fut = default_hooks.fp16_compress_hook(None, bucket)
        elif cdt_hook is not None:  # the engine's compressor (cann_dist.hooks.compress), timed
            fut = cdt_hook(None, bucket)
        else:
            fut = dist.all_reduce(bucket.buffer().div_(world), async_op=True).get_future()

        def done(f):
            timing["comm_s"] += time.perf_counter() - t0
            v = f.value()
            return v[0] if isinstance(v, list) else v
        return fut.then(done)
    model.register_comm_hook(None, timed_allreduce)
    opt = torch.optim.SGD(model.parameters(), lr=a.lr, momentum=a.momentum)
    global_batch = a.batch_size * world
    total = a.steps
    resolve_scaling_defaults(a, global_batch, total)
    epoch, pos, perm = 0, 0, permutation(n, a.seed, 0)
    curve, backward_s, exposed_s = [], 0.0, 0.0
    tx = (torch.from_numpy(test_images.astype(np.float32)) / 255.0 - 0.2860) / 0.3530
    ty = torch.from_numpy(test_labels.astype(np.int64))

    def evaluate():
        # As src/train/replica.cc's Evaluate: evaluation mode (batch norm on its running
        # statistics), every world-size-th image, 1000 at a time.
        model.module.eval()
        with torch.no_grad():
            mine = list(range(rank, len(test_labels), world))
            correct = 0.0
            for first in range(0, len(mine), 1000):
                part = mine[first:first + 1000]
                correct += float((model.module(tx[part].unsqueeze(1)).argmax(1) == ty[part]).sum())
            counts = torch.tensor([correct, float(len(mine))], dtype=torch.float64)
            dist.all_reduce(counts)
        model.module.train()
        return (counts[0] / counts[1]).item()
    eval_s, time_to_target, evals = 0.0, None, []
    dist.barrier()
    start = time.perf_counter()
    for step in range(total):
        if pos >= n:
            epoch, pos, perm = epoch + 1, 0, permutation(n, a.seed, epoch + 1)
        take = min(global_batch, n - pos)
        # Short last step: proportional split, as GlobalSampler::Shares (equal batches here).
        shares = [take // world + (1 if r < take % world else 0) for r in range(world)]
        first = pos + sum(shares[:rank])
        idx = perm[first:first + shares[rank]]
        lr = lr_at(a, step, global_batch, total)
        for group in opt.param_groups:
            group["lr"] = lr
        x = x_all[idx].unsqueeze(1)
        y = y_all[idx]
        opt.zero_grad(set_to_none=True)
        loss = F.cross_entropy(model(x), y)
        t = time.perf_counter()
        loss.backward()
        end = time.perf_counter()
        backward_s += end - t
        exposed_s += end - max(t, timing["last_launch"])
        if a.larc_trust > 0 and lr > 0:
            clip_by_trust_ratio(model.parameters(), a.larc_trust, lr)
        opt.step()
        reduced = loss.detach().clone() * len(idx)
        dist.all_reduce(reduced)
        curve.append([step, reduced.item() / take])
        pos += take
        steps_done = step + 1
        if a.eval_every and (step + 1) % a.eval_every == 0 and step + 1 < total:
            te = time.perf_counter()
            acc = evaluate()
            evals.append([step, acc])
            eval_s += time.perf_counter() - te
            if a.target_accuracy and acc >= a.target_accuracy:
                time_to_target = time.perf_counter() - start - eval_s
                break
    wall = time.perf_counter() - start - eval_s
    accuracy = evaluate() if time_to_target is None else evals[-1][1]
    if rank == 0:
        result = {"peer": f"pytorch-ddp-{a.backend}", "cdt_hook": a.cdt_hook, "torch": torch.__version__, "world_size": world,
                  "model": a.model, "params": sum(p.numel() for p in model.parameters()),
                  "steps": steps_done, "samples": steps_done * global_batch, "wall_s": wall,
                  "samples_per_s": steps_done * global_batch / wall, "final_loss": curve[-1][1],
                  "loss_curve": curve, "test_accuracy": accuracy, "eval_curve": evals,
                  "time_to_target_s": time_to_target, "fp16_hook": a.fp16_hook,
                  "powersgd_rank": a.powersgd_rank,
                  "step_time": {"backward_s": backward_s, "comm_wait_s": exposed_s},
                  "comm": {"overlap_ratio": max(0.0, 1 - exposed_s / timing["comm_s"])
                           if timing["comm_s"] > 0 else 0.0},
                  "sync_wait_fraction": exposed_s / wall}
        print(f"ddp: {world} ranks, {steps_done} steps, {result['samples_per_s']:.1f} samples/s, "
              f"final loss {result['final_loss']:.4f}, test accuracy {result['test_accuracy']:.4f}")
        if a.json:
            with open(a.json, "w") as f:
                json.dump(result, f, indent=2)
    dist.destroy_process_group()


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--nproc-per-node", type=int, default=1)
    p.add_argument("--nnodes", type=int, default=int(os.environ.get("CDT_NNODES", "1")))
    p.add_argument("--node-rank", type=int, default=int(os.environ.get("CDT_NODE_RANK", "0")))
    p.add_argument("--master", default=None, help="HOST:PORT of rank 0 (default: the rendezvous "
                   "endpoint's host, port 29510)")
    p.add_argument("--model", default="cnn", choices=["cnn", "resnet18", "resnet50"],
                   help="the same network as cann-dist-train train --model")
    p.add_argument("--dataset", default="fashion-mnist", choices=["fashion-mnist", "synthetic"])
    p.add_argument("--data-dir", default="/usr/share/datasets/fashion-mnist")
    p.add_argument("--synthetic-samples", type=int, default=60000)
    p.add_argument("--steps", type=int, default=100)
    p.add_argument("--batch-size", type=int, default=64)
    p.add_argument("--lr", type=float, default=0.1)  # as cann-dist-train train
    p.add_argument("--lr-reference-batch", type=int, default=256)
    p.add_argument("--momentum", type=float, default=0.9)
    p.add_argument("--warmup-steps", type=int, default=-1,
                   help="-1 = automatic, as cann-dist-train train (src/train/lr_schedule.h)")
    p.add_argument("--larc-trust", type=float, default=-1,
                   help="LARC clip mode; -1 = automatic (0.05 when the rate is scaled up)")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--threads", type=int, default=0, help="torch threads per rank (0 = cores / ranks)")
    p.add_argument("--fp16-hook", action="store_true", help="PyTorch's fp16_compress_hook")
    p.add_argument("--powersgd-rank", type=int, default=0,
                   help="PyTorch's powerSGD_hook at this rank (0 = off)")
    p.add_argument("--powersgd-start", type=int, default=10,
                   help="the powerSGD_hook's start_powerSGD_iter: plain allreduce before it")
    p.add_argument("--eval-every", type=int, default=0)
    p.add_argument("--target-accuracy", type=float, default=0.0,
                   help="stop at the first evaluation reaching it (time_to_target_s)")
    p.add_argument("--backend", default="gloo", choices=["gloo", "cdt"],
                   help="torch.distributed backend: gloo, or cdt (cann_dist; docs/python.md)")
    p.add_argument("--cdt-hook", default="",
                   help="with --backend cdt: cann_dist.hooks.compress(METHOD) (powersgd, topk, ...)")
    p.add_argument("--cdt-powersgd-rank", type=int, default=2)
    p.add_argument("--json", default="")
    a = p.parse_args()
    if a.cdt_hook and a.backend != "cdt":
        p.error("--cdt-hook needs --backend cdt")
    if a.powersgd_rank and a.fp16_hook:
        p.error("--powersgd-rank and --fp16-hook are two different hooks: choose one")
    if a.powersgd_rank < 0 or (a.powersgd_rank and a.powersgd_start < 2):
        p.error("--powersgd-rank must be >= 0, and --powersgd-start >= 2 (PyTorch's powerSGD_hook "
                "needs one plain step before error feedback and warm start)")
    if a.master is None:
        host = os.environ.get("CDT_RDZV_ENDPOINT", "127.0.0.1:0").rsplit(":", 1)[0]
        a.master = f"{host}:29510"
    if "CDT_NODE_ADDR" in os.environ:
        os.environ.setdefault("GLOO_SOCKET_IFNAME", "eth0")
    mp.spawn(worker, args=(a,), nprocs=a.nproc_per_node, join=True)


if __name__ == "__main__":
    main()
