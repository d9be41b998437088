"""cann_dist.green.CarbonTracker (python/cann_dist/green.py over src/green/carbon_tracker.cc):
a metered run writes CodeCarbon's emissions.csv row, with energy and carbon that add up."""
import csv
import os
import time

import pytest

cann_dist = pytest.importorskip("cann_dist")
from cann_dist.green import CarbonTracker  # noqa: E402

# CodeCarbon 2.x's EmissionsData fields, in order (mlco2/codecarbon,
# codecarbon/output_methods/emissions_data.py): what its readers and dashboards expect.
CODECARBON_COLUMNS = [
    "timestamp", "project_name", "run_id", "duration", "emissions", "emissions_rate",
    "cpu_power", "gpu_power", "ram_power", "cpu_energy", "gpu_energy", "ram_energy",
    "energy_consumed", "country_name", "country_iso_code", "region", "cloud_provider",
    "cloud_region", "os", "python_version", "codecarbon_version", "cpu_count", "cpu_model",
    "gpu_count", "gpu_model", "longitude", "latitude", "ram_total_size", "tracking_mode",
    "on_cloud", "pue"]


def busy(seconds):
    end = time.time() + seconds
    x = 0
    while time.time() < end:
        x += 1
    return x


def test_a_metered_run_writes_codecarbons_emissions_csv(tmp_path):
    with CarbonTracker(region="CISO", output_dir=str(tmp_path), measure_power_secs=0.2,
                       pue=1.2, project_name="test") as t:
        busy(1.5)
    rows = list(csv.DictReader(open(tmp_path / "emissions.csv")))
    assert list(rows[0].keys()) == CODECARBON_COLUMNS
    (row,) = rows
    assert row["project_name"] == "test" and row["region"] == "CISO"
    assert row["timestamp"].startswith(time.strftime("%Y-", time.gmtime()))  # the wall clock's
    duration = float(row["duration"])
    assert 1.4 <= duration <= 5
    parts = sum(float(row[k]) for k in ("cpu_energy", "gpu_energy", "ram_energy"))
    assert float(row["energy_consumed"]) == pytest.approx(parts * 1.2, rel=1e-6)
    assert float(row["energy_consumed"]) > 0 and float(row["emissions"]) > 0
    assert float(row["emissions_rate"]) == pytest.approx(float(row["emissions"]) / duration, rel=1e-6)
    assert t.emissions_kg == pytest.approx(float(row["emissions"]), rel=1e-6)
    # carbon = energy x the trace's intensity (CISO 2022: between 50 and 500 g/kWh every hour)
    g_per_kwh = 1000 * t.emissions_kg / t.energy_kwh
    assert 50 <= g_per_kwh <= 500


def test_a_second_run_appends_a_row_and_bad_arguments_are_named(tmp_path):
    for _ in range(2):
        t = CarbonTracker(region="ERCO", output_dir=str(tmp_path), measure_power_secs=0.1)
        t.start()
        busy(0.3)
        t.stop()
    assert len(list(csv.DictReader(open(tmp_path / "emissions.csv")))) == 2
    with pytest.raises(ValueError, match="no trace for region 'XX'"):
        CarbonTracker(region="XX")
    with pytest.raises(ValueError, match="trace=PATH or region=NAME"):
        CarbonTracker()
    with pytest.raises(RuntimeError, match="outside the trace"):
        CarbonTracker(region="CISO", trace_start="2031-01-01T00:00:00Z").start()


