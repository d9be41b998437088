#!/usr/bin/python3
"""The recovery peer for `cann-dist-train elastic`: PyTorch DDP (Gloo) under torchrun with
--max-restarts, checkpointing every --checkpoint-every steps, one worker killing itself with
SIGKILL at --kill-step. torchrun then stops every worker, restarts them all, and they resume from
the checkpoint (torchrun's recovery model). Debian python3-torch 1.13; run with /usr/bin/python3:

  /usr/bin/python3 -m torch.distributed.run --nproc_per_node 4 --max_restarts 1 \\
      --monitor_interval 0.1 --redirects 1 --tee 2 --rdzv_backend c10d \\
      --rdzv_endpoint 127.0.0.1:29520 bench/peers/torchrun_elastic.py --steps 200 \\
      --kill-rank 2 --kill-step 100 --checkpoint-dir /tmp/ckpt --json out.json

(`--redirects 1 --tee 2`: without them torchrun 1.13 crashes at start on Python 3.11.)
rto_s has our definition (docs/elastic.md): from the fault (the victim writes the time just
before it kills itself) to the first step completed after it (rank 0's step times).
The model, data order and optimizer are ddp_baseline.py's.
"""
import argparse
import json
import os
import signal
import sys
import time

import numpy as np
import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from ddp_baseline import Cnn, find, load_idx, permutation  # noqa: E402


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--data-dir", default="/usr/share/datasets/fashion-mnist")
    p.add_argument("--steps", type=int, default=200)
    p.add_argument("--batch-size", type=int, default=32)
    p.add_argument("--lr", type=float, default=0.1)  # as cann-dist-train train
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--checkpoint-dir", required=True)
    p.add_argument("--checkpoint-every", type=int, default=2)
    p.add_argument("--kill-rank", type=int, default=-1)
    p.add_argument("--kill-step", type=int, default=-1)
    p.add_argument("--json", default="")
    a = p.parse_args()
    rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    restart = int(os.environ.get("TORCHELASTIC_RESTART_COUNT", "0"))
    torch.set_num_threads(max(1, (os.cpu_count() or 1) // int(os.environ.get("LOCAL_WORLD_SIZE", "1"))))
    dist.init_process_group("gloo")
    images = load_idx(find(a.data_dir, "train-images-idx3-ubyte"))
    labels = load_idx(find(a.data_dir, "train-labels-idx1-ubyte"))
    x_all = (torch.from_numpy(images.astype(np.float32)) / 255.0 - 0.2860) / 0.3530
    y_all = torch.from_numpy(labels.astype(np.int64))
    n = len(y_all)
    torch.manual_seed(a.seed)
    model = nn.parallel.DistributedDataParallel(Cnn())
    opt = torch.optim.SGD(model.parameters(), lr=a.lr, momentum=0.9)
    os.makedirs(a.checkpoint_dir, exist_ok=True)
    path = os.path.join(a.checkpoint_dir, "checkpoint.pt")
    events = os.path.join(a.checkpoint_dir, "events.jsonl")  # fault and step times
    start_step = 0
    if os.path.exists(path):
        state = torch.load(path)
        model.module.load_state_dict(state["model"])
        opt.load_state_dict(state["opt"])
        start_step = state["step"]
    global_batch = a.batch_size * world
    perm_epoch, perm = -1, None

    def log(event):
        with open(events, "a") as f:
            f.write(json.dumps(event) + "\n")
    for step in range(start_step, a.steps):
        if step == a.kill_step and rank == a.kill_rank and restart == 0:
            log({"event": "fault", "rank": rank, "step": step, "unix": time.time()})
            os.kill(os.getpid(), signal.SIGKILL)
        pos = step * global_batch
        epoch, pos = pos // n, pos % n
        if epoch != perm_epoch:
            perm_epoch, perm = epoch, permutation(n, a.seed, epoch)
        idx = perm[pos + rank * a.batch_size:pos + (rank + 1) * a.batch_size]
        opt.zero_grad(set_to_none=True)
        loss = F.cross_entropy(model(x_all[idx].unsqueeze(1)), y_all[idx])
        loss.backward()
        opt.step()
        if rank == 0:
            log({"event": "step", "step": step, "restart": restart, "unix": time.time()})
            if (step + 1) % a.checkpoint_every == 0:
                torch.save({"model": model.module.state_dict(), "opt": opt.state_dict(), "step": step + 1},
                           path + ".tmp")
                os.replace(path + ".tmp", path)
    if rank == 0 and a.json:
        fault = [json.loads(l) for l in open(events) if '"fault"' in l]
        steps = [json.loads(l) for l in open(events) if '"step"' in l]
        result = {"peer": "torchrun-ddp-gloo", "torch": torch.__version__, "world_size": world,
                  "restarts": restart}
        if fault:
            after = [s for s in steps if s["unix"] > fault[0]["unix"] and s["restart"] > 0]
            result.update({"fault_step": fault[0]["step"], "resumed_step": after[0]["step"],
                           "lost_steps": fault[0]["step"] - after[0]["step"],
                           "rto_s": after[0]["unix"] - fault[0]["unix"]})
        with open(a.json, "w") as f:
            json.dump(result, f, indent=2)
        print(f"torchrun: {json.dumps(result)}")
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
