#!/usr/bin/python3
"""The seed's first step: map the cluster and plan the communication, on the job's own group.

  cann-dist-train launch --nproc-per-node 2 -- /usr/bin/python3 examples/python/step1_topology.py

Every rank scans (a collective): the link probes, the alpha/beta cost model per level, the
allreduce algorithm per message size — the plan the group's allreduces follow from then on — and
the compression the cost model recommends for this model's gradient. Rank 0 prints them.
"""
import argparse
import json
import os
import sys

import torch.distributed as dist

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import fashion_mnist  # noqa: E402

from cann.distributed import CommunicationOptimizer, TopologyMapper  # noqa: E402


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--cache-dir", default=None, help="strategy cache ('none': probe every time)")
    p.add_argument("--compute-ms", type=float, default=0.0, help="backward time that can hide communication")
    p.add_argument("--json", help="rank 0 writes the topology and the plan here")
    a = p.parse_args()
    dist.init_process_group("cdt")
    topo = TopologyMapper.scan(cache_dir=a.cache_dir)
    plan = CommunicationOptimizer.generate_plan(topo, model=fashion_mnist.SmallCnn(),
                                                compute_ms=a.compute_ms)
    if dist.get_rank() == 0:
        print(f"network  : {topo.network_type}, {topo.bandwidth_gbps:.2f} Gbit/s, "
              f"{topo.latency_us:.1f} us; {topo.nodes} node(s), ranks per node {topo.ranks_per_node}")
        for level in topo.levels:
            print(f"level    : {level.name}: alpha {level.alpha_us:.1f} us, beta {level.beta_GBps:.3f} GB/s")
        for e in plan.allreduce:
            print(f"allreduce: [{e.min_bytes}, {e.max_bytes}] bytes -> {e.algorithm}")
        c = plan.compression
        print(f"compress : {c.recommended} ({c.setting}) for {c.gradient_bytes / 1e6:.2f} MB: {c.reason}")
        if a.json:
            with open(a.json, "w") as f:
                json.dump({"topology": topo.report, "recommended": c.recommended,
                           "setting": c.setting}, f, indent=1)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