def test_the_example_meters_a_training_run(tmp_path):
    import json
    import subprocess
    import sys
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    if not os.path.isdir("/usr/share/datasets/fashion-mnist"):
        pytest.skip("no dataset-fashion-mnist")
    p = subprocess.run([sys.executable, os.path.join(root, "examples", "python", "green_tracker.py"),
                        "--steps", "30", "--output-dir", str(tmp_path),
                        "--trace-start", "2022-06-01T12:00:00Z"],
                       capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stderr
    r = json.loads(p.stdout.splitlines()[-1])
    (row,) = list(csv.DictReader(open(tmp_path / "emissions.csv")))
    assert float(row["emissions"]) == pytest.approx(r["emissions_kg"], rel=1e-6)
    assert r["energy_kwh"] > 0 and r["steps"] == 30


def test_a_signed_report_verifies_and_any_change_shows(tmp_path, monkeypatch):
    from cann_dist.green import GreenTrainingCert
    monkeypatch.setenv("CDT_SIGNING_KEY", str(tmp_path / "keys" / "signing.key"))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "config"))  # no trusted_keys there
    t = CarbonTracker(region="PJM", output_dir=str(tmp_path), measure_power_secs=0.1)
    t.start()
    busy(0.3)
    t.stop()
    report = tmp_path / "green_report.json"
    cert = GreenTrainingCert.issue(t, str(report))
    assert os.stat(tmp_path / "keys" / "signing.key").st_mode & 0o077 == 0
    v = GreenTrainingCert.verify(str(report))
    assert v["ok"] and not v["trusted"]  # signed by our key, which nobody listed as trusted
    assert GreenTrainingCert.verify(str(report), trusted_keys=[v["public_key"]])["trusted"]
    assert cert and v["public_key"]
    text = report.read_text()
    report.write_text(text.replace('"region": "PJM"', '"region": "BPAT"'))
    assert not GreenTrainingCert.verify(str(report))["ok"]


def test_the_green_scheduler_runs_a_python_job_through_its_plan(tmp_path):
    import torch
    from cann_dist.green import GreenScheduler, TrainingJob

    def init():
        torch.manual_seed(0)
        m = torch.nn.Linear(50, 4)
        return {"model": m, "opt": torch.optim.SGD(m.parameters(), lr=0.1)}

    def step(s, batch):
        loss = s["model"](torch.randn(batch, 50)).pow(2).mean()
        s["opt"].zero_grad()
        loss.backward()
        s["opt"].step()
        time.sleep(0.01)  # a steady step time, so that the calibration holds
        return batch

    job = TrainingJob(init, step, total_steps=120, evaluate=lambda s: 0.5)
    scheduler = GreenScheduler(region="CISO", trace_start="2022-06-01T00:00:00Z", time_scale=0.2,
                               deadline_hours=24, calibrate_steps=20, output_dir=str(tmp_path),
                               verbose=False)
    report = scheduler.run(job)
    assert job.done == 120
    assert job.runs[0]["tag"].startswith("calibration") and job.runs[0]["steps"] == 20
    trained = [r for r in job.runs if not r["tag"].startswith("calibration")]
    assert sum(r["steps"] for r in trained) == 120
    assert [r["first_step"] for r in trained] == [0] + [sum(r["steps"] for r in trained[:i])
                                                        for i in range(1, len(trained))]
    assert report["energy_kwh"] > 0 and report["carbon_kg"] > 0 and report["baseline_carbon_kg"] > 0
    assert report["final_test_accuracy"] == 0.5
    assert any("calibrating" in l for l in scheduler.lines)
    assert (tmp_path / "green_report.json").exists()
    (row,) = list(csv.DictReader(open(tmp_path / "emissions.csv")))
    assert float(row["emissions"]) == pytest.approx(report["carbon_kg"], rel=1e-6)


def test_the_green_scheduler_revises_its_plan_on_the_newest_forecast(tmp_path):
    import torch
    from cann_dist.green import GreenScheduler, TrainingJob

    def init():
        torch.manual_seed(0)
        m = torch.nn.Linear(20, 2)
        return {"model": m, "opt": torch.optim.SGD(m.parameters(), lr=0.1)}

    def step(s, batch):
        loss = s["model"](torch.randn(batch, 20)).pow(2).mean()
        s["opt"].zero_grad()
        loss.backward()
        s["opt"].step()
        time.sleep(0.01)
        return batch

    job = TrainingJob(init, step, total_steps=120)
    scheduler = GreenScheduler(region="CISO", trace_start="2022-06-01T00:00:00Z", time_scale=0.2,
                               deadline_hours=24, calibrate_steps=20, forecast=True,
                               replan_hours=1, output_dir=str(tmp_path), verbose=False)
    report = scheduler.run(job)
    assert job.done == 120
    assert any("re-planned at" in l for l in scheduler.lines), scheduler.lines
    assert any("the plan was revised" in n for n in report["notes"]), report["notes"]
    with pytest.raises(ValueError, match="--replan-every"):
        GreenScheduler(region="CISO", replan_hours=-1, output_dir=str(tmp_path),
                       verbose=False).run(TrainingJob(init, step, total_steps=10))
