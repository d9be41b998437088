"""cann_dist: cann-dist-train's engine for PyTorch (docs/python.md).

Importing it registers the torch.distributed backend "cdt": the one-line change from Gloo is

    import cann_dist  # noqa: F401  (registers "cdt")
    torch.distributed.init_process_group("cdt")

under torchrun or `cann-dist-train launch` (RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT). The
backend runs the engine's collectives — topology-aware algorithm choice, shared memory between
the ranks of a node, its TCP transport with authenticated connections — on CPU tensors. The
environment it reads (here, never in the engine): CDT_JOB_SECRET (the job secret; without it the
handshake is keyed by the store's token alone), CDT_NODE_ADDR (the address peers dial; default:
node_address() below), CDT_JOB_ID, CDT_SHM (0: no shared memory), CDT_SHM_SINGLE_COPY (0: the
node's all-to-all copies through shared memory, not straight between the ranks' buffers) and
CDT_INLINE_MAX_BYTES (collectives up to this many bytes with nothing queued run on the calling
thread; default 65536, 0 = never).
"""
import datetime
import importlib
import inspect
import os
import socket
import sys

import torch.distributed as _dist

from . import _C
from . import _launcher
from . import checkpoint  # noqa: F401
from . import elastic  # noqa: F401
from . import green  # noqa: F401
from . import health  # noqa: F401
from . import hooks  # noqa: F401
from . import topology  # noqa: F401
from .checkpoint import CheckpointManager  # noqa: F401
from .elastic import ElasticTrainer  # noqa: F401
from .green import CarbonTracker, GreenScheduler, GreenTrainingCert  # noqa: F401
from .health import HealthMonitor  # noqa: F401
from .hooks import GradientCompressor  # noqa: F401
from .topology import CommunicationOptimizer, TopologyMapper  # noqa: F401

__version__ = _C.__version__

__all__ = ["ProcessGroupCDT", "BACKEND", "checkpoint", "elastic", "green", "health", "hooks", "topology",
           # the seed's names (docs/python.md, "The seed's names")
           "TopologyMapper", "CommunicationOptimizer", "GradientCompressor", "ElasticTrainer", "CheckpointManager",
           "HealthMonitor",
           "GreenScheduler", "CarbonTracker", "GreenTrainingCert"]

BACKEND = "cdt"
ProcessGroupCDT = _C.ProcessGroupCDT


def node_address(environ=None):
    """The address the other ranks dial to reach this one: CDT_NODE_ADDR when set; 127.0.0.1 when
    every rank is on this node (torchrun's WORLD_SIZE == LOCAL_WORLD_SIZE, or no MASTER_ADDR);
    else this machine's end of the route to the rendezvous endpoint MASTER_ADDR — the interface
    the kernel would send through, as Gloo and NCCL pick theirs by route (a UDP connect: no
    packet leaves)."""
    e = os.environ if environ is None else environ
    if e.get("CDT_NODE_ADDR"):
        return e["CDT_NODE_ADDR"]
    master = e.get("MASTER_ADDR", "")
    one_node = e.get("WORLD_SIZE") is not None and e.get("WORLD_SIZE") == e.get("LOCAL_WORLD_SIZE")
    if not master or one_node:
        return "127.0.0.1"
    try:
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
            s.connect((master, int(e.get("MASTER_PORT") or 29500)))
            return s.getsockname()[0]
    except (OSError, ValueError) as err:
        raise RuntimeError(f"cann_dist: no route from this machine to MASTER_ADDR {master!r} ({err}); "
                           "set CDT_NODE_ADDR to the address the other nodes reach this one at") from err


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
        advertise_host=node_address(),
        shared_memory=os.environ.get("CDT_SHM", "1") != "0",
        encrypt=os.environ.get("CDT_ENCRYPT", "0") == "1",
        allow_insecure=os.environ.get("CDT_ALLOW_INSECURE", "0") == "1",
        inline_max_bytes=_whole_number("CDT_INLINE_MAX_BYTES", 65536, 0, 1 << 30),
        shm_single_copy=_whole_number("CDT_SHM_SINGLE_COPY", 1, 0, 1) == 1,
    )


def _whole_number(name, default, lo, hi):
    """The environment variable `name` as a whole number in [lo, hi], else a ValueError naming
    it and its range (as the CLI's variables, docs/security.md)."""
    text = os.environ.get(name)
    if text is None or text == "":
        return default
    try:
        value = int(text)
    except ValueError:
        value = None
    if value is None or not lo <= value <= hi:
        raise ValueError(f"{name}={text!r}: must be a whole number from {lo} to {hi}")
    return value


def _launcher_store_rendezvous(url, timeout=None, **kwargs):
    """env:// under `cann-dist-train launch` (CDT_STORE_HOSTED=1): the launcher's own
    authenticated store at CDT_STORE_ENDPOINT, which torch's TCPStore cannot speak; connect to it
    with the job secret (MASTER_ADDR:MASTER_PORT is where rank 0 would host torch's TCPStore for a
    script without cann_dist). Elsewhere (torchrun ...): torch's own handler."""
    if os.environ.get("CDT_STORE_HOSTED") != "1":
        yield from _torch_env_rendezvous(url, timeout=timeout, **kwargs) if timeout is not None \
            else _torch_env_rendezvous(url, **kwargs)
        return
    rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    seconds = timeout.total_seconds() if timeout is not None else 1800.0
    host, port = _launcher.store_endpoint()
    store = _C.connect_job_store(host, port,
                                 os.environ.get("CDT_JOB_SECRET", ""), seconds,
                                 os.environ.get("CDT_RDZV_BACKEND", "tcp"))
    yield (_dist.PrefixStore("%s/torch" % os.environ.get("CDT_JOB_ID", "cdt"), store), rank, world)
    raise RuntimeError("cann_dist: env:// cannot re-rendezvous; use cann_dist.elastic for that")


_rdzv = importlib.import_module("torch.distributed.rendezvous")
_torch_env_rendezvous = _rdzv._rendezvous_handlers["env"]
if _torch_env_rendezvous is not _launcher_store_rendezvous:
    _rdzv._rendezvous_handlers["env"] = _launcher_store_rendezvous

if BACKEND.upper() not in _dist.Backend._plugins:
    if "devices" in inspect.signature(_dist.Backend.register_backend).parameters:
        # PyTorch 2.x: the creator makes a c10d Backend, which torch's ProcessGroup holds for CPU
        # tensors (a group of "cdt" never sends a CPU tensor to another backend).
        _dist.Backend.register_backend(BACKEND, _create_process_group, devices=["cpu"])
    else:
        _dist.Backend.register_backend(BACKEND, _create_process_group)  # 1.13: the group itself
