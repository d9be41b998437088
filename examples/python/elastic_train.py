#!/usr/bin/python3
"""The seed's third step: elastic training of your own model. A worker that dies or hangs costs
the job a second, not a restart: the others re-form the group in process (with a hot spare if one
waits) and train on from the last step every one of them committed.

  cann-dist-train launch --elastic --nproc-per-node 4 --spares 1 -- \\
      /usr/bin/python3 examples/python/elastic_train.py --steps 300

Kill any worker (`kill -9 PID`, or `cann-dist-train fault-inject kill:2@150`, or launch with
`--inject kill:2@150`) and watch rank 0's line "completed step N, X s after the failure".

Under torchrun (no --elastic) the same script trains without in-process recovery; with
`--checkpoint DIR` rank 0 saves every --checkpoint-every steps (CheckpointManager: asynchronous,
lz4, incremental) and every rank resumes from the newest when torchrun restarts them
(`torchrun --max-restarts 3 ...`).
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

import cann_dist  # noqa: E402,F401  (registers the "cdt" backend)
from cann_dist import CheckpointManager, elastic  # noqa: E402


def parse():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--steps", type=int, default=300)
    p.add_argument("--batch-size", type=int, default=32, help="per rank")
    p.add_argument("--lr", type=float, default=0.05)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--step-log", help="rank 0 appends one JSON line per completed step (time, step, world, generation)")
    p.add_argument("--json", help="rank 0 writes the result here (accuracy, losses, recoveries)")
    p.add_argument("--checkpoint", help="a directory: rank 0 saves a checkpoint there every "
                   "--checkpoint-every steps (CheckpointManager: async, lz4, incremental); a "
                   "restarted job (torchrun) resumes from it")
    p.add_argument("--checkpoint-every", type=int, default=20)
    p.add_argument("--hook", help="a compression hook registered in each generation "
                   "(cann_dist.hooks.compress(HOOK): none, fp16, ..., adaptive)")
    return p.parse_args()


def main():
    a = parse()
    torch.set_num_threads(1)
    torch.manual_seed(a.seed)
    images, labels = fashion_mnist.load("train")
    model = fashion_mnist.SmallCnn()
    optimizer = torch.optim.SGD(model.parameters(), lr=a.lr, momentum=0.9)
    sampler = elastic.ElasticSampler(len(labels), seed=a.seed)
    manager = CheckpointManager(a.checkpoint, backend="async_io", compression="lz4",
                                incremental=True) if a.checkpoint else None
    # One hook for the whole job: registered again in each generation, it rebinds itself to the
    # new group; State commits its residuals with the model and restores them after a failure.
    hook = cann_dist.hooks.compress(a.hook) if a.hook else None
    state = elastic.State(model=model, optimizer=optimizer, sampler=sampler, checkpoint=manager,
                          checkpoint_every=a.checkpoint_every, hook=hook, step=0, losses=[])
    state.load_checkpoint()  # a restarted job resumes (nothing happens without a checkpoint)
    step_log = open(a.step_log, "a") if a.step_log else None

    @elastic.run
    def train(state):
        ddp = torch.nn.parallel.DistributedDataParallel(state.model)
        if hook is not None:
            ddp.register_comm_hook(None, hook)
        rank, world = dist.get_rank(), dist.get_world_size()
        while state.step < a.steps:
            if sampler.remaining() < a.batch_size * world:
                sampler.set_epoch(sampler.epoch + 1)
            idx = sampler.next_batch(a.batch_size)
            optimizer.zero_grad()
            loss = F.cross_entropy(ddp(images[idx]), labels[idx])
            loss.backward()
            optimizer.step()
            sampler.record_batch(a.batch_size * world)
            state.losses.append(loss.item())
            state.step += 1
            state.commit()
            if rank == 0 and step_log:
                step_log.write(json.dumps({"t": time.time(), "step": state.step, "world": world,
                                           "generation": state.generation,
                                           "pid": os.getpid()}) + "\n")
                step_log.flush()
        return rank

    rank = train(state)
    if rank == 0:
        test_images, test_labels = fashion_mnist.load("test")
        result = {"steps": state.step, "world_size": state.world_size,
                  "test_accuracy": fashion_mnist.accuracy(model, test_images, test_labels),
                  "final_loss": state.losses[-1], "losses": state.losses,
                  "recoveries": state.recoveries}
        if hook is not None:
            buckets = hook.state_dict()["buckets"].values()
            result["hook_state_norm"] = sum(float((v.double() ** 2).sum()) for v in buckets) ** 0.5
        print(json.dumps({k: v for k, v in result.items() if k != "losses"}))
        if a.json:
            with open(a.json, "w") as f:
                json.dump(result, f)


if __name__ == "__main__":
    main()
