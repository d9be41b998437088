#!/usr/bin/python3
"""The seed's fourth step, measured: energy and carbon of training your own model, written as
CodeCarbon's emissions.csv (docs/python.md, "Green: CarbonTracker").

  /usr/bin/python3 examples/python/green_tracker.py --steps 200 --region CISO --output-dir runs

Under `torchrun` or `cann-dist-train launch`, each rank meters its own process (scope
"process") and rank 0 writes the row for the machine.
"""
import argparse
import json
import os
import sys
import time

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import fashion_mnist  # noqa: E402

from cann_dist.green import CarbonTracker  # noqa: E402


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--steps", type=int, default=200)
    p.add_argument("--seconds", type=float, default=0, help="train this long instead (steps as they come)")
    p.add_argument("--batch-size", type=int, default=64)
    p.add_argument("--region", default="CISO", help="a trace of the knowledge base")
    p.add_argument("--trace", help="or your own trace (CSV or JSON, docs/green.md)")
    p.add_argument("--trace-start", help="the trace moment the run starts at (default: today's hour)")
    p.add_argument("--output-dir", default=".")
    a = p.parse_args()
    torch.manual_seed(1)
    images, labels = fashion_mnist.load("train")
    model = fashion_mnist.SmallCnn()
    opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    where = {"trace": a.trace} if a.trace else {"region": a.region}
    with CarbonTracker(output_dir=a.output_dir, trace_start=a.trace_start,
                       project_name="green_tracker example", **where) as tracker:
        start, step = time.monotonic(), 0
        while (step < a.steps) if not a.seconds else (time.monotonic() - start < a.seconds):
            step += 1
            idx = torch.randint(0, len(labels), (a.batch_size,))
            opt.zero_grad()
            loss = F.cross_entropy(model(images[idx]), labels[idx])
            loss.backward()
            opt.step()
    test_images, test_labels = fashion_mnist.load("test")
    print(json.dumps({"steps": step, "final_loss": loss.item(),
                      "test_accuracy": fashion_mnist.accuracy(model, test_images, test_labels),
                      "energy_kwh": tracker.energy_kwh, "emissions_kg": tracker.emissions_kg,
                      "meter": tracker.meter,
                      "emissions_csv": os.path.join(a.output_dir, "emissions.csv")}))


if __name__ == "__main__":
    main()
