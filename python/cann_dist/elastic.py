"""cann_dist.elastic: training that survives lost workers in process (docs/python.md, "Elastic").

    import cann_dist
    from cann_dist import elastic

    state = elastic.State(model=model, optimizer=opt, step=0)

    @elastic.run
    def train(state):
        ddp = torch.nn.parallel.DistributedDataParallel(state.model)   # this generation's group
        while state.step < STEPS:
            ... forward, backward, optimizer step ...
            state.step += 1
            state.commit()

    train(state)

Launch with `cann-dist-train launch --elastic --nproc-per-node 4 [--spares 1] -- python3 train.py`.
When a worker dies or hangs, the others' collectives fail (naming it), the engine's elastic driver
re-forms the group without it (or with a spare, or with a worker that comes back) in the same
processes, every member rolls back to the newest step all of them committed, and `train` is called
again in the new group: torch.distributed's default group is the new one, so the model is wrapped
in DDP inside `train`. Anchors: Horovod's `hvd.elastic.run` and `State` (commit / restore / sync),
torchelastic (which restarts every process instead).

Under torchrun, or any launcher without `--elastic`, `run` initialises the group from the
environment (backend "cdt") and calls `train` once: a failure ends the job as it would without
cann_dist, and the launcher's restart resumes from the checkpoint the script keeps
(CheckpointManager).
"""
import copy
import datetime
import functools
import os
import sys
import time

import torch
import torch.distributed as dist

from . import _C
from . import _launcher

__all__ = ["State", "ElasticSampler", "ElasticTrainer", "run", "RegroupInterrupt"]


class RegroupInterrupt(Exception):
    """Raised by State.commit() when workers wait to join: the group ends this generation after the
    committed step and re-forms with them (run() catches it)."""


# The process group of the generation being set up, handed to torch.distributed's creator for
# "cdt" (cann_dist._create_process_group) by init_process_group inside run().
_generation_group = None


def take_generation_group():
    global _generation_group
    pg, _generation_group = _generation_group, None
    return pg


def _clone(obj):
    """A deep copy whose tensors are detached clones (a committed state must not alias the live one)."""
    if isinstance(obj, torch.Tensor):
        return obj.detach().clone()
    if isinstance(obj, dict):
        return type(obj)((k, _clone(v)) for k, v in obj.items())
    if isinstance(obj, (list, tuple)):
        return type(obj)(_clone(v) for v in obj)
    return copy.deepcopy(obj)


