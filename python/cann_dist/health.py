"""cann_dist.health: the seed's HealthMonitor — the engine's failure predictor
(src/elastic/health_monitor.h; docs/elastic.md, "Health") on a Python training loop.

    monitor = HealthMonitor(state=state, memory_limit_bytes=30e9)
    for ...:
        train_step()
        state.commit()
        monitor.step()          # a warning saves a checkpoint at once (state's manager)

Each step it samples the step time (since the last call), this process's resident memory, the
host's TCP retransmissions and the hottest thermal zone where there is one, and the predictor
warns on a slowdown against the worker's own baseline, a memory trend heading for the limit, a
flapping link or heat. Published failure predictors reach 46-85% precision, so a warning buys
insurance — an immediate checkpoint of the last commit — not a migration.
"""
import os
import time

from . import _C

__all__ = ["HealthMonitor"]


class HealthMonitor:
    def __init__(self, state=None, on_warning=None, baseline_samples=20, slow_factor=1.5,
                 slow_patience=5, memory_limit_bytes=0.0, memory_horizon_s=60.0,
                 retrans_per_s=50.0, temperature_limit_c=90.0):
        self.state, self.on_warning = state, on_warning
        self._predictor = _C.FailurePredictor(baseline_samples, slow_factor, slow_patience,
                                              float(memory_limit_bytes), memory_horizon_s,
                                              retrans_per_s, temperature_limit_c)
        self._t0 = time.monotonic()
        self._last = None
        self.warnings = []
        self.checkpoints = []  # steps saved because of a warning

    def step(self, step_time_s=None):
        """One sample after a step; the warning (rule, detail, t) if a rule fired, else None."""
        now = time.monotonic()
        if step_time_s is None:
            step_time_s = now - self._last if self._last is not None else 0.0
        self._last = now
        rss = _C.read_resident_bytes(os.getpid()) or 0.0
        retrans = _C.read_tcp_retrans() or 0.0
        temp = _C.read_max_temperature_c()
        w = self._predictor.observe(now - self._t0, step_time_s, rss, retrans,
                                    -1.0 if temp is None else temp)
        if w is None:
            return None
        self.warnings.append(w)
        s = self.state
        if s is not None and getattr(s, "checkpoint_manager", None) is not None and s._snapshots:
            step, snap = s._snapshots[0]
            s.checkpoint_manager.save(step, snap)
            self.checkpoints.append(step)
        if self.on_warning is not None:
            self.on_warning(w)
        return w
