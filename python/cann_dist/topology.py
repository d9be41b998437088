"""cann_dist.topology: the cluster as the engine measures it, and what to do about it
(docs/python.md, "Topology"; the seed's TopologyMapper and CommunicationOptimizer).

    import cann_dist
    from cann_dist import TopologyMapper, CommunicationOptimizer

    dist.init_process_group("cdt")
    topo = TopologyMapper.scan()            # every rank, at once (a collective)
    print(topo.network_type, topo.bandwidth_gbps, [l.name for l in topo.levels])
    plan = CommunicationOptimizer.generate_plan(topo, model=model, compute_ms=40)
    print(plan.compression.recommended, plan.compression.reason)

scan() is `cann-dist-train topo-scan` on the job's own group: rank 0 reads its NICs and the
strategy cache; without a cached strategy for this cluster every rank takes part in the link
probes (latency and bandwidth inside and between nodes), the cost model is fitted and the planner
picks an allreduce algorithm per message size. The group's allreduces follow that plan from then
on (install=False leaves them alone). The result is topo-scan's JSON report as objects.
"""
import json
import os
from dataclasses import dataclass, field
from typing import List, Optional

import torch.distributed as dist

from . import _C

__all__ = ["TopologyMapper", "CommunicationOptimizer", "Topology", "Level", "PlanEntry",
           "CompressionAdvice", "CommunicationPlan"]


@dataclass
class Level:
    name: str                  # "intra" (inside a node), "inter" (between nodes) or "shm"
                               # (same-node ranks' shared memory)
    alpha_us: float            # latency per message
    beta_GBps: float           # bandwidth of one link
    node_GBps: Optional[float] = None  # intra: what the node moves in all at once


@dataclass
class PlanEntry:
    min_bytes: int
    max_bytes: int
    algorithm: str             # ring, rd, rhd, tree, hier ...
    predicted_us: float        # at min_bytes


@dataclass
class Topology:
    world_size: int
    network_type: str          # infiniband, roce, ethernet, loopback ...
    bandwidth_gbps: float      # measured, slowest level
    latency_us: float
    nic_speed_gbps: float      # what the NIC reports
    nodes: int
    ranks_per_node: List[int]
    levels: List[Level]
    plan: List[PlanEntry]
    nics: List[dict]
    fingerprint: str
    from_cache: bool
    probe_s: float
    report: dict = field(repr=False, default_factory=dict)  # topo-scan --json's document
    _handle: object = field(repr=False, default=None)

    def algorithm_for(self, nbytes):
        """The allreduce algorithm the plan uses for a message of `nbytes`."""
        for e in self.plan:
            if e.min_bytes <= nbytes <= e.max_bytes:
                return e.algorithm
        return self.plan[-1].algorithm if self.plan else None


@dataclass
class CompressionAdvice:
    recommended: str
    setting: str
    reason: str
    gradient_bytes: float
    candidates: List[dict]


@dataclass
class CommunicationPlan:
    allreduce: List[PlanEntry]
    compression: CompressionAdvice
    bucket_bytes: Optional[int] = None


def _default_cache_dir():
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "cann-dist-train", "strategies")


class TopologyMapper:
    """Discovers the topology of a "cdt" process group (see the module's docstring)."""

    @classmethod
    def scan(cls, process_group=None, cache_dir=None, rescan=False, install=True):
        pg = process_group if process_group is not None else dist.distributed_c10d._get_default_group()
        if cache_dir is None:
            cache_dir = _default_cache_dir()
        elif cache_dir == "none":
            cache_dir = ""
        handle = _C.scan_topology(pg, cache_dir, rescan, install)
        d = json.loads(handle.json())
        return Topology(
            world_size=d["world_size"], network_type=d["network"]["type"],
            bandwidth_gbps=d["network"]["bandwidth_gbps"], latency_us=d["network"]["latency_us"],
            nic_speed_gbps=d["network"]["nic_speed_gbps"], nodes=d["hierarchy"]["nodes"],
            ranks_per_node=list(d["hierarchy"]["ranks_per_node"]),
            levels=[Level(**l) for l in d["levels"]], plan=[PlanEntry(**p) for p in d["plan"]],
            nics=d["nics"], fingerprint=d["fingerprint"], from_cache=d["from_cache"],
            probe_s=d["probe_s"], report=d, _handle=handle)


class CommunicationOptimizer:
    """Turns a Topology into a communication plan: the allreduce algorithm per message size and
    the gradient compression the cost model recommends for your gradient and compute."""

    @staticmethod
    def generate_plan(topology, model=None, gradient_bytes=None, compute_ms=0.0):
        """`model` (a torch module: its float32 gradient size) or `gradient_bytes`; `compute_ms`:
        the backward time that can hide communication (0 = unknown)."""
        if gradient_bytes is None:
            if model is None:
                raise ValueError("CommunicationOptimizer.generate_plan: give model= or gradient_bytes=")
            gradient_bytes = 4 * sum(p.numel() for p in model.parameters() if p.requires_grad)
        a = json.loads(topology._handle.advise(float(gradient_bytes), float(compute_ms)))
        advice = CompressionAdvice(recommended=a["recommended"], setting=a["setting"],
                                   reason=a["reason"], gradient_bytes=a["gradient_bytes"],
                                   candidates=a["candidates"])
        return CommunicationPlan(allreduce=list(topology.plan), compression=advice)
