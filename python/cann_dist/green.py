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

try:
    from . import _paths
    _KB = _paths.KNOWLEDGE_BASE
except ImportError:  # pragma: no cover - a package built without CMake
    _KB = "/usr/share/cann-dist-train/knowledge_base"

__all__ = ["CarbonTracker", "knowledge_base"]


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
        if (trace is None) == (region is None):
            raise ValueError("cann_dist.green.CarbonTracker: give trace=PATH or region=NAME")
        if trace is None:
            trace = os.path.join(knowledge_base(), "carbon_traces", f"{region.upper()}_2022.csv")
            if not os.path.exists(trace):
                raise ValueError(f"cann_dist.green.CarbonTracker: no trace for region {region!r} "
                                 f"({trace}); the knowledge base has "
                                 + ", ".join(sorted(f.split('_')[0] for f in os.listdir(
                                     os.path.dirname(trace)) if f.endswith(".csv"))))
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
