"""cann_dist.green: energy and carbon of your training (docs/python.md, "Green").

    from cann_dist.green import CarbonTracker

    with CarbonTracker(region="CISO", output_dir="runs") as tracker:
        train()
    print(tracker.emissions_kg, tracker.energy_kwh)     # runs/emissions.csv has the row

CodeCarbon's EmissionsTracker is the anchor: the same emissions.csv columns and units (duration
s, emissions kg CO2eq, power W, energy kWh), one row appended per run. The meters are the
engine's (RAPL, NVML, npu-smi; the TDP model of knowledge_base/hardware_profiles where no counter
is readable — the report says which), the carbon intensity comes from a real hourly grid trace
(knowledge_base/carbon_traces: nine US balancing authorities, 2022) rather than a yearly average.
"""
import json
import os
import time

from . import _C

# The wheel's own copy (setup.py), else the checkout's the build tree names (_paths.py, written by
# CMake), else the system's.
_KB = os.path.join(os.path.dirname(os.path.abspath(__file__)), "share", "cann-dist-train", "knowledge_base")
if not os.path.isdir(_KB):
    try:
        from . import _paths
        _KB = _paths.KNOWLEDGE_BASE
    except ImportError:  # pragma: no cover - a package built without CMake
        _KB = "/usr/share/cann-dist-train/knowledge_base"

__all__ = ["CarbonTracker", "GreenScheduler", "GreenTrainingCert", "TrainingJob", "knowledge_base"]


def knowledge_base():
    """The knowledge base directory: CDT_KNOWLEDGE_BASE, else this checkout's."""
    return os.environ.get("CDT_KNOWLEDGE_BASE", _KB)


def _unix(when):
    if when is None:
        return -1.0  # the same moment of the year in the trace
    if isinstance(when, (int, float)):
        return float(when)
    from datetime import datetime, timezone
    t = datetime.fromisoformat(when.replace("Z", "+00:00"))
    if t.tzinfo is None:
        t = t.replace(tzinfo=timezone.utc)
    return t.timestamp()


def _trace_path(trace, region, who):
    if (trace is None) == (region is None):
        raise ValueError(f"cann_dist.green.{who}: give trace=PATH or region=NAME")
    if trace is not None:
        return str(trace)
    path = os.path.join(knowledge_base(), "carbon_traces", f"{region.upper()}_2022.csv")
    if not os.path.exists(path):
        have = sorted(f.split("_")[0] for f in os.listdir(os.path.dirname(path)) if f.endswith(".csv"))
        raise ValueError(f"cann_dist.green.{who}: no trace for region {region!r} ({path}); "
                         f"the knowledge base has " + ", ".join(have))
    return path


class CarbonTracker:
    """Meters energy and carbon between start() and stop() (or a `with` block).

    trace       a carbon-intensity trace (CSV or JSON; docs/green.md), or
    region      a balancing authority of the knowledge base (CISO, ERCO, PJM, MISO, NYIS, BPAT,
                AZPS, SOCO, WAAT): its 2022 hourly trace
    trace_start the trace moment the run starts at (ISO 8601 or Unix seconds); default: today's
                date and hour in the trace's year
    time_scale  wall seconds per trace hour (3600 = real time; smaller replays the trace faster)
    output_dir, output_file, save_to_file   where the emissions.csv row goes (CodeCarbon's)
    measure_power_secs   how often the meters are read
    scope       "host" (the machine) or "process" (this process's share of the CPU model)
    """

    def __init__(self, trace=None, region=None, output_dir=".", output_file="emissions.csv",
                 project_name="cann-dist-train", run_id="", trace_start=None, time_scale=3600.0,
                 pue=1.0, measure_power_secs=1.0, save_to_file=True, scope="host",
                 country_iso_code="USA"):
        trace = _trace_path(trace, region, "CarbonTracker")
        if scope not in ("host", "process"):
            raise ValueError("cann_dist.green.CarbonTracker: scope is 'host' or 'process'")
        self.output_path = os.path.join(output_dir, output_file) if save_to_file else ""
        self._tracker = _C.CarbonTracker(
            trace, os.path.join(knowledge_base(), "hardware_profiles", "devices.json"),
            _unix(trace_start), seconds_per_hour=float(time_scale), pue=float(pue),
            interval_s=float(measure_power_secs), project_name=project_name,
            run_id=run_id or time.strftime("%Y%m%dT%H%M%S"), country_iso_code=country_iso_code,
            process_scope=(scope == "process"))
        self.report = None

    @property
    def meter(self):
        """Which meter measured what (measured or modelled)."""
        return self._tracker.meter

    def start(self):
        self._tracker.start()
        return self

    def flush(self):
        """The run so far (green_report.json's keys), without stopping."""
        return json.loads(self._tracker.report())

    def stop(self):
        """Stops, appends the emissions.csv row, and returns the emissions in kg CO2eq (as
        CodeCarbon's stop() does)."""
        if self.output_path:
            os.makedirs(os.path.dirname(os.path.abspath(self.output_path)), exist_ok=True)
        self.report = json.loads(self._tracker.stop(self.output_path))
        return self.emissions_kg

    @property
    def emissions_kg(self):
        return self.report["carbon_kg"] if self.report else None

    @property
    def energy_kwh(self):
        return self.report["energy_kwh"] if self.report else None

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc):
        self.stop()
        return False


