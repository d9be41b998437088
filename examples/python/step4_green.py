#!/usr/bin/python3
"""The seed's fourth step: train in the low-carbon hours, under a deadline, and sign the report.

  /usr/bin/python3 examples/python/step4_green.py --region CISO --deadline-hours 24 --time-scale 2

GreenScheduler calibrates the training (a few steps), plans it on the grid's hourly carbon
intensity (2022 trace of the knowledge base) so that it finishes by the deadline, runs it through
the plan's low-carbon stretches and pauses it in between (in this process, the state in memory),
meters the energy and accounts for it against running straight through. --time-scale replays the
trace: that many wall seconds per trace hour (3600 = real time). GreenTrainingCert signs the
report (Ed25519); verify it with GreenTrainingCert.verify or `cann-dist-train cert verify`.
"""
import argparse
import os
import sys

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import fashion_mnist  # noqa: E402

from cann.distributed import GreenScheduler, GreenTrainingCert  # noqa: E402
from cann_dist.green import TrainingJob  # noqa: E402


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--steps", type=int, default=300)
    p.add_argument("--region", default="CISO")
    p.add_argument("--trace-start", default="2022-06-01T00:00:00Z")
    p.add_argument("--deadline-hours", type=float, default=24)
    p.add_argument("--time-scale", type=float, default=2.0, help="wall seconds per trace hour")
    p.add_argument("--carbon-cap-kg", type=float, default=0.0)
    p.add_argument("--output-dir", default="green-run")
    a = p.parse_args()
    torch.set_num_threads(1)
    images, labels = fashion_mnist.load("train")
    test_images, test_labels = fashion_mnist.load("test")

    def init():
        torch.manual_seed(1)
        model = fashion_mnist.SmallCnn()
        return {"model": model, "opt": torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9),
                "gen": torch.Generator().manual_seed(1)}

    def step(state, batch):
        idx = torch.randint(0, len(labels), (batch,), generator=state["gen"])
        state["opt"].zero_grad()
        F.cross_entropy(state["model"](images[idx]), labels[idx]).backward()
        state["opt"].step()
        return batch

    job = TrainingJob(init, step, total_steps=a.steps,
                      evaluate=lambda s: fashion_mnist.accuracy(s["model"], test_images, test_labels))
    scheduler = GreenScheduler(region=a.region, trace_start=a.trace_start, time_scale=a.time_scale,
                               deadline_hours=a.deadline_hours, carbon_cap_kg=a.carbon_cap_kg,
                               output_dir=a.output_dir)
    report = scheduler.run(job)
    cert = GreenTrainingCert.issue(os.path.join(a.output_dir, "green_report.json"))
    check = GreenTrainingCert.verify(os.path.join(a.output_dir, "green_report.json"))
    saved = 1 - report["carbon_kg"] / report["baseline_carbon_kg"] if report["baseline_carbon_kg"] else 0
    print(f"step4_green: {report['energy_kwh'] * 1000:.3f} Wh, {report['carbon_kg'] * 1000:.3f} g CO2 "
          f"against {report['baseline_carbon_kg'] * 1000:.3f} g running straight through "
          f"({100 * saved:.1f}% less); test accuracy {report['final_test_accuracy']:.4f}; "
          f"signed ({cert.get('algorithm', 'Ed25519')}), verified: {check['ok']}")


if __name__ == "__main__":
    main()
