"""cann_dist: cann-dist-train's engine for PyTorch (docs/python.md).

Importing it registers the torch.distributed backend "cdt": the one-line change from Gloo is

    import cann_dist  # noqa: F401  (registers "cdt")
    torch.distributed.init_process_group("cdt")

under torchrun or `cann-dist-train launch` (RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT). The
backend runs the engine's collectives — topology-aware algorithm choice, its TCP transport with
authenticated connections — on CPU tensors. The environment it reads (here, never in the engine):
CDT_JOB_SECRET (the job secret; without it the handshake is keyed by the store's token alone),
CDT_NODE_ADDR (the address peers dial; default 127.0.0.1) and CDT_JOB_ID.
"""
import datetime
import os

import torch.distributed as _dist

from . import _C
from . import elastic  # noqa: F401
from . import green  # noqa: F401
from . import hooks  # noqa: F401
from . import topology  # noqa: F401
from .green import CarbonTracker  # noqa: F401
from .topology import CommunicationOptimizer, TopologyMapper  # noqa: F401

__all__ = ["ProcessGroupCDT", "BACKEND", "elastic", "green", "hooks", "topology",
           "TopologyMapper", "CommunicationOptimizer", "CarbonTracker"]

BACKEND = "cdt"
ProcessGroupCDT = _C.ProcessGroupCDT


def _create_process_group(store, rank, size, timeout):
    """torch.distributed's creator for "cdt": called on every rank by init_process_group/new_group.
    Inside cann_dist.elastic.run, the default group is the elastic generation's, formed already."""
    generation = elastic.take_generation_group()
    if generation is not None:
        return generation
    if isinstance(timeout, datetime.timedelta):
        timeout_ms = timeout
    else:
        timeout_ms = datetime.timedelta(seconds=float(timeout))
    return _C.ProcessGroupCDT(
        store,
        rank,
        size,
        timeout_ms,
        secret=os.environ.get("CDT_JOB_SECRET", ""),
        job_id=os.environ.get("CDT_JOB_ID", "cdt"),
        advertise_host=os.environ.get("CDT_NODE_ADDR", "127.0.0.1"),
    )


if BACKEND.upper() not in _dist.Backend._plugins:
    _dist.Backend.register_backend(BACKEND, _create_process_group)