def _config_file(name):
    base = os.environ.get("XDG_CONFIG_HOME") or os.path.join(os.path.expanduser("~"), ".config")
    return os.path.join(base, "cann-dist-train", name)


class GreenTrainingCert:
    """Signed carbon reports (`cann-dist-train cert issue|verify`; docs/green.md, "Certificates").

        tracker.stop()
        cert = GreenTrainingCert.issue(tracker, "runs/green_report.json")   # and .cert beside it
        GreenTrainingCert.verify("runs/green_report.json")   # {"ok", "trusted", "public_key", "why"}

    Ed25519 (libsodium) over the report's bytes; the key file is CDT_SIGNING_KEY, else
    ~/.config/cann-dist-train/signing.key (made, mode 0600, on first use); trusted signers are
    ~/.config/cann-dist-train/trusted_keys (one base64 key per line). A self-attested report that
    shows any change made after signing — not a certification by anyone else.
    """

    @staticmethod
    def signing_key():
        return os.environ.get("CDT_SIGNING_KEY", _config_file("signing.key"))

    @staticmethod
    def issue(report, path="green_report.json", key=None):
        """Writes `report` (a stopped CarbonTracker, a report dict, or the path of an existing
        report file) to `path` (unless it is that file) and signs it into `path`.cert. Returns
        the certificate as a dict."""
        key = key or GreenTrainingCert.signing_key()
        if isinstance(report, CarbonTracker):
            if report.report is None:
                raise ValueError("GreenTrainingCert.issue: the tracker has not been stopped")
            report = report.report
        if isinstance(report, dict):
            data = (json.dumps(report, indent=1, sort_keys=True) + "\n").encode()
            os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
            with open(path, "wb") as f:
                f.write(data)
        else:
            path = str(report)
            with open(path, "rb") as f:
                data = f.read()
        os.makedirs(os.path.dirname(os.path.abspath(key)), exist_ok=True)
        _C.ensure_signing_key(key)
        cert = _C.issue_certificate(data, os.path.basename(path), key)
        with open(path + ".cert", "w") as f:
            f.write(cert)
        return json.loads(cert)

    @staticmethod
    def verify(path, certificate=None, trusted_keys=None):
        """Checks `path` against its certificate (`path`.cert unless given) and the signer
        against `trusted_keys` (base64 keys; default: the trusted_keys file)."""
        with open(path, "rb") as f:
            data = f.read()
        with open(certificate or path + ".cert") as f:
            cert = f.read()
        if trusted_keys is None:
            trusted_keys = _C.read_trusted_keys(_config_file("trusted_keys"))
        return _C.verify_certificate(data, cert, list(trusted_keys))


