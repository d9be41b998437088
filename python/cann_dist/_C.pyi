# Written by tools/gen-stubs (pybind11-stubgen) from the built module; do not edit by hand.
"""
cann-dist-train's engine for torch.distributed (the "cdt" backend)
"""
from __future__ import annotations
import datetime
import torch
import torch.distributed.distributed_c10d
import typing
__all__: list[str] = ['CarbonTracker', 'CheckpointWriter', 'CompressionHook', 'ElasticRunConfig', 'FailurePredictor', 'GreenRunConfig', 'ProcessGroupCDT', 'Topology', 'connect_job_store', 'ensure_signing_key', 'issue_certificate', 'load_newest_checkpoint', 'read_max_temperature_c', 'read_resident_bytes', 'read_tcp_retrans', 'read_trusted_keys', 'run_carbon_aware', 'run_elastic', 'scan_topology', 'verify_certificate']
class ProcessGroupCDT(torch.distributed.distributed_c10d.ProcessGroup):
    def __init__(self, store: torch.distributed.distributed_c10d.Store, rank: int, size: int, timeout: datetime.timedelta, secret: str = '', job_id: str = 'cdt', advertise_host: str = '127.0.0.1', shared_memory: bool = True, encrypt: bool = False, allow_insecure: bool = False, inline_max_bytes: int = 65536, shm_single_copy: bool = True) -> None:
        """
        Forms the group through `store` (every rank at once); torch.distributed.init_process_group("cdt") calls this.
        """
class CheckpointWriter:
    """
    The engine's checkpoint writer: asynchronous, compressed, incremental, checksummed (cann_dist.checkpoint.CheckpointManager wraps it; docs/checkpoint-format.md).
    """
    def __init__(self, dir: str, codec: str = 'lz4', incremental: bool = True, full_every: int = 10, keep: int = 2, quantize: str = 'none') -> None:
        ...
    def blocked_seconds(self) -> float:
        ...
    def flush(self) -> None:
        ...
    def records(self) -> list:
        ...
    def submit(self, step: int, state: bytes, float_spans: list[tuple[int, int]] = []) -> None:
        """
        Queues the state and returns (waits first for a write still in flight).
        """
class FailurePredictor:
    """
    The engine's failure predictor (elastic/health_monitor.h); cann_dist.HealthMonitor feeds it.
    """
    def __init__(self, baseline_samples: int = 20, slow_factor: float = 1.5, slow_patience: int = 5, memory_limit_bytes: float = 0.0, memory_horizon_s: float = 60.0, retrans_per_s: float = 50.0, temperature_limit_c: float = 90.0) -> None:
        ...
    def observe(self, t: float, step_time_s: float, rss_bytes: float, tcp_retrans: float, temperature_c: float) -> typing.Any:
        ...
class CompressionHook:
    """
    The engine's compressors with error feedback for DDP (cann_dist.hooks.compress).
    """
    def __init__(self, process_group: torch.distributed.distributed_c10d.ProcessGroup, method: str, ratio: float = 0.0, powersgd_rank: int = 2, seed: int = 1, error_feedback: bool = True, values: str = 'fp32', interval: int = 50, high_rank: int = 2, low_rank: int = 4, min_exposed: float = 0.05) -> None:
        ...
    def decisions(self) -> list:
        """
        Adaptive: every decision so far (from_step, phase, reason, per bucket).
        """
    def reduce(self, bucket: int, buffer: torch.Tensor, shapes: list[tuple[int, int]], done: typing.Callable) -> None:
        """
        Reduces the bucket in place to the ranks' mean, then calls done(None) or done(error message) from the engine's thread.
        """
    def set_state(self, state: dict[int, list[float]], residuals: bool = True) -> str:
        """
        Restores State()'s result (residuals=False: all but the error-feedback residuals, which start from zero); returns what could not be used, in words ("": all).
        """
    def set_state_tensors(self, state: dict[int, torch.Tensor], residuals: bool = True) -> str:
        """
        set_state() from state_tensors().
        """
    def state(self) -> dict[int, list[float]]:
        """
        Every bucket's compressor state (error-feedback residuals) by bucket index.
        """
    def state_tensors(self) -> dict[int, torch.Tensor]:
        """
        state() as float32 tensors (a copy; cheap to commit every step).
        """