class ElasticSampler(torch.utils.data.Sampler):
    """Indices of one epoch, shuffled with (seed, epoch) as every rank agrees, dealt to the current
    group's ranks from the first sample not yet trained on: a change of world size re-deals what is
    left, and nothing is trained on twice or skipped (Horovod's ElasticSampler).

    Call record_batch(n) with the global number of samples of each committed step (every rank's
    batch added up), set_epoch(e) at each epoch. State(sampler=...) commits and syncs it."""

    def __init__(self, dataset_size, shuffle=True, seed=0):
        self.dataset_size = int(dataset_size)
        self.shuffle = shuffle
        self.seed = seed
        self.epoch = 0
        self.processed = 0
        self.rank, self.world = 0, 1
        self._cached = (None, None)  # (epoch, order)

    def set_group(self, rank, world):
        self.rank, self.world = rank, world

    def set_epoch(self, epoch):
        self.epoch, self.processed = epoch, 0

    def record_batch(self, global_samples):
        self.processed += int(global_samples)

    def state_dict(self):
        return {"epoch": self.epoch, "processed": self.processed}

    def load_state_dict(self, d):
        self.epoch, self.processed = int(d["epoch"]), int(d["processed"])

    def _order(self):
        if self._cached[0] != self.epoch:
            if self.shuffle:
                g = torch.Generator()
                g.manual_seed(self.seed + self.epoch)
                order = torch.randperm(self.dataset_size, generator=g)
            else:
                order = torch.arange(self.dataset_size)
            self._cached = (self.epoch, order)
        return self._cached[1]

    def remaining(self):
        return self.dataset_size - self.processed

    def next_batch(self, per_rank):
        """This rank's indices (a tensor) of the next step, `per_rank` each: rank r takes the
        r-th slice of the next world x per_rank samples. Fewer at the end of the epoch."""
        start = self.processed + self.rank * per_rank
        return self._order()[start:min(start + per_rank, self.dataset_size)]

    def __iter__(self):
        left = self._order()[self.processed:]
        return iter(left[self.rank::self.world].tolist())

    def __len__(self):
        left = self.dataset_size - self.processed
        return max(0, (left - self.rank + self.world - 1) // self.world)


class State:
    """What training keeps across failures: the model, the optimizer, an optional ElasticSampler and
    any user fields (State(model=m, optimizer=o, step=0, epoch=0) makes state.step and state.epoch).

    commit()  after each step: copies the state in memory (the last two commits are kept: ranks of
              a broken group differ by at most one step) and, every tenth commit while the group
              is below its target size, asks the group whether workers wait to join.
    restore() rolls back to the newest commit.
    sync()    the group agrees on the newest step every member committed and starts from it: each
              member that holds it rolls back to it, and when a member does not (a spare, a
              worker that rejoins) the lowest rank holding it sends it to everyone.
    run() calls sync() at the start of each generation; `recoveries` lists what each recovery cost.
    """

    def __init__(self, model=None, optimizer=None, sampler=None, checkpoint=None,
                 checkpoint_every=0, hook=None, **fields):
        self.model = model
        self.optimizer = optimizer
        self.sampler = sampler
        # A compression hook (cann_dist.hooks.compress or a GradientCompressor): its state is
        # committed and restored with the model; a rank that takes another's commit keeps its own
        # residuals (zero when it had none) and takes what every rank shares (PowerSGD's Q,
        # random-k's draw count). The same hook registered again in the next generation rebinds
        # itself to the new group.
        self.hook = hook
        # A CheckpointManager: rank 0 saves every `checkpoint_every`-th commit to it (async), a
        # group paused below --min-workers saves its last commit, load_checkpoint() resumes.
        self.checkpoint_manager = checkpoint
        self.checkpoint_every = int(checkpoint_every)
        self._fields = list(fields)
        for k, v in fields.items():
            setattr(self, k, v)
        self.rank, self.world_size, self.generation, self.workers = 0, 1, 0, []
        self.recoveries = []
        self._commits = 0
        self._snapshots = []  # [(commit number, snapshot)], newest first
        self._before_step = None
        self._may_regroup = False
        self._pending = None
        self._step_times = []  # (count, seconds) since the generation began
        self._generation_start = None

    # -- the user's calls -------------------------------------------------------------------
    def commit(self):
        self._commits += 1
        self._snapshots = [(self._commits, self._capture())] + self._snapshots[:1]
        if (self.checkpoint_manager is not None and self.checkpoint_every > 0
                and self._commits % self.checkpoint_every == 0 and self.rank == 0):
            self.checkpoint_manager.save(self._commits, self._snapshots[0][1])
        now = time.time()
        if self._pending is not None:
            self._record_recovery(now)
        if self._generation_start is not None:
            self._step_times.append(now)
        if self._before_step is None:
            return
        regroup = self._before_step(self._commits)
        if self._may_regroup and self._commits % 10 == 0:
            flag = torch.tensor([1 if regroup else 0], dtype=torch.int32)
            dist.all_reduce(flag, op=dist.ReduceOp.MAX)
            if int(flag.item()) > 0:
                raise RegroupInterrupt("workers wait to join: regrouping after step %d" % self._commits)

    def load_checkpoint(self):
        """Resumes from the checkpoint manager's newest checkpoint (after a restart by torchrun,
        or a job started again); the step it resumed at, or None when there was none."""
        if self.checkpoint_manager is None:
            return None
        step, snap = self.checkpoint_manager.load_latest()
        if step is None:
            return None
        self._apply(snap)
        self._commits = step
        self._snapshots = [(step, snap)]
        return step

    def restore(self):
        if self._snapshots:
            self._apply(self._snapshots[0][1])
            self._commits = self._snapshots[0][0]

    def sync(self):
        if not dist.is_initialized() or dist.get_world_size() == 1:
            return
        mine = [c for c, _ in self._snapshots] + [-1, -1]
        held = torch.tensor(mine[:2], dtype=torch.int64)
        everyone = [torch.zeros(2, dtype=torch.int64) for _ in range(dist.get_world_size())]
        dist.all_gather(everyone, held)
        pairs = [tuple(int(v) for v in t.tolist()) for t in everyone]
        newest = [p[0] for p in pairs if p[0] >= 0]
        if not newest:
            return  # a fresh start: DDP's construction makes the parameters equal
        step = min(newest)
        holders = [r for r, p in enumerate(pairs) if step in p]
        if len(holders) == len(pairs):
            self._rollback_to(step)
            return
        src = holders[0]
        box = [self._snapshot_at(step) if dist.get_rank() == src else None]
        dist.broadcast_object_list(box, src=src)
        snap = box[0]
        if dist.get_rank() in holders and "hook" in snap:  # residuals are this rank's own
            snap = dict(snap, hook=self._snapshot_at(step)["hook"])
        self._apply(snap, residuals=dist.get_rank() in holders)
        self._snapshots = [(step, snap)]
        self._commits = step

    # -- committed copies ---------------------------------------------------------------------
    def _capture(self):
        snap = {"fields": {k: _clone(getattr(self, k)) for k in self._fields}}
        if self.model is not None:
            snap["model"] = _clone(self.model.state_dict())
        if self.optimizer is not None:
            snap["optimizer"] = _clone(self.optimizer.state_dict())
        if self.sampler is not None:
            snap["sampler"] = dict(self.sampler.state_dict())
        if self.hook is not None:
            snap["hook"] = self.hook.state_dict()
        return snap

    def _apply(self, snap, residuals=True):
        for k, v in snap["fields"].items():
            setattr(self, k, _clone(v))
        if "model" in snap:
            self.model.load_state_dict(snap["model"])
        if "optimizer" in snap:
            self.optimizer.load_state_dict(snap["optimizer"])
        if "sampler" in snap:
            self.sampler.load_state_dict(snap["sampler"])
        if "hook" in snap and self.hook is not None:
            self.hook.load_state_dict(snap["hook"], residuals)

    def _snapshot_at(self, step):
        for c, s in self._snapshots:
            if c == step:
                return s
        raise RuntimeError("cann_dist.elastic: rank %d holds no commit of step %d" % (self.rank, step))

    def _rollback_to(self, step):
        self._apply(self._snapshot_at(step))
        self._snapshots = [(c, s) for c, s in self._snapshots if c <= step]
        self._commits = step

    # -- what run() tells the state ------------------------------------------------------------
    def _begin(self, info, may_regroup):
        self.generation = info["generation"]
        self.rank, self.world_size = info["rank"], info["world"]
        self.workers = list(info["workers"])
        self._before_step = info["before_step"]
        self._may_regroup = may_regroup
        self._generation_start = time.time()
        self._step_times = []
        if self.sampler is not None and hasattr(self.sampler, "set_group"):
            self.sampler.set_group(self.rank, self.world_size)

    def _end(self):
        self._before_step = None

    def _record_recovery(self, now):
        p, self._pending = self._pending, None
        rec = {
            "cause": p["cause"],
            "lost_workers": list(p["lost"]),
            "failed_step": p["failed_step"],
            "resumed_step": self._commits,
            "world_before": p["world_before"],
            "world_after": self.world_size,
            "detection_s": max(0.0, p["detected_unix"] - p["failure_unix"]),
            "recovery_s": max(0.0, now - p["failure_unix"]),
            "steps_lost": max(0, p["failed_step"] - (self._commits - 1)),
        }
        self.recoveries.append(rec)
        if self.rank == 0:
            print("cann_dist.elastic: generation %d (%d workers) completed step %d, %.3f s after "
                  "the failure (%s)" % (self.generation, self.world_size, self._commits,
                                        rec["recovery_s"], rec["cause"].splitlines()[0]),
                  file=sys.stderr, flush=True)

    def _mean_step_s(self):
        t = self._step_times
        if len(t) < 2:
            return 0.0
        return (t[-1] - t[0]) / (len(t) - 1)


class _Driven:
    """What the engine's driver calls (src/python/elastic_run.h)."""

    regroup_exception = RegroupInterrupt

    def __init__(self, state, fn, args, kwargs, config):
        self.state, self.fn, self.args, self.kwargs, self.config = state, fn, args, kwargs, config
        self.result = None

    def train(self, info):
        global _generation_group
        state = self.state
        target = max(self.config.target_world, self.config.world_size)
        state._begin(info, may_regroup=info["world"] < target)
        _generation_group = info["process_group"]
        store = dist.PrefixStore("%s/torch/g%d" % (self.config.job_id, info["generation"]),
                                 info["store"])
        try:
            dist.init_process_group("cdt", store=store, rank=info["rank"],
                                    world_size=info["world"],
                                    timeout=datetime.timedelta(seconds=self.config.timeout_s))
            state.sync()
            self.result = self.fn(state, *self.args, **self.kwargs)
            return 0
        finally:
            _generation_group = None
            state._end()
            if dist.is_initialized():
                dist.destroy_process_group()

    def restore(self, failure):
        if self.state._pending is None:
            self.state._pending = dict(failure)
        elif not self.state._pending["lost"] and failure["lost"]:
            self.state._pending["lost"] = list(failure["lost"])

    def forget(self):
        self.state._snapshots = []

    def checkpoint(self):
        manager = getattr(self.state, "checkpoint_manager", None)
        if manager is None or not self.state._snapshots:
            return ""
        return manager.save_snapshot(self.state._snapshots[0][0], self.state._snapshots[0][1])

    def current_step(self):
        return self.state._commits

    def mean_step_s(self):
        return self.state._mean_step_s()


def _config_from_environment():
    e = os.environ
    c = _C.ElasticRunConfig()
    c.job_id = e.get("CDT_JOB_ID", "cdt")
    c.worker_id = int(e.get("RANK", "0"))
    c.world_size = int(e.get("WORLD_SIZE", "1"))
    c.target_world = int(e.get("CDT_TARGET_WORLD", "0"))
    c.min_workers = int(e.get("CDT_MIN_WORKERS", "1"))
    c.spare = e.get("CDT_SPARE") == "1"
    c.joiner = e.get("CDT_JOINER") == "1"
    c.node_rank = int(e.get("GROUP_RANK", e.get("CDT_NODE_RANK", "0")))
    c.local_rank = int(e.get("LOCAL_RANK", "0"))
    c.rdzv_backend = e.get("CDT_RDZV_BACKEND", "tcp")
    c.master_addr, c.master_port = _launcher.store_endpoint(e)  # the launcher's store
    c.secret = e.get("CDT_JOB_SECRET", "")
    c.node_addr = e.get("CDT_NODE_ADDR", "127.0.0.1")
    c.encrypt = e.get("CDT_ENCRYPT", "0") == "1"
    c.allow_insecure = e.get("CDT_ALLOW_INSECURE", "0") == "1"
    c.timeout_s = float(e.get("CDT_TIMEOUT", "30"))
    c.last_call_s = float(e.get("CDT_RDZV_LAST_CALL", "0.5"))
    c.pause_timeout_s = float(e.get("CDT_PAUSE_TIMEOUT", "3600"))
    c.inject = e.get("CDT_INJECT", "")
    c.log_level = e.get("CDT_LOG_LEVEL", "info")
    # The engine's variables, as the "cdt" backend reads them (cann_dist/__init__.py).
    from . import _whole_number
    c.shared_memory = e.get("CDT_SHM", "1") != "0"
    c.shm_single_copy = _whole_number("CDT_SHM_SINGLE_COPY", 1, 0, 1) == 1
    c.inline_max_bytes = _whole_number("CDT_INLINE_MAX_BYTES", 65536, 0, 1 << 30)
    return c


def run(fn):
    """Decorator: fn(state, *args, **kwargs) runs in each generation of the elastic group until it
    returns (its value is run's). See the module's docstring."""

    @functools.wraps(fn)
    def wrapper(state, *args, **kwargs):
        if not isinstance(state, State):
            raise TypeError("cann_dist.elastic.run: the first argument must be a cann_dist.elastic.State")
        if os.environ.get("CDT_ELASTIC") != "1":
            if not dist.is_initialized():
                dist.init_process_group(os.environ.get("CDT_BACKEND", "cdt"))
            state._begin({"generation": 0, "rank": dist.get_rank(), "world": dist.get_world_size(),
                          "workers": list(range(dist.get_world_size())), "before_step": None},
                         may_regroup=False)
            return fn(state, *args, **kwargs)
        driven = _Driven(state, fn, args, kwargs, _config_from_environment())
        _C.run_elastic(driven.config, driven)
        return driven.result

    return wrapper


class ElasticTrainer:
    """The seed's name for elastic.run: ElasticTrainer(train_fn, state).run(*args) is
    elastic.run(train_fn)(state, *args); `recoveries` lists what each recovery cost."""

    def __init__(self, train_fn, state):
        if not isinstance(state, State):
            raise TypeError("ElasticTrainer: state must be a cann_dist.elastic.State")
        self.train_fn, self.state = train_fn, state

    def run(self, *args, **kwargs):
        return run(self.train_fn)(self.state, *args, **kwargs)

    @property
    def recoveries(self):
        return self.state.recoveries