class TrainingJob:
    """A training loop as GreenScheduler runs it, in this process: it calibrates the job (short
    runs on fresh state), then runs it through the plan's stretches, pausing between them with
    the state kept in memory.

        job = TrainingJob(init=make_state, step=train_step, total_steps=600, evaluate=accuracy)

    init() -> a fresh state (model, optimizer ...); step(state, batch_size) -> samples trained on
    (one optimizer step); evaluate(state) -> test accuracy (optional, at the end)."""

    def __init__(self, init, step, total_steps, evaluate=None):
        self.init, self.step, self.total_steps, self.evaluate = init, step, int(total_steps), evaluate
        self.state, self.done = None, 0
        self.runs = []  # what each run did: tag, steps, wall_s

    def run(self, r):
        if r["calibration"]:
            state, first = self.init(), 0
        else:
            if self.state is None or not r["resume"]:
                self.state, self.done = self.init(), 0
            state, first = self.state, self.done
        end = min(self.total_steps, r["stop_after"] or self.total_steps)
        if r["calibration"]:
            end = min(r["stop_after"] or self.total_steps, self.total_steps)
        started = time.time()
        t0 = time.perf_counter()
        samples, step = 0, first
        while step < end:
            samples += self.step(state, r["batch"])
            step += 1
            r["tick"]()
        wall = time.perf_counter() - t0
        if not r["calibration"]:
            self.done = step
        accuracy, eval_s = None, 0.0
        if self.evaluate and not r["calibration"] and step >= self.total_steps:
            te = time.perf_counter()
            accuracy = float(self.evaluate(state))
            eval_s = time.perf_counter() - te
        self.runs.append({"tag": r["tag"], "first_step": first, "steps": step - first, "wall_s": wall})
        return {"first_step": first, "steps": step - first, "total_steps": self.total_steps,
                "samples": float(samples), "wall_s": wall, "eval_s": eval_s,
                "started_unix": started, "test_accuracy": accuracy}


class GreenScheduler:
    """Runs a job carbon-aware, in process (the seed's GreenScheduler; `cann-dist-train green
    --carbon-aware` for Python jobs): calibrates it, plans it on an hourly carbon trace under a
    deadline (and a carbon cap: the batch size follows the seed's rule), runs it through the
    plan's low-carbon stretches and pauses it in between, meters the energy on the trace's clock
    and accounts for it against the carbon-agnostic run. Returns the report (green_report.json's
    keys) and writes emissions.csv and green_report.json under output_dir.

        scheduler = GreenScheduler(region="CISO", deadline_hours=24, time_scale=2)
        report = scheduler.run(TrainingJob(init, step, total_steps=600, evaluate=acc))

    trace / region, trace_start (default: this hour in the trace's year), time_scale (wall
    seconds per trace hour; 3600 = real time), deadline_hours (0: three times the job),
    carbon_cap_kg, batch_size (per step, as the job was given), strategy (suspend-resume, the
    default, or agnostic), pue, calibrate_steps, green_priority (follow an infeasible plan),
    forecast (plan on the forecaster, priced on the trace), replan_hours (revise the plan every
    this many trace hours while paused and after each run; 0 = plan once)."""

    def __init__(self, trace=None, region=None, trace_start=None, time_scale=3600.0,
                 deadline_hours=0, carbon_cap_kg=0.0, batch_size=64, strategy="suspend-resume",
                 pue=1.58, calibrate_steps=30, green_priority=False, forecast=False,
                 replan_hours=0.0, output_dir=".", run_id="", verbose=True):
        c = _C.GreenRunConfig()
        c.trace_path = _trace_path(trace, region, "GreenScheduler")
        c.profiles_path = os.path.join(knowledge_base(), "hardware_profiles", "devices.json")
        c.start_unix = _unix(trace_start)
        c.time_scale = float(time_scale)
        c.deadline_hours = float(deadline_hours)
        c.carbon_cap_kg = float(carbon_cap_kg)
        c.batch = int(batch_size)
        c.strategy = strategy
        c.pue = float(pue)
        c.calibrate_steps = int(calibrate_steps)
        c.green_priority = bool(green_priority)
        c.forecast = bool(forecast)
        c.replan_hours = float(replan_hours)
        c.run_id = run_id or time.strftime("green-%Y%m%dT%H%M%S")
        self.config, self.output_dir, self.verbose = c, output_dir, verbose
        self.lines = []
        self.report = None

    def _say(self, line):
        self.lines.append(line)
        if self.verbose:
            print(line, flush=True)

    def run(self, job):
        os.makedirs(self.output_dir, exist_ok=True)
        text = _C.run_carbon_aware(self.config, job, self._say,
                                   os.path.join(self.output_dir, "emissions.csv"))
        with open(os.path.join(self.output_dir, "green_report.json"), "w") as f:
            f.write(text)
        self.report = json.loads(text)
        return self.report