class ElasticRunConfig:
    """
    What the launcher's environment says (cann_dist.elastic reads it).
    """
    allow_insecure: bool
    encrypt: bool
    inject: str
    inline_max_bytes: int
    job_id: str
    joiner: bool
    last_call_s: float
    local_rank: int
    log_level: str
    master_addr: str
    master_port: int
    min_workers: int
    node_addr: str
    node_rank: int
    pause_timeout_s: float
    rdzv_backend: str
    secret: str
    shared_memory: bool
    shm_single_copy: bool
    spare: bool
    target_world: int
    timeout_s: float
    worker_id: int
    world_size: int
    def __init__(self) -> None:
        ...
class Topology:
    """
    A discovered topology (cann_dist.topology).
    """
    def advise(self, gradient_bytes: float, compute_ms: float = 0.0) -> str:
        """
        The compression advice for a float32 gradient of this many bytes per step.
        """
    def json(self) -> str:
        ...
class CarbonTracker:
    """
    Energy and carbon of what runs between start() and stop() (cann_dist.green.CarbonTracker wraps it).
    """
    def __init__(self, trace_path: str, profiles_path: str, trace_start_unix: float, seconds_per_hour: float = 3600.0, pue: float = 1.0, interval_s: float = 1.0, project_name: str = 'cann-dist-train', run_id: str = '', country_iso_code: str = '', process_scope: bool = False) -> None:
        ...
    def report(self) -> str:
        """
        The run so far, as green_report.json's JSON.
        """
    def start(self) -> None:
        ...
    def stop(self, emissions_csv: str = '') -> str:
        """
        Stops; appends CodeCarbon's row to `emissions_csv` (if given); the report's JSON.
        """
    @property
    def meter(self) -> str:
        ...
class GreenRunConfig:
    """
    cann_dist.green.GreenScheduler's settings.
    """
    batch: int
    calibrate_steps: int
    carbon_cap_kg: float
    deadline_hours: float
    forecast: bool
    green_priority: bool
    max_batch: int
    min_batch: int
    profiles_path: str
    pue: float
    replan_hours: float
    run_id: str
    start_unix: float
    strategy: str
    time_scale: float
    trace_path: str
    def __init__(self) -> None:
        ...
def connect_job_store(host: str, port: int, secret: str, timeout_s: float, backend: str = 'tcp') -> torch.distributed.distributed_c10d.Store:
    """
    The store `cann-dist-train launch` hosts (authenticated by the job secret), as a torch Store.
    """
def ensure_signing_key(path: str) -> str:
    """
    Creates the Ed25519 key file (0600) unless it exists; the base64 public key.
    """
def issue_certificate(report_bytes: bytes, report_name: str, key_path: str) -> str:
    """
    The certificate (JSON) signing these bytes with the key file.
    """
def load_newest_checkpoint(dir: str) -> typing.Any:
    """
    (step, state bytes, path, warnings) of the newest checkpoint that verifies; (None, None, None, warnings) when there is none.
    """
def read_max_temperature_c() -> float | None:
    ...
def read_resident_bytes(pid: int) -> float | None:
    ...
def read_tcp_retrans() -> float | None:
    ...
def read_trusted_keys(path: str) -> list[str]:
    ...
def run_carbon_aware(config: GreenRunConfig, job: typing.Any, say: typing.Any, emissions_csv: str = '') -> str:
    """
    Calibrates, plans and runs `job` carbon-aware; appends CodeCarbon's row to `emissions_csv` (if given); the report's JSON.
    """
def run_elastic(config: ElasticRunConfig, driven: typing.Any) -> int:
    """
    Runs the elastic driver over `driven` (cann_dist.elastic._Driven) until the job ends.
    """
def scan_topology(process_group: torch.distributed.distributed_c10d.ProcessGroup, cache_dir: str = '', rescan: bool = False, install: bool = True) -> Topology:
    """
    Discovers the topology on every rank of the group (a collective); `install`: the group's allreduces follow its plan from now on.
    """
def verify_certificate(report_bytes: bytes, certificate_json: str, trusted_public_keys: list[str]) -> dict:
    ...
__version__: str = '0.1.0'
